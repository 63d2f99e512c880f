"""The scheduling queue's ``pod_requeued`` record: one per pod a cluster event moves out of the
unschedulable pool (never one per event), naming the event, the plugin whose QueueingHint said
Queue, whether its PreQueueingHint (KEP-6132) had named the pod, and the sub-queues it went
from and to — what ``kplane explain pod`` reads to say which event requeued a pod and why."""

from __future__ import annotations

from structlog.testing import capture_logs

from scheduler.framework.types import (
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_NODE_ADD,
    EVENT_RESOURCE_CLAIM_UPDATE,
    RESOURCE_CLAIM,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    PreQueueingHintResult,
    QueueingHint,
)
from scheduler.queue.scheduling_queue import ACTIVE_Q, BACKOFF_Q, IN_FLIGHT, UNSCHEDULABLE_Q, SchedulingQueue
from tests.harness.builders import MakeNode, MakePod
from tests.unit.test_sched_queue import FIT_HINTS, Clock, less, pop, queue, reject

PROFILE = "default-scheduler"


def _requeues(logs: list[dict]) -> list[tuple]:
    return [(e["pod"], e["cluster_event"], e["plugin"], e["hint"], e["pre_queueing_hint"], e["from_queue"],
             e["to_queue"]) for e in logs if e["event"] == "pod_requeued"]


async def _rejected(q: SchedulingQueue, name: str, *plugins: str):
    q.add(MakePod().name(name).uid(f"uid-{name}").scheduler_name(PROFILE).obj())
    p = await pop(q)
    reject(q, p, *plugins)
    assert q.where(p.pod) == UNSCHEDULABLE_Q
    return p


async def test_a_moved_pod_is_logged_once_with_the_plugin_and_hint_that_said_queue():
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    await _rejected(q, "a", "Fit")
    await _rejected(q, "b", "Fit")
    with capture_logs() as logs:
        # Fit's node hint says QueueSkip for a 1-cpu node: nothing moves, nothing is logged.
        q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, MakeNode().name("small").allocatable(cpu="1").obj())
        assert _requeues(logs) == []
        # Queue for a 4-cpu node: both pods move (each still backing off), one record each.
        q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None,
                                        MakeNode().name("big").resource_version("42").allocatable(cpu="4").obj())
    assert _requeues(logs) == [
        ("default/a", "NodeAdd", "Fit", "Queue", False, UNSCHEDULABLE_Q, BACKOFF_Q),
        ("default/b", "NodeAdd", "Fit", "Queue", False, UNSCHEDULABLE_Q, BACKOFF_Q)]
    assert {e["uid"] for e in logs} == {"uid-a", "uid-b"}
    # The change that moved them: the node added, at its revision.
    assert {(e["trigger"], e["trigger_rv"]) for e in logs} == {("big", "42")}


async def test_a_pod_past_its_backoff_goes_straight_to_active():
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    await _rejected(q, "a", "Fit")
    clock.t += 5
    with capture_logs() as logs:
        q.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, MakePod().name("gone").node("n").obj(), None)
    # Fit registered the pod deletion without a hint function: Queue, as kube-scheduler's default.
    assert _requeues(logs) == [("default/a", EVENT_ASSIGNED_POD_DELETE.label, "Fit", "Queue", False,
                                UNSCHEDULABLE_Q, ACTIVE_Q)]
    assert logs[0]["trigger"] == "default/gone"


async def test_the_pre_queueing_hint_that_named_the_pod_is_recorded():
    claims = ClusterEvent(RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE)

    def hint(pod, old, new) -> QueueingHint:
        return QueueingHint.QUEUE

    def pre_hint(old, new) -> PreQueueingHintResult:
        return PreQueueingHintResult.narrowed(["default/x"])

    q = SchedulingQueue(less, events={PROFILE: {"DRA": [ClusterEventWithHint(claims, hint, pre_hint)]}},
                        clock=Clock())
    await _rejected(q, "x", "DRA")
    await _rejected(q, "y", "DRA")
    with capture_logs() as logs:
        q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None)
    assert _requeues(logs) == [("default/x", "ResourceClaimUpdate", "DRA", "Queue", True, UNSCHEDULABLE_Q,
                                BACKOFF_Q)]


async def test_an_event_during_the_attempt_requeues_the_pod_from_in_flight():
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    q.add(MakePod().name("a").uid("uid-a").scheduler_name(PROFILE).obj())
    p = await pop(q)
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, MakeNode().name("big").allocatable(cpu="4").obj())
    with capture_logs() as logs:
        reject(q, p, "Fit")
    assert _requeues(logs) == [("default/a", "NodeAdd", "Fit", "Queue", False, IN_FLIGHT, BACKOFF_Q)]


async def test_a_pod_that_comes_back_with_no_event_for_it_is_not_logged_as_requeued():
    q = queue(Clock(), hints=FIT_HINTS)
    with capture_logs() as logs:
        await _rejected(q, "a", "Fit")
    assert _requeues(logs) == []
