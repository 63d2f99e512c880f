"""Process-level plumbing shared by every kplane entry point: one start/stop harness, one
supervisor for long-running loops, the event loop, and profiling.

- ``main`` (``serve``): every process's entry point, its start and its bounded stop;
- ``supervise``: a long-running loop as a task, restarted with backoff when it raises;
- ``cancel_and_wait``: every component's stop path for the tasks it owns;
- ``run_loop``: the event loop; ``profiling``: the process's CPU profile.

On Python 3.11 ``asyncio.wait_for`` returns the inner result when a cancel arrives just as the
inner call completes, so the cancel is lost (CPython gh-86296): product code uses ``async with
asyncio.timeout(...)`` instead, and a test keeps it that way.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import faulthandler
import inspect
import io
import os
import signal
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Coroutine, Iterable, Iterator, Protocol, TypeVar

from machinery import gctune
from machinery.logging import get_logger

log = get_logger()
T = TypeVar("T")

STOP_TIMEOUT = 4.0  # seconds from SIGTERM until every task has ended
_SWEEP = 0.5  # seconds of STOP_TIMEOUT kept for cancelling what the component's own stop() left running
_WATCHDOG_SLACK = 0.6  # after STOP_TIMEOUT: the loop and the interpreter close, or the watchdog ends it


class Service(Protocol):
    """What ``main`` runs: a component that starts (this may wait long, e.g. for etcd: it is
    cancelled by a stop) and stops (bounded by the harness)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class ProcessFailed(Exception):
    """A supervised loop gave up outside a harness (a unit test, a library use)."""


class _Process:
    """The running process: whether it is asked to stop, and with what exit status."""

    def __init__(self, component: str):
        self.component = component
        self.stopping = asyncio.Event()
        self.exit_code = 0
        self.reason = ""
        self.signals = 0

    def fail(self, reason: str) -> None:
        if not self.stopping.is_set():
            self.exit_code, self.reason = 1, reason
            log.error("process_failed", reason=reason)
            print(f"{self.component}: {reason}", file=sys.stderr, flush=True)
        self.stopping.set()


_current: _Process | None = None


def fail_process(reason: str) -> bool:
    """End this process with exit status 1 and ``reason`` (one line on stderr). False when no
    harness runs (the caller then raises)."""
    if _current is None:
        return False
    _current.fail(reason)
    return True


# ------------------------------------------------------------------------------ supervisor


def supervise(name: str, loop_fn: Callable[[], Awaitable[Any]], *, max_failures: int = 5,
              initial_backoff: float = 0.1, max_backoff: float = 10.0,
              healthy_after: float = 60.0) -> asyncio.Task[None]:
    """Run ``loop_fn()`` as a task named ``name``, restarting it with backoff when it raises.

    If it raises, the traceback is logged and it is restarted with exponential backoff. A run that
    lasted ``healthy_after`` seconds resets the failure count. After ``max_failures`` failures in a
    row the process ends with exit status 1 and says why in one line (``fail_process``); outside a
    harness the task then ends with ``ProcessFailed``. A loop that returns is done; cancelling the
    task stops it. No loop dies silently and leaves its process half alive (kubelet's and
    kube-scheduler's ``wait.Until`` loops log and go on; a component that cannot go on exits, and
    its supervisor restarts it).
    """
    return asyncio.create_task(_supervised(name, loop_fn, max_failures, initial_backoff, max_backoff,
                                           healthy_after), name=name)


