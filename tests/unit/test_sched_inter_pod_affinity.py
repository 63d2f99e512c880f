"""InterPodAffinity: Kubernetes docs: Assigning Pods to Nodes, "Inter-pod affinity and
anti-affinity" — the with-pod-affinity Pod over zones, the first pod of a self-affine group,
namespaces and namespaceSelector, matchLabelKeys / mismatchLabelKeys, the redis-cache / web-server
Deployments on three nodes — plus existing pods' anti-affinity, scoring, the PreFilter extensions
preemption uses (Kubernetes docs: Pod Priority and Preemption),
the QueueingHints and the args. Manifests are the document's, loaded as the apiserver would."""

from __future__ import annotations

import pytest
import yaml

from machinery import jsonconv
from machinery.api import core_pb2
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.interfaces import Services
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.runtime import Framework, PluginSets, new_handle
from scheduler.framework.types import NODE, POD, ActionType, ClusterEvent, Code, CycleState, QueueingHint
from scheduler.plugins import inter_pod_affinity as ipa
from tests.harness.builders import MakeNode, MakePod
from tests.harness.fixtures import fixture

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"

AFFINITY_RULES = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

# ---------------------------------------------- Kubernetes docs: Assigning Pods to Nodes, manifests

WITH_POD_AFFINITY = fixture("pod-with-pod-affinity.yaml")

REDIS_CACHE = fixture("redis-cache.yaml")

WEB_SERVER = fixture("web-server.yaml")

APPLICATION_SERVER = fixture("application-server.yaml")

# The document's tenant Pod. Its podAffinity term has matchLabelKeys but no labelSelector, which
# the apiserver refuses ("matchLabelKeys: Forbidden: must not be specified when labelSelector is
# not set"); here it gets the empty selector ({}: every pod), so the term means "pods of my tenant".
TENANT_A = fixture("tenant-a.yaml")


# ---------------------------------------------------------------- builders


