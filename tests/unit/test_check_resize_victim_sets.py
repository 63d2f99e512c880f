"""``kplane check``'s one-victim-set-per-resize rule on synthetic histories.

KEP-5836 (Scheduler Preemption for In-Place Pod Resize): a pod bound to a node whose resize is
Deferred (PodResizePending=True, reason Deferred) makes the scheduler preempt lower-priority pods
on its own node. A resize request is the pod's uid and metadata.generation. "Tracking Preemption
Nominations to Avoid Double Preemption": a victim with a long grace period, or a scheduler
restarted mid-preemption, lets the scheduler choose new victims for the same request while
earlier ones are still terminating; Option 4 (the pod's spec.nodeName as its nomination) refuses
that, and this rule reports it. The scheduler writes a preemption's Preempted events once every
victim was asked to go, so the histories below put all marks of one preemption before its events.

The cast: ``a`` (priority 100) on n1, resized to generation 2 (request uid-a/2) and Deferred at
rev 11; ``v0``, ``v1``, ``v2`` (priority 0) on n1.
"""

from __future__ import annotations

import pytest

from cli import check
from machinery.api import core_pb2
from tests.harness.builders import MakePod
from tests.harness.history import pod_entry as _pe
from tests.harness.history import preempted_event

RULE = check.OneVictimSetPerResize
NAME = "one-victim-set-per-resize"
T1, T2, T3 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z", "2026-01-01T00:00:20Z"


def _preempted(rev: int, victim: str, preemptor: str = "a", count: int = 1) -> check.Entry:
    return preempted_event(rev, victim, preemptor, count)


def _revision(name: str, *, node: str = "n1", priority: int = 0, generation: int = 1, deferred: bool = False,
              nominated: str = "", marked: str = "", deleting: bool = False) -> core_pb2.Pod:
    """Pod ``name`` (uid ``uid-<name>``) as one revision of the history has it: on ``node`` with
    ``priority`` at ``generation``, its resize Deferred, nominated, marked DisruptionTarget at
    ``marked``, being deleted."""
    p = MakePod().name(name).uid(f"uid-{name}").generation(generation).node(node).priority(priority)
    p.nominated(nominated)
    if deferred:  # the kubelet's verdict on the resize that set ``generation``
        p.condition("PodResizePending", "True", "Deferred", observed_generation=generation,
                    message="Node didn't have enough resource: cpu, requested: 3000, used: 3000, capacity: 4000")
    if marked:  # the DisruptionTarget condition, written at ``marked`` (its lastTransitionTime)
        p.condition("DisruptionTarget", "True", "PreemptionByScheduler", last_transition_time=marked,
                    message="default-scheduler: preempting to accommodate a higher priority pod")
    if deleting:
        p.deletion_timestamp("2026-01-01T00:01:00Z")
    return p.obj()


def _resizing(generation: int = 2, *, deferred: bool = True, node: str = "n1") -> core_pb2.Pod:
    """The preemptor ``a``: bound, priority 100, its resize to ``generation`` Deferred."""
    return _revision("a", node=node, priority=100, generation=generation, deferred=deferred)





def _victim_goes(rev: int, name: str, marked: str, **kw) -> list[check.Entry]:
    """The scheduler marks ``name`` (rev) and deletes it gracefully (rev + 1): it is going."""
    return [_pe(rev, "MODIFIED", _revision(name, marked=marked, **kw)),
            _pe(rev + 1, "MODIFIED", _revision(name, marked=marked, deleting=True, **kw))]


def _cluster() -> list[check.Entry]:
    """v0, v1, v2 and a on n1; a's resize to generation 2 (rev 10) is Deferred by the kubelet (11)."""
    return [
        _pe(1, "ADDED", _revision("v0")), _pe(2, "ADDED", _revision("v1")), _pe(3, "ADDED", _revision("v2")),
        _pe(4, "ADDED", _revision("a", priority=100)),
        _pe(10, "MODIFIED", _resizing(deferred=False)), _pe(11, "MODIFIED", _resizing()),
    ]


