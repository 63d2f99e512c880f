"""The fake runtime (kubelet/runtime/fake.py) as the kubelet sees it: CRI's lifecycle and idempotency,
KEP-1287's "Actuating Resizes" and "Memory Limit Decreases", graceful stops, failpoints, and a state
that survives a restart or a corrupt file."""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import grpc
import pytest
from prometheus_client import REGISTRY

from kubelet.runtime import statefile
from kubelet.runtime.client import InProcessRuntime
from kubelet.runtime.errors import RuntimeCallError, RuntimeNotFound
from kubelet.runtime.fake import (
    CPU_USAGE_ANNOTATION,
    MEMORY_USAGE_ANNOTATION,
    SHUTDOWN_SECONDS_ANNOTATION,
    FakeRuntime,
    applied_resources,
)
from machinery import failpoints
from machinery.api import cri_pb2

Mi = 1024 * 1024
R = cri_pb2.LinuxContainerResources


@pytest.fixture(autouse=True)
def _no_failpoints():
    failpoints.reset()
    yield
    failpoints.reset()


@pytest.fixture
async def rt():
    runtime = FakeRuntime("node-1")
    await runtime.start()
    yield runtime
    await runtime.close()


async def _sandbox(rt: FakeRuntime, name: str = "web", attempt: int = 0, labels: dict | None = None) -> str:
    config = cri_pb2.PodSandboxConfig(
        metadata=cri_pb2.PodSandboxMetadata(name=name, uid=f"uid-{name}", namespace="default", attempt=attempt),
        hostname=name, labels=labels or {"app": name})
    return (await rt.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=config))).pod_sandbox_id


async def _container(rt: FakeRuntime, sandbox_id: str, name: str = "app", *, attempt: int = 0,
                     resources: cri_pb2.LinuxContainerResources | None = None, annotations: dict | None = None,
                     start: bool = True) -> str:
    config = cri_pb2.ContainerConfig(metadata=cri_pb2.ContainerMetadata(name=name, attempt=attempt),
                                     image=cri_pb2.ImageSpec(image="nginx:1.27"), labels={"container": name},
                                     annotations=annotations or {},
                                     linux=cri_pb2.LinuxContainerConfig(resources=resources or R()))
    resp = await rt.create_container(cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=config))
    cid = resp.container_id
    if start:
        await rt.start_container(cri_pb2.StartContainerRequest(container_id=cid))
    return cid


async def _status(rt: FakeRuntime, cid: str) -> cri_pb2.ContainerStatus:
    return (await rt.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))).status


async def _update(rt: FakeRuntime, cid: str, resources: cri_pb2.LinuxContainerResources) -> None:
    await rt.update_container_resources(cri_pb2.UpdateContainerResourcesRequest(container_id=cid, linux=resources))


# ---- lifecycle --------------------------------------------------------------------------------


async def test_lifecycle_created_running_exited_removed(rt):
    sid = await _sandbox(rt)
    cid = await _container(rt, sid, start=False)
    assert len(sid) == 64 and len(cid) == 64 and int(cid, 16) >= 0

    st = await _status(rt, cid)
    assert st.state == cri_pb2.CONTAINER_CREATED and st.created_at > 0 and st.started_at == 0
    assert st.metadata.name == "app" and st.image.image == "nginx:1.27" and st.image_ref.startswith("sha256:")

    await rt.start_container(cri_pb2.StartContainerRequest(container_id=cid))
    st = await _status(rt, cid)
    assert st.state == cri_pb2.CONTAINER_RUNNING and st.started_at >= st.created_at

    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=30))
    st = await _status(rt, cid)
    assert (st.state, st.exit_code, st.reason) == (cri_pb2.CONTAINER_EXITED, 0, "Completed")
    assert st.finished_at >= st.started_at

    await rt.remove_container(cri_pb2.RemoveContainerRequest(container_id=cid))
    assert not (await rt.list_containers(cri_pb2.ListContainersRequest())).containers
    with pytest.raises(RuntimeNotFound, match="ContainerStatus: container .* not found"):
        await _status(rt, cid)

    await rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))
    sb = (await rt.pod_sandbox_status(cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=sid))).status
    assert sb.state == cri_pb2.SANDBOX_NOTREADY and sb.metadata.name == "web" and sb.network.ip
    await rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sid))
    assert not (await rt.list_pod_sandbox(cri_pb2.ListPodSandboxRequest())).items