def pod_from(manifest: str, name: str, *, namespace: str = "default", labels: dict | None = None,
             node: str = "") -> core_pb2.Pod:
    """A Pod from a Pod manifest, or from a Deployment's template (named like a replica)."""
    doc = yaml.safe_load(manifest)
    if doc.get("kind") == "Deployment":
        template = doc["spec"]["template"]
        doc = {"metadata": dict(template.get("metadata") or {}), "spec": template["spec"]}
    meta = dict(doc.get("metadata") or {})
    meta.update(name=name, namespace=namespace, uid=f"uid-{namespace}-{name}")
    meta["labels"] = {**(meta.get("labels") or {}), **(labels or {})}
    spec = dict(doc["spec"])
    if node:
        spec["nodeName"] = node
    return jsonconv.from_dict(core_pb2.Pod, {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def with_affinity(name: str, affinity: dict, labels: dict | None = None, *, namespace: str = "default",
                  node: str = "") -> core_pb2.Pod:
    manifest = yaml.safe_dump({"spec": {"affinity": affinity,
                                        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})
    return pod_from(manifest, name, namespace=namespace, labels=labels, node=node)


def term(topology_key: str, **match_labels) -> dict:
    return {"labelSelector": {"matchLabels": match_labels}, "topologyKey": topology_key}


def zoned(name: str, zone: str) -> NodeInfo:
    n = MakeNode().name(name).label(HOSTNAME, name).allocatable(cpu="4", memory="8Gi", pods="110").obj()
    n.metadata.labels[ZONE] = zone
    return NodeInfo(n)


def place(ni: NodeInfo, *pods: core_pb2.Pod) -> NodeInfo:
    for p in pods:
        p.spec.node_name = ni.name
        ni.add_pod(p)
    return ni


def plugin(nodes: list[NodeInfo], args: dict | None = None) -> ipa.InterPodAffinity:
    services = Services(snapshot=Snapshot.of(nodes))
    return ipa.new(args or {}, new_handle(services))


def filter_all(pl: ipa.InterPodAffinity, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> dict:
    """Node name -> Filter status (None: fits); the PreFilter status under "" when not success."""
    state = CycleState()
    _, status = pl.pre_filter(state, pod, nodes)
    if status is not None:
        return {"": status}
    return {ni.name: pl.filter(state, pod, ni) for ni in nodes}


def feasible(pl, pod, nodes) -> list[str]:
    result = filter_all(pl, pod, nodes)
    if "" in result:
        assert result[""].code == Code.SKIP
        return [ni.name for ni in nodes]
    return [name for name, st in result.items() if st is None]


def scores(pl: ipa.InterPodAffinity, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> dict[str, int] | None:
    """Node name -> normalized score, or None when PreScore says Skip."""
    state = CycleState()
    status = pl.pre_score(state, pod, nodes)
    if status is not None:
        assert status.code == Code.SKIP, status
        return None
    raw = []
    for ni in nodes:
        s, st = pl.score(state, pod, ni)
        assert st is None
        raw.append(s)
    assert pl.normalize_score(state, pod, [ni.name for ni in nodes], raw) is None
    return {ni.name: s for ni, s in zip(nodes, raw, strict=True)}


class _Fifo:
    """The queueSort and bind a profile needs, doing nothing."""

    def less(self, a, b) -> bool:
        return False

    async def bind(self, state, pod, node_name):
        return None


def framework_for(nodes: list[NodeInfo]) -> Framework:
    """A profile of InterPodAffinity alone, run by the real framework runtime."""
    services = Services(snapshot=Snapshot.of(nodes))
    sets = PluginSets(multi_point=["Fifo", ipa.NAME])
    return Framework("default-scheduler", sets, {"Fifo": lambda args, h: _Fifo(), ipa.NAME: ipa.new}, services)


def schedule_one(nodes: list[NodeInfo], pod: core_pb2.Pod) -> str | None:
    """One scheduling cycle: PreFilter, Filter, PreScore, Score; the best node (first on ties), bound."""
    fw = framework_for(nodes)
    state = CycleState()
    _, status, _ = fw.run_pre_filter_plugins(state, pod, nodes)
    if status is not None:
        return None
    fits = [ni for ni in nodes if fw.run_filter_plugins(state, pod, ni) is None]
    if not fits:
        return None
    assert fw.run_pre_score_plugins(state, pod, fits) is None
    totals, status = fw.run_score_plugins(state, pod, fits)
    assert status is None
    best = fits[totals.index(max(totals))]
    place(best, pod)
    return best.name


# ------------------------------- Kubernetes docs: Assigning Pods to Nodes, the pod affinity example


def test_004_with_pod_affinity_goes_only_to_zones_that_have_a_security_s1_pod():
    """"the scheduler can assign the Pod to any node within Zone V, as long as there is at least
    one Pod within Zone V already labeled with security=S1" — and to no node of a zone without one."""
    v1 = place(zoned("v1", "V"), MakePod().name("s1").uid("uid-default-s1").labels({"security": "S1"})
                                 .container("c").obj())
    v2 = zoned("v2", "V")
    w1 = place(zoned("w1", "W"), MakePod().name("s2").uid("uid-default-s2").labels({"security": "S2"})
                                 .container("c").obj())
    unzoned = NodeInfo(MakeNode().name("bare").label(HOSTNAME, "bare")
                       .allocatable(cpu="4", memory="8Gi", pods="110").obj())
    nodes = [v1, v2, w1, unzoned]
    result = filter_all(plugin(nodes), pod_from(WITH_POD_AFFINITY, "with-pod-affinity"), nodes)
    assert result["v1"] is None and result["v2"] is None
    for name in ("w1", "bare"):
        assert result[name].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # no preemption can add a peer
        assert result[name].reasons == [AFFINITY_RULES]


def test_004_with_pod_affinity_is_pending_while_no_security_s1_pod_exists():
    """The pod does not carry security=S1 itself, so the first-pod rule does not apply to it."""
    nodes = [zoned("v1", "V"), zoned("r1", "R")]
    result = filter_all(plugin(nodes), pod_from(WITH_POD_AFFINITY, "with-pod-affinity"), nodes)
    assert [st.reasons for st in result.values()] == [[AFFINITY_RULES], [AFFINITY_RULES]]


def test_004_with_pod_affinity_prefers_avoiding_zone_r_with_a_security_s2_pod():
    """"the scheduler should try to avoid scheduling the Pod on a node if that node belongs to
    [...] Zone R [...] as long as there is at least one Pod within Zone R already labeled with
    security=S2" (weight 100)."""
    v1 = place(zoned("v1", "V"), MakePod().name("s1-v").uid("uid-default-s1-v").labels({"security": "S1"})
                                 .container("c").obj())
    r1 = place(zoned("r1", "R"),
               MakePod().name("s1-r").uid("uid-default-s1-r").labels({"security": "S1"}).container("c").obj(),
               MakePod().name("s2-r").uid("uid-default-s2-r").labels({"security": "S2"}).container("c").obj())
    r2 = zoned("r2", "R")
    nodes = [v1, r1, r2]
    pl = plugin(nodes)
    pod = pod_from(WITH_POD_AFFINITY, "with-pod-affinity")
    assert feasible(pl, pod, nodes) == ["v1", "r1", "r2"]
    assert scores(pl, pod, nodes) == {"v1": 100, "r1": 0, "r2": 0}
    assert schedule_one(nodes, pod) == "v1"


def test_004_without_security_s2_pods_zone_r_is_not_avoided():
    """"the anti-affinity rule does not impact scheduling into Zone R if there are no Pods with
    security=S2 labels": nothing to score, PreScore skips."""
    v1 = place(zoned("v1", "V"), MakePod().name("s1-v").uid("uid-default-s1-v").labels({"security": "S1"})
                                 .container("c").obj())
    r1 = place(zoned("r1", "R"), MakePod().name("s1-r").uid("uid-default-s1-r").labels({"security": "S1"})
                                 .container("c").obj())
    nodes = [v1, r1]
    assert scores(plugin(nodes), pod_from(WITH_POD_AFFINITY, "with-pod-affinity"), nodes) is None


# ------------------------ Kubernetes docs: Assigning Pods to Nodes, a group with affinity to itself


def test_004_first_pod_of_a_self_affine_group_goes_anywhere_the_topology_key_exists():
    """"it is allowed to be scheduled if [...] no other pod in the cluster matches the namespace
    and selector of this pod, [...] the pod matches its own terms, and the chosen node matches
    all requested topologies"."""
    nodes = [zoned("v1", "V"), zoned("r1", "R"), NodeInfo(MakeNode().name("bare").label(HOSTNAME, "bare")
                                                          .allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    pl = plugin(nodes)
    group = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="group")]}}
    first = with_affinity("group-0", group, {"app": "group"})
    result = filter_all(pl, first, nodes)
    assert result["v1"] is None and result["r1"] is None
    assert result["bare"].reasons == [AFFINITY_RULES]  # no zone label: no topology to join
    # A pod that would not be its own peer gets no such pass.
    outsider = with_affinity("outsider", group, {"app": "other"})
    assert feasible(pl, outsider, nodes) == []


def test_004_the_rest_of_a_self_affine_group_follows_the_first_pod():
    nodes = [zoned("v1", "V"), zoned("v2", "V"), zoned("r1", "R")]
    group = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="group")]}}
    place(nodes[2], with_affinity("group-0", group, {"app": "group"}))
    assert feasible(plugin(nodes), with_affinity("group-1", group, {"app": "group"}), nodes) == ["r1"]


