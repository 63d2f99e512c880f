"""Strict configuration, seen from the command line: a bad value stops ``python -m scheduler`` and
``kplane up`` at once, with exit status non-zero and exactly one line on stderr naming the field or
flag — no traceback, no process started, nothing written that a later ``kplane up`` would trip
over. And a component that fails to start anyway is reported in one line with its own words."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.harness.cluster import ROOT

pytestmark = pytest.mark.integration

MISSPELLED = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategyy:
        type: MostAllocated
"""
MISSPELLED_LINE = ('profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field "scoringStrategyy"')


def run(*argv: str, timeout: float = 30) -> tuple[subprocess.CompletedProcess, float]:
    start = time.monotonic()
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return out, time.monotonic() - start


def one_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1, f"want one line on stderr, got:\n{out.stderr}"
    return lines[0]


def processes_using(path: Path) -> list[str]:
    """Command lines of running processes that mention ``path`` (a data dir)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(cmdline)
    return found


def test_scheduler_with_a_misspelled_plugin_arg_exits_with_one_line(tmp_path):
    config = tmp_path / "sched.yaml"
    config.write_text(MISSPELLED)
    token = tmp_path / "token"
    token.write_text("unused\n")
    out, took = run("-m", "scheduler", "--server", "127.0.0.1:1", "--token-file", str(token), "--config", str(config))
    assert out.returncode == 1
    assert one_line(out) == f"invalid scheduler configuration: {MISSPELLED_LINE}"
    assert took < 15


@pytest.mark.parametrize("flags,fragments", [
    (["--feature-gates", "NoSuchGate=true"], ["invalid --feature-gates", 'unrecognized feature gate: NoSuchGate']),
    (["--scheduler-config", "{bad}"], ["invalid --scheduler-config", MISSPELLED_LINE]),
    (["--scheduler-arg=--config={bad}"], ["invalid --scheduler-arg", MISSPELLED_LINE]),
    (["--scheduler-arg=--no-such-flag"], ["invalid --scheduler-arg: unrecognized arguments: --no-such-flag"]),
    (["--kubelet-arg=--sync-frequency=often"], ["invalid --kubelet-arg", "--sync-frequency"]),
    (["--nodes", "-1"], ["invalid --nodes -1"]),
    (["--node-cpu", "abc"], ["invalid --node-cpu 'abc'"]),
])
def test_kplane_up_refuses_a_bad_value_before_starting_anything(tmp_path, flags, fragments):
    bad = tmp_path / "bad.yaml"
    bad.write_text(MISSPELLED)
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "keep").write_text("a file a later kplane up must still find alone\n")
    out, took = run("-m", "cli", "--data-dir", str(data_dir), "up", "--detach",
                    *[f.replace("{bad}", str(bad)) for f in flags])
    line = one_line(out)
    assert line.startswith("error: ")
    for f in fragments:
        assert f in line, line
    assert sorted(p.name for p in data_dir.iterdir()) == ["keep"], "nothing written in the data dir"
    assert processes_using(data_dir) == [], "no process started"
    assert out.stdout == ""
    assert took < 15, "refused before waiting for any component"


def test_kplane_up_reports_a_component_that_fails_to_start_in_its_own_words(tmp_path):
    """The scheduler's admin port is taken, which no check can know beforehand: ``kplane up`` stops
    what it started and prints the scheduler's own error, in one line."""
    data_dir = tmp_path / "data"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        try:
            out, took = run("-m", "cli", "--data-dir", str(data_dir), "up", "--detach", "--nodes", "0",
                            "--timeout", "30", f"--scheduler-arg=--admin-listen=127.0.0.1:{port}", timeout=90)
        finally:
            subprocess.run([sys.executable, "-m", "cli", "--data-dir", str(data_dir), "down"], capture_output=True,
                           cwd=ROOT, timeout=60)
    line = one_line(out)
    assert line.startswith("error: scheduler exited while starting: "), line
    assert "address already in use" in line and f"(log: {data_dir}/logs/scheduler.log)" in line
    assert processes_using(data_dir) == [], "etcd and the apiserver were stopped again"
    assert took < 30, "the scheduler's exit is seen at once, not after --timeout"
