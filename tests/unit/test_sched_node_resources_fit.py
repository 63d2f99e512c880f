"""NodeResourcesFit: the filter's verdicts, the three scoring strategies (Kubernetes docs: Resource
Bin Packing, with its worked example) and the QueueingHints."""

from __future__ import annotations

import pytest

from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import Code, CycleState, QueueingHint
from scheduler.plugins import node_resources_fit as nrf
from tests.harness.builders import MakeNode, MakePod

MI = 1024 * 1024


def run_filter(plugin, pod, ni):
    state = CycleState()
    plugin.pre_filter(state, pod, [ni])
    return plugin.filter(state, pod, ni)


def run_score(plugin, pod, ni):
    state = CycleState()
    plugin.pre_score(state, pod, [ni])
    score, status = plugin.score(state, pod, ni)
    assert status is None
    return score


def test_a_pod_that_fits_passes_and_one_that_does_not_is_insufficient():
    pl = nrf.new({}, None)
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="2", memory="1Gi", pods="110").obj(), [])
    ni.add_pod(MakePod().name("a").uid("uid-a").req(cpu="1500m", memory="512Mi").node("n1").obj())
    assert run_filter(pl, MakePod().name("ok").req(cpu="500m", memory="512Mi").obj(), ni) is None
    st = run_filter(pl, MakePod().name("big").req(cpu="1", memory="600Mi").obj(), ni)
    assert st.code == Code.UNSCHEDULABLE
    assert st.reasons == ["Insufficient cpu", "Insufficient memory"]


def test_more_than_the_whole_node_is_unresolvable_so_preemption_is_not_tried():
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    st = run_filter(nrf.new({}, None), MakePod().name("huge").req(cpu="8").obj(), NodeInfo(n1, []))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ["Insufficient cpu"]


def test_extended_resources_and_hugepages_are_added_up_per_node_and_given_back_on_removal():
    pl = nrf.new({}, None)
    ni = NodeInfo(MakeNode().name("n1")
                  .allocatable({"example.com/gpu": "2", "hugepages-2Mi": "64Mi"}, cpu="4", memory="8Gi", pods="110")
                  .obj(), [])
    user = (MakePod().name("user").uid("uid-user").req({"example.com/gpu": "2", "hugepages-2Mi": "32Mi"})
            .lim({"example.com/gpu": "2", "hugepages-2Mi": "32Mi"}).node("n1").obj())
    ni.add_pod(user)
    assert ni.requested.scalar == {"example.com/gpu": 2, "hugepages-2Mi": 32 * MI}
    wants = (MakePod().name("wants").req({"example.com/gpu": "1", "hugepages-2Mi": "48Mi"})
             .lim({"example.com/gpu": "1", "hugepages-2Mi": "48Mi"}).obj())
    st = run_filter(pl, wants, ni)
    assert st.code == Code.UNSCHEDULABLE
    assert sorted(st.reasons) == ["Insufficient example.com/gpu", "Insufficient hugepages-2Mi"]
    assert ni.remove_pod(user)
    assert ni.requested.scalar == {"example.com/gpu": 0, "hugepages-2Mi": 0}
    assert run_filter(pl, wants, ni) is None


def test_too_many_pods():
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="1").obj(), [])
    ni.add_pod(MakePod().name("a").uid("uid-a").req(cpu="100m").node("n1").obj())
    st = run_filter(nrf.new({}, None), MakePod().name("b").obj(), ni)
    assert st.reasons == ["Too many pods"]


def test_pod_overhead_counts():
    pod = MakePod().name("o").req(cpu="900m").obj()
    pod.spec.overhead["cpu"] = "200m"
    n1 = MakeNode().name("n1").allocatable(cpu="1", memory="8Gi", pods="110").obj()
    assert run_filter(nrf.new({}, None), pod, NodeInfo(n1, [])).reasons == ["Insufficient cpu"]


