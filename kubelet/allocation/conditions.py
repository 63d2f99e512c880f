"""The kubelet's resize conditions per pod: PodResizePending, PodResizeInProgress and KEP-5836's
PodResizePreemptionDisabled.

As Kubernetes' status manager keeps them: a condition is present (status "True") or absent;
``lastTransitionTime`` is set when the condition appears or its reason changes and is otherwise
kept — including across a kubelet restart, where the conditions are restored from the pod's API
status (KEP-1287 "Kubelet Restart Analysis": "LastTransitionTime is propagated from the old pod
status"). ``observedGeneration`` is the pod generation the condition speaks about.
"""

from __future__ import annotations

from dataclasses import dataclass

from machinery import timeutil

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
PREEMPTION_DISABLED = "PodResizePreemptionDisabled"
RESIZE_CONDITION_TYPES = (PENDING, IN_PROGRESS, PREEMPTION_DISABLED)

DEFERRED = "Deferred"
INFEASIBLE = "Infeasible"
ERROR = "Error"
PREEMPTION_DISABLED_BY_NODE_POLICY = "PreemptionDisabledByNodePolicy"


@dataclass(frozen=True)
class ResizeCondition:
    type: str
    reason: str = ""
    message: str = ""
    observed_generation: int = 0
    last_transition_time: str = ""
    last_probe_time: str = ""


class ResizeConditions:
    def __init__(self) -> None:
        self._by_pod: dict[str, dict[str, ResizeCondition]] = {}

    def get(self, uid: str) -> dict[str, ResizeCondition]:
        return dict(self._by_pod.get(uid, {}))

    def condition(self, uid: str, type_: str) -> ResizeCondition | None:
        return self._by_pod.get(uid, {}).get(type_)

    def restore(self, uid: str, pod_conditions) -> None:
        """Take the resize conditions of a pod's API status (kubelet start), keeping their times."""
        restored = {}
        for c in pod_conditions:
            if c.type in RESIZE_CONDITION_TYPES and c.status == "True":
                restored[c.type] = ResizeCondition(c.type, c.reason, c.message, c.observed_generation,
                                                   c.last_transition_time, c.last_probe_time)
        if restored:
            self._by_pod[uid] = restored

    def put(self, uid: str, type_: str, reason: str, message: str, generation: int) -> bool:
        """Add or update a condition; True if anything a reader would see changed."""
        conds = self._by_pod.setdefault(uid, {})
        old = conds.get(type_)
        if old is not None and (old.reason, old.message, old.observed_generation) == (reason, message, generation):
            return False
        now = timeutil.rfc3339()
        transition = now if old is None or old.reason != reason else old.last_transition_time
        conds[type_] = ResizeCondition(type_, reason, message, generation, transition, now)
        return True

    def clear(self, uid: str, type_: str) -> bool:
        conds = self._by_pod.get(uid)
        if not conds or type_ not in conds:
            return False
        del conds[type_]
        if not conds:
            del self._by_pod[uid]
        return True

    def is_deferred(self, uid: str) -> bool:
        c = self.condition(uid, PENDING)
        return c is not None and c.reason == DEFERRED

    def is_infeasible(self, uid: str) -> bool:
        c = self.condition(uid, PENDING)
        return c is not None and c.reason == INFEASIBLE

    def forget(self, uid: str) -> None:
        self._by_pod.pop(uid, None)

    def counts(self) -> dict[str, int]:
        out = {"deferred": 0, "infeasible": 0, "in_progress": 0}
        for conds in self._by_pod.values():
            p = conds.get(PENDING)
            if p is not None:
                out["deferred" if p.reason == DEFERRED else "infeasible"] += 1
            if IN_PROGRESS in conds:
                out["in_progress"] += 1
        return out
