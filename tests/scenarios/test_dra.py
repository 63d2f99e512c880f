"""Dynamic Resource Allocation on real processes — etcd, the apiserver, the scheduler, the
controller-manager and two kubelets each running the fake driver dra.kplane.dev with 5 GPUs
(``--dra-devices 5``; ``kplane up`` created the DeviceClass gpu.kplane.dev):

- the DRA issue's acceptance: 20 pods from one ResourceClaimTemplate on 2 nodes with 5 devices
  each — exactly 10 bound, the other 10 Pending ("cannot allocate all claims"); deleting 5 of the
  bound ones gives their devices to 5 of the pending ones, requeued by the deallocation of the
  deleted pods' claims; and every generated claim goes with its pod;
- KEP-6132 "Test Plan", E2E: several pods sharing one generated ResourceClaim are all scheduled
  once the driver publishes its devices. With the gate SchedulerPreQueueingHints on (its beta
  default) the claim events' PreQueueingHint narrows each event to the pods the claim -> pods
  index finds by spec, so the pods sharing the owner's claim are named too and none is left to the
  periodic flush (5 minutes here, far beyond the test's wait).

Every test runs twice, on a cluster with the gate on and on one with it off (KEP-6132 "Integration
Tests": the existing tests pass with the feature gate enabled and disabled).

Kubernetes docs: Dynamic Resource Allocation — "When referencing a ResourceClaimTemplate, each Pod
gets its own instance"; "Pods do not get scheduled to a node unless all of their resources are
allocated and reserved". After each test ``kplane check`` replays the whole history so far —
device-allocated-once included — and must find nothing.
"""

from __future__ import annotations

import contextlib

import pytest

from kubelet.dra.driver import DRIVER_NAME, slice_name
from machinery import errors
from machinery.api import core_pb2
from tests.harness.cluster import FAST_KUBELET, kill, start, start_cluster, stop_cluster
from tests.harness.dra import create_gpu_template, delete_pods_claims_and_templates, gpu_pod, running
from tests.harness.metrics import metric, requeued_by
from tests.harness.wait import eventually, wait_unschedulable

pytestmark = pytest.mark.scenario

WAIT = 40
# kube-scheduler's FailedScheduling message for a pod no node has free devices for (preemption
# cannot free devices: the plugin's rejection is UnschedulableAndUnresolvable).
NO_DEVICES = ("0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes are available: "
              "2 Preemption is not helpful for scheduling.")
DEVICES = 5
NODES = ("node-1", "node-2")

GATE_ON, GATE_OFF = "SchedulerPreQueueingHints=true", "SchedulerPreQueueingHints=false"


@pytest.fixture(scope="module", params=[GATE_ON, GATE_OFF], ids=["PreQueueingHints on", "PreQueueingHints off"])
def dra_cluster(request):
    tc = start_cluster(nodes=2, schedulers=1, controller_managers=1, dra_devices=DEVICES, kubelet_args=FAST_KUBELET,
                       feature_gates=request.param)
    try:
        yield tc
    finally:
        stop_cluster(tc)


@pytest.fixture
async def api(dra_cluster):
    """A client; afterwards every pod goes, their generated claims with them, and ``kplane check``
    must find the history so far valid."""
    c = dra_cluster.client()
    try:
        yield c
    finally:
        try:
            await delete_pods_claims_and_templates(c, WAIT)
        finally:
            await c.close()
    result = dra_cluster.kplane("check")
    assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"
    assert "device-allocated-once" in result.stdout


async def _pods(api) -> list[core_pb2.Pod]:
    return [p for p in (await api.pods.list("default")).items if not p.metadata.deletion_timestamp]


async def _allocations(api) -> dict[str, tuple[str, str]]:
    """Claim name -> the (node, device) of its allocation, for every allocated claim."""
    out = {}
    for c in (await api.resource_claims.list("default")).items:
        if c.status.HasField("allocation"):
            [r] = c.status.allocation.devices.results
            assert r.driver == DRIVER_NAME
            out[c.metadata.name] = (r.pool, r.device)
    return out


def _narrowed(tc) -> float:
    """Claim events the DRA PreQueueingHint narrowed to the pods the index names."""
    return metric(tc, "scheduler", "scheduler_pre_queueing_hint_evaluations_total",
                  'plugin="DynamicResources",result="narrowed"')


async def _settled(tc, api, bound: int, pending: int) -> list[core_pb2.Pod]:
    """Until ``bound`` pods run on their nodes and ``pending`` wait unbound, parked in the
    scheduler's unschedulable pool (none in activeQ or backoffQ, none in a cycle): nothing can
    change any more without a new cluster event."""
    box: dict[str, list[core_pb2.Pod]] = {}

    async def counts() -> bool:
        pods = box["pods"] = await _pods(api)
        ran = [p for p in pods if p.spec.node_name and running(p)]
        return len(ran) == bound and len(pods) == bound + pending

    def parked() -> bool:
        return [metric(tc, "scheduler", "scheduler_pending_pods", f'queue="{q}"}}')
                for q in ("active", "backoff", "unschedulable")] == [0, 0, pending]

    async def settled() -> bool:
        return await counts() and parked() and await counts()
    await eventually(settled, timeout=WAIT, interval=0.2,
                     what=f"{bound} pods running, {pending} pending in the unschedulable pool")
    return box["pods"]


