"""Which figure of a benchmark's results is what, and its form in reference units.

``kind`` is the one rule saying which figures are rates, CPU per operation, latencies or memory
(read from the keys' names); ``scaled_path`` / ``scaled_of`` pair a figure with its scaled form, kept
beside it; ``scale`` adds those forms to a suite's results by a ``Scale`` (bench/reference.py measures
it); ``at_basis`` and ``cpu_per_op`` put them in a summary line. bench/compare.py reads results by the
same rule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

UNIT = "ref-ms"  # the python loop's CPU time; a CPU figure in ms over it is in "ref"
BASIS_PUTS_PER_S = 11000.0  # the "a day when raw etcd makes ~11k puts/s"
AT_BASIS = "_at_11k"  # the suffix of a rate scaled to BASIS_PUTS_PER_S

Kind = Literal["rate", "cpu", "latency", "memory"]
_NOT_FIGURES = {"machine", "targets", "reference", "profile"}  # settings, the reference itself, profiled reruns


@dataclass(frozen=True)
class Scale:
    """What a suite's figures are scaled by: the python loop's ref-ms and raw etcd's puts/s (64 concurrent)."""
    ref_ms: float
    etcd_puts_per_s: float

    def cpu_ref(self, cpu_ms: float) -> float:
        """CPU ms of work in ref units: how many python loops' worth of CPU it is."""
        return cpu_ms / self.ref_ms

    def rate_at_basis(self, rate: float) -> float:
        """A rate measured today, on a day when raw etcd makes ``BASIS_PUTS_PER_S``."""
        return rate * BASIS_PUTS_PER_S / self.etcd_puts_per_s


def kind(path: tuple[str, ...]) -> Kind | None:
    """What the figure at ``path`` (keys from the top of a suite's JSON) measures; None for a count,
    a setting, a ratio of two figures of the run, a profiled rerun, or the scaled form of another figure:

    - CPU per operation: under a ``cpu_ms_per_*`` key, or named ``*_cpu_ms`` / ``*_cpu_us_per_event``;
    - a rate: named ``*per_s`` (``target_*`` is a setting);
    - a latency: named ``*_ms``;
    - memory: named ``rss_*``, or under such a key."""
    leaf = path[-1]
    if any(p in _NOT_FIGURES or p.startswith("target") for p in path) or scaled_of(path) is not None:
        return None
    if any(p.startswith("cpu_ms_per_") for p in path) or leaf.endswith(("_cpu_ms", "_cpu_us_per_event")):
        return "cpu"
    if leaf.endswith("per_s"):
        return "rate"
    if leaf.endswith("_ms"):
        return "latency"
    if any(p.startswith("rss_") for p in path):
        return "memory"
    return None


# How a figure's key reads, and how its scaled form's: a prefix of any key on the path (CPU by
# component, a CPU total), else a suffix of the last key.
_PATH_PREFIX = ("cpu_ms_per_", "cpu_ref_per_")
_LEAF_SUFFIXES = (("_cpu_ms", "_cpu_ref"), ("_cpu_us_per_event", "_cpu_ref_per_event"), ("per_s", "per_s" + AT_BASIS))


def _swap(path: tuple[str, ...], side: int) -> tuple[str, ...] | None:
    """``path`` read as a figure (``side`` 0) or as a scaled form (1): the path of the other; None if neither."""
    if any(p.startswith(_PATH_PREFIX[side]) for p in path):
        return tuple(p.replace(_PATH_PREFIX[side], _PATH_PREFIX[1 - side], 1) for p in path)
    leaf = path[-1]
    for pair in _LEAF_SUFFIXES:
        if leaf.endswith(pair[side]) and "etcd_puts" not in leaf:  # etcd itself is what rates are scaled by
            return (*path[:-1], leaf.removesuffix(pair[side]) + pair[1 - side])
    return None


def scaled_path(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """Where the scaled form of the rate or CPU figure at ``path`` is kept; None when it has none."""
    return _swap(path, 0)


def scaled_of(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The figure whose scaled form is at ``path``; None when ``path`` is no scaled form."""
    return _swap(path, 1)


def number(value: object) -> bool:
    """A figure's value: an int or a float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def scale(result: dict[str, Any], by: Scale) -> None:
    """Put beside every rate and CPU figure of a suite's ``result`` its scaled form (``scaled_path``):
    CPU in ref units, rates at ``BASIS_PUTS_PER_S``."""
    def walk(node: dict[str, Any], path: tuple[str, ...]) -> None:
        for key, value in list(node.items()):
            here = (*path, key)
            if isinstance(value, dict):
                walk(value, here)
                continue
            what = kind(here)
            to = scaled_path(here)
            if not number(value) or what not in ("rate", "cpu") or to is None:
                continue
            if here[-1].endswith("_cpu_us_per_event"):
                scaled = round(by.cpu_ref(value / 1000), 5)
            elif what == "cpu":
                scaled = round(by.cpu_ref(value), 3)
            else:
                scaled = round(by.rate_at_basis(value), 1)
            _put(result, to, scaled)
    walk(result, ())


def _put(tree: dict[str, Any], path: tuple[str, ...], value: float) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def at_basis(node: dict[str, Any], key: str, unit: str) -> str:
    """``node[key]``'s rate at 11k etcd puts/s, for a summary line ("" when it was not scaled)."""
    scaled = node.get(key + AT_BASIS)
    return f"{scaled:.1f} {unit} at {BASIS_PUTS_PER_S / 1000:.0f}k etcd puts/s" if scaled is not None else ""


def cpu_per_op(node: dict[str, Any], key: str, least: float = 0.1) -> str:
    """The CPU ms per operation of each component in ``node[key]`` (a ``cpu_ms_per_*_by_component``),
    busiest first, each with its ref-unit form where the suite was scaled, then their total."""
    refs = node.get(key.replace("cpu_ms_per_", "cpu_ref_per_", 1), {})
    parts = [f"{k} {v:.1f}" + (f" ({refs[k]:.2f} ref)" if k in refs else "")
             for k, v in sorted(node[key].items(), key=lambda kv: -kv[1]) if v >= least]
    total_key = key.removesuffix("_by_component") + "_total"
    if total_key in node:
        ref_total = node.get(total_key.replace("cpu_ms_per_", "cpu_ref_per_", 1))
        parts.append(f"total {node[total_key]:.1f} ms" + (f" = {ref_total:.2f} ref" if ref_total is not None else ""))
    return ", ".join(parts)
