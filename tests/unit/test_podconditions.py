"""machinery/podconditions.py: Kubernetes' GetPodCondition / UpdatePodCondition semantics."""

from __future__ import annotations

from machinery import podconditions as pc
from machinery.api import core_pb2
from tests.harness.builders import MakePod

EARLIER = "2026-01-01T00:00:00Z"


def _pod_with(type_: str, status: str, reason: str = "") -> core_pb2.Pod:
    pod = MakePod().name("p").obj()
    pod.status.conditions.add(type=type_, status=status, reason=reason, last_transition_time=EARLIER)
    return pod


def test_a_new_condition_is_added_and_transitions_now():
    pod = MakePod().name("p").obj()
    assert pc.set_condition(pod, pc.POD_SCHEDULED, "True")
    c = pc.get_condition(pod.status, pc.POD_SCHEDULED)
    assert c is not None and c.status == "True" and c.last_transition_time and c.last_transition_time != EARLIER


def test_the_same_status_keeps_its_transition_time_and_a_new_one_moves_it():
    pod = _pod_with(pc.DISRUPTION_TARGET, "True", pc.PREEMPTION_BY_SCHEDULER)
    assert pc.update_condition(pod.status, pc.disruption_target(pc.DELETION_BY_POD_GC, "gone"))
    (c,) = pod.status.conditions
    assert (c.reason, c.message, c.last_transition_time) == (pc.DELETION_BY_POD_GC, "gone", EARLIER)
    assert not pc.update_condition(pod.status, pc.disruption_target(pc.DELETION_BY_POD_GC, "gone"))
    assert pc.set_condition(pod, pc.DISRUPTION_TARGET, "False")
    (c,) = pod.status.conditions
    assert c.status == "False" and c.last_transition_time != EARLIER and not c.reason


def test_disruption_target_by_reason():
    pod = _pod_with(pc.DISRUPTION_TARGET, "True", pc.DELETION_BY_TAINT_MANAGER)
    assert pc.is_disruption_target(pod)
    assert pc.is_disruption_target(pod, pc.DELETION_BY_TAINT_MANAGER)
    assert not pc.is_disruption_target(pod, pc.PREEMPTION_BY_SCHEDULER)
    assert not pc.is_disruption_target(_pod_with(pc.DISRUPTION_TARGET, "False"))
    assert not pc.is_disruption_target(MakePod().name("q").obj())
