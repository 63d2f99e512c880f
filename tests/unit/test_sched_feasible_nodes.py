"""Kubernetes docs: Scheduler Performance Tuning — how many feasible nodes a cycle looks for
(percentageOfNodesToScore, adaptive by default, 5% floor, 100-node minimum) and the round robin
over the nodes from where the last cycle stopped."""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from scheduler.algorithm import Algorithm, num_feasible_nodes_to_find
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import CycleState, Diagnosis
from tests.harness.builders import MakePod


@pytest.mark.parametrize("percentage,nodes,wanted", [
    (0, 100, 100),      # "50% for a 100-node cluster", but never fewer than 100 nodes
    (0, 1000, 420),     # the linear default: 50 - 1000/125 = 42%
    (0, 5000, 500),     # "10% for a 5000-node cluster"
    (0, 50000, 2500),   # "The lower bound for the automatic value is 5%"
    (3, 50000, 1500),   # unless set explicitly below 5
    (50, 1000, 500),    # an explicit percentage
    (50, 150, 100),     # "a hardcoded minimum value of 100 nodes"
    (10, 60, 60),       # a cluster smaller than that: every node
    (150, 1000, 1000),  # "above 100, kube-scheduler acts as if you had set a value of 100"
])
def test_the_number_of_feasible_nodes_a_cycle_looks_for(percentage, nodes, wanted):
    assert num_feasible_nodes_to_find(percentage, nodes) == wanted


class _AllFit:
    """A profile whose filters pass every node, recording which nodes they were asked about."""

    def __init__(self, percentage: int, scores: bool = True) -> None:
        self.percentage_of_nodes_to_score = percentage
        self.scores = scores
        self.asked: list[str] = []

    def has_score_plugins(self) -> bool:
        return self.scores

    def run_filter_plugins(self, state, pod, ni, filters=None):
        self.asked.append(ni.name)
        return None


def _nodes(n: int) -> list[NodeInfo]:
    out = []
    for i in range(n):
        node = core_pb2.Node()
        node.metadata.name = f"node-{i}"
        out.append(NodeInfo(node))
    return out


def test_each_cycle_starts_where_the_last_one_stopped_and_wraps_around():
    nodes = _nodes(250)
    algo = Algorithm(None, None, nominator=[], percentage_of_nodes_to_score=0)
    fw = _AllFit(percentage=50)  # the profile's own setting wins over the scheduler's default
    found = []
    for _ in range(3):
        feasible = algo.find_nodes_that_pass_filters(fw, CycleState(), MakePod().name("p").obj(), Diagnosis(), nodes,
                                                     [("AllFit", None)], len(nodes))
        found.append([ni.name for ni in feasible])
    assert [len(f) for f in found] == [125, 125, 125]
    assert found[0][0] == "node-0" and found[1][0] == "node-125"
    assert found[2] == found[0]  # after going over all the nodes it goes back to the first


def test_without_score_plugins_the_first_feasible_node_is_enough():
    """kube-scheduler's findNodesThatPassFilters: with nothing to rank, one feasible node will do."""
    nodes = _nodes(250)
    algo = Algorithm(None, None, nominator=[], percentage_of_nodes_to_score=0)
    fw = _AllFit(percentage=50, scores=False)
    feasible = algo.find_nodes_that_pass_filters(fw, CycleState(), MakePod().name("p").obj(), Diagnosis(), nodes,
                                                 [("AllFit", None)], len(nodes))
    assert [ni.name for ni in feasible] == ["node-0"] and fw.asked == ["node-0"]


def test_a_pinned_seed_gives_a_pod_the_same_node_among_equals_every_time():
    """``--tie-break-seed``: a pod's choice among equal nodes is the seed's and the pod's, whatever
    other pods drew before it; unpinned, one shared source, as kube-scheduler's."""
    nodes, scores = _nodes(8), [5] * 8
    names = "abcdefgh"

    def chosen(tb: TieBreaks, order: str) -> dict[str, str]:
        return {n: Algorithm.select_host(nodes, scores, tb.for_pod(MakePod().name(n).obj())) for n in order}

    pinned = chosen(TieBreaks("3"), names)
    assert chosen(TieBreaks("3"), names[::-1]) == pinned  # another order of draws: the same nodes
    assert len(set(pinned.values())) > 1  # not one node for all pods
    assert chosen(TieBreaks("4"), names) != pinned
    # a higher score wins whatever the seed
    assert Algorithm.select_host(nodes, [5] * 7 + [6], TieBreaks("3").for_pod(MakePod().name("a").obj())) == "node-7"
    shared = TieBreaks()
    a = MakePod().name("a").obj()
    assert shared.for_pod(a) is shared.for_pod(MakePod().name("b").obj())
    assert len({Algorithm.select_host(nodes, scores, shared.for_pod(a)) for _ in range(60)}) > 1