def test_004_only_one_pod_must_satisfy_all_affinity_terms():
    """Required affinity terms are ANDed on one existing pod: a zone with an app=a pod on one node
    and a tier=db pod on another does not satisfy {app=a} and {tier=db} both."""
    both = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="a"), term(HOSTNAME, tier="db")]}}
    split = [place(zoned("v1", "V"), MakePod().name("a").uid("uid-default-a").labels({"app": "a"})
                                     .container("c").obj()),
             place(zoned("v2", "V"), MakePod().name("db").uid("uid-default-db").labels({"tier": "db"})
                                     .container("c").obj())]
    assert feasible(plugin(split), with_affinity("p", both), split) == []
    together = [place(zoned("v1", "V"), MakePod().name("a-db").uid("uid-default-a-db")
                                        .labels({"app": "a", "tier": "db"}).container("c").obj()), zoned("v2", "V")]
    assert feasible(plugin(together), with_affinity("p", both), together) == ["v1"]  # its host, in its zone


# ---------------------------------------------------------------- anti-affinity, both directions


def test_the_pods_anti_affinity_keeps_it_out_of_domains_with_pods_it_repels():
    nodes = [place(zoned("v1", "V"), MakePod().name("web-0").uid("uid-default-web-0").labels({"app": "web"})
                                     .container("c").obj()), zoned("v2", "V"), zoned("r1", "R")]
    pod = with_affinity("web-1", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="web")]}}, {"app": "web"})
    result = filter_all(plugin(nodes), pod, nodes)
    assert result["v1"].code == Code.UNSCHEDULABLE and result["v1"].reasons == [ANTI_AFFINITY_RULES]
    assert result["v2"].reasons == [ANTI_AFFINITY_RULES]  # the whole zone
    assert result["r1"] is None
    bare = [NodeInfo(MakeNode().name("bare").label(HOSTNAME, "bare")
                     .allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    assert filter_all(plugin(bare), pod, bare)["bare"] is None  # a node outside every zone repels nothing


def test_existing_pods_anti_affinity_blocks_a_pod_without_affinity_of_its_own():
    guard = with_affinity("guard", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="web")]}})
    nodes = [place(NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()), guard),
             NodeInfo(MakeNode().name("n2").label(HOSTNAME, "n2").allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    pl = plugin(nodes)
    result = filter_all(pl, MakePod().name("web").uid("uid-default-web").labels({"app": "web"})
                            .container("c").obj(), nodes)
    assert result["n1"].code == Code.UNSCHEDULABLE and result["n1"].reasons == [EXISTING_ANTI_AFFINITY]
    assert result["n2"] is None
    # A pod the guard does not repel, with no terms of its own: nothing to check, Filter is skipped.
    assert filter_all(pl, MakePod().name("db").uid("uid-default-db").labels({"app": "db"})
                          .container("c").obj(), nodes)[""].code == Code.SKIP


def test_prefilter_over_the_whole_snapshot_reads_the_nodes_with_anti_affinity_pods_only_when_it_may():
    guard = with_affinity("guard", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="web")]}})
    nodes = [place(NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()), guard),
             place(NodeInfo(MakeNode().name("n2").label(HOSTNAME, "n2")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()),
                   MakePod().name("db").uid("uid-default-db").labels({"app": "db"}).container("c").obj())]
    pl = plugin(nodes)
    everything = pl.handle.snapshot.node_info_list
    assert pl.handle.snapshot.have_pods_with_required_anti_affinity == [nodes[0]]
    # No terms of its own: only existing pods' anti-affinity matters, found on n1.
    result = filter_all(pl, MakePod().name("web").uid("uid-default-web").labels({"app": "web"})
                            .container("c").obj(), everything)
    assert result["n1"].reasons == [EXISTING_ANTI_AFFINITY] and result["n2"] is None
    # Terms of its own: every node's pods count (the db pod is on n2, which has no anti-affinity pod).
    follower = with_affinity("follower", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="db")]}})
    assert feasible(pl, follower, everything) == ["n2"]


def test_prefilter_skips_when_there_is_nothing_to_check():
    nodes = [place(NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()),
                   MakePod().name("a").uid("uid-default-a").labels({"app": "a"}).container("c").obj())]
    status = filter_all(plugin(nodes), MakePod().name("b").uid("uid-default-b").labels({"app": "b"})
                                       .container("c").obj(), nodes)[""]
    assert status.code == Code.SKIP
    fw = framework_for(nodes)
    state = CycleState()
    assert fw.run_pre_filter_plugins(state, MakePod().name("b").uid("uid-default-b")
                                            .container("c").obj(), nodes) == (None, None, set())
    assert ipa.NAME in state.skip_filter_plugins  # the runtime will not call Filter


# --------------------------------------------- Kubernetes docs: Assigning Pods to Nodes, namespaces


def test_004_terms_default_to_the_pods_own_namespace():
    nodes = [place(zoned("v1", "V"), MakePod().name("db").namespace("other").uid("uid-other-db").labels({"app": "db"})
                                     .container("c").obj()), zoned("r1", "R")]
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="db")]}}, namespace="default")
    assert feasible(plugin(nodes), pod, nodes) == []  # the db pod is in another namespace


def test_004_namespaces_list_names_where_the_selector_looks():
    nodes = [place(zoned("v1", "V"), MakePod().name("db").namespace("other").uid("uid-other-db").labels({"app": "db"})
                                     .container("c").obj()), zoned("r1", "R")]
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**term(ZONE, app="db"), "namespaces": ["other"]}]}})
    assert feasible(plugin(nodes), pod, nodes) == ["v1"]


