"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes no new pods.

kube-scheduler's nodeunschedulable plugin. Filter: when the node is unschedulable and the pod does
not tolerate the taint ``node.kubernetes.io/unschedulable:NoSchedule`` (Kubernetes docs: Taints and
Tolerations lists it among the built-in taints; DaemonSet pods carry that toleration), the node is
UnschedulableAndUnresolvable ``node(s) were unschedulable``. The taint need not be on the node: the
field alone cordons it, and tolerating the taint tolerates the field.

What makes a pod this plugin rejected schedulable (its QueueingHints):
- a schedulable node added, or a node uncordoned (kplane reports ``unschedulable`` going
  true -> false as UpdateNodeTaint, as Kubernetes does);
- the pod itself gaining a toleration of the unschedulable taint.
"""

from __future__ import annotations

from typing import Any

from machinery import placement, wellknown
from machinery.api import core_pb2
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.plugin_args import no_args
from scheduler.framework.types import (
    NODE,
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    QueueingHint,
    Status,
)

NAME = "NodeUnschedulable"
ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
TAINT_NODE_UNSCHEDULABLE = wellknown.TAINT_NODE_UNSCHEDULABLE

_UNSCHEDULABLE_TAINT = core_pb2.Taint(key=TAINT_NODE_UNSCHEDULABLE, effect=placement.NO_SCHEDULE)


def tolerates_unschedulable(pod: core_pb2.Pod) -> bool:
    return placement.tolerated(_UNSCHEDULABLE_TAINT, pod.spec.tolerations)


class NodeUnschedulable:
    name = NAME

    def __init__(self, features: Features = Features()) -> None:
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[None, Status | None]:
        """Nothing to prepare; a deferred resize (KEP-5836) skips this plugin."""
        if skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        return None, None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        if not ni.unschedulable:
            return None if ni.node is not None else Status(Code.ERROR, "node not found")
        if tolerates_unschedulable(pod):
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_UNSCHEDULABLE)

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new schedulable node, or a node uncordoned (reported as a taint change).
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 self.is_schedulable_after_node_change),
            # The pod itself may be given a toleration of node.kubernetes.io/unschedulable.
            ClusterEventWithHint(ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION),
                                 self.is_schedulable_after_pod_toleration_change),
        ]

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        if new is None or new.spec.unschedulable:
            return QueueingHint.QUEUE_SKIP
        if old is None or old.spec.unschedulable:
            return QueueingHint.QUEUE  # added schedulable, or uncordoned
        return QueueingHint.QUEUE_SKIP  # it was schedulable already: it did not reject the pod

    def is_schedulable_after_pod_toleration_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        # Tolerations can only be added, and the pod was rejected without this one: check the new pod.
        if new is not None and new.metadata.uid == pod.metadata.uid and tolerates_unschedulable(new):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP


def new(args: Any, handle: Any) -> NodeUnschedulable:
    """NodeUnschedulable takes no args: kube-scheduler has no NodeUnschedulableArgs, and any given are an error."""
    no_args(NAME, args)
    return NodeUnschedulable(features_of(handle))