async def _supervised(name: str, loop_fn: Callable[[], Awaitable[Any]], max_failures: int, initial_backoff: float,
                      max_backoff: float, healthy_after: float) -> None:
    failures, backoff = 0, initial_backoff
    while True:
        started = time.monotonic()
        try:
            await loop_fn()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if time.monotonic() - started >= healthy_after:
                failures, backoff = 0, initial_backoff
            failures += 1
            error = f"{type(exc).__name__}: {exc}"
            if failures >= max_failures:
                log.error("task_crashlooping", task=name, failures=failures, error=error, exc_info=True)
                reason = f"{name} failed {failures} times in a row, last with {error}"
                if fail_process(reason):
                    return
                raise ProcessFailed(reason) from exc
            log.error("task_failed", task=name, failures=failures, restart_in=round(backoff, 3), error=error,
                      exc_info=True)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, max_backoff)
        log.info("task_restarted", task=name, failures=failures)


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any] | None], timeout: float | None = None) -> None:
    """Cancel these tasks and wait until each has ended, whatever it ended with (a stop path:
    nothing is left running behind it, and an error of a task being stopped is not the caller's).

    A task may take its time to end (a scheduler drains its bindings when cancelled); without
    ``timeout`` it is waited for. With ``timeout`` (the harness's last sweep) a task still running
    a moment after its cancel is cancelled again, in case it swallowed the first, until it ends or
    the time is up. A cancel of the caller is never swallowed here."""
    live = [t for t in tasks if t is not None]
    pending = {t for t in live if not t.done()}
    for t in pending:
        t.cancel()
    if timeout is None:
        if pending:
            await asyncio.wait(pending)
    else:
        deadline = time.monotonic() + timeout
        while pending:
            _, pending = await asyncio.wait(pending, timeout=max(0.0, min(0.2, deadline - time.monotonic())))
            if not pending:
                break
            if time.monotonic() >= deadline:
                log.error("tasks_ignored_cancel", tasks=sorted(t.get_name() for t in pending),
                          stacks=_task_stacks(pending))
                break
            for t in pending:
                t.cancel()
    for t in live:
        if t.done() and not t.cancelled():
            t.exception()  # retrieved: no "exception was never retrieved" at exit


# ------------------------------------------------------------------------------ harness


def main(component: str, make: Callable[[], Service | Awaitable[Service]], *,
         stop_timeout: float = STOP_TIMEOUT) -> None:
    """Run the process: build the component (in the loop), start it, stop it on SIGTERM/SIGINT;
    exit with the harness's status. Every process's entry point, on the one asyncio event loop.

    From the signal on, the process is gone within ``STOP_TIMEOUT`` seconds whatever state it is in:
    the component's ``stop()`` is bounded, whatever is still running after it is cancelled (again and
    again: a task that swallowed one cancel gets another), and a watchdog thread ends the process
    with every task's and thread's stack on stderr if the loop itself is stuck. A second signal ends
    it at once. The exit status is 0 after a stop by signal, 1 after a failure."""
    gctune.configure()
    with profiling(component):
        code = run_loop(serve(component, make, stop_timeout=stop_timeout), event_loop_for(component))
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)


