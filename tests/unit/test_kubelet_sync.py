"""The kubelet's sync path without processes: the real Kubelet over an in-process FakeRuntime, the
API played by the test (tests/harness/kubelet.py), each pod worker step taken by hand.

What Kubernetes' kubelet does on each step (KEP-1287 "Kubelet and API Server Interaction",
"Flow Control"): admit a pod or refuse it, start it with the allocated resources, allocate a
resize that fits and actuate it, defer one that does not until room is freed, and end a deleted
pod — with the API writes and Events a user sees.
"""

from __future__ import annotations

import pytest

from kubelet.allocation import conditions as cond
from machinery.api import core_pb2, cri_pb2
from tests.harness.builders import MakePod
from tests.harness.kubelet import KubeletHarness


@pytest.fixture
async def h(tmp_path):
    harness = KubeletHarness(tmp_path, cpu="4", memory="8Gi")
    await harness.start()
    yield harness
    await harness.stop()


def _conditions(pod: core_pb2.Pod) -> dict[str, core_pb2.PodCondition]:
    return {c.type: c for c in pod.status.conditions}


def _resize_conditions(status: core_pb2.PodStatus) -> dict[str, str]:
    return {c.type: c.reason for c in status.conditions if c.type in cond.RESIZE_CONDITION_TYPES}


def _running_cpu_shares(h: KubeletHarness, name: str) -> list[int]:
    """What the runtime applied to the pod's running containers (cpu shares: 1024 per cpu)."""
    return [c.actual.cpu_shares for c in h.runtime._containers.values() if c.pod.endswith(f"/{name}")
            and c.state == 1]  # CONTAINER_RUNNING


async def test_a_new_pod_is_admitted_started_and_reported_running_in_one_sync(h):
    pod = h.add(MakePod().name("web").req(cpu="1", memory="1Gi").obj())
    assert h.queued() == 1, "the informer's ADDED queues the pod for its worker"
    assert await h.drain() == 1
    web = h.api.pod("web")
    assert web.status.phase == "Running"
    cs = web.status.container_statuses[0]
    assert cs.ready and cs.state.HasField("running")
    assert dict(cs.allocated_resources) == {"cpu": "1", "memory": "1Gi"}
    assert dict(cs.resources.requests) == {"cpu": "1", "memory": "1Gi"}
    assert {t: c.status for t, c in _conditions(web).items()} == {
        "PodScheduled": "True", "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True",
        "ContainersReady": "True"}
    assert h.kubelet.alloc.allocation_of(pod.metadata.uid)["c1"].requests == {"cpu": "1", "memory": "1Gi"}
    assert _running_cpu_shares(h, "web") == [1024]
    assert len(h.api.status_writes("web")) == 1, "one sync, one status write"


async def test_a_pod_that_does_not_fit_is_refused_out_of_cpu_and_never_started(h):
    h.add(MakePod().name("big").req(cpu="5").obj())
    await h.drain()
    big = h.api.pod("big")
    assert big.status.phase == "Failed" and big.status.reason == "OutOfcpu"
    assert big.status.message == "Node didn't have enough resource: cpu, requested: 5000, used: 0, capacity: 4000"
    assert ("big", "Warning", "OutOfcpu") in await h.events()
    assert h.runtime._sandboxes == {}, "a refused pod gets no sandbox"


