"""Proof that kplane's chaos finds races (docs/chaos.md, "Proof that it finds races"): the schedule
``kplane chaos shrink`` cut down from a seeded run that found what a safety check prevents, replayed
with the check switched off (its failpoint armed with ``return`` in the schedule's
``cluster.failpoints``), must fail with the rule that catches it; the same schedule with the check
on must pass. The schedules are under examples/races/found/: the kubelet's fit check, the
ReplicaSet controller's expectations and the scheduler's victims-in-flight guard (docs/chaos.md,
"Proof that it finds races", has how each was found and shrunk).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
FOUND = ROOT / "examples" / "races" / "found"
RULES = {"kubelet-skip-fit-check.yaml": "allocated-within-allocatable",
         "controller-manager-skip-replicaset-expectations.yaml": "deployment-surge-and-unavailability",
         "scheduler-skip-victims-in-flight-guard.yaml": "no-preemption-while-victims-going"}

pytestmark = pytest.mark.chaos
OFF_TRIES = 3


def _run(path: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp / "run"
    r = subprocess.run([sys.executable, "-m", "cli", "--data-dir", str(tmp / "data"), "run", str(path), "--out",
                        str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    result = json.loads((out / "result.json").read_text()) if (out / "result.json").exists() else {}
    return r, result


def test_every_found_schedule_is_named_here():
    assert sorted(p.name for p in FOUND.glob("*.yaml")) == sorted(RULES)


@pytest.mark.parametrize("name", sorted(RULES))
def test_a_shrunk_schedule_fails_with_its_check_off_and_passes_with_it_on(name, tmp_path):
    path = FOUND / name
    doc = yaml.safe_load(path.read_text())
    assert doc["cluster"]["failpoints"].endswith("=return") and len(doc["steps"]) <= 12
    # With the check off the race must show; it is a race between real processes, so it gets up
    # to OFF_TRIES runs. (Each schedule pins the scheduler's tie-breaks, so the placements a race
    # needs are the same in every run; its timing still is a race's.)
    for attempt in range(OFF_TRIES):
        r, result = _run(path, tmp_path / f"off-{attempt}")
        rules = {v["rule"] for v in result.get("violations", [])}
        if r.returncode == 1 and RULES[name] in rules:
            break
    else:
        pytest.fail(f"no {RULES[name]} violation in {OFF_TRIES} runs with the check off; the last:\n"
                    + r.stdout[-3000:] + r.stderr[-2000:])
    del doc["cluster"]["failpoints"]
    on = tmp_path / "on.yaml"
    on.write_text(yaml.safe_dump(doc))
    r, result = _run(on, tmp_path / "on")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