def _first_preemption() -> list[check.Entry]:
    """Request uid-a/2's first preemption: v0 marked (31), deleted gracefully (32), named (33)."""
    return _cluster() + _victim_goes(31, "v0", T1) + [_preempted(33, "v0")]


def _second_preemption() -> list[check.Entry]:
    """A later decision for the same request: v1 marked (40), deleted gracefully (41), named (42)."""
    return _victim_goes(40, "v1", T2) + [_preempted(42, "v1")]


def _violation(detail: str) -> check.Violation:
    return check.Violation(NAME, 42, "resize of default/a (request uid-a/2) preempted default/v1 at rev 40 "
                                     f"while default/v0, a victim of an earlier preemption for the same request "
                                     f"({detail}), was still going")


def test_kep5836_double_preemption_long_grace_period_is_a_violation():
    """v0 (a long grace period) is still terminating when the scheduler chooses v1 for the same
    request: two victim sets for one resize. All of kplane check's rules see exactly that."""
    entries = _first_preemption() + _second_preemption()
    assert check.check_entries(entries) == [_violation("marked at rev 31, named at rev 33")]


def test_kep5836_new_victim_is_reported_once_when_named_again():
    """v1's event is bumped by a third decision (v0 still going): still one report for v1."""
    entries = _first_preemption() + _second_preemption() + [_preempted(50, "v1", count=2)]
    assert check.check_entries(entries, [RULE()]) == [_violation("marked at rev 31, named at rev 33")]


def test_kep5836_earlier_victim_deleted_before_the_new_mark_is_valid():
    """v0 is gone (rev 35) before v1 is marked (40): the first preemption was over."""
    entries = (_first_preemption() + [_pe(35, "DELETED", _revision("v0", marked=T1, deleting=True))]
               + _second_preemption())
    assert check.check_entries(entries, [RULE()]) == []
    # Deleted only after v1's mark: it was still going.
    entries = (_first_preemption() + _second_preemption()
               + [_pe(45, "DELETED", _revision("v0", marked=T1, deleting=True))])
    assert check.check_entries(entries, [RULE()]) == [_violation("marked at rev 31, named at rev 33")]


def test_kep5836_earlier_victim_finished_before_the_new_mark_is_valid():
    """v0's containers exited (Succeeded, rev 36) before v1 is marked (40), its deletion landing
    later (45): a finished pod holds nothing on its node — the scheduler no longer lists it, the
    kubelet no longer counts it — so the first preemption was over (Option 4 waits for exactly that)."""
    finished = _revision("v0", marked=T1, deleting=True)
    finished.status.phase = "Succeeded"
    entries = (_first_preemption() + [_pe(36, "MODIFIED", finished)] + _second_preemption()
               + [_pe(45, "DELETED", finished)])
    assert check.check_entries(entries) == []
    # Finished only after v1's mark: it was still going.
    entries = _first_preemption() + _second_preemption() + [_pe(44, "MODIFIED", finished),
                                                            _pe(45, "DELETED", finished)]
    assert check.check_entries(entries, [RULE()]) == [_violation("marked at rev 31, named at rev 33")]


def test_kep5836_double_preemption_after_scheduler_restart_is_a_violation():
    """The scheduler marks v0 for uid-a/2 and is killed before writing any event; the restarted
    scheduler chooses v1 for the same request while v0 is terminating. v0 is an orphan: marked on
    a's node, of lower priority, while uid-a/2 was Deferred, and never named."""
    entries = _cluster() + _victim_goes(31, "v0", T1) + _second_preemption()
    assert check.check_entries(entries, [RULE()]) == [_violation("marked at rev 31, never named")]


@pytest.mark.parametrize("v0, mark_rev", [
    pytest.param({}, 5, id="marked-before-the-resize-was-deferred"),
    pytest.param({"node": "n2"}, 31, id="on-another-node"),
    pytest.param({"priority": 200}, 31, id="of-higher-priority"),
])
def test_kep5836_a_mark_the_resize_could_not_have_made_is_no_orphan(v0, mark_rev):
    """v0, never named, is marked (by another scheduler's preemption) and goes on terminating while
    a's resize preempts v1: it was no victim of uid-a/2 — marked before a's resize was Deferred
    (rev 11), on another node than a's, or of higher priority than a."""
    entries = [
        _pe(1, "ADDED", _revision("v0", **v0)),
        _pe(2, "ADDED", _revision("v1")), _pe(4, "ADDED", _revision("a", priority=100)),
        _pe(10, "MODIFIED", _resizing(deferred=False)), _pe(11, "MODIFIED", _resizing()),
    ] + _victim_goes(mark_rev, "v0", T1, **v0) + _second_preemption()
    assert check.check_entries(sorted(entries, key=lambda e: e.rev), [RULE()]) == []


