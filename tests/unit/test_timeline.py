"""``kplane timeline`` on hand-built histories: the model (lanes, bars, phases, resize spans,
preemption arrows, fault marks), the SVG it is drawn as, and the command's input checks.

Pods are in "default" with uid ``uid-<name>``; nodes are n1 and n2; revisions are small numbers
chosen so each step of a story has its own.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from cli import main as kplane
from cli.chaos import marks
from cli.check.framework import Entry
from cli.timeline import model, render
from machinery import jsonconv
from machinery.api import coordination_pb2
from tests.harness.builders import MakePod
from tests.harness.history import pod_entry, preempted_event

SVG = "{http://www.w3.org/2000/svg}"


def _pod(name: str, *, node: str = "", phase: str = "Pending", deleting: bool = False, cpu: str = "1",
         priority: int = 0, reason: str = "") -> MakePod:
    p = MakePod().name(name).uid(f"uid-{name}").req(cpu=cpu).priority(priority).phase(phase)
    if node:
        p.node(node)
    if deleting:
        p.deletion_timestamp("2026-01-01T00:00:05Z")
    if reason:
        p.obj().status.reason = reason
    return p


def _fault(rev: int, action: str, component: str) -> Entry:
    ev = marks.fault_event(action, component, f"{component} {action}ed by the test")
    ev.metadata.name = f"kplane-fault.{rev}"
    return Entry(rev, "ADDED", "Event", "default", ev.metadata.name, ev)


def _preemption_story() -> list[Entry]:
    """v runs on n1 (2-4); p, of higher priority, is created (5) and preempts v: v is marked for
    deletion (6), the Preempted event written (7), v deleted (8), p bound to n1 (9) and running (10)."""
    return [
        pod_entry(2, "ADDED", _pod("v", priority=10).obj()),
        pod_entry(3, "MODIFIED", _pod("v", node="n1", priority=10).obj()),
        pod_entry(4, "MODIFIED", _pod("v", node="n1", phase="Running", priority=10).obj()),
        pod_entry(5, "ADDED", _pod("p", priority=1000).obj()),
        pod_entry(6, "MODIFIED", _pod("v", node="n1", phase="Running", priority=10, deleting=True).obj()),
        preempted_event(7, "v", "p"),
        pod_entry(8, "DELETED", _pod("v", node="n1", phase="Running", priority=10, deleting=True).obj()),
        pod_entry(9, "MODIFIED", _pod("p", node="n1", priority=1000).obj()),
        pod_entry(10, "MODIFIED", _pod("p", node="n1", phase="Running", priority=1000).obj()),
    ]


def _bar(t: model.Timeline, pod: str) -> model.Bar:
    (bar,) = [b for b in t.bars if b.pod == pod]
    return bar


def _phases(bar: model.Bar) -> list[tuple[str, int, int]]:
    return [(s.phase, s.start, s.end) for s in bar.segments]


# ------------------------------------------------------------------------------------------ the model


def test_preemption_is_an_arrow_from_preemptor_to_victim_and_both_live_in_n1():
    t = model.build(_preemption_story())
    (p,) = t.preemptions
    assert (p.preemptor.pod, p.victim.pod, p.rev) == ("default/p", "default/v", 7)
    v, pre = _bar(t, "default/v"), _bar(t, "default/p")
    assert _phases(v) == [("pending", 2, 3), ("bound", 3, 4), ("running", 4, 6), ("terminating", 6, 8)]
    assert (v.end, v.ended, v.lane) == (8, "deleted", "n1")
    # p's life from its creation: pending until bound at 9, running from 10 to the end of the history.
    assert _phases(pre) == [("pending", 5, 9), ("bound", 9, 10), ("running", 10, 11)]
    assert (pre.lane, pre.ended, pre.priority, t.end) == ("n1", "", 1000, 11)
    assert v.row != pre.row  # they overlap in n1 (5-8): two rows
    assert [ev.reason for ev in v.events] == ["Preempted"]
    assert [lane.name for lane in t.lanes] == [model.CONTROL_PLANE, model.UNSCHEDULED, "n1"]


def test_resize_deferred_then_actuated_is_a_request_and_two_spans():
    """KEP-1287: c1's cpu request goes 1 -> 2 (5); the kubelet defers it (6, PodResizePending
    reason Deferred), then admits it once room is made (8: PodResizeInProgress) and actuates it (9)."""
    running = dict(node="n1", phase="Running")
    entries = [
        pod_entry(1, "ADDED", _pod("r", **running).obj()),
        pod_entry(5, "MODIFIED", _pod("r", cpu="2", **running).obj()),
        pod_entry(6, "MODIFIED", _pod("r", cpu="2", **running)
                  .condition("PodResizePending", "True", "Deferred", message="Node didn't have enough capacity").obj()),
        pod_entry(8, "MODIFIED", _pod("r", cpu="2", **running).condition("PodResizeInProgress", "True").obj()),
        pod_entry(9, "MODIFIED", _pod("r", cpu="2", **running).obj()),
    ]
    bar = _bar(model.build(entries), "default/r")
    assert [(q.rev, q.change) for q in bar.resize_requests] == [(5, "c1 requests cpu 1 -> 2")]
    assert [(r.state, r.start, r.end) for r in bar.resizes] == [("deferred", 6, 8), ("in-progress", 8, 9)]
    assert bar.resizes[0].message == "Node didn't have enough capacity"
    assert _phases(bar) == [("running", 1, 10)]


def test_resize_infeasible_still_pending_is_cut_at_the_end():
    entries = [
        pod_entry(1, "ADDED", _pod("r", node="n1", phase="Running").obj()),
        pod_entry(2, "MODIFIED", _pod("r", node="n1", phase="Running", cpu="9")
                  .condition("PodResizePending", "True", "Infeasible").obj()),
    ]
    bar = _bar(model.build(entries), "default/r")
    assert [(r.state, r.start, r.end) for r in bar.resizes] == [("infeasible", 2, 3)]


def test_kill_marks_go_on_the_control_plane_lane_or_their_node_lane():
    entries = [_fault(3, "kill", "scheduler"), _fault(4, "start", "scheduler"), _fault(5, "kill", "kubelet/n2"),
               _fault(6, "failpoint", "runtime/n1")]
    t = model.build(entries)
    got = [(f.rev, f.action, f.component, f.lane) for f in t.faults]
    assert got == [(3, "kill", "scheduler", model.CONTROL_PLANE), (4, "start", "scheduler", model.CONTROL_PLANE),
                   (6, "failpoint", "runtime/n1", "n1"), (5, "kill", "kubelet/n2", "n2")]
    assert t.revs == [3, 4, 5, 6]


def test_pod_deleted_while_terminating_ends_at_deleted():
    entries = [
        pod_entry(1, "ADDED", _pod("d", node="n2", phase="Running").obj()),
        pod_entry(4, "MODIFIED", _pod("d", node="n2", phase="Running", deleting=True).obj()),
        pod_entry(5, "MODIFIED", _pod("d", node="n2", phase="Running", deleting=True).obj()),
        pod_entry(7, "DELETED", _pod("d", node="n2", phase="Running", deleting=True).obj()),
        pod_entry(9, "ADDED", _pod("other").obj()),
    ]
    t = model.build(entries)
    bar = _bar(t, "default/d")
    assert _phases(bar) == [("running", 1, 4), ("terminating", 4, 7)]
    assert (bar.end, bar.ended, bar.lane) == (7, "deleted", "n2")
    assert _bar(t, "default/other").lane == model.UNSCHEDULED


def test_terminal_phase_ends_the_bar_with_its_reason():
    """A pod the kubelet rejects at admission (OutOfcpu) ends Failed; later writes draw nothing."""
    entries = [
        pod_entry(1, "ADDED", _pod("o").obj()),
        pod_entry(2, "MODIFIED", _pod("o", node="n1").obj()),
        pod_entry(3, "MODIFIED", _pod("o", node="n1", phase="Failed", reason="OutOfcpu").obj()),
        pod_entry(4, "MODIFIED", _pod("o", node="n1", phase="Failed", reason="OutOfcpu", deleting=True).obj()),
    ]
    bar = _bar(model.build(entries), "default/o")
    assert _phases(bar) == [("pending", 1, 2), ("bound", 2, 3)]
    assert (bar.end, bar.ended, bar.reason) == (3, "Failed", "OutOfcpu")


def test_pods_one_after_another_share_a_row():
    entries = [
        pod_entry(1, "ADDED", _pod("a", node="n1").obj()), pod_entry(2, "DELETED", _pod("a", node="n1").obj()),
        pod_entry(3, "ADDED", _pod("b", node="n1").obj()), pod_entry(4, "ADDED", _pod("c", node="n1").obj()),
    ]
    t = model.build(entries)
    assert [(b.pod, b.row) for b in t.bars] == [("default/a", 0), ("default/b", 0), ("default/c", 1)]
    assert t.lanes[-1].rows == 2


def test_since_until_and_pods_select_what_is_drawn():
    story = _preemption_story()
    t = model.build(story, since=6, until=8)
    v, pre = _bar(t, "default/v"), _bar(t, "default/p")
    assert v.clipped and _phases(v) == [("terminating", 6, 8)]
    assert _phases(pre) == [("pending", 6, 9)] and (t.first, t.last, t.end) == (6, 8, 9)
    assert len(t.preemptions) == 1

    only = model.build(story, pods=["p"])
    assert [b.pod for b in only.bars] == ["default/p"] and only.preemptions == []
    with pytest.raises(model.NoSuchPod, match="'nope'"):
        model.build(story, pods=["nope"])


# ------------------------------------------------------------------------------------------ drawing


def _elements(svg_text: str, cls: str) -> list[ET.Element]:
    root = ET.fromstring(svg_text.split("\n", 1)[1])
    return [el for el in root.iter() if cls in (el.get("class") or "").split()]


def test_svg_carries_testable_attributes_and_titles():
    entries = _preemption_story() + [_fault(11, "kill", "scheduler")]
    text = render(entries, "svg")
    assert text.startswith('<?xml version="1.0" encoding="UTF-8"?>\n<svg xmlns="http://www.w3.org/2000/svg"')
    pods = {el.get("data-pod"): el for el in _elements(text, "pod")}
    assert set(pods) == {"default/p", "default/v"}
    assert pods["default/v"].get("data-ended") == "deleted" and pods["default/v"].get("data-node") == "n1"
    assert pods["default/p"].find(f"{SVG}title").text.startswith("default/p (priority 1000)")
    phases = [s.get("class") for s in pods["default/v"] if s.tag == f"{SVG}rect"]
    assert phases == ["segment phase-pending", "segment phase-bound", "segment phase-running",
                      "segment phase-terminating"]
    (arrow,) = _elements(text, "preemption")
    assert (arrow.get("data-preemptor"), arrow.get("data-victim"), arrow.get("data-rev")) == \
        ("default/p", "default/v", "7")
    (kill,) = _elements(text, "fault")
    assert kill.get("class") == "fault kill" and kill.get("data-component") == "scheduler"
    assert "kill scheduler" in kill.find(f"{SVG}title").text
    ticks = [el.get("data-rev") for el in _elements(text, "tick")]
    assert ticks[0] == "2" and set(ticks) <= {"2", "3", "4", "5", "6", "7", "8", "9", "10", "11"}
    assert [el.text for el in _elements(text, "lane-label")] == ["control plane", "unscheduled", "n1"]


def test_html_is_one_page_with_the_svg_inline_and_nothing_fetched():
    text = render(_preemption_story(), "html")
    assert text.startswith("<!DOCTYPE html>") and "<svg " in text and text.rstrip().endswith("</html>")
    assert "<script" not in text and "src=" not in text and "href=" not in text
    assert text.count("http") == 1  # the SVG namespace, never fetched


def test_names_are_escaped():
    entries = [pod_entry(1, "ADDED", _pod("a<b&c").obj())]
    (bar,) = _elements(render(entries, "svg"), "pod")
    assert bar.get("data-pod") == "default/a<b&c"


# ------------------------------------------------------------------------------------------ the command


def _history_file(tmp_path, entries: list[Entry]):
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps({"rev": e.rev, "type": e.type, "kind": e.kind, "namespace": e.namespace,
                                        "name": e.name, "object": jsonconv.to_dict(e.obj)}) + "\n"
                            for e in entries))
    return path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = kplane.main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_timeline_from_a_history_file(tmp_path, capsys):
    lease = coordination_pb2.Lease()
    lease.metadata.name = "kube-scheduler"
    entries = _preemption_story() + [Entry(11, "MODIFIED", "Lease", "kube-system", "kube-scheduler", lease)]
    out = tmp_path / "t.html"
    rc, stdout, err = _run(capsys, "timeline", "--history", str(_history_file(tmp_path, entries)), "-o", str(out))
    assert (rc, err) == (0, "")
    assert stdout == f"wrote {out}: revisions 0 to 11, 2 pods, 1 preemption, 0 faults\n"
    assert 'data-preemptor="default/p"' in out.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["history.jsonl", "t.html"]  # no temporary left


@pytest.mark.parametrize("args, message", [
    (["-o", "{d}/t.png"], "-o {d}/t.png: the file name must end in .html or .svg"),
    (["-o", "{d}/t"], "the file name must end in .html or .svg"),
    (["-o", "{d}/missing/t.svg"], "no directory {d}/missing"),
    (["-o", "{d}/t.svg", "--since", "9", "--until", "3"], "--until 3 is before --since 9"),
    (["-o", "{d}/t.svg", "--pods", "p,,v"], "--pods 'p,,v'"),
    (["-o", "{d}/t.svg", "--pods", "nope"], "--pods: no pod 'nope' in the history"),
    (["-o", "{d}/t.svg", "--history", "{d}/absent.jsonl"], "--history {d}/absent.jsonl: No such file"),
    (["-o", "{d}/t.svg", "--history", "{d}/bad.jsonl"], "--history {d}/bad.jsonl line 2: not a `kplane history` line"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    history = _history_file(tmp_path, _preemption_story())
    (tmp_path / "bad.jsonl").write_text(history.read_text().splitlines()[0] + "\n{\"rev\": 3}\n")
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [a.format(d=tmp_path) for a in args]
    if "--history" not in argv:
        argv += ["--history", str(history)]
    rc, out, err = _run(capsys, "timeline", *argv)
    assert rc != 0 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert message.format(d=tmp_path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
