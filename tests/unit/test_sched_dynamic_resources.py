"""The DynamicResources plugin at each extension point, over fake informers and a fake API: kube-scheduler's
dynamicresources plugin with structured parameters (Kubernetes docs: Dynamic Resource Allocation,
"With structured parameters") — a pod's claims must exist and be its own, a node fits when its
slices have enough free devices of the class matching the request's selectors, devices set aside
at Reserve are not given to the next pod in flight (Kubernetes' inFlightAllocations), PreBind
writes the allocation and the reservation, and the QueueingHints say which events can help; KEP-6132's
TestPreQueueingHint (``test_pre_queueing_hint``): the claim events' PreQueueingHint over the claim ->
pods index."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import REGISTRY

from kubelet.dra.driver import device_class, resource_slice
from machinery import errors, failpoints
from machinery.api import core_pb2, resource_pb2
from machinery.dra import resourceclaim as rc
from machinery.dra.allocator import DeviceID, NodeDevices, allocated_device_ids, usable_devices
from machinery.informer import Informer
from machinery.kinds import POD
from scheduler.framework.features import Features
from scheduler.framework.interfaces import Services
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.runtime import new_handle
from scheduler.framework.types import (
    ALL_PODS,
    EVENT_RESOURCE_CLAIM_ADD,
    EVENT_RESOURCE_CLAIM_UPDATE,
    Code,
    CycleState,
    PreQueueingHintResult,
    QueueingHint,
)
from scheduler.plugins import dynamic_resources as dr
from scheduler.queue.scheduling_queue import UNSCHEDULABLE_Q, SchedulingQueue
from tests.harness.builders import MakeNode, MakePod


class FakeDRA:
    """The scheduler's DRA informers (``SharedDRAManager``), as the test fills them."""

    def __init__(self) -> None:
        self.claims: dict[str, resource_pb2.ResourceClaim] = {}
        self.classes = {"gpu.kplane.dev": device_class()}
        self.slices = [resource_slice("node-1", 2), resource_slice("node-2", 2)]

    def get_claim(self, namespace: str, name: str) -> resource_pb2.ResourceClaim | None:
        return self.claims.get(f"{namespace}/{name}")

    def get_device_class(self, name: str) -> resource_pb2.DeviceClass | None:
        return self.classes.get(name)

    def slices_for(self, node_name: str) -> list[resource_pb2.ResourceSlice]:
        return [s for s in self.slices if not s.spec.HasField("node_name") or s.spec.node_name == node_name]

    def usable_devices(self, node: core_pb2.Node) -> NodeDevices:
        return usable_devices(node, self.slices_for(node.metadata.name))

    def is_allocated(self, device: DeviceID) -> bool:
        return any(device in allocated_device_ids(c) for c in self.claims.values())

    def put(self, claim: resource_pb2.ResourceClaim) -> resource_pb2.ResourceClaim:
        self.claims[f"{claim.metadata.namespace}/{claim.metadata.name}"] = claim
        return claim


class FakeClaimsApi:
    """``client.resource_claims``: what PreBind and Unreserve call, with resourceVersions."""

    def __init__(self, dra: FakeDRA):
        self.dra = dra
        self.stored: dict[str, resource_pb2.ResourceClaim] = {}
        self.rv = 1000
        self.calls: list[str] = []

    def _write(self, claim: resource_pb2.ResourceClaim) -> resource_pb2.ResourceClaim:
        key = f"{claim.metadata.namespace}/{claim.metadata.name}"
        current = self.stored.get(key) or self.dra.claims[key]
        if claim.metadata.resource_version != current.metadata.resource_version:
            raise errors.Conflict("the object has been modified")
        self.rv += 1
        out = resource_pb2.ResourceClaim()
        out.CopyFrom(claim)
        out.metadata.resource_version = str(self.rv)
        self.stored[key] = out
        return out

    async def get(self, name: str, namespace: str = "") -> resource_pb2.ResourceClaim:
        key = f"{namespace}/{name}"
        return self.stored.get(key) or self.dra.claims[key]

    async def update(self, claim: resource_pb2.ResourceClaim) -> resource_pb2.ResourceClaim:
        self.calls.append("update")
        return self._write(claim)

    async def update_status(self, claim: resource_pb2.ResourceClaim) -> resource_pb2.ResourceClaim:
        self.calls.append("update_status")
        return self._write(claim)

    async def patch(self, name: str, patch: Any, **_: Any) -> None:
        self.calls.append(f"patch {name} {patch}")


