"""``kplane check``'s no-preemption-while-victims-going rule on synthetic histories.

kube-scheduler DefaultPreemption refuses a preemptor whose nominated node still has
lower-priority pods terminating because of a preemption, and KEP-4832's async preemption keeps a
preemptor's victims in flight: a pod does not preempt again while a victim of its earlier
preemption is going (from its DisruptionTarget mark or deletionTimestamp until it is deleted).
The scheduler writes a preemption's Preempted events once every victim was asked to go, so the
histories below put all marks of one preemption before its events.
"""

from __future__ import annotations

from cli import check
from machinery.api import core_pb2
from tests.harness.builders import MakePod
from tests.harness.history import pod_entry as _pe
from tests.harness.history import preempted_event as _preempted

RULE = check.NoPreemptionWhileVictimsGoing


def _revision(name: str, *, node: str = "", nominated: str = "", marked: str = "",
              deleting: bool = False) -> core_pb2.Pod:
    """Pod ``name`` (uid ``uid-<name>``) as one revision of the history has it: bound to ``node``,
    nominated to ``nominated``, marked DisruptionTarget at ``marked``, being deleted."""
    p = MakePod().name(name).uid(f"uid-{name}").node(node).nominated(nominated)
    if marked:  # the DisruptionTarget condition, written at ``marked`` (its lastTransitionTime)
        p.condition("DisruptionTarget", "True", "PreemptionByScheduler", last_transition_time=marked,
                    message="default-scheduler: preempting to accommodate a higher priority pod")
    if deleting:
        p.deletion_timestamp("2026-01-01T00:01:00Z")
    return p.obj()





T1, T2 = "2026-01-01T00:00:01Z", "2026-01-01T00:00:09Z"


def _first_preemption() -> list[check.Entry]:
    """Pod p preempts v1 and v2 (grace period > 0) on n1 and is nominated there: both marked and
    terminating (revs 11-14), the nomination written (15), then the two Preempted events (16, 17)."""
    return [
        _pe(1, "ADDED", _revision("v1", node="n1")), _pe(2, "ADDED", _revision("v2", node="n1")),
        _pe(3, "ADDED", _revision("v3", node="n2")), _pe(10, "ADDED", _revision("p")),
        _pe(11, "MODIFIED", _revision("v1", node="n1", marked=T1)),
        _pe(12, "MODIFIED", _revision("v1", node="n1", marked=T1, deleting=True)),
        _pe(13, "MODIFIED", _revision("v2", node="n1", marked=T1)),
        _pe(14, "MODIFIED", _revision("v2", node="n1", marked=T1, deleting=True)),
        _pe(15, "MODIFIED", _revision("p", nominated="n1")),
        _preempted(16, "v1", "p"), _preempted(17, "v2", "p"),
    ]


def test_one_preemption_whose_victims_go_then_another_is_valid():
    """Once v1 and v2 are deleted, a new preemption by the same pod (v3) breaks nothing."""
    entries = _first_preemption() + [
        _pe(20, "DELETED", _revision("v1", node="n1", marked=T1, deleting=True)),
        _pe(21, "DELETED", _revision("v2", node="n1", marked=T1, deleting=True)),
        _pe(22, "MODIFIED", _revision("v3", node="n2", marked=T2)),
        _pe(23, "MODIFIED", _revision("v3", node="n2", marked=T2, deleting=True)),
        _preempted(24, "v3", "p"),
    ]
    assert check.check_entries(entries, [RULE()]) == []


