"""PodTopologySpread: Kubernetes docs: Pod Topology Spread Constraints, example by example (one
constraint, multiple, conflicting, node affinity / nodeSelector, the implicit conventions,
minDomains, matchLabelKeys), scoring ranks, the PreFilter extensions, QueueingHints and args."""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.interfaces import Services
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.runtime import Framework, PluginSets, new_handle
from scheduler.framework.types import NODE, POD, ActionType, Code, CycleState, QueueingHint
from scheduler.plugins import pod_topology_spread as pts
from tests.harness.builders import MakeNode, MakePod

NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
FOO_BAR = {"foo": "bar"}


# ---------------------------------------------------------------- builders


def doc_nodes() -> list[core_pb2.Node]:
    """node1..node4 of Kubernetes docs: Pod Topology Spread Constraints, labelled as the document
    labels them (``node=<name>,zone=<zone>``): zoneA, zoneA, zoneB, zoneB."""
    return [MakeNode().name(n).label("node", n).label("zone", z).allocatable(cpu="4", memory="8Gi", pods="110").obj()
            for n, z in (("node1", "zoneA"), ("node2", "zoneA"), ("node3", "zoneB"), ("node4", "zoneB"))]


def spread(pod: core_pb2.Pod, key: str = "zone", max_skew: int = 1, when: str = "DoNotSchedule",
           match_labels: dict | None = FOO_BAR, **fields) -> core_pb2.TopologySpreadConstraint:
    """Add a constraint; ``match_labels=None`` leaves labelSelector unset, ``{}`` sets it empty."""
    c = pod.spec.topology_spread_constraints.add(max_skew=max_skew, topology_key=key, when_unsatisfiable=when,
                                                 **fields)
    if match_labels is not None:
        c.label_selector.SetInParent()
        c.label_selector.match_labels.update(match_labels)
    return c


def not_in_zone_c(pod: core_pb2.Pod) -> None:
    term = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution \
        .node_selector_terms.add()
    term.match_expressions.add(key="zone", operator="NotIn", values=["zoneC"])


def cluster(nodes: list[core_pb2.Node], pods: list[core_pb2.Pod]) -> Snapshot:
    infos = {n.metadata.name: NodeInfo(n) for n in nodes}
    for p in pods:
        infos[p.spec.node_name].add_pod(p)
    return Snapshot.of(list(infos.values()))


def plugin(snap: Snapshot, args: dict | None = None) -> pts.PodTopologySpread:
    services = Services(snapshot=snap)
    return pts.new(args or {}, new_handle(services))


def pre_filter(pl, snap: Snapshot, pod: core_pb2.Pod) -> CycleState:
    state = CycleState()
    result, status = pl.pre_filter(state, pod, snap.node_info_list)
    assert result is None and status is None
    return state


def filter_all(pl, snap: Snapshot, pod: core_pb2.Pod, state: CycleState | None = None) -> dict:
    state = state or pre_filter(pl, snap, pod)
    return {ni.name: pl.filter(state, pod, ni) for ni in snap.node_info_list}


def passing(results: dict) -> list[str]:
    return sorted(name for name, st in results.items() if st is None)


def assert_rejected(results: dict, names: list[str], code: Code = Code.UNSCHEDULABLE, reason: str = NOT_MATCH):
    for name in names:
        st = results[name]
        assert st is not None, name
        assert (st.code, st.reasons) == (code, [reason]), name


def scores(pl, snap: Snapshot, pod: core_pb2.Pod, nodes: list[NodeInfo] | None = None) -> tuple[dict, dict]:
    """(raw, normalized) scores of ``nodes`` (default: all)."""
    nodes = nodes if nodes is not None else snap.node_info_list
    state = CycleState()
    assert pl.pre_score(state, pod, nodes) is None
    names, values = [], []
    for ni in nodes:
        value, status = pl.score(state, pod, ni)
        assert status is None
        names.append(ni.name)
        values.append(value)
    raw = dict(zip(names, values, strict=True))
    assert pl.normalize_score(state, pod, names, values) is None
    return raw, dict(zip(names, values, strict=True))


def four_node_cluster(extra_pods: list[core_pb2.Pod] = ()) -> Snapshot:
    """Kubernetes docs: Pod Topology Spread Constraints — node1..node4 in zoneA, zoneA, zoneB,
    zoneB; a foo=bar pod on node1, node2, node3."""
    nodes = doc_nodes()
    pods = [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
            MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node2").obj(),
            MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR).node("node3").obj()]
    return cluster(nodes, pods + list(extra_pods))


# --------------------------------------- Kubernetes docs: Pod Topology Spread Constraints, examples


def test_004_one_topology_spread_constraint_the_incoming_pod_can_only_go_to_zone_b():
    """Zone A would become [3, 1]: skew 2 > maxSkew 1. node3 or node4 both keep it at 1."""
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    results = filter_all(plugin(snap), snap, pod)
    assert passing(results) == ["node3", "node4"]
    assert_rejected(results, ["node1", "node2"])


def test_004_one_constraint_max_skew_2_lets_the_pod_into_zone_a_as_well():
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, max_skew=2)
    assert passing(filter_all(plugin(snap), snap, pod)) == ["node1", "node2", "node3", "node4"]


