"""From observations to decisions: which thresholds are met, which node conditions hold, and which
thresholds may drive evictions now — Kubernetes' eviction manager between "observe" and "rank".

Pure functions over times in seconds (any monotonic clock), plus :class:`EvictionState`, which
carries what one ``synchronize`` leaves for the next. One step, as Kubernetes does it:

1. thresholds met now, ignoring grace periods (``available < threshold``);
2. plus thresholds that drove evictions last time and are not yet resolved with their minimum
   reclaim (``available < threshold + min_reclaim``) — so reclaim continues past the threshold;
3. when each of those was first observed (kept while it stays met, forgotten when it is not);
4. node conditions for them (memory.available → MemoryPressure), reported while last observed
   within ``--eviction-pressure-transition-period`` — so a condition stays on that long after
   the pressure ends, and conditions do not oscillate;
5. thresholds whose grace period has passed (hard ones at once) — those may evict;
6. of those, the ones whose stats were sampled after the previous step's (no decision twice on
   the same sample).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

from kubelet.eviction.signals import Observation
from kubelet.eviction.thresholds import (
    ALLOCATABLE_MEMORY_AVAILABLE,
    MEMORY_AVAILABLE,
    OP_LESS_THAN,
    SIGNAL_RESOURCES,
    Threshold,
)

MEMORY_PRESSURE = "MemoryPressure"
DISK_PRESSURE = "DiskPressure"
PID_PRESSURE = "PIDPressure"

SIGNAL_CONDITIONS: dict[str, str] = {
    MEMORY_AVAILABLE: MEMORY_PRESSURE,
    ALLOCATABLE_MEMORY_AVAILABLE: MEMORY_PRESSURE,
    "imagefs.available": DISK_PRESSURE,
    "imagefs.inodesFree": DISK_PRESSURE,
    "nodefs.available": DISK_PRESSURE,
    "nodefs.inodesFree": DISK_PRESSURE,
    "containerfs.available": DISK_PRESSURE,
    "containerfs.inodesFree": DISK_PRESSURE,
    "pid.available": PID_PRESSURE,
}

Observations = Mapping[str, Observation]


def threshold_bytes(t: Threshold, observed: Observation, enforce_min_reclaim: bool = False) -> int:
    """The level below which ``t`` is met (plus its minimum reclaim when enforced)."""
    level = t.value.bytes_of(observed.capacity)
    if enforce_min_reclaim and t.min_reclaim is not None:
        level += t.min_reclaim.bytes_of(observed.capacity)
    return level


def thresholds_met(thresholds: Iterable[Threshold], observations: Observations,
                   enforce_min_reclaim: bool = False) -> list[Threshold]:
    """The thresholds met by the observations, grace periods ignored (no observation: not met)."""
    out = []
    for t in thresholds:
        observed = observations.get(t.signal)
        if observed is None:
            continue
        if t.operator == OP_LESS_THAN and threshold_bytes(t, observed, enforce_min_reclaim) > observed.available:
            out.append(t)
    return out


def merge_thresholds(a: Iterable[Threshold], b: Iterable[Threshold]) -> list[Threshold]:
    out = list(a)
    for t in b:
        if t not in out:
            out.append(t)
    return out


def thresholds_first_observed_at(thresholds: Iterable[Threshold], last: Mapping[Threshold, float],
                                 now: float) -> dict[Threshold, float]:
    """When each currently met threshold was first met; thresholds no longer met are dropped."""
    return {t: last.get(t, now) for t in thresholds}


def thresholds_met_grace_period(observed_at: Mapping[Threshold, float], now: float) -> list[Threshold]:
    """The thresholds met for at least their grace period."""
    return [t for t, at in observed_at.items() if now - at >= t.grace_period]


def node_conditions(thresholds: Iterable[Threshold]) -> list[str]:
    out: list[str] = []
    for t in thresholds:
        c = SIGNAL_CONDITIONS.get(t.signal)
        if c is not None and c not in out:
            out.append(c)
    return out


def node_conditions_last_observed_at(conditions: Iterable[str], last: Mapping[str, float],
                                     now: float) -> dict[str, float]:
    """Conditions observed now get ``now``; the others keep when they were last observed."""
    out = {c: now for c in conditions}
    for c, at in last.items():
        out.setdefault(c, at)
    return out


def node_conditions_observed_since(observed_at: Mapping[str, float], period: float, now: float) -> list[str]:
    """The conditions last observed less than ``period`` ago."""
    return [c for c, at in observed_at.items() if now - at < period]


def thresholds_updated_stats(thresholds: Iterable[Threshold], observations: Observations,
                             last: Observations) -> list[Threshold]:
    """The thresholds whose signal was sampled after the previous step (or has no sample time)."""
    out = []
    for t in thresholds:
        observed = observations.get(t.signal)
        if observed is None:
            continue
        before = last.get(t.signal)
        if before is None or observed.time is None or before.time is None or observed.time > before.time:
            out.append(t)
    return out


def by_eviction_priority(thresholds: Iterable[Threshold]) -> list[Threshold]:
    """Memory first, thresholds whose signal reclaims nothing last (stable otherwise)."""
    def key(t: Threshold) -> int:
        if t.signal in (MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE):
            return 0
        return 1 if t.signal in SIGNAL_RESOURCES else 2
    return sorted(thresholds, key=key)


@dataclass
class Step:
    """What one evaluation decided."""

    conditions: list[str]  # node conditions to report (transition period applied)
    met: list[Threshold]  # thresholds met or not yet reclaimed, grace periods ignored
    to_act: list[Threshold]  # grace periods passed and stats fresh: may evict now


@dataclass
class EvictionState:
    """What the eviction manager remembers between synchronizations (in memory, as Kubernetes)."""

    thresholds_first_observed_at: dict[Threshold, float] = field(default_factory=dict)
    node_conditions_last_observed_at: dict[str, float] = field(default_factory=dict)
    thresholds_met: list[Threshold] = field(default_factory=list)  # grace passed, not yet resolved
    last_observations: dict[str, Observation] = field(default_factory=dict)
    node_conditions: list[str] = field(default_factory=list)

    def step(self, thresholds: Iterable[Threshold], observations: Observations, now: float,
             transition_period: float) -> Step:
        met = thresholds_met(thresholds, observations)
        if self.thresholds_met:
            met = merge_thresholds(met, thresholds_met(self.thresholds_met, observations, enforce_min_reclaim=True))
        first = thresholds_first_observed_at(met, self.thresholds_first_observed_at, now)
        last_seen = node_conditions_last_observed_at(node_conditions(met), self.node_conditions_last_observed_at, now)
        conditions = node_conditions_observed_since(last_seen, transition_period, now)
        ready = thresholds_met_grace_period(first, now)
        self.node_conditions = conditions
        self.thresholds_first_observed_at = first
        self.node_conditions_last_observed_at = last_seen
        self.thresholds_met = ready
        to_act = thresholds_updated_stats(ready, observations, self.last_observations)
        self.last_observations = dict(observations)
        return Step(conditions, met, to_act)
