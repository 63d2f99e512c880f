"""Pod conditions: their well-known names, and reading and setting one.

The names are core/v1's (PodConditionType and the DisruptionTarget reasons, k8s.io/api
core/v1 types.go); the helpers are Kubernetes' pkg/api/v1/pod util.go: ``get_condition``
(GetPodCondition), ``update_condition`` (UpdatePodCondition: lastTransitionTime moves only when
the status does), and ``disruption_target`` for the condition every component that ends a pod
on purpose gives it first.
"""

from __future__ import annotations

from typing import Final

from machinery import timeutil
from machinery.api import core_pb2

# Condition types.
POD_SCHEDULED: Final = "PodScheduled"
POD_READY_TO_START_CONTAINERS: Final = "PodReadyToStartContainers"
INITIALIZED: Final = "Initialized"
CONTAINERS_READY: Final = "ContainersReady"
READY: Final = "Ready"
DISRUPTION_TARGET: Final = "DisruptionTarget"

# DisruptionTarget's reasons: who is ending the pod.
PREEMPTION_BY_SCHEDULER: Final = "PreemptionByScheduler"
DELETION_BY_TAINT_MANAGER: Final = "DeletionByTaintManager"
DELETION_BY_POD_GC: Final = "DeletionByPodGC"
TERMINATION_BY_KUBELET: Final = "TerminationByKubelet"
EVICTION_BY_EVICTION_API: Final = "EvictionByEvictionAPI"


def get_condition(status: core_pb2.PodStatus, type_: str) -> core_pb2.PodCondition | None:
    """The condition of that type, or None."""
    return next((c for c in status.conditions if c.type == type_), None)


def update_condition(status: core_pb2.PodStatus, condition: core_pb2.PodCondition) -> bool:
    """Put ``condition`` in ``status`` (replacing the one of its type); True if anything changed.
    The stored lastTransitionTime stays unless the status changes (now when the condition has none)."""
    if not condition.last_transition_time:
        condition.last_transition_time = timeutil.rfc3339()
    current = get_condition(status, condition.type)
    if current is None:
        status.conditions.append(condition)
        return True
    if current.status == condition.status:
        condition.last_transition_time = current.last_transition_time
    changed = (current.status, current.reason, current.message, current.last_transition_time) != \
        (condition.status, condition.reason, condition.message, condition.last_transition_time)
    current.CopyFrom(condition)
    return changed


def set_condition(pod: core_pb2.Pod, type_: str, status: str, reason: str = "", message: str = "") -> bool:
    """``update_condition`` on a pod by its parts."""
    return update_condition(pod.status, core_pb2.PodCondition(type=type_, status=status, reason=reason,
                                                              message=message))


def disruption_target(reason: str, message: str) -> core_pb2.PodCondition:
    """DisruptionTarget=True with who ends the pod and why, transitioning now."""
    return core_pb2.PodCondition(type=DISRUPTION_TARGET, status="True", reason=reason, message=message,
                                 last_transition_time=timeutil.rfc3339())


def is_disruption_target(pod: core_pb2.Pod, reason: str | None = None) -> bool:
    """Whether the pod is marked DisruptionTarget=True (by ``reason``, if one is given)."""
    c = get_condition(pod.status, DISRUPTION_TARGET)
    return c is not None and c.status == "True" and (reason is None or c.reason == reason)
