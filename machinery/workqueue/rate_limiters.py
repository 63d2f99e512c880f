"""The rate limiters (client-go's default_rate_limiters.go): how long a key waits before it is
(re)queued; durations are float seconds."""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import Protocol

from machinery.workqueue.clock import REAL_CLOCK, Clock


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
        self._clock: Clock = clock if clock is not None else REAL_CLOCK
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