class FakeClient:
    def __init__(self, dra: FakeDRA):
        self.resource_claims = FakeClaimsApi(dra)

    def resource(self, kind: object) -> object:
        return kind


@pytest.fixture
def dra() -> FakeDRA:
    return FakeDRA()


@pytest.fixture
def client(dra) -> FakeClient:
    return FakeClient(dra)


@pytest.fixture
def plugin(dra, client) -> dr.DynamicResources:
    return dr.new(None, new_handle(Services(dra=dra, client=client)))  # type: ignore[arg-type]


NODES = {name: NodeInfo(MakeNode().name(name).obj()) for name in ("node-1", "node-2")}


def claim(name: str, count: int = 1, *selectors: str, owner: core_pb2.Pod | None = None,
          rv: str = "10") -> resource_pb2.ResourceClaim:
    c = resource_pb2.ResourceClaim()
    c.metadata.name, c.metadata.namespace, c.metadata.uid = name, "default", f"uid-{name}"
    c.metadata.resource_version = rv
    r = c.spec.devices.requests.add(name="gpu")
    r.exactly.device_class_name, r.exactly.allocation_mode, r.exactly.count = "gpu.kplane.dev", "ExactCount", count
    for expr in selectors:
        r.exactly.selectors.add().cel.expression = expr
    if owner is not None:
        c.metadata.owner_references.add(api_version="v1", kind="Pod", name=owner.metadata.name,
                                        uid=owner.metadata.uid, controller=True)
    return c


def pod_with_template(name: str, generated: str | None = None) -> core_pb2.Pod:
    """A pod whose claim "gpu" comes from a template; ``generated``: the name the controller recorded."""
    pod = MakePod().name(name).uid(f"uid-{name}").obj()
    pod.spec.resource_claims.add(name="gpu", resource_claim_template_name="gpu")
    if generated:
        pod.status.resource_claim_statuses.add(name="gpu", resource_claim_name=generated)
    return pod


def pod_sharing(name: str, claim_name: str) -> core_pb2.Pod:
    pod = MakePod().name(name).uid(f"uid-{name}").obj()
    pod.spec.resource_claims.add(name="gpu", resource_claim_name=claim_name)
    return pod


def gpu_pod(dra: FakeDRA, name: str, count: int = 1, *selectors: str) -> core_pb2.Pod:
    """A pod with its generated claim there, unallocated."""
    pod = pod_with_template(name, f"{name}-gpu")
    dra.put(claim(f"{name}-gpu", count, *selectors, owner=pod))
    return pod


def cycle(plugin: dr.DynamicResources, pod: core_pb2.Pod) -> tuple[CycleState, dict[str, Any]]:
    """PreFilter, then Filter on each node: the state and each node's status (None: fits)."""
    state = CycleState()
    _, status = plugin.pre_filter(state, pod, list(NODES.values()))
    assert status is None, status
    return state, {name: plugin.filter(state, pod, ni) for name, ni in NODES.items()}


def reasons(status) -> tuple[Code, str]:
    return status.code, status.message()


# ---------------------------------------------------------------- PreFilter


def test_a_pod_without_claims_skips_the_plugin(plugin):
    _, status = plugin.pre_filter(CycleState(), MakePod().name("plain").obj(), [])
    assert status.code == Code.SKIP


