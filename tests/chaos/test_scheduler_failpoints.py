"""Chaos for the scheduler: killed at each point the preemption design calls dangerous, it converges.

kplane puts a failpoint at each (docs/scheduler.md, "Failpoints"): after the victims are chosen
(nothing touched yet), after the first victim is deleted (the others not yet), before the nomination
is written (every victim deleted, the preemptor not nominated) and before the binding is sent (the
pod assumed in the dead process's cache only). With async preemption (KEP-4832, on by default) the
victims go in a task of their own and the nomination is written at once, so each module runs twice:
with the gate and without. Each test arms one point with ``panic`` — the scheduler dies there, as
with SIGKILL —, checks that it died with the state that point implies on that path, starts it again,
and asserts what the cluster must end with:

- every pod is Running on its node, or Pending, unbound, with PodScheduled=False, reason
  Unschedulable, and kube-scheduler's message ("0/2 nodes are available: 2 Insufficient cpu...");
- the high-priority pods run, each on a node where lower-priority pods were preempted (nodes
  full of lower-priority pods leave no other room); every pod the scheduler deleted carried the
  DisruptionTarget condition first;
- no pod was bound twice, and no node holds more requests than it can;
- ``kplane check`` replays the whole history and finds nothing.

Two nodes of 2 cpu, each filled by four 500m low-priority pods (grace period 1 s); two
high-priority pods of 1 cpu (each needs two victims) arrive together, with a 3-cpu pod that fits
nowhere, so the restarted scheduler has a race to settle and a pod to leave Pending.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from machinery.api import core_pb2
from machinery.resources import pod_requests
from tests.harness.api import delete_all_pods, ensure_priority_classes
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, start, start_cluster, stop_cluster, wait_exited
from tests.harness.failpoints import failpoint
from tests.harness.history import pod_revisions
from tests.harness.wait import condition, eventually, wait_running

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

NODES = ("node-1", "node-2")
NODE_CPU = 2000  # millicores, per node
LOWS = [f"low-{i}" for i in range(8)]  # 8 x 500m: both nodes full
HIGHS = ["high-1", "high-2"]  # 1 cpu each: two victims each
TOO_BIG = "too-big"  # 3 cpu: no node has that much, preemption or not

# Preemption with and without KEP-4832's asynchronous victim eviction (SchedulerAsyncPreemption,
# on by default): the failpoints sit on both paths, and each must converge.
MODES = {"async": [], "sync": ["--feature-gates=SchedulerAsyncPreemption=false"]}


@pytest.fixture(scope="module", params=list(MODES))
def fp_cluster(request):
    tc = start_cluster(nodes=2, schedulers=1, node_cpu="2", node_memory="4Gi", kubelet_args=FAST_KUBELET,
                       scheduler_args=MODES[request.param])
    tc.mode = request.param
    try:
        yield tc
    finally:
        stop_cluster(tc)


@pytest.fixture
async def api(fp_cluster):
    c = fp_cluster.client()
    await ensure_priority_classes(c, low=100, high=1000)
    start(fp_cluster, "scheduler")  # a no-op unless an earlier test left it dead
    await delete_all_pods(c)
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


async def _create(api, names: list[str], cpu: str, priority_class: str) -> set[str]:
    """The pods, created; their uids."""
    uids = set()
    for n in names:
        pod = await api.pods.create(MakePod().name(n).req(cpu=cpu, memory="64Mi").priority_class(priority_class)
                                    .grace(1).obj())
        uids.add(pod.metadata.uid)
    return uids


def _preempted(pod: core_pb2.Pod) -> bool:
    c = condition(pod, "DisruptionTarget")
    return c is not None and c.status == "True" and c.reason == "PreemptionByScheduler"


def _victims(history) -> dict[str, core_pb2.Pod]:
    """Pods the scheduler marked as preemption victims, by uid (their last revision)."""
    return {uid: revs[-1][2] for uid, revs in history.items() if any(_preempted(p) for _, _, p in revs)}


def _marked_before_deleted(revs: list[tuple[int, str, core_pb2.Pod]]) -> bool:
    """The DisruptionTarget condition was written before the delete (deletionTimestamp, or gone)."""
    marked = next((rev for rev, _, p in revs if _preempted(p)), None)
    deleted = next((rev for rev, type_, p in revs if type_ == "DELETED" or p.metadata.deletion_timestamp), None)
    return marked is not None and (deleted is None or marked < deleted)


def _bindings(revs: list[tuple[int, str, core_pb2.Pod]]) -> list[tuple[int, str]]:
    """(rev, node) each time the pod went from unbound to bound, or changed node."""
    out, node = [], ""
    for rev, type_, pod in revs:
        if type_ != "DELETED" and pod.spec.node_name != node:
            node = pod.spec.node_name
            out.append((rev, node))
    return out


def _unschedulable(pod: core_pb2.Pod) -> bool:
    c = condition(pod, "PodScheduled")
    return (not pod.spec.node_name and pod.status.phase == "Pending" and c is not None and c.status == "False"
            and c.reason == "Unschedulable")


async def _settled(api) -> list[core_pb2.Pod]:
    """Until no pod is terminating and each is Running on a node or Pending as Unschedulable."""
    pods: list[core_pb2.Pod] = []

    async def check():
        nonlocal pods
        pods = list((await api.pods.list("default")).items)
        return all(not p.metadata.deletion_timestamp and (
            (p.spec.node_name and p.status.phase == "Running") or _unschedulable(p)) for p in pods)

    await eventually(check, timeout=60, interval=0.2, what="every pod Running or Pending as Unschedulable")
    return pods


def _assert_no_node_overcommitted(pods: list[core_pb2.Pod]) -> None:
    used = {n: 0 for n in NODES}
    for p in pods:
        if p.spec.node_name:
            used[p.spec.node_name] += pod_requests(p).get("cpu", 0)
    assert all(cpu <= NODE_CPU for cpu in used.values()), f"cpu requests per node: {used}"


async def _assert_converged(tc, api, uids: set[str]) -> None:
    running = await wait_running(api, *HIGHS, timeout=60)
    pods = await _settled(api)
    by_name = {p.metadata.name: p for p in pods}
    history = await pod_revisions(api, uids)

    # The pod that fits nowhere waits, saying why in kube-scheduler's words.
    big = by_name[TOO_BIG]
    assert _unschedulable(big), big.status
    message = condition(big, "PodScheduled").message
    assert message.startswith("0/2 nodes are available: 2 Insufficient cpu."), message
    assert not big.status.nominated_node_name
    # Every other pod runs; lows either run or were preempted (deleted, with DisruptionTarget first).
    assert sorted(n for n, p in by_name.items() if p.status.phase == "Running") == \
        sorted(n for n in by_name if n != TOO_BIG)
    victims = _victims(history)
    victim_names = {p.metadata.name for p in victims.values()}
    assert all(n.startswith("low-") for n in victim_names), victim_names
    gone = {n for n in LOWS if n not in by_name}
    assert gone == victim_names, f"deleted: {sorted(gone)}, marked as victims: {sorted(victim_names)}"
    for uid in victims:
        assert _marked_before_deleted(history[uid]), [(r, t, bool(p.metadata.deletion_timestamp), _preempted(p))
                                                      for r, t, p in history[uid]]
    # Each high-priority pod runs where lower-priority pods made room for it.
    victim_nodes = {p.spec.node_name for p in victims.values()}
    for n in HIGHS:
        assert running[n].spec.node_name in victim_nodes, (n, running[n].spec.node_name, victim_nodes)
    _assert_no_node_overcommitted(pods)
    # No pod was bound twice: one binding each, and never to another node.
    for revs in history.values():
        assert len(_bindings(revs)) <= 1, (revs[-1][2].metadata.name, _bindings(revs))
    out = tc.kplane("check")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "bound-requests-within-allocatable" in out.stdout


def _restart_after(tc, name: str) -> None:
    """The scheduler died at the failpoint ``name`` (its log says so): start it again."""
    log = Path(tc.process("scheduler").log).read_text()
    assert f'"failpoint": "{name}"' in log and "failpoint_panic" in log
    start(tc, "scheduler")


PREEMPTION_POINTS = {
    # failpoint: how many pods the scheduler had marked as victims when it died, (least, most), per mode
    "scheduler/preemption-after-victims-chosen": {"sync": (0, 0), "async": (0, 0)},
    # Sync: the first victim of the first preemptor. Async: each preemptor's eviction task runs on
    # its own, so the other one's first victim may be marked too — never a second victim.
    "scheduler/preemption-after-first-victim": {"sync": (1, 1), "async": (1, len(HIGHS))},
    # Sync: both victims of the first preemptor are deleted before its nomination is written.
    # Async: the nomination is written at once while the victims go in the background.
    "scheduler/before-nominate": {"sync": (2, 2), "async": (0, 2)},
}


@pytest.mark.parametrize("point", list(PREEMPTION_POINTS), ids=[p.split("/")[1] for p in PREEMPTION_POINTS])
async def test_scheduler_killed_while_preempting_converges(fp_cluster, api, point):
    uids = await _create(api, LOWS, "500m", "low")
    await wait_running(api, *LOWS, timeout=60)
    failpoint(fp_cluster, "scheduler", point, "panic")
    uids |= await _create(api, HIGHS, "1", "high")
    uids |= await _create(api, [TOO_BIG], "3", "high")

    await wait_exited(fp_cluster, "scheduler", timeout=60)
    # It died exactly there: victims marked up to that point, no preemptor bound.
    history = await pod_revisions(api, uids)
    least, most = PREEMPTION_POINTS[point][fp_cluster.mode]
    marked = sorted(p.metadata.name for p in _victims(history).values())
    assert least <= len(marked) <= most, marked
    # Nominations are written after the victims go, but at once with async preemption.
    nominated_yet = fp_cluster.mode == "async" and point == "scheduler/preemption-after-first-victim"
    for n in HIGHS:
        pod = await api.pods.get(n)
        assert not pod.spec.node_name, pod.spec.node_name
        assert nominated_yet or not pod.status.nominated_node_name, pod.status
    _restart_after(fp_cluster, point)

    await _assert_converged(fp_cluster, api, uids)


async def test_scheduler_killed_before_binding_converges(fp_cluster, api):
    point = "scheduler/before-bind"
    names = [f"web-{i}" for i in range(6)]  # 6 x 500m: room for all on the two nodes
    failpoint(fp_cluster, "scheduler", point, "panic")
    uids = await _create(api, names, "500m", "low")
    uids |= await _create(api, [TOO_BIG], "3", "high")
    await wait_exited(fp_cluster, "scheduler", timeout=60)
    # Every binding passes the failpoint first: none was sent.
    assert not [p.metadata.name for p in (await api.pods.list("default")).items if p.spec.node_name]
    _restart_after(fp_cluster, point)

    await wait_running(api, *names, timeout=60)
    pods = await _settled(api)
    assert sorted(p.metadata.name for p in pods if p.status.phase == "Running") == sorted(names)
    big = next(p for p in pods if p.metadata.name == TOO_BIG)
    assert condition(big, "PodScheduled").message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    _assert_no_node_overcommitted(pods)
    history = await pod_revisions(api, uids)
    assert not _victims(history), "nothing needed preempting"
    for revs in history.values():
        assert len(_bindings(revs)) <= 1, (revs[-1][2].metadata.name, _bindings(revs))
    out = fp_cluster.kplane("check")
    assert out.returncode == 0, out.stdout + out.stderr
