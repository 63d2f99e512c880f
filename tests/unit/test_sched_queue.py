"""The scheduling queue: priority order, backoff, the unschedulable pool and QueueingHints (only the
plugins that rejected a pod are asked), events seen while a pod is in flight, scheduling gates,
the periodic flush, nominations."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from machinery.api import core_pb2
from scheduler.eventhandlers import EventHandlers
from scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from scheduler.framework.types import (
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_NODE_ADD,
    NODE,
    POD,
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    NominatingInfo,
    NominatingMode,
    QueueingHint,
    Status,
)
from scheduler.queue.scheduling_queue import ACTIVE_Q, BACKOFF_Q, GATED, UNSCHEDULABLE_Q, SchedulingQueue
from tests.harness.builders import MakeNode, MakePod


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    pa, pb = a.pod.spec.priority, b.pod.spec.priority
    return pa > pb if pa != pb else a.timestamp < b.timestamp


def queue(clock: Clock, *, hints=None, gates=None) -> SchedulingQueue:
    events = {"default-scheduler": hints or {}}
    pre_enqueue = {"default-scheduler": gates} if gates else {}
    return SchedulingQueue(less, events=events, pre_enqueue=pre_enqueue, clock=clock)


async def pop(q: SchedulingQueue) -> QueuedPodInfo:
    return await asyncio.wait_for(q.pop(), 1.0)


def reject(q: SchedulingQueue, p: QueuedPodInfo, *plugins: str) -> None:
    p.unschedulable_plugins = set(plugins)
    q.add_unschedulable_if_not_present(p)


# Hints of a fit-like plugin: a node add queues pods only if the node has >= 2 cpu; any assigned
# pod deletion queues them.
def node_hint(pending: core_pb2.Pod, old, new) -> QueueingHint:
    return QueueingHint.QUEUE if new is not None and new.status.allocatable.get("cpu") in ("2", "4") \
        else QueueingHint.QUEUE_SKIP


FIT_HINTS = {"Fit": [ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD), node_hint),
                     ClusterEventWithHint(ClusterEvent(POD, ActionType.DELETE))]}
AFFINITY_HINTS = {"Affinity": [ClusterEventWithHint(ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL))]}


async def test_active_queue_pops_by_priority_then_arrival():
    clock = Clock()
    q = queue(clock)
    q.add(MakePod().name("low").uid("uid-low").priority(1).scheduler_name("default-scheduler").obj())
    clock.t += 1
    q.add(MakePod().name("high").uid("uid-high").priority(10).scheduler_name("default-scheduler").obj())
    clock.t += 1
    q.add(MakePod().name("low-later").uid("uid-low-later").priority(1).scheduler_name("default-scheduler").obj())
    assert [(await pop(q)).pod.metadata.name for _ in range(3)] == ["high", "low", "low-later"]


async def test_an_unschedulable_pod_waits_until_a_hint_of_its_rejector_says_queue():
    clock = Clock()
    q = queue(clock, hints={**FIT_HINTS, **AFFINITY_HINTS})
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)
    reject(q, p, "Fit")
    assert q.where(p.pod) == UNSCHEDULABLE_Q
    # A node-label change interests only Affinity, which did not reject the pod: it stays.
    q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL),
                                    MakeNode().name("n").allocatable(cpu="4").obj(),
                                    MakeNode().name("n").allocatable(cpu="4").obj())
    assert q.where(p.pod) == UNSCHEDULABLE_Q
    # Fit's hint says skip for a 1-cpu node...
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, MakeNode().name("small").allocatable(cpu="1").obj())
    assert q.where(p.pod) == UNSCHEDULABLE_Q
    # ... and queue for a 4-cpu node: the pod backs off first (1 s after its failure).
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, MakeNode().name("big").allocatable(cpu="4").obj())
    assert q.where(p.pod) == BACKOFF_Q
    clock.t += 1.01
    q.flush_backoff_completed()
    assert q.where(p.pod) == ACTIVE_Q


async def test_backoff_doubles_per_failure_up_to_the_maximum():
    clock = Clock()
    q = queue(clock)
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)
    durations = []
    for _ in range(6):
        reject(q, p, "Fit")
        durations.append(q.backoff_duration(p))
        q.move_all_to_active_or_backoff(ClusterEvent("*", ActionType.ALL, "Test"), None, None)
        clock.t += 20
        q.flush_backoff_completed()
        p = await pop(q)
    assert durations == [1, 2, 4, 8, 10, 10]


async def test_an_event_during_the_attempt_is_not_lost():
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)  # in flight
    q.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, MakePod().name("gone").uid("uid-gone").priority(0)
                                                               .scheduler_name("default-scheduler")
                                                               .node("n1").obj(), None)
    reject(q, p, "Fit")
    assert q.where(p.pod) == BACKOFF_Q, "the deletion during its attempt must requeue it"
    assert q.in_flight_count() == 0 and q.in_flight_events_count() == 0


async def test_an_event_during_the_attempt_that_no_rejector_cares_about_is_skipped():
    clock = Clock()
    q = queue(clock, hints={**FIT_HINTS, **AFFINITY_HINTS})
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)
    q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.UPDATE_NODE_LABEL),
                                    MakeNode().name("n").allocatable(cpu="4").obj(),
                                    MakeNode().name("n").allocatable(cpu="4").obj())
    reject(q, p, "Fit")
    assert q.where(p.pod) == UNSCHEDULABLE_Q


async def test_a_pod_failing_with_an_error_not_a_rejection_is_retried_after_backoff():
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)
    q.add_unschedulable_if_not_present(p)  # no rejecting plugin
    assert q.where(p.pod) == BACKOFF_Q and p.consecutive_errors_count == 1


async def test_scheduling_gates_keep_a_pod_gated_until_its_update_removes_them():
    clock = Clock()

    def gates(p: core_pb2.Pod):
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "gated", plugin="SchedulingGates") \
            if p.spec.scheduling_gates else None

    def gates_gone(pending, old, new) -> QueueingHint:
        return QueueingHint.QUEUE if new.metadata.uid == pending.metadata.uid and not new.spec.scheduling_gates \
            else QueueingHint.QUEUE_SKIP

    hints = {"SchedulingGates": [ClusterEventWithHint(
        ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED), gates_gone)], **FIT_HINTS}
    q = queue(clock, hints=hints, gates=gates)
    gated = MakePod().name("gated").uid("uid-gated").priority(0).scheduler_name("default-scheduler").obj()
    gated.spec.scheduling_gates.add(name="example.com/foo")
    q.add(gated)
    assert q.where(gated) == GATED
    assert q.counts()[GATED] == 1
    # Cluster events that only other plugins care about never move a gated pod.
    q.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, MakeNode().name("big").allocatable(cpu="4").obj())
    assert q.where(gated) == GATED
    open_ = MakePod().name("gated").uid("uid-gated").priority(0).scheduler_name("default-scheduler").obj()
    q.update(gated, open_)
    assert q.where(open_) == ACTIVE_Q


async def test_pods_left_unschedulable_too_long_are_flushed_and_marked():
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    q.max_in_unschedulable = 300
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)
    reject(q, p, "Fit")
    clock.t += 200
    q.flush_unschedulable_leftover()
    assert q.where(p.pod) == UNSCHEDULABLE_Q
    clock.t += 101
    q.flush_unschedulable_leftover()
    assert q.where(p.pod) == ACTIVE_Q and p.flushed
    # Rejected again, then requeued by an event: no longer a pod the flush brought back (as
    # kube-scheduler clears WasFlushedFromUnschedulable), so scheduler_pod_scheduled_after_flush_total
    # counts only pods whose last way out was the flush.
    p = await pop(q)
    reject(q, p, "Fit")
    assert not p.flushed
    q.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, MakePod().name("gone").obj(), None)
    assert q.where(p.pod) == BACKOFF_Q and not p.flushed


async def test_nominations_are_kept_and_cleared():
    clock = Clock()
    q = queue(clock)
    nominated = MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler").obj()
    nominated.status.nominated_node_name = "n1"
    q.add(nominated)
    assert [pi.pod.metadata.name for pi in q.nominated_pods_for_node("n1")] == ["preemptor"]
    p = await pop(q)
    q.add_nominated_pod(p.pod_info, NominatingInfo("n2", NominatingMode.OVERRIDE))
    assert q.nominated_pods_for_node("n1") == [] and len(q.nominated_pods_for_node("n2")) == 1
    q.delete(p.pod)
    assert q.nominated_pods_for_node("n2") == []


async def test_pop_waits_for_a_pod_and_close_ends_it():
    q = queue(Clock())
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0.01)
    assert not waiter.done()
    q.add(MakePod().name("late").uid("uid-late").priority(0).scheduler_name("default-scheduler").obj())
    assert (await asyncio.wait_for(waiter, 1.0)).pod.metadata.name == "late"
    waiter = asyncio.create_task(q.pop())
    await asyncio.sleep(0.01)
    await q.close()
    assert await asyncio.wait_for(waiter, 1.0) is None


async def test_a_shut_queue_hands_out_no_pod_it_holds():
    """shut() takes effect at once: a pop that follows, with pods in activeQ, gets none."""
    q = queue(Clock())
    q.add(MakePod().name("waiting").uid("uid-waiting").priority(0).scheduler_name("default-scheduler").obj())
    q.shut()
    assert q.closed
    assert await q.pop() is None


@pytest.mark.parametrize("event,moves", [(ClusterEvent(NODE, ActionType.ADD), True),
                                         (ClusterEvent(NODE, ActionType.UPDATE_NODE_TAINT), False)])
async def test_only_events_some_plugin_registered_are_considered(event, moves):
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await pop(q)
    reject(q, p, "Fit")
    clock.t += 5
    q.move_all_to_active_or_backoff(event, None, MakeNode().name("big").allocatable(cpu="4").obj())
    assert (q.where(p.pod) == ACTIVE_Q) is moves


async def test_the_nominator_refuses_a_pod_gone_or_bound_meanwhile():
    """kube-scheduler's nominator checks its pod lister: a decision about a pod deleted (or bound)
    while its cycle ran must not hold room on the node for good."""
    live: dict[str, core_pb2.Pod] = {}
    q = SchedulingQueue(less, clock=Clock(), get_pod=lambda ns, name: live.get(name))
    gone = MakePod().name("gone").uid("uid-gone").priority(10).scheduler_name("default-scheduler").obj()
    q.add_nominated_pod(PodInfo(gone), NominatingInfo("n1", NominatingMode.OVERRIDE))
    assert q.nominated_pods_for_node("n1") == []
    bound = MakePod().name("bound").uid("uid-bound").priority(10).scheduler_name("default-scheduler").obj()
    live["bound"] = (MakePod().name("bound").uid("uid-bound").priority(10).scheduler_name("default-scheduler")
                     .node("n2").obj())
    q.add_nominated_pod(PodInfo(bound), NominatingInfo("n1", NominatingMode.OVERRIDE))
    assert q.nominated_pods_for_node("n1") == []
    pending = MakePod().name("pending").uid("uid-pending").priority(10).scheduler_name("default-scheduler").obj()
    live["pending"] = pending
    q.add_nominated_pod(PodInfo(pending), NominatingInfo("n1", NominatingMode.OVERRIDE))
    assert [pi.pod.metadata.name for pi in q.nominated_pods_for_node("n1")] == ["pending"]


class _Cache:
    def add_pod(self, pod): pass

    def update_pod(self, old, new): pass

    def remove_pod(self, pod): pass

    def is_assumed(self, pod): return False


def _handlers(q: SchedulingQueue) -> EventHandlers:
    fw = SimpleNamespace(waiting_pods={})
    return EventHandlers(SimpleNamespace(cache=_Cache(), queue=q, frameworks={"default-scheduler": fw},
                                         resize_preemption=False))


async def test_a_nomination_that_moves_or_goes_frees_its_room_for_pods_of_lower_or_equal_priority():
    """kube-scheduler's updatePodInSchedulingQueue / deletePodFromSchedulingQueue: pods that a
    nominated pod's reserved room kept out are looked at again as if a bound pod had gone."""
    clock = Clock()
    q = queue(clock, hints=FIT_HINTS)
    h = _handlers(q)
    for name, prio in (("lower", 5), ("equal", 10), ("higher", 20)):
        q.add(MakePod().name(name).uid(f"uid-{name}").priority(prio).scheduler_name("default-scheduler").obj())
        reject(q, await pop(q), "Fit")
    clock.t += 20  # past every backoff
    nominated = MakePod().name("nominated").uid("uid-nominated").priority(10).scheduler_name("default-scheduler").obj()
    nominated.status.nominated_node_name = "n1"
    moved = MakePod().name("nominated").uid("uid-nominated").priority(10).scheduler_name("default-scheduler").obj()
    moved.status.nominated_node_name = "n2"
    moved.metadata.resource_version = "2"
    h.on_pod_update(nominated, moved)
    assert [q.where(MakePod().name(n).uid(f"uid-{n}").priority(0)
                    .scheduler_name("default-scheduler")
                    .obj()) for n in ("lower", "equal", "higher")] == [ACTIVE_Q, ACTIVE_Q, UNSCHEDULABLE_Q]
    reject(q, await pop(q), "Fit")
    reject(q, await pop(q), "Fit")
    clock.t += 20
    h.on_pod_delete(moved)  # deleted while nominated
    assert [q.where(MakePod().name(n).uid(f"uid-{n}").priority(0)
                    .scheduler_name("default-scheduler")
                    .obj()) for n in ("lower", "equal", "higher")] == [ACTIVE_Q, ACTIVE_Q, UNSCHEDULABLE_Q]
    reject(q, await pop(q), "Fit")
    reject(q, await pop(q), "Fit")
    clock.t += 20
    # nothing held: nothing moves
    h.on_pod_delete(MakePod().name("never-nominated").uid("uid-never-nominated").priority(10)
                    .scheduler_name("default-scheduler").obj())
    assert [q.where(MakePod().name(n).uid(f"uid-{n}").priority(0)
                    .scheduler_name("default-scheduler")
                    .obj()) for n in ("lower", "equal", "higher")] == [UNSCHEDULABLE_Q] * 3


