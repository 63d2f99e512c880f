"""KEP-1287 Test Plan, "Scheduler logic tests" steps 1-10, on a real cluster: etcd, apiserver,
scheduler, and one node whose kubelet runs the pods and actuates their resizes.

The KEP ("Scheduler and API Server Interaction"): to compute the node resources allocated to
pods the scheduler uses, per pod, the maximum of its desired resources (the spec) unless the
resize is Infeasible, its actual resources (``status.containerStatuses[].resources``) and its
allocated resources (``allocatedResources``). Resizes go through the ``resize`` subresource.

The Test Plan gives no numbers; they are those of its test (e2e ``doPodResizeSchedulerTests``),
on a node with 6 CPUs available: pod1 takes half (3), pod2 asks for all of it (6) and is resized
to a quarter (1.5); pod3 asks for what is left plus a quarter of pod1 (1.5 + 0.75 = 2.25) and
gets room when pod1 is resized to a third (1); pod1's resize back to 3 is deferred until pod2
and pod3 go; a resize to twice the node (12) is infeasible. Each pod's CPU request equals its
limit, as in that test.

The steps build on one another, so the tests run in order on the module's cluster. After each,
``kplane check`` must find no violated invariant.
"""

from __future__ import annotations

import asyncio

import pytest

from machinery import errors
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.metrics import metric, requeued_by
from tests.harness.wait import condition, eventually, wait_bound, wait_running, wait_unschedulable

pytestmark = pytest.mark.scenario

NODE = "node-1"
NODE_CPU = "6"
POD1_CPU = "3"  # node available / 2
POD2_CPU = "6"  # node available
POD2_CPU_RESIZED = "1500m"  # pod1 / 2
POD3_CPU = "2250m"  # available after pod1 and pod2 (1.5) + pod1 / 4
POD1_CPU_RESIZED = "1"  # pod1 / 3
POD1_CPU_EXCEEDING_ALLOCATABLE = "12"  # node allocatable * 2


# Step 10's resize reaches the kubelet and is Infeasible there, as the KEP has it: from Kubernetes
# 1.36 the apiserver refuses it at once (PodResizeValidator, test_kep1287_resize_admission.py), so
# the cluster runs the release before.
logic_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu=NODE_CPU, node_memory="4Gi", kubelet_args=FAST_KUBELET,
                                version="1.35")


@pytest.fixture
async def api(logic_cluster):
    c = logic_cluster.client()
    try:
        yield c
        out = await asyncio.to_thread(logic_cluster.kplane, "check")
        assert out.returncode == 0, f"kplane check failed:\n{out.stdout}\n{out.stderr}"
    finally:
        await c.close()


