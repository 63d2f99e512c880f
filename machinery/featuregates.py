"""Feature gates (``--feature-gates=A=true,B=false``), versioned as Kubernetes' are (KEP-4330).

Each gate kplane reads carries its history: the release it came in at, and each change of stage
or default since, as Kubernetes' feature gate table has it (``KNOWN_GATES``). A component built
at one release (machinery/version.py) behaves as its ``--emulated-version``: every gate defaults
as it did at that release, and setting one that release did not have, or one locked to its
default, is refused with Kubernetes' error. Code asks ``gates.enabled("SchedulerPreQueueingHints")``;
a gate not yet introduced at the emulated release is off. The state is exported as
``kubernetes_feature_enabled{name,stage}``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from prometheus_client import Gauge

from machinery.logging import get_logger
from machinery.version import BINARY, Version, VersionError, emulated

log = get_logger()


class Stage(enum.Enum):
    """A gate's maturity at a release (component-base's prerelease). GA's label value is empty,
    as Kubernetes exports it."""

    PRE_ALPHA = "PRE-ALPHA"  # not yet introduced at that release
    ALPHA = "ALPHA"
    BETA = "BETA"
    GA = ""
    DEPRECATED = "DEPRECATED"


@dataclass(frozen=True)
class Spec:
    """From ``version`` on, until the next Spec: the gate's default, stage, and whether it may be set
    otherwise (Kubernetes' FeatureSpec)."""

    version: Version
    default: bool
    stage: Stage
    locked: bool = False


def _v(text: str) -> Version:
    return Version.parse(text)


_A, _B, _GA = Stage.ALPHA, Stage.BETA, Stage.GA

# Each gate's history, from Kubernetes' feature gate table (pkg/features/kube_features.go), and for
# KEP-6132 and KEP-5836 from the KEPs (docs/sources.md).
KNOWN_GATES: dict[str, tuple[Spec, ...]] = {
    # KEP-1287 in-place resize.
    "InPlacePodVerticalScaling": (Spec(_v("1.27"), False, _A), Spec(_v("1.33"), True, _B),
                                  Spec(_v("1.35"), True, _GA, locked=True)),
    # Restartable init containers (sidecars).
    "SidecarContainers": (Spec(_v("1.28"), False, _A), Spec(_v("1.29"), True, _B),
                          Spec(_v("1.33"), True, _GA, locked=True)),
    # Scheduling gates.
    "PodSchedulingReadiness": (Spec(_v("1.26"), False, _A), Spec(_v("1.27"), True, _B),
                               Spec(_v("1.30"), True, _GA, locked=True)),
    # QueueingHints.
    "SchedulerQueueingHints": (Spec(_v("1.28"), False, _B), Spec(_v("1.32"), True, _B),
                               Spec(_v("1.34"), True, _GA, locked=True)),
    # KEP-6132 PreQueueingHint: beta, on by default, from v1.37 (the KEP's milestones).
    "SchedulerPreQueueingHints": (Spec(_v("1.37"), True, _B),),
    # KEP-4832 asynchronous preemption: victims are evicted outside the scheduling cycle.
    "SchedulerAsyncPreemption": (Spec(_v("1.32"), False, _A), Spec(_v("1.33"), True, _B)),
    # KEP-5229: the scheduler's API calls (pod status after a failed attempt) off the cycle.
    "SchedulerAsyncAPICalls": (Spec(_v("1.34"), False, _B),),
    # KEP-6030 dynamic resize of memory-backed volumes (an emptyDir's sizeLimit): alpha in v1.37.
    "InPlacePodVerticalScalingMemoryBackedVolumes": (Spec(_v("1.37"), False, _A),),
    # KEP-5836 scheduler preemption for in-place pod resize: alpha in v1.37.
    "SchedulerPreemptionForPodResize": (Spec(_v("1.37"), False, _A),),
    # Structured DRA.
    "DynamicResourceAllocation": (Spec(_v("1.26"), False, _A), Spec(_v("1.32"), False, _B),
                                  Spec(_v("1.34"), True, _GA), Spec(_v("1.35"), True, _GA, locked=True)),
    # KEP-5307 container restart rules: a container's own restartPolicy and restartPolicyRules.
    "ContainerRestartRules": (Spec(_v("1.34"), False, _A), Spec(_v("1.35"), True, _B)),
    # KEP-3386 Evented PLEG: the kubelet learns container changes from the runtime's event stream.
    "EventedPLEG": (Spec(_v("1.26"), False, _A),),
    # Pod-level resources (spec.resources).
    "PodLevelResources": (Spec(_v("1.32"), False, _A), Spec(_v("1.34"), True, _B)),
}

# Other names of a gate, accepted by --feature-gates: the same feature under the name upstream
# Kubernetes shipped it with (1.37 alpha) as well as the name KEP-5836 gives it.
ALIASES: dict[str, str] = {
    "InPlacePodVerticalScalingSchedulerPreemption": "SchedulerPreemptionForPodResize",
}

_NOT_YET = Spec(Version(0, 0), False, Stage.PRE_ALPHA)

_ENABLED = Gauge("kubernetes_feature_enabled", "This metric records the data about the stage and enablement "
                 "of a k8s feature.", ["name", "stage"])


class FeatureGateError(ValueError):
    """An unknown gate, one that may not be set at the emulated release, or a malformed value."""


def spec_at(name: str, version: Version) -> Spec:
    """The gate's Spec at ``version``: the last one introduced at or before it; PRE-ALPHA (off)
    before the first (Kubernetes' featureSpecAtEmulationVersion)."""
    current = _NOT_YET
    for spec in KNOWN_GATES[name]:
        if spec.version <= version:
            current = spec
    return current


def introduced(name: str) -> Version:
    """The release a gate came in at: what a component of that release or later knows of the
    feature (the scheduler's KEP-5836 fallback reads a kubelet's release against it)."""
    return KNOWN_GATES[canonical_name(name)][0].version


def parse_overrides(text: str | None) -> dict[str, bool]:
    """``A=true,B=false`` (Kubernetes' --feature-gates syntax) as ``{name: value}``, the names as
    given (aliases not resolved, gates not checked: ``FeatureGates`` does that)."""
    overrides: dict[str, bool] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, eq, value = item.partition("=")
        if not eq or value.strip().lower() not in ("true", "false"):
            raise FeatureGateError(f"invalid value of {item!r}: must be NAME=true or NAME=false")
        overrides[name.strip()] = value.strip().lower() == "true"
    return overrides


def canonical_name(name: str) -> str:
    """The gate's current name for an old one (``ALIASES``), else ``name``."""
    return ALIASES.get(name, name)


class FeatureGates:
    """The gates of one component at its emulated release, with its ``--feature-gates`` applied."""

    def __init__(self, overrides: dict[str, bool] | None = None, emulated_version: Version = BINARY):
        self.emulated_version = emulated_version
        self._specs = {name: spec_at(name, emulated_version) for name in KNOWN_GATES}
        self._state = {name: spec.default for name, spec in self._specs.items()}
        errors: list[str] = []
        given: dict[str, tuple[str, bool]] = {}  # canonical name -> (name used, value)
        for name, value in (overrides or {}).items():
            canonical = canonical_name(name)
            if canonical not in KNOWN_GATES:
                raise FeatureGateError(f"unrecognized feature gate: {name}")
            earlier = given.get(canonical)
            if earlier is not None and earlier[1] != value:
                raise FeatureGateError(f"{earlier[0]}={str(earlier[1]).lower()} and {name}={str(value).lower()} "
                                       f"set the same gate to different values")
            given[canonical] = (name, value)
            spec = self._specs[canonical]
            if spec.locked and spec.default != value:
                errors.append(f"cannot set feature gate {name} to {str(value).lower()}, feature is locked to "
                              f"{str(spec.default).lower()}")
                continue
            if spec.stage is Stage.PRE_ALPHA:
                errors.append(f"cannot set feature gate {name} to {str(value).lower()}, feature is PreAlpha at "
                              f"emulated version {emulated_version}, min compatibility version "
                              f"{emulated_version.subtract_minor(1)}")
                continue
            if spec.stage in (Stage.GA, Stage.DEPRECATED):
                log.warning("feature_gate_set", message=f"Setting {'GA' if spec.stage is Stage.GA else 'deprecated'} "
                            f"feature gate {name}={str(value).lower()}. It will be removed in a future release.")
            self._state[canonical] = value
        if errors:  # all of them, as Kubernetes' aggregate error prints them
            raise FeatureGateError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")

    @classmethod
    def parse(cls, text: str | None, emulated_version: Version = BINARY) -> "FeatureGates":
        """Parse ``A=true,B=false`` (Kubernetes' --feature-gates syntax) at ``emulated_version``."""
        return cls(parse_overrides(text), emulated_version)

    @classmethod
    def from_flags(cls, feature_gates: str, emulated_version: str) -> "FeatureGates":
        """A component's ``--feature-gates`` at its ``--emulated-version``; FeatureGateError says
        which flag is wrong, in one line."""
        try:
            version = emulated(emulated_version)
        except VersionError as exc:
            raise FeatureGateError(f"invalid --emulated-version: {exc}") from None
        try:
            return cls.parse(feature_gates, version)
        except FeatureGateError as exc:
            raise FeatureGateError(f"invalid --feature-gates: {exc}") from None

    def enabled(self, name: str) -> bool:
        try:
            return self._state[canonical_name(name)]
        except KeyError:
            raise FeatureGateError(f"unrecognized feature gate: {name}") from None

    def stage(self, name: str) -> Stage:
        """The gate's stage at this component's emulated release."""
        return self._specs[canonical_name(name)].stage

    def export(self) -> None:
        """``kubernetes_feature_enabled``: every gate the emulated release has (a gate not yet
        introduced there is not listed, as Kubernetes' GetAll leaves it out)."""
        for name, on in self._state.items():
            stage = self._specs[name].stage
            if stage is not Stage.PRE_ALPHA:
                _ENABLED.labels(name=name, stage=stage.value).set(1 if on else 0)

    def __str__(self) -> str:
        return ",".join(f"{n}={'true' if v else 'false'}" for n, v in sorted(self._state.items()))
