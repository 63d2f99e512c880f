"""The race catalogue (examples/races/, docs/chaos.md "The race catalogue"): every schedule run
through ``kplane run`` on a cluster of its own, as a user runs it, and it must pass: its steps,
the convergence afterwards, every ``kplane check`` rule over the history and its ``expect:`` list.

A failure prints the run's result.json and the tail of its steps and of each component's log
(the run's cluster/logs). For KEP-5836's restart race the run's timeline is rendered too and
loaded by headless Chromium: the page must show the preemptor, its victims and the scheduler's
death at the failpoint, then its start.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.harness.browser import Elements, browser

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CATALOGUE = sorted((ROOT / "examples" / "races").glob("*.yaml"))
RESTART_RACE = "resize-preemption-scheduler-restart"
CONVERGE_TIMEOUT = "60"


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"({exc})"


def _report(out: subprocess.CompletedProcess, run: Path) -> str:
    parts = [f"exit {out.returncode}", out.stdout[-3000:], out.stderr[-3000:],
             "--- result.json", _tail(run / "result.json", 80), "--- steps.jsonl", _tail(run / "steps.jsonl")]
    for log in sorted((run / "cluster" / "logs").glob("*.log")):
        parts += [f"--- {log.name}", _tail(log, 25)]
    return "\n".join(parts)


def _run(schedule: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, Path]:
    run = tmp / "run"
    out = subprocess.run([sys.executable, "-m", "cli", "--data-dir", str(tmp / "data"), "run", str(schedule),
                          "--out", str(run), "--converge-timeout", CONVERGE_TIMEOUT],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    return out, run


def test_the_catalogue_has_its_races():
    assert len(CATALOGUE) >= 14, [p.name for p in CATALOGUE]


@pytest.mark.parametrize("schedule", CATALOGUE, ids=[p.stem for p in CATALOGUE])
def test_race(schedule: Path, tmp_path: Path):
    out, run = _run(schedule, tmp_path)
    assert out.returncode == 0, _report(out, run)
    result = json.loads((run / "result.json").read_text())
    assert result["ok"] and not result["violations"] and not result["unmet"], result
    if schedule.stem == RESTART_RACE:
        _timeline_shows_the_restart(run, tmp_path)


def _timeline_shows_the_restart(run: Path, tmp: Path) -> None:
    """The page of the run's history: a (priority 1000) preempting on node-1, two of its three
    victims ended and one left running, the scheduler's death at its panic failpoint and its start
    after, in the control plane's lane."""
    page = tmp / "timeline.html"
    out = subprocess.run([sys.executable, "-m", "cli", "timeline", "--history", str(run / "history.jsonl"),
                          "-o", str(page)], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    dom = browser("--dump-dom", page.as_uri(), profile=tmp / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    elements = Elements()
    elements.feed(dom.stdout)
    (a,) = elements.having("pod", data_pod="default/a")
    assert a["data-lane"] == "node-1" and a["data-priority"] == "1000" and not a["data-ended"]
    victims = {f"default/{n}": elements.having("pod", data_pod=f"default/{n}")[0] for n in ("p1", "p2", "p3")}
    ended = sorted(n for n, v in victims.items() if v["data-ended"])
    assert len(ended) == 2 and all(v["data-lane"] == "node-1" for v in victims.values()), victims
    preemptions = elements.having("preemption", data_preemptor="default/a")
    assert preemptions and {p["data-victim"] for p in preemptions} <= set(ended), preemptions
    (died,) = elements.having("fault failpoint", data_component="scheduler")
    (started,) = elements.having("fault start", data_component="scheduler")
    assert died["data-lane"] == started["data-lane"] == "control plane"
    assert int(died["data-rev"]) < int(started["data-rev"]) < max(int(p["data-rev"]) for p in preemptions)
    assert "panic" in page.read_text() and "scheduler/preemption-after-first-victim" in page.read_text()