def test_a_pod_waits_for_its_claim_and_for_a_claim_of_its_own(plugin, dra):
    pod = pod_with_template("web")
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert reasons(status) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                               'waiting for resource claim: pod "default/web": ResourceClaim not created yet')
    pod = pod_with_template("web", "web-gpu-x7k2p")
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert status.message() == 'waiting for resource claim: resourceclaim.resource.k8s.io "web-gpu-x7k2p" not found'
    dra.put(claim("web-gpu-x7k2p", owner=MakePod().name("other").uid("uid-other").obj()))
    _, status = plugin.pre_filter(CycleState(), pod, [])
    assert status.message() == ("ResourceClaim default/web-gpu-x7k2p was not created for pod default/web "
                                "(pod is not owner)")


def test_pre_enqueue_keeps_a_pod_out_of_active_q_until_its_claims_are_there(plugin, dra):
    """Kubernetes' PreEnqueue: no attempt (no backoff, no status write) while a claim is missing;
    the pod waits gated for the claim events and its own status update."""
    assert plugin.pre_enqueue(MakePod().name("plain").obj()) is None
    pod = pod_with_template("web")
    not_created = 'waiting for resource claim: pod "default/web": ResourceClaim not created yet'
    assert reasons(plugin.pre_enqueue(pod)) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, not_created)
    pod = pod_with_template("web", "web-gpu")
    assert plugin.pre_enqueue(pod).message() == \
        'waiting for resource claim: resourceclaim.resource.k8s.io "web-gpu" not found'
    dra.put(claim("web-gpu", owner=pod))
    assert plugin.pre_enqueue(pod) is None, "its claim is there (allocating it is for the attempt)"
    assert plugin.pre_enqueue(pod_sharing("reader", "web-gpu")) is None


def _deferred(pod: core_pb2.Pod) -> core_pb2.Pod:
    """``pod`` bound to node-1 with its in-place resize Deferred by the kubelet."""
    pod.spec.node_name = "node-1"
    pod.status.conditions.add(type="PodResizePending", status="True", reason="Deferred")
    return pod


@pytest.mark.parametrize("gate", [True, False], ids=["resize preemption on", "resize preemption off"])
def test_a_deferred_resize_skips_the_plugin_whatever_its_claims(dra, client, gate):
    """KEP-5836 "Processing Deferred Resizes in the Scheduling Cycle": every plugin but NodeName,
    NodeResourcesFit and DefaultPreemption skips a Deferred pod — here its claim is being deleted,
    which holds a new pod at PreEnqueue and PreFilter. With the gate off the plugin is unchanged."""
    plugin = dr.new(None, new_handle(Services(dra=dra, client=client, features=Features(
        enable_scheduler_preemption_for_pod_resize=gate))))  # type: ignore[arg-type]
    pod = _deferred(pod_sharing("resizing", "gpu"))
    deleting = claim("gpu")
    deleting.metadata.deletion_timestamp = "2026-11-28T05:00:00Z"
    dra.put(deleting)
    _, status = plugin.pre_filter(CycleState(), pod, list(NODES.values()))
    if gate:
        assert plugin.pre_enqueue(pod) is None
        assert status.code == Code.SKIP
    else:
        assert reasons(plugin.pre_enqueue(pod))[0] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    pending = pod_sharing("pending", "gpu")  # not bound: waits for the claim whatever the gate
    assert reasons(plugin.pre_enqueue(pending))[0] == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_a_missing_device_class_or_a_selector_kplane_cannot_evaluate_waits(plugin, dra):
    del dra.classes["gpu.kplane.dev"]
    _, status = plugin.pre_filter(CycleState(), gpu_pod(dra, "web"), [])
    assert reasons(status) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                               "request gpu: device class gpu.kplane.dev does not exist")
    dra.classes["gpu.kplane.dev"] = device_class()
    _, status = plugin.pre_filter(CycleState(), gpu_pod(dra, "cel", 1, 'device.attributes["x"].n > 1'), [])
    assert "resource claim default/cel-gpu, request gpu: selector" in status.message()
    assert "is not supported" in status.message()


# ---------------------------------------------------------------- Filter: counts and attributes


