"""The garbage collector, the namespace controller and the disruption controller over real processes
(an apiserver on etcd, two kubelets, a controller-manager running only these and podgc, so no
replicaset or deployment controller acts on the ReplicaSets made here: their pods are made by hand
with ownerReferences, as Kubernetes' garbage collector tests do).

Kubernetes docs, "Garbage Collection" / "Use Cascading Deletion in the Cluster": background
deletion removes the owner at once and the dependents after it; foreground deletion keeps the owner,
marked for deletion with the foregroundDeletion finalizer, until its blocking dependents are gone;
orphan keeps the dependents. "Namespaces": a deleted namespace is Terminating until its content is
gone. "Specifying a Disruption Budget for your Application" and "API-initiated Eviction": a budget's
status says how many disruptions are allowed, and the eviction API honours it.
"""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import Message

from machinery import errors, jsonconv
from machinery.api import apps_pb2, core_pb2, policy_pb2
from machinery.client import Client
from machinery.kinds import for_api_kind
from tests.harness.builders import MakePod, make_pdb
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.wait import eventually, wait_deleted, wait_running

pytestmark = pytest.mark.integration

kcluster = cluster_fixture(nodes=2, controller_managers=1, kubelet_args=FAST_KUBELET,
                           controller_manager_args=["--controllers=garbagecollector,namespace,disruption,podgc",
                                                    "--leader-elect=false"])


def replica_set(name: str, replicas: int, namespace: str = "default",
                owner: apps_pb2.Deployment | None = None) -> apps_pb2.ReplicaSet:
    """A ReplicaSet of app ``name`` (no controller makes its pods here), owned by ``owner`` if given."""
    containers = [{"name": "c1", "image": "registry.k8s.io/pause:3.10"}]
    doc: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                           "metadata": {"name": name, "namespace": namespace},
                           "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                    "template": {"metadata": {"labels": {"app": name}},
                                                 "spec": {"containers": containers}}}}
    if owner is not None:
        doc["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "Deployment",
                                               "name": owner.metadata.name, "uid": owner.metadata.uid,
                                               "controller": True, "blockOwnerDeletion": True}]
    return jsonconv.from_dict(apps_pb2.ReplicaSet, doc)


