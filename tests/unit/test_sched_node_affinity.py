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
from tests.harness.builders import MakeNode, MakePod
from tests.harness.fixtures import fixture

WITH_NODE_AFFINITY = fixture("pod-with-node-affinity.yaml")

WITH_AFFINITY_PREFERRED_WEIGHT = fixture("pod-with-affinity-preferred-weight.yaml")

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


def pod_from_yaml(text: str) -> core_pb2.Pod:
    return jsonconv.from_dict(core_pb2.Pod, yaml.safe_load(text))


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
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    assert run_filter(pl, p, MakeNode().name("east").label(ZONE, "antarctica-east1").obj()) is None
    assert run_filter(pl, p, MakeNode().name("west").label(ZONE, "antarctica-west1").obj()) is None
    for n in (MakeNode().name("europe").label(ZONE, "europe-west1").obj(), MakeNode().name("bare").obj()):
        st = run_filter(pl, p, n)
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.reasons == ["node(s) didn't match Pod's node affinity/selector"]


def test_node_selector_needs_every_label():
    pl = na.new({}, None)
    p = MakePod().name("ssd").obj()
    p.spec.node_selector.update({"disktype": "ssd", "kubernetes.io/os": "linux"})
    assert run_filter(pl, p, MakeNode().name("a")
                             .labels({"disktype": "ssd", "kubernetes.io/os": "linux"}).obj()) is None
    assert run_filter(pl, p, MakeNode().name("b").label("disktype", "ssd").obj()).reasons == [na.ERR_REASON_POD]


def test_node_selector_and_affinity_are_both_required():
    pl = na.new({}, None)
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    p.spec.node_selector["disktype"] = "ssd"
    assert run_filter(pl, p, MakeNode().name("a").label(ZONE, "antarctica-east1").obj()).reasons == [na.ERR_REASON_POD]
    assert run_filter(pl, p, MakeNode().name("b").labels({ZONE: "antarctica-east1", "disktype": "ssd"}).obj()) is None


def test_004_operators_notin_doesnotexist_gt_lt():
    pl = na.new({}, None)
    p = MakePod().name("ops").obj()
    term = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms.add()
    term.match_expressions.add(key="zone", operator="NotIn", values=["bad"])
    term.match_expressions.add(key="spot", operator="DoesNotExist")
    term.match_expressions.add(key="cores", operator="Gt", values=["4"])
    term.match_expressions.add(key="age", operator="Lt", values=["10"])
    assert run_filter(pl, p, MakeNode().name("ok").labels({"zone": "good", "cores": "8", "age": "3"}).obj()) is None
    for labels in ({"zone": "bad", "cores": "8", "age": "3"}, {"spot": "", "cores": "8", "age": "3"},
                   {"cores": "4", "age": "3"}, {"cores": "8", "age": "10"}, {"cores": "x", "age": "3"}):
        assert run_filter(pl, p, MakeNode().name("no")
                                 .labels(labels).obj()).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE, labels


def test_prefilter_skips_a_pod_without_required_placement():
    pl = na.new({}, None)
    result, st = pl.pre_filter(CycleState(), MakePod().name("free").obj(), [])
    assert result is None and st.code == Code.SKIP
    preferred_only = pod_from_yaml(WITH_NODE_AFFINITY)
    preferred_only.spec.affinity.node_affinity.ClearField("required_during_scheduling_ignored_during_execution")
    assert pl.pre_filter(CycleState(), preferred_only, [])[1].code == Code.SKIP


def test_prefilter_does_not_skip_when_the_profile_adds_required_affinity():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    assert pl.pre_filter(CycleState(), MakePod().name("free").obj(), []) == (None, None)


def test_prefilter_narrows_to_the_nodes_named_by_match_fields():
    pl = na.new({}, None)
    result, st = pl.pre_filter(CycleState(), MakePod().name("pinned").node_affinity_in("metadata.name", ["n1"])
                                             .node_affinity_in("metadata.name", ["n2"]).obj(), [])
    assert st is None and result == PreFilterResult(frozenset({"n1", "n2"}))
    # Within a term the name requirements are ANDed.
    twice = MakePod().name("pinned").node_affinity_in("metadata.name", ["n1"]).obj()
    term = twice.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms[0]
    term.match_fields.add(key="metadata.name", operator="In", values=["n1"])
    result, _ = pl.pre_filter(CycleState(), twice, [])
    assert result.node_names == frozenset({"n1"})


def test_prefilter_keeps_every_node_when_one_term_names_none():
    pl = na.new({}, None)
    assert pl.pre_filter(CycleState(), MakePod().name("pinned").node_affinity_in("metadata.name", ["n1"])
                                       .node_affinity_in("zone", ["a"]).obj(), []) == (None, None)


def test_prefilter_conflicting_names_are_unresolvable():
    pl = na.new({}, None)
    p = MakePod().name("conflict").obj()
    t = p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms.add()
    t.match_fields.add(key="metadata.name", operator="In", values=["n1"])
    t.match_fields.add(key="metadata.name", operator="In", values=["n2"])
    result, st = pl.pre_filter(CycleState(), p, [])
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == ["pod affinity terms conflict"]


def test_filter_without_prefilter_computes_the_terms_itself():
    pl = na.new({}, None)
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    st = pl.filter(CycleState(), p, NodeInfo(MakeNode().name("europe").label(ZONE, "europe-west1").obj()))
    assert st.reasons == [na.ERR_REASON_POD]


