"""Work queues for kplane controllers: de-duplicating, delaying and rate limited.

This is the asyncio counterpart of client-go's ``k8s.io/client-go/util/workqueue``. Informer
event handlers put object keys (usually ``"namespace/name"``) on a queue and a handful of
worker coroutines take them off, reconcile, and call :meth:`WorkQueue.done`. The queue gives
the same guarantees as client-go:

* a key is never handed to two workers at once;
* a key added again while it is queued is collapsed into the queued copy;
* a key added again while a worker holds it is marked *dirty* and queued once more as soon as
  the worker calls ``done``;
* otherwise keys come out in FIFO order.

Three layers, each a subclass of the previous one:

``WorkQueue``
    the basic queue (client-go ``Typed``), with ``shutdown`` and ``shutdown_with_drain``;
``DelayingQueue``
    adds ``add_after`` (client-go ``delayingType``); one owned background task per queue moves
    keys from a time-ordered waiting heap into the queue when they become ready;
``RateLimitingQueue``
    adds ``add_rate_limited`` / ``forget`` / ``num_requeues`` on top of a :class:`RateLimiter`
    (client-go ``rateLimitingType``).

The rate limiters (``ItemExponentialFailureRateLimiter``, ``ItemFastSlowRateLimiter``,
``BucketRateLimiter``, ``MaxOfRateLimiter``, ``WithMaxWaitRateLimiter`` and
:func:`default_controller_rate_limiter`) are ports of ``default_rate_limiters.go``; durations
are float seconds.

Named queues report the same Prometheus metrics as a Kubernetes controller manager
(``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
``workqueue_work_duration_seconds``, ``workqueue_unfinished_work_seconds``,
``workqueue_longest_running_processor_seconds``, ``workqueue_retries_total``), labelled
``name``, on the default ``prometheus_client`` registry. A queue with an empty name records
nothing.

Everything runs on one event loop: the methods other than ``get`` and
``shutdown_with_drain`` are plain synchronous calls and must be made from the loop's thread.
There are no threads and no locks. Time comes from an injectable clock (any object with a
``now()`` method returning monotonic float seconds); real waiting uses asyncio timers.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import math
import time
from collections import deque
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "BucketRateLimiter",
    "Clock",
    "DelayingQueue",
    "ItemExponentialFailureRateLimiter",
    "ItemFastSlowRateLimiter",
    "MaxOfRateLimiter",
    "MonotonicClock",
    "RateLimiter",
    "RateLimitingQueue",
    "WithMaxWaitRateLimiter",
    "WorkQueue",
    "default_controller_rate_limiter",
]

_log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


# --------------------------------------------------------------------------------------------
# Clock
# --------------------------------------------------------------------------------------------


class Clock(Protocol):
    """Source of monotonic time in float seconds."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` (the clock asyncio's default loop uses too)."""

    def now(self) -> float:
        return time.monotonic()


_REAL_CLOCK = MonotonicClock()


# --------------------------------------------------------------------------------------------
# Metrics (metrics.go + component-base/metrics/prometheus/workqueue)
# --------------------------------------------------------------------------------------------

# ExponentialBuckets(1e-6, 10, 10): 1 microsecond .. 1000 seconds, as in Kubernetes.
_DURATION_BUCKETS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)

_DEPTH = Gauge("workqueue_depth", "Current depth of workqueue", ["name"])
_ADDS = Counter("workqueue_adds_total", "Total number of adds handled by workqueue", ["name"])
_QUEUE_DURATION = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested.",
    ["name"],
    buckets=_DURATION_BUCKETS,
)
_WORK_DURATION = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["name"],
    buckets=_DURATION_BUCKETS,
)
_UNFINISHED_WORK = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads. One can deduce the number of stuck "
    "threads by observing the rate at which this increases.",
    ["name"],
)
_LONGEST_RUNNING = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name"],
)
_RETRIES = Counter("workqueue_retries_total", "Total number of retries handled by workqueue", ["name"])


class _NoQueueMetrics:
    """Metrics sink of an unnamed queue: records nothing."""

    enabled = False

    def add(self, key: Hashable) -> None:
        pass

    def get(self, key: Hashable) -> None:
        pass

    def done(self, key: Hashable) -> None:
        pass

    def update_unfinished_work(self) -> None:
        pass


