"""KEP-3386 Evented PLEG: the fake runtime's GetContainerEvents (an event per change of a container's
or sandbox's state, with the pod's statuses; a subscriber that falls behind is cut off), and the
kubelet's EventedPLEG over it (started, stopped and deleted containers report their pod; a failed
stream relists at once and subscribes again; five failures fall back to the generic relist); the
housekeeping's relist woken at once, and its period changed on the fall-back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc
import pytest
from prometheus_client import REGISTRY

from kubelet.housekeeping import Housekeeping
from kubelet.pleg import MAX_STREAM_RETRIES, EventedPLEG, GenericPLEG
from kubelet.runtime import fake
from kubelet.runtime.client import InProcessRuntime
from kubelet.runtime.errors import RuntimeCallError
from kubelet.runtime.fake import FakeRuntime
from machinery import failpoints
from machinery.api import cri_pb2
from tests.unit.test_runtime import _container, _no_failpoints, _sandbox, rt

__all__ = ["_no_failpoints", "rt"]  # the runtime tests' fixtures, used here

CREATED, STARTED = cri_pb2.CONTAINER_CREATED_EVENT, cri_pb2.CONTAINER_STARTED_EVENT
STOPPED, DELETED = cri_pb2.CONTAINER_STOPPED_EVENT, cri_pb2.CONTAINER_DELETED_EVENT


def _count(name: str) -> float:
    return REGISTRY.get_sample_value(name) or 0.0


def _drain(stream: fake.EventStream) -> list[cri_pb2.ContainerEventResponse]:
    out = []
    while not stream._queue.empty():
        event = stream._queue.get_nowait()
        assert event is not None
        out.append(event)
    return out


# ---- the runtime's events -----------------------------------------------------------------------


async def test_every_change_of_a_sandbox_or_container_is_an_event_with_the_pods_statuses(rt):
    before = await _sandbox(rt, "early")  # before the subscription: not told
    stream = await rt.get_container_events(cri_pb2.GetEventsRequest())
    sid = await _sandbox(rt)
    cid = await _container(rt, sid)
    await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=1))
    await rt.remove_container(cri_pb2.RemoveContainerRequest(container_id=cid))
    second = await _container(rt, sid, "second")
    await rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))  # kills "second"
    await rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sid))
    events = _drain(stream)
    assert [(e.container_id, e.container_event_type) for e in events] == [
        (sid, CREATED), (sid, STARTED), (cid, CREATED), (cid, STARTED), (cid, STOPPED), (cid, DELETED),
        (second, CREATED), (second, STARTED), (second, STOPPED), (sid, STOPPED), (second, DELETED), (sid, DELETED)]
    assert all(e.pod_sandbox_status.metadata.uid == "uid-web" and e.created_at > 0 for e in events)
    assert before not in {e.container_id for e in events}
    exited = events[4]
    assert [(s.id, s.state, s.exit_code) for s in exited.containers_statuses] == [(cid, cri_pb2.CONTAINER_EXITED, 1)]
    assert events[9].pod_sandbox_status.state == cri_pb2.SANDBOX_NOTREADY


async def test_an_oom_kill_is_a_stopped_event(rt):
    sid = await _sandbox(rt)
    cid = await _container(rt, sid)
    await rt.update_container_resources(cri_pb2.UpdateContainerResourcesRequest(
        container_id=cid, linux=cri_pb2.LinuxContainerResources(memory_limit_in_bytes=64 << 20)))
    stream = await rt.get_container_events(cri_pb2.GetEventsRequest())
    await rt.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=cid, memory_bytes=128 << 20))
    [event] = _drain(stream)
    assert (event.container_id, event.container_event_type) == (cid, STOPPED)
    assert event.containers_statuses[0].reason == "OOMKilled"


async def test_a_subscriber_that_falls_behind_is_cut_off_and_others_are_not(rt, monkeypatch):
    monkeypatch.setattr(fake, "EVENT_BUFFER", 3)
    slow = await rt.get_container_events(cri_pb2.GetEventsRequest())
    await _sandbox(rt, "a")  # two events
    keeping_up = await rt.get_container_events(cri_pb2.GetEventsRequest())
    await _sandbox(rt, "b")  # two more: the slow one is past three
    assert [e.container_id for e in _drain(keeping_up)] and len(rt._streams) == 1
    for _ in range(3):
        await slow.__anext__()
    with pytest.raises(RuntimeCallError) as info:
        await slow.__anext__()
    assert info.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED


async def test_closing_ends_the_stream_and_the_failpoint_fails_the_subscription(rt):
    stream = await rt.get_container_events(cri_pb2.GetEventsRequest())
    stream.close()
    assert [e async for e in stream] == [] and not rt._streams
    failpoints.arm("runtime/get-container-events", "error")
    with pytest.raises(RuntimeCallError) as info:
        await InProcessRuntime(rt).container_events()
    assert info.value.code == grpc.StatusCode.UNKNOWN


# ---- the kubelet's Evented PLEG -------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.changed: list[set[str]] = []
        self.relists = 0
        self.fell_back = asyncio.Event()

    def on_changed(self, uids: set[str]) -> None:
        self.changed.append(uids)

    def relist(self) -> None:
        self.relists += 1

    def fall_back(self) -> None:
        self.fell_back.set()


async def _until(check, what: str) -> None:
    try:
        async with asyncio.timeout(5):
            while not check():
                await asyncio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"waited 5 s for: {what}") from None


@contextlib.asynccontextmanager
async def _evented(rt: FakeRuntime) -> AsyncIterator[tuple[_Recorder, EventedPLEG, asyncio.Task]]:
    """An EventedPLEG over ``rt`` running (subscribed) for the block, cancelled after it."""
    r = _Recorder()
    evented = EventedPLEG(InProcessRuntime(rt), on_changed=r.on_changed, relist=r.relist, fall_back=r.fall_back)
    task = asyncio.create_task(evented.run())
    try:
        await _until(lambda: rt._streams, "subscribed")
        yield r, evented, task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_started_stopped_and_deleted_containers_report_their_pod_created_ones_do_not(rt):
    connections = _count("kubelet_evented_pleg_connection_success_count_total")
    async with _evented(rt) as (r, evented, _):
        assert _count("kubelet_evented_pleg_connection_success_count_total") == connections + 1
        sid = await _sandbox(rt)
        cid = await _container(rt, sid, start=False)
        await _until(lambda: len(r.changed) == 1, "the sandbox's start")  # its creation is no news
        await rt.start_container(cri_pb2.StartContainerRequest(container_id=cid))
        await rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sid))
        # started; then the removal: the container stopped and deleted, the sandbox deleted
        await _until(lambda: len(r.changed) == 5, "each change")
        assert r.changed == [{"uid-web"}] * 5 and r.relists == 0 and evented.failures == 0
    assert not rt._streams, "cancelled: unsubscribed"


async def test_a_failed_stream_relists_and_subscribes_again_and_five_failures_fall_back(rt):
    errors = _count("kubelet_evented_pleg_connection_error_count_total")
    async with _evented(rt) as (r, evented, task):
        next(iter(rt._streams)).close()  # the runtime ended the stream
        await _until(lambda: r.relists == 1 and rt._streams, "relisted and subscribed again")
        assert evented.failures == 1 and not r.fell_back.is_set()
        failpoints.arm("runtime/get-container-events", "error")  # the runtime refuses from now on
        next(iter(rt._streams)).close()
        async with asyncio.timeout(5):
            await r.fell_back.wait()
        await task
        assert evented.failures == MAX_STREAM_RETRIES and r.relists == MAX_STREAM_RETRIES
        assert _count("kubelet_evented_pleg_connection_error_count_total") == errors + MAX_STREAM_RETRIES


# ---- the relist loop with the Evented PLEG ----------------------------------------------------------


class _Workers:
    def __init__(self) -> None:
        self.enqueued: list[str] = []
        self.cleaned: list[str] = []

    def enqueue(self, pod) -> None:
        self.enqueued.append(pod)

    def cleanup(self, uid: str) -> None:
        self.cleaned.append(uid)


class _CountingPLEG(GenericPLEG):
    def __init__(self, runtime) -> None:
        super().__init__(runtime)
        self.count = 0

    async def relist(self) -> set[str]:
        self.count += 1
        return await super().relist()


def _housekeeping(rt: FakeRuntime, workers: _Workers, period: float) -> tuple[Housekeeping, _CountingPLEG]:
    counting = _CountingPLEG(InProcessRuntime(rt))
    hk = Housekeeping("node-1", ops=None, pleg=counting, alloc=None, workers=workers,  # type: ignore[arg-type]
                      retries=None, pods_by_uid=lambda: {"uid-web": "the web pod"},  # type: ignore[arg-type]
                      node_conditions=None, node_agent=None, sync_frequency=10.0,  # type: ignore[arg-type]
                      pleg_relist_period=period, node_policy_supported=False, evented=True)
    return hk, counting


async def test_the_relist_runs_at_once_when_asked_and_at_the_new_period_after_the_fall_back(rt):
    workers = _Workers()
    hk, counting = _housekeeping(rt, workers, period=300.0)
    task = asyncio.create_task(hk.pleg_loop())
    try:
        await _until(lambda: counting.count == 1, "the first relist")
        await asyncio.sleep(0.05)
        assert counting.count == 1, "the next is five minutes away"
        hk.relist_now()
        await _until(lambda: counting.count == 2, "relisted at once")
        hk.use_relist_period(0.01)
        await _until(lambda: counting.count >= 6, "relisting every 10 ms")
        hk.pods_changed({"uid-web", "uid-gone"})
        assert workers.enqueued == ["the web pod"] and workers.cleaned == ["uid-gone"]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
