"""KEP-1287 "Kubelet Restart Analysis": the kubelet is killed at each restart point the KEP lists
(a ``panic`` failpoint there, which is SIGKILL) and started again; it must recover as the KEP says.

- admission: killed before the allocation is checkpointed, the pod is admitted again as if new;
  after, it is re-admitted at its checkpointed allocation (a resize made meanwhile does not sneak
  in: a pod whose new size no longer fits still runs at its old one, the resize Deferred);
- container creation: killed before the resources are recorded as actuated, the restarted kubelet
  issues a superfluous UpdateContainerResources and nothing else (same container, no restart);
- resize admission: Deferred stays Deferred; killed before the allocation is updated, the resize is
  re-admitted; after, it proceeds to the runtime;
- actuation: killed after the runtime call but before the actuated checkpoint, the call is made
  again; after the checkpoint, nothing is called again and the condition goes;
- in every case no container is created twice, and ``lastTransitionTime`` of the resize
  conditions is propagated across the restart: every revision of the pod in the cluster's history
  carries the same one.
"""

from __future__ import annotations

import asyncio

import pytest

from kubelet.allocation.checkpoint import ACTUATED_FILE, ALLOCATED_FILE
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start, wait_exited
from tests.harness.failpoints import failpoint, failpoints_state
from tests.harness.history import pod_history
from tests.harness.metrics import runtime_calls
from tests.harness.node_state import checkpointed
from tests.harness.wait import condition, eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
KUBELET = f"kubelet/{NODE}"
UPDATES, SANDBOXES, CREATES = "update_container_resources", "run_pod_sandbox", "create_container"

restart_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET)


@pytest.fixture
async def api(restart_cluster):
    c = restart_cluster.client()
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(autouse=True)
async def clean_node(restart_cluster):
    """Every test ends with the kubelet running, no failpoint armed and no pod left."""
    yield
    tc = restart_cluster
    tc.reload()
    start(tc, KUBELET)
    for name in failpoints_state(tc, KUBELET)["armed"]:
        failpoint(tc, KUBELET, name, "off")
    c = tc.client()
    try:
        await delete_all_pods(c)
    finally:
        await c.close()


def _milli(q: str) -> int:
    return Quantity(q).milli_value()


async def _running(api, name: str) -> core_pb2.Pod:
    return (await wait_running(api, name))[name]


async def _resize(api, name: str, cpu: str) -> core_pb2.Pod:
    return await resize(api, name, cpu=cpu)


async def _resized(api, name: str, cpu: str) -> core_pb2.Pod:
    """Until the resize to ``cpu`` is allocated and actual, with no resize condition left."""
    box = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        cs = pod.status.container_statuses[0] if pod.status.container_statuses else None
        return (cs is not None and _milli(cs.allocated_resources.get("cpu", "0")) == _milli(cpu)
                and _milli(cs.resources.requests.get("cpu", "0")) == _milli(cpu)
                and condition(pod, "PodResizeInProgress") is None and condition(pod, "PodResizePending") is None)

    await eventually(check, timeout=20, what=f"{name} resized to {cpu}")
    return box["pod"]


async def _panic_at(tc, point: str, action) -> None:
    """Arm ``point`` to panic, do ``action`` (which makes the kubelet reach it), wait for the death.

    The kubelet stays down a little over a second, so a lastTransitionTime regenerated after the
    restart (second precision) would differ from the one written before.
    """
    failpoint(tc, KUBELET, point, "panic")
    await action()
    await wait_exited(tc, KUBELET)
    await asyncio.sleep(1.1)


async def _calls(tc) -> dict[str, float]:
    return {op: await runtime_calls(tc, NODE, op) for op in (UPDATES, SANDBOXES, CREATES)}


async def _delta(tc, before: dict[str, float]) -> dict[str, float]:
    now = await _calls(tc)
    return {op: now[op] - before[op] for op in before}


