"""The rate-limiting queue (client-go's rate_limiting_queue.go): a delaying queue whose
``add_rate_limited`` waits as long as its :class:`RateLimiter` says."""

from __future__ import annotations

from machinery.workqueue.clock import Clock
from machinery.workqueue.delaying import DelayingQueue
from machinery.workqueue.queue import K
from machinery.workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter


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
        max_wait: float = 10.0,
    ) -> None:
        super().__init__(
            name,
            clock=clock,
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
