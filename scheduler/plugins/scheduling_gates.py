"""SchedulingGates: keep a pod out of the active queue while it has ``spec.schedulingGates``.

kube-scheduler's schedulinggates plugin (Kubernetes docs: Pod Scheduling Readiness). Its only
extension point is PreEnqueue: a pod created with gates is parked as gated (``kubectl get`` shows
``SchedulingGated``; ``scheduler_pending_pods{queue="gated"}`` counts it) and no scheduling cycle is
spent on it. The answer is UnschedulableAndUnresolvable ``waiting for scheduling gates:
[example.com/foo example.com/bar]`` (the gate names in order, formatted as Go's ``%v`` formats a
string slice).

Gates can only be removed after creation, never added, so the one event that can release the
pod is an update of the pod itself that removes its last gate.
"""

from __future__ import annotations

from typing import Any

from machinery.api import core_pb2
from scheduler.framework.plugin_args import no_args
from scheduler.framework.types import (
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    QueueingHint,
    Status,
)

NAME = "SchedulingGates"


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: core_pb2.Pod) -> Status | None:
        gates = pod.spec.scheduling_gates
        if not gates:
            return None
        names = " ".join(g.name for g in gates)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"waiting for scheduling gates: [{names}]")

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # The gated pod's own update that removes its last gate makes it ready for scheduling.
            ClusterEventWithHint(ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED),
                                 self.is_schedulable_after_pod_change),
        ]

    def is_schedulable_after_pod_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        if new is None or new.metadata.uid != pod.metadata.uid:
            return QueueingHint.QUEUE_SKIP  # another pod's gates do not release this one
        if not new.spec.scheduling_gates:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP


def new(args: Any, handle: Any) -> SchedulingGates:
    """SchedulingGates takes no args: kube-scheduler has no SchedulingGatesArgs, and any given are an error."""
    no_args(NAME, args)
    return SchedulingGates()