def test_a_pending_resize_keeps_its_room_kep1287():
    """The node's pod counts for max(desired unless Infeasible, allocated, actual)."""
    resizing = MakePod().name("r").uid("uid-r").req(cpu="3").node("n1").obj()  # desired 3, allocated and actual still 1
    cs = resizing.status.container_statuses.add(name="c1")
    cs.allocated_resources["cpu"] = "1"
    cs.resources.requests["cpu"] = "1"
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj(), [])
    ni.add_pod(resizing)
    assert run_filter(nrf.new({}, None), MakePod().name("p").req(cpu="2").obj(), ni).reasons == ["Insufficient cpu"]
    resizing.status.conditions.add(type="PodResizePending", status="True", reason="Infeasible")
    ni2 = NodeInfo(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj(), [])
    ni2.add_pod(resizing)
    # Infeasible: desired ignored
    assert run_filter(nrf.new({}, None), MakePod().name("p").req(cpu="2").obj(), ni2) is None


def test_least_allocated_prefers_the_emptier_node():
    pl = nrf.new({}, None)
    empty = NodeInfo(MakeNode().name("a").allocatable(cpu="4", memory="8Gi", pods="110").obj(), [])
    busy = NodeInfo(MakeNode().name("b").allocatable(cpu="4", memory="8Gi", pods="110").obj(), [])
    busy.add_pod(MakePod().name("x").uid("uid-x").req(cpu="2", memory="4Gi").node("b").obj())
    pod = MakePod().name("p").req(cpu="1", memory="1Gi").obj()
    # cpu (4000-1000)*100/4000 = 75, memory (8-1)/8 = 87 -> 81; busy: 25 and 37 -> 31.
    assert run_score(pl, pod, empty) == 81
    assert run_score(pl, pod, busy) == 31


def test_most_allocated_prefers_the_fuller_node():
    pl = nrf.new({"scoringStrategy": {"type": "MostAllocated"}}, None)
    empty = NodeInfo(MakeNode().name("a").allocatable(cpu="4", memory="8Gi", pods="110").obj(), [])
    busy = NodeInfo(MakeNode().name("b").allocatable(cpu="4", memory="8Gi", pods="110").obj(), [])
    busy.add_pod(MakePod().name("x").uid("uid-x").req(cpu="2", memory="4Gi").node("b").obj())
    pod = MakePod().name("p").req(cpu="1", memory="1Gi").obj()
    assert run_score(pl, pod, busy) > run_score(pl, pod, empty)


def test_requested_to_capacity_ratio_the_documents_worked_example():
    """Kubernetes docs: Resource Bin Packing, "Node scoring for capacity allocation": shape
    {0,0},{100,10}; weights foo 5, memory 1, cpu 3. The document works in tenths (node 1 ≈ 5,
    node 2 ≈ 7); Kubernetes scales the shape by 10, so the exact scores are 59 and 69, in the
    same order."""
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                "resources": [{"name": "intel.com/foo", "weight": 5}, {"name": "memory", "weight": 1},
                                              {"name": "cpu", "weight": 3}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 10}]}}}
    pl = nrf.new(args, None)
    pod = MakePod().name("p").req(cpu="2", memory=f"{256 * MI}").obj()
    pod.spec.containers[0].resources.requests["intel.com/foo"] = "2"
    n1 = NodeInfo(MakeNode().name("n1")
                  .allocatable({"intel.com/foo": "4"}, cpu="8", memory=f"{1024 * MI}", pods="110").obj(), [])
    used1 = MakePod().name("u1").uid("uid-u1").req(cpu="1", memory=f"{256 * MI}").node("n1").obj()
    used1.spec.containers[0].resources.requests["intel.com/foo"] = "1"
    n1.add_pod(used1)
    n2 = NodeInfo(MakeNode().name("n2")
                  .allocatable({"intel.com/foo": "8"}, cpu="8", memory=f"{1024 * MI}", pods="110").obj(), [])
    used2 = MakePod().name("u2").uid("uid-u2").req(cpu="6", memory=f"{512 * MI}").node("n2").obj()
    used2.spec.containers[0].resources.requests["intel.com/foo"] = "2"
    n2.add_pod(used2)
    # foo 75, memory 50, cpu 37 -> (75*5 + 50 + 37*3) / 9 = 59; foo 50, memory 75, cpu 100 -> 69.
    assert run_score(pl, pod, n1) == 59
    assert run_score(pl, pod, n2) == 69