# ---------------------------------------------------------------- addedAffinity


def test_004_foo_scheduler_profile_added_affinity_needs_scheduler_profile_foo():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    p = MakePod().name("any").obj()
    assert run_filter(pl, p, MakeNode().name("foo-node").label("scheduler-profile", "foo").obj()) is None
    st = run_filter(pl, p, MakeNode().name("other").label("scheduler-profile", "bar").obj())
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["node(s) didn't match scheduler-enforced node affinity"]


def test_004_nodes_need_to_satisfy_added_affinity_and_the_pods_node_affinity():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    both = MakeNode().name("both").labels({"scheduler-profile": "foo", ZONE: "antarctica-east1"}).obj()
    only_profile = MakeNode().name("profile").labels({"scheduler-profile": "foo", ZONE: "europe-west1"}).obj()
    only_zone = MakeNode().name("zone").label(ZONE, "antarctica-east1").obj()
    assert run_filter(pl, p, both) is None
    assert run_filter(pl, p, only_profile).reasons == [na.ERR_REASON_POD]
    assert run_filter(pl, p, only_zone).reasons == [na.ERR_REASON_ENFORCED]


def test_added_preferred_terms_add_to_the_score():
    args = {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}}]}}
    pl = na.new(args, None)
    gold = MakeNode().name("gold").label("tier", "gold").obj()
    plain = MakeNode().name("plain").obj()
    assert scores(pl, MakePod().name("any").obj(), [gold, plain]) == [100, 0]  # no Skip: the profile prefers
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    both = MakeNode().name("both").labels({"tier": "gold", "another-node-label-key": "another-node-label-value"}).obj()
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
    p = pod_from_yaml(WITH_AFFINITY_PREFERRED_WEIGHT)
    node1 = MakeNode().name("node-1").labels({"kubernetes.io/os": "linux", "label-1": "key-1"}).obj()
    node2 = MakeNode().name("node-2").labels({"kubernetes.io/os": "linux", "label-2": "key-2"}).obj()
    state = CycleState()
    pl.pre_score(state, p, [])
    assert pl.score(state, p, NodeInfo(node1)) == (1, None)
    assert pl.score(state, p, NodeInfo(node2)) == (50, None)
    # Normalized: 100 * 1 // 50 = 2 and 100; "schedules the Pod onto the node with the highest final score".
    assert scores(pl, p, [node1, node2]) == [2, 100]


def test_004_with_node_affinity_prefers_another_node_label():
    pl = na.new({}, None)
    preferred = (MakeNode().name("a")
                 .labels({ZONE: "antarctica-east1", "another-node-label-key": "another-node-label-value"}).obj())
    plain = MakeNode().name("b").label(ZONE, "antarctica-east1").obj()
    assert scores(pl, pod_from_yaml(WITH_NODE_AFFINITY), [preferred, plain]) == [100, 0]


def test_no_matching_preferred_term_leaves_every_score_zero():
    assert scores(na.new({}, None), pod_from_yaml(WITH_NODE_AFFINITY), [MakeNode().name("a").obj(),
                                                              MakeNode().name("b").obj()]) == [0, 0]


def test_prescore_skips_a_pod_without_preferred_terms():
    assert scores(na.new({}, None), MakePod().name("plain").obj(), [MakeNode().name("a").obj()]) is None
    assert scores(na.new(FOO_SCHEDULER_ARGS, None), MakePod().name("plain").obj(), [MakeNode().name("a").obj()]) is None


# ---------------------------------------------------------------- hints


def test_registers_node_add_and_label_updates():
    events = [e.event for e in na.new({}, None).events_to_register()]
    assert events == [ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)]


def test_hint_queues_a_matching_node_added_or_labelled_into_a_match():
    pl = na.new({}, None)
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    east = MakeNode().name("n").label(ZONE, "antarctica-east1").obj()
    assert pl.is_schedulable_after_node_change(p, None, east) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(p, MakeNode().name("n").obj(), east) == QueueingHint.QUEUE


def test_hint_skips_a_node_that_does_not_match_or_matched_already():
    pl = na.new({}, None)
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    east = MakeNode().name("n").label(ZONE, "antarctica-east1").obj()
    assert pl.is_schedulable_after_node_change(p, None, MakeNode().name("n")
                                                        .label(ZONE, "europe").obj()) == QueueingHint.QUEUE_SKIP
    relabelled = MakeNode().name("n").labels({ZONE: "antarctica-east1", "x": "y"}).obj()
    assert pl.is_schedulable_after_node_change(p, east, relabelled) == QueueingHint.QUEUE_SKIP


def test_hint_with_added_affinity_checks_the_profiles_nodes_too():
    pl = na.new(FOO_SCHEDULER_ARGS, None)
    p = pod_from_yaml(WITH_NODE_AFFINITY)
    east = MakeNode().name("n").label(ZONE, "antarctica-east1").obj()
    east_foo = MakeNode().name("n").labels({ZONE: "antarctica-east1", "scheduler-profile": "foo"}).obj()
    assert pl.is_schedulable_after_node_change(p, None, east) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(p, None, east_foo) == QueueingHint.QUEUE
    # Labelled into the profile: the pod's own terms matched already, the profile's did not.
    assert pl.is_schedulable_after_node_change(p, east, east_foo) == QueueingHint.QUEUE