async def test_list_filters_by_id_sandbox_state_and_labels(rt):
    s1, s2 = await _sandbox(rt, "a"), await _sandbox(rt, "b")
    c1 = await _container(rt, s1, "x")
    c2 = await _container(rt, s2, "y", start=False)

    async def ids(**flt) -> set[str]:
        f = cri_pb2.ContainerFilter(**flt)
        return {c.id for c in (await rt.list_containers(cri_pb2.ListContainersRequest(filter=f))).containers}

    assert await ids() == {c1, c2}
    assert await ids(pod_sandbox_id=s1) == {c1}
    assert await ids(id=c2) == {c2}
    assert await ids(state=cri_pb2.ContainerStateValue(state=cri_pb2.CONTAINER_CREATED)) == {c2}
    assert await ids(label_selector={"container": "x"}) == {c1}
    assert await ids(label_selector={"container": "x"}, pod_sandbox_id=s2) == set()

    flt = cri_pb2.PodSandboxFilter(label_selector={"app": "b"})
    items = (await rt.list_pod_sandbox(cri_pb2.ListPodSandboxRequest(filter=flt))).items
    assert [i.id for i in items] == [s2]
    await rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=s1))
    flt = cri_pb2.PodSandboxFilter(state=cri_pb2.PodSandboxStateValue(state=cri_pb2.SANDBOX_READY))
    assert [i.id for i in (await rt.list_pod_sandbox(cri_pb2.ListPodSandboxRequest(filter=flt))).items] == [s2]


async def test_stop_pod_sandbox_forcibly_terminates_running_containers(rt):
    sid = await _sandbox(rt)
    cid = await _container(rt, sid, annotations={SHUTDOWN_SECONDS_ANNOTATION: "60"})
    t0 = time.monotonic()
    await rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))
    assert time.monotonic() - t0 < 1
    st = await _status(rt, cid)
    assert (st.state, st.exit_code, st.reason) == (cri_pb2.CONTAINER_EXITED, 137, "Error")


async def test_name_and_attempt_are_reserved_within_a_sandbox(rt):
    sid = await _sandbox(rt)
    first = await _container(rt, sid, "app", attempt=0)
    with pytest.raises(RuntimeCallError, match="is reserved for") as err:
        await _container(rt, sid, "app", attempt=0)
    assert err.value.code == grpc.StatusCode.ALREADY_EXISTS
    await _container(rt, sid, "app", attempt=1)  # the kubelet's restart: the next attempt
    await rt.remove_container(cri_pb2.RemoveContainerRequest(container_id=first))
    await _container(rt, sid, "app", attempt=0)  # removing releases the name
    with pytest.raises(RuntimeCallError, match="is reserved for"):
        await _sandbox(rt, "web")


# ---- idempotency (CRI; KEP-1287 "UpdateContainerResources must be idempotent") ----------------


async def test_stop_and_remove_are_idempotent(rt):
    sid = await _sandbox(rt)
    cid = await _container(rt, sid)
    for _ in range(2):
        await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=10))
    for _ in range(2):
        await rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))
    for _ in range(2):
        await rt.remove_container(cri_pb2.RemoveContainerRequest(container_id=cid))
    for _ in range(2):
        await rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(RuntimeNotFound):
        await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid))
    with pytest.raises(RuntimeNotFound):
        await rt.pod_sandbox_status(cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=sid))