@pytest.mark.parametrize("args,fragment", [
    ({"scoringStrategy": {"type": "Random"}}, "Unsupported value"),
    ({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
     "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of cpu not in valid range (0, 100]"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
     "scoringStrategy.requestedToCapacityRatio: Required value: must be specified when type is "
     "RequestedToCapacityRatio"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {"shape": []}}},
     "scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point"),
    ({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 50, "score": 1}, {"utilization": 10, "score": 2}]}}}, "sorted in increasing order"),
])
def test_bad_args_are_refused_with_the_field(args, fragment):
    with pytest.raises(nrf.ArgsError) as info:
        nrf.new(args, None)
    assert fragment in str(info.value)


def test_hints_an_assigned_pod_deleted_or_scaled_down_or_a_node_that_fits_queue():
    pl = nrf.new({}, None)
    pod = MakePod().name("pending").req(cpu="2").obj()
    assigned = MakePod().name("a").uid("uid-a").req(cpu="3").node("n1").obj()
    assert pl.is_schedulable_after_pod_event(pod, assigned, None) == QueueingHint.QUEUE
    unbound = MakePod().name("unbound").req(cpu="3").obj()
    assert pl.is_schedulable_after_pod_event(pod, unbound, None) == QueueingHint.QUEUE_SKIP
    smaller = MakePod().name("a").uid("uid-a").req(cpu="1").node("n1").obj()
    assert pl.is_schedulable_after_pod_event(pod, assigned, smaller) == QueueingHint.QUEUE
    only_memory = MakePod().name("a").uid("uid-a").req(cpu="3", memory="1Gi").node("n1").obj()
    less_memory = MakePod().name("a").uid("uid-a").req(cpu="3", memory="512Mi").node("n1").obj()
    assert pl.is_schedulable_after_pod_event(pod, only_memory, less_memory) == QueueingHint.QUEUE_SKIP
    # The pending pod itself resized down (KEP-1287 scheduler logic step 2) may fit now; another
    # pending pod's resize frees nothing.
    pending = MakePod().name("pending").req(cpu="6").obj()
    pending_smaller = MakePod().name("pending").req(cpu="1500m").obj()
    pending.metadata.uid = pending_smaller.metadata.uid = "uid-pending"
    assert pl.is_schedulable_after_pod_event(pending_smaller, pending, pending_smaller) == QueueingHint.QUEUE
    other = MakePod().name("other").req(cpu="3").obj()
    other_smaller = MakePod().name("other").req(cpu="1").obj()
    other.metadata.uid = other_smaller.metadata.uid = "uid-other"
    assert pl.is_schedulable_after_pod_event(pending_smaller, other, other_smaller) == QueueingHint.QUEUE_SKIP
    four_cpus = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    one_cpu = MakeNode().name("n1").allocatable(cpu="1", memory="8Gi", pods="110").obj()
    two_cpus = MakeNode().name("n1").allocatable(cpu="2", memory="8Gi", pods="110").obj()
    assert pl.is_schedulable_after_node_change(pod, None, four_cpus) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(pod, None, one_cpu) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(pod, two_cpus, four_cpus) == QueueingHint.QUEUE
    one_gi = MakeNode().name("n1").allocatable(cpu="4", memory="1Gi", pods="110").obj()
    two_gi = MakeNode().name("n1").allocatable(cpu="4", memory="2Gi", pods="110").obj()
    assert pl.is_schedulable_after_node_change(pod, one_gi, two_gi) == QueueingHint.QUEUE_SKIP
