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

Three layers, each a subclass of the previous one, one module each as in client-go:

``WorkQueue`` (``queue.py``)
    the basic queue (client-go ``Typed``), with ``shutdown`` and ``shutdown_with_drain``;
``DelayingQueue`` (``delaying.py``)
    adds ``add_after`` (client-go ``delayingType``); one owned background task per queue moves
    keys from a time-ordered waiting heap into the queue when they become ready;
``RateLimitingQueue`` (``rate_limiting.py``)
    adds ``add_rate_limited`` / ``forget`` / ``num_requeues`` on top of a :class:`RateLimiter`
    (client-go ``rateLimitingType``).

The rate limiters (``rate_limiters.py``: ``ItemExponentialFailureRateLimiter``,
``ItemFastSlowRateLimiter``, ``BucketRateLimiter``, ``MaxOfRateLimiter``,
``WithMaxWaitRateLimiter`` and :func:`default_controller_rate_limiter`) are ports of
``default_rate_limiters.go``; durations are float seconds.

Named queues report the same Prometheus metrics as a Kubernetes controller manager
(``workqueue_depth``, ``workqueue_adds_total``, ``workqueue_queue_duration_seconds``,
``workqueue_work_duration_seconds``, ``workqueue_unfinished_work_seconds``,
``workqueue_longest_running_processor_seconds``, ``workqueue_retries_total``), labelled
``name``, on the default ``prometheus_client`` registry (``metrics.py``). A queue with an
empty name records nothing.

Everything runs on one event loop: the methods other than ``get`` and
``shutdown_with_drain`` are plain synchronous calls and must be made from the loop's thread.
There are no threads and no locks. Time comes from an injectable clock (any object with a
``now()`` method returning monotonic float seconds, ``clock.py``); real waiting uses asyncio
timers.
"""

from machinery.workqueue.clock import Clock, MonotonicClock
from machinery.workqueue.delaying import DelayingQueue
from machinery.workqueue.queue import WorkQueue
from machinery.workqueue.rate_limiters import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    WithMaxWaitRateLimiter,
    default_controller_rate_limiter,
)
from machinery.workqueue.rate_limiting import RateLimitingQueue

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
