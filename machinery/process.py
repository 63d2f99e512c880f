"""Process-level plumbing shared by every kplane entry point: the event loop, and profiling.

``run_loop(coro)`` runs the process's one asyncio event loop. (uvloop was measured here: with
grpc.aio under load it failed calls with CANCELLED and was not faster, so kplane does not use it.)
``profiling(component)`` profiles the whole process's CPU time with cProfile when
``KPLANE_PROFILE`` names a file (``{component}`` in it is replaced), written at exit; ``make bench``
uses it to show where the time goes.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import os
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
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        prof.dump_stats(path.replace("{component}", component))
