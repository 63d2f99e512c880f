"""NodeResourcesFit: the filter's verdicts, the three scoring strategies (Kubernetes docs: Resource
Bin Packing, with its worked example) and the QueueingHints."""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import Code, CycleState, QueueingHint
from scheduler.plugins import node_resources_fit as nrf
from tests.helpers import make_pod

MI = 1024 * 1024


def node(name: str = "n1", cpu: str = "4", memory: str = "8Gi", pods: str = "110", **extra: str) -> core_pb2.Node:
    n = core_pb2.Node(api_version="v1", kind="Node")
    n.metadata.name = name
    n.status.allocatable.update({"cpu": cpu, "memory": memory, "pods": pods, **extra})
    return n


def bound(name: str, node_name: str, **kw) -> core_pb2.Pod:
    p = make_pod(name, node=node_name, **kw)
    p.metadata.uid = f"uid-{name}"
    return p


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
    ni = NodeInfo(node(cpu="2", memory="1Gi"), [])
    ni.add_pod(bound("a", "n1", cpu="1500m", memory="512Mi"))
    assert run_filter(pl, make_pod("ok", cpu="500m", memory="512Mi"), ni) is None
    st = run_filter(pl, make_pod("big", cpu="1", memory="600Mi"), ni)
    assert st.code == Code.UNSCHEDULABLE
    assert st.reasons == ["Insufficient cpu", "Insufficient memory"]


def test_more_than_the_whole_node_is_unresolvable_so_preemption_is_not_tried():
    st = run_filter(nrf.new({}, None), make_pod("huge", cpu="8"), NodeInfo(node(cpu="4"), []))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ["Insufficient cpu"]


def test_extended_resources_and_hugepages_are_added_up_per_node_and_given_back_on_removal():
    pl = nrf.new({}, None)
    ni = NodeInfo(node(**{"example.com/gpu": "2", "hugepages-2Mi": "64Mi"}), [])
    user = bound("user", "n1", containers=[("c1", {"example.com/gpu": "2", "hugepages-2Mi": "32Mi"},
                                            {"example.com/gpu": "2", "hugepages-2Mi": "32Mi"})])
    ni.add_pod(user)
    assert ni.requested.scalar == {"example.com/gpu": 2, "hugepages-2Mi": 32 * MI}
    wants = make_pod("wants", containers=[("c1", {"example.com/gpu": "1", "hugepages-2Mi": "48Mi"},
                                           {"example.com/gpu": "1", "hugepages-2Mi": "48Mi"})])
    st = run_filter(pl, wants, ni)
    assert st.code == Code.UNSCHEDULABLE
    assert sorted(st.reasons) == ["Insufficient example.com/gpu", "Insufficient hugepages-2Mi"]
    assert ni.remove_pod(user)
    assert ni.requested.scalar == {"example.com/gpu": 0, "hugepages-2Mi": 0}
    assert run_filter(pl, wants, ni) is None


def test_too_many_pods():
    ni = NodeInfo(node(pods="1"), [])
    ni.add_pod(bound("a", "n1", cpu="100m"))
    st = run_filter(nrf.new({}, None), make_pod("b"), ni)
    assert st.reasons == ["Too many pods"]


def test_pod_overhead_counts():
    pod = make_pod("o", cpu="900m")
    pod.spec.overhead["cpu"] = "200m"
    assert run_filter(nrf.new({}, None), pod, NodeInfo(node(cpu="1"), [])).reasons == ["Insufficient cpu"]