async def test_update_container_resources_twice_succeeds_without_change(tmp_path):
    rt = FakeRuntime("node-1", state_file=str(tmp_path / "state.json"))
    await rt.start()
    cid = await _container(rt, await _sandbox(rt), resources=R(cpu_shares=512, memory_limit_in_bytes=256 * Mi))
    new = R(cpu_shares=1024, cpu_quota=100_000, cpu_period=100_000, memory_limit_in_bytes=512 * Mi)
    await _update(rt, cid, new)
    writes, before = rt._state_file.writes, await _status(rt, cid)
    await _update(rt, cid, new)
    after = await _status(rt, cid)
    assert after == before and after.state == cri_pb2.CONTAINER_RUNNING
    assert rt._state_file.writes == writes  # nothing changed, nothing written
    await rt.close()


async def test_start_running_container_fails_already_running(rt):
    cid = await _container(rt, await _sandbox(rt))
    with pytest.raises(RuntimeCallError, match="container is already running") as err:
        await rt.start_container(cri_pb2.StartContainerRequest(container_id=cid))
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=0))
    with pytest.raises(RuntimeCallError, match="CONTAINER_EXITED"):
        await rt.start_container(cri_pb2.StartContainerRequest(container_id=cid))


async def test_create_container_in_stopped_or_removed_sandbox_fails(rt):
    sid = await _sandbox(rt)
    await rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(RuntimeCallError, match="not ready") as err:
        await _container(rt, sid)
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    await rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sid))
    with pytest.raises(RuntimeNotFound, match="CreateContainer: sandbox"):
        await _container(rt, sid)


# ---- graceful stop ----------------------------------------------------------------------------


async def test_stop_within_timeout_exits_0_after_shutdown_time(rt):
    cid = await _container(rt, await _sandbox(rt), annotations={SHUTDOWN_SECONDS_ANNOTATION: "0.3"})
    t0 = time.monotonic()
    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=5))
    assert 0.25 <= time.monotonic() - t0 < 2
    st = await _status(rt, cid)
    assert (st.state, st.exit_code, st.reason) == (cri_pb2.CONTAINER_EXITED, 0, "Completed")


async def test_stop_past_timeout_is_killed_137(rt):
    cid = await _container(rt, await _sandbox(rt), annotations={SHUTDOWN_SECONDS_ANNOTATION: "30"})
    t0 = time.monotonic()
    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=1))
    assert 0.9 <= time.monotonic() - t0 < 3
    st = await _status(rt, cid)
    assert (st.state, st.exit_code, st.reason) == (cri_pb2.CONTAINER_EXITED, 137, "Error")


async def test_stop_timeout_0_kills_at_once_and_ends_a_graceful_stop(rt):
    cid = await _container(rt, await _sandbox(rt), annotations={SHUTDOWN_SECONDS_ANNOTATION: "30"})
    graceful = asyncio.create_task(rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=60)))
    await asyncio.sleep(0.1)
    assert (await _status(rt, cid)).state == cri_pb2.CONTAINER_RUNNING  # still shutting down
    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=0))
    await asyncio.wait_for(graceful, 1)
    st = await _status(rt, cid)
    assert (st.exit_code, st.reason) == (137, "Error")


# ---- KEP-1287: Actuating Resizes --------------------------------------------------------------


def test_kep1287_actuating_resizes_kernel_minimums():
    # "Linux kernel enforced minimums for CPU shares & quota"
    actual = applied_resources(R(cpu_shares=1, cpu_quota=500, memory_limit_in_bytes=64 * Mi))
    assert (actual.cpu_shares, actual.cpu_quota, actual.cpu_period) == (2, 1000, 100_000)
    assert actual.memory_limit_in_bytes == 64 * Mi
    # Unset stays unset.
    assert applied_resources(R()) == R()


def test_kep1287_actuating_resizes_systemd_rounds_quota_up_to_10ms():
    actual = applied_resources(R(cpu_quota=25_000, cpu_period=100_000), cpu_quota_rounding_us=10_000)
    assert actual.cpu_quota == 30_000
    assert applied_resources(R(cpu_quota=30_000, cpu_period=100_000), 10_000).cpu_quota == 30_000