def test_004_an_empty_namespace_selector_matches_all_namespaces():
    nodes = [place(zoned("v1", "V"), MakePod().name("db").namespace("team-b").uid("uid-team-b-db").labels({"app": "db"})
                                     .container("c").obj()), zoned("r1", "R")]
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**term(ZONE, app="db"), "namespaceSelector": {}}]}})
    assert feasible(plugin(nodes), pod, nodes) == ["v1"]


def test_004_namespace_selector_and_namespaces_are_united():
    """"The affinity term is applied to namespaces selected by both namespaceSelector and the
    namespaces field" — every namespace carries kubernetes.io/metadata.name=<name>."""
    nodes = [place(zoned("a", "A"), MakePod().name("db").namespace("team-a").uid("uid-team-a-db").labels({"app": "db"})
                                    .container("c").obj()),
             place(zoned("b", "B"), MakePod().name("db").namespace("team-b").uid("uid-team-b-db").labels({"app": "db"})
                                    .container("c").obj()),
             place(zoned("c", "C"), MakePod().name("db").namespace("team-c").uid("uid-team-c-db").labels({"app": "db"})
                                    .container("c").obj())]
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**term(ZONE, app="db"), "namespaces": ["team-b"],
         "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "team-a"}}}]}})
    assert feasible(plugin(nodes), pod, nodes) == ["a", "b"]


