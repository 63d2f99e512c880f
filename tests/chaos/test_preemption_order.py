"""Preemption decides the same whatever order the scheduler learns things in.

The scheduler evicts its victims through API calls and sees them go through its informer; the
two travel separately, and on a loaded cluster the replies come back — KEP-4832's eviction task
ends, PreEnqueue lets the preemptor in again — while the informer still shows every victim
running (a victim with grace period 0, PreemptionBasic's, never even shows a deletionTimestamp:
it is simply removed). kube-scheduler DefaultPreemption's PodEligibleToPreemptOthers refuses a
preemptor whose nominated node has lower-priority pods terminating because of a preemption, and
async preemption keeps "preemptor -> victims in flight" so that the same pod does not preempt
again meanwhile: one victim set per preemptor, whatever the order.

This test forces the bad order on two nodes of 2 cpu, each full with four 500m low-priority pods:

1. the scheduler is held (``scheduler/preemption-after-victims-chosen=1*pause``) just after it
   chose the preemptor's two victims;
2. meanwhile an unrelated bound pod (BestEffort: its room helps nobody) is deleted and the
   scheduler sees it — an event while the preemptor is in flight, which sends the preemptor back
   to activeQ after its 1 s backoff;
3. the apiserver then delays every watch batch by 6 s (``apiserver/watch-delivery=sleep(6000)``:
   informer lag) and the scheduler is let go. The evictions' replies come back at once, the
   victims' events 6 s later; the preemptor's second attempt comes in between.

Expected, as kube-scheduler: the second attempt is refused with kube-scheduler's message
("preemption: not eligible due to a terminating pod on the nominated node."), the preemptor
runs on its nominated node once its victims are gone, ``scheduler_preemption_victims`` counts
one victim set, exactly two low-priority pods went (both from that node), and ``kplane check``
(no-preemption-while-victims-going among its rules) finds nothing. Run with grace period 0 (the
benchmark's victims) and 2 s (victims that stay terminating a while).
"""

from __future__ import annotations

import time

import pytest

from machinery.api import core_pb2
from tests.harness.api import delete_all_pods, ensure_priority_classes
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.history import pod_revisions
from tests.harness.metrics import metric
from tests.harness.wait import condition, eventually, wait_running

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

POINT = "scheduler/preemption-after-victims-chosen"
WATCH_DELIVERY = "apiserver/watch-delivery"
LAG_S = 6.0  # informer lag while the preemptor retries
LOWS = [f"low-{i}" for i in range(8)]  # 8 x 500m: both nodes full
NOT_ELIGIBLE = "preemption: not eligible due to a terminating pod on the nominated node."

order_cluster = cluster_fixture(nodes=2, schedulers=1, node_cpu="2", node_memory="4Gi", kubelet_args=FAST_KUBELET)


@pytest.fixture
async def api(order_cluster):
    c = order_cluster.client()
    await ensure_priority_classes(c, low=100, high=1000)
    await delete_all_pods(c)
    try:
        yield c
    finally:
        failpoint(order_cluster, "apiserver", WATCH_DELIVERY, "off")
        failpoint(order_cluster, "scheduler", POINT, "off")
        await delete_all_pods(c)
        await c.close()


def _scheduler(tc, name: str, labels: str = "") -> float:
    return metric(tc, "scheduler", name, labels)


def _preempted(pod: core_pb2.Pod) -> bool:
    c = condition(pod, "DisruptionTarget")
    return c is not None and c.status == "True" and c.reason == "PreemptionByScheduler"


async def _marked_as_victims(api, uids: set[str]) -> dict[str, str]:
    """Pods of these uids that ever carried the preemption mark: name -> node."""
    return {pod.metadata.name: pod.spec.node_name for revs in (await pod_revisions(api, uids)).values()
            for _, _, pod in revs if _preempted(pod)}


@pytest.mark.parametrize("grace", [0, 2], ids=["grace-0", "grace-2"])
async def test_one_victim_set_per_preemptor_when_replies_come_before_the_informer_events(order_cluster, api, grace):
    tc = order_cluster
    uids = set()
    for name in LOWS:
        uids.add((await api.pods.create(MakePod().name(name).req(cpu="500m", memory="64Mi").priority_class("low")
                                        .grace(grace).obj())).metadata.uid)
    await api.pods.create(MakePod().name("trigger").priority_class("high").grace(0).obj())  # BestEffort
    await wait_running(api, *LOWS, "trigger", timeout=60)
    victim_sets = _scheduler(tc, "scheduler_preemption_victims_count")
    attempts = _scheduler(tc, "scheduler_preemption_attempts_total")

    # 1. Held just after choosing the victims.
    failpoint(tc, "scheduler", POINT, "1*pause")
    await api.pods.create(MakePod().name("preemptor").req(cpu="1", memory="64Mi").priority_class("high").obj())
    await wait_paused(tc, "scheduler", POINT, timeout=30)
    # 2. An event for the preemptor in flight: a bound pod deleted, seen by the scheduler.
    cached = _scheduler(tc, "scheduler_cache_size", 'type="pods"')
    await api.pods.delete("trigger", grace_period_seconds=0)
    await eventually(lambda: _scheduler(tc, "scheduler_cache_size", 'type="pods"') == cached - 1, timeout=20,
                     what="the scheduler's cache without the deleted pod")
    # 3. Informer lag from now on; the scheduler goes on.
    failpoint(tc, "apiserver", WATCH_DELIVERY, f"sleep({int(LAG_S * 1000)})")
    released = time.monotonic()
    failpoint(tc, "scheduler", POINT, "off")
    try:
        # The second attempt comes while the victims' events are held (else it would prove nothing).
        await eventually(lambda: _scheduler(tc, "scheduler_preemption_attempts_total") >= attempts + 2,
                         timeout=LAG_S - 1, interval=0.1, what="the preemptor's second attempt, within the lag")
        assert time.monotonic() - released < LAG_S
    finally:
        failpoint(tc, "apiserver", WATCH_DELIVERY, "off")

    running = (await wait_running(api, "preemptor", timeout=60))["preemptor"]
    # One victim set, and the second attempt refused in kube-scheduler's words.
    assert _scheduler(tc, "scheduler_preemption_victims_count") - victim_sets == 1
    events = await api.events.list("default", field_selector="involvedObject.name=preemptor")
    failed = [e.message for e in events.items if e.reason == "FailedScheduling"]
    assert any(m.endswith(NOT_ELIGIBLE) for m in failed), failed
    # Two victims, both on the node the preemptor runs on; every other low-priority pod runs.
    victims = await _marked_as_victims(api, uids)
    assert len(victims) == 2 and set(victims.values()) == {running.spec.node_name}, victims
    assert running.status.nominated_node_name in ("", running.spec.node_name)
    left = {p.metadata.name for p in (await api.pods.list("default")).items}
    assert left == (set(LOWS) - set(victims)) | {"preemptor"}, left
    check = tc.kplane("check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "no-preemption-while-victims-going" in check.stdout