async def test_kep1287_status_reports_actual_resources_not_requested():
    rt = FakeRuntime("node-1", cpu_quota_rounding_us=10_000)
    await rt.start()
    cid = await _container(rt, await _sandbox(rt), resources=R(cpu_shares=102, cpu_quota=10_000, cpu_period=100_000))
    await _update(rt, cid, R(cpu_shares=1, cpu_quota=15_000, cpu_period=100_000))
    st = await _status(rt, cid)
    assert (st.resources.linux.cpu_shares, st.resources.linux.cpu_quota) == (2, 20_000)
    record = (await rt.get_state(cri_pb2.GetStateRequest())).state.containers[0]
    assert (record.requested.cpu_shares, record.requested.cpu_quota) == (1, 15_000)
    # Asking again for what was asked (not what was applied) is the idempotent repeat.
    await _update(rt, cid, R(cpu_shares=1, cpu_quota=15_000, cpu_period=100_000))
    assert (await _status(rt, cid)).resources.linux.cpu_quota == 20_000


# ---- KEP-1287: Memory Limit Decreases (cgroups v2 OOM-kills) ----------------------------------


async def test_kep1287_memory_limit_decrease_below_usage_oom_kills(rt):
    cid = await _container(rt, await _sandbox(rt), resources=R(memory_limit_in_bytes=200 * Mi),
                           annotations={MEMORY_USAGE_ANNOTATION: "150Mi"})
    await _update(rt, cid, R(memory_limit_in_bytes=180 * Mi))  # above usage: fine
    assert (await _status(rt, cid)).state == cri_pb2.CONTAINER_RUNNING
    await _update(rt, cid, R(memory_limit_in_bytes=100 * Mi))  # the call succeeds; the kernel OOM-kills
    st = await _status(rt, cid)
    assert (st.state, st.exit_code, st.reason) == (cri_pb2.CONTAINER_EXITED, 137, "OOMKilled")
    assert st.resources.linux.memory_limit_in_bytes == 100 * Mi


async def test_memory_usage_growth_above_limit_oom_kills(rt):
    cid = await _container(rt, await _sandbox(rt), resources=R(memory_limit_in_bytes=128 * Mi))
    resp = await rt.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=cid, memory_bytes=128 * Mi))
    assert resp.status.state == cri_pb2.CONTAINER_RUNNING  # at the limit, not above
    resp = await rt.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=cid, memory_bytes=128 * Mi + 1))
    assert (resp.status.state, resp.status.exit_code, resp.status.reason) == (cri_pb2.CONTAINER_EXITED, 137,
                                                                               "OOMKilled")


async def test_usage_above_limit_at_start_oom_kills(rt):
    cid = await _container(rt, await _sandbox(rt), resources=R(memory_limit_in_bytes=256 * Mi),
                           annotations={MEMORY_USAGE_ANNOTATION: "300Mi"})
    assert (await _status(rt, cid)).reason == "OOMKilled"


async def test_no_limit_never_oom_kills_and_exited_containers_accept_updates(rt):
    sid = await _sandbox(rt)
    cid = await _container(rt, sid, annotations={MEMORY_USAGE_ANNOTATION: "10Gi"})
    assert (await _status(rt, cid)).state == cri_pb2.CONTAINER_RUNNING
    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=0))
    # KEP-1287 Lifecycle Nuances: terminated containers can be "resized".
    await _update(rt, cid, R(memory_limit_in_bytes=1 * Mi))
    st = await _status(rt, cid)
    assert (st.reason, st.resources.linux.memory_limit_in_bytes) == ("Error", 1 * Mi)


# ---- usage and stats --------------------------------------------------------------------------