def test_a_node_fits_when_its_slices_have_enough_free_devices_of_the_class(plugin, dra):
    _, statuses = cycle(plugin, gpu_pod(dra, "two", 2))
    assert statuses == {"node-1": None, "node-2": None}
    _, statuses = cycle(plugin, gpu_pod(dra, "three", 3))
    assert {n: reasons(s) for n, s in statuses.items()} == {
        n: (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "cannot allocate all claims") for n in NODES}
    held = dra.put(claim("held", owner=None))
    held.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1", device="gpu-0")
    _, statuses = cycle(plugin, gpu_pod(dra, "again", 2))
    assert statuses["node-1"] is not None and statuses["node-2"] is None, "node-1 has one free device left"


def test_exact_value_attribute_selectors_pick_the_device(plugin, dra):
    pod = gpu_pod(dra, "second", 1, 'device.attributes["dra.kplane.dev"].index == 1')
    state, statuses = cycle(plugin, pod)
    assert statuses == {"node-1": None, "node-2": None}
    assert plugin.reserve(state, pod, "node-2") is None
    assert [(r.pool, r.device) for r in plugin._in_flight["uid-second-gpu"].status.allocation.devices.results] == \
        [("node-2", "gpu-1")]
    _, statuses = cycle(plugin, gpu_pod(dra, "h100", 1, 'device.attributes["dra.kplane.dev"].model == "h100"'))
    assert all(s is not None for s in statuses.values())


# ---------------------------------------------------------------- Reserve: pods in flight


def test_devices_reserved_for_a_pod_in_flight_are_not_given_to_the_next_pod(plugin, dra):
    dra.slices = [resource_slice("node-1", 1)]
    first, second = gpu_pod(dra, "first"), gpu_pod(dra, "second")
    state, statuses = cycle(plugin, first)
    assert statuses["node-1"] is None
    assert plugin.reserve(state, first, "node-1") is None
    _, statuses = cycle(plugin, second)
    assert statuses["node-1"].message() == "cannot allocate all claims", "gpu-0 is in flight for the first pod"
    plugin.unreserve(state, first, "node-1")
    _, statuses = cycle(plugin, second)
    assert statuses["node-1"] is None, "unreserved: gpu-0 is free again"


def test_two_pods_in_flight_get_different_devices(plugin, dra):
    dra.slices = [resource_slice("node-1", 2)]
    devices = []
    for name in ("a", "b"):
        pod = gpu_pod(dra, name)
        state, _ = cycle(plugin, pod)
        assert plugin.reserve(state, pod, "node-1") is None
        devices += [r.device for r in plugin._in_flight[f"uid-{name}-gpu"].status.allocation.devices.results]
    assert devices == ["gpu-0", "gpu-1"]


def test_a_pod_sharing_a_claim_in_flight_waits_for_its_allocation(plugin, dra):
    owner = gpu_pod(dra, "owner")
    state, _ = cycle(plugin, owner)
    plugin.reserve(state, owner, "node-1")
    _, status = plugin.pre_filter(CycleState(), pod_sharing("reader", "owner-gpu"), [])
    assert status.message() == "resource claim default/owner-gpu is in the process of being allocated"


# ---------------------------------------------------------------- PreBind


async def test_pre_bind_writes_the_finalizer_allocation_and_reservation_and_keeps_them_counted(plugin, dra, client):
    dra.slices = [resource_slice("node-1", 1)]
    pod = gpu_pod(dra, "web")
    state, _ = cycle(plugin, pod)
    plugin.reserve(state, pod, "node-1")
    assert await plugin.pre_bind(state, pod, "node-1") is None
    written = client.resource_claims.stored["default/web-gpu"]
    assert client.resource_claims.calls == ["update", "update_status"], "the finalizer, then the status"
    assert rc.FINALIZER in written.metadata.finalizers
    assert [(r.driver, r.pool, r.device) for r in written.status.allocation.devices.results] == \
        [("dra.kplane.dev", "node-1", "gpu-0")]
    assert list(written.status.allocation.node_selector.node_selector_terms[0].match_fields[0].values) == ["node-1"]
    assert [(r.resource, r.name, r.uid) for r in written.status.reserved_for] == [("pods", "web", "uid-web")]
    assert plugin._in_flight == {}
    # The informer still shows the claim unallocated: the written version is what counts.
    _, statuses = cycle(plugin, gpu_pod(dra, "next"))
    assert statuses["node-1"].message() == "cannot allocate all claims"
    dra.put(written)  # the informer caught up
    assert plugin._extra_allocated() == set() and plugin._assumed == {}