def test_an_existing_pods_anti_affinity_namespace_selector_is_matched_against_the_pods_namespace():
    guard = with_affinity("guard", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {**term(HOSTNAME, app="web"), "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["prod"]}]}}]}},
        namespace="infra")
    nodes = [place(NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()), guard),
             NodeInfo(MakeNode().name("n2").label(HOSTNAME, "n2").allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    pl = plugin(nodes)
    assert feasible(pl, MakePod().name("web").namespace("prod").uid("uid-prod-web").labels({"app": "web"})
                        .container("c").obj(), nodes) == ["n2"]
    assert feasible(pl, MakePod().name("web").namespace("dev").uid("uid-dev-web").labels({"app": "web"})
                        .container("c").obj(), nodes) == ["n1", "n2"]


# ---------------------- Kubernetes docs: Assigning Pods to Nodes, matchLabelKeys, mismatchLabelKeys


def test_004_match_label_keys_only_pods_of_the_same_rollout_count():
    """application-server: affinity to app=database in the zone, "Only Pods from a given rollout
    are taken into consideration" (matchLabelKeys: pod-template-hash)."""
    nodes = [place(zoned("v1", "V"), MakePod().name("db-old").uid("uid-default-db-old")
                                     .labels({"app": "database", "pod-template-hash": "old"}).container("c").obj()),
             place(zoned("r1", "R"), MakePod().name("db-new").uid("uid-default-db-new")
                                     .labels({"app": "database", "pod-template-hash": "new"}).container("c").obj())]
    pl = plugin(nodes)
    new_replica = pod_from(APPLICATION_SERVER, "application-server-new-1", labels={"pod-template-hash": "new"})
    old_replica = pod_from(APPLICATION_SERVER, "application-server-old-1", labels={"pod-template-hash": "old"})
    assert feasible(pl, new_replica, nodes) == ["r1"]
    assert feasible(pl, old_replica, nodes) == ["v1"]


def test_004_mismatch_label_keys_keep_tenants_in_their_own_node_pools():
    """tenant-a may join the pool where tenant-a runs, never a pool where another tenant runs."""
    pool_a = place(NodeInfo(MakeNode().name("a1").label(HOSTNAME, "a1").label("node-pool", "pool-a")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()),
                   MakePod().name("a-0").uid("uid-default-a-0").labels({"tenant": "tenant-a"}).container("c").obj())
    pool_b = place(NodeInfo(MakeNode().name("b1").label(HOSTNAME, "b1").label("node-pool", "pool-b")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()),
                   MakePod().name("b-0").uid("uid-default-b-0").labels({"tenant": "tenant-b"}).container("c").obj())
    pool_b2 = NodeInfo(MakeNode().name("b2").label(HOSTNAME, "b2").label("node-pool", "pool-b")
                       .allocatable(cpu="4", memory="8Gi", pods="110").obj())
    pool_c = NodeInfo(MakeNode().name("c1").label(HOSTNAME, "c1").label("node-pool", "pool-c")
                      .allocatable(cpu="4", memory="8Gi", pods="110").obj())
    nodes = [pool_a, pool_b, pool_b2, pool_c]
    result = filter_all(plugin(nodes), pod_from(TENANT_A, "tenant-a-1"), nodes)
    assert result["a1"] is None
    assert result["b1"].reasons == [AFFINITY_RULES] and result["b2"].reasons == [AFFINITY_RULES]
    assert result["c1"].reasons == [AFFINITY_RULES]  # a tenant-a pod exists: it must join it
    # With only tenant-b running, the affinity's first-pod rule applies, the anti-affinity still
    # keeps tenant-a out of pool-b.
    nodes = [pool_b, pool_b2, pool_c]
    result = filter_all(plugin(nodes), pod_from(TENANT_A, "tenant-a-1"), nodes)
    assert result["b1"].reasons == [ANTI_AFFINITY_RULES] and result["b2"].reasons == [ANTI_AFFINITY_RULES]
    assert result["c1"] is None


# ------------------------------- Kubernetes docs: Assigning Pods to Nodes, More practical use-cases


def test_004_redis_cache_and_web_server_colocate_one_of_each_per_node():
    """"Creating the two preceding Deployments results in the following cluster layout, where
    each web server is co-located with a cache, on three separate nodes."

        node-1       node-2       node-3
        webserver-1  webserver-2  webserver-3
        cache-1      cache-2      cache-3
    """
    nodes = [NodeInfo(MakeNode().name(n).label(HOSTNAME, n).allocatable(cpu="4", memory="8Gi", pods="110").obj())
             for n in ("node-1", "node-2", "node-3")]
    for i in (1, 2, 3):
        assert schedule_one(nodes, pod_from(REDIS_CACHE, f"cache-{i}")) == f"node-{i}"
    # A fourth cache replica has nowhere to go: each node already has an app=store pod.
    fourth = pod_from(REDIS_CACHE, "cache-4")
    assert {st.reasons[0] for st in filter_all(plugin(nodes), fourth, nodes).values()} == {ANTI_AFFINITY_RULES}
    for i in (1, 2, 3):
        assert schedule_one(nodes, pod_from(WEB_SERVER, f"webserver-{i}")) is not None
    layout = {ni.name: sorted(p.pod.metadata.name for p in ni.pods) for ni in nodes}
    assert layout == {"node-1": ["cache-1", "webserver-1"], "node-2": ["cache-2", "webserver-2"],
                      "node-3": ["cache-3", "webserver-3"]}


def test_004_web_servers_wait_for_a_cache_and_never_share_a_node():
    nodes = [NodeInfo(MakeNode().name(n).label(HOSTNAME, n).allocatable(cpu="4", memory="8Gi", pods="110").obj())
             for n in ("node-1", "node-2", "node-3")]
    # No cache yet: the web server does not carry app=store, so it cannot be the first of a group.
    assert schedule_one(nodes, pod_from(WEB_SERVER, "webserver-1")) is None
    place(nodes[1], pod_from(REDIS_CACHE, "cache-1"))
    assert schedule_one(nodes, pod_from(WEB_SERVER, "webserver-1")) == "node-2"
    result = filter_all(plugin(nodes), pod_from(WEB_SERVER, "webserver-2"), nodes)
    assert result["node-1"].reasons == [AFFINITY_RULES] and result["node-3"].reasons == [AFFINITY_RULES]
    assert result["node-2"].reasons == [ANTI_AFFINITY_RULES]


# ---------------------------------------------------------------- scoring


def preferred(kind: str, weight: int, topology_key: str, **match_labels) -> dict:
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": weight, "podAffinityTerm": term(topology_key, **match_labels)}]}}


def test_preferred_affinity_ranks_nodes_by_the_weight_of_matching_pods_in_their_domain():
    nodes = [place(zoned("v1", "V"),
                   MakePod().name("c1").uid("uid-default-c1").labels({"app": "cache"}).container("c").obj(),
                   MakePod().name("c2").uid("uid-default-c2").labels({"app": "cache"}).container("c").obj()),
             place(zoned("r1", "R"), MakePod().name("c3").uid("uid-default-c3").labels({"app": "cache"})
                                     .container("c").obj()),
             zoned("w1", "W"),
             NodeInfo(MakeNode().name("bare").label(HOSTNAME, "bare")
                      .allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    pod = with_affinity("p", preferred("podAffinity", 10, ZONE, app="cache"))
    # Raw: V 20, R 10, W 0, no zone 0 -> 100, 50, 0, 0.
    assert scores(plugin(nodes), pod, nodes) == {"v1": 100, "r1": 50, "w1": 0, "bare": 0}


def test_preferred_anti_affinity_and_affinity_combine():
    nodes = [place(zoned("v1", "V"),
                   MakePod().name("c").uid("uid-default-c").labels({"app": "cache"}).container("c").obj(),
                   MakePod().name("n").uid("uid-default-n").labels({"app": "noisy"}).container("c").obj()),
             place(zoned("r1", "R"), MakePod().name("c").uid("uid-default-c").labels({"app": "cache"})
                                     .container("c").obj()),
             zoned("w1", "W")]
    pod = with_affinity("p", {**preferred("podAffinity", 30, ZONE, app="cache"),
                              **preferred("podAntiAffinity", 50, ZONE, app="noisy")})
    # Raw: V 30-50 = -20, R 30, W 0 -> (x+20)*100/50: 0, 100, 40.
    assert scores(plugin(nodes), pod, nodes) == {"v1": 0, "r1": 100, "w1": 40}


def test_existing_pods_required_affinity_counts_with_hard_pod_affinity_weight():
    """An existing pod that requires the incoming pod's kind near it draws it there:
    hardPodAffinityWeight per matching term (default 1; 0 turns it off)."""
    fan = with_affinity("fan", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="star")]}})
    nodes = [place(zoned("v1", "V"), fan), zoned("r1", "R")]
    star = MakePod().name("star").uid("uid-default-star").labels({"app": "star"}).container("c").obj()
    assert scores(plugin(nodes), star, nodes) == {"v1": 100, "r1": 0}
    assert scores(plugin(nodes, {"hardPodAffinityWeight": 0}), star, nodes) is None
    # The weight is what the domain scores (normalization hides it unless other terms compete).
    pl = plugin(nodes, {"hardPodAffinityWeight": 7})
    state = CycleState()
    assert pl.pre_score(state, star, nodes) is None
    assert [pl.score(state, star, ni)[0] for ni in nodes] == [7, 0]


