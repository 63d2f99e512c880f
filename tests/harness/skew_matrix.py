"""The version skew matrix (docs/version-skew.md): every apiserver release of 1.35, 1.36, 1.37 with
every scheduler and kubelet release the version skew policy allows beside it, and what each cell
does with KEP-1287's flow (a resize that fits) and KEP-5836's single victim (a resize that fits
only once a lower-priority pod goes).

``expected`` derives each cell's outcome from the feature gate tables alone (what each component's
release has, machinery/featuregates.py) — the model the docs' table is checked against
(tests/unit/test_version_skew_doc.py) and the real clusters are checked against
(tests/scenarios/test_version_skew_matrix.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from machinery.featuregates import FeatureGates, introduced
from machinery.version import FLOOR, MAX_MINORS_OLDER, Version

APISERVERS = (Version(1, 35), Version(1, 36), Version(1, 37))
PREEMPTION_GATE = "SchedulerPreemptionForPodResize"

RESIZED, REFUSED, DEFERRED, PREEMPTED = "resized", "refused", "deferred forever", "preempted"


class Cell(NamedTuple):
    apiserver: Version
    scheduler: Version
    kubelet: Version


@dataclass(frozen=True)
class Outcome:
    flow: str  # KEP-1287: a resize that fits the node: resized, or refused
    single_victim: str  # KEP-5836: preempted, deferred forever, or refused
    why: str


def _allowed(apiserver: Version, component: str) -> list[Version]:
    oldest = max(apiserver.subtract_minor(MAX_MINORS_OLDER[component]), FLOOR)
    return [Version(1, m) for m in range(oldest.minor, apiserver.minor + 1)]


def cells() -> list[Cell]:
    """Every cell, in the docs' order: apiserver, then scheduler, then kubelet, oldest first."""
    return [Cell(a, s, k) for a in APISERVERS for s in _allowed(a, "kube-scheduler")
            for k in _allowed(a, "kubelet")]


def gates_for(release: Version) -> str:
    """The --feature-gates a component at ``release`` runs with in the matrix: KEP-5836's alpha gate
    on where the release has it (an operator trying the feature), nothing otherwise."""
    return f"{PREEMPTION_GATE}=true" if release >= introduced(PREEMPTION_GATE) else ""


def _enabled(release: Version, gate: str) -> bool:
    return FeatureGates.parse(gates_for(release), release).enabled(gate)


def expected(cell: Cell) -> Outcome:
    """What the cell does, from its components' gates."""
    if not _enabled(cell.kubelet, "InPlacePodVerticalScaling"):
        return Outcome(REFUSED, REFUSED, f"a {cell.kubelet} kubelet has InPlacePodVerticalScaling off (alpha): it "
                       "reports no status resources, so the apiserver refuses resizes of its pods")
    if not _enabled(cell.scheduler, PREEMPTION_GATE):
        return Outcome(RESIZED, DEFERRED, f"a {cell.scheduler} scheduler has no {PREEMPTION_GATE} (it came in "
                       f"at {introduced(PREEMPTION_GATE)}): the kubelet defers the resize and nothing makes room")
    return Outcome(RESIZED, PREEMPTED, f"the {cell.scheduler} scheduler preempts for the deferred resize; the "
                   f"{cell.kubelet} kubelet defers it and retries once the victim is gone")
