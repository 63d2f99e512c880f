"""``kplane run`` and ``kplane chaos`` against a real cluster: a schedule's steps performed in order
with their faults written into the history, healed, settled and checked; a run that fails says why
and leaves its timeline; a bad file changes nothing; the same seed gives the same schedule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cli.chaos import marks
from tests.harness.cluster import FAST_KUBELET, cluster_fixture

pytestmark = pytest.mark.integration

run_cluster = cluster_fixture(nodes=2, schedulers=1, controller_managers=1, node_cpu="2", node_memory="4Gi",
                              kubelet_args=FAST_KUBELET)


def _pod(name: str, cpu: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "app", "resources": {"requests": {"cpu": cpu}}}]}}


def _run(tc, doc: dict, out: Path, *extra: str):
    path = out.parent / f"{out.name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return tc.kplane("run", str(path), "--out", str(out), *extra, timeout=240)


def _history(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]


def test_a_schedule_runs_its_steps_heals_its_faults_and_passes_its_checks(run_cluster, tmp_path):
    doc = {"name": "steps", "steps": [
        {"apply": _pod("a", "500m")},
        {"wait": {"for": "running", "pods": ["a"]}},
        {"kill": "scheduler"},
        {"apply": _pod("b", "500m")},
        {"failpoint": {"component": "kubelet/node-1", "name": "kubelet/resize-before-allocate",
                       "action": "sleep(100)"}},
        {"after": 0.2, "resize": {"pod": "a", "cpu": "700m"}},
        {"delete": {"kind": "pod", "name": "gone", "grace_period": 0}},  # refused: NotFound, the run goes on
    ], "expect": [{"pod": "a", "phase": "Running", "requests": {"cpu": "700m"}},
                  {"pod": "b", "phase": "Running"}, {"event": "Scheduled", "min": 2}]}
    out = tmp_path / "ok"
    r = _run(run_cluster, doc, out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "step 3/7  kill scheduler  -> ok" in r.stdout and "step 7/7" in r.stdout and "refused (NotFound" in r.stdout
    assert "heal: scheduler started" in r.stdout  # killed, never started by the schedule: the heal did
    result = json.loads((out / "result.json").read_text())
    assert result["ok"] and result["counts"] == {"user": 4, "fault": 2, "wait": 1,
                                                 "revisions": result["counts"]["revisions"]}
    steps = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [s["op"] for s in steps] == ["apply", "wait", "kill", "apply", "failpoint", "resize", "delete"]
    faults = [h["object"] for h in _history(out) if h["kind"] == "Event"
              and h["object"].get("reportingComponent") == marks.REPORTER]
    assert [(f["action"], f["message"]) for f in faults] == [
        ("kill", "scheduler kill"),
        ("failpoint", "kubelet/node-1 failpoint name=kubelet/resize-before-allocate action=sleep(100)")]
    assert not (out / "timeline.html").exists()


def test_a_run_that_fails_says_why_and_draws_its_timeline(run_cluster, tmp_path):
    doc = {"name": "too-big", "steps": [{"apply": _pod("huge", "64")},
                                        {"wait": {"for": "running", "pods": ["huge"], "timeout": 3}}]}
    out = tmp_path / "fails"
    r = _run(run_cluster, doc, out)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAILED: step 2 (wait): timed out after 3 s: waiting for running: huge" in r.stdout
    page = (out / "timeline.html").read_text()
    assert 'data-pod="default/huge"' in page
    assert json.loads((out / "result.json").read_text())["failed_step"] == 2
    run_cluster.kplane("delete", "pod", "huge", "--grace-period", "0")


def test_an_expectation_that_does_not_hold_fails_the_run(run_cluster, tmp_path):
    doc = {"steps": [{"apply": _pod("e", "100m")}, {"wait": {"for": "running", "pods": ["e"]}}],
           "expect": [{"pod": "e", "phase": "Succeeded"}, {"event": "Preempted", "pod": "e"}]}
    r = _run(run_cluster, doc, tmp_path / "expect")
    assert r.returncode == 1
    assert "FAILED: expect 1: pod e is Running, want Succeeded" in r.stdout
    unmet = json.loads((tmp_path / "expect" / "result.json").read_text())["unmet"]
    assert unmet == ["expect 1: pod e is Running, want Succeeded",
                     "expect 2: 0 Preempted event(s) for pod e, want at least 1"]
    run_cluster.kplane("delete", "pod", "e", "--grace-period", "0")


@pytest.mark.parametrize("doc, message", [
    ({"steps": [{"kill": "schedulr"}]}, 'error: step 2 (kill): unknown component "schedulr" (this cluster has: '),
    ({"steps": [{"resize": {"pod": "a", "cpu": "x"}}]}, "error: step 2 (resize): invalid cpu 'x'"),
])
def test_a_bad_schedule_is_refused_before_anything_runs(run_cluster, tmp_path, doc, message):
    doc["steps"].insert(0, {"apply": _pod("never", "100m")})
    r = _run(run_cluster, doc, tmp_path / "bad")
    assert r.returncode == 1 and r.stderr.startswith(message) and r.stderr.count("\n") == 1, r.stderr
    got = run_cluster.kplane("get", "pod", "never")
    assert got.returncode == 1 and "NotFound" in got.stderr


def test_chaos_with_a_seed_runs_the_same_schedule_and_settles(run_cluster, tmp_path):
    outs = []
    for i in (1, 2):
        out = tmp_path / f"chaos-{i}"
        r = run_cluster.kplane("chaos", "--seed", "11", "--duration", "4", "--profile", "rollout", "--out",
                               str(out), timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "chaos: seed 11, 1 profile(s), " in r.stdout and "0 violations" in r.stdout
        outs.append((out / "schedule.yaml").read_text())
    assert outs[0] == outs[1]
    assert yaml.safe_load(outs[0])["seed"] == 11


def test_chaos_on_a_running_cluster_faults_that_clusters_nodes(run_cluster, tmp_path):
    """The node-failure profile's own cluster has three nodes; this one has two, and the schedule
    generated for it faults and drains only those (seed 10 drains node-3 and kills its runtime on
    the profile's own cluster)."""
    out = tmp_path / "nodes"
    r = run_cluster.kplane("chaos", "--seed", "10", "--duration", "8", "--profile", "node-failure", "--out",
                           str(out), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = yaml.safe_load((out / "schedule.yaml").read_text())
    assert doc["cluster"]["nodes"] == 2
    named = {str(v) for s in doc["steps"] for k, v in s.items()
             if k in ("kill", "start", "restart", "pause", "resume", "drain", "cordon", "uncordon")}
    named |= {s["failpoint"]["component"] for s in doc["steps"] if "failpoint" in s}
    node_targets = {n.split("/", 1)[-1] for n in named if n.startswith(("kubelet/", "runtime/", "node-"))}
    assert node_targets and node_targets <= {"node-1", "node-2"}, named
