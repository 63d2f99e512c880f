"""The garbage collector's settings for a long-running component process.

CPython's collector runs its youngest generation every 700 allocations of container objects and
a full collection once the survivors of those grow by a quarter. A component allocates tens of
thousands of such objects per second (futures, tasks, dicts of decoded objects), and what it holds
for its life (the watch cache, informer stores, imported modules) is scanned again on every older
collection. Measured on SchedulingBasic (docs/performance.md), the collector took about a tenth
of the apiserver's and the hollow nodes' wall time.

``configure()`` raises the thresholds (fewer, larger young collections: the objects a request
makes mostly die before one runs); ``freeze()`` moves what the process built while starting into
the permanent generation, which no collection scans (``gc.freeze``, as forking servers do).
Cycles are still collected. ``KPLANE_GC=default`` keeps CPython's settings (for comparing);
``KPLANE_GC=G0,G1,G2`` sets the three thresholds.

``python_gc_duration_seconds{generation}`` (count and sum: the CPU time of each collection), the
counterpart of the ``go_gc_duration_seconds`` every Kubernetes component exports, says what the
collector costs a process; benchmarks divide it by the work done.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any

from prometheus_client import Summary

_GC_DURATION = Summary("python_gc_duration_seconds",
                       "CPU time of the garbage collector's collections, by generation collected.",
                       ["generation"])

# Young collections every 20,000 container allocations instead of 700; the older generations
# as CPython's (each 10 of the younger).
THRESHOLDS = (20_000, 10, 10)


def thresholds() -> tuple[int, int, int] | None:
    """The thresholds to set (None: CPython's own); ValueError on a malformed ``KPLANE_GC``."""
    raw = os.environ.get("KPLANE_GC", "").strip()
    if raw == "default":
        return None
    if not raw:
        return THRESHOLDS
    parts = [int(p) for p in raw.split(",")]
    if len(parts) != 3 or any(p < 0 for p in parts):
        raise ValueError(f"KPLANE_GC must be 'default' or three thresholds G0,G1,G2, not {raw!r}")
    return parts[0], parts[1], parts[2]


def configure() -> None:
    """Set the thresholds for this process (at its start) and time its collections."""
    t = thresholds()
    if t is not None:
        gc.set_threshold(*t)
    if _timed not in gc.callbacks:
        gc.callbacks.append(_timed)


_started = 0.0
_by_generation = [_GC_DURATION.labels(generation=str(g)) for g in range(3)]


def _timed(phase: str, info: dict[str, Any]) -> None:
    global _started
    if phase == "start":
        _started = time.thread_time()
    else:
        _by_generation[info["generation"]].observe(time.thread_time() - _started)


def freeze() -> None:
    """Move every object alive now into the permanent generation (once the component started)."""
    if thresholds() is not None:
        gc.collect()
        gc.freeze()
