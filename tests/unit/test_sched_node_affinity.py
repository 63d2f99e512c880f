"""NodeAffinity: Kubernetes docs: Assigning Pods to Nodes — its with-node-affinity pod, the "Node
affinity weight" example, the "Node affinity per scheduling profile" addedAffinity —, PreFilter's
node names, args and hints."""

from __future__ import annotations

import pytest
import yaml

from machinery import jsonconv
from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import NODE, ActionType, ClusterEvent, Code, CycleState, PreFilterResult, QueueingHint
from scheduler.plugins import node_affinity as na
from tests.helpers import make_pod

WITH_NODE_AFFINITY = """
apiVersion: v1
kind: Pod
metadata:
  name: with-node-affinity
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: topology.kubernetes.io/zone
            operator: In
            values:
            - antarctica-east1
            - antarctica-west1
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        preference:
          matchExpressions:
          - key: another-node-label-key
            operator: In
            values:
            - another-node-label-value
  containers:
  - name: with-node-affinity
    image: registry.k8s.io/pause:2.0
"""

WITH_AFFINITY_PREFERRED_WEIGHT = """
apiVersion: v1
kind: Pod
metadata:
  name: with-affinity-preferred-weight
spec:
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions:
          - key: kubernetes.io/os
            operator: In
            values:
            - linux
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        preference:
          matchExpressions:
          - key: label-1
            operator: In
            values:
            - key-1
      - weight: 50
        preference:
          matchExpressions:
          - key: label-2
            operator: In
            values:
            - key-2
  containers:
  - name: with-node-affinity
    image: registry.k8s.io/pause:2.0
"""

# Kubernetes docs: Assigning Pods to Nodes, "Node affinity per scheduling profile": the
# foo-scheduler profile's NodeAffinity args.
FOO_SCHEDULER_ARGS = yaml.safe_load("""
addedAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
    - matchExpressions:
      - key: scheduler-profile
        operator: In
        values:
        - foo
""")


def pod(text: str) -> core_pb2.Pod:
    return jsonconv.from_dict(core_pb2.Pod, yaml.safe_load(text))


def labelled(name: str, labels: dict[str, str]) -> core_pb2.Node:
    n = core_pb2.Node(api_version="v1", kind="Node")
    n.metadata.name = name
    n.metadata.labels.update(labels)
    return n


def run_filter(pl, p: core_pb2.Pod, n: core_pb2.Node):
    state = CycleState()
    ni = NodeInfo(n)
    _, st = pl.pre_filter(state, p, [ni])
    if st is not None and st.code == Code.SKIP:
        return None
    assert st is None
    return pl.filter(state, p, ni)


def scores(pl, p: core_pb2.Pod, nodes: list[core_pb2.Node]) -> list[int] | None:
    state = CycleState()
    infos = [NodeInfo(n) for n in nodes]
    st = pl.pre_score(state, p, infos)
    if st is not None and st.code == Code.SKIP:
        return None
    raw = []
    for ni in infos:
        s, st = pl.score(state, p, ni)
        assert st is None
        raw.append(s)
    assert pl.normalize_score(state, p, [ni.name for ni in infos], raw) is None
    return raw


ZONE = "topology.kubernetes.io/zone"


# ---------------------------------------------------------------- filter


def test_004_with_node_affinity_requires_an_antarctica_zone():
    pl = na.new({}, None)
    p = pod(WITH_NODE_AFFINITY)
    assert run_filter(pl, p, labelled("east", {ZONE: "antarctica-east1"})) is None
    assert run_filter(pl, p, labelled("west", {ZONE: "antarctica-west1"})) is None
    for n in (labelled("europe", {ZONE: "europe-west1"}), labelled("bare", {})):
        st = run_filter(pl, p, n)
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.reasons == ["node(s) didn't match Pod's node affinity/selector"]


def test_node_selector_needs_every_label():
    pl = na.new({}, None)
    p = make_pod("ssd")
    p.spec.node_selector.update({"disktype": "ssd", "kubernetes.io/os": "linux"})
    assert run_filter(pl, p, labelled("a", {"disktype": "ssd", "kubernetes.io/os": "linux"})) is None
    assert run_filter(pl, p, labelled("b", {"disktype": "ssd"})).reasons == [na.ERR_REASON_POD]


def test_node_selector_and_affinity_are_both_required():
    pl = na.new({}, None)
    p = pod(WITH_NODE_AFFINITY)
    p.spec.node_selector["disktype"] = "ssd"
    assert run_filter(pl, p, labelled("a", {ZONE: "antarctica-east1"})).reasons == [na.ERR_REASON_POD]
    assert run_filter(pl, p, labelled("b", {ZONE: "antarctica-east1", "disktype": "ssd"})) is None


