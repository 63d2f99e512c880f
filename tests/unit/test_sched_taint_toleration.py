"""TaintToleration: the examples of Kubernetes docs: Taints and Tolerations, PreferNoSchedule
scoring with the reversed normalization, and the QueueingHints."""

from __future__ import annotations

import yaml

from machinery import jsonconv
from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import (
    NODE,
    UNSCHEDULED_POD,
    ActionType,
    ClusterEvent,
    Code,
    CycleState,
    Diagnosis,
    QueueingHint,
    fit_error_message,
)
from scheduler.plugins import taint_toleration as tt
from tests.harness.builders import MakeNode, MakePod
from tests.harness.fixtures import fixture


def pod_tolerating(tolerations_yaml: str = "", name: str = "p", uid: str = "uid-p") -> core_pb2.Pod:
    """A pod with the tolerations of a ``tolerations:`` YAML block as Kubernetes docs write them."""
    p = MakePod().name(name).uid(uid).obj()
    if tolerations_yaml:
        for t in yaml.safe_load(tolerations_yaml)["tolerations"]:
            p.spec.tolerations.append(jsonconv.from_dict(core_pb2.Toleration, t))
    return p


def run_filter(pod: core_pb2.Pod, n: core_pb2.Node):
    return tt.new({}, None).filter(CycleState(), pod, NodeInfo(n))


def scores(pod: core_pb2.Pod, nodes: list[core_pb2.Node]) -> list[int]:
    pl, state = tt.new({}, None), CycleState()
    infos = [NodeInfo(n) for n in nodes]
    assert pl.pre_score(state, pod, infos) is None
    raw = []
    for ni in infos:
        s, st = pl.score(state, pod, ni)
        assert st is None
        raw.append(s)
    assert pl.normalize_score(state, pod, [ni.name for ni in infos], raw) is None
    return raw


EQUAL = """
tolerations:
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoSchedule"
"""

EXISTS = """
tolerations:
- key: "key1"
  operator: "Exists"
  effect: "NoSchedule"
"""

TWO_TOLERATIONS = """
tolerations:
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoSchedule"
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoExecute"
"""


def test_004_kubectl_taint_node1_key1_value1_noschedule_repels_a_pod_without_toleration():
    st = run_filter(pod_tolerating(), MakeNode().name("node1").taint("key1", "value1", "NoSchedule").obj())
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) had untolerated taint {key1: value1}"]


def test_004_both_tolerations_equal_and_exists_match_the_taint():
    n = MakeNode().name("node1").taint("key1", "value1", "NoSchedule").obj()
    assert run_filter(pod_tolerating(EQUAL), n) is None
    assert run_filter(pod_tolerating(EXISTS), n) is None


def test_004_three_taints_two_tolerations_the_third_taint_keeps_the_pod_off():
    n = (MakeNode().name("node1").taint("key1", "value1", "NoSchedule").taint("key1", "value1", "NoExecute")
         .taint("key2", "value2", "NoSchedule").obj())
    st = run_filter(pod_tolerating(TWO_TOLERATIONS), n)
    assert st.reasons == ["node(s) had untolerated taint {key2: value2}"]


def test_004_nginx_example_key_exists_tolerates_any_value():
    nginx = jsonconv.from_dict(core_pb2.Pod, yaml.safe_load(fixture("pod-with-toleration.yaml")))
    assert run_filter(nginx, MakeNode().name("n").taint("example-key", "anything", "NoSchedule").obj()) is None
    no_execute = MakeNode().name("n").taint("example-key", "anything", "NoExecute").obj()
    assert run_filter(nginx, no_execute).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_004_tolerationseconds_noexecute_toleration_tolerates_for_scheduling():
    p = pod_tolerating("""
tolerations:
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoExecute"
  tolerationSeconds: 3600
""")
    assert run_filter(p, MakeNode().name("node1").taint("key1", "value1", "NoExecute").obj()) is None


def test_prefer_no_schedule_never_filters():
    assert run_filter(pod_tolerating(), MakeNode().name("n").taint("special", "true", "PreferNoSchedule").obj()) is None