async def test_kep1287_a_resize_that_fits_is_allocated_actuated_and_completed_in_one_sync(h):
    """Allocated, InProgress written before the runtime acts, actuated, then one write with the new
    resources and no resize condition: the two states Kubernetes' API shows."""
    pod = h.add(MakePod().name("web").req(cpu="1", memory="1Gi").obj())
    await h.drain()
    before = len(h.api.writes)
    h.resize("web", cpu="2")
    assert await h.drain() == 1
    writes = h.api.status_writes("web")[-(len(h.api.writes) - before):]
    assert len(writes) == 2
    in_progress, done = writes
    assert _resize_conditions(in_progress) == {"PodResizeInProgress": ""}
    assert dict(in_progress.container_statuses[0].allocated_resources)["cpu"] == "2"
    assert dict(in_progress.container_statuses[0].resources.requests)["cpu"] == "1", "not actuated yet"
    assert _resize_conditions(done) == {}
    assert dict(done.container_statuses[0].resources.requests)["cpu"] == "2"
    assert _running_cpu_shares(h, "web") == [2048]
    assert h.kubelet.alloc.actuated_of(pod.metadata.uid, "c1").requests["cpu"] == "2"
    reasons = [r for name, _, r in await h.events() if name == "web"]
    assert reasons[-2:] == ["ResizeStarted", "ResizeCompleted"]
    assert h.queued() == 0, "the completed resize needs no resync"


async def test_kep1287_a_resize_that_does_not_fit_is_deferred_until_another_pod_goes(h):
    web = h.add(MakePod().name("web").req(cpu="2").obj())
    h.add(MakePod().name("filler").req(cpu="2").obj())
    await h.drain()
    h.resize("web", cpu="3")
    await h.drain()
    deferred = h.api.pod("web")
    pending = _conditions(deferred)["PodResizePending"]
    assert (pending.reason, pending.message) == (
        "Deferred", "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000")
    assert pending.observed_generation == 2
    assert _running_cpu_shares(h, "web") == [2048], "a Deferred resize is not actuated"
    assert ("web", "Warning", "ResizeDeferred") in await h.events()

    h.forget("filler")  # deleted at once: the informer sees DELETED, the worker cleans up
    await h.drain()
    done = h.api.pod("web")
    assert _resize_conditions(done.status) == {}
    assert dict(done.status.container_statuses[0].resources.requests)["cpu"] == "3"
    assert _running_cpu_shares(h, "web") == [3072]
    assert h.kubelet.alloc.allocation_of(web.metadata.uid)["c1"].requests["cpu"] == "3"
    reasons = [r for name, _, r in await h.events() if name == "web"]
    assert reasons.index("ResizeDeferred") < reasons.index("ResizeCompleted")


async def test_a_deleted_pod_is_stopped_its_end_written_and_its_api_object_deleted(h):
    pod = h.add(MakePod().name("web").req(cpu="1").obj())
    await h.drain()
    h.delete("web", grace=30)
    await h.drain()
    verbs = [(w.verb, w.name) for w in h.api.writes]
    assert verbs[-2:] == [("update_status", "web"), ("delete", "web")]
    final = h.api.writes[-2].pod
    assert final.status.phase == "Succeeded", "its container stopped by itself within the grace period"
    assert final.status.container_statuses[0].state.terminated.reason == "Completed"
    assert "default/web" not in h.api.stored
    assert h.kubelet.alloc.allocation_of(pod.metadata.uid) is None
    assert h.runtime._sandboxes == {} and h.runtime._containers == {}


async def test_a_status_write_that_conflicts_is_made_again_on_the_fresh_pod_keeping_others_conditions(h):
    h.add(MakePod().name("web").req(cpu="1").obj())
    await h.drain()
    # The scheduler marks the pod (DisruptionTarget); the kubelet's informer has not seen it yet.
    marked = core_pb2.Pod()
    marked.CopyFrom(h.api.pod("web"))
    marked.status.conditions.add(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")
    marked.metadata.resource_version = h.api.next_rv()
    h.api.stored["default/web"] = marked
    # Its container crashes: the next sync restarts it and has a new status to write.
    (cid,) = [c.id for c in h.runtime._containers.values()]
    await h.runtime.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=1))
    await h.sync("web")
    web = h.api.pod("web")
    assert _conditions(web)["DisruptionTarget"].reason == "PreemptionByScheduler"
    assert web.status.container_statuses[0].restart_count == 1
    assert web.status.container_statuses[0].last_state.terminated.exit_code == 1