async def test_stats_report_the_usage_model(rt):
    sid = await _sandbox(rt)
    cid = await _container(rt, sid, resources=R(memory_limit_in_bytes=512 * Mi),
                           annotations={MEMORY_USAGE_ANNOTATION: "100Mi", CPU_USAGE_ANNOTATION: "500m"})
    stats = (await rt.container_stats(cri_pb2.ContainerStatsRequest(container_id=cid))).stats
    assert stats.attributes.id == cid and stats.attributes.metadata.name == "app"
    assert stats.memory.working_set_bytes.value == 100 * Mi == stats.memory.usage_bytes.value
    assert stats.memory.available_bytes.value == 412 * Mi
    assert stats.cpu.usage_nano_cores.value == 500_000_000
    first = stats.cpu.usage_core_nano_seconds.value
    await asyncio.sleep(0.1)
    stats = (await rt.container_stats(cri_pb2.ContainerStatsRequest(container_id=cid))).stats
    assert stats.cpu.usage_core_nano_seconds.value - first >= 40_000_000  # >= 0.08 s at half a core

    # The quota caps cpu: 20000/100000 is 0.2 cores.
    await _update(rt, cid, R(memory_limit_in_bytes=512 * Mi, cpu_quota=20_000, cpu_period=100_000))
    stats = (await rt.container_stats(cri_pb2.ContainerStatsRequest(container_id=cid))).stats
    assert stats.cpu.usage_nano_cores.value == 200_000_000
    await rt.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=cid, cpu_millicores=100))
    stats = (await rt.container_stats(cri_pb2.ContainerStatsRequest(container_id=cid))).stats
    assert stats.cpu.usage_nano_cores.value == 100_000_000 and stats.memory.working_set_bytes.value == 100 * Mi

    other = await _container(rt, sid, "stopped", start=False)
    listed = (await rt.list_container_stats(cri_pb2.ListContainerStatsRequest())).stats
    assert [s.attributes.id for s in listed] == [cid]  # running containers only
    stats = (await rt.container_stats(cri_pb2.ContainerStatsRequest(container_id=other))).stats
    assert stats.cpu.usage_nano_cores.value == 0 and stats.memory.working_set_bytes.value == 0


async def test_exit_container_simulates_a_crash(rt):
    cid = await _container(rt, await _sandbox(rt))
    resp = await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=2))
    assert (resp.status.state, resp.status.exit_code, resp.status.reason) == (cri_pb2.CONTAINER_EXITED, 2, "Error")
    with pytest.raises(RuntimeCallError, match="not running"):
        await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid))


async def test_update_pod_sandbox_resources_is_stored(rt):
    sid = await _sandbox(rt)
    await rt.update_pod_sandbox_resources(cri_pb2.UpdatePodSandboxResourcesRequest(
        pod_sandbox_id=sid, overhead=R(cpu_shares=10), resources=R(cpu_shares=1024, memory_limit_in_bytes=Mi)))
    record = (await rt.get_state(cri_pb2.GetStateRequest())).state.sandboxes[0]
    assert (record.overhead.cpu_shares, record.resources.cpu_shares) == (10, 1024)
    with pytest.raises(RuntimeNotFound):
        await rt.update_pod_sandbox_resources(cri_pb2.UpdatePodSandboxResourcesRequest(pod_sandbox_id="nope"))


async def test_a_container_update_over_the_pods_limit_is_refused(rt):
    """KEP-1287 "Container resource limit update ordering", checked by its outcome: with a pod-level
    memory limit of 300Mi (plus 10Mi overhead), two containers of 100Mi may not grow past it; the
    pod limit raised first, the same update succeeds. Without a limit on every container, or on
    the pod, nothing is checked."""
    sid = await _sandbox(rt)
    await rt.update_pod_sandbox_resources(cri_pb2.UpdatePodSandboxResourcesRequest(
        pod_sandbox_id=sid, overhead=R(memory_limit_in_bytes=10 * Mi),
        resources=R(memory_limit_in_bytes=210 * Mi, cpu_quota=300000)))
    a = await _container(rt, sid, "a", resources=R(memory_limit_in_bytes=100 * Mi, cpu_quota=100000))
    b = await _container(rt, sid, "b", resources=R(memory_limit_in_bytes=100 * Mi, cpu_quota=100000))
    with pytest.raises(RuntimeCallError, match=r"container a: the containers' memory limits \(272629760\) would "
                                               r"exceed the pod's \(220200960\)") as err:
        await _update(rt, a, R(memory_limit_in_bytes=150 * Mi, cpu_quota=100000))
    assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert (await _status(rt, a)).resources.linux.memory_limit_in_bytes == 100 * Mi
    with pytest.raises(RuntimeCallError, match="cpu quotas"):
        await _update(rt, b, R(memory_limit_in_bytes=100 * Mi, cpu_quota=250000))
    await rt.update_pod_sandbox_resources(cri_pb2.UpdatePodSandboxResourcesRequest(
        pod_sandbox_id=sid, resources=R(memory_limit_in_bytes=260 * Mi, cpu_quota=400000)))
    await _update(rt, a, R(memory_limit_in_bytes=150 * Mi, cpu_quota=100000))
    await _update(rt, b, R(memory_limit_in_bytes=100 * Mi, cpu_quota=250000))
    # a container without a memory limit: the pod's memory limit is not checked
    await _update(rt, a, R(cpu_quota=100000))
    await _update(rt, b, R(memory_limit_in_bytes=500 * Mi, cpu_quota=250000))


