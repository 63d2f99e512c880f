"""machinery/fit.py: Kubernetes' fitsRequest, and the scheduler's filter and the kubelet's
admission agreeing because both run it."""

from __future__ import annotations

import itertools

import pytest

from kubelet.allocation.manager import AllocationManager
from machinery import fit
from machinery.fit import Insufficient, Resource
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import CycleState
from scheduler.plugins import node_resources_fit as nrf
from tests.harness.builders import MakeNode, MakePod

GI = 1 << 30


def test_everything_lacking_in_kubernetes_order_with_what_is_short():
    alloc = Resource(milli_cpu=2000, memory=4 * GI, ephemeral_storage=10 * GI, allowed_pod_number=3,
                     scalar={"example.com/gpu": 1})
    used = Resource(milli_cpu=1500, memory=1 * GI, ephemeral_storage=9 * GI, scalar={"example.com/gpu": 1})
    want = Resource(milli_cpu=3000, memory=2 * GI, ephemeral_storage=2 * GI, scalar={"example.com/gpu": 1})
    lacking = fit.fits_request(want, alloc, used, pods=3)
    assert [i.resource for i in lacking] == ["pods", "cpu", "ephemeral-storage", "example.com/gpu"]
    assert lacking[1] == Insufficient("cpu", "Insufficient cpu", 3000, 1500, 2000, unresolvable=True)
    assert [i.short for i in lacking] == [1, 2500, 1 * GI, 1]
    assert not lacking[2].unresolvable and not lacking[3].unresolvable


def test_ignored_scalars_and_the_pod_count_of_a_pod_already_there():
    alloc = Resource(milli_cpu=1000, allowed_pod_number=1, scalar={"example.com/gpu": 0})
    want = Resource(milli_cpu=100, scalar={"example.com/gpu": 1, "other.io/x": 1})
    assert [i.resource for i in fit.fits_request(want, alloc, Resource(), pods=1)] == \
        ["pods", "example.com/gpu", "other.io/x"]
    assert fit.fits_request(want, alloc, Resource(), pods=None, ignored=frozenset({"example.com/gpu"}),
                            ignored_groups=frozenset({"other.io"})) == []


def test_a_pod_asking_nothing_only_needs_a_pod_slot():
    alloc = Resource(allowed_pod_number=1)
    assert fit.fits_request(Resource(), alloc, Resource(milli_cpu=10**6), pods=0) == []
    assert [i.reason for i in fit.fits_request(Resource(), alloc, Resource(), pods=1)] == ["Too many pods"]


CPUS = ["0", "500m", "1500m", "3"]
MEMS = ["0", "1Gi", "3Gi"]


@pytest.mark.parametrize("cpu,mem", list(itertools.product(CPUS, MEMS)))
def test_the_scheduler_and_the_kubelet_reach_the_same_verdict(tmp_path, cpu, mem):
    """The same node (2 CPUs, 4Gi, 2 pods) with the same pod on it: whatever the new pod asks,
    NodeResourcesFit's reasons and the kubelet's OutOf<resource> name the same first lack."""
    running = MakePod().name("running").uid("uid-running").req(cpu="1", memory="2Gi").node("n1").obj()
    pod = MakePod().name("new").uid("uid-new").req(cpu=cpu, memory=mem).obj()

    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="2", memory="4Gi", pods="2").obj(), [])
    ni.add_pod(running)
    plugin = nrf.new({}, None)
    state = CycleState()
    plugin.pre_filter(state, pod, [ni])
    status = plugin.filter(state, pod, ni)

    m = AllocationManager(tmp_path, "n1", {"cpu": 2000, "memory": 4 * GI, "pods": 2}, 2)
    m.load()
    verdict = m.fits(pod, [running])

    assert (status is None) == verdict.ok, (status, verdict)
    if status is not None:
        first = status.reasons[0].removeprefix("Insufficient ")
        assert verdict.reason == f"OutOf{first}", (status.reasons, verdict)
        assert m.missing(pod, [running]) == {i.resource: i.short for i in nrf.fits_request(
            nrf._compute_request(pod), ni)}