def test_004_one_constraint_topology_key_node_leaves_only_node4():
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, key="node")
    results = filter_all(plugin(snap), snap, pod)
    assert passing(results) == ["node4"]
    assert_rejected(results, ["node1", "node2", "node3"])


def test_004_one_constraint_schedule_anyway_is_always_schedulable_but_prefers_zone_b():
    """ScheduleAnyway: no filtering (PreFilter skips), and the zone with fewer pods scores higher.
    Two zones weigh ln(2 + 2) = 1.386 per pod: zone A 2 pods -> 3, zone B 1 pod -> 1; normalized
    100 * (3 + 1 - s) / 3."""
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, when="ScheduleAnyway")
    pl = plugin(snap)
    _, status = pl.pre_filter(CycleState(), pod, snap.node_info_list)
    assert status.code == Code.SKIP
    raw, normalized = scores(pl, snap, pod)
    assert raw == {"node1": 3, "node2": 3, "node3": 1, "node4": 1}
    assert normalized == {"node1": 33, "node2": 33, "node3": 100, "node4": 100}


def test_004_multiple_topology_spread_constraints_only_node4():
    """Zone: zone B only; node: node4 only; both must hold, so node4."""
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, key="zone")
    spread(pod, key="node")
    results = filter_all(plugin(snap), snap, pod)
    assert passing(results) == ["node4"]
    assert_rejected(results, ["node1", "node2", "node3"])


def test_004_conflicting_topology_spread_constraints_leave_the_pod_pending():
    """3 nodes: node1 (zone A) 2 pods, node2 (zone A) 1 pod, node3 (zone B) 2 pods. The zone
    constraint allows only zone B, the node constraint only node2: no node is left."""
    nodes = [MakeNode().name("node1").label("node", "node1").label("zone", "zoneA")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node2").label("node", "node2").label("zone", "zoneA")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node3").label("node", "node3").label("zone", "zoneB")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj()]
    pods = [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
            MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node1").obj(),
            MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR).node("node2").obj(),
            MakePod().name("p4").uid("uid-default-p4").labels(FOO_BAR).node("node3").obj(),
            MakePod().name("p5").uid("uid-default-p5").labels(FOO_BAR).node("node3").obj()]
    snap = cluster(nodes, pods)
    zone_only = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    node_only = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    both = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(zone_only, key="zone")
    spread(node_only, key="node")
    spread(both, key="zone")
    spread(both, key="node")
    pl = plugin(snap)
    assert passing(filter_all(pl, snap, zone_only)) == ["node3"]
    assert passing(filter_all(pl, snap, node_only)) == ["node2"]
    results = filter_all(pl, snap, both)
    assert passing(results) == []
    assert_rejected(results, ["node1", "node2", "node3"])  # Unschedulable: deleting a pod may help


def five_node_cluster() -> list[core_pb2.Node]:
    """Kubernetes docs: Pod Topology Spread Constraints, "topology spread constraints with node
    affinity": zones A (node1, node2), B (node3, node4) and C (node5)."""
    return [*doc_nodes(), MakeNode().name("node5").label("node", "node5").label("zone", "zoneC")
            .allocatable(cpu="4", memory="8Gi", pods="110").obj()]


def test_004_node_affinity_excludes_zone_c_from_the_skew_so_the_pod_goes_to_zone_b():
    """Without the affinity, empty zone C is the global minimum (0) and only node5 passes; with
    ``zone NotIn [zoneC]`` zone C is skipped, the minimum is zone B's 1, and zone B passes. node5
    still passes this filter: NodeAffinity is what keeps the pod out of zone C."""
    snap = cluster(five_node_cluster(), [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
                                         MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node2").obj(),
                                         MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR)
                                         .node("node3").obj()])
    pl = plugin(snap)
    plain = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(plain)
    assert passing(filter_all(pl, snap, plain)) == ["node5"]

    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    not_in_zone_c(pod)
    results = filter_all(pl, snap, pod)
    assert passing(results) == ["node3", "node4", "node5"]
    assert_rejected(results, ["node1", "node2"])

    ignoring = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(ignoring, node_affinity_policy="Ignore")  # the affinity no longer narrows the domains
    not_in_zone_c(ignoring)
    assert passing(filter_all(pl, snap, ignoring)) == ["node5"]


def test_004_node_selector_is_respected_as_node_affinity_is():
    nodes = [MakeNode().name("node1").label("node", "node1").label("zone", "zoneA").label("disk", "ssd")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node2").label("node", "node2").label("zone", "zoneA").label("disk", "ssd")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node3").label("node", "node3").label("zone", "zoneB").label("disk", "ssd")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node4").label("node", "node4").label("zone", "zoneB").label("disk", "ssd")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node5").label("node", "node5").label("zone", "zoneC").label("disk", "hdd")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj()]
    snap = cluster(nodes, [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
                           MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node2").obj(),
                           MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR).node("node3").obj()])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    pod.spec.node_selector["disk"] = "ssd"
    results = filter_all(plugin(snap), snap, pod)
    assert {"node3", "node4"} <= set(passing(results))
    assert_rejected(results, ["node1", "node2"])


def test_004_implicit_only_pods_of_the_incoming_pods_namespace_are_candidates():
    snap = four_node_cluster([MakePod().name("o1").namespace("other").uid("uid-other-o1").labels(FOO_BAR)
                              .node("node4").obj(),
                              MakePod().name("o2").namespace("other").uid("uid-other-o2").labels(FOO_BAR)
                              .node("node4").obj()])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    assert passing(filter_all(plugin(snap), snap, pod)) == ["node3", "node4"]


