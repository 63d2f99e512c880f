"""SchedulingGates: Kubernetes docs: Pod Scheduling Readiness, its test-pod example, and the
hint."""

from __future__ import annotations

import yaml

from machinery import jsonconv
from machinery.api import core_pb2
from scheduler.framework.types import (
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    Code,
    QueueingHint,
    pod_scheduling_property_changes,
)
from scheduler.plugins import scheduling_gates
from tests.harness.builders import MakePod
from tests.harness.fixtures import fixture

# Kubernetes docs: Pod Scheduling Readiness, "Usage example": created with two gates ...
GATED = fixture("test-pod-gated.yaml")

# ... and reapplied without them.
UNGATED = fixture("test-pod-ungated.yaml")


def pod_from_yaml(text: str) -> core_pb2.Pod:
    return jsonconv.from_dict(core_pb2.Pod, yaml.safe_load(text))


def test_004_test_pod_with_gates_is_kept_out_with_kube_schedulers_message():
    st = scheduling_gates.new({}, None).pre_enqueue(pod_from_yaml(GATED))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["waiting for scheduling gates: [example.com/foo example.com/bar]"]


def test_004_test_pod_reapplied_without_gates_is_enqueued():
    assert scheduling_gates.new({}, None).pre_enqueue(pod_from_yaml(UNGATED)) is None
    assert scheduling_gates.new({}, None).pre_enqueue(MakePod().name("plain").obj()) is None


def test_one_gate_removed_still_waits_for_the_other():
    one_left = pod_from_yaml(GATED)
    del one_left.spec.scheduling_gates[0]
    st = scheduling_gates.new({}, None).pre_enqueue(one_left)
    assert st.reasons == ["waiting for scheduling gates: [example.com/bar]"]


def test_registers_the_gates_eliminated_update_of_unscheduled_pods():
    events = scheduling_gates.new({}, None).events_to_register()
    assert [e.event for e in events] == [
        ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)]
    # The event the queue derives from the docs' reapply (Pod Scheduling Readiness) is the one
    # registered.
    derived = pod_scheduling_property_changes(pod_from_yaml(UNGATED), pod_from_yaml(GATED), lambda p: {})
    assert any(events[0].event.matches(e) for e in derived)


def test_hint_queues_the_pod_whose_gates_are_all_gone():
    pl = scheduling_gates.new({}, None)
    pod, old = pod_from_yaml(GATED), pod_from_yaml(GATED)
    assert pl.is_schedulable_after_pod_change(pod, old, pod_from_yaml(UNGATED)) == QueueingHint.QUEUE


def test_hint_skips_while_a_gate_remains_or_for_another_pod():
    pl = scheduling_gates.new({}, None)
    one_left = pod_from_yaml(GATED)
    del one_left.spec.scheduling_gates[0]
    assert pl.is_schedulable_after_pod_change(pod_from_yaml(GATED), pod_from_yaml(GATED),
                                              one_left) == QueueingHint.QUEUE_SKIP
    other = pod_from_yaml(UNGATED)
    other.metadata.uid = "uid-other"
    assert pl.is_schedulable_after_pod_change(pod_from_yaml(GATED), pod_from_yaml(GATED),
                                              other) == QueueingHint.QUEUE_SKIP
