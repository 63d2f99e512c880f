"""NodeName: the nginx pod pinned to kube-01 (Kubernetes docs: Assigning Pods to Nodes, "nodeName"),
the message and the hint."""

from __future__ import annotations

import yaml

from machinery import jsonconv
from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import NODE, ActionType, ClusterEvent, Code, CycleState, QueueingHint
from scheduler.plugins import node_name
from tests.harness.builders import MakeNode, MakePod
from tests.harness.fixtures import fixture

# Kubernetes docs: Assigning Pods to Nodes, "nodeName": "The above Pod will only run on the node
# kube-01."
NGINX = fixture("pod-with-node-name.yaml")


def nginx() -> core_pb2.Pod:
    return jsonconv.from_dict(core_pb2.Pod, yaml.safe_load(NGINX))


def test_004_nginx_pod_runs_only_on_kube_01():
    pl = node_name.new({}, None)
    assert pl.filter(CycleState(), nginx(), NodeInfo(MakeNode().name("kube-01").obj())) is None
    st = pl.filter(CycleState(), nginx(), NodeInfo(MakeNode().name("kube-02").obj()))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) didn't match the requested node name"]


def test_a_pod_without_node_name_fits_every_node():
    pl = node_name.new({}, None)
    assert pl.filter(CycleState(), MakePod().name("p").obj(), NodeInfo(MakeNode().name("kube-02").obj())) is None
    assert node_name.fits(MakePod().name("p").obj(), NodeInfo(MakeNode().name("any").obj()))


def test_registers_node_add_only():
    assert [e.event for e in node_name.new({}, None).events_to_register()] == [ClusterEvent(NODE, ActionType.ADD)]


def test_hint_queues_when_the_named_node_is_added():
    pl = node_name.new({}, None)
    assert pl.is_schedulable_after_node_add(nginx(), None, MakeNode().name("kube-01").obj()) == QueueingHint.QUEUE


def test_hint_skips_a_node_with_another_name():
    pl = node_name.new({}, None)
    assert pl.is_schedulable_after_node_add(nginx(), None, MakeNode().name("kube-02").obj()) == QueueingHint.QUEUE_SKIP