def test_004_implicit_nodes_missing_a_topology_key_are_bypassed():
    """node1 without a zone label: its 2 pods are disregarded, so zone A (node2, no pods) is the
    minimum and the pod goes to zone A; node1 itself and node5 (mistyped ``zone-typo: zoneC``)
    can never take it."""
    nodes = [MakeNode().name("node1").labels({"node": "node1"}).allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             *doc_nodes()[1:],  # node2..node4
             MakeNode().name("node5").labels({"node": "node5", "zone-typo": "zoneC"})
             .allocatable(cpu="4", memory="8Gi", pods="110").obj()]
    snap = cluster(nodes, [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
                           MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node1").obj(),
                           MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR).node("node3").obj()])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    results = filter_all(plugin(snap), snap, pod)
    assert passing(results) == ["node2"]
    assert_rejected(results, ["node3", "node4"])
    assert_rejected(results, ["node1", "node5"], Code.UNSCHEDULABLE_AND_UNRESOLVABLE, MISSING_LABEL)


def test_004_implicit_a_pod_its_selector_does_not_match_leaves_the_imbalance_unchanged():
    """The affinity example with the incoming pod's labels removed: it still fits zone B (and,
    adding nothing to its own count, zone A too), and once placed zone A still has 2, zone B 1."""
    snap = cluster(five_node_cluster(), [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
                                         MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node2").obj(),
                                         MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR)
                                         .node("node3").obj()])
    pod = MakePod().name("mypod").uid("uid-mypod").labels({}).obj()
    spread(pod)
    not_in_zone_c(pod)
    pl = plugin(snap)
    state = pre_filter(pl, snap, pod)
    before = filter_all(pl, snap, pod, state)
    assert {"node3", "node4"} <= set(passing(before))
    placed = MakePod().name("mypod").uid("uid-default-mypod").labels({}).node("node4").obj()
    assert pl.add_pod(state, pod, PodInfo(placed), snap.get("node4")) is None
    assert state.read("PreFilterPodTopologySpread").counts == [{"zoneA": 2, "zoneB": 1}]
    assert filter_all(pl, snap, pod, state) == before


def three_zones(counts: dict[str, int]) -> Snapshot:
    nodes = [MakeNode().name(f"{z}-1").label("node", f"{z}-1").label("zone", z)
             .allocatable(cpu="4", memory="8Gi", pods="110").obj() for z in counts]
    pods = [MakePod().name(f"{z}-p{i}").uid(f"uid-default-{z}-p{i}").labels(FOO_BAR)
            .node(f"{z}-1").obj() for z, n in counts.items() for i in range(n)]
    return cluster(nodes, pods)


def test_004_min_domains_global_minimum_of_3_zones_with_2_2_and_1_pods_is_1():
    """"3 zones with 2, 2 and 1 matching pods, MaxSkew 1: the global minimum is 1" — only the
    zone with 1 takes the pod. minDomains 3 (= the eligible domains) changes nothing."""
    snap = three_zones({"zoneA": 2, "zoneB": 2, "zoneC": 1})
    for min_domains in (None, 1, 3):
        pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
        c = spread(pod)
        if min_domains is not None:
            c.min_domains = min_domains
        results = filter_all(plugin(snap), snap, pod)
        assert passing(results) == ["zoneC-1"], min_domains
        assert_rejected(results, ["zoneA-1", "zoneB-1"])


def test_004_min_domains_above_the_eligible_domains_makes_the_global_minimum_0():
    """Fewer eligible domains than minDomains: the global minimum is 0, so zone C would have skew
    1 + 1 - 0 = 2 > 1 and the pod stays pending (the API's example: 2, 2, 2 with maxSkew 2 and
    minDomains 5 cannot take a pod either)."""
    snap = three_zones({"zoneA": 2, "zoneB": 2, "zoneC": 1})
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, min_domains=4)
    results = filter_all(plugin(snap), snap, pod)
    assert passing(results) == []
    assert_rejected(results, ["zoneA-1", "zoneB-1", "zoneC-1"])

    snap2 = three_zones({"zoneA": 2, "zoneB": 2, "zoneC": 2})
    pod2 = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod2, max_skew=2, min_domains=5)
    assert passing(filter_all(plugin(snap2), snap2, pod2)) == []
    pod3 = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod3, max_skew=2)
    assert len(passing(filter_all(plugin(snap2), snap2, pod3))) == 3


def test_004_min_domains_counts_only_eligible_domains():
    """Excluding zone C by node affinity leaves 2 eligible domains: minDomains 3 then forces 0."""
    snap = three_zones({"zoneA": 1, "zoneB": 1, "zoneC": 0})
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, min_domains=3)
    not_in_zone_c(pod)
    results = filter_all(plugin(snap), snap, pod)
    assert_rejected(results, ["zoneA-1", "zoneB-1"])  # 1 + 1 - 0 = 2 > 1


