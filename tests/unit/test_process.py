"""machinery.process: the start/stop harness every process runs under, the supervisor of
long-running loops, and the rule that no product code uses ``asyncio.wait_for`` (on Python 3.11
it can swallow a cancellation, CPython gh-86296, and the process then ignores SIGTERM)."""

from __future__ import annotations

import ast
import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from machinery import process

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("apiserver", "scheduler", "kubelet", "machinery", "cli", "controllers", "bench")


# ------------------------------------------------------------------------------ the wait_for rule


def _wait_for_uses(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "wait_for" and isinstance(node.value, ast.Name) \
                and node.value.id == "asyncio":
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "asyncio" and \
                any(a.name == "wait_for" for a in node.names):
            lines.append(node.lineno)
    return lines


def test_no_product_code_uses_asyncio_wait_for():
    found = [f"{p.relative_to(ROOT)}:{line}" for d in PRODUCT for p in sorted((ROOT / d).rglob("*.py"))
             for line in _wait_for_uses(p)]
    assert not found, ("asyncio.wait_for can swallow a cancellation on Python 3.11; use "
                       f"`async with asyncio.timeout(...)`: {found}")


def test_the_wait_for_rule_finds_a_use(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import asyncio\nasync def f(x):\n    await asyncio.wait_for(x, 1)\n"
                 "from asyncio import wait_for\n")
    assert sorted(_wait_for_uses(f)) == [3, 4]


# ------------------------------------------------------------------------------ supervise


async def test_a_loop_that_raises_is_logged_and_restarted_with_backoff(capsys):
    runs = []

    async def loop():
        runs.append(time.monotonic())
        if len(runs) < 3:
            raise RuntimeError(f"boom {len(runs)}")
        await asyncio.sleep(3600)

    task = process.supervise("test-loop", loop, initial_backoff=0.05)
    await asyncio.sleep(0.4)
    assert len(runs) == 3 and not task.done()
    assert runs[2] - runs[1] >= runs[1] - runs[0] >= 0.05  # the backoff doubles
    await process.cancel_and_wait([task])
    assert task.cancelled()


async def test_a_loop_failing_max_failures_times_in_a_row_gives_up_outside_a_harness():
    async def loop():
        raise ValueError("always")

    task = process.supervise("doomed", loop, max_failures=3, initial_backoff=0.01)
    with pytest.raises(process.ProcessFailed, match="doomed failed 3 times in a row, last with ValueError: always"):
        await task


async def test_a_loop_that_returns_is_done():
    task = process.supervise("once", lambda: asyncio.sleep(0))
    await task
    assert task.done() and task.exception() is None


# ------------------------------------------------------------------------------ cancel_and_wait


async def test_cancel_and_wait_cancels_again_a_task_that_swallowed_the_first_cancel():
    swallowed = []

    async def stubborn():
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if not swallowed:  # what wait_for does on Python 3.11 when the inner call just finished
                    swallowed.append(True)
                    continue
                raise

    task = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    await process.cancel_and_wait([task], timeout=2.0)
    assert swallowed and task.cancelled()


async def test_cancel_and_wait_gives_up_at_its_timeout_on_a_task_that_never_ends():
    mortal = []

    async def immortal():
        while not mortal:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass

    task = asyncio.create_task(immortal(), name="immortal")
    await asyncio.sleep(0)
    start = time.monotonic()
    await process.cancel_and_wait([task], timeout=0.5)
    assert 0.4 < time.monotonic() - start < 1.5 and not task.done()  # the harness's watchdog is for this one
    mortal.append(True)
    task.cancel()
    await asyncio.wait([task])


async def test_cancel_and_wait_does_not_swallow_its_callers_cancel():
    async def slow_to_stop():
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(3600)  # a drain that never ends

    inner = asyncio.create_task(slow_to_stop())
    await asyncio.sleep(0)
    outer = asyncio.create_task(process.cancel_and_wait([inner]))
    await asyncio.sleep(0.05)
    outer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await outer
    inner.cancel()


# ------------------------------------------------------------------------------ the harness, in a process


def _run_service(body: str, tmp_path: Path, env: dict | None = None) -> subprocess.Popen:
    """A process running ``process.main`` over the service class ``S`` defined in ``body``."""
    script = tmp_path / "svc.py"
    script.write_text(textwrap.dedent("""\
        import asyncio, sys, time
        from machinery import process
        from machinery.logging import setup_logging
        setup_logging("testsvc")
        """) + textwrap.dedent(body) + '\nprocess.main("testsvc", S)\n')
    return subprocess.Popen([sys.executable, str(script)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT)})


