"""Retrying a write that lost a race, as client-go's ``k8s.io/client-go/util/retry`` does.

A read-modify-write loses when another writer changed the object between the read and the write
(409 Conflict). The fix is to read again and redo the change; ``retry_on_conflict`` is the one
place that loop is written. The function it retries does the read itself (the first try may use
a cached copy, later ones must not), exactly as with ``retry.RetryOnConflict``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from machinery import errors

T = TypeVar("T")
Obj = TypeVar("Obj")


@dataclass(frozen=True)
class Backoff:
    """``wait.Backoff``: at most ``steps`` tries, the first at once; before each later one a wait
    of ``duration`` seconds, multiplied by ``factor`` after every wait, each made up to ``jitter``
    (a fraction) longer at random."""

    steps: int
    duration: float
    factor: float = 1.0
    jitter: float = 0.0

    def waits(self) -> Iterator[float]:
        """The waits between tries: ``steps - 1`` of them."""
        d = self.duration
        for _ in range(self.steps - 1):
            yield d + d * self.jitter * random.random() if self.jitter > 0 else d
            d *= self.factor


# retry.DefaultRetry: for writes a user is waiting on — five tries, 10 ms apart.
DEFAULT_RETRY = Backoff(steps=5, duration=0.010, factor=1.0, jitter=0.1)
# retry.DefaultBackoff: for writes that may wait a little longer — four tries over about 1.5 s.
DEFAULT_BACKOFF = Backoff(steps=4, duration=0.010, factor=5.0, jitter=0.1)


async def on_error(backoff: Backoff, retriable: Callable[[Exception], bool],
                   fn: Callable[[], Awaitable[T]]) -> T:
    """``retry.OnError``: call ``fn`` until it returns, raises what ``retriable`` refuses, or has
    failed ``backoff.steps`` times; then its last error is raised."""
    waits = backoff.waits()
    while True:
        try:
            return await fn()
        except Exception as exc:
            if not retriable(exc):
                raise
            wait = next(waits, None)
            if wait is None:
                raise
        await asyncio.sleep(wait)


def is_conflict(exc: Exception) -> bool:
    return isinstance(exc, errors.Conflict)


async def retry_on_conflict(fn: Callable[[], Awaitable[T]], backoff: Backoff = DEFAULT_RETRY) -> T:
    """``retry.RetryOnConflict``: ``fn`` again after each 409 Conflict, up to ``backoff.steps``
    tries (``DEFAULT_RETRY``: five, 10 ms apart); the last Conflict is raised if all fail."""
    return await on_error(backoff, is_conflict, fn)


async def retry_update(current: Obj, latest: Callable[[], Awaitable[Obj]], write: Callable[[Obj], Awaitable[T]],
                       backoff: Backoff = DEFAULT_RETRY) -> T:
    """``retry_on_conflict`` over a read-modify-write: ``write(current)`` first, with the copy at
    hand (an informer's, say); after each Conflict ``write`` again on ``latest()``'s fresh read.
    ``write`` makes its change on a copy and may decide, from what it is given, to write nothing."""
    tries = 0

    async def attempt() -> T:
        nonlocal current, tries
        if tries:
            current = await latest()
        tries += 1
        return await write(current)

    return await retry_on_conflict(attempt, backoff)