# ---- failpoints -------------------------------------------------------------------------------


async def test_failpoint_error_fails_update_container_resources(rt):
    cid = await _container(rt, await _sandbox(rt), resources=R(cpu_shares=512))
    failpoints.arm("runtime/update-container-resources", "error")
    with pytest.raises(RuntimeCallError,
                       match="UpdateContainerResources: failpoint runtime/update-container-resources") as err:
        await _update(rt, cid, R(cpu_shares=1024))
    assert err.value.code == grpc.StatusCode.UNKNOWN
    assert (await _status(rt, cid)).resources.linux.cpu_shares == 512  # nothing applied
    failpoints.arm("runtime/update-container-resources", "off")
    await _update(rt, cid, R(cpu_shares=1024))
    assert (await _status(rt, cid)).resources.linux.cpu_shares == 1024


async def test_failpoint_sleep_delays_and_in_process_client_times_out(rt):
    cid = await _container(rt, await _sandbox(rt))
    failpoints.arm("runtime/container-status", "sleep(300)")
    t0 = time.monotonic()
    await _status(rt, cid)
    assert time.monotonic() - t0 >= 0.28
    client = InProcessRuntime(rt, timeout=0.1)
    with pytest.raises(RuntimeCallError, match="ContainerStatus") as err:
        await client.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))
    assert err.value.code == grpc.StatusCode.DEADLINE_EXCEEDED


def test_failpoints_declared_one_per_runtime_rpc():
    names = failpoints.declared()
    for name in ("runtime/update-container-resources", "runtime/create-container", "runtime/start-container",
                 "runtime/stop-container", "runtime/container-status", "runtime/run-pod-sandbox"):
        assert name in names


# ---- persistence ------------------------------------------------------------------------------


async def test_state_survives_a_restart(tmp_path):
    path = tmp_path / "state.json"
    rt = FakeRuntime("node-1", state_file=str(path), cpu_quota_rounding_us=10_000)
    await rt.start()
    sid = await _sandbox(rt)
    running = await _container(rt, sid, "app", resources=R(cpu_quota=15_000, cpu_period=100_000,
                                                            memory_limit_in_bytes=256 * Mi))
    await rt.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=running, memory_bytes=64 * Mi,
                                                                  cpu_millicores=100))
    exited = await _container(rt, sid, "job")
    await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=exited, exit_code=3, reason="Crashed"))
    before = (await rt.get_state(cri_pb2.GetStateRequest())).state
    # No close(): the process is killed; every call already wrote its change.

    again = FakeRuntime("node-1", state_file=str(path), cpu_quota_rounding_us=10_000)
    await again.start()
    after = (await again.get_state(cri_pb2.GetStateRequest())).state
    assert after == before
    st = await _status(again, running)
    assert st.state == cri_pb2.CONTAINER_RUNNING and st.resources.linux.cpu_quota == 20_000
    assert (await _status(again, exited)).reason == "Crashed"
    with pytest.raises(RuntimeCallError, match="reserved"):  # names are reserved again
        await _container(again, sid, "app")
    # The usage model continues: going above the limit still OOM-kills.
    await again.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=running, memory_bytes=300 * Mi))
    assert (await _status(again, running)).reason == "OOMKilled"
    await again.close()


@pytest.mark.parametrize("content", [b"{not json", b"", b"\xff\xfe\x00garbage", b'{"sandboxes": 7}',
                                     statefile.MAGIC + b"0" * 64 + b"\n\x08\x01"])