async def _same_transition_time(api, name: str, type_: str) -> str:
    """The one lastTransitionTime every revision of the pod carries for condition ``type_``."""
    times = {c.last_transition_time for p in await pod_history(api, name)
             for c in p.status.conditions if c.type == type_}
    assert len(times) == 1, f"{type_} of {name} changed its lastTransitionTime across the restart: {sorted(times)}"
    return times.pop()


# ------------------------------------------------------------------ 1. Kubelet admits a new pod

async def test_killed_before_the_admission_checkpoint_the_pod_is_admitted_again_as_new(restart_cluster, api):
    tc = restart_cluster
    await api.pods.create(MakePod().name("filler").req(cpu="2500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "filler")
    a1 = MakePod().name("a1").req(cpu="1", memory="64Mi").node(NODE).grace(1).resize_policy("cpu", "NotRequired").obj()
    await _panic_at(tc, "kubelet/admit-before-checkpoint", lambda: api.pods.create(a1))
    pod = await api.pods.get("a1")
    assert checkpointed(tc, NODE, pod.metadata.uid, ALLOCATED_FILE) == {}, "allocation checkpointed before the point"
    # Resized while the kubelet is down: a new pod is admitted at its spec, and 2 + 2.5 of 4 CPUs do not fit.
    await _resize(api, "a1", "2")
    start(tc, KUBELET)

    async def refused():
        p = await api.pods.get("a1")
        return p.status.phase == "Failed" and p.status.reason == "OutOfcpu"

    await eventually(refused, timeout=20, what="a1 refused as a new pod of 2 CPUs")
    assert checkpointed(tc, NODE, pod.metadata.uid, ALLOCATED_FILE) == {}


async def test_killed_after_the_admission_checkpoint_the_pod_is_readmitted_at_its_allocation(restart_cluster, api):
    tc = restart_cluster
    await api.pods.create(MakePod().name("filler").req(cpu="2500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "filler")
    before = await _calls(tc)
    a2 = MakePod().name("a2").req(cpu="1", memory="64Mi").node(NODE).grace(1).resize_policy("cpu", "NotRequired").obj()
    await _panic_at(tc, "kubelet/admit-after-checkpoint", lambda: api.pods.create(a2))
    pod = await api.pods.get("a2")
    assert _milli(checkpointed(tc, NODE, pod.metadata.uid, ALLOCATED_FILE)["c1"].requests["cpu"]) == 1000
    await _resize(api, "a2", "2")  # 2 + 2.5 do not fit: admitted by the spec, the pod would be refused
    start(tc, KUBELET)

    pod = await _running(api, "a2")
    cs = pod.status.container_statuses[0]
    assert _milli(cs.allocated_resources["cpu"]) == 1000 and _milli(cs.resources.requests["cpu"]) == 1000

    async def deferred():
        p = await api.pods.get("a2")
        c = condition(p, "PodResizePending")
        return c is not None and c.reason == "Deferred"

    await eventually(deferred, timeout=20, what="a2's resize to 2 CPUs Deferred")
    delta = await _delta(tc, before)
    assert delta[SANDBOXES] == 1 and delta[CREATES] == 1, f"the pod was started twice: {delta}"


# ------------------------------------------------------------------ 2. Kubelet creates a container

async def test_killed_before_the_created_container_is_actuated_a_superfluous_update_follows(restart_cluster, api):
    tc = restart_cluster
    before = await _calls(tc)
    c1 = MakePod().name("c1").req(cpu="1", memory="64Mi").node(NODE).grace(1).resize_policy("cpu", "NotRequired").obj()
    await _panic_at(tc, "kubelet/create-before-actuated", lambda: api.pods.create(c1))
    pod = await api.pods.get("c1")
    assert checkpointed(tc, NODE, pod.metadata.uid, ACTUATED_FILE) == {}
    start(tc, KUBELET)

    pod = await _resized(api, "c1", "1")
    assert pod.status.phase == "Running"
    assert _milli(checkpointed(tc, NODE, pod.metadata.uid, ACTUATED_FILE)["c1"].requests["cpu"]) == 1000
    cs = pod.status.container_statuses[0]
    assert cs.restart_count == 0
    delta = await _delta(tc, before)
    assert delta == {UPDATES: 1, SANDBOXES: 1, CREATES: 1}, f"want one superfluous update and nothing else: {delta}"


# ------------------------------------------------------------------ 4. the pod is resized in the API

async def test_a_resize_made_while_the_kubelet_is_down_is_seen_on_restart(restart_cluster, api):
    tc = restart_cluster
    await api.pods.create(MakePod().name("r4").req(cpu="1", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    running = await _running(api, "r4")
    kill(tc, KUBELET)
    await _resize(api, "r4", "1500m")
    start(tc, KUBELET)
    pod = await _resized(api, "r4", "1500m")
    assert pod.status.container_statuses[0].container_id == running.status.container_statuses[0].container_id


# ------------------------------------------------------------------ 5. the updated pod is admitted or not

async def test_a_deferred_resize_is_still_deferred_after_a_restart(restart_cluster, api):
    tc = restart_cluster
    await api.pods.create(MakePod().name("d5").req(cpu="1", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("filler").req(cpu="2500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "d5")
    await _running(api, "filler")
    await _resize(api, "d5", "2")

    async def deferred():
        c = condition(await api.pods.get("d5"), "PodResizePending")
        return c is not None and c.reason == "Deferred"

    await eventually(deferred, timeout=20, what="d5 Deferred")
    kill(tc, KUBELET)
    await asyncio.sleep(1.1)
    start(tc, KUBELET)
    await api.pods.delete("filler", grace_period_seconds=0)  # room: the restarted kubelet retries it
    await _resized(api, "d5", "2")
    await _same_transition_time(api, "d5", "PodResizePending")


# The kubelet is killed on the way of an admitted resize 1 -> 1.5 CPU:
# (point, checkpoint after the kill: allocated and actuated millicores, UpdateContainerResources calls in all)
RESIZE_KILLS = [
    # before the allocation is checkpointed: re-admitted after the restart
    ("kubelet/resize-before-allocate", 1000, 1000, 1),
    # allocated, nothing sent: allocated != actuated, the restarted kubelet proceeds
    ("kubelet/resize-after-allocate", 1500, 1000, 1),
    # sent, not recorded as actuated: the call is made again (UpdateContainerResources is idempotent)
    ("kubelet/resize-after-cri", 1500, 1000, 2),
    # actuated recorded: nothing is called again, the condition goes
    ("kubelet/resize-after-actuated", 1500, 1500, 1),
]


@pytest.mark.parametrize("point,allocated,actuated,calls", RESIZE_KILLS, ids=[k[0].split("/")[1] for k in RESIZE_KILLS])
async def test_killed_on_the_way_of_a_resize_the_kubelet_finishes_it(restart_cluster, api, point, allocated, actuated,
                                                                     calls):
    tc = restart_cluster
    name = "k-" + point.split("/")[1]
    await api.pods.create(MakePod().name(name).req(cpu="1", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    running = await _running(api, name)
    uid = running.metadata.uid
    before = await _calls(tc)
    await _panic_at(tc, point, lambda: _resize(api, name, "1500m"))
    assert _milli(checkpointed(tc, NODE, uid, ALLOCATED_FILE)["c1"].requests["cpu"]) == allocated
    assert _milli(checkpointed(tc, NODE, uid, ACTUATED_FILE)["c1"].requests["cpu"]) == actuated
    start(tc, KUBELET)
    pod = await _resized(api, name, "1500m")
    assert pod.status.container_statuses[0].container_id == running.status.container_statuses[0].container_id
    assert pod.status.container_statuses[0].restart_count == 0
    assert (await _delta(tc, before)) == {UPDATES: calls, SANDBOXES: 0, CREATES: 0}
    await _same_transition_time(api, name, "PodResizeInProgress")