def deployment(name: str, replicas: int) -> apps_pb2.Deployment:
    containers = [{"name": "c1", "image": "registry.k8s.io/pause:3.10"}]
    return jsonconv.from_dict(apps_pb2.Deployment, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": containers}}}})


async def pods_of(client: Client, rs: apps_pb2.ReplicaSet, *names: str, node: str = "node-1",
                  block: bool | None = True) -> list[core_pb2.Pod]:
    """Pods of ``rs`` as its controller would make them: its labels, its controller reference."""
    app = rs.spec.selector.match_labels["app"]
    out = []
    for name in names:
        out.append(await client.pods.create(
            MakePod().name(name).namespace(rs.metadata.namespace).label("app", app).node(node).grace(1)
            .owner("ReplicaSet", rs.metadata.name, rs.metadata.uid, block_owner_deletion=block).obj()))
    return out


async def gone(client: Client, kind_name: str, name: str, namespace: str = "default") -> bool:
    kind = for_api_kind(*kind_name.split(":"))
    try:
        await client.resource(kind).get(name, namespace)
    except errors.NotFound:
        return True
    return False


async def history_of(client: Client, kind: str, name: str, namespace: str = "default") -> list[
        tuple[int, str, Message]]:
    """The object's revisions in the cluster's history: (revision, ADDED|MODIFIED|DELETED, object)."""
    out = []
    async for resp in client.history():
        for e in resp.entries:
            if e.kind == kind and e.name == name and e.namespace == namespace:
                obj = for_api_kind("", kind).message()
                e.object.Unpack(obj)
                out.append((e.rev, e.type, obj))
    return out


RS, NS, PDB = "apps/v1:ReplicaSet", "v1:Namespace", "policy/v1:PodDisruptionBudget"


# ---------------------------------------------------------------- garbage collector


async def test_background_deletion_removes_the_owner_at_once_and_its_dependents_after(client):
    rs = await client.replica_sets.create(replica_set("bg", 2))
    keeper = await client.replica_sets.create(replica_set("keeper", 1))
    await pods_of(client, rs, "bg-0", "bg-1")
    shared = await client.pods.create(
        MakePod().name("bg-shared").label("app", "bg").node("node-2").grace(1)
        .owner("ReplicaSet", "bg", rs.metadata.uid, controller=False)
        .owner("ReplicaSet", "keeper", keeper.metadata.uid, controller=False).obj())
    await wait_running(client, "bg-0", "bg-1", "bg-shared")

    await client.replica_sets.delete("bg")  # no policy: Background, the default of apps/v1 ReplicaSets
    assert await gone(client, RS, "bg"), "background: the owner goes at once"
    await wait_deleted(client, "bg-0")
    await wait_deleted(client, "bg-1")

    async def only_keeper_left() -> bool:
        pod = await client.pods.get("bg-shared")
        return [r.name for r in pod.metadata.owner_references] == ["keeper"]
    await eventually(only_keeper_left, timeout=15, what="bg-shared's reference to the deleted owner removed")
    pod = await client.pods.get("bg-shared")
    assert pod.metadata.uid == shared.metadata.uid and not pod.metadata.deletion_timestamp, \
        "an object with an owner left is kept"


async def test_foreground_deletion_keeps_the_owner_until_its_blocking_dependents_are_gone(kcluster, client):
    rs = await client.replica_sets.create(replica_set("fg", 2))
    await pods_of(client, rs, "fg-0", block=True)
    await pods_of(client, rs, "fg-1", node="node-2", block=False)
    await wait_running(client, "fg-0", "fg-1")

    out = kcluster.kplane("delete", "rs", "fg", "--cascade=foreground")
    assert out.returncode == 0, out.stderr
    await eventually(lambda: gone(client, RS, "fg"), timeout=30, what="fg removed once its dependents are gone")
    assert await gone(client, "v1:Pod", "fg-0") and await gone(client, "v1:Pod", "fg-1"), \
        "foreground: every dependent is deleted"
    revisions = await history_of(client, "ReplicaSet", "fg")
    (_, _, marked), (removed, _, _) = [r for r in revisions if r[1] == "MODIFIED"][-1], revisions[-1]
    assert isinstance(marked, apps_pb2.ReplicaSet)
    assert marked.metadata.deletion_timestamp and list(marked.metadata.finalizers) == ["foregroundDeletion"], \
        "the owner was kept, marked, with the foregroundDeletion finalizer"
    blocking = (await history_of(client, "Pod", "fg-0"))[-1]
    assert blocking[1] == "DELETED" and revisions[-1][1] == "DELETED" and blocking[0] < removed, \
        "the blocking dependent went before its owner"


async def test_orphan_deletion_keeps_the_dependents_without_their_reference_to_the_owner(kcluster, client):
    rs = await client.replica_sets.create(replica_set("or", 2))
    await pods_of(client, rs, "or-0", "or-1")
    out = kcluster.kplane("delete", "rs", "or", "--cascade=orphan")
    assert out.returncode == 0, out.stderr
    await eventually(lambda: gone(client, RS, "or"), timeout=20, what="or removed after orphaning its pods")
    for name in ("or-0", "or-1"):
        pod = await client.pods.get(name)
        assert not pod.metadata.owner_references and not pod.metadata.deletion_timestamp


async def test_an_object_whose_owner_does_not_exist_or_has_another_uid_is_collected(client):
    real = await client.replica_sets.create(replica_set("real", 1))
    await client.pods.create(MakePod().name("stray-uid").label("app", "none").node("node-1").grace(1)
                             .owner("ReplicaSet", "real", "00000000-0000-0000-0000-000000000000").obj())
    await client.pods.create(MakePod().name("stray-ghost").label("app", "none").node("node-1").grace(1)
                             .owner("ReplicaSet", "ghost", "11111111-1111-1111-1111-111111111111").obj())
    await pods_of(client, real, "real-0")
    await wait_deleted(client, "stray-uid")
    await wait_deleted(client, "stray-ghost")
    assert not (await client.pods.get("real-0")).metadata.deletion_timestamp


# ---------------------------------------------------------------- namespace controller


async def test_deleting_a_namespace_removes_its_content_then_the_namespace(client):
    ns = core_pb2.Namespace(api_version="v1", kind="Namespace")
    ns.metadata.name = "team-a"
    await client.namespaces.create(ns)
    for i, node in enumerate(("node-1", "node-2")):
        await client.pods.create(MakePod().name(f"web-{i}").namespace("team-a").label("app", "web").node(node)
                                 .grace(1).obj())
    await client.pod_disruption_budgets.create(make_pdb("web", {"app": "web"}, min_available="1", namespace="team-a"))
    held = make_pdb("held", {"app": "other"}, min_available="1", namespace="team-a")
    held.metadata.finalizers.append("example.com/hold")
    await client.pod_disruption_budgets.create(held)
    await client.replica_sets.create(replica_set("rs", 0, namespace="team-a"))

    await client.namespaces.delete("team-a")

    only_held = "Some resources are remaining: poddisruptionbudgets.policy has 1 resource instances"

    async def held_up() -> bool:
        got = await client.namespaces.get("team-a")
        conds = {c.type: c.message for c in got.status.conditions}
        return conds.get("NamespaceContentRemaining") == only_held
    await eventually(held_up, timeout=30, what="team-a's conditions saying only the held budget remains")
    got = await client.namespaces.get("team-a")
    conds = {c.type: (c.status, c.reason, c.message) for c in got.status.conditions}
    assert got.status.phase == "Terminating" and list(got.spec.finalizers) == ["kubernetes"]
    assert conds["NamespaceContentRemaining"] == ("True", "SomeResourcesRemain", only_held)
    assert conds["NamespaceFinalizersRemaining"] == (
        "True", "SomeFinalizersRemain", "Some content in the namespace has finalizers remaining: example.com/hold in "
        "1 resource instances")
    assert conds["NamespaceDeletionDiscoveryFailure"] == ("False", "ResourcesDiscovered",
                                                          "All resources successfully discovered")
    assert conds["NamespaceDeletionContentFailure"] == (
        "False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization")
    assert not (await client.pods.list("team-a")).items, "its pods went"
    assert [p.metadata.name for p in (await client.pod_disruption_budgets.list("team-a")).items] == ["held"]
    assert not (await client.replica_sets.list("team-a")).items

    await client.pod_disruption_budgets.patch("held", {"metadata": {"finalizers": None}}, namespace="team-a",
                                              patch_type="merge")
    await eventually(lambda: gone(client, NS, "team-a", ""), timeout=30, what="team-a removed once empty")


# ---------------------------------------------------------------- disruption controller and eviction


async def _status(client: Client, name: str, **want: int) -> policy_pb2.PodDisruptionBudget:
    """Until the budget's status has the numbers wanted (and is of its generation); the budget."""
    box: dict[str, policy_pb2.PodDisruptionBudget] = {}

    async def check() -> bool:
        box["pdb"] = pdb = await client.pod_disruption_budgets.get(name)
        st = pdb.status
        return st.observed_generation == pdb.metadata.generation and all(
            getattr(st, field) == value for field, value in want.items())
    await eventually(check, timeout=20, what=f"{name}'s status {want}")
    return box["pdb"]


def _allowed_condition(pdb: Message) -> tuple[str, str]:
    assert isinstance(pdb, policy_pb2.PodDisruptionBudget)
    c = next(c for c in pdb.status.conditions if c.type == "DisruptionAllowed")
    return c.status, c.reason


async def test_pdb_status_for_an_integer_min_available_counts_the_pods_it_selects(client):
    for i in range(3):
        await client.pods.create(MakePod().name(f"db-{i}").label("app", "db").node(f"node-{i % 2 + 1}").grace(1)
                                 .obj())
    await wait_running(client, "db-0", "db-1", "db-2")
    await client.pod_disruption_budgets.create(make_pdb("db", {"app": "db"}, min_available="2"))
    pdb = await _status(client, "db", expected_pods=3, current_healthy=3, desired_healthy=2, disruptions_allowed=1)
    assert _allowed_condition(pdb) == ("True", "SufficientPods")


async def test_pdb_status_for_a_percentage_is_of_the_controllers_scale(client):
    rs = await client.replica_sets.create(replica_set("pct", 4))
    await pods_of(client, rs, "pct-0", "pct-1")
    await wait_running(client, "pct-0", "pct-1")
    await client.pod_disruption_budgets.create(make_pdb("pct", {"app": "pct"}, min_available="50%"))
    # The ReplicaSet wants 4: 50% is 2 healthy, and the 2 there are all needed.
    pdb = await _status(client, "pct", expected_pods=4, current_healthy=2, desired_healthy=2, disruptions_allowed=0)
    assert _allowed_condition(pdb) == ("False", "InsufficientPods")
    await client.replica_sets.scale("pct", 2)  # the budget follows its controller's scale
    pdb = await _status(client, "pct", expected_pods=2, current_healthy=2, desired_healthy=1, disruptions_allowed=1)
    assert _allowed_condition(pdb) == ("True", "SufficientPods")

    # maxUnavailable through a Deployment: its scale, not its ReplicaSet's, counts.
    dep = await client.deployments.create(deployment("dep", 3))
    dep_rs = await client.replica_sets.create(replica_set("dep", 1, owner=dep))
    await pods_of(client, dep_rs, "dep-0", "dep-1")
    await wait_running(client, "dep-0", "dep-1")
    await client.pod_disruption_budgets.create(make_pdb("dep", {"app": "dep"}, max_unavailable="1"))
    await _status(client, "dep", expected_pods=3, current_healthy=2, desired_healthy=2, disruptions_allowed=0)


async def test_eviction_is_refused_while_the_budget_allows_none_and_allowed_when_it_allows_one(kcluster, client):
    for i in range(2):
        await client.pods.create(MakePod().name(f"ev-{i}").label("app", "ev").node("node-1").grace(1).obj())
    await wait_running(client, "ev-0", "ev-1")
    await client.pod_disruption_budgets.create(make_pdb("ev", {"app": "ev"}, min_available="2"))
    await _status(client, "ev", current_healthy=2, desired_healthy=2, disruptions_allowed=0)

    out = kcluster.kplane("evict", "pod", "ev-0")
    assert out.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget ev needs 2 " \
           "healthy pods and has 2 currently" in out.stderr
    assert not (await client.pods.get("ev-0")).metadata.deletion_timestamp

    await client.pods.create(MakePod().name("ev-2").label("app", "ev").node("node-2").grace(1).obj())
    await wait_running(client, "ev-2")
    await _status(client, "ev", current_healthy=3, disruptions_allowed=1)
    out = kcluster.kplane("evict", "pod", "ev-0")
    assert out.returncode == 0, out.stderr
    # The eviction's one status write: a disruption fewer allowed, and the pod in disruptedPods.
    states = [obj.status for _, kind, obj in await history_of(client, "PodDisruptionBudget", "ev")
              if kind == "MODIFIED" and isinstance(obj, policy_pb2.PodDisruptionBudget)]
    written = [i for i, st in enumerate(states) if "ev-0" in st.disrupted_pods]
    assert written, "the eviction records the pod in the budget's status"
    first = written[0]
    assert states[first].disruptions_allowed == 0 and states[first - 1].disruptions_allowed == 1
    with pytest.raises(errors.TooManyRequests, match="would violate the pod's disruption budget"):
        await client.pods.evict("ev-1")  # the one allowed disruption is spent
    await wait_deleted(client, "ev-0")
    pdb = await _status(client, "ev", current_healthy=2, disruptions_allowed=0)
    assert "ev-0" not in pdb.status.disrupted_pods, "the controller drops an entry once its pod is deleted"