def test_004_operators_notin_doesnotexist_gt_lt():
    pl = na.new({}, None)
    p = make_pod("ops")
    term = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms.add()
    term.match_expressions.add(key="zone", operator="NotIn", values=["bad"])
    term.match_expressions.add(key="spot", operator="DoesNotExist")
    term.match_expressions.add(key="cores", operator="Gt", values=["4"])
    term.match_expressions.add(key="age", operator="Lt", values=["10"])
    assert run_filter(pl, p, labelled("ok", {"zone": "good", "cores": "8", "age": "3"})) is None
    for labels in ({"zone": "bad", "cores": "8", "age": "3"}, {"spot": "", "cores": "8", "age": "3"},
                   {"cores": "4", "age": "3"}, {"cores": "8", "age": "10"}, {"cores": "x", "age": "3"}):
        assert run_filter(pl, p, labelled("no", labels)).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, labels


def test_prefilter_skips_a_pod_without_required_placement():
    pl = na.new({}, None)
    result, st = pl.pre_filter(CycleState(), make_pod("free"), [])
    assert result is None and st.code == Code.SKIP
    preferred_only = pod(WITH_NODE_AFFINITY)
    preferred_only.spec.affinity.node_affinity.ClearField("required_during_scheduling_ignored_during_execution")
    assert pl.pre_filter(CycleState(), preferred_only, [])[1].code == Code.SKIP


def test_prefilter_does_not_skip_when_the_profile_adds_required_affinity():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    assert pl.pre_filter(CycleState(), make_pod("free"), []) == (None, None)


def _pinned(*terms: list[tuple[str, list[str]]]) -> core_pb2.Pod:
    """A pod whose required terms are ``[(key, values), ...]``; ``metadata.name`` goes to matchFields."""
    p = make_pod("pinned")
    ns = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    for reqs in terms:
        t = ns.node_selector_terms.add()
        for key, values in reqs:
            if key == "metadata.name":
                t.match_fields.add(key=key, operator="In", values=values)
            else:
                t.match_expressions.add(key=key, operator="In", values=values)
    return p


def test_prefilter_narrows_to_the_nodes_named_by_match_fields():
    pl = na.new({}, None)
    result, st = pl.pre_filter(CycleState(), _pinned([("metadata.name", ["n1"])], [("metadata.name", ["n2"])]), [])
    assert st is None and result == PreFilterResult(frozenset({"n1", "n2"}))
    # Within a term the name requirements are ANDed.
    result, _ = pl.pre_filter(CycleState(), _pinned([("metadata.name", ["n1"]), ("metadata.name", ["n1"])]), [])
    assert result.node_names == frozenset({"n1"})


def test_prefilter_keeps_every_node_when_one_term_names_none():
    pl = na.new({}, None)
    assert pl.pre_filter(CycleState(), _pinned([("metadata.name", ["n1"])], [("zone", ["a"])]), []) == (None, None)


def test_prefilter_conflicting_names_are_unresolvable():
    pl = na.new({}, None)
    p = make_pod("conflict")
    t = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms.add()
    t.match_fields.add(key="metadata.name", operator="In", values=["n1"])
    t.match_fields.add(key="metadata.name", operator="In", values=["n2"])
    result, st = pl.pre_filter(CycleState(), p, [])
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ["pod affinity terms conflict"]


def test_filter_without_prefilter_computes_the_terms_itself():
    pl = na.new({}, None)
    p = pod(WITH_NODE_AFFINITY)
    st = pl.filter(CycleState(), p, NodeInfo(labelled("europe", {ZONE: "europe-west1"})))
    assert st.reasons == [na.ERR_REASON_POD]


# ---------------------------------------------------------------- addedAffinity


def test_004_foo_scheduler_profile_added_affinity_needs_scheduler_profile_foo():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    p = make_pod("any")
    assert run_filter(pl, p, labelled("foo-node", {"scheduler-profile": "foo"})) is None
    st = run_filter(pl, p, labelled("other", {"scheduler-profile": "bar"}))
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) didn't match scheduler-enforced node affinity"]


def test_004_nodes_need_to_satisfy_added_affinity_and_the_pods_node_affinity():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    p = pod(WITH_NODE_AFFINITY)
    both = labelled("both", {"scheduler-profile": "foo", ZONE: "antarctica-east1"})
    only_profile = labelled("profile", {"scheduler-profile": "foo", ZONE: "europe-west1"})
    only_zone = labelled("zone", {ZONE: "antarctica-east1"})
    assert run_filter(pl, p, both) is None
    assert run_filter(pl, p, only_profile).reasons == [na.ERR_REASON_POD]
    assert run_filter(pl, p, only_zone).reasons == [na.ERR_REASON_ENFORCED]


def test_added_preferred_terms_add_to_the_score():
    args = {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}}]}}
    pl = na.new(args, None)
    gold, plain = labelled("gold", {"tier": "gold"}), labelled("plain", {})
    assert scores(pl, make_pod("any"), [gold, plain]) == [100, 0]  # no Skip: the profile prefers
    p = pod(WITH_NODE_AFFINITY)
    both = labelled("both", {"tier": "gold", "another-node-label-key": "another-node-label-value"})
    state = CycleState()
    pl.pre_score(state, p, [])
    assert pl.score(state, p, NodeInfo(both)) == (11, None)  # 10 (profile) + 1 (pod)