async def test_corrupt_state_file_is_moved_aside_and_runtime_starts_empty(tmp_path, content):
    path = tmp_path / "state.json"
    path.write_bytes(content)
    rt = FakeRuntime("node-1", state_file=str(path))
    await rt.start()
    assert not (await rt.get_state(cri_pb2.GetStateRequest())).state.sandboxes
    aside = list(tmp_path.glob("state.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == content
    await _sandbox(rt)  # and it works, saving a good file
    assert statefile.load(path).node_name == "node-1"
    await rt.close()


async def test_unreadable_state_file_does_not_crash(tmp_path):
    path = tmp_path / "state.json"
    path.mkdir()  # reading a directory fails
    rt = FakeRuntime("node-1", state_file=str(path))
    await rt.start()
    assert rt.started and list(tmp_path.glob("state.json.corrupt-*"))


async def test_concurrent_changes_coalesce_into_few_writes(tmp_path):
    rt = FakeRuntime("node-1", state_file=str(tmp_path / "state.json"))
    await rt.start()
    cid = await _container(rt, await _sandbox(rt))
    writes = rt._state_file.writes
    await asyncio.gather(*(rt.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=cid, cpu_millicores=i))
                           for i in range(1, 51)))
    assert rt._state_file.writes - writes <= 3
    saved = statefile.load(Path(tmp_path / "state.json"))
    assert saved.containers[0].cpu_usage_millicores == 50  # the last change is on disk
    await rt.close()


# ---- metrics ----------------------------------------------------------------------------------


async def test_metrics_count_operations_errors_and_containers(rt):
    def value(name: str, **labels) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    gc.collect()  # runtimes of earlier tests must not vanish from the gauge mid-test

    ops = value("kplane_runtime_operations_total", operation_type="container_status")
    errs = value("kplane_runtime_operations_errors_total", operation_type="container_status")
    running = value("kplane_runtime_containers", state="CONTAINER_RUNNING")
    cid = await _container(rt, await _sandbox(rt))
    await _status(rt, cid)
    with pytest.raises(RuntimeNotFound):
        await _status(rt, "missing")
    assert value("kplane_runtime_operations_total", operation_type="container_status") == ops + 2
    assert value("kplane_runtime_operations_errors_total", operation_type="container_status") == errs + 1
    assert value("kplane_runtime_containers", state="CONTAINER_RUNNING") == running + 1
    assert value("kplane_runtime_operations_duration_seconds_count", operation_type="container_status") >= 2


async def test_bad_annotations_count_as_zero(rt):
    cid = await _container(rt, await _sandbox(rt), resources=R(memory_limit_in_bytes=Mi),
                           annotations={MEMORY_USAGE_ANNOTATION: "lots", SHUTDOWN_SECONDS_ANNOTATION: "soon"})
    assert (await _status(rt, cid)).state == cri_pb2.CONTAINER_RUNNING
    await rt.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=5))
    assert (await _status(rt, cid)).exit_code == 0


async def test_in_process_runtime_has_the_client_interface_and_copies_messages(rt):
    client = InProcessRuntime(rt)
    assert (await client.version()).runtime_name == "kplane-fake"
    sid = await _sandbox(rt)
    config = cri_pb2.ContainerConfig(metadata=cri_pb2.ContainerMetadata(name="app"), labels={"a": "1"})
    cid = (await client.create_container(cri_pb2.CreateContainerRequest(pod_sandbox_id=sid,
                                                                        config=config))).container_id
    config.labels["a"] = "changed"  # the caller's message is not the runtime's
    status = (await client.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))).status
    status.labels["a"] = "changed too"
    assert (await _status(rt, cid)).labels["a"] == "1"
    assert [c.id for c in (await client.list_containers()).containers] == [cid]
    await client.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id="gone"))  # idempotent
    with pytest.raises(RuntimeNotFound):
        await client.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id="gone"))


