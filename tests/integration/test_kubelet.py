"""The kubelet with its runtime, as real processes on a real cluster (pods bound by nodeName: the
scheduler is not part of this). KEP-1287's node side, restarts, graceful termination, admission."""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from machinery import errors
from machinery.api import core_pb2
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, start_cluster, stop_cluster
from tests.harness.metrics import metric
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

FAST = FAST_KUBELET

node_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST)


@pytest.fixture
async def api(node_cluster):
    c = node_cluster.client()
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(autouse=True)
async def empty_node(node_cluster, request):
    """Every test starts and ends with no pods on the node."""
    yield
    if "node_cluster" not in request.fixturenames:
        return
    c = node_cluster.client()
    try:
        await delete_all_pods(c)
    finally:
        await c.close()


def _cs(pod: core_pb2.Pod, name: str = "c1") -> core_pb2.ContainerStatus:
    return next(c for c in pod.status.container_statuses if c.name == name)


def _cond(pod: core_pb2.Pod, type_: str) -> core_pb2.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == type_), None)


async def _running(api, name: str, timeout: float = 20) -> core_pb2.Pod:
    box = {}

    async def check():
        pod = await api.pods.get(name)
        box["pod"] = pod
        return pod.status.phase == "Running" and all(c.ready for c in pod.status.container_statuses)

    await eventually(check, timeout=timeout, what=f"pod {name} running")
    return box["pod"]


async def _resize(api, name: str, container: str = "c1", **res) -> core_pb2.Pod:
    spec = {"requests": {}, "limits": {}}
    for key, value in res.items():
        section, _, resource = key.partition("_")
        spec["requests" if section == "req" else "limits"][resource] = value
    return await api.pods.patch(name, {"spec": {"containers": [{"name": container, "resources": spec}]}},
                                subresource="resize")


async def test_node_registers_ready_and_a_pod_runs_with_kep1287_status(api):
    node = await api.nodes.get("node-1")
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    await api.pods.create(MakePod().name("runs").req(cpu="500m", memory="64Mi").lim(cpu="1", memory="128Mi")
                          .node("node-1").grace(5).obj())
    pod = await _running(api, "runs")
    cs = _cs(pod)
    assert dict(cs.allocated_resources) == {"cpu": "500m", "memory": "64Mi"}
    assert dict(cs.resources.requests) == {"cpu": "500m", "memory": "64Mi"}
    assert dict(cs.resources.limits) == {"cpu": "1", "memory": "128Mi"}
    assert _cond(pod, "PodScheduled").status == "True" and pod.status.pod_ip


def _apiserver_status_conflicts(tc) -> float:
    return metric(tc, "apiserver", "apiserver_request_total",
                  'code="409",resource="pods",subresource="status",verb="UPDATE"}')


async def test_the_kubelets_successive_status_writes_do_not_conflict_with_each_other(api, node_cluster):
    """A pod going Pending -> Running is written several times in a row, faster than a lagging
    watch brings each write back: the kubelet builds the next write on its own last one (as the
    status manager's cache does), so the kubelet, the only writer of these pods, never meets a 409."""
    before = _apiserver_status_conflicts(node_cluster)
    out = node_cluster.kplane("failpoint", "apiserver", "apiserver/watch-delivery", "sleep(400)")
    assert out.returncode == 0, out.stderr
    try:
        names = [f"burst-{i}" for i in range(6)]
        await asyncio.gather(*(api.pods.create(MakePod().name(n).req(cpu="100m", memory="64Mi").node("node-1")
                                               .grace(5).obj()) for n in names))
        for n in names:
            await _running(api, n)
    finally:
        node_cluster.kplane("failpoint", "apiserver", "apiserver/watch-delivery", "off")
    assert _apiserver_status_conflicts(node_cluster) == before


async def test_resize_goes_desired_allocated_actuated_actual(api):
    await api.pods.create(MakePod().name("rs").req(cpu="1", memory="64Mi").lim(cpu="2").node("node-1").grace(5).obj())
    await _running(api, "rs")
    await _resize(api, "rs", req_cpu="1.5")

    async def done():
        pod = await api.pods.get("rs")
        cs = _cs(pod)
        return (cs.allocated_resources["cpu"] == "1500m" and cs.resources.requests["cpu"] == "1500m"
                and _cond(pod, "PodResizeInProgress") is None and pod.status.observed_generation == 2)

    await eventually(done, timeout=15, what="resize to 1.5 cpu completed")
    events = [e.reason for e in (await api.events.list("default", field_selector="involvedObject.name=rs")).items]
    assert "ResizeStarted" in events
    await eventually(lambda: _has_event(api, "rs", "ResizeCompleted"), what="ResizeCompleted event")