def revision_cluster(new_on_n3: int = 0) -> Snapshot:
    """Three nodes by hostname; the old revision (pod-template-hash=v1) has 2 pods on n1 and n2."""
    nodes = [MakeNode().name(f"n{i}").labels({"kubernetes.io/hostname": f"n{i}"})
             .allocatable(cpu="4", memory="8Gi", pods="110").obj() for i in (1, 2, 3)]
    pods = [MakePod().name(f"old-{n}-{i}").uid(f"uid-default-old-{n}-{i}")
            .labels({"app": "foo", "pod-template-hash": "v1"}).node(n).obj() for n in ("n1", "n2") for i in (1, 2)]
    pods += [MakePod().name(f"new-n3-{i}").uid(f"uid-default-new-n3-{i}")
             .labels({"app": "foo", "pod-template-hash": "v2"}).node("n3").obj() for i in range(new_on_n3)]
    return cluster(nodes, pods)


def test_004_match_label_keys_spread_each_revision_on_its_own():
    """``matchLabelKeys: [pod-template-hash]`` ANDs ``pod-template-hash=v2`` (the pod's value) into
    the selector: the old revision's pods are not counted."""
    snap = revision_cluster()
    labels = {"app": "foo", "pod-template-hash": "v2"}
    plain = MakePod().name("mypod").uid("uid-mypod").labels(labels).obj()
    keyed = MakePod().name("mypod").uid("uid-mypod").labels(labels).obj()
    spread(plain, key="kubernetes.io/hostname", match_labels={"app": "foo"})
    spread(keyed, key="kubernetes.io/hostname", match_labels={"app": "foo"}, match_label_keys=["pod-template-hash"])
    pl = plugin(snap)
    assert passing(filter_all(pl, snap, plain)) == ["n3"]  # every revision counts: n1 and n2 hold 2
    assert passing(filter_all(pl, snap, keyed)) == ["n1", "n2", "n3"]  # no v2 pod anywhere yet

    snap2 = revision_cluster(new_on_n3=1)
    results = filter_all(plugin(snap2), snap2, keyed)
    assert passing(results) == ["n1", "n2"]
    assert_rejected(results, ["n3"])


def test_match_label_keys_the_pod_lacks_are_ignored():
    snap = revision_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels({"app": "foo"}).obj()
    spread(pod, key="kubernetes.io/hostname", match_labels={"app": "foo"}, match_label_keys=["pod-template-hash"])
    assert passing(filter_all(plugin(snap), snap, pod)) == ["n3"]  # labelSelector alone


def test_label_selector_absent_matches_no_pod_and_empty_matches_every_pod():
    snap = four_node_cluster([MakePod().name("other").uid("uid-default-other").labels({"app": "x"})
                              .node("node1").obj()])
    absent = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    empty = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(absent, match_labels=None)
    spread(empty, match_labels={})
    pl = plugin(snap)
    assert passing(filter_all(pl, snap, absent)) == ["node1", "node2", "node3", "node4"]
    assert pre_filter(pl, snap, empty).read("PreFilterPodTopologySpread").counts == [{"zoneA": 3, "zoneB": 1}]
    assert passing(filter_all(pl, snap, empty)) == ["node3", "node4"]


def test_node_taints_policy_honor_leaves_out_nodes_whose_taints_the_pod_does_not_tolerate():
    """Zone A's nodes tainted: with Ignore (the default) their pods count, and zone B is the only
    choice; with Honor they do not count, so the minimum is zone B's 1 and zone B still fits
    while zone A is 0 + 1 - 1; a pod tolerating the taint counts them again."""
    nodes = [MakeNode().name("node1").labels({"zone": "zoneA"}).allocatable(cpu="4", memory="8Gi", pods="110")
             .taint("dedicated", "gpu", "NoSchedule").obj(),
             MakeNode().name("node2").labels({"zone": "zoneA"}).allocatable(cpu="4", memory="8Gi", pods="110")
             .taint("dedicated", "gpu", "NoSchedule").obj(),
             MakeNode().name("node3").labels({"zone": "zoneB"}).allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node4").labels({"zone": "zoneB"}).allocatable(cpu="4", memory="8Gi", pods="110").obj()]
    snap = cluster(nodes, [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
                           MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node2").obj(),
                           MakePod().name("p3").uid("uid-default-p3").labels(FOO_BAR).node("node3").obj()])
    pl = plugin(snap)
    ignore = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    honor = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    tolerating = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(ignore)
    spread(honor, node_taints_policy="Honor")
    spread(tolerating, node_taints_policy="Honor")
    tolerating.spec.tolerations.add(key="dedicated", operator="Equal", value="gpu", effect="NoSchedule")
    assert passing(filter_all(pl, snap, ignore)) == ["node3", "node4"]
    assert pre_filter(pl, snap, honor).read("PreFilterPodTopologySpread").counts == [{"zoneB": 1}]
    assert passing(filter_all(pl, snap, honor)) == ["node1", "node2", "node3", "node4"]
    assert passing(filter_all(pl, snap, tolerating)) == ["node3", "node4"]


def test_terminating_pods_do_not_count():
    leaving = MakePod().name("leaving").uid("uid-default-leaving").labels(FOO_BAR).node("node3").obj()
    leaving.metadata.deletion_timestamp = "2026-01-01T00:00:00Z"
    snap = four_node_cluster([leaving])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    assert pre_filter(plugin(snap), snap, pod).read("PreFilterPodTopologySpread").counts == [
        {"zoneA": 2, "zoneB": 1}]


def test_a_pod_without_hard_constraints_is_skipped_and_filter_without_pre_filter_is_an_error():
    snap = four_node_cluster()
    pl = plugin(snap)
    _, status = pl.pre_filter(CycleState(), MakePod().name("mypod").uid("uid-mypod")
                                            .labels(FOO_BAR).obj(), snap.node_info_list)
    assert status.code == Code.SKIP
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    assert pl.filter(CycleState(), pod, snap.get("node1")).code == Code.ERROR


def test_a_selector_that_cannot_be_parsed_is_an_error():
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod).label_selector.match_expressions.add(key="foo", operator="Like", values=["b"])
    _, status = plugin(snap).pre_filter(CycleState(), pod, snap.node_info_list)
    assert status.code == Code.ERROR and "hard topology spread constraints" in status.message()


