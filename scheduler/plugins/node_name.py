"""NodeName: a pod that names its node (``spec.nodeName``) fits that node only.

kube-scheduler's nodename plugin (Kubernetes docs: Assigning Pods to Nodes, "nodeName"). Filter: a
pod whose ``spec.nodeName`` is set and differs from the node is UnschedulableAndUnresolvable
``node(s) didn't match the requested node name`` (no preemption can rename a node). A pod without
``spec.nodeName`` passes every node.

PreFilter (KEP-5836 "NodeName Plugin: Node Restriction via the PreFilter Phase"): a pod that names
its node is looked at on that node only — a PreFilterResult of that one node. The only such pods
the scheduler sees are bound pods whose in-place resize is Deferred: their cycle (resource fit
and preemption) is thereby restricted to the node they run on. A pod naming no node passes every
node.

What makes a pod this plugin rejected schedulable: only a node being added (a node's name never
changes), and only the node the pod names. kube-scheduler registers Node/Add without a hint
(always Queue); the hint here also skips nodes with another name, which could not fit the pod.
"""

from __future__ import annotations

from typing import Any

from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.plugin_args import no_args
from scheduler.framework.types import (
    NODE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    PreFilterResult,
    QueueingHint,
    Status,
)

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: core_pb2.Pod, ni: NodeInfo) -> bool:
    """Kubernetes' nodename.Fits."""
    wanted = pod.spec.node_name
    return not wanted or wanted == ni.name


class NodeName:
    name = NAME

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[PreFilterResult | None, Status | None]:
        wanted = pod.spec.node_name
        if not wanted:
            return None, None
        return PreFilterResult(frozenset((wanted,))), None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        wanted = pod.spec.node_name
        if not wanted or wanted == ni.name:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # The node the pod names may not exist yet; its creation is the only change that helps.
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD), self.is_schedulable_after_node_add),
        ]

    def is_schedulable_after_node_add(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        wanted = pod.spec.node_name
        if new is None or (wanted and new.metadata.name != wanted):
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE


def new(args: Any, handle: Any) -> NodeName:
    """NodeName takes no args: kube-scheduler has no NodeNameArgs, and any given are an error."""
    no_args(NAME, args)
    return NodeName()