def test_the_message_in_kube_schedulers_fit_error():
    n = (MakeNode().name("node1").taint("key1", "value1", "NoSchedule").taint("key1", "value1", "NoExecute")
         .taint("key2", "value2", "NoSchedule").obj())
    d = Diagnosis(node_to_status={"node1": run_filter(pod_tolerating(TWO_TOLERATIONS), n)})
    assert fit_error_message(1, d) == "0/1 nodes are available: 1 node(s) had untolerated taint {key2: value2}."


def test_score_counts_intolerable_prefer_no_schedule_taints_reversed():
    nodes = [MakeNode().name("clean").obj(),
             MakeNode().name("one").taint("special", "true", "PreferNoSchedule").obj(),
             MakeNode().name("two").taint("special", "true", "PreferNoSchedule").taint("other", "x", "PreferNoSchedule")
             .taint("hard", "x", "NoSchedule").obj()]
    # raw counts 0, 1, 2 -> reversed 100, 50, 0 (a NoSchedule taint does not count in Score).
    assert scores(pod_tolerating(), nodes) == [100, 50, 0]


def test_a_toleration_without_effect_tolerates_prefer_no_schedule_one_with_noschedule_does_not():
    nodes = [MakeNode().name("clean").obj(),
             MakeNode().name("special").taint("special", "true", "PreferNoSchedule").obj()]
    no_effect = pod_tolerating("""
tolerations:
- key: "special"
  operator: "Exists"
""")
    assert scores(no_effect, nodes) == [100, 100]  # all zero raw -> all 100 reversed
    noschedule_only = pod_tolerating("""
tolerations:
- key: "special"
  operator: "Exists"
  effect: "NoSchedule"
""")
    assert scores(noschedule_only, nodes) == [100, 0]


def test_registers_node_add_and_taint_updates_and_the_pods_toleration_updates():
    events = [e.event for e in tt.new({}, None).events_to_register()]
    assert events == [ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                      ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE_POD_TOLERATION)]


def test_node_hint_queues_a_tolerated_node_added_or_a_taint_removed():
    pl = tt.new({}, None)
    p = pod_tolerating(EQUAL)
    assert pl.is_schedulable_after_node_change(p, None, MakeNode().name("n")
                                                        .taint("key1", "value1", "NoSchedule")
                                                        .obj()) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(p, MakeNode().name("n").taint("key2", "value2", "NoSchedule").obj(),
                                               MakeNode().name("n").obj()) == QueueingHint.QUEUE


def test_node_hint_skips_an_untolerated_node_or_one_tolerated_before():
    pl = tt.new({}, None)
    p = pod_tolerating(EQUAL)
    assert pl.is_schedulable_after_node_change(p, None, MakeNode().name("n")
                                                        .taint("key2", "value2", "NoSchedule")
                                                        .obj()) == QueueingHint.QUEUE_SKIP
    # key2 removed but key3 added: still untolerated.
    assert pl.is_schedulable_after_node_change(p,
                                               MakeNode().name("n").taint("key2", "value2", "NoSchedule").obj(),
                                               MakeNode().name("n")
                                               .taint("key3", "v", "NoExecute").obj()) == QueueingHint.QUEUE_SKIP
    # Tolerated before and after: this node did not reject the pod.
    assert pl.is_schedulable_after_node_change(p,
                                               MakeNode().name("n").obj(),
                                               MakeNode().name("n").taint("soft", "x", "PreferNoSchedule").obj()) == \
        QueueingHint.QUEUE_SKIP


def test_pod_hint_queues_the_pod_itself_and_skips_another():
    pl = tt.new({}, None)
    p, updated = pod_tolerating(), pod_tolerating(EQUAL)
    assert pl.is_schedulable_after_pod_toleration_change(p, p, updated) == QueueingHint.QUEUE
    other = pod_tolerating(EQUAL, name="q", uid="uid-q")
    assert pl.is_schedulable_after_pod_toleration_change(p, other, other) == QueueingHint.QUEUE_SKIP
