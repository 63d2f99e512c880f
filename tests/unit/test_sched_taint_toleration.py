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
from tests.helpers import make_pod


def node(name: str, *taints: str) -> core_pb2.Node:
    """Taints as ``kubectl taint`` writes them: ``key1=value1:NoSchedule``."""
    n = core_pb2.Node(api_version="v1", kind="Node")
    n.metadata.name = name
    for t in taints:
        kv, effect = t.rsplit(":", 1)
        key, _, value = kv.partition("=")
        n.spec.taints.add(key=key, value=value, effect=effect)
    return n


def pod_with(tolerations_yaml: str = "", name: str = "p", uid: str = "uid-p") -> core_pb2.Pod:
    p = make_pod(name)
    p.metadata.uid = uid
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
    st = run_filter(pod_with(), node("node1", "key1=value1:NoSchedule"))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) had untolerated taint {key1: value1}"]


def test_004_both_tolerations_equal_and_exists_match_the_taint():
    n = node("node1", "key1=value1:NoSchedule")
    assert run_filter(pod_with(EQUAL), n) is None
    assert run_filter(pod_with(EXISTS), n) is None


def test_004_three_taints_two_tolerations_the_third_taint_keeps_the_pod_off():
    n = node("node1", "key1=value1:NoSchedule", "key1=value1:NoExecute", "key2=value2:NoSchedule")
    st = run_filter(pod_with(TWO_TOLERATIONS), n)
    assert st.reasons == ["node(s) had untolerated taint {key2: value2}"]


def test_004_nginx_example_key_exists_tolerates_any_value():
    nginx = jsonconv.from_dict(core_pb2.Pod, yaml.safe_load("""
apiVersion: v1
kind: Pod
metadata:
  name: nginx
  labels:
    env: test
spec:
  containers:
  - name: nginx
    image: nginx
    imagePullPolicy: IfNotPresent
  tolerations:
  - key: "example-key"
    operator: "Exists"
    effect: "NoSchedule"
"""))
    assert run_filter(nginx, node("n", "example-key=anything:NoSchedule")) is None
    assert run_filter(nginx, node("n", "example-key=anything:NoExecute")).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_004_tolerationseconds_noexecute_toleration_tolerates_for_scheduling():
    p = pod_with("""
tolerations:
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoExecute"
  tolerationSeconds: 3600
""")
    assert run_filter(p, node("node1", "key1=value1:NoExecute")) is None


def test_prefer_no_schedule_never_filters():
    assert run_filter(pod_with(), node("n", "special=true:PreferNoSchedule")) is None


def test_the_message_in_kube_schedulers_fit_error():
    n = node("node1", "key1=value1:NoSchedule", "key1=value1:NoExecute", "key2=value2:NoSchedule")
    d = Diagnosis(node_to_status={"node1": run_filter(pod_with(TWO_TOLERATIONS), n)})
    assert fit_error_message(1, d) == "0/1 nodes are available: 1 node(s) had untolerated taint {key2: value2}."


def test_score_counts_intolerable_prefer_no_schedule_taints_reversed():
    nodes = [node("clean"), node("one", "special=true:PreferNoSchedule"),
             node("two", "special=true:PreferNoSchedule", "other=x:PreferNoSchedule", "hard=x:NoSchedule")]
    # raw counts 0, 1, 2 -> reversed 100, 50, 0 (a NoSchedule taint does not count in Score).
    assert scores(pod_with(), nodes) == [100, 50, 0]


def test_a_toleration_without_effect_tolerates_prefer_no_schedule_one_with_noschedule_does_not():
    nodes = [node("clean"), node("special", "special=true:PreferNoSchedule")]
    no_effect = pod_with("""
tolerations:
- key: "special"
  operator: "Exists"
""")
    assert scores(no_effect, nodes) == [100, 100]  # all zero raw -> all 100 reversed
    noschedule_only = pod_with("""
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
    p = pod_with(EQUAL)
    assert pl.is_schedulable_after_node_change(p, None, node("n", "key1=value1:NoSchedule")) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(p, node("n", "key2=value2:NoSchedule"),
                                               node("n")) == QueueingHint.QUEUE


def test_node_hint_skips_an_untolerated_node_or_one_tolerated_before():
    pl = tt.new({}, None)
    p = pod_with(EQUAL)
    assert pl.is_schedulable_after_node_change(p, None, node("n", "key2=value2:NoSchedule")) == QueueingHint.QUEUE_SKIP
    # key2 removed but key3 added: still untolerated.
    assert pl.is_schedulable_after_node_change(p, node("n", "key2=value2:NoSchedule"),
                                               node("n", "key3=v:NoExecute")) == QueueingHint.QUEUE_SKIP
    # Tolerated before and after: this node did not reject the pod.
    assert pl.is_schedulable_after_node_change(p, node("n"), node("n", "soft=x:PreferNoSchedule")) == \
        QueueingHint.QUEUE_SKIP


def test_pod_hint_queues_the_pod_itself_and_skips_another():
    pl = tt.new({}, None)
    p, updated = pod_with(), pod_with(EQUAL)
    assert pl.is_schedulable_after_pod_toleration_change(p, p, updated) == QueueingHint.QUEUE
    other = pod_with(EQUAL, name="q", uid="uid-q")
    assert pl.is_schedulable_after_pod_toleration_change(p, other, other) == QueueingHint.QUEUE_SKIP
