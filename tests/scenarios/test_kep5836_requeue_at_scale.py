"""KEP-5836: Scheduler Preemption for In-Place Pod Resize, "Failures and Reconsideration of Deferred
pods", at scale: the QueueingHints of a deferred resize are node-aware. A pod deleted on another
node is QueueSkip for it; on its own node, Queue. So one deletion moves out of the unschedulable
pool the deferred pods of that node only, however many wait on the others.

Real processes: etcd, the apiserver, one scheduler and 50 hollow nodes of 4 CPUs (one process), with
the gate SchedulerPreemptionForPodResize on in every component. On each node, placed there by
``spec.nodeName``: one high-priority pod of 2 CPUs and four low-priority pods of 500m (4 CPUs in
all). Each of the 200 low pods is resized to 1 CPU: its kubelet defers it (the node is full) and
the scheduler cannot preempt for it (the only other pod on its node outranks it), so all 200 wait
in the unschedulable pool. Deleting the high pod of one node must move exactly that node's 4 pods
(``scheduler_queue_incoming_pods_total{event="AssignedPodDelete"}`` + 4), leave the 196 others
where they are, and let that node's kubelet actuate the four resizes (2 CPUs freed = 4 x 500m); a
second node does the same. Nothing is preempted anywhere.

The kubelets' periodic retry of deferred resizes is pushed out of the way
(``--resize-retry-initial=600``): 200 deferred pods retried every second would only load the
two cores, and each actuation here must come from the deletion (``retry_trigger="pods_removed"``).
After the test ``kplane check`` must pass over the whole history.
"""

from __future__ import annotations

import asyncio

import pytest

from cli import check
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import ensure_priority_classes, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import cluster_fixture
from tests.harness.metrics import metric, requeued_by
from tests.harness.wait import eventually

pytestmark = pytest.mark.scenario

GATE = "SchedulerPreemptionForPodResize=true"
NODES = 50
LOWS_PER_NODE = 4
HIGH_CPU, LOW_CPU, RESIZED_CPU = "2", "500m", "1"
PRIORITIES = {"p-high": 1000, "p-low": 20}
# Two nodes in the middle of the list, so neither is the first or the last the scheduler knows.
FIRST, SECOND = 17, 33
CONCURRENCY = 25  # requests in flight at once: the apiserver is not made to shed (429)
KUBELET_ARGS = ["--resize-retry-initial=600", "--resize-retry-interval=600"]

scale_cluster = cluster_fixture(hollow_nodes=NODES, schedulers=1, node_cpu="4", node_memory="8Gi",
                                kubelet_args=KUBELET_ARGS, feature_gates=GATE)


@pytest.fixture
async def api(scale_cluster):
    c = scale_cluster.client()
    await ensure_priority_classes(c, **PRIORITIES)
    try:
        yield c
        entries = [e async for e in check.entries_of(c)]
        assert check.check_entries(entries) == []  # kplane check, over the whole history
    finally:
        await c.close()  # the module's only test: its cluster goes, pods and all


def _node_name(i: int) -> str:
    return f"hollow-node-{i}"


def _high(i: int) -> str:
    return f"high-{i}"


def _lows(i: int) -> list[str]:
    return [f"low-{i}-{j}" for j in range(1, LOWS_PER_NODE + 1)]


async def _bounded(calls) -> None:
    sem = asyncio.Semaphore(CONCURRENCY)

    async def one(call):
        async with sem:
            await call

    await asyncio.gather(*(one(c) for c in calls))


def _resize_state(pod: core_pb2.Pod) -> dict[str, str]:
    return {c.type: c.reason for c in pod.status.conditions
            if c.type in ("PodResizePending", "PodResizeInProgress", "PodResizePreemptionDisabled")}


def _running(pod: core_pb2.Pod) -> bool:
    cs = pod.status.container_statuses
    return pod.status.phase == "Running" and bool(cs) and all(c.ready for c in cs)


def _actuated(pod: core_pb2.Pod, cpu: str) -> bool:
    """No resize condition left, and the container runs with ``cpu``."""
    cs = pod.status.container_statuses
    return (not _resize_state(pod) and bool(cs)
            and Quantity(cs[0].resources.requests.get("cpu", "0")) == Quantity(cpu))


async def _pods(api) -> dict[str, core_pb2.Pod]:
    return {p.metadata.name: p for p in (await api.pods.list("default")).items}


async def _until_all(api, names: list[str], ok, what: str, timeout: float) -> dict[str, core_pb2.Pod]:
    """Until ``ok(pod)`` holds for every named pod (one list per look); the pods as last listed."""
    box: dict = {}

    async def look():
        box["pods"] = pods = await _pods(api)
        box["bad"] = [n for n in names if n not in pods or not ok(pods[n])]
        return not box["bad"]

    try:
        await eventually(look, timeout=timeout, interval=0.5, what=what)
    except AssertionError:
        bad = box.get("bad", names)
        raise AssertionError(f"{what}: {len(bad)} not yet, e.g. {bad[:5]}") from None
    return box["pods"]


def _pending_resize(tc, queue: str) -> float:
    return metric(tc, "scheduler", "scheduler_pending_resize_pods", f'queue="{queue}"')


def _attempts(tc) -> dict[str, float]:
    results = ("preempted", "unschedulable", "parked")
    return {r: metric(tc, "scheduler", "scheduler_resize_preemption_attempts_total",
                      f'profile="default-scheduler",result="{r}"') for r in results}