def test_kep5836_a_new_resize_request_may_preempt_while_the_last_ones_victims_go():
    """a is resized again (generation 3, Deferred at rev 38): its preemption of v1 serves request
    uid-a/3, not uid-a/2 whose v0 is still going."""
    entries = _first_preemption() + [_pe(38, "MODIFIED", _resizing(3))] + _second_preemption()
    assert check.check_entries(entries, [RULE()]) == []
    # An orphan of uid-a/2 does not count against uid-a/3 either.
    entries = (_cluster() + _victim_goes(31, "v0", T1) + [_pe(38, "MODIFIED", _resizing(3))]
               + _second_preemption())
    assert check.check_entries(entries, [RULE()]) == []


def test_kep5836_another_preemptors_victims_do_not_count():
    """b (priority 100, Deferred too on n1) preempted v0; a's preemption of v1 is a's first."""
    b = _revision("b", priority=100, generation=2, deferred=True)
    entries = (_cluster() + [_pe(12, "ADDED", b)] + _victim_goes(31, "v0", T1) + [_preempted(33, "v0", "b")]
               + _second_preemption())
    assert check.check_entries(entries, [RULE()]) == []


def test_kep5836_one_preemption_naming_two_victims_is_valid():
    """One decision for uid-a/2 takes v0 and v1: both marked (31, 33) before both events (35, 36)."""
    entries = (_cluster() + _victim_goes(31, "v0", T1) + _victim_goes(33, "v1", T1)
               + [_preempted(35, "v0"), _preempted(36, "v1")])
    assert check.check_entries(entries, [RULE()]) == []


def test_kep5836_an_unnamed_victim_marked_after_the_new_one_is_not_earlier():
    """One decision for uid-a/2 marks v1 (31) then v0 (33); the scheduler names v1 (35) and dies
    before naming v0. v0 is never named, but it was marked after v1: not an earlier victim."""
    entries = (_cluster() + _victim_goes(31, "v1", T1) + _victim_goes(33, "v0", T1) + [_preempted(35, "v1")])
    assert check.check_entries(entries, [RULE()]) == []


def test_kep5836_unbound_preemptors_are_not_this_rules():
    """p, pending and nominated to n1, preempts v0 then v1 while v0 is going: the scheduler's
    ordinary preemption, no-preemption-while-victims-going's to report, not this rule's."""
    entries = [
        _pe(1, "ADDED", _revision("v0")), _pe(2, "ADDED", _revision("v1")),
        _pe(4, "ADDED", _revision("p", node="", priority=100, generation=2, deferred=True, nominated="n1")),
    ] + _victim_goes(31, "v0", T1) + [_preempted(33, "v0", "p")] + _victim_goes(40, "v1", T2) + [
        _preempted(42, "v1", "p")]
    assert [v.rule for v in check.check_entries(entries)] == ["no-preemption-while-victims-going"]
    assert check.check_entries(entries, [RULE()]) == []


def test_kep5836_the_same_victim_named_by_two_decisions_is_not_a_new_victim():
    """A second decision for uid-a/2 picks v0 again (its mark rewritten at 40, the event's count
    bumped at 42): v0 is the only victim, the scheduler skips deleting it again."""
    entries = _first_preemption() + [_pe(40, "MODIFIED", _revision("v0", marked=T3, deleting=True)),
                                     _preempted(42, "v0", count=2)]
    assert check.check_entries(entries, [RULE()]) == []


def test_the_rule_is_one_of_kplane_checks_rules():
    assert NAME in [r.name for r in check.rules()]
    assert check.Rule().finish(check.World()) == []
