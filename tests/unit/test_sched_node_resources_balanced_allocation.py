"""NodeResourcesBalancedAllocation: (1 - std of the used fractions) * 100 with the node's
Requested (not NonZeroRequested) plus the pod's requests, best-effort Skip, and args."""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import Code, CycleState
from scheduler.plugins import node_resources_balanced_allocation as ba
from tests.harness.builders import MakeNode, MakePod

GPU = "example.com/gpu"


def with_gpu(p: core_pb2.Pod, count: str) -> core_pb2.Pod:
    p.spec.containers[0].resources.requests[GPU] = count
    return p


def run_score(pl, pod: core_pb2.Pod, ni: NodeInfo) -> int:
    state = CycleState()
    assert pl.pre_score(state, pod, [ni]) is None
    score, st = pl.score(state, pod, ni)
    assert st is None
    return score


def test_two_resources_score_is_one_minus_half_the_difference():
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    ni.add_pod(MakePod().name("a").uid("uid-a").req(cpu="2", memory="2Gi").node("n1").obj())
    # cpu (2+1)/4 = 0.75, memory (2+1)/8 = 0.375: std 0.1875 -> 81.25 -> 81.
    assert run_score(ba.new({}, None), MakePod().name("p").req(cpu="1", memory="1Gi").obj(), ni) == 81


def test_the_node_side_is_requested_not_non_zero_requested():
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    # requests nothing: NonZeroRequested would count 100m / 200Mi
    ni.add_pod(MakePod().name("besteffort").uid("uid-besteffort").node("n1").obj())
    # cpu 1/4 = 0.25, memory 2/8 = 0.25: perfectly balanced (with the defaults it would be 99).
    assert run_score(ba.new({}, None), MakePod().name("p").req(cpu="1", memory="2Gi").obj(), ni) == 100


def test_fractions_are_capped_at_one():
    # cpu 2/1 -> 1, memory 4/8 = 0.5: std 0.25 -> 75.
    n1 = MakeNode().name("n1").allocatable(cpu="1", memory="8Gi", pods="110").obj()
    assert run_score(ba.new({}, None), MakePod().name("p").req(cpu="2", memory="4Gi").obj(), NodeInfo(n1)) == 75


def test_three_resources_use_the_population_standard_deviation():
    pl = ba.new({"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                               {"name": GPU, "weight": 1}]}, None)
    ni = NodeInfo(MakeNode().name("n1").allocatable({GPU: "4"}, cpu="4", memory="8Gi", pods="110").obj())
    # 0.25, 0.25, 0.75: mean 5/12, std sqrt(1/18) = 0.2357 -> 76.43 -> 76.
    assert run_score(pl, with_gpu(MakePod().name("p").req(cpu="1", memory="2Gi").obj(), "3"), ni) == 76


def test_an_extended_resource_the_pod_does_not_request_or_the_node_lacks_is_left_out():
    pl = ba.new({"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}, None)
    with_gpus = MakeNode().name("n1").allocatable({GPU: "4"}, cpu="4", memory="8Gi", pods="110").obj()
    without = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    assert run_score(pl, MakePod().name("p").req(cpu="1", memory="2Gi").obj(), NodeInfo(with_gpus)) == 100
    assert run_score(pl, with_gpu(MakePod().name("p").req(cpu="1", memory="2Gi").obj(), "3"), NodeInfo(without)) == 100


def test_pod_overhead_counts_in_the_pods_request():
    p = MakePod().name("p").req(cpu="1", memory="2Gi").obj()
    p.spec.overhead["cpu"] = "1"
    # cpu 2/4 = 0.5, memory 0.25: std 0.125 -> 87.5 -> 87.
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    assert run_score(ba.new({}, None), p, NodeInfo(n1)) == 87


def test_prescore_skips_a_best_effort_pod():
    state = CycleState()
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    st = ba.new({}, None).pre_score(state, MakePod().name("besteffort").obj(), [NodeInfo(n1)])
    assert st.code == Code.SKIP


def test_score_without_prescore_computes_the_request_itself():
    pl = ba.new({}, None)
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    assert pl.score(CycleState(), MakePod().name("p").req(cpu="1", memory="2Gi").obj(), NodeInfo(n1)) == (100, None)
    assert pl.score(CycleState(), MakePod().name("besteffort").obj(), NodeInfo(n1)) == (0, None)


def test_balanced_score_edge_cases():
    assert ba.balanced_score([], []) == 100
    assert ba.balanced_score([5, 5], [0, 10]) == 100  # one resource: std 0
    assert ba.balanced_score([10, 0], [10, 10]) == 50


@pytest.mark.parametrize("args,fragment", [
    ({"resources": [{"name": "cpu", "weight": 1}, {"name": "cpu", "weight": 1}]},
     'resources[1].name: Duplicate value: "cpu"'),
    ({"resources": [{"name": "cpu", "weight": 2}]}, "resources[0].weight: Invalid value: 2: must be 1"),
    ({"resources": [{"weight": 1}]}, "resources[0].name: Required value"),
    ({"resources": [{"name": "cpu", "wieght": 1}]}, 'resources[0].wieght: unknown field "wieght"'),
    ({"resource": []}, 'resource: unknown field "resource"'),
])
def test_bad_args_are_refused_with_the_field(args, fragment):
    with pytest.raises(ba.ArgsError) as info:
        ba.new(args, None)
    assert fragment in str(info.value)


def test_default_resources_are_cpu_and_memory():
    assert ba.new({}, None).resources == ("cpu", "memory")
