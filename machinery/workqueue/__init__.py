"""Work queues for kplane controllers: de-duplicating, delaying and rate limited.

The asyncio counterpart of client-go's ``k8s.io/client-go/util/workqueue``, one module per file
there. Three layers, each a subclass of the previous one: ``WorkQueue`` (``queue.py``, client-go
``Typed``: the guarantees, and how workers use it), ``DelayingQueue`` (``delaying.py``, client-go
``delayingType``: ``add_after``) and ``RateLimitingQueue`` (``rate_limiting.py``, client-go
``rateLimitingType``: ``add_rate_limited`` / ``forget`` / ``num_requeues``). Beside them: the rate
limiters (``rate_limiters.py``), the workqueue_* metrics of named queues (``metrics.py``) and the
injectable clock (``clock.py``).
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
