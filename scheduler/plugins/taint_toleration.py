"""TaintToleration: a node's taints repel the pods that do not tolerate them.

kube-scheduler's tainttoleration plugin (Kubernetes docs: Taints and Tolerations):

- Filter: the first of the node's ``NoSchedule`` or ``NoExecute`` taints the pod does not
  tolerate makes the node UnschedulableAndUnresolvable ``node(s) had untolerated taint {key:
  value}`` (preemption cannot remove a taint). ``PreferNoSchedule`` taints never filter.
- Score: the number of the node's ``PreferNoSchedule`` taints the pod does not tolerate,
  counted against the pod's tolerations with effect ``PreferNoSchedule`` or none (an empty
  effect tolerates every effect); PreScore picks those tolerations once per cycle.
- NormalizeScore: DefaultNormalizeScore reversed, so the node with the most intolerable
  PreferNoSchedule taints scores 0 and a node with none scores 100.

What makes a pod this plugin rejected schedulable (its QueueingHints):
- a node added with no intolerable NoSchedule/NoExecute taint, or a node's taints changed so
  that one that had such a taint no longer has one;
- the pod itself gaining tolerations (an unscheduled pod's tolerations may only be added to).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from machinery import placement
from machinery.api import core_pb2
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.plugin_args import no_args
from scheduler.framework.types import (
    MAX_NODE_SCORE,
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
from scheduler.plugins.helper import default_normalize_score

NAME = "TaintToleration"
_SCORE_STATE_KEY = "PreScore" + NAME

# The effects Filter enforces (kube-scheduler's helper.DoNotScheduleTaintsFilterFunc).
DO_NOT_SCHEDULE_EFFECTS = (placement.NO_SCHEDULE, placement.NO_EXECUTE)


def untolerated_taint(node: core_pb2.Node, tolerations: Sequence[core_pb2.Toleration]) -> core_pb2.Taint | None:
    """The node's first NoSchedule/NoExecute taint none of ``tolerations`` tolerates."""
    taints = node.spec.taints
    if not taints:
        return None  # most nodes: no work
    return placement.find_untolerated_taint(taints, tolerations, DO_NOT_SCHEDULE_EFFECTS)


def _prefer_no_schedule_tolerations(pod: core_pb2.Pod) -> tuple[core_pb2.Toleration, ...]:
    """The tolerations that can tolerate a PreferNoSchedule taint: that effect, or no effect (all)."""
    return tuple(t for t in pod.spec.tolerations if not t.effect or t.effect == placement.PREFER_NO_SCHEDULE)


def count_intolerable_prefer_no_schedule(taints: Iterable[core_pb2.Taint],
                                         tolerations: tuple[core_pb2.Toleration, ...]) -> int:
    count = 0
    for taint in taints:
        if taint.effect == placement.PREFER_NO_SCHEDULE and not placement.tolerated(taint, tolerations):
            count += 1
    return count


class TaintToleration:
    name = NAME

    def __init__(self, features: Features = Features()) -> None:
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[None, Status | None]:
        """Nothing to prepare; a deferred resize (KEP-5836) skips this plugin."""
        if skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        return None, None

    # ------------------------------------------------------------ filter

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        if ni.node is None:
            return Status(Code.ERROR, "node not found")
        taints = ni.taints
        if not taints:
            return None  # most nodes: no work
        taint = placement.find_untolerated_taint(taints, pod.spec.tolerations, DO_NOT_SCHEDULE_EFFECTS)
        if taint is None:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                      f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes) -> Status | None:
        state.write(_SCORE_STATE_KEY, _prefer_no_schedule_tolerations(pod))
        return None

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        if ni.node is None:
            return 0, Status(Code.ERROR, "node not found")
        taints = ni.taints
        if not taints:
            return 0, None
        tolerations = state.get(_SCORE_STATE_KEY)
        if tolerations is None:
            tolerations = _prefer_no_schedule_tolerations(pod)
        return count_intolerable_prefer_no_schedule(taints, tolerations), None

    def score_nodes(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> list[int] | None:
        """``score`` of every node at once (the framework's BatchScorePlugin): 0 for the untainted."""
        if any(ni.node is None for ni in nodes):
            return None  # score says why, for that node
        out = [0] * len(nodes)
        tolerations = None
        for i, ni in enumerate(nodes):
            if ni.taints:
                if tolerations is None:
                    tolerations = state.get(_SCORE_STATE_KEY)
                    if tolerations is None:
                        tolerations = _prefer_no_schedule_tolerations(pod)
                out[i] = count_intolerable_prefer_no_schedule(ni.taints, tolerations)
        return out

    def normalize_score(self, state: CycleState, pod: core_pb2.Pod, node_names: list[str],
                        scores: list[int]) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new node without an intolerable taint, or a node whose intolerable taint was removed
            # (or became tolerated by a value change).
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                                 self.is_schedulable_after_node_change),
            # The rejected pod itself was given more tolerations.
            ClusterEventWithHint(ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION),
                                 self.is_schedulable_after_pod_toleration_change),
        ]

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        if new is None:
            return QueueingHint.QUEUE_SKIP
        tolerations = pod.spec.tolerations
        was_untolerated = old is None or untolerated_taint(old, tolerations) is not None
        if was_untolerated and untolerated_taint(new, tolerations) is None:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def is_schedulable_after_pod_toleration_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        if new is not None and new.metadata.uid == pod.metadata.uid:
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP


def new(args: Any, handle: Any) -> TaintToleration:
    """TaintToleration takes no args: kube-scheduler has no TaintTolerationArgs, and any given are an error."""
    no_args(NAME, args)
    return TaintToleration(features_of(handle))
