"""What every controller is made of: a context to build it from, a workqueue, and workers.

``Controller`` is client-go's controller loop: event handlers call ``enqueue`` (keys only), and
``run(workers)`` starts that many workers, each taking one key at a time (the workqueue never
hands a key to two workers at once), calling ``sync(key)``, forgetting the key on success and
adding it back rate-limited on failure (5 ms doubling to 1000 s, plus the overall 10/s bucket, as
client-go's DefaultControllerRateLimiter). The queue is named after the controller, so
``workqueue_depth{name="replicaset"}`` and the other ``workqueue_*`` metrics say which it is.
"""

from __future__ import annotations

import asyncio
import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from google.protobuf.message import Message

from controllers.informers import SharedInformerFactory
from controllers.options import ControllerOptions
from machinery import errors, failpoints
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise
from machinery.workqueue.rate_limiting import RateLimitingQueue

log = get_logger()

K = TypeVar("K", bound=Hashable)


@dataclass
class ControllerContext:
    """What a controller is built from: the client, the shared informers, its options, its events."""

    client: Client
    informers: SharedInformerFactory
    options: ControllerOptions
    recorders: list[EventRecorder] = field(default_factory=list)

    def recorder(self, component: str) -> EventRecorder:
        """An event recorder whose Events say ``source.component: <component>`` (``replicaset-controller``)."""
        rec = EventRecorder(self.client, component)
        self.recorders.append(rec)
        return rec


class Controller(ABC, Generic[K]):
    """One controller: a named workqueue of keys and the workers that reconcile them. Keys are
    ``namespace/name`` strings for most (``ObjectController``); a controller with several kinds of
    work has typed items instead."""

    name: ClassVar[str]  # as kube-controller-manager's --controllers names it
    # The workqueue's name, when Kubernetes names it otherwise than the controller (the garbage
    # collector's "garbage_collector_attempt_to_delete").
    queue_name: ClassVar[str] = ""
    # Failures the controller expects now and then (content still going, say): retried
    # rate-limited like a conflict, logged without a traceback.
    expected_errors: ClassVar[tuple[type[Exception], ...]] = ()

    def __init__(self) -> None:
        self.queue: RateLimitingQueue[K] = RateLimitingQueue(self.queue_name or self.name)
        self._tasks: list[asyncio.Task[Any]] = []

    @abstractmethod
    async def sync(self, key: K) -> None:
        """Reconcile the object with this key from the caches (it may be gone by now)."""

    async def start(self, workers: int) -> None:
        """Start ``workers`` workers and whatever else the controller runs (``background``)."""
        self._tasks += [supervise(f"{self.name}/worker-{i}", functools.partial(self._worker, i))
                        for i in range(workers)]
        self._tasks += [supervise(f"{self.name}/{name}", loop) for name, loop in self.background()]
        log.info("controller_started", controller=self.name, workers=workers)

    def background(self) -> list[tuple[str, Any]]:
        """Named periodic loops the controller runs beside its workers (podgc's, node health)."""
        return []

    async def stop(self) -> None:
        self.queue.shutdown()
        await cancel_and_wait(self._tasks)
        self._tasks = []

    async def _worker(self, index: int) -> None:
        await self.work(self.queue, self.sync)

    async def work(self, queue: RateLimitingQueue[K], sync: Callable[[K], Awaitable[None]]) -> None:
        """One worker over ``queue`` (client-go's processNextWorkItem loop): ``sync`` each key it
        hands out, retried rate-limited on failure. ``start`` runs these over ``self.queue``; a
        controller with a second queue (resourcequota's priority queue) runs more over that."""
        retryable: tuple[type[Exception], ...] = (errors.Unavailable, errors.Timeout, errors.Conflict,
                                                   *self.expected_errors)
        while True:
            key, shutdown = await queue.get()
            if shutdown or key is None:
                return
            try:
                await sync(key)
                queue.forget(key)
            except retryable as exc:
                log.info("controller_sync_retry", controller=self.name, key=key, error=str(exc))
                queue.add_rate_limited(key)
            except failpoints.FailpointError:
                queue.add_rate_limited(key)
            except Exception as exc:
                log.exception("controller_sync_failed", controller=self.name, key=key, error=str(exc))
                queue.add_rate_limited(key)
            finally:
                queue.done(key)


class ObjectController(Controller[str]):
    """A controller whose work items are object keys (``namespace/name``, or ``name``)."""

    def enqueue(self, obj: Message) -> None:
        self.queue.add(key_of(obj))

    def enqueue_key(self, key: str, after: float = 0.0) -> None:
        if after > 0:
            self.queue.add_after(key, after)
        else:
            self.queue.add(key)