def _kubelet_metrics(tc) -> dict[str, float]:
    tc.reload()
    with urllib.request.urlopen(f"http://{tc.process('kubelet/node-1').admin}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


async def test_kep1287_atomic_resize_of_two_containers_in_one_patch(api, node_cluster):
    """KEP-1287 "Atomic Resizes": one strategic patch changes c1 up and c2 down; the kubelet takes
    it as one request — allocated and actuated together, one generation, one ResizeCompleted."""
    pod = (MakePod().name("duo").container("c1", cpu="500m").lim(cpu="1").container("c2", cpu="1").lim(cpu="2")
           .node("node-1").grace(0).obj())
    await api.pods.create(pod)
    await _running(api, "duo")
    await api.pods.patch("duo", {"spec": {"containers": [
        {"name": "c1", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "2"}}},
        {"name": "c2", "resources": {"requests": {"cpu": "500m"}, "limits": {"cpu": "1"}}}]}}, subresource="resize")

    async def done():
        p = await api.pods.get("duo")
        got = {n: (_cs(p, n).allocated_resources["cpu"], _cs(p, n).resources.requests["cpu"],
                   _cs(p, n).resources.limits["cpu"]) for n in ("c1", "c2")}
        return got == {"c1": ("1", "1", "2"), "c2": ("500m", "500m", "1")} and \
            _cond(p, "PodResizeInProgress") is None and p.status.observed_generation == 2

    await eventually(done, timeout=15, what="both containers resized together")
    events = (await api.events.list("default", field_selector="involvedObject.name=duo")).items
    assert [e.reason for e in events].count("ResizeStarted") == 1
    # KEP-1287 "Instrumentation", as the kubelet exports it: one count per container, resource,
    # requirement and direction; the actuation's duration; the gauges.
    m = _kubelet_metrics(node_cluster)
    for requirement in ("requests", "limits"):
        for op in ("increase", "decrease"):
            key = ('kubelet_container_requested_resizes_total'
                   f'{{operation="{op}",requirement="{requirement}",resource="cpu"}}')
            assert m.get(key, 0) >= 1, key
    assert m["kubelet_pod_resize_duration_seconds_count"] >= 1
    assert m['kubelet_pod_pending_resizes{reason="deferred"}'] >= 0
    assert 'kubelet_pod_in_progress_resizes' in m


async def _has_event(api, name: str, reason: str) -> bool:
    evs = await api.events.list("default", field_selector=f"involvedObject.name={name}")
    return any(e.reason == reason for e in evs.items)


async def test_a_resize_beyond_allocatable_is_refused_then_deferred_accepted_after_a_pod_leaves(api):
    await api.pods.create(MakePod().name("big").req(cpu="1", memory="64Mi").node("node-1").grace(5).obj())
    # 1 + 3 of 4 cpus: the node is full
    await api.pods.create(MakePod().name("filler").req(cpu="3", memory="64Mi").node("node-1").grace(5).obj())
    await _running(api, "big")
    await _running(api, "filler")
    # More than the node has at all: the apiserver refuses it (Kubernetes 1.36's PodResizeValidator;
    # the kubelet's Infeasible for it is tested on a 1.35 cluster, test_kep1287_resize_admission.py).
    with pytest.raises(errors.Forbidden, match="node didn't have enough allocatable resources: cpu, "
                                               "requested: 100000, allocatable: 4000"):
        await _resize(api, "big", req_cpu="100")
    assert _cond(await api.pods.get("big"), "PodResizePending") is None
    await _resize(api, "big", req_cpu="2")  # the others hold 3 of 4 cpus: Deferred

    async def deferred():
        c = _cond(await api.pods.get("big"), "PodResizePending")
        return c is not None and c.reason == "Deferred"

    await eventually(deferred, what="Deferred")
    await api.pods.delete("filler")

    async def accepted():
        pod = await api.pods.get("big")
        return _cond(pod, "PodResizePending") is None and _cs(pod).allocated_resources["cpu"] == "2"

    await eventually(accepted, timeout=20, what="the deferred resize accepted once filler left")


async def test_memory_limit_decrease_below_usage_stays_in_progress_with_error(api):
    pod = MakePod().name("mem").req(cpu="100m", memory="100Mi").lim(memory="200Mi").node("node-1").grace(5).obj()
    pod.metadata.annotations["kplane.dev/memory-usage"] = "150Mi"
    await api.pods.create(pod)
    await _running(api, "mem")
    await _resize(api, "mem", lim_memory="120Mi")

    async def errored():
        c = _cond(await api.pods.get("mem"), "PodResizeInProgress")
        return c is not None and c.reason == "Error" and "below current usage" in c.message

    await eventually(errored, timeout=15, what="PodResizeInProgress Error")
    pod = await api.pods.get("mem")
    assert "memory limit (125829120) below current usage (157286400)" in _cond(pod, "PodResizeInProgress").message
    assert _cs(pod).resources.limits["memory"] == "200Mi"  # actual unchanged
    assert _cs(pod).restart_count == 0 and pod.status.phase == "Running"


