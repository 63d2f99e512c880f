"""A callback that raises must not take its caller down: an informer handler that raises leaves the
other handlers served and the informer running; a QueueingHint that raises requeues the pod (both
once failed inside their own error logging, which passed ``event=`` to structlog twice)."""

from __future__ import annotations

import asyncio

from machinery.api import core_pb2
from machinery.informer import Informer
from machinery.kinds import POD
from scheduler.framework.types import NODE, ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint
from scheduler.queue.scheduling_queue import BACKOFF_Q, UNSCHEDULABLE_Q, SchedulingQueue
from tests.harness.builders import MakeNode, MakePod


class _NoApi:
    def resource(self, kind):
        return kind


def test_an_informer_handler_that_raises_does_not_keep_the_event_from_the_others():
    inf = Informer(_NoApi(), POD)  # type: ignore[arg-type]
    seen: list[tuple[str, str]] = []

    def broken(pod: core_pb2.Pod, *_: object) -> None:
        raise RuntimeError("a bug in a handler")

    inf.add_handler(broken, lambda old, new: broken(new), broken)
    inf.add_handler(lambda p: seen.append(("add", p.metadata.name)),
                    lambda old, new: seen.append(("update", new.metadata.name)),
                    lambda p: seen.append(("delete", p.metadata.name)))
    pod = MakePod().name("p").resource_version("1").obj()
    inf._apply("ADDED", pod)
    newer = MakePod().name("p").resource_version("2").obj()
    inf._apply("MODIFIED", newer)
    inf._apply("DELETED", newer)
    assert seen == [("add", "p"), ("update", "p"), ("delete", "p")]


async def test_a_queueing_hint_that_raises_requeues_the_pod_instead_of_stranding_it():
    def broken_hint(pod, old, new) -> QueueingHint:
        raise RuntimeError("a bug in a hint")

    hints = {"Fit": [ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD), broken_hint)]}
    q = SchedulingQueue(lambda a, b: a.timestamp < b.timestamp, events={"default-scheduler": hints},
                        pre_enqueue={}, clock=lambda: 1000.0)
    q.add(MakePod().name("p").uid("uid-p").priority(0).scheduler_name("default-scheduler").obj())
    p = await asyncio.wait_for(q.pop(), 1.0)
    p.unschedulable_plugins = {"Fit"}
    q.add_unschedulable_if_not_present(p)
    assert q.where(p.pod) == UNSCHEDULABLE_Q
    q.move_all_to_active_or_backoff(ClusterEvent(NODE, ActionType.ADD), None, MakeNode().name("n").obj())
    assert q.where(p.pod) == BACKOFF_Q