def test_existing_pods_preferred_terms_attract_and_repel_unless_ignored():
    likes = with_affinity("likes", preferred("podAffinity", 40, ZONE, app="web"))
    hates = with_affinity("hates", preferred("podAntiAffinity", 20, ZONE, app="web"))
    nodes = [place(zoned("v1", "V"), likes), place(zoned("r1", "R"), hates), zoned("w1", "W")]
    web = MakePod().name("web").uid("uid-default-web").labels({"app": "web"}).container("c").obj()
    # Raw: V 40, R -20, W 0 -> 100, 0, 33.
    assert scores(plugin(nodes), web, nodes) == {"v1": 100, "r1": 0, "w1": 33}
    ignoring = plugin(nodes, {"ignorePreferredTermsOfExistingPods": True})
    assert scores(ignoring, web, nodes) is None  # the pod has no preferred terms: PreScore skips
    # With preferred terms of its own, existing pods' terms count again.
    web_pref = with_affinity("web", preferred("podAffinity", 1, ZONE, app="none"), {"app": "web"})
    assert scores(ignoring, web_pref, nodes) == {"v1": 100, "r1": 0, "w1": 33}


def test_scores_through_the_framework_stay_in_range():
    nodes = [place(zoned("v1", "V"), MakePod().name("c").uid("uid-default-c").labels({"app": "cache"})
                                     .container("c").obj()), zoned("r1", "R")]
    fw = framework_for(nodes)
    pod = with_affinity("p", preferred("podAntiAffinity", 100, ZONE, app="cache"))
    state = CycleState()
    assert fw.run_pre_score_plugins(state, pod, nodes) is None
    assert fw.run_score_plugins(state, pod, nodes) == ([0, 100], None)


# ---------------------------------------------------------------- PreFilter extensions (preemption, nominated pods)


def prefiltered(pl, pod, nodes) -> CycleState:
    state = CycleState()
    assert pl.pre_filter(state, pod, nodes) == (None, None)
    return state


def test_remove_pod_lifts_anti_affinity_and_the_clone_keeps_the_original():
    victim = MakePod().name("victim").uid("uid-default-victim").labels({"app": "web"}).container("c").obj()
    n1 = place(NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                        .allocatable(cpu="4", memory="8Gi", pods="110").obj()), victim)
    nodes = [n1]
    pl = plugin(nodes)
    pod = with_affinity("p", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="web")]}})
    state = prefiltered(pl, pod, nodes)
    simulated = state.clone()
    assert pl.remove_pod(simulated, pod, PodInfo(victim), n1) is None
    assert pl.filter(simulated, pod, n1) is None
    assert pl.filter(state, pod, n1).reasons == [ANTI_AFFINITY_RULES]  # the clone is a deep copy
    assert pl.add_pod(simulated, pod, PodInfo(victim), n1) is None
    assert pl.filter(simulated, pod, n1).reasons == [ANTI_AFFINITY_RULES]


def test_add_pod_counts_a_nominated_pods_anti_affinity_against_the_pod():
    nodes = [NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()),
             NodeInfo(MakeNode().name("n2").label(HOSTNAME, "n2").allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    pl = plugin(nodes)
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="x")]}}, {"app": "x"})  # something to check, so PreFilter does not skip
    for ni in nodes:
        ni.node.metadata.labels[ZONE] = "V"
    state = prefiltered(pl, pod, nodes)
    nominated = with_affinity("nominated", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="x")]}})
    assert pl.add_pod(state, pod, PodInfo(nominated), nodes[0]) is None
    assert pl.filter(state, pod, nodes[0]).reasons == [EXISTING_ANTI_AFFINITY]
    assert pl.filter(state, pod, nodes[1]) is None
    assert pl.remove_pod(state, pod, PodInfo(nominated), nodes[0]) is None
    assert pl.filter(state, pod, nodes[0]) is None


def test_add_pod_of_a_peer_satisfies_affinity():
    nodes = [zoned("v1", "V"), place(zoned("r1", "R"), MakePod().name("db-r").uid("uid-default-db-r")
                                                       .labels({"app": "db"}).container("c").obj())]
    pl = plugin(nodes)
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="db")]}})
    state = prefiltered(pl, pod, nodes)
    assert pl.filter(state, pod, nodes[0]).reasons == [AFFINITY_RULES]
    assert pl.add_pod(state, pod, PodInfo(MakePod().name("db-v").uid("uid-default-db-v").labels({"app": "db"})
                                          .container("c").obj()), nodes[0]) is None
    assert pl.filter(state, pod, nodes[0]) is None


def test_004_s11_affinity_to_a_lower_priority_pod_cannot_survive_its_preemption():
    """Kubernetes docs: Pod Priority and Preemption, "Inter-Pod affinity on lower-priority Pods":
    removing the pods the pending pod has affinity to leaves the affinity unsatisfied on that
    node."""
    low = MakePod().name("low").uid("uid-default-low").labels({"app": "db"}).container("c").obj()
    n1 = place(zoned("n1", "V"), low)
    n2 = place(zoned("n2", "R"), MakePod().name("db-r").uid("uid-default-db-r").labels({"app": "db"})
                                 .container("c").obj())
    nodes = [n1, n2]
    pl = plugin(nodes)
    pod = with_affinity("p", {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="db")]}})
    state = prefiltered(pl, pod, nodes)
    assert pl.filter(state, pod, n1) is None
    simulated = state.clone()
    pl.remove_pod(simulated, pod, PodInfo(low), n1)
    st = pl.filter(simulated, pod, n1)
    assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and st.reasons == [AFFINITY_RULES]


