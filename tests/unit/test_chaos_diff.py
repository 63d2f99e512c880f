"""kplane diff: two runs' outcomes compared pod by pod — where each was bound, whether and by whom
it was preempted, how it ended, what became of its resizes — printing only the differences, with
diff(1)'s exit status (docs/chaos.md, "Record, replay, diff")."""

from __future__ import annotations

import json

from cli.chaos import diff
from cli.chaos.outcome import outcome
from cli.main import main
from tests.unit.fakes_chaos_history import (
    History,
    actuated,
    at,
    bound,
    deleting,
    event,
    marked,
    owned_pod,
    resize_pending,
    resized,
    user_pod,
)


def _run(web_node: str = "node-1", victim: str = "low", resize_deferred: bool = False) -> History:
    """web bound to ``web_node`` and resized; high preempts ``victim`` (low or mid); a
    ReplicaSet's pod bound to node-2."""
    h = History()
    web = h.write("ADDED", user_pod("web"))
    web = h.write("MODIFIED", bound(web, web_node, at(1)))
    pods = {name: h.write("MODIFIED", bound(h.write("ADDED", user_pod(name, priority=p)), "node-3", at(2)))
            for name, p in (("low", 1), ("mid", 2))}
    high = h.write("ADDED", user_pod("high", priority=10))
    gone = h.write("MODIFIED", marked(pods[victim], "PreemptionByScheduler", at(3)))
    h.write("ADDED", event("Preempted", gone, at(3), related=high))
    h.write("DELETED", deleting(gone, at(3), 0))
    h.write("MODIFIED", bound(high, "node-3", at(4)))
    web = h.write("MODIFIED", resized(web, "800m", at(5)))
    if resize_deferred:
        h.write("MODIFIED", resize_pending(web, "Deferred", at(6)))
    else:
        h.write("MODIFIED", actuated(web, at(6)))
    rs = h.write("ADDED", owned_pod(f"rs-{web_node}", "rs"))  # a random name of its own in each run
    h.write("MODIFIED", bound(rs, "node-2", at(7)))
    return h


def _diff(a: History, b: History) -> list[str]:
    return [d.line() for d in diff.compare(outcome(a.entries), outcome(b.entries))]


def test_the_same_run_has_no_difference():
    assert _diff(_run(), _run()) == []


def test_the_outcome_of_a_run():
    o = outcome(_run().entries)
    web, low, rs = o.pods["default/web"], o.pods["default/low"], o.pods["default/replicaset/rs#1"]
    assert (web.node, web.bindings, web.end, web.allocated) == ("node-1", 1, "Running", "c1 cpu=800m")
    assert [(r.requested, r.result) for r in web.resizes] == [("c1 cpu=800m", "completed")]
    assert (low.preempted_by, low.end) == ("default/high", "Running, deleted")
    assert rs.node == "node-2"
    assert o.totals() == {"pods": 5, "scheduled": 5, "preempted": 1, "failed": 0, "resizes": 1,
                          "resizes completed": 1, "resizes deferred": 0, "resizes infeasible": 0}


def test_a_moved_pod():
    assert _diff(_run(), _run(web_node="node-2")) == ["pod default/web: node node-1 -> node-2"]


def test_a_different_victim():
    assert _diff(_run(), _run(victim="mid")) == [
        "pod default/low: preempted by default/high -> not preempted",
        "pod default/low: Running, deleted -> Running",
        "pod default/mid: not preempted -> preempted by default/high",
        "pod default/mid: Running -> Running, deleted",
    ]


def test_a_resize_deferred_instead_of_completed():
    assert _diff(_run(), _run(resize_deferred=True)) == [
        "pod default/web: resize 1 (c1 cpu=800m) completed -> deferred",
        "pod default/web: allocated c1 cpu=800m -> c1 cpu=500m",
        "total: resizes completed 1 -> 0",
        "total: resizes deferred 0 -> 1",
    ]


def test_kplane_diff_exits_0_when_same_1_when_different_2_on_bad_input(tmp_path, capsys):
    a = _run().save(tmp_path / "a.jsonl")
    same = _run().save(tmp_path / "same.jsonl")
    moved = _run(web_node="node-2").save(tmp_path / "moved.jsonl")
    assert main(["diff", str(a), str(same)]) == 0
    assert capsys.readouterr().out == f"same outcomes: 5 pods in {a} and {same}\n"
    assert main(["diff", str(a), str(moved)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "pod default/web: node node-1 -> node-2",
        f"1 difference(s) between {a} and {moved}: 1 of 5 pods differ"]
    assert main(["diff", str(a), str(moved), "-o", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["same"] is False
    assert doc["differences"] == [{"subject": "pod default/web", "what": "node", "a": "node-1", "b": "node-2"}]
    assert main(["diff", str(a), str(tmp_path / "missing.jsonl")]) == 2
    assert capsys.readouterr().err.startswith("error: cannot read ")