async def _resize(api, name: str, container: str, cpu: str) -> core_pb2.Pod:
    """The test's patch: requests and limits, through the ``resize`` subresource."""
    return await api.pods.patch(name, {"spec": {"containers": [{"name": container, "resources": {
        "requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}, subresource="resize")


INSUFFICIENT_CPU = ("0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                    "1 No preemption victims found for incoming pod.")


def _cpu(pod: core_pb2.Pod, container: str) -> dict:
    """A container's CPU as desired (spec), allocated and actual (status), in millicores."""
    def milli(q: str | None) -> int | None:
        return None if q is None else Quantity(q).milli_value()

    spec = next(c for c in pod.spec.containers if c.name == container)
    cs = next((c for c in pod.status.container_statuses if c.name == container), None)
    return {
        "desired": milli(spec.resources.requests.get("cpu")),
        "allocated": milli(cs.allocated_resources.get("cpu")) if cs is not None and cs.allocated_resources else None,
        "actual": milli(cs.resources.requests.get("cpu")) if cs is not None and cs.HasField("resources") else None,
    }


def _resize_conditions(pod: core_pb2.Pod) -> dict[str, str]:
    return {c.type: c.reason for c in pod.status.conditions if c.type in ("PodResizePending", "PodResizeInProgress")}


async def _reach(api, name: str, container: str, what: str, *, conditions: dict | None = None, **cpu: int) -> \
        core_pb2.Pod:
    """Until the pod's CPU (desired / allocated / actual) and resize conditions are as given."""
    box = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        box["seen"] = (_cpu(pod, container), _resize_conditions(pod))
        return all(box["seen"][0][k] == v for k, v in cpu.items()) and (
            conditions is None or box["seen"][1] == conditions)

    try:
        await eventually(check, timeout=30, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: expected {cpu} {conditions}, last seen {box.get('seen')}") from None
    return box["pod"]


async def test_kep1287_scheduler_logic_steps_1_to_3_pod2_pending_until_resized_down(api, logic_cluster):
    node = await api.nodes.get(NODE)
    assert node.status.allocatable["cpu"] == NODE_CPU, "the test's numbers need a node with 6 CPUs"

    # 1. pod1 has enough CPU to be scheduled (3 of 6), pod2 (6) does not.
    await api.pods.create(MakePod().name("testpod1").container("c1", cpu=POD1_CPU).lim(cpu=POD1_CPU).obj())
    assert await wait_bound(api, "testpod1") == NODE
    pod1 = (await wait_running(api, "testpod1"))["testpod1"]
    assert pod1.metadata.generation == 1
    created = await api.pods.create(MakePod().name("testpod2").container("c2", cpu=POD2_CPU).lim(cpu=POD2_CPU).obj())
    assert await wait_unschedulable(api, "testpod2") == INSUFFICIENT_CPU
    assert created.metadata.generation == 1

    # 2. pod2, still pending, is resized down to 1.5 so that it fits.
    requeued_before = requeued_by(logic_cluster, "UnschedulablePodUpdatePodScaleDown")
    resized = await _resize(api, "testpod2", "c2", POD2_CPU_RESIZED)
    assert resized.metadata.generation == 2
    assert _cpu(resized, "c2")["desired"] == 1500

    # 3. pod2 gets scheduled and comes up running. Its own scale-down is what requeues it (the
    #    scheduler's flush of unschedulable pods comes only after 5 minutes).
    assert await wait_bound(api, "testpod2") == NODE
    assert requeued_by(logic_cluster, "UnschedulablePodUpdatePodScaleDown") == requeued_before + 1
    pod2 = (await wait_running(api, "testpod2"))["testpod2"]
    assert _cpu(pod2, "c2") == {"desired": 1500, "allocated": 1500, "actual": 1500}


async def test_kep1287_scheduler_logic_steps_4_to_6_pod3_pending_until_pod1_resized_down(api, logic_cluster):
    # 4. pod3 asks for more CPU than is left (2.25 > 6 - 3 - 1.5): pending.
    await api.pods.create(MakePod().name("testpod3").container("c3", cpu=POD3_CPU).lim(cpu=POD3_CPU).obj())
    assert await wait_unschedulable(api, "testpod3") == INSUFFICIENT_CPU
    flushed_before = metric(logic_cluster, "scheduler", "scheduler_pod_scheduled_after_flush_total")
    requeued_before = requeued_by(logic_cluster, "AssignedPodUpdatePodScaleDown")

    # 5. pod1 is resized down to 1 CPU; the kubelet actuates it.
    resized = await _resize(api, "testpod1", "c1", POD1_CPU_RESIZED)
    assert resized.metadata.generation == 2
    await _reach(api, "testpod1", "c1", "pod1 resized down to 1", conditions={},
                 desired=1000, allocated=1000, actual=1000)

    # 6. pod3 is scheduled and running: the assigned pod's scale-down (UpdatePodScaleDown)
    #    requeued it through NodeResourcesFit's hint within seconds, not the 5-minute flush.
    assert await wait_bound(api, "testpod3", timeout=20) == NODE
    assert requeued_by(logic_cluster, "AssignedPodUpdatePodScaleDown") == requeued_before + 1
    assert metric(logic_cluster, "scheduler", "scheduler_pod_scheduled_after_flush_total") == flushed_before
    await wait_running(api, "testpod3")


async def test_kep1287_scheduler_logic_step_7_pod1_scale_up_deferred(api):
    # 7. pod1 scaled up back to 3 CPUs: 3 + 1.5 + 2.25 > 6, the kubelet defers the resize.
    resized = await _resize(api, "testpod1", "c1", POD1_CPU)
    assert resized.metadata.generation == 3
    pod1 = await _reach(api, "testpod1", "c1", "pod1 resize deferred", conditions={"PodResizePending": "Deferred"},
                        desired=3000, allocated=1000, actual=1000)
    deferred = condition(pod1, "PodResizePending")
    assert "Node didn't have enough resource: cpu" in deferred.message, deferred.message

    # The scheduler counts the deferred resize at its desired 3 CPUs (max of desired, allocated,
    # actual): 3 + 1.5 + 2.25 leaves no room for one more CPU, though the actual 4.75 would.
    await api.pods.create(MakePod().name("probe").container("c4", cpu="1").lim(cpu="1").obj())
    assert await wait_unschedulable(api, "probe") == INSUFFICIENT_CPU
    await api.pods.delete("probe", "default", grace_period_seconds=0)


async def test_kep1287_scheduler_logic_steps_8_9_deleting_pod2_pod3_completes_pod1_resize(api):
    # 8. Delete pod2 + pod3 to make room.
    for name in ("testpod2", "testpod3"):
        await api.pods.delete(name, "default")

    async def gone():
        names = {p.metadata.name for p in (await api.pods.list("default")).items}
        return not names & {"testpod2", "testpod3"}

    await eventually(gone, timeout=30, what="testpod2 and testpod3 deleted")

    # 9. pod1's resize completes: 3 CPUs desired, allocated and actual; no resize condition.
    pod1 = await _reach(api, "testpod1", "c1", "pod1 resize completed", conditions={},
                        desired=3000, allocated=3000, actual=3000)
    assert pod1.status.container_statuses[0].restart_count == 0


async def test_kep1287_scheduler_logic_step_10_scale_up_beyond_node_infeasible(api):
    # 10. pod1 scaled up to twice the node's CPUs: the kubelet marks the resize Infeasible.
    resized = await _resize(api, "testpod1", "c1", POD1_CPU_EXCEEDING_ALLOCATABLE)
    assert resized.metadata.generation == 4
    pod1 = await _reach(api, "testpod1", "c1", "pod1 resize infeasible", conditions={"PodResizePending": "Infeasible"},
                        desired=12000, allocated=3000, actual=3000)
    infeasible = condition(pod1, "PodResizePending")
    assert "Node didn't have enough capacity: cpu, requested: 12000, capacity: 6000" in infeasible.message, \
        infeasible.message

    # An Infeasible resize does not count: the scheduler holds pod1 at its allocated 3 CPUs, so
    # a pod asking for the other 3 is scheduled and admitted.
    await api.pods.create(MakePod().name("testpod4").container("c4", cpu="3").lim(cpu="3").obj())
    assert await wait_bound(api, "testpod4") == NODE
    await wait_running(api, "testpod4")
    for name in ("testpod1", "testpod4"):
        try:
            await api.pods.delete(name, "default", grace_period_seconds=0)
        except errors.NotFound:
            pass
