"""The delaying queue (client-go's delaying_queue.go): ``add_after``, with a time-ordered heap of
waiting keys and one owned background task that moves them into the queue when they are due."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

from machinery.workqueue import metrics
from machinery.workqueue.clock import Clock
from machinery.workqueue.queue import K, WorkQueue


@dataclass(order=True)
class _WaitFor:
    """A key waiting in the heap until ``ready_at``; ``live`` is cleared when superseded."""

    ready_at: float
    seq: int
    key: Any = field(compare=False)
    live: bool = field(default=True, compare=False)


class DelayingQueue(WorkQueue[K]):
    """A :class:`WorkQueue` that can add a key after a delay.

    Waiting keys live in a min-heap ordered by ready time; a key already waiting keeps the
    earlier of its two ready times. One background task, started on the first delayed add and
    cancelled on shutdown, sleeps on an asyncio timer until the head is due (or at most
    ``max_wait`` seconds, client-go's heartbeat) and then adds every ready key.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        max_wait: float = 10.0,
    ) -> None:
        self._waiting: list[_WaitFor] = []
        self._waiting_by_key: dict[K, _WaitFor] = {}
        self._seq = itertools.count()
        self._max_wait = max_wait
        self._wakeup: asyncio.Future[None] | None = None
        super().__init__(name, clock=clock)
        self._retries = metrics.retries(name)

    def add_after(self, key: K, delay_seconds: float) -> None:
        """Add ``key`` once ``delay_seconds`` have passed; at once if the delay is <= 0.

        Needs a running event loop for positive delays. Ignored once shutting down.
        """
        if self._shutting_down:
            return
        if self._retries is not None:
            self._retries.inc()
        if delay_seconds <= 0:
            self.add(key)
            return
        self._spawn("waiting", self._waiting_loop, required=True)
        ready_at = self._clock.now() + delay_seconds
        existing = self._waiting_by_key.get(key)
        if existing is not None:
            if existing.ready_at <= ready_at:
                return  # the earlier ready time wins
            existing.live = False  # superseded; dropped lazily when it reaches the heap top
        entry = _WaitFor(ready_at, next(self._seq), key)
        heapq.heappush(self._waiting, entry)
        self._waiting_by_key[key] = entry
        if self._waiting[0] is entry:
            self._kick()

    # -- internals ----------------------------------------------------------------------------

    def _begin_shutdown(self) -> None:
        super()._begin_shutdown()
        self._waiting.clear()
        self._waiting_by_key.clear()
        self._kick()

    def _kick(self) -> None:
        """Wake the waiting loop so it re-reads the heap head."""
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def _pop_ready(self, now: float) -> None:
        """Move every key due at ``now`` into the queue; drop superseded heap entries."""
        while self._waiting:
            head = self._waiting[0]
            if head.live and head.ready_at > now:
                return
            heapq.heappop(self._waiting)
            if head.live:
                del self._waiting_by_key[head.key]
                self.add(head.key)

    async def _waiting_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._shutting_down:
            now = self._clock.now()
            self._pop_ready(now)
            timeout = self._max_wait
            if self._waiting:
                timeout = min(timeout, self._waiting[0].ready_at - now)
            wakeup: asyncio.Future[None] = loop.create_future()
            self._wakeup = wakeup
            timer = loop.call_later(max(timeout, 0.0), _resolve, wakeup)
            try:
                await wakeup
            finally:
                timer.cancel()
                self._wakeup = None


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