@pytest.mark.parametrize("args,fragment", [
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "Foo", "values": ["x"]}]}]}}},
     'addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]'
     '.operator: Unsupported value: "Foo"'),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "In"}]}]}}},
     "nodeSelectorTerms[0].matchExpressions[0].values: Required value"),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}]}}},
     "matchExpressions[0].values: Forbidden"),
    ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}}]}},
     "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].values[0]: "
     "Invalid value"),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "-bad-", "operator": "Exists"}]}]}}},
     "matchExpressions[0].key: Invalid value"),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}},
     "nodeSelectorTerms[0].matchFields[0].values"),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "Exists"}]}]}}},
     "nodeSelectorTerms[0].matchFields[0].operator: Unsupported value"),
    ({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchLabels": {"a": "b"}}]}}},
     'addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchLabels: '
     'unknown field "matchLabels"'),
    ({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 101, "preference": {"matchExpressions": [{"key": "a", "operator": "Exists"}]}}]}},
     "preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 101"),
    ({"addedAfinity": {}}, 'addedAfinity: unknown field "addedAfinity"'),
    ({"addedAffinity": ["not", "a", "mapping"]}, "addedAffinity: Invalid value"),
])
def test_bad_args_are_refused_with_the_field(args, fragment):
    with pytest.raises(na.ArgsError) as info:
        na.new(args, None)
    assert fragment in str(info.value)


# ---------------------------------------------------------------- score


def test_004_affinity_preferred_weight_the_label_2_node_wins():
    pl = na.new({}, None)
    p = pod(WITH_AFFINITY_PREFERRED_WEIGHT)
    node1 = labelled("node-1", {"kubernetes.io/os": "linux", "label-1": "key-1"})
    node2 = labelled("node-2", {"kubernetes.io/os": "linux", "label-2": "key-2"})
    state = CycleState()
    pl.pre_score(state, p, [])
    assert pl.score(state, p, NodeInfo(node1)) == (1, None)
    assert pl.score(state, p, NodeInfo(node2)) == (50, None)
    # Normalized: 100 * 1 // 50 = 2 and 100; "schedules the Pod onto the node with the highest final score".
    assert scores(pl, p, [node1, node2]) == [2, 100]


def test_004_with_node_affinity_prefers_another_node_label():
    pl = na.new({}, None)
    preferred = labelled("a", {ZONE: "antarctica-east1", "another-node-label-key": "another-node-label-value"})
    plain = labelled("b", {ZONE: "antarctica-east1"})
    assert scores(pl, pod(WITH_NODE_AFFINITY), [preferred, plain]) == [100, 0]


def test_no_matching_preferred_term_leaves_every_score_zero():
    assert scores(na.new({}, None), pod(WITH_NODE_AFFINITY), [labelled("a", {}), labelled("b", {})]) == [0, 0]


def test_prescore_skips_a_pod_without_preferred_terms():
    assert scores(na.new({}, None), make_pod("plain"), [labelled("a", {})]) is None
    assert scores(na.new(FOO_SCHEDULER_ARGS, None), make_pod("plain"), [labelled("a", {})]) is None


# ---------------------------------------------------------------- hints


def test_registers_node_add_and_label_updates():
    events = [e.event for e in na.new({}, None).events_to_register()]
    assert events == [ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]


def test_hint_queues_a_matching_node_added_or_labelled_into_a_match():
    pl = na.new({}, None)
    p = pod(WITH_NODE_AFFINITY)
    east = labelled("n", {ZONE: "antarctica-east1"})
    assert pl.is_schedulable_after_node_change(p, None, east) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(p, labelled("n", {}), east) == QueueingHint.QUEUE


def test_hint_skips_a_node_that_does_not_match_or_matched_already():
    pl = na.new({}, None)
    p = pod(WITH_NODE_AFFINITY)
    east = labelled("n", {ZONE: "antarctica-east1"})
    assert pl.is_schedulable_after_node_change(p, None, labelled("n", {ZONE: "europe"})) == QueueingHint.QUEUE_SKIP
    relabelled = labelled("n", {ZONE: "antarctica-east1", "x": "y"})
    assert pl.is_schedulable_after_node_change(p, east, relabelled) == QueueingHint.QUEUE_SKIP


def test_hint_with_added_affinity_checks_the_profiles_nodes_too():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    p = pod(WITH_NODE_AFFINITY)
    east = labelled("n", {ZONE: "antarctica-east1"})
    east_foo = labelled("n", {ZONE: "antarctica-east1", "scheduler-profile": "foo"})
    assert pl.is_schedulable_after_node_change(p, None, east) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(p, None, east_foo) == QueueingHint.QUEUE
    # Labelled into the profile: the pod's own terms matched already, the profile's did not.
    assert pl.is_schedulable_after_node_change(p, east, east_foo) == QueueingHint.QUEUE