async def test_in_process_call_that_never_waits_arms_no_timer(rt, monkeypatch):
    client = InProcessRuntime(rt)
    timers = []
    real_timeout = asyncio.timeout
    monkeypatch.setattr(asyncio, "timeout", lambda delay: timers.append(delay) or real_timeout(delay))
    cid = await _container(rt, await _sandbox(rt))
    assert [c.id for c in (await client.list_containers()).containers] == [cid]
    assert len((await client.list_pod_sandbox()).items) == 1
    assert timers == []
    # A call that waits (a graceful stop) goes on under its timeout and answers as before.
    await client.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=5))
    assert timers == [15.0]
    assert (await _status(rt, cid)).state == cri_pb2.CONTAINER_EXITED


async def test_in_process_call_cancelled_while_waiting_is_cancelled_in_the_runtime(rt):
    client = InProcessRuntime(rt)
    cid = await _container(rt, await _sandbox(rt), annotations={SHUTDOWN_SECONDS_ANNOTATION: "60"})
    stop = asyncio.create_task(client.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=60)))
    await asyncio.sleep(0.01)
    assert not stop.done()
    stop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stop
    assert (await _status(rt, cid)).state == cri_pb2.CONTAINER_RUNNING  # the wait ended, nothing exited


async def test_lists_report_the_state_now_and_copies(rt):
    client = InProcessRuntime(rt)
    sid = await _sandbox(rt)
    cid = await _container(rt, sid)
    listed = (await client.list_containers()).containers[0]
    assert listed.state == cri_pb2.CONTAINER_RUNNING
    assert listed.image_ref == listed.image_id and listed.image_ref.startswith("sha256:")
    listed.labels["container"] = "changed by the caller"
    await client.stop_container(cri_pb2.StopContainerRequest(container_id=cid, timeout=0))
    await client.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))
    again = (await client.list_containers()).containers[0]
    assert again.state == cri_pb2.CONTAINER_EXITED
    assert again.labels["container"] == "app"
    assert listed.state == cri_pb2.CONTAINER_RUNNING  # an earlier answer is the caller's own
    sandbox = (await client.list_pod_sandbox()).items[0]
    assert (sandbox.id, sandbox.state, sandbox.metadata.name) == (sid, cri_pb2.SANDBOX_NOTREADY, "web")
    running = cri_pb2.ListContainersRequest(filter=cri_pb2.ContainerFilter(
        state=cri_pb2.ContainerStateValue(state=cri_pb2.CONTAINER_RUNNING)))
    assert list((await client.list_containers(running)).containers) == []


def test_is_armed_says_whether_hit_would_fire():
    assert not failpoints.is_armed("runtime/list-containers")
    failpoints.arm("runtime/list-containers", "sleep(1)")
    assert failpoints.is_armed("runtime/list-containers")
    failpoints.arm("runtime/list-containers", "off")
    assert not failpoints.is_armed("runtime/list-containers")


def test_a_state_file_in_the_earlier_json_form_is_still_read(tmp_path):
    from google.protobuf import json_format
    state = cri_pb2.RuntimeState(node_name="node-1")
    path = tmp_path / "state.json"
    path.write_text(json_format.MessageToJson(state, indent=1))
    assert statefile.load(path).node_name == "node-1"
    assert statefile.decode(statefile.encode(state)) == state


async def test_the_reads_run_without_a_timer_never_wait(rt):
    """InProcessRuntime runs these with no timeout: each must answer (or fail) without suspending."""
    from kubelet.runtime.fake import reads_from_memory
    from kubelet.runtime.methods import METHODS
    cid = await _container(rt, await _sandbox(rt))
    reads = sorted(attr for attr in METHODS if reads_from_memory(getattr(rt, attr)))
    assert "list_pod_sandbox" in reads and "list_containers" in reads and "run_pod_sandbox" not in reads
    for attr in reads:
        request = METHODS[attr].request()
        if hasattr(request, "container_id"):
            request.container_id = cid
        call = getattr(rt, attr)(request)
        try:
            call.send(None)
        except StopIteration:
            continue
        except RuntimeCallError:
            continue
        call.close()
        raise AssertionError(f"{attr} suspended: it cannot run without a timeout")
