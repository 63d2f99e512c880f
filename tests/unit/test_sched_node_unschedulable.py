"""NodeUnschedulable: cordoned nodes, the node.kubernetes.io/unschedulable toleration (Kubernetes
docs: Taints and Tolerations, "The DaemonSet controller automatically adds ...
node.kubernetes.io/unschedulable"), and hints."""

from __future__ import annotations

from machinery.api import core_pb2
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
from tests.helpers import make_pod


def node(name: str = "n1", unschedulable: bool = False, labels: dict | None = None) -> core_pb2.Node:
    n = core_pb2.Node(api_version="v1", kind="Node")
    n.metadata.name = name
    n.metadata.labels.update(labels or {})
    n.spec.unschedulable = unschedulable
    return n


def pod(name: str = "p", uid: str = "uid-p", *tolerations: dict) -> core_pb2.Pod:
    p = make_pod(name)
    p.metadata.uid = uid
    for t in tolerations:
        p.spec.tolerations.add(**t)
    return p


DAEMONSET_TOLERATION = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def test_a_cordoned_node_rejects_a_pod_unresolvably():
    st = nu.new({}, None).filter(CycleState(), pod(), NodeInfo(node(unschedulable=True)))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) were unschedulable"]


def test_a_schedulable_node_passes():
    assert nu.new({}, None).filter(CycleState(), pod(), NodeInfo(node())) is None


def test_004_daemonset_toleration_of_the_unschedulable_taint_passes_a_cordoned_node():
    p = pod("ds", "uid-ds", DAEMONSET_TOLERATION)
    assert nu.new({}, None).filter(CycleState(), p, NodeInfo(node(unschedulable=True))) is None


def test_a_toleration_of_everything_passes_and_one_of_another_effect_does_not():
    everything = pod("all", "uid-all", {"operator": "Exists"})
    assert nu.new({}, None).filter(CycleState(), everything, NodeInfo(node(unschedulable=True))) is None
    no_execute = pod("ne", "uid-ne", {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                      "effect": "NoExecute"})
    st = nu.new({}, None).filter(CycleState(), no_execute, NodeInfo(node(unschedulable=True)))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_registers_node_add_and_taint_updates_and_the_pods_toleration_updates():
    events = [e.event for e in nu.new({}, None).events_to_register()]
    assert events == [ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                      ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION)]
    # Uncordoning is reported as UpdateNodeTaint, which the registration covers.
    derived = node_scheduling_property_changes(node(), node(unschedulable=True))
    assert any(events[0].matches(e) for e in derived)


def test_node_hint_queues_a_schedulable_node_added_or_a_node_uncordoned():
    pl = nu.new({}, None)
    assert pl.is_schedulable_after_node_change(pod(), None, node()) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(pod(), node(unschedulable=True), node()) == QueueingHint.QUEUE


def test_node_hint_skips_a_cordoned_node_or_a_node_that_was_already_schedulable():
    pl = nu.new({}, None)
    assert pl.is_schedulable_after_node_change(pod(), None, node(unschedulable=True)) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(pod(), node(), node(unschedulable=True)) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(pod(), node(), node(labels={"a": "b"})) == QueueingHint.QUEUE_SKIP


def test_pod_hint_queues_the_pod_given_the_unschedulable_toleration():
    pl = nu.new({}, None)
    before = pod()
    after = pod("p", "uid-p", DAEMONSET_TOLERATION)
    assert pl.is_schedulable_after_pod_toleration_change(before, before, after) == QueueingHint.QUEUE


def test_pod_hint_skips_another_pod_or_an_unrelated_toleration():
    pl = nu.new({}, None)
    before = pod()
    other = pod("q", "uid-q", DAEMONSET_TOLERATION)
    assert pl.is_schedulable_after_pod_toleration_change(before, other, other) == QueueingHint.QUEUE_SKIP
    unrelated = pod("p", "uid-p", {"key": "example-key", "operator": "Exists", "effect": "NoSchedule"})
    assert pl.is_schedulable_after_pod_toleration_change(before, before, unrelated) == QueueingHint.QUEUE_SKIP
