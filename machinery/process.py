"""Process-level plumbing shared by every kplane entry point: the event loop, and profiling.

``run_loop(coro)`` runs the process's one asyncio event loop. (uvloop was measured here: with
grpc.aio under load it failed calls with CANCELLED and was not faster, so kplane does not use it.)
``profiling(component)`` profiles the whole process's CPU time with cProfile when
``KPLANE_PROFILE`` names a file (``{component}`` in it is replaced), written at exit; ``make bench``
uses it to show where the time goes. ``cancel_and_wait(tasks)`` is every component's stop path
for its background tasks. SIGUSR1 clears what was recorded so far, so a benchmark can
profile only its measured phase.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import os
import signal
import time
from typing import Coroutine, Iterator


def run_loop(main: Coroutine) -> None:
    asyncio.run(main)


@contextlib.contextmanager
def profiling(component: str) -> Iterator[None]:
    path = os.environ.get("KPLANE_PROFILE")
    if not path:
        yield
        return
    prof = cProfile.Profile(time.process_time)  # CPU time: parked coroutines cost nothing
    signal.signal(signal.SIGUSR1, lambda signum, frame: prof.clear())
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        prof.dump_stats(path.replace("{component}", component))


async def cancel_and_wait(tasks) -> None:
    """Cancel these tasks and wait until each has ended, whatever it ended with (a stop path:
    nothing is left running behind it, and an error of a task being stopped is not the caller's)."""
    tasks = [t for t in tasks if t is not None]
    for t in tasks:
        t.cancel()
    for t in tasks:
        try:
            await t
        except (asyncio.CancelledError, Exception):
            pass


async def yield_to_others(max_rounds: int = 64) -> None:
    """Let every other task that is ready run before going on (a CPU-bound loop's fair share).

    ``await asyncio.sleep(0)`` gives each ready task one step; an informer reading a gRPC stream
    needs several steps per message. This yields until nothing else is ready (the loop's ready
    queue is empty: the others wait on I/O) or ``max_rounds`` is reached, so events already
    received are handled before the next piece of CPU work — as they would be by the separate
    goroutines of a Go component.
    """
    loop = asyncio.get_running_loop()
    for _ in range(max_rounds):
        await asyncio.sleep(0)
        if not getattr(loop, "_ready", None):  # CPython's ready queue; absent elsewhere: one round
            return