async def _waits_for_devices(api, name: str) -> None:
    """Until the pod's latest attempt found no node with free devices (an earlier one may have found
    its claim not made yet)."""
    async def latest() -> bool:
        pod = await api.pods.get(name)
        return any(c.type == "PodScheduled" and c.message == NO_DEVICES for c in pod.status.conditions)
    await eventually(latest, timeout=WAIT, what=f"{name} waiting for devices")
    await wait_unschedulable(api, name)


async def test_dra_issue_20_pods_from_one_template_on_2_nodes_with_5_devices_each(api, dra_cluster):
    await create_gpu_template(api)
    for i in range(20):
        await api.pods.create(gpu_pod(f"gpu-{i:02}", template="gpu"))
    pods = await _settled(dra_cluster, api, bound=10, pending=10)
    bound = [p for p in pods if p.spec.node_name]
    assert sorted(p.spec.node_name for p in bound) == ["node-1"] * DEVICES + ["node-2"] * DEVICES
    waiting = [p.metadata.name for p in pods if not p.spec.node_name]
    assert await wait_unschedulable(api, waiting[0]) == NO_DEVICES
    # Every pod got its own claim from the template; the 10 bound ones hold 10 different devices.
    claims = (await api.resource_claims.list("default")).items
    assert len(claims) == 20
    assert all(c.metadata.owner_references[0].kind == "Pod" for c in claims)
    allocations = await _allocations(api)
    assert len(allocations) == 10 and len(set(allocations.values())) == 10
    assert {(n, f"gpu-{i}") for n in NODES for i in range(DEVICES)} == set(allocations.values())
    held = {p.metadata.name: p.status.resource_claim_statuses[0].resource_claim_name for p in bound}
    assert all(name in allocations for name in held.values()), "each bound pod's own claim is allocated"

    # Five bound pods go: their claims are deallocated (devices free) and deleted with them.
    gone = sorted(held)[:5]
    freed = {allocations[held[name]] for name in gone}
    requeued_before = requeued_by(dra_cluster, "ResourceClaimUpdate")
    for name in gone:
        await api.pods.delete(name, "default")
    pods = await _settled(dra_cluster, api, bound=10, pending=5)
    newly = [p for p in pods if p.spec.node_name and p.metadata.name in waiting]
    assert len(newly) == 5
    allocations = await _allocations(api)
    assert {allocations[p.status.resource_claim_statuses[0].resource_claim_name] for p in newly} == freed, \
        "the pending pods got exactly the devices the deleted pods' claims held"
    names = {c.metadata.name for c in (await api.resource_claims.list("default")).items}
    assert not {held[name] for name in gone} & names, "the deleted pods' claims went with them"
    assert requeued_by(dra_cluster, "ResourceClaimUpdate") > requeued_before, "requeued by the deallocations"
    assert metric(dra_cluster, "scheduler", "scheduler_pod_scheduled_after_flush_total") == 0


async def test_kep6132_e2e_pods_sharing_one_generated_claim_all_scheduled_once_the_driver_publishes(
        api, dra_cluster):
    """The owner's claim comes from a template; three more pods name that generated claim. No
    driver publishes at first (the kubelets are down, their slices removed): all four wait. Once
    node-1's kubelet starts and its driver publishes, all four run there, the claim reserved for
    each of them — with the gate on, the claim's events narrowed by the PreQueueingHint to the
    pods the index finds for it (owner and sharers alike), and not one of them left to the flush."""
    for node in NODES:
        kill(dra_cluster, f"kubelet/{node}")
    try:
        for node in NODES:
            with contextlib.suppress(errors.NotFound):
                await api.resource_slices.delete(slice_name(node))
        await create_gpu_template(api)
        await api.pods.create(gpu_pod("owner", template="gpu"))

        async def recorded() -> bool:
            pod = await api.pods.get("owner")
            return bool(pod.status.resource_claim_statuses)
        await eventually(recorded, timeout=WAIT, what="the owner's claim made and recorded")
        shared = (await api.pods.get("owner")).status.resource_claim_statuses[0].resource_claim_name
        sharers = [f"sharer-{i}" for i in range(3)]
        for name in sharers:
            await api.pods.create(gpu_pod(name, claim=shared))
        for name in ("owner", *sharers):
            await _waits_for_devices(api, name)

        narrowed_before = _narrowed(dra_cluster)
        start(dra_cluster, "kubelet/node-1")  # its driver publishes node-1's 5 GPUs

        async def all_running() -> bool:
            pods = await _pods(api)
            return len(pods) == 4 and all(p.spec.node_name == "node-1" and running(p) for p in pods)
        await eventually(all_running, timeout=WAIT, interval=0.2, what="all four pods running on node-1")
        claim = await api.resource_claims.get(shared)
        assert sorted(r.name for r in claim.status.reserved_for) == sorted(["owner", *sharers])
        assert len(claim.status.allocation.devices.results) == 1
        if dra_cluster.state.config["feature_gates"] == GATE_ON:
            assert _narrowed(dra_cluster) > narrowed_before, "the shared claim's writes were narrowed events"
        else:
            assert _narrowed(dra_cluster) == 0, "gate off: the PreQueueingHint is never called"
        assert metric(dra_cluster, "scheduler", "scheduler_pod_scheduled_after_flush_total") == 0
    finally:
        for node in NODES:
            with contextlib.suppress(AssertionError):
                start(dra_cluster, f"kubelet/{node}")
