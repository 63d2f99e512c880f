"""What the scheduling cycle and the informer event handlers use of the scheduler.

kube-scheduler's schedule_one.go and eventhandlers.go are methods on the whole Scheduler. Here
each takes the narrow view it needs, a Protocol the Scheduler satisfies, so that neither imports
the module that builds it (scheduler.py imports them, not the other way round) and a unit test
can hand them a small fake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from machinery.api import core_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from scheduler.algorithm import Algorithm
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.pod_info import QueuedPodInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.types import CycleState
from scheduler.queue.scheduling_queue import SchedulingQueue
from scheduler.status_writer import StatusWriter


class EventContext(Protocol):
    """What the event handlers use: the profiles (which pods are ours), the queue, the cache, and
    whether Deferred resizes are queued too (KEP-5836)."""

    @property
    def frameworks(self) -> Mapping[str, Framework]: ...

    @property
    def queue(self) -> SchedulingQueue: ...

    @property
    def cache(self) -> Cache: ...

    @property
    def resize_preemption(self) -> bool: ...


class QueueMembership(Protocol):
    def wants_queue(self, pod: core_pb2.Pod) -> bool:
        """Whether the pod, as the informer now has it, belongs in the scheduling queue."""
        ...


class CycleContext(EventContext, Protocol):
    """What a scheduling cycle and its binding cycle use besides: the algorithm, the API (client,
    events, the status writer), the informer's pods, the clock the queue's metrics use, and a way
    to start a binding cycle as its own task."""

    @property
    def algorithm(self) -> Algorithm: ...

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def client(self) -> Client: ...

    @property
    def recorder(self) -> EventRecorder | None: ...

    @property
    def status_writer(self) -> StatusWriter | None: ...

    @property
    def handlers(self) -> QueueMembership: ...

    @property
    def queue_clock(self) -> Callable[[], float]: ...

    def get_pod(self, namespace: str, name: str) -> core_pb2.Pod | None: ...

    def start_binding(self, fw: Framework, state: CycleState, p: QueuedPodInfo, assumed: core_pb2.Pod, host: str,
                      start: float) -> None: ...