def test_004_s11_no_cross_node_preemption_a_zone_wide_anti_affinity_peer_elsewhere_still_blocks():
    """Kubernetes docs: Pod Priority and Preemption, "Cross node preemption": P has zone
    anti-affinity with Q on another node of N's zone; removing N's own pods does not help, only
    removing Q would."""
    q = MakePod().name("q").uid("uid-default-q").labels({"app": "q"}).container("c").obj()
    n = place(zoned("N", "Z"), MakePod().name("local").uid("uid-default-local").labels({"app": "local"})
                               .container("c").obj())
    other = place(zoned("M", "Z"), q)
    nodes = [n, other]
    pl = plugin(nodes)
    p = with_affinity("p", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="q")]}})
    state = prefiltered(pl, p, nodes)
    simulated = state.clone()
    pl.remove_pod(simulated, p, PodInfo(n.pods[0].pod), n)
    assert pl.filter(simulated, p, n).reasons == [ANTI_AFFINITY_RULES]
    pl.remove_pod(simulated, p, PodInfo(q), other)
    assert pl.filter(simulated, p, n) is None


def test_extensions_without_prefilter_state_are_errors():
    pl = plugin([NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                          .allocatable(cpu="4", memory="8Gi", pods="110").obj())])
    ni = NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    assert pl.add_pod(CycleState(),
                      MakePod().name("p").uid("uid-default-p").container("c").obj(),
                      PodInfo(MakePod().name("q").uid("uid-default-q").container("c").obj()),
                      ni).code == Code.ERROR
    assert pl.remove_pod(CycleState(),
                         MakePod().name("p").uid("uid-default-p").container("c").obj(),
                         PodInfo(MakePod().name("q").uid("uid-default-q").container("c").obj()),
                         ni).code == Code.ERROR


def test_filter_without_prefilter_counts_once_from_the_snapshot():
    guard = with_affinity("guard", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="web")]}})
    nodes = [place(NodeInfo(MakeNode().name("n1").label(HOSTNAME, "n1")
                            .allocatable(cpu="4", memory="8Gi", pods="110").obj()), guard),
             NodeInfo(MakeNode().name("n2").label(HOSTNAME, "n2").allocatable(cpu="4", memory="8Gi", pods="110").obj())]
    pl = plugin(nodes)
    state = CycleState()
    web = MakePod().name("web").uid("uid-default-web").labels({"app": "web"}).container("c").obj()
    assert pl.filter(state, web, nodes[0]).reasons == [EXISTING_ANTI_AFFINITY]
    assert pl.filter(state, web, nodes[1]) is None
    assert pl.filter(state, web, NodeInfo()).code == Code.ERROR  # a NodeInfo whose Node is gone


# ---------------------------------------------------------------- queueing hints


def test_events_registered():
    events = {e.event: e.hint for e in ipa.new({}, new_handle()).events_to_register()}
    pod_event = ClusterEvent(POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE)
    node_event = ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
    assert set(events) == {pod_event, node_event}
    assert all(hint is not None for hint in events.values())


QUEUE, SKIP = QueueingHint.QUEUE, QueueingHint.QUEUE_SKIP


def _hints_plugin() -> ipa.InterPodAffinity:
    return ipa.new({}, new_handle())


WEB_ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOSTNAME, app="web")]}}
DB_AFFINITY = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="db")]}}


def test_hint_an_assigned_peer_added_queues_anything_else_skips():
    pl = _hints_plugin()
    pending = with_affinity("p", DB_AFFINITY)
    assert pl.is_schedulable_after_pod_change(pending, None, MakePod().name("db").uid("uid-default-db")
                                                             .labels({"app": "db"}).container("c")
                                                             .node("n1").obj()) == QUEUE
    assert pl.is_schedulable_after_pod_change(pending, None, MakePod().name("x").uid("uid-default-x")
                                                             .labels({"app": "x"}).container("c")
                                                             .node("n1").obj()) == SKIP
    # Unscheduled pods are in no topology domain.
    assert pl.is_schedulable_after_pod_change(pending, None, MakePod().name("db").uid("uid-default-db")
                                                             .labels({"app": "db"}).container("c").obj()) == SKIP


def test_hint_a_relabelled_pod_queues_when_it_becomes_a_peer_or_stops_being_repelled():
    pl = _hints_plugin()
    pending = with_affinity("p", {**DB_AFFINITY, **WEB_ANTI})
    before = MakePod().name("q").uid("uid-default-q").labels({"app": "x"}).container("c").node("n1").obj()
    after = MakePod().name("q").uid("uid-default-q").labels({"app": "db"}).container("c").node("n1").obj()
    assert pl.is_schedulable_after_pod_change(pending, before, after) == QUEUE
    web = MakePod().name("w").uid("uid-default-w").labels({"app": "web"}).container("c").node("n1").obj()
    no_longer = MakePod().name("w").uid("uid-default-w").labels({"app": "api"}).container("c").node("n1").obj()
    assert pl.is_schedulable_after_pod_change(pending, web, no_longer) == QUEUE
    assert pl.is_schedulable_after_pod_change(pending, no_longer, web) == SKIP
    assert pl.is_schedulable_after_pod_change(pending,
                                              MakePod().name("q").uid("uid-default-q").labels({"app": "x"})
                                              .container("c").node("n1").obj(),
                                              MakePod().name("q").uid("uid-default-q").labels({"app": "y"})
                                              .container("c").node("n1").obj()) == SKIP