def test_counts_follow_pods_added_to_a_node_between_cycles():
    """Per-node counts are remembered by NodeInfo generation; a node whose pods changed is recounted."""
    snap = four_node_cluster()
    pl = plugin(snap)
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    assert passing(filter_all(pl, snap, pod)) == ["node3", "node4"]
    snap.get("node4").add_pod(MakePod().name("p4").uid("uid-default-p4").labels(FOO_BAR).node("node4").obj())
    assert passing(filter_all(pl, snap, pod)) == ["node1", "node2", "node3", "node4"]


# ---------------------------------------------------------------- PreFilter extensions


def test_remove_pod_and_add_pod_change_only_the_clone():
    snap = four_node_cluster()
    pl = plugin(snap)
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    state = pre_filter(pl, snap, pod)

    victim = PodInfo(snap.get("node1").pods[0].pod)
    without = state.clone()
    assert pl.remove_pod(without, pod, victim, snap.get("node1")) is None
    assert passing(filter_all(pl, snap, pod, without)) == ["node1", "node2", "node3", "node4"]  # [1, 1]
    assert passing(filter_all(pl, snap, pod, state)) == ["node3", "node4"]  # the original is untouched

    nominated = state.clone()
    assert pl.add_pod(nominated, pod, PodInfo(MakePod().name("n1").uid("uid-default-n1").labels(FOO_BAR)
                                              .node("node4").obj()), snap.get("node4")) is None
    assert nominated.read("PreFilterPodTopologySpread").counts == [{"zoneA": 2, "zoneB": 2}]
    assert passing(filter_all(pl, snap, pod, nominated)) == ["node1", "node2", "node3", "node4"]

    unrelated = state.clone()
    for other in (MakePod().name("x").namespace("other").uid("uid-other-x").labels(FOO_BAR).node("node4").obj(),
                  MakePod().name("y").uid("uid-default-y").labels({"foo": "baz"}).node("node4").obj()):
        assert pl.add_pod(unrelated, pod, PodInfo(other), snap.get("node4")) is None
    assert unrelated.read("PreFilterPodTopologySpread").counts == [{"zoneA": 2, "zoneB": 1}]


def test_the_minimum_stays_right_as_pods_leave_and_come_back_on_one_node():
    """Preemption removes the victims of one node, then reprieves them one by one."""
    snap = three_zones({"zoneA": 3, "zoneB": 2, "zoneC": 2})
    pl = plugin(snap)
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod)
    state = pre_filter(pl, snap, pod).clone()
    ni = snap.get("zoneA-1")
    victims = [PodInfo(pi.pod) for pi in ni.pods]
    s = state.read("PreFilterPodTopologySpread")
    for v in victims:
        pl.remove_pod(state, pod, v, ni)
    assert s.min_match(0) == 0 and passing(filter_all(pl, snap, pod, state)) == ["zoneA-1"]
    for v, expected_min in zip(victims, (1, 2, 2), strict=True):
        pl.add_pod(state, pod, v, ni)
        assert s.min_match(0) == expected_min == min(s.counts[0].values())


def test_nominated_pods_count_through_the_framework():
    """The framework's two-pass filter adds the pods nominated to a node with add_pod on a clone
    of the state. Per node: node1 1, node2 1, node3 0, node4 0 (+1 nominated)."""
    nodes = doc_nodes()
    snap = cluster(nodes, [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj(),
                           MakePod().name("p2").uid("uid-default-p2").labels(FOO_BAR).node("node2").obj()])
    nominated = PodInfo(MakePod().name("nominated").uid("uid-default-nominated").labels(FOO_BAR).node("node4").obj())

    class Nominator:
        def nominated_pods_for_node(self, name):
            return [nominated] if name == "node4" else []

    class SortAndBind:  # the framework wants one queueSort and a binder
        def less(self, a, b):
            return False

        async def bind(self, state, pod, node_name):
            return None

    services = Services(nominator=Nominator(), snapshot=snap)
    sets = PluginSets(points={"queueSort": ["Stub"], "bind": ["Stub"], "preFilter": [pts.NAME], "filter": [pts.NAME]})
    fw = Framework("test", sets, {"Stub": lambda args, h: SortAndBind(), pts.NAME: pts.new}, services)
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, key="node")
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, pod, snap.node_info_list) == (None, None, set())
    assert fw.run_filter_plugins(state, pod, snap.get("node4")) is None  # 0 + 1 - 0
    st = fw.run_filter_plugins_with_nominated_pods(state, pod, snap.get("node4"))  # 1 + 1 - 0 (node3)
    assert (st.code, st.reasons, st.plugin) == (Code.UNSCHEDULABLE, [NOT_MATCH], pts.NAME)
    assert fw.run_filter_plugins_with_nominated_pods(state, pod, snap.get("node3")) is None
    assert state.read("PreFilterPodTopologySpread").counts == [{"node1": 1, "node2": 1, "node3": 0, "node4": 0}]