def _wait_line(p: subprocess.Popen, marker: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = p.stderr.readline()
        if marker in line:
            return
        if not line and p.poll() is not None:
            break
    raise AssertionError(f"{marker!r} not seen; exit {p.poll()}")


def _term_and_time(p: subprocess.Popen) -> tuple[float, int, str]:
    start = time.monotonic()
    p.send_signal(signal.SIGTERM)
    try:
        _, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        raise AssertionError(f"still running 15 s after SIGTERM:\n{err[-3000:]}") from None
    return time.monotonic() - start, p.returncode, err


def test_a_service_whose_stop_hangs_and_whose_tasks_swallow_cancels_exits_within_5s_of_sigterm(tmp_path):
    p = _run_service("""
        async def stubborn():
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    pass  # swallowed, as wait_for could on 3.11
        class S:
            async def start(self):
                self.t = asyncio.create_task(stubborn(), name="stubborn")
                print('{"event": "started"}', file=sys.stderr, flush=True)
            async def stop(self):
                await asyncio.sleep(3600)
        """, tmp_path)
    _wait_line(p, '"started"')
    took, code, err = _term_and_time(p)
    assert took < 5.0, (took, err[-3000:])
    assert "stop_timed_out" in err and "stop_deadline_exceeded" in err  # the stubborn task held the loop's end
    assert "task stubborn" in err  # its stack, to explain the hang


def test_a_process_whose_loop_is_blocked_is_ended_by_the_watchdog_with_every_stack(tmp_path):
    p = _run_service("""
        class S:
            async def start(self):
                print('{"event": "started"}', file=sys.stderr, flush=True)
            async def stop(self):
                time.sleep(60)  # blocks the event loop itself
        """, tmp_path)
    _wait_line(p, '"started"')
    took, code, err = _term_and_time(p)
    assert took < 5.0 and code == 1, (took, code, err[-3000:])
    assert "stop_deadline_exceeded" in err and "svc.py\", line 10 in stop" in err, err[-3000:]  # the blocking call


def test_a_clean_stop_exits_0_and_a_second_sigterm_ends_it_at_once(tmp_path):
    p = _run_service("""
        class S:
            async def start(self):
                print('{"event": "started"}', file=sys.stderr, flush=True)
            async def stop(self):
                print('{"event": "stop_called"}', file=sys.stderr, flush=True)
        """, tmp_path)
    _wait_line(p, '"started"')
    took, code, err = _term_and_time(p)
    assert code == 0 and "stop_called" in err and '"stopped"' in err, err

    p = _run_service("""
        class S:
            async def start(self):
                print('{"event": "started"}', file=sys.stderr, flush=True)
            async def stop(self):
                print('{"event": "stopping_slowly"}', file=sys.stderr, flush=True)
                await asyncio.sleep(3)
        """, tmp_path)
    _wait_line(p, '"started"')
    p.send_signal(signal.SIGTERM)
    _wait_line(p, "stopping_slowly")
    start = time.monotonic()
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=10)
    assert time.monotonic() - start < 1.0 and p.returncode == 1


def test_a_supervised_loop_that_keeps_failing_ends_the_process_with_one_line_and_exit_1(tmp_path):
    p = _run_service("""
        async def broken():
            raise KeyError("no such thing")
        class S:
            async def start(self):
                self.t = process.supervise("broken-loop", broken, max_failures=3, initial_backoff=0.01)
            async def stop(self):
                await process.cancel_and_wait([self.t])
        """, tmp_path)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 1, err
    assert "testsvc: broken-loop failed 3 times in a row, last with KeyError: 'no such thing'" in err.splitlines()
    assert err.count('"task_failed"') == 2 and "Traceback" in err  # each failure logged with its traceback


def test_a_start_that_fails_ends_the_process_with_exit_1(tmp_path):
    p = _run_service("""
        class S:
            async def start(self):
                raise OSError("port in use")
            async def stop(self):
                pass
        """, tmp_path)
    out, err = p.communicate(timeout=20)
    assert p.returncode == 1
    assert "testsvc: start failed: OSError: port in use" in err.splitlines()


def test_event_loop_per_component_and_the_override(monkeypatch):
    monkeypatch.delenv("KPLANE_EVENT_LOOP", raising=False)
    assert process.event_loop_for("apiserver") == "uvloop"
    assert process.event_loop_for("hollow-nodes") == "uvloop"
    assert process.event_loop_for("scheduler") == "asyncio"
    assert process.event_loop_for("kubelet") == "asyncio"
    monkeypatch.setenv("KPLANE_EVENT_LOOP", "asyncio")
    assert process.event_loop_for("apiserver") == "asyncio"
    monkeypatch.setenv("KPLANE_EVENT_LOOP", "uvloop")
    assert process.event_loop_for("scheduler") == "uvloop"
    monkeypatch.setenv("KPLANE_EVENT_LOOP", "trio")
    with pytest.raises(SystemExit, match="KPLANE_EVENT_LOOP must be one of asyncio, uvloop"):
        process.event_loop_for("apiserver")


def test_run_loop_runs_on_the_loop_asked_for():
    async def loop_type() -> str:
        return type(asyncio.get_running_loop()).__module__

    assert process.run_loop(loop_type(), "uvloop").startswith("uvloop")
    assert process.run_loop(loop_type(), "asyncio").startswith("asyncio")