def test_hint_a_deleted_pod_queues_when_it_was_an_anti_affinity_obstacle_either_way():
    pl = _hints_plugin()
    pending = with_affinity("p", WEB_ANTI, {"app": "api"})
    assert pl.is_schedulable_after_pod_change(pending, MakePod().name("w").uid("uid-default-w").labels({"app": "web"})
                                                       .container("c").node("n1").obj(), None) == QUEUE
    assert pl.is_schedulable_after_pod_change(pending, MakePod().name("x").uid("uid-default-x").labels({"app": "x"})
                                                       .container("c").node("n1").obj(), None) == SKIP
    # The deleted pod's own anti-affinity repelled the pending pod (kubernetes#134393).
    guard = with_affinity("guard", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(HOSTNAME, app="web")]}}, node="n1")
    assert pl.is_schedulable_after_pod_change(MakePod().name("web").uid("uid-default-web").labels({"app": "web"})
                                              .container("c").obj(), guard, None) == QUEUE
    assert pl.is_schedulable_after_pod_change(MakePod().name("db").uid("uid-default-db").labels({"app": "db"})
                                              .container("c").obj(), guard, None) == SKIP


def test_hint_a_deleted_peer_queues_a_pod_the_first_pod_rule_may_now_admit():
    """A self-affine pod blocked because its only peers sit where it cannot go: once they are gone
    no peer is left and it may go anywhere (kubernetes#141354)."""
    pl = _hints_plugin()
    self_affine = with_affinity("p", DB_AFFINITY, {"app": "db"})
    peer = MakePod().name("db-0").uid("uid-default-db-0").labels({"app": "db"}).container("c").node("n1").obj()
    assert pl.is_schedulable_after_pod_change(self_affine, peer, None) == QUEUE
    not_self = with_affinity("p", DB_AFFINITY, {"app": "web"})
    assert pl.is_schedulable_after_pod_change(not_self, peer, None) == SKIP
    # A peer relabelled away is gone as a peer just the same.
    relabelled = (MakePod().name("db-0").uid("uid-default-db-0").labels({"app": "db-legacy"}).container("c")
                  .node("n1").obj())
    assert pl.is_schedulable_after_pod_change(self_affine, peer, relabelled) == QUEUE
    assert pl.is_schedulable_after_pod_change(not_self, peer, relabelled) == SKIP


def test_hint_node_added_or_relabelled_with_an_affinity_topology_key():
    pl = _hints_plugin()
    pending = with_affinity("p", DB_AFFINITY)
    zoned_node = MakeNode().name("n9").label(HOSTNAME, "n9").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    bare = MakeNode().name("n9").label(HOSTNAME, "n9").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    zoned_node.metadata.labels[ZONE] = "V"
    assert pl.is_schedulable_after_node_change(pending, None, zoned_node) == QUEUE
    assert pl.is_schedulable_after_node_change(pending, None, bare) == SKIP
    assert pl.is_schedulable_after_node_change(pending, bare, zoned_node) == QUEUE  # key gained
    moved = MakeNode().name("n9").label(HOSTNAME, "n9").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    moved.metadata.labels[ZONE] = "R"
    assert pl.is_schedulable_after_node_change(pending, zoned_node, moved) == QUEUE  # domain changed
    relabelled = (MakeNode().name("n9").label(HOSTNAME, "n9").label("team", "x")
                  .allocatable(cpu="4", memory="8Gi", pods="110").obj())
    relabelled.metadata.labels[ZONE] = "V"
    assert pl.is_schedulable_after_node_change(pending, zoned_node, relabelled) == SKIP
    assert pl.is_schedulable_after_node_change(pending, zoned_node, bare) == SKIP  # key lost


def test_hint_node_changes_for_anti_affinity_and_for_existing_pods_anti_affinity():
    pl = _hints_plugin()
    repelling = with_affinity("p", {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        term(ZONE, app="web")]}})
    in_v = MakeNode().name("n1").label(HOSTNAME, "n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    in_r = MakeNode().name("n1").label(HOSTNAME, "n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    bare = MakeNode().name("n1").label(HOSTNAME, "n1").allocatable(cpu="4", memory="8Gi", pods="110").obj()
    in_v.metadata.labels[ZONE] = "V"
    in_r.metadata.labels[ZONE] = "R"
    assert pl.is_schedulable_after_node_change(repelling, None, in_v) == QUEUE  # a new node
    assert pl.is_schedulable_after_node_change(repelling, in_v, in_r) == QUEUE  # left zone V
    assert pl.is_schedulable_after_node_change(repelling, in_v, bare) == QUEUE  # left every zone
    assert pl.is_schedulable_after_node_change(repelling, bare, in_v) == SKIP  # joined one
    # Rejected only by existing pods' anti-affinity: any node event may open a free domain.
    assert pl.is_schedulable_after_node_change(MakePod().name("web").uid("uid-default-web").labels({"app": "web"})
                                               .container("c").obj(), None, bare) == QUEUE


# ---------------------------------------------------------------- args


@pytest.mark.parametrize("args,fragment", [
    ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
    ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight: Invalid value: -1"),
    ({"hardPodAffinityWeight": "5"}, "hardPodAffinityWeight: Invalid value: '5': must be an integer"),
    ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods: Invalid value"),
    ({"hardPodAffinityWieght": 5}, 'unknown field "hardPodAffinityWieght"'),
])
def test_bad_args_are_refused_with_the_field(args, fragment):
    with pytest.raises(ipa.ArgsError) as exc:
        ipa.new(args, new_handle())
    assert fragment in str(exc.value)
    assert isinstance(exc.value, ValueError)


def test_args_defaults_and_accepted_values():
    pl = ipa.new({}, new_handle())
    assert (pl.hard_pod_affinity_weight, pl.ignore_preferred_terms_of_existing_pods) == (1, False)
    pl = ipa.new({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs",
                  "hardPodAffinityWeight": 100, "ignorePreferredTermsOfExistingPods": True}, new_handle())
    assert (pl.hard_pod_affinity_weight, pl.ignore_preferred_terms_of_existing_pods) == (100, True)
