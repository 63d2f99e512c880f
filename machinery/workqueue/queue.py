"""The basic queue (client-go's queue.go, ``Typed``): de-duplicating FIFO of keys with the
dirty/processing sets, shutdown and shutdown-with-drain, and the owned background tasks."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, Generic, TypeVar

from machinery.workqueue.clock import REAL_CLOCK, Clock
from machinery.workqueue.metrics import NoQueueMetrics, QueueMetrics

_log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


def _log_task_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.error("workqueue background task %s failed", task.get_name(), exc_info=task.exception())


class WorkQueue(Generic[K]):
    """A FIFO of keys with client-go's dirty/processing semantics, with ``shutdown`` and
    ``shutdown_with_drain``.

    Informer event handlers put object keys (usually ``"namespace/name"``) on a queue and a handful
    of worker coroutines take them off, reconcile, and call :meth:`done`. The queue gives the same
    guarantees as client-go:

    * a key is never handed to two workers at once;
    * a key added again while it is queued is collapsed into the queued copy;
    * a key added again while a worker holds it is marked *dirty* and queued once more as soon as
      the worker calls ``done``;
    * otherwise keys come out in FIFO order.

    ``dirty`` holds every key that needs processing; ``processing`` every key a worker holds.
    The FIFO only ever contains keys that are dirty and not being processed, each once.

    Everything runs on one event loop: the methods other than ``get`` and ``shutdown_with_drain``
    are plain synchronous calls and must be made from the loop's thread. There are no threads and
    no locks. Time comes from an injectable clock (``clock``); real waiting uses asyncio timers.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"queue name must be a str, got {type(name).__name__}")
        self.name = name
        self._clock: Clock = clock if clock is not None else REAL_CLOCK
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._shutting_down = False
        self._drain = False
        # Futures of coroutines blocked in get() / shutdown_with_drain().
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._metrics: NoQueueMetrics = QueueMetrics(name, self._clock) if name else NoQueueMetrics()
        self._tasks: dict[str, asyncio.Task[None]] = {}

    # -- public API ---------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Mark ``key`` as needing processing. Ignored once the queue is shutting down."""
        if self._shutting_down:
            return
        if key in self._dirty:
            return  # already queued, or already due for another round after done()
        self._metrics.add(key)
        self._dirty.add(key)
        if key in self._processing:
            return  # done() will queue it
        self._queue.append(key)
        self._wake_one_getter()

    def len(self) -> int:
        """Number of keys waiting to be handed out (informational only)."""
        return len(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def __bool__(self) -> bool:
        # A queue object is always truthy, empty or not (like asyncio.Queue), so that
        # ``queue or WorkQueue()`` never silently swaps an empty queue for a new one.
        return True

    async def get(self) -> tuple[K | None, bool]:
        """Wait for a key; returns ``(key, False)``, or ``(None, True)`` once shut down and empty.

        The caller must call :meth:`done` with the key when it has finished with it.
        """
        while not self._queue and not self._shutting_down:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                if waiter.cancelled():
                    self._remove_getter(waiter)
                else:
                    # We were woken for a key but cancelled before taking it: pass it on.
                    self._wake_one_getter()
                raise
        if not self._queue:
            return None, True  # shutting down and nothing left
        key = self._queue.popleft()
        self._metrics.get(key)
        self._processing.add(key)
        self._dirty.discard(key)
        return key, False

    def done(self, key: K) -> None:
        """Mark ``key`` as processed; re-queue it if it was added again meanwhile."""
        if key not in self._processing:
            # client-go would push a dirty-but-queued key a second time here, which lets two
            # workers get it at once; a done() for a key nobody holds is a caller bug: ignore it.
            return
        self._metrics.done(key)
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_one_getter()
        elif not self._processing:
            self._release_drain_waiters()

    def shutdown(self) -> None:
        """Stop accepting keys and tell workers to exit once the queue is empty.

        Returns at once, without waiting for keys being processed; also ends a pending
        :meth:`shutdown_with_drain` early. Safe to call more than once.
        """
        self._drain = False
        self._begin_shutdown()
        self._release_drain_waiters()

    async def shutdown_with_drain(self) -> None:
        """Like :meth:`shutdown`, then wait until every key handed out has been ``done``.

        Workers must keep calling ``done`` (and draining ``get``) after shutdown started, or
        this waits forever; a later :meth:`shutdown` makes it return early.
        """
        self._drain = True
        self._begin_shutdown()
        while self._processing and self._drain:
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._drain_waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._drain_waiters:
                    self._drain_waiters.remove(waiter)
        await self._wait_background_stopped()

    def shutting_down(self) -> bool:
        """Whether :meth:`shutdown` or :meth:`shutdown_with_drain` has been called."""
        return self._shutting_down

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} name={self.name!r} queued={len(self._queue)} "
            f"processing={len(self._processing)} shutting_down={self._shutting_down}>"
        )

    # -- internals ----------------------------------------------------------------------------

    def _begin_shutdown(self) -> None:
        self._shutting_down = True
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
        self._stop_background()

    def _wake_one_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _remove_getter(self, waiter: asyncio.Future[None]) -> None:
        try:
            self._getters.remove(waiter)
        except ValueError:
            pass

    def _release_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _spawn(
        self,
        role: str,
        factory: Callable[[], Coroutine[Any, Any, None]],
        *,
        required: bool,
    ) -> None:
        """Start the owned background task ``role`` unless it is running or we shut down."""
        if self._shutting_down:
            return
        task = self._tasks.get(role)
        if task is not None and not task.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            if required:
                raise RuntimeError(f"{type(self).__name__} needs a running asyncio event loop") from None
            return
        task = loop.create_task(factory(), name=f"workqueue[{self.name}] {role}")
        task.add_done_callback(_log_task_failure)
        self._tasks[role] = task

    def _stop_background(self) -> None:
        for task in self._tasks.values():
            if not task.done():
                task.cancel()

    async def _wait_background_stopped(self) -> None:
        current = asyncio.current_task()
        tasks = [t for t in self._tasks.values() if t is not current and not t.done()]
        if tasks:
            await asyncio.wait(tasks)