async def test_pre_bind_of_an_allocated_claim_only_adds_the_reservation(plugin, dra, client):
    owner = pod_with_template("owner", "shared")
    shared = dra.put(claim("shared", owner=owner))
    shared.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1",
                                                 device="gpu-0")
    shared.status.allocation.node_selector.node_selector_terms.add().match_fields.add(
        key="metadata.name", operator="In", values=["node-1"])
    shared.status.reserved_for.add(resource="pods", name="owner", uid="uid-owner")
    reader = pod_sharing("reader", "shared")
    state, statuses = cycle(plugin, reader)
    assert statuses["node-1"] is None
    assert reasons(statuses["node-2"]) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                           "resourceclaim not available on the node")
    assert await plugin.pre_bind(state, reader, "node-1") is None
    assert client.resource_claims.calls == ["update_status"]
    assert [r.name for r in client.resource_claims.stored["default/shared"].status.reserved_for] == ["owner", "reader"]


def test_a_claim_whose_reservations_are_full_is_in_use(plugin, dra):
    full = dra.put(claim("full"))
    full.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1", device="gpu-0")
    for i in range(rc.RESERVED_FOR_MAX_SIZE):
        full.status.reserved_for.add(resource="pods", name=f"p{i}", uid=f"u{i}")
    _, status = plugin.pre_filter(CycleState(), pod_sharing("late", "full"), [])
    assert reasons(status) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "resourceclaim in use")


# ---------------------------------------------------------------- QueueingHints


def test_claim_hints(plugin, dra):
    waiting = pod_with_template("web", "web-gpu")
    created = claim("web-gpu", owner=waiting)
    assert plugin.is_schedulable_after_claim_change(waiting, None, created) == QueueingHint.QUEUE_SKIP, \
        "the informer does not show it yet: the pod still waits"
    dra.put(created)
    assert plugin.is_schedulable_after_claim_change(waiting, None, created) == QueueingHint.QUEUE, "its claim created"
    other_before = claim("other-gpu")
    other_before.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1",
                                                       device="gpu-0")
    other_after = claim("other-gpu", rv="11")
    assert plugin.is_schedulable_after_claim_change(waiting, other_before, other_after) == QueueingHint.QUEUE, \
        "deallocated: devices free for anyone"
    assert plugin.is_schedulable_after_claim_change(waiting, other_after, other_before) == QueueingHint.QUEUE_SKIP, \
        "another pod's claim allocated"
    finalized = claim("web-gpu", owner=waiting, rv="12")
    finalized.metadata.finalizers.append(rc.FINALIZER)
    assert plugin.is_schedulable_after_claim_change(waiting, created, finalized) == QueueingHint.QUEUE_SKIP, \
        "its claim changed but not its status"


def test_pod_and_slice_hints(plugin, dra):
    before = pod_with_template("web")
    after = pod_with_template("web", "web-gpu")
    assert plugin.is_schedulable_after_pod_change(before, before, after) == QueueingHint.QUEUE_SKIP, \
        "its claim's name recorded, the claim not yet seen"
    dra.put(claim("web-gpu", owner=after))
    assert plugin.is_schedulable_after_pod_change(before, before, after) == QueueingHint.QUEUE
    assert plugin.is_schedulable_after_pod_change(pod_with_template("other"), before, after) == \
        QueueingHint.QUEUE_SKIP
    s = resource_slice("node-3", 2)
    assert plugin.is_schedulable_after_slice_change(before, None, s) == QueueingHint.QUEUE
    assert plugin.is_schedulable_after_slice_change(before, s, s) == QueueingHint.QUEUE_SKIP
    assert plugin.is_schedulable_after_slice_change(before, s, resource_slice("node-3", 3)) == QueueingHint.QUEUE


# ---------------------------------------------------------------- the claim -> pods index


class _Lister:
    def resource(self, kind: object) -> object:
        return kind


