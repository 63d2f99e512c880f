"""pytest-timeout's signal method with the stack of every asyncio task added to its dump of every
thread, so a test that hangs in the event loop shows which await it hangs in (the hook is
registered by tests/conftest.py)."""

from __future__ import annotations

import asyncio
import io
import signal
import threading

import pytest
import pytest_timeout


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout's signal method, with the stack of every asyncio task added to its dump of
    every thread: a test that hangs in the event loop shows which await it hangs in."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        __tracebackhide__ = True
        _dump_tasks(item.config.get_terminal_writer())
        pytest_timeout.timeout_sigalrm(item, settings)

    def cancel():
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


def _dump_tasks(terminal) -> None:
    loop = asyncio._get_running_loop()
    if loop is None:
        return
    terminal.sep("+", title="asyncio tasks at the timeout")
    for task in asyncio.all_tasks(loop):
        out = io.StringIO()
        task.print_stack(limit=10, file=out)
        terminal.write(f"task {task.get_name()}:\n{out.getvalue()}")
    terminal.sep("+", title="asyncio tasks")