def _accepted_on_pods_removed(tc) -> float:
    """Deferred resizes the hollow kubelets accepted when a pod left their node (all nodes summed)."""
    return metric(tc, "hollow-nodes", "kubelet_pod_deferred_resize_accepted_total", 'retry_trigger="pods_removed"')


async def _delete_high_pod_and_check_its_node_alone_is_requeued(api, tc, i: int, waiting: int) -> None:
    """Delete the high pod of node ``i`` while ``waiting`` deferred pods sit in the unschedulable
    pool: exactly its node's 4 move out, the others stay, its kubelet actuates the 4 resizes."""
    moved = requeued_by(tc, "AssignedPodDelete")
    accepted = _accepted_on_pods_removed(tc)
    await api.pods.delete(_high(i), "default", grace_period_seconds=0)
    await eventually(lambda: requeued_by(tc, "AssignedPodDelete") >= moved + LOWS_PER_NODE, timeout=30,
                     what=f"{_node_name(i)}'s deferred pods moved out of the unschedulable pool")
    # Node-aware hints: the deletion is Queue for that node's 4 pods, QueueSkip for the others.
    assert requeued_by(tc, "AssignedPodDelete") == moved + LOWS_PER_NODE
    assert _pending_resize(tc, "unschedulable") >= waiting - LOWS_PER_NODE
    # 2 CPUs freed: room for all four to grow by 500m, and the kubelet gives it on the deletion.
    pods = await _until_all(api, _lows(i), lambda p: _actuated(p, RESIZED_CPU),
                            f"{_node_name(i)}'s four resizes actuated", timeout=30)
    for name in _lows(i):
        assert pods[name].spec.node_name == _node_name(i) and _running(pods[name]), name
    assert _accepted_on_pods_removed(tc) == accepted + LOWS_PER_NODE
    # Once they are actuated (their own updates, on their own node, came and went), the count of
    # pods the deletion moved is still 4.
    assert requeued_by(tc, "AssignedPodDelete") == moved + LOWS_PER_NODE


async def test_kep5836_node_aware_requeue_at_scale_moves_only_the_deleted_pods_node(api, scale_cluster):
    tc = scale_cluster
    nodes = range(1, NODES + 1)
    lows = [n for i in nodes for n in _lows(i)]
    everyone = [_high(i) for i in nodes] + lows

    # On each node: the high pod (2 CPUs) and four low ones (500m each), 4 CPUs in all.
    await _bounded(api.pods.create(MakePod().name(_high(i)).req(cpu=HIGH_CPU, memory="64Mi").priority_class("p-high")
                                   .node(_node_name(i)).grace(0)
                                   .resize_policy("cpu", "NotRequired").obj()) for i in nodes)
    await _bounded(api.pods.create(MakePod().name(n).req(cpu=LOW_CPU, memory="64Mi").priority_class("p-low")
                                   .node(_node_name(i)).grace(0)
                                   .resize_policy("cpu", "NotRequired").obj()) for i in nodes for n in _lows(i))
    await _until_all(api, everyone, _running, "all 250 pods running", timeout=60)

    # Each low pod asks for 1 CPU: its node has none left, and the only other pod there outranks it.
    await _bounded(resize(api, n, cpu=RESIZED_CPU) for n in lows)
    await _until_all(api, lows, lambda p: _resize_state(p) == {"PodResizePending": "Deferred"},
                     "all 200 resizes deferred by their kubelets", timeout=60)
    await eventually(lambda: _pending_resize(tc, "unschedulable") == len(lows), timeout=120, interval=0.5,
                     what="the scheduler holds the 200 deferred pods in its unschedulable pool")
    assert _pending_resize(tc, "active") == 0 and _pending_resize(tc, "backoff") == 0
    attempts = _attempts(tc)
    assert attempts["preempted"] == 0 and attempts["unschedulable"] >= len(lows), attempts

    await _delete_high_pod_and_check_its_node_alone_is_requeued(api, tc, FIRST, waiting=len(lows))
    # Per node, not a one-off: another node, the same 4.
    await _delete_high_pod_and_check_its_node_alone_is_requeued(api, tc, SECOND, waiting=len(lows) - LOWS_PER_NODE)

    # The 8 actuated resizes left the queue; the 192 others still wait, where they were.
    others = len(lows) - 2 * LOWS_PER_NODE
    await eventually(lambda: _pending_resize(tc, "unschedulable") == others, timeout=30, interval=0.5,
                     what=f"{others} deferred pods left in the unschedulable pool")
    assert _pending_resize(tc, "active") == 0 and _pending_resize(tc, "backoff") == 0
    pods = await _pods(api)
    still = [n for n in lows if pods[n].spec.node_name not in (_node_name(FIRST), _node_name(SECOND))]
    assert len(still) == others
    assert all(_resize_state(pods[n]) == {"PodResizePending": "Deferred"} and _running(pods[n]) for n in still)

    # Nothing preempted, anywhere: no attempt succeeded, no Preempted event, every pod but the two
    # deleted high ones still there.
    assert _attempts(tc)["preempted"] == 0
    events = (await api.events.list("default")).items
    assert [e.involved_object.name for e in events if e.reason == "Preempted"] == []
    assert sorted(pods) == sorted(set(everyone) - {_high(FIRST), _high(SECOND)})