class _QueueMetrics(_NoQueueMetrics):
    """Per-queue bookkeeping behind the workqueue_* metrics of one named queue."""

    enabled = True

    def __init__(self, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = _DEPTH.labels(name)
        self._adds = _ADDS.labels(name)
        self._queue_duration = _QUEUE_DURATION.labels(name)
        self._work_duration = _WORK_DURATION.labels(name)
        self._unfinished = _UNFINISHED_WORK.labels(name)
        self._longest = _LONGEST_RUNNING.labels(name)
        # When each queued key was (first) added, and when each held key was handed out.
        self._add_times: dict[Hashable, float] = {}
        self._processing_start: dict[Hashable, float] = {}

    def add(self, key: Hashable) -> None:
        self._adds.inc()
        self._depth.inc()
        self._add_times.setdefault(key, self._clock.now())

    def get(self, key: Hashable) -> None:
        now = self._clock.now()
        self._depth.dec()
        self._processing_start[key] = now
        added = self._add_times.pop(key, None)
        if added is not None:
            self._queue_duration.observe(now - added)

    def done(self, key: Hashable) -> None:
        started = self._processing_start.pop(key, None)
        if started is not None:
            self._work_duration.observe(self._clock.now() - started)

    def update_unfinished_work(self) -> None:
        now = self._clock.now()
        total = 0.0
        oldest = 0.0
        for started in self._processing_start.values():
            age = now - started
            total += age
            oldest = max(oldest, age)
        self._unfinished.set(total)
        self._longest.set(oldest)


def _log_task_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        _log.error("workqueue background task %s failed", task.get_name(), exc_info=task.exception())


# --------------------------------------------------------------------------------------------
# WorkQueue (queue.go)
# --------------------------------------------------------------------------------------------


class WorkQueue(Generic[K]):
    """A FIFO of keys with client-go's dirty/processing semantics.

    ``dirty`` holds every key that needs processing; ``processing`` every key a worker holds.
    The FIFO only ever contains keys that are dirty and not being processed, each once.
    """

    def __init__(
        self,
        name: str = "",
        *,
        clock: Clock | None = None,
        unfinished_work_update_period: float = 0.5,
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"queue name must be a str, got {type(name).__name__}")
        self.name = name
        self._clock: Clock = clock if clock is not None else _REAL_CLOCK
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._shutting_down = False
        self._drain = False
        # Futures of coroutines blocked in get() / shutdown_with_drain().
        self._getters: deque[asyncio.Future[None]] = deque()
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._metrics: _NoQueueMetrics = _QueueMetrics(name, self._clock) if name else _NoQueueMetrics()
        self._unfinished_work_update_period = unfinished_work_update_period
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ensure_background()

    # -- public API ---------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Mark ``key`` as needing processing. Ignored once the queue is shutting down."""
        if self._shutting_down:
            return
        self._ensure_background()
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
        self._ensure_background()
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

    def _ensure_background(self) -> None:
        """Start the unfinished-work metrics updater of a named queue, once a loop runs."""
        if self._metrics.enabled:
            self._spawn("unfinished-work", self._unfinished_work_loop, required=False)

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

    async def _unfinished_work_loop(self) -> None:
        while not self._shutting_down:
            await asyncio.sleep(self._unfinished_work_update_period)
            if self._shutting_down:
                return
            self._metrics.update_unfinished_work()


# --------------------------------------------------------------------------------------------
# DelayingQueue (delaying_queue.go)
# --------------------------------------------------------------------------------------------


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
        unfinished_work_update_period: float = 0.5,
        max_wait: float = 10.0,
    ) -> None:
        self._waiting: list[_WaitFor] = []
        self._waiting_by_key: dict[K, _WaitFor] = {}
        self._seq = itertools.count()
        self._max_wait = max_wait
        self._wakeup: asyncio.Future[None] | None = None
        super().__init__(name, clock=clock, unfinished_work_update_period=unfinished_work_update_period)
        self._retries = _RETRIES.labels(name) if name else None

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


# --------------------------------------------------------------------------------------------
# Rate limiters (default_rate_limiters.go)
# --------------------------------------------------------------------------------------------