def test_a_pending_resize_keeps_its_room_kep1287():
    """The node's pod counts for max(desired unless Infeasible, allocated, actual)."""
    resizing = bound("r", "n1", cpu="3")  # desired 3, allocated and actual still 1
    cs = resizing.status.container_statuses.add(name="c1")
    cs.allocated_resources["cpu"] = "1"
    cs.resources.requests["cpu"] = "1"
    ni = NodeInfo(node(cpu="4"), [])
    ni.add_pod(resizing)
    assert run_filter(nrf.new({}, None), make_pod("p", cpu="2"), ni).reasons == ["Insufficient cpu"]
    resizing.status.conditions.add(type="PodResizePending", status="True", reason="Infeasible")
    ni2 = NodeInfo(node(cpu="4"), [])
    ni2.add_pod(resizing)
    assert run_filter(nrf.new({}, None), make_pod("p", cpu="2"), ni2) is None  # Infeasible: desired ignored


def test_least_allocated_prefers_the_emptier_node():
    pl = nrf.new({}, None)
    empty, busy = NodeInfo(node("a"), []), NodeInfo(node("b"), [])
    busy.add_pod(bound("x", "b", cpu="2", memory="4Gi"))
    pod = make_pod("p", cpu="1", memory="1Gi")
    # cpu (4000-1000)*100/4000 = 75, memory (8-1)/8 = 87 -> 81; busy: 25 and 37 -> 31.
    assert run_score(pl, pod, empty) == 81
    assert run_score(pl, pod, busy) == 31


def test_most_allocated_prefers_the_fuller_node():
    pl = nrf.new({"scoringStrategy": {"type": "MostAllocated"}}, None)
    empty, busy = NodeInfo(node("a"), []), NodeInfo(node("b"), [])
    busy.add_pod(bound("x", "b", cpu="2", memory="4Gi"))
    pod = make_pod("p", cpu="1", memory="1Gi")
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
    pod = make_pod("p", cpu="2", memory=f"{256 * MI}")
    pod.spec.containers[0].resources.requests["intel.com/foo"] = "2"
    n1 = NodeInfo(node("n1", cpu="8", memory=f"{1024 * MI}", **{"intel.com/foo": "4"}), [])
    used1 = bound("u1", "n1", cpu="1", memory=f"{256 * MI}")
    used1.spec.containers[0].resources.requests["intel.com/foo"] = "1"
    n1.add_pod(used1)
    n2 = NodeInfo(node("n2", cpu="8", memory=f"{1024 * MI}", **{"intel.com/foo": "8"}), [])
    used2 = bound("u2", "n2", cpu="6", memory=f"{512 * MI}")
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
    pod = make_pod("pending", cpu="2")
    assigned = bound("a", "n1", cpu="3")
    assert pl.is_schedulable_after_pod_event(pod, assigned, None) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_pod_event(pod, make_pod("unbound", cpu="3"), None) == QueueingHint.QUEUE_SKIP
    smaller = bound("a", "n1", cpu="1")
    assert pl.is_schedulable_after_pod_event(pod, assigned, smaller) == QueueingHint.QUEUE
    only_memory = bound("a", "n1", cpu="3", memory="1Gi")
    less_memory = bound("a", "n1", cpu="3", memory="512Mi")
    assert pl.is_schedulable_after_pod_event(pod, only_memory, less_memory) == QueueingHint.QUEUE_SKIP
    # The pending pod itself resized down (KEP-1287 scheduler logic step 2) may fit now; another
    # pending pod's resize frees nothing.
    pending, pending_smaller = make_pod("pending", cpu="6"), make_pod("pending", cpu="1500m")
    pending.metadata.uid = pending_smaller.metadata.uid = "uid-pending"
    assert pl.is_schedulable_after_pod_event(pending_smaller, pending, pending_smaller) == QueueingHint.QUEUE
    other, other_smaller = make_pod("other", cpu="3"), make_pod("other", cpu="1")
    other.metadata.uid = other_smaller.metadata.uid = "uid-other"
    assert pl.is_schedulable_after_pod_event(pending_smaller, other, other_smaller) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(pod, None, node(cpu="4")) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(pod, None, node(cpu="1")) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(pod, node(cpu="2"), node(cpu="4")) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(pod, node(cpu="4", memory="1Gi"),
                                               node(cpu="4", memory="2Gi")) == QueueingHint.QUEUE_SKIP