def test_the_claim_index_on_the_pod_informer_finds_every_pod_naming_a_claim_by_spec():
    """KEP-6132 "Design Details": the index maps a claim to the pods that reference it in their
    spec.resourceClaims — a generated claim another pod shares too, not only its owner."""
    pods: Informer[core_pb2.Pod] = Informer(_Lister(), POD)  # type: ignore[arg-type]
    handle = new_handle(Services(pod_indexes=pods))
    dr.new(None, handle)
    owner = pod_with_template("owner", "owner-gpu-x7k2p")
    reader = pod_sharing("reader", "owner-gpu-x7k2p")
    waiting = pod_with_template("waiting")
    for p in (owner, reader, waiting):
        p.metadata.resource_version = "1"
        pods._apply("ADDED", p)
    assert sorted(p.metadata.name for p in dr.pods_for_claim(handle, "default", "owner-gpu-x7k2p")) == \
        ["owner", "reader"]
    assert dr.pods_for_claim(handle, "default", "nobody") == []
    recorded = pod_with_template("waiting", "waiting-gpu-abcde")
    recorded.metadata.resource_version = "2"
    pods._apply("MODIFIED", recorded)
    assert [p.metadata.name for p in dr.pods_for_claim(handle, "default", "waiting-gpu-abcde")] == ["waiting"]


# ---------------------------------------------------------------- KEP-6132 PreQueueingHint


class _BrokenIndex:
    """A pod informer whose claim index cannot answer."""

    def add_indexer(self, name: str, fn: Any) -> None:
        pass

    def by_index(self, name: str, value: str) -> list[core_pb2.Pod]:
        raise RuntimeError("index unavailable")


def _allocated(name: str, rv: str = "10") -> resource_pb2.ResourceClaim:
    c = claim(name, rv=rv)
    c.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1", device="gpu-0")
    return c


def _indexed_plugin() -> dr.DynamicResources:
    """The plugin over a pod informer holding: owner (its claim generated from a template), reader
    (naming owner's generated claim) and waiting (its claim not created yet)."""
    pods: Informer[core_pb2.Pod] = Informer(_Lister(), POD)  # type: ignore[arg-type]
    plugin = dr.new(None, new_handle(Services(pod_indexes=pods)))
    for p in (pod_with_template("owner", "owner-gpu-x7k2p"), pod_sharing("reader", "owner-gpu-x7k2p"),
              pod_with_template("waiting")):
        p.metadata.resource_version = "1"
        pods._apply("ADDED", p)
    return plugin


PRE_QUEUEING_HINT_CASES: dict[str, tuple[Any, Any, PreQueueingHintResult]] = {
    # (old, new, what the PreQueueingHint says)
    "pod lookup via index: a generated claim created, its owner and the pod sharing it": (
        None, claim("owner-gpu-x7k2p"), PreQueueingHintResult.narrowed(["default/owner", "default/reader"])),
    "pod lookup via index: that claim allocated": (
        claim("owner-gpu-x7k2p"), _allocated("owner-gpu-x7k2p", rv="11"),
        PreQueueingHintResult.narrowed(["default/owner", "default/reader"])),
    "deallocation fallback: allocation non-nil -> nil is every pod": (
        _allocated("somebody-gpu"), claim("somebody-gpu", rv="11"), ALL_PODS),
    "empty index (no pods affected)": (None, claim("nobody-gpu"), PreQueueingHintResult.narrowed([])),
    "not a claim: every pod": (None, None, ALL_PODS),
}


@pytest.mark.parametrize(("old", "new", "expected"), list(PRE_QUEUEING_HINT_CASES.values()),
                         ids=list(PRE_QUEUEING_HINT_CASES))
def test_pre_queueing_hint(old, new, expected):
    """KEP-6132 "Test Plan", TestPreQueueingHint, over the claim -> pods index ("DRA Plugin
    Implementation"): pod lookup via index, deallocation fallback, empty index (no pods affected);
    error handling below."""
    result = _indexed_plugin().pre_queueing_hint_for_claim(old, new)
    assert (result.all_pods, sorted(result.pods)) == (expected.all_pods, sorted(expected.pods))