# ---------------------------------------------------------------- scoring


def test_score_counts_pods_on_nodes_that_did_not_pass_filter():
    """PreScore counts domains over all nodes: node1 (filtered out) still adds its pod to zone A."""
    snap = four_node_cluster()
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, when="ScheduleAnyway")
    raw, normalized = scores(plugin(snap), snap, pod, [snap.get("node2"), snap.get("node3"), snap.get("node4")])
    # Domains of the filtered nodes: zoneA, zoneB -> weight ln 4; zoneA 2 pods, zoneB 1.
    assert raw == {"node2": 3, "node3": 1, "node4": 1}
    assert normalized == {"node2": 33, "node3": 100, "node4": 100}


def test_score_nodes_missing_a_topology_key_get_zero():
    nodes = [MakeNode().name("node1").label("node", "node1").label("zone", "zoneA")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node2").label("node", "node2").label("zone", "zoneB")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node3").labels({"node": "node3"}).allocatable(cpu="4", memory="8Gi", pods="110").obj()]
    snap = cluster(nodes, [MakePod().name("p1").uid("uid-default-p1").labels(FOO_BAR).node("node1").obj()])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, when="ScheduleAnyway")
    raw, normalized = scores(plugin(snap), snap, pod)
    assert raw["node3"] == 0
    assert normalized == {"node1": 0, "node2": 100, "node3": 0}  # node1: 100 * (1 + 0 - 1) / 1


def test_score_hostname_spreading_ranks_the_emptier_node_first_and_max_skew_softens_it():
    """Per node: pods * ln(3 nodes + 2) + maxSkew - 1. Pods 2, 1, 0 -> 3, 2, 0 with maxSkew 1."""
    nodes = [MakeNode().name(f"n{i}").labels({"kubernetes.io/hostname": f"n{i}"})
             .allocatable(cpu="4", memory="8Gi", pods="110").obj() for i in (1, 2, 3)]
    snap = cluster(nodes, [MakePod().name("a").uid("uid-default-a").labels(FOO_BAR).node("n1").obj(),
                           MakePod().name("b").uid("uid-default-b").labels(FOO_BAR).node("n1").obj(),
                           MakePod().name("c").uid("uid-default-c").labels(FOO_BAR).node("n2").obj()])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, key="kubernetes.io/hostname", when="ScheduleAnyway")
    raw, normalized = scores(plugin(snap), snap, pod)
    assert raw == {"n1": 3, "n2": 2, "n3": 0}
    assert normalized == {"n1": 0, "n2": 33, "n3": 100}
    soft = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(soft, key="kubernetes.io/hostname", when="ScheduleAnyway", max_skew=5)
    raw5, normalized5 = scores(plugin(snap), snap, soft)
    assert raw5 == {"n1": 7, "n2": 6, "n3": 4}
    assert normalized5 == {"n1": 57, "n2": 71, "n3": 100}  # closer together than with maxSkew 1


def test_score_all_empty_domains_score_the_maximum():
    nodes = [MakeNode().name("node1").label("node", "node1").label("zone", "zoneA")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
             MakeNode().name("node2").label("node", "node2").label("zone", "zoneB")
             .allocatable(cpu="4", memory="8Gi", pods="110").obj()]
    snap = cluster(nodes, [])
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(pod, when="ScheduleAnyway")
    assert scores(plugin(snap), snap, pod) == ({"node1": 0, "node2": 0}, {"node1": 100, "node2": 100})


def test_pre_score_skips_without_soft_constraints_or_nodes():
    snap = four_node_cluster()
    hard = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(hard)
    assert plugin(snap).pre_score(CycleState(), hard, snap.node_info_list).code == Code.SKIP
    soft = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    spread(soft, when="ScheduleAnyway")
    assert plugin(Snapshot.of([])).pre_score(CycleState(), soft, []).code == Code.SKIP
    assert plugin(snap).score(CycleState(), soft, snap.get("node1"))[1].code == Code.ERROR


# ---------------------------------------------------------------- defaults and args


def test_system_defaults_apply_to_no_pod_in_kplane():
    """The defaults need a Service/ReplicaSet/StatefulSet/ReplicationController selecting the pod;
    kplane has none, so a pod without constraints is skipped at PreFilter and PreScore."""
    snap = four_node_cluster()
    pl = plugin(snap)
    assert pl.system_defaulted
    assert [(c.topology_key, c.max_skew, c.when_unsatisfiable) for c in pl.default_constraints] == [
        ("kubernetes.io/hostname", 3, "ScheduleAnyway"), ("topology.kubernetes.io/zone", 5, "ScheduleAnyway")]
    pod = MakePod().name("mypod").uid("uid-mypod").labels(FOO_BAR).obj()
    assert pl.pre_filter(CycleState(), pod, snap.node_info_list)[1].code == Code.SKIP
    assert pl.pre_score(CycleState(), pod, snap.node_info_list).code == Code.SKIP

    listed = plugin(snap, {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]})
    assert not listed.system_defaulted and len(listed.default_constraints) == 1
    assert listed.pre_filter(CycleState(), pod, snap.node_info_list)[1].code == Code.SKIP
    assert plugin(snap, {"defaultingType": "List", "defaultConstraints": []}).default_constraints == ()