async def serve(component: str, make: Callable[[], Service | Awaitable[Service]], *,
                stop_timeout: float = STOP_TIMEOUT) -> int:
    """Start ``make()``'s service, wait for a stop signal or a failure, stop it; the exit status."""
    global _current
    proc = _current = _Process(component)
    loop = asyncio.get_running_loop()
    watchdog = _Watchdog(component, loop)

    def on_signal(signum: int) -> None:
        proc.signals += 1
        if proc.signals > 1:  # asked twice: go now
            log.warning("stop_forced", signal=signal.Signals(signum).name)
            sys.stderr.flush()
            os._exit(1)
        log.info("stop_requested", signal=signal.Signals(signum).name)
        watchdog.arm(stop_timeout + _WATCHDOG_SLACK)
        proc.stopping.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        made = make()
        service = await made if inspect.isawaitable(made) else made
        starting = asyncio.create_task(service.start(), name=f"{component}-start")
        waiter = asyncio.create_task(proc.stopping.wait(), name=f"{component}-stop-signal")
        await asyncio.wait({starting, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if starting.done() and not starting.cancelled() and starting.exception() is not None:
            exc = starting.exception()
            if isinstance(exc, SystemExit):
                raise exc
            log.error("start_failed", error=f"{type(exc).__name__}: {exc}", exc_info=exc)
            proc.fail(f"start failed: {type(exc).__name__}: {exc}")
        elif starting.done():
            gctune.freeze()
            await proc.stopping.wait()
        log.info(f"{component.replace('-', '_')}_stopping", reason=proc.reason or "signal")
        watchdog.arm(stop_timeout + _WATCHDOG_SLACK)
        deadline = loop.time() + stop_timeout
        starting.cancel()
        waiter.cancel()
        try:
            async with asyncio.timeout(stop_timeout - _SWEEP):
                await asyncio.wait({starting, waiter}, timeout=1.0)  # a start cut short, before the stop
                await service.stop()
        except TimeoutError:
            log.error("stop_timed_out", timeout=stop_timeout - _SWEEP)
        except Exception as exc:
            log.error("stop_failed", error=f"{type(exc).__name__}: {exc}", exc_info=True)
        rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await cancel_and_wait(rest, timeout=max(0.1, deadline - loop.time()))
        log.info("stopped", exit_code=proc.exit_code)
        return proc.exit_code
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        _current = None


class _Watchdog:
    """A thread that ends the process if it has not exited by a deadline (the event loop may be
    the thing that is stuck, so this cannot be a task). Before it does, every thread's and every
    task's stack goes to stderr."""

    def __init__(self, component: str, loop: asyncio.AbstractEventLoop):
        self.component, self.loop = component, loop
        self._timer: threading.Timer | None = None

    def arm(self, seconds: float) -> None:
        if self._timer is not None:
            return
        self._timer = threading.Timer(seconds, self._fire, args=(seconds,))
        self._timer.daemon = True  # ends with the process, and never holds it up
        self._timer.start()

    def _fire(self, seconds: float) -> None:
        err = sys.stderr
        err.write(f'{{"level": "error", "component": "{self.component}", "event": "stop_deadline_exceeded", '
                  f'"seconds": {seconds}}}\n')
        try:
            err.write(_task_stacks(asyncio.all_tasks(self.loop)) + "\n")
        except Exception:  # the loop is running in another thread: best effort
            pass
        err.flush()
        faulthandler.dump_traceback(file=err, all_threads=True)
        err.flush()
        os._exit(1)


def _task_stacks(tasks: Iterable[asyncio.Task[Any]]) -> str:
    out = io.StringIO()
    for t in list(tasks):
        out.write(f"task {t.get_name()}:\n")
        t.print_stack(limit=8, file=out)
    return out.getvalue()


# ------------------------------------------------------------------------------ loop, profiling


# The components measured faster on uvloop than on asyncio's own loop, SchedulingBasic at 500
# hollow nodes, the two alternating twice (docs/performance.md): the apiserver's CPU per pod 7 %
# less, the hollow nodes' 17 % less. The scheduler was not (its ``yield_to_others`` cannot see
# uvloop's ready queue), and the others were not measured: they stay on asyncio's.
UVLOOP_COMPONENTS = frozenset({"apiserver", "hollow-nodes"})
EVENT_LOOPS = ("asyncio", "uvloop")


def event_loop_for(component: str) -> str:
    """The event loop ``component`` runs on: ``KPLANE_EVENT_LOOP`` (asyncio or uvloop) for every
    process when set, else uvloop for ``UVLOOP_COMPONENTS`` and asyncio's for the rest."""
    chosen = os.environ.get("KPLANE_EVENT_LOOP", "").strip()
    if chosen:
        if chosen not in EVENT_LOOPS:
            raise SystemExit(f"KPLANE_EVENT_LOOP must be one of {', '.join(EVENT_LOOPS)}, not {chosen!r}")
        return chosen
    return "uvloop" if component in UVLOOP_COMPONENTS else "asyncio"


def run_loop(main: Coroutine[Any, Any, T], loop: str = "asyncio") -> T:
    """Run the process's one event loop until ``main`` is done; its result. ``loop``: "asyncio"
    (the standard library's) or "uvloop" (libuv's, a dependency of kplane)."""
    if loop == "uvloop":
        import uvloop

        result: T = uvloop.run(main)
        return result
    return asyncio.run(main)


@contextlib.contextmanager
def profiling(component: str) -> Iterator[None]:
    """Profile the whole process's CPU time with cProfile when ``KPLANE_PROFILE`` names a file
    (``{component}`` in it is replaced), written at exit; SIGUSR1 clears what was recorded so far, so
    a benchmark can profile only its measured phase."""
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


async def yield_to_others(max_rounds: int = 64) -> None:
    """Let every other task that is ready run before going on (a CPU-bound loop's fair share).

    ``await asyncio.sleep(0)`` gives each ready task one step; an informer reading a gRPC stream
    needs several steps per message. This yields until nothing else is ready (the loop's ready
    queue is empty: the others wait on I/O) or ``max_rounds`` is reached, so events already
    received are handled before the next piece of CPU work — as they would be by the separate
    goroutines of a Go component.
    """
    # CPython's ready queue. Where it cannot be seen (uvloop), all ``max_rounds``: one round would
    # starve the informers, and the scheduler's cache fall seconds behind (PreemptionBasic on
    # uvloop: 15 pods/s with one round, 34 with all).
    ready = getattr(asyncio.get_running_loop(), "_ready", None)
    for _ in range(max_rounds):
        await asyncio.sleep(0)
        if ready is not None and not ready:
            return
