"""KEP-1287 Test Plan, "Retry of deferred resizes", on a real kubelet and runtime:

1. a Deferred resize succeeds after another pod is scaled down (trigger ``pod_resized``);
2. Deferred resizes are retried in priority order: the higher-priority pod gets the room
   although it was deferred later;
3. the chain reaction: four pods fill the node; deleting pod1 makes room for pod2's resize only,
   pod2's resize for pod3's, pod3's for pod4's. Each resize raises one resource and lowers the
   other, so a resize once actuated frees what the next one needs (the kubelet counts other pods
   at max(allocated, actuated): room is freed when the runtime has applied the decrease).

The periodic retry is pushed out of the way (``--resize-retry-initial=600``) so every retry
comes from the event that should cause it, and ``kubelet_pod_deferred_resize_accepted_total``
says which one did.
"""

from __future__ import annotations

import pytest

from machinery import errors
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods, resize
from tests.harness.builders import MakePod, make_priority_class
from tests.harness.cluster import cluster_fixture
from tests.harness.history import pod_history
from tests.harness.metrics import label, series
from tests.harness.wait import condition, eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
ARGS = ["--sync-frequency=1", "--resize-retry-initial=600", "--resize-retry-interval=600", "--node-status-interval=1"]


retry_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="4000Mi", kubelet_args=ARGS)


@pytest.fixture
async def api(retry_cluster):
    c = retry_cluster.client()
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


async def _start(api, *pods: core_pb2.Pod) -> None:
    for p in pods:
        await api.pods.create(p)
    await wait_running(api, *(p.metadata.name for p in pods))


_resize = resize


def _done(pod: core_pb2.Pod, requests: dict[str, str]) -> bool:
    """The resize to ``requests`` is allocated and actual, nothing pending or in progress."""
    if not pod.status.container_statuses:
        return False
    cs = pod.status.container_statuses[0]
    for r, q in requests.items():
        want = Quantity(q)
        if Quantity(cs.allocated_resources.get(r, "0")) != want or Quantity(cs.resources.requests.get(r, "0")) != want:
            return False
    return condition(pod, "PodResizePending") is None and condition(pod, "PodResizeInProgress") is None


def _allocated(pod: core_pb2.Pod, requests: dict[str, str]) -> bool:
    cs = pod.status.container_statuses[0] if pod.status.container_statuses else None
    return cs is not None and all(Quantity(cs.allocated_resources.get(r, "0")) == Quantity(q)
                                  for r, q in requests.items())


async def _deferred(api, *names: str) -> None:
    async def check():
        for n in names:
            c = condition(await api.pods.get(n), "PodResizePending")
            if c is None or c.reason != "Deferred":
                return False
        return True

    await eventually(check, timeout=20, what=f"{', '.join(names)} Deferred")


async def _completed(api, name: str, requests: dict[str, str]) -> None:
    async def check():
        return _done(await api.pods.get(name), requests)

    await eventually(check, timeout=20, what=f"{name} resized to {requests}")


def _accepted(tc) -> dict[str, float]:
    """kubelet_pod_deferred_resize_accepted_total by retry_trigger, from the kubelet's /metrics."""
    return {label(k, "retry_trigger"): v
            for k, v in series(tc, f"kubelet/{NODE}", "kubelet_pod_deferred_resize_accepted_total").items()}


def _delta(after: dict[str, float], before: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}


async def _first_allocated_revision(api, name: str, requests: dict[str, str]) -> int:
    for pod in await pod_history(api, name):
        if _allocated(pod, requests):
            return int(pod.metadata.resource_version)
    raise AssertionError(f"{name} was never allocated {requests}")


async def test_a_deferred_resize_succeeds_after_another_pod_is_scaled_down(retry_cluster, api):
    await _start(api,
                 MakePod().name("grow").req(cpu="1", memory="500Mi").node(NODE).grace(1)
                 .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj(),
                 MakePod().name("shrink").req(cpu="3", memory="500Mi").node(NODE).grace(1)
                 .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())
    before = _accepted(retry_cluster)
    await _resize(api, "grow", cpu="2")
    await _deferred(api, "grow")
    await _resize(api, "shrink", cpu="2")
    await _completed(api, "shrink", {"cpu": "2"})
    await _completed(api, "grow", {"cpu": "2"})
    assert _delta(_accepted(retry_cluster), before) == {"pod_resized": 1}


async def test_deferred_resizes_are_retried_in_priority_order(retry_cluster, api):
    for name, value in (("retry-low", 10), ("retry-high", 1000)):
        try:
            await api.priority_classes.create(make_priority_class(name, value))
        except errors.AlreadyExists:
            pass
    await _start(api,
                 MakePod().name("filler").req(cpu="1", memory="500Mi").node(NODE).grace(1)
                 .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj(),
                 MakePod().name("low").req(cpu="1", memory="500Mi").priority_class("retry-low").node(NODE).grace(1)
                 .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj(),
                 MakePod().name("high").req(cpu="1", memory="500Mi").priority_class("retry-high").node(NODE).grace(1)
                 .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj(),
                 MakePod().name("other").req(cpu="1", memory="500Mi").node(NODE).grace(1)
                 .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())
    await _resize(api, "low", cpu="2")
    await _deferred(api, "low")
    await _resize(api, "high", cpu="2")  # deferred later, but of higher priority
    await _deferred(api, "high")
    await api.pods.delete("filler", grace_period_seconds=0)  # room for one of them only
    await _completed(api, "high", {"cpu": "2"})
    low = await api.pods.get("low")
    pending = condition(low, "PodResizePending")
    assert pending is not None and pending.reason == "Deferred", "the lower-priority resize took the room"
    assert _allocated(low, {"cpu": "1"})


async def test_deleting_pod1_sets_off_the_chain_reaction_of_deferred_resizes(retry_cluster, api):
    # 4 CPUs and 4000Mi, all taken.
    await _start(api, *(MakePod().name(f"pod{i}").req(cpu="1", memory="1000Mi").node(NODE).grace(1)
                        .resize_policy("cpu", "NotRequired")
                        .resize_policy("memory", "NotRequired").obj() for i in range(1, 5)))
    resizes = {
        "pod2": {"cpu": "500m", "memory": "1800Mi"},   # +800Mi: fits once pod1 is gone; frees 500m cpu
        "pod3": {"cpu": "2200m", "memory": "100Mi"},   # +1200m: needs pod1's 1000m and pod2's 500m; frees 900Mi
        "pod4": {"cpu": "1", "memory": "2050Mi"},      # +1050Mi: needs pod1's 1000Mi - pod2's 800Mi + pod3's 900Mi
    }
    for name, requests in resizes.items():
        await _resize(api, name, **requests)
    await _deferred(api, *resizes)
    before = _accepted(retry_cluster)

    await api.pods.delete("pod1", grace_period_seconds=0)
    for name, requests in resizes.items():
        await _completed(api, name, requests)

    revisions = [await _first_allocated_revision(api, name, requests) for name, requests in resizes.items()]
    assert revisions == sorted(revisions), f"the chain ran out of order: {dict(zip(resizes, revisions, strict=True))}"
    assert _delta(_accepted(retry_cluster), before) == {"pods_removed": 1, "pod_resized": 2}