def test_victims_of_one_preemption_with_grace_period_zero_are_one_preemption():
    """kube-scheduler's async order: all victims but the last, then the last; with grace period 0
    each is deleted at once. Every mark comes before the events: one preemption."""
    entries = [
        _pe(1, "ADDED", _revision("v1", node="n1")), _pe(2, "ADDED", _revision("v2", node="n1")),
        _pe(3, "ADDED", _revision("v3", node="n1")), _pe(10, "ADDED", _revision("p", nominated="n1")),
        _pe(11, "MODIFIED", _revision("v1", node="n1", marked=T1)),
        _pe(12, "MODIFIED", _revision("v2", node="n1", marked=T1)),
        _pe(13, "DELETED", _revision("v1", node="n1", marked=T1)),
        _pe(14, "DELETED", _revision("v2", node="n1", marked=T1)),
        _pe(15, "MODIFIED", _revision("v3", node="n1", marked=T1)),
        _pe(16, "DELETED", _revision("v3", node="n1", marked=T1)),
        _preempted(17, "v1", "p"), _preempted(18, "v2", "p"), _preempted(19, "v3", "p"),
    ]
    assert check.check_entries(entries, [RULE()]) == []


def test_a_new_victim_while_the_earlier_ones_are_still_terminating_is_a_violation():
    """p preempts v3 on n2 while v1 and v2, its victims on n1, are still terminating."""
    entries = _first_preemption() + [
        _pe(20, "MODIFIED", _revision("v3", node="n2", marked=T2)),
        _pe(21, "MODIFIED", _revision("v3", node="n2", marked=T2, deleting=True)),
        _preempted(22, "v3", "p"),
    ]
    [v] = check.check_entries(entries, [RULE()])
    assert v.rule == "no-preemption-while-victims-going" and v.rev == 22
    assert v.message == ("pod default/p preempted default/v3 at rev 20 while default/v1, a victim of its "
                         "preemption named at rev 16, was still going")


def test_the_same_victims_chosen_again_while_terminating_is_a_violation():
    """The scheduler's informer lags: v1 still looks running, p preempts it again (its mark
    rewritten, the event's count bumped)."""
    entries = _first_preemption() + [
        _pe(20, "MODIFIED", _revision("v1", node="n1", marked=T2, deleting=True)),
        _preempted(21, "v1", "p", count=2),
    ]
    [v] = check.check_entries(entries, [RULE()])
    assert v.rev == 21 and "preempted default/v1 at rev 20 while default/v1" in v.message
    # Even when the mark was not rewritten (the patch changed nothing), a second naming is seen.
    entries = _first_preemption() + [_preempted(21, "v2", "p", count=2)]
    [v] = check.check_entries(entries, [RULE()])
    assert v.rev == 21 and "preempted default/v2 at rev 21" in v.message


def test_a_pod_whose_nomination_was_cleared_may_preempt_again():
    """The preemption design: a higher-priority preemptor cleared p's nomination; kube-scheduler
    lets p look again."""
    entries = _first_preemption() + [
        _pe(19, "MODIFIED", _revision("p")),
        _pe(20, "MODIFIED", _revision("v3", node="n2", marked=T2)),
        _pe(21, "MODIFIED", _revision("p", nominated="n2")),
        _preempted(22, "v3", "p"),
    ]
    assert check.check_entries(entries, [RULE()]) == []


def test_a_pod_whose_nominated_node_was_cordoned_may_preempt_again():
    """The nominated node became UnschedulableAndUnresolvable for the pod: it may preempt elsewhere."""
    n1 = core_pb2.Node()
    n1.metadata.name = "n1"
    cordoned = core_pb2.Node()
    cordoned.CopyFrom(n1)
    cordoned.spec.unschedulable = True
    entries = [check.Entry(0, "ADDED", "Node", "", "n1", n1)] + _first_preemption() + [
        check.Entry(19, "MODIFIED", "Node", "", "n1", cordoned),
        _pe(20, "MODIFIED", _revision("v3", node="n2", marked=T2)),
        _preempted(22, "v3", "p"),
    ]
    assert check.check_entries(entries, [RULE()]) == []


def test_the_rule_is_one_of_kplane_checks_rules():
    assert "no-preemption-while-victims-going" in [r.name for r in check.rules()]