async def test_a_bound_pods_label_change_is_offered_to_every_pod_through_its_rejectors_hints():
    """With QueueingHints kube-scheduler pre-filters nothing: a relabelled bound pod reaches a pod
    whose anti-affinity it no longer matches, as the rejecting plugin's hint decides."""
    seen = []

    def relabel_hint(pending, old, new):
        seen.append(pending.metadata.name)
        return QueueingHint.QUEUE if new.metadata.labels.get("app") != "web" else QueueingHint.QUEUE_SKIP

    hints = {"InterPodAffinity": [ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE_POD_LABEL), relabel_hint)]}
    clock = Clock()
    q = queue(clock, hints=hints)
    # anti-affinity to app=web: no required *affinity* term at all
    q.add(MakePod().name("shy").uid("uid-shy").priority(0).scheduler_name("default-scheduler").obj())
    reject(q, await pop(q), "InterPodAffinity")
    clock.t += 20
    old = (MakePod().name("web").uid("uid-web").priority(0).scheduler_name("default-scheduler").label("app", "web")
           .node("n1").obj())
    new = (MakePod().name("web").uid("uid-web").priority(0).scheduler_name("default-scheduler").label("app", "db")
           .node("n1").obj())
    new.metadata.resource_version = "2"
    _handlers(q).on_pod_update(old, new)
    assert seen == ["shy"] and (await pop(q)).pod.metadata.name == "shy"