@pytest.mark.parametrize("args,fragment", [
    ({"defaultingType": "Cluster"}, 'defaultingType: Unsupported value: "Cluster"'),
    ({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
     'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
     "defaultConstraints[0].maxSkew: Invalid value: 0"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "whenUnsatisfiable": "ScheduleAnyway"}]},
     "defaultConstraints[0].topologyKey: Required value"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "bad key!", "whenUnsatisfiable": "ScheduleAnyway"}]},
     "defaultConstraints[0].topologyKey: Invalid value"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]},
     'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe"'),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway",
         "labelSelector": {"matchLabels": {"a": "b"}}}]},
     "defaultConstraints[0].labelSelector: Forbidden"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]},
     'defaultConstraints[1]: Duplicate value: "{zone, ScheduleAnyway}"'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxskew": 1}]},
     'defaultConstraints[0].maxskew: unknown field "maxskew"'),
])
def test_bad_args_are_refused_with_the_field(args, fragment):
    with pytest.raises(pts.ArgsError) as err:
        pts.new(args, new_handle())
    assert isinstance(err.value, ValueError)
    assert fragment in str(err.value)


# ---------------------------------------------------------------- queueing hints


def test_events_to_register_pods_and_nodes_each_with_a_hint():
    pl = pts.new({}, new_handle())
    events = {e.event.resource: e for e in pl.events_to_register()}
    assert events[POD].event.action == (ActionType.ADD | ActionType.UPDATE_POD_LABEL
                                        | ActionType.UPDATE_POD_TOLERATION | ActionType.DELETE)
    assert events[NODE].event.action == (ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                                         | ActionType.UPDATE_NODE_TAINT)
    assert all(e.hint is not None for e in events.values())


def pending() -> core_pb2.Pod:
    pod = MakePod().name("pending").uid("uid-pending").labels(FOO_BAR).obj()
    spread(pod)
    return pod


def test_pod_hint_an_assigned_matching_pod_added_or_deleted_queues():
    pl = pts.new({}, new_handle())
    pod = pending()
    match = MakePod().name("a").uid("uid-default-a").labels(FOO_BAR).node("node1").obj()
    assert pl.is_schedulable_after_pod_change(pod, None, match) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_pod_change(pod, match, None) == QueueingHint.QUEUE


@pytest.mark.parametrize("old,new", [
    (None, MakePod().name("a").uid("uid-default-a").labels({"foo": "baz"})
           .node("node1").obj()),  # does not match the selector
    (MakePod().name("a").uid("uid-default-a").labels({"foo": "baz"}).node("node1").obj(), None),
    (None, MakePod().name("unassigned").uid("uid-unassigned").labels(FOO_BAR).obj()),  # not assigned: counts nowhere
    (None, MakePod().name("a").namespace("other").uid("uid-other-a").labels(FOO_BAR)
           .node("node1").obj()),  # another namespace
    (MakePod().name("a").namespace("other").uid("uid-other-a").labels(FOO_BAR).node("node1").obj(), None),
])
def test_pod_hint_unrelated_pods_skip(old, new):
    assert pts.new({}, new_handle()).is_schedulable_after_pod_change(pending(), old, new) == QueueingHint.QUEUE_SKIP


def test_pod_hint_label_updates_queue_only_when_a_selector_starts_or_stops_matching():
    pl = pts.new({}, new_handle())
    pod = pending()
    matching = MakePod().name("a").uid("uid-default-a").labels({"foo": "bar", "v": "1"}).node("node1").obj()
    assert pl.is_schedulable_after_pod_change(pod, matching, MakePod().name("a").uid("uid-default-a")
                                                             .labels({"foo": "baz"})
                                                             .node("node1").obj()) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_pod_change(pod, MakePod().name("a").uid("uid-default-a").labels({})
                                                   .node("node1").obj(), matching) == QueueingHint.QUEUE
    relabelled = MakePod().name("a").uid("uid-default-a").labels({"foo": "bar", "v": "2"}).node("node1").obj()
    assert pl.is_schedulable_after_pod_change(pod, matching, relabelled) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_pod_change(pod, matching, MakePod().name("a").uid("uid-default-a")
                                                             .labels({"foo": "bar", "v": "1"}).node("node1").obj()) \
        == QueueingHint.QUEUE_SKIP


def test_pod_hint_the_pod_gaining_a_toleration_queues_only_when_a_constraint_honors_taints():
    pl = pts.new({}, new_handle())
    honoring = MakePod().name("pending").uid("uid-pending").labels(FOO_BAR).obj()
    spread(honoring, node_taints_policy="Honor")
    tolerating = core_pb2.Pod()
    tolerating.CopyFrom(honoring)
    tolerating.spec.tolerations.add(key="dedicated", operator="Exists")
    assert pl.is_schedulable_after_pod_change(honoring, honoring, tolerating) == QueueingHint.QUEUE
    ignoring = pending()
    tolerating2 = core_pb2.Pod()
    tolerating2.CopyFrom(ignoring)
    tolerating2.spec.tolerations.add(key="dedicated", operator="Exists")
    assert pl.is_schedulable_after_pod_change(ignoring, ignoring, tolerating2) == QueueingHint.QUEUE_SKIP


