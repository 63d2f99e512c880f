"""NodeUnschedulable: cordoned nodes, the node.kubernetes.io/unschedulable toleration (Kubernetes
docs: Taints and Tolerations, "The DaemonSet controller automatically adds ...
node.kubernetes.io/unschedulable"), and hints."""

from __future__ import annotations

from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import (
    NODE,
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    QueueingHint,
    node_scheduling_property_changes,
)
from scheduler.plugins import node_unschedulable as nu
from tests.harness.builders import MakeNode, MakePod

DAEMONSET_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def test_a_cordoned_node_rejects_a_pod_unresolvably():
    cordoned = MakeNode().name("n1").unschedulable().obj()
    st = nu.new({}, None).filter(CycleState(), MakePod().name("p").uid("uid-p").obj(), NodeInfo(cordoned))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) were unschedulable"]


def test_a_schedulable_node_passes():
    p = MakePod().name("p").uid("uid-p").obj()
    assert nu.new({}, None).filter(CycleState(), p, NodeInfo(MakeNode().name("n1").obj())) is None


def test_004_daemonset_toleration_of_the_unschedulable_taint_passes_a_cordoned_node():
    p = MakePod().name("ds").uid("uid-ds").toleration(**DAEMONSET_TOLERATION).obj()
    assert nu.new({}, None).filter(CycleState(), p, NodeInfo(MakeNode().name("n1").unschedulable().obj())) is None


def test_a_toleration_of_everything_passes_and_one_of_another_effect_does_not():
    everything = MakePod().name("all").uid("uid-all").toleration(**{"operator": "Exists"}).obj()
    assert nu.new({}, None).filter(CycleState(), everything, NodeInfo(MakeNode().name("n1")
                                                                      .unschedulable().obj())) is None
    no_execute = (MakePod().name("ne").uid("uid-ne")
                  .toleration(**{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                      "effect": "NoExecute"}).obj())
    st = nu.new({}, None).filter(CycleState(), no_execute, NodeInfo(MakeNode().name("n1").unschedulable().obj()))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_registers_node_add_and_taint_updates_and_the_pods_toleration_updates():
    events = [e.event for e in nu.new({}, None).events_to_register()]
    assert events == [ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                      ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION)]
    # Uncordoning is reported as UpdateNodeTaint, which the registration covers.
    derived = node_scheduling_property_changes(MakeNode().name("n1").obj(), MakeNode().name("n1").unschedulable().obj())
    assert any(events[0].matches(e) for e in derived)


def test_node_hint_queues_a_schedulable_node_added_or_a_node_uncordoned():
    pl = nu.new({}, None)
    assert pl.is_schedulable_after_node_change(MakePod().name("p").uid("uid-p").obj(),
                                               None,
                                               MakeNode().name("n1").obj()) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(MakePod().name("p").uid("uid-p").obj(),
                                               MakeNode().name("n1").unschedulable().obj(),
                                               MakeNode().name("n1").obj()) == QueueingHint.QUEUE


def test_node_hint_skips_a_cordoned_node_or_a_node_that_was_already_schedulable():
    pl = nu.new({}, None)
    assert pl.is_schedulable_after_node_change(MakePod().name("p").uid("uid-p").obj(),
                                               None,
                                               MakeNode().name("n1").unschedulable().obj()) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(MakePod().name("p").uid("uid-p").obj(),
                                               MakeNode().name("n1").obj(),
                                               MakeNode().name("n1").unschedulable().obj()) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(MakePod().name("p").uid("uid-p").obj(),
                                               MakeNode().name("n1").obj(),
                                               MakeNode().name("n1")
                                               .labels({"a": "b"}).obj()) == QueueingHint.QUEUE_SKIP


def test_pod_hint_queues_the_pod_given_the_unschedulable_toleration():
    pl = nu.new({}, None)
    before = MakePod().name("p").uid("uid-p").obj()
    after = MakePod().name("p").uid("uid-p").toleration(**DAEMONSET_TOLERATION).obj()
    assert pl.is_schedulable_after_pod_toleration_change(before, before, after) == QueueingHint.QUEUE


def test_pod_hint_skips_another_pod_or_an_unrelated_toleration():
    pl = nu.new({}, None)
    before = MakePod().name("p").uid("uid-p").obj()
    other = MakePod().name("q").uid("uid-q").toleration(**DAEMONSET_TOLERATION).obj()
    assert pl.is_schedulable_after_pod_toleration_change(before, other, other) == QueueingHint.QUEUE_SKIP
    unrelated = (MakePod().name("p").uid("uid-p")
                 .toleration(**{"key": "example-key", "operator": "Exists", "effect": "NoSchedule"}).obj())
    assert pl.is_schedulable_after_pod_toleration_change(before, before, unrelated) == QueueingHint.QUEUE_SKIP