def test_pre_queueing_hint_error_handling():
    """TestPreQueueingHint, error handling: "If the index lookup fails, signal 'evaluate all
    pods' as a safe fallback" — an index that raises, or one no DynamicResources plugin added."""
    plugin = dr.new(None, new_handle(Services(pod_indexes=_BrokenIndex())))
    assert plugin.pre_queueing_hint_for_claim(None, claim("owner-gpu-x7k2p")) == ALL_PODS
    unindexed: Informer[core_pb2.Pod] = Informer(_Lister(), POD)  # type: ignore[arg-type]
    # Built with DRA off, the plugin added no index to this informer: the lookup is a KeyError.
    plugin = dr.DynamicResources(new_handle(Services(pod_indexes=unindexed)),
                                 Features(enable_dynamic_resource_allocation=False))
    assert plugin.pre_queueing_hint_for_claim(None, claim("owner-gpu-x7k2p")) == ALL_PODS


def test_the_skip_failpoint_makes_the_pre_queueing_hint_name_no_pod():
    """scheduler/dra-pre-queueing-hint-skip (armed 'error'): KEP-6132's risk "PreQueueingHintFn
    incorrectly signals 'no pods affected'" on purpose — even for a deallocation."""
    plugin = _indexed_plugin()
    failpoints.arm(dr.FP_PRE_QUEUEING_HINT_SKIP, "error")
    try:
        for old, new, _ in PRE_QUEUEING_HINT_CASES.values():
            assert plugin.pre_queueing_hint_for_claim(old, new) == PreQueueingHintResult.narrowed([])
    finally:
        failpoints.reset()
    assert plugin.pre_queueing_hint_for_claim(None, claim("owner-gpu-x7k2p")).pods


def _hint_calls(event: str) -> float:
    return sum(REGISTRY.get_sample_value("scheduler_queueing_hint_execution_duration_seconds_count",
                                         {"plugin": "DynamicResources", "event": event, "hint": h}) or 0.0
               for h in ("Queue", "QueueSkip", "Error"))


@pytest.mark.parametrize("gate", [True, False], ids=["gate on", "gate off"])
async def test_a_claim_event_asks_the_claim_hint_about_the_pods_of_that_claim_only(dra, gate):
    """The plugin's registration in a real scheduling queue: 40 pods wait for their generated
    claims. One claim created: with the gate on the claim hint is asked about its pod alone
    (O(1)), off about all 40 (O(N)); either way that pod, and only it, is requeued. A deallocation
    is every pod in both."""
    pods: Informer[core_pb2.Pod] = Informer(_Lister(), POD)  # type: ignore[arg-type]
    plugin = dr.new(None, new_handle(Services(dra=dra, pod_indexes=pods)))  # type: ignore[arg-type]
    q = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, pre_queueing_hints=gate,
                        events={"default-scheduler": {dr.NAME: plugin.events_to_register()}})
    waiting = {}
    for i in range(40):
        pod = pod_with_template(f"p-{i}", f"p-{i}-gpu")
        pod.metadata.resource_version, pod.spec.scheduler_name = "1", "default-scheduler"
        pods._apply("ADDED", pod)
        q.add(pod)
        waiting[pod.metadata.name] = p = await q.pop()
        assert p is not None
        p.unschedulable_plugins = {dr.NAME}
        q.add_unschedulable_if_not_present(p)
    before = _hint_calls("ResourceClaimAdd")
    created = dra.put(claim("p-7-gpu", owner=waiting["p-7"].pod))
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_ADD, None, created)
    assert _hint_calls("ResourceClaimAdd") - before == (1 if gate else 40)
    assert [name for name, p in waiting.items() if q.where(p.pod) != UNSCHEDULABLE_Q] == ["p-7"]
    before = _hint_calls("ResourceClaimUpdate")
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, _allocated("gone-gpu"), claim("gone-gpu", rv="11"))
    assert _hint_calls("ResourceClaimUpdate") - before == 39, "deallocated: every pod still waiting"
