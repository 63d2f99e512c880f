"""The workqueue_* Prometheus metrics of named queues (client-go's metrics.go and
component-base/metrics/prometheus/workqueue), registered once on the default registry."""

from __future__ import annotations

import weakref
from collections.abc import Hashable

from prometheus_client import Counter, Gauge, Histogram

from machinery.workqueue.clock import Clock

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


class NoQueueMetrics:
    """Metrics sink of an unnamed queue: records nothing."""

    def add(self, key: Hashable) -> None:
        pass

    def get(self, key: Hashable) -> None:
        pass

    def done(self, key: Hashable) -> None:
        pass


class QueueMetrics(NoQueueMetrics):
    """Per-queue bookkeeping behind the workqueue_* metrics of one named queue: the same Prometheus
    metrics as a Kubernetes controller manager (``workqueue_depth``, ``workqueue_adds_total``,
    ``workqueue_queue_duration_seconds``, ``workqueue_work_duration_seconds``,
    ``workqueue_unfinished_work_seconds``, ``workqueue_longest_running_processor_seconds``;
    ``workqueue_retries_total`` through :func:`retries`), labelled ``name``, on the default
    ``prometheus_client`` registry.

    ``workqueue_unfinished_work_seconds`` and ``workqueue_longest_running_processor_seconds`` are
    computed when /metrics is read, not pushed: client-go refreshes them every 500 ms from a
    goroutine per queue, which here would be a timer per queue, and a hollow process holds a
    kubelet pod queue per node (thousands of wakeups a second for values nobody reads between
    scrapes). Read at scrape time they are the same values, exact at the moment of reading. Every
    live queue of a name counts (:class:`_UnfinishedWork`): the sum of their unfinished work, the
    longest of their running processors."""

    def __init__(self, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = _DEPTH.labels(name)
        self._adds = _ADDS.labels(name)
        self._queue_duration = _QUEUE_DURATION.labels(name)
        self._work_duration = _WORK_DURATION.labels(name)
        # When each queued key was (first) added, and when each held key was handed out.
        self._add_times: dict[Hashable, float] = {}
        self._processing_start: dict[Hashable, float] = {}
        _UnfinishedWork.of(name).add(self)

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

    def unfinished_work(self) -> tuple[float, float]:
        """Seconds of work in progress now, summed over the held keys, and the longest of them."""
        if not self._processing_start:
            return 0.0, 0.0
        now = self._clock.now()
        ages = [now - started for started in self._processing_start.values()]
        return sum(ages), max(ages)


class _UnfinishedWork:
    """The live queues of one name, behind its two unfinished-work gauges, read at scrape time.

    Weak references: a queue dropped by its owner leaves the sums (the series stays, at what the
    remaining queues of the name hold, 0 when none)."""

    _by_name: dict[str, _UnfinishedWork] = {}

    def __init__(self, name: str) -> None:
        self._queues: weakref.WeakSet[QueueMetrics] = weakref.WeakSet()
        _UNFINISHED_WORK.labels(name).set_function(self._total)
        _LONGEST_RUNNING.labels(name).set_function(self._longest)

    @classmethod
    def of(cls, name: str) -> _UnfinishedWork:
        found = cls._by_name.get(name)
        if found is None:
            found = cls._by_name[name] = cls(name)
        return found

    def add(self, queue: QueueMetrics) -> None:
        self._queues.add(queue)

    def _total(self) -> float:
        return sum((q.unfinished_work()[0] for q in list(self._queues)), 0.0)

    def _longest(self) -> float:
        return max((q.unfinished_work()[1] for q in list(self._queues)), default=0.0)


def retries(name: str) -> Counter | None:
    """The workqueue_retries_total counter of a named queue; None for an unnamed one (records nothing)."""
    return _RETRIES.labels(name) if name else None