async def test_restart_container_resize_policy_bumps_restart_count(api):
    pod = MakePod().name("rst").req(cpu="100m", memory="64Mi").lim(memory="128Mi").node("node-1").grace(5).obj()
    pod.spec.containers[0].resize_policy.add(resource_name="memory", restart_policy="RestartContainer")
    pod.spec.containers[0].resize_policy.add(resource_name="cpu", restart_policy="NotRequired")
    await api.pods.create(pod)
    await _running(api, "rst")
    await _resize(api, "rst", lim_memory="256Mi")

    async def restarted():
        pod = await api.pods.get("rst")
        cs = _cs(pod)
        return cs.restart_count == 1 and cs.ready and cs.resources.limits["memory"] == "256Mi"

    await eventually(restarted, timeout=15, what="container restarted with the new memory limit")


async def test_graceful_delete_stops_containers_within_the_grace_period(api, node_cluster):
    pod = MakePod().name("grace").req(cpu="500m", memory="64Mi").node("node-1").grace(5).obj()
    pod.metadata.annotations["kplane.dev/shutdown-seconds"] = "1"
    await api.pods.create(pod)
    await _running(api, "grace")
    marked = await api.pods.delete("grace")
    assert marked.metadata.deletion_timestamp

    async def gone():
        try:
            await api.pods.get("grace")
            return False
        except errors.NotFound:
            return True

    await eventually(gone, timeout=15, what="pod deleted by its kubelet")
    last = None
    async for resp in api.history(0):
        for e in resp.entries:
            if e.name == "grace" and e.type == "MODIFIED":
                last = e
    final = core_pb2.Pod()
    last.object.Unpack(final)
    assert final.status.phase == "Succeeded"
    assert _cs(final).state.HasField("terminated") and _cs(final).state.terminated.exit_code == 0


async def test_admission_refuses_a_pod_that_does_not_fit_with_out_of_cpu(api):
    await api.pods.create(MakePod().name("too-big").req(cpu="5", memory="64Mi").node("node-1").grace(5).obj())

    async def failed():
        return (await api.pods.get("too-big")).status.phase == "Failed"

    await eventually(failed, what="pod refused")
    pod = await api.pods.get("too-big")
    assert pod.status.reason == "OutOfcpu"
    assert pod.status.message == "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000"


async def test_killing_the_kubelet_or_the_runtime_never_loses_a_running_pod(api, node_cluster):
    await api.pods.create(MakePod().name("survivor").req(cpu="100m", memory="64Mi").node("node-1").grace(5).obj())
    before = await _running(api, "survivor")
    cid = _cs(before).container_id
    for component in ("kubelet/node-1", "runtime/node-1"):
        out = node_cluster.kplane("kill", component)
        assert out.returncode == 0, out.stderr
        await asyncio.sleep(0.5)
        out = node_cluster.kplane("start", component)
        assert out.returncode == 0, out.stderr
        pod = await _running(api, "survivor")
        assert _cs(pod).container_id == cid and _cs(pod).restart_count == 0, component
    # The restarted kubelet still knows the allocation: a resize still works.
    await _resize(api, "survivor", req_cpu="200m")

    async def resized():
        return _cs(await api.pods.get("survivor")).resources.requests["cpu"] == "200m"

    await eventually(resized, timeout=15, what="resize after restarts")


async def test_an_old_kubelet_reports_no_status_resources_and_its_pods_cannot_be_resized():
    """KEP-1287 Version Skew Strategy, end to end: a kubelet emulating 1.32, where in-place resize
    is alpha and off by default (its InPlacePodVerticalScaling gate at that release), beside a
    1.35 control plane (three minors: the oldest kubelet the version skew policy allows)."""
    tc = start_cluster(nodes=1, version="1.35", kubelet_args=FAST + ["--emulated-version=1.32"])
    api = tc.client()
    try:
        node = await api.nodes.get("node-1")
        assert node.status.node_info.kubelet_version == "v1.32.0"
        await api.pods.create(MakePod().name("old").req(cpu="100m", memory="64Mi").node("node-1").grace(5).obj())
        pod = await _running(api, "old")
        assert not _cs(pod).HasField("resources") and not _cs(pod).allocated_resources
        with pytest.raises(errors.Invalid, match="Pod running on node without support for resize"):
            await _resize(api, "old", req_cpu="200m")
    finally:
        await api.close()
        stop_cluster(tc)