class RateLimiter(Protocol):
    """Decides how long a key should wait before it is (re)queued."""

    def when(self, key: Hashable) -> float:
        """Seconds ``key`` should wait now; records one more failure for per-key limiters."""
        ...

    def forget(self, key: Hashable) -> None:
        """Stop tracking ``key`` (it succeeded, or was given up on)."""
        ...

    def num_requeues(self, key: Hashable) -> int:
        """How many failures ``key`` has had since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter:
    """Per-key ``base * 2**failures`` seconds, capped at ``max_delay``."""

    def __init__(self, base: float = 0.005, max_delay: float = 1000.0) -> None:
        self._base = base
        self._max_delay = max_delay
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        exp = self._failures.get(key, 0)
        self._failures[key] = exp + 1
        try:
            backoff = self._base * 2.0**exp
        except OverflowError:
            return self._max_delay
        return min(backoff, self._max_delay)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class ItemFastSlowRateLimiter:
    """Per-key ``fast_delay`` for the first ``max_fast_attempts`` failures, ``slow_delay`` after."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        self._fast_delay = fast_delay
        self._slow_delay = slow_delay
        self._max_fast_attempts = max_fast_attempts
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        failures = self._failures.get(key, 0) + 1
        self._failures[key] = failures
        return self._fast_delay if failures <= self._max_fast_attempts else self._slow_delay

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class BucketRateLimiter:
    """An overall token bucket (``golang.org/x/time/rate``): ``qps`` refill, ``burst`` size.

    ``when`` reserves one token and returns how long to wait for it; it never blocks. The
    bucket starts full. It does not track keys, so ``forget`` is a no-op and ``num_requeues``
    is always 0. ``qps=math.inf`` never delays; a reservation that can never be met (burst 0)
    returns ``math.inf``.
    """

    def __init__(self, qps: float = 10, burst: int = 100, *, clock: Clock | None = None) -> None:
        self._qps = float(qps)
        self._burst = int(burst)
        self._clock: Clock = clock if clock is not None else _REAL_CLOCK
        self._tokens = float(self._burst)
        self._last = self._clock.now()

    def when(self, key: Hashable) -> float:
        if math.isinf(self._qps):
            return 0.0
        now = self._clock.now()
        if self._qps <= 0:
            # No refill: spend the initial burst, then never again.
            if self._burst >= 1:
                self._burst -= 1
                return 0.0
            return math.inf
        if self._burst < 1:
            return math.inf
        last = min(self._last, now)
        tokens = min(self._tokens + (now - last) * self._qps, float(self._burst)) - 1.0
        wait = -tokens / self._qps if tokens < 0 else 0.0
        self._tokens = tokens
        self._last = now
        return wait

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """Asks every limiter and returns the worst answer; ``forget`` reaches all of them."""

    def __init__(self, *limiters: RateLimiter) -> None:
        self._limiters = limiters

    def when(self, key: Hashable) -> float:
        worst = 0.0
        for limiter in self._limiters:  # every limiter must see the call: no short-circuit
            worst = max(worst, limiter.when(key))
        return worst

    def forget(self, key: Hashable) -> None:
        for limiter in self._limiters:
            limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return max((limiter.num_requeues(key) for limiter in self._limiters), default=0)


class WithMaxWaitRateLimiter:
    """Caps another limiter's delay at ``max_delay`` seconds."""

    def __init__(self, limiter: RateLimiter, max_delay: float) -> None:
        self._limiter = limiter
        self._max_delay = max_delay

    def when(self, key: Hashable) -> float:
        return min(self._limiter.when(key), self._max_delay)

    def forget(self, key: Hashable) -> None:
        self._limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return self._limiter.num_requeues(key)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> MaxOfRateLimiter:
    """client-go's DefaultControllerRateLimiter: per-key exponential 5 ms .. 1000 s, and an
    overall 10 qps / 100 burst token bucket; the larger delay wins."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(qps=10, burst=100, clock=clock),
    )


# --------------------------------------------------------------------------------------------
# RateLimitingQueue (rate_limiting_queue.go)
# --------------------------------------------------------------------------------------------


class RateLimitingQueue(DelayingQueue[K]):
    """A :class:`DelayingQueue` whose ``add_rate_limited`` waits as long as its limiter says.

    Call :meth:`forget` when a key succeeds (or is given up on), or the limiter keeps counting
    its failures forever; ``forget`` does not replace :meth:`done`.
    """

    def __init__(
        self,
        name: str = "",
        rate_limiter: RateLimiter | None = None,
        *,
        clock: Clock | None = None,
        unfinished_work_update_period: float = 0.5,
        max_wait: float = 10.0,
    ) -> None:
        super().__init__(
            name,
            clock=clock,
            unfinished_work_update_period=unfinished_work_update_period,
            max_wait=max_wait,
        )
        self.rate_limiter: RateLimiter = (
            rate_limiter if rate_limiter is not None else default_controller_rate_limiter(clock=clock)
        )

    def add_rate_limited(self, key: K) -> None:
        """Add ``key`` after the delay the rate limiter gives it now."""
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Stop rate-limit tracking of ``key``; it still needs :meth:`done`."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How many times ``key`` has been rate-limited since it was last forgotten."""
        return self.rate_limiter.num_requeues(key)