def test_node_hint_add_and_delete_queue_only_for_nodes_with_every_topology_key():
    pl = pts.new({}, new_handle())
    pod = pending()
    assert pl.is_schedulable_after_node_change(pod, None, MakeNode().name("n").label("node", "n").label("zone", "zoneC")
                                                          .allocatable(cpu="4", memory="8Gi", pods="110")
                                                          .obj()) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(pod, MakeNode().name("n").label("node", "n").label("zone", "zoneC")
                                                    .allocatable(cpu="4", memory="8Gi", pods="110")
                                                    .obj(), None) == QueueingHint.QUEUE
    assert pl.is_schedulable_after_node_change(pod, None, MakeNode().name("n").labels({"zone-typo": "zoneC"})
                                                          .allocatable(cpu="4", memory="8Gi", pods="110")
                                                          .obj()) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(pod, MakeNode().name("n").labels({"zone-typo": "zoneC"})
                                                    .allocatable(cpu="4", memory="8Gi", pods="110")
                                                    .obj(), None) == QueueingHint.QUEUE_SKIP


def test_node_hint_a_node_the_pod_cannot_use_and_no_constraint_counts_skips():
    """Zone C excluded by the pod's node affinity (Honor): such a node neither counts nor hosts the
    pod. With nodeAffinityPolicy Ignore it counts (a new domain for minDomains), so it queues."""
    pl = pts.new({}, new_handle())
    honor = pending()
    not_in_zone_c(honor)
    assert pl.is_schedulable_after_node_change(honor, None, MakeNode().name("n").label("node", "n")
                                                            .label("zone", "zoneC")
                                                            .allocatable(cpu="4", memory="8Gi", pods="110")
                                                            .obj()) == QueueingHint.QUEUE_SKIP
    assert pl.is_schedulable_after_node_change(honor, None, MakeNode().name("n").label("node", "n")
                                                            .label("zone", "zoneB")
                                                            .allocatable(cpu="4", memory="8Gi", pods="110")
                                                            .obj()) == QueueingHint.QUEUE
    ignore = MakePod().name("pending").uid("uid-pending").labels(FOO_BAR).obj()
    spread(ignore, node_affinity_policy="Ignore", min_domains=3)
    not_in_zone_c(ignore)
    assert pl.is_schedulable_after_node_change(ignore, None, MakeNode().name("n").label("node", "n")
                                                             .label("zone", "zoneC")
                                                             .allocatable(cpu="4", memory="8Gi", pods="110")
                                                             .obj()) == QueueingHint.QUEUE


def test_node_hint_updates_queue_when_the_domain_or_taints_change():
    pl = pts.new({}, new_handle())
    pod = pending()
    a = (MakeNode().name("n").label("node", "n").label("zone", "zoneA")
         .allocatable(cpu="4", memory="8Gi", pods="110").obj())
    cases = [
        (a, MakeNode().name("n").label("node", "n").label("zone", "zoneB")
            .allocatable(cpu="4", memory="8Gi", pods="110").obj(), QueueingHint.QUEUE),  # moved to another domain
        (MakeNode().name("n").labels({"node": "n"})
         .allocatable(cpu="4", memory="8Gi", pods="110").obj(), a, QueueingHint.QUEUE),  # gained the topology key
        (a, MakeNode().name("n").labels({"node": "n"})
            .allocatable(cpu="4", memory="8Gi", pods="110").obj(), QueueingHint.QUEUE),  # lost it
        (a, MakeNode().name("n").labels({"node": "n", "zone": "zoneA"}).allocatable(cpu="4", memory="8Gi", pods="110")
            .taint("k", "v", "NoSchedule").obj(), QueueingHint.QUEUE),  # taints
        (a, MakeNode().name("n").label("node", "n").label("zone", "zoneA").label("disk", "ssd")
            .allocatable(cpu="4", memory="8Gi", pods="110").obj(), QueueingHint.QUEUE_SKIP),  # an unrelated label
        (MakeNode().name("n").labels({"node": "n"}).allocatable(cpu="4", memory="8Gi", pods="110").obj(),
         MakeNode().name("n").labels({"node": "n", "disk": "ssd"}).allocatable(cpu="4", memory="8Gi", pods="110").obj(),
         QueueingHint.QUEUE_SKIP),  # no key
    ]
    for old, new, hint in cases:
        assert pl.is_schedulable_after_node_change(pod, old, new) == hint, (dict(old.metadata.labels),
                                                                            dict(new.metadata.labels))


def test_node_hint_a_label_making_the_node_match_the_pods_affinity_queues():
    pl = pts.new({}, new_handle())
    pod = pending()
    pod.spec.node_selector["disk"] = "ssd"
    assert pl.is_schedulable_after_node_change(pod,
                                               MakeNode().name("n").label("node", "n").label("zone", "zoneA")
                                               .allocatable(cpu="4", memory="8Gi", pods="110").obj(),
                                               MakeNode().name("n").label("node", "n").label("zone", "zoneA")
                                               .label("disk", "ssd")
                                               .allocatable(cpu="4", memory="8Gi", pods="110").obj()) \
        == QueueingHint.QUEUE
