"""The clock the queues and rate limiters read: any object with a ``now()`` returning monotonic
float seconds (client-go takes a ``clock.Clock``); tests inject a fake one."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Source of monotonic time in float seconds."""

    def now(self) -> float: ...


class MonotonicClock:
    """The real clock: :func:`time.monotonic` (the clock asyncio's default loop uses too)."""

    def now(self) -> float:
        return time.monotonic()


REAL_CLOCK = MonotonicClock()
