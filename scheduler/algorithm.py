"""Where a scheduling cycle puts a pod: kube-scheduler's schedulePod and what it calls.

Snapshot the cache; PreFilter; walk the nodes round robin from where the last cycle stopped,
filtering until enough feasible nodes are found (``percentageOfNodesToScore``: adaptive by
default, 50% at 100 nodes down to a 5% floor, never fewer than 100 nodes; Kubernetes docs:
Scheduler Performance Tuning); score them (PreScore, Score, NormalizeScore, weights) unless only
one is feasible; pick the highest, ties at random. No node fits: FitError, with each node's
status; an internal error or no nodes at all: SchedulingError.
"""

from __future__ import annotations

import random
from collections.abc import Sized
from dataclasses import dataclass

from machinery.api import core_pb2
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import Code, CycleState, Diagnosis, FitError, SchedulingError, Status

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 50
NO_NODES_AVAILABLE = "no nodes available to schedule pods"


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """How many feasible nodes are enough (Kubernetes docs: Scheduler Performance Tuning)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage <= 0:
        percentage = DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE - num_all_nodes // 125
        percentage = max(percentage, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * min(percentage, 100) // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class ScheduleResult:
    host: str
    evaluated: int
    feasible: int


class Algorithm:
    """The part of a scheduling cycle that picks a node (schedulePod)."""

    def __init__(self, cache: Cache, snapshot: Snapshot, nominator: Sized, percentage_of_nodes_to_score: int,
                 tie_breaks: TieBreaks | None = None):
        self.cache, self.snapshot, self.nominator = cache, snapshot, nominator
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        self.tie_breaks = tie_breaks or TieBreaks()

    def schedule_pod(self, fw: Framework, state: CycleState, pod: core_pb2.Pod) -> ScheduleResult:
        snapshot = self.snapshot
        self.cache.update_snapshot(snapshot)
        if snapshot.num_nodes() == 0:
            raise SchedulingError(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_NODES_AVAILABLE))
        feasible, diagnosis = self.find_nodes_that_fit(fw, state, pod)
        if not feasible:
            raise FitError(pod, snapshot.num_nodes(), diagnosis)
        evaluated = len(feasible) + len(diagnosis.node_to_status)
        if len(feasible) == 1:
            return ScheduleResult(feasible[0].name, evaluated, 1)
        scores = self.prioritize_nodes(fw, state, pod, feasible)
        host = self.select_host(feasible, scores, self.tie_breaks.for_pod(pod))
        return ScheduleResult(host, evaluated, len(feasible))

    def find_nodes_that_fit(self, fw: Framework, state: CycleState,
                            pod: core_pb2.Pod) -> tuple[list[NodeInfo], Diagnosis]:
        snapshot = self.snapshot
        diagnosis = Diagnosis()
        all_nodes = snapshot.node_infos()
        pre_result, s, narrowing = fw.run_pre_filter_plugins(state, pod, all_nodes)
        diagnosis.unschedulable_plugins |= narrowing  # a pod fitting none of their nodes waits on their events
        if s is not None:
            if not s.is_rejected():
                raise SchedulingError(s)
            diagnosis.absent_nodes_status = s
            diagnosis.pre_filter_msg = s.message()
            if s.plugin:
                diagnosis.unschedulable_plugins.add(s.plugin)
                if s.code == Code.PENDING:
                    diagnosis.pending_plugins.add(s.plugin)
            return [], diagnosis
        filters = fw.filters_for(state)
        nominated = fw.nominated_node(pod)
        if nominated:
            ni = snapshot.get(nominated)
            allowed = pre_result is None or pre_result.node_names is None or nominated in pre_result.node_names
            if ni is not None and allowed:
                if fw.run_filter_plugins_with_nominated_pods(state, pod, ni, filters) is None:
                    return [ni], diagnosis
        nodes = all_nodes
        if pre_result is not None and pre_result.node_names is not None:
            nodes = [ni for name in sorted(pre_result.node_names) if (ni := snapshot.get(name)) is not None]
            diagnosis.absent_nodes_status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                   f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(narrowing))}]")
        return self.find_nodes_that_pass_filters(fw, state, pod, diagnosis, nodes, filters, len(all_nodes)), diagnosis

    def find_nodes_that_pass_filters(self, fw: Framework, state: CycleState, pod: core_pb2.Pod, diagnosis: Diagnosis,
                                     nodes: list[NodeInfo], filters, num_all: int) -> list[NodeInfo]:
        n = len(nodes)
        if n == 0:
            return []
        percentage = fw.percentage_of_nodes_to_score
        if percentage is None:
            percentage = self.percentage_of_nodes_to_score
        wanted = num_feasible_nodes_to_find(percentage, n) if fw.has_score_plugins() else 1  # nothing to rank
        start = self.next_start_node_index % n
        if not filters:
            first = [nodes[(start + i) % n] for i in range(wanted)]
            self.next_start_node_index = (self.next_start_node_index + wanted) % max(num_all, 1)
            return first
        feasible: list[NodeInfo] = []
        statuses = diagnosis.node_to_status
        # With no pod nominated anywhere the two-pass check has nothing to add: skip its lookups.
        nominations = len(self.nominator)
        check = fw.run_filter_plugins_with_nominated_pods if nominations else fw.run_filter_plugins
        processed = 0
        for i in range(n):
            ni = nodes[(start + i) % n]
            processed += 1
            s = check(state, pod, ni, filters)
            if s is None:
                feasible.append(ni)
                if len(feasible) >= wanted:
                    break
                continue
            if s.code == Code.ERROR:
                raise SchedulingError(s)
            statuses[ni.name] = s
            if s.plugin:
                diagnosis.unschedulable_plugins.add(s.plugin)
                if s.code == Code.PENDING:
                    diagnosis.pending_plugins.add(s.plugin)
        self.next_start_node_index = (self.next_start_node_index + processed) % max(num_all, 1)
        return feasible

    def prioritize_nodes(self, fw: Framework, state: CycleState, pod: core_pb2.Pod,
                         nodes: list[NodeInfo]) -> list[int]:
        if not fw.has_score_plugins():
            return [1] * len(nodes)
        s = fw.run_pre_score_plugins(state, pod, nodes)
        if s is not None:
            raise SchedulingError(s)
        scores, s = fw.run_score_plugins(state, pod, nodes)
        if s is not None:
            raise SchedulingError(s)
        return scores

    @staticmethod
    def select_host(nodes: list[NodeInfo], scores: list[int], rand: random.Random) -> str:
        """The highest score; ties broken uniformly at random (reservoir sampling) from ``rand``."""
        best, chosen, ties = -1, "", 0
        for ni, score in zip(nodes, scores, strict=True):
            if score > best:
                best, chosen, ties = score, ni.name, 1
            elif score == best:
                ties += 1
                if rand.randrange(ties) == 0:
                    chosen = ni.name
        return chosen
