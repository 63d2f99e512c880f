"""Garbage collection without processes: the apiserver's side of propagation (the finalizers a
delete's propagationPolicy gives, Kubernetes' deletionFinalizersForGarbageCollection), kubectl's
--cascade, and the garbage collector's graph and workers over an API played in memory."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.registry import deletion_finalizers
from cli.main import UsageError, cascade_policy
from controllers.garbagecollector.garbagecollector import GarbageCollector
from controllers.garbagecollector.graph import Node, ObjectReference, OwnerRef
from controllers.garbagecollector.graph_builder import (
    alternate_owner_identity,
    partition_dependents,
    references_diffs,
)
from controllers.garbagecollector.uid_cache import AbsentOwnerCache
from machinery.api import apps_pb2, core_pb2
from machinery.kinds import POD, REPLICA_SET
from tests.harness.builders import MakePod
from tests.harness.wait import eventually
from tests.unit.fakes_gc_namespace_disruption import FakeApi


def _rs(*finalizers: str) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet()
    rs.metadata.name = "web"
    rs.metadata.finalizers.extend(finalizers)
    return rs


# ---------------------------------------------------------------- the apiserver's finalizers


@pytest.mark.parametrize("finalizers, policy, want", [
    ((), None, None),  # Background by default: nothing to wait for, removed at once
    ((), "Background", None),
    ((), "Foreground", ["foregroundDeletion"]),
    ((), "Orphan", ["orphan"]),
    (("example.com/keep",), "Orphan", ["example.com/keep", "orphan"]),
    (("orphan",), None, None),  # a finalizer already there decides when no policy is given
    (("foregroundDeletion",), None, None),
    (("orphan",), "Foreground", ["foregroundDeletion"]),  # an explicit policy overrides it
    (("foregroundDeletion",), "Background", []),
    (("example.com/keep", "foregroundDeletion"), "Orphan", ["example.com/keep", "orphan"]),
])
def test_a_deletes_propagation_policy_becomes_the_collectors_finalizer(finalizers, policy, want):
    assert deletion_finalizers(_rs(*finalizers), policy) == want


@pytest.mark.parametrize("flag, want", [("background", "Background"), ("foreground", "Foreground"),
                                        ("orphan", "Orphan"), ("true", "Background"), ("false", "Orphan")])
def test_cascade_is_kubectls_flag(flag, want, capsys):
    assert cascade_policy(flag) == want
    if flag in ("true", "false"):
        assert "is deprecated (boolean value) and can be replaced with --cascade=" in capsys.readouterr().err


def test_an_unknown_cascade_value_is_refused_with_kubectls_message():
    with pytest.raises(UsageError, match=r'invalid cascade value \(all\). Must be "background", "foreground", '
                                         r'or "orphan"'):
        cascade_policy("all")


# ---------------------------------------------------------------- the graph's pure parts


def test_references_diffs_by_uid():
    a, b, c = OwnerRef("apps/v1", "ReplicaSet", "a", "u1"), OwnerRef("apps/v1", "ReplicaSet", "b", "u2"), \
        OwnerRef("apps/v1", "ReplicaSet", "c", "u3")
    b_unblocked = OwnerRef("apps/v1", "ReplicaSet", "b", "u2", block_owner_deletion=False)
    added, removed, changed = references_diffs([a, b], [b_unblocked, c])
    assert added == [c] and removed == [a] and changed == [(b, b_unblocked)]


def test_partition_dependents_by_the_coordinates_they_name_the_owner_with():
    owner = ObjectReference("apps/v1", "ReplicaSet", "web", "u1", "default")
    right = Node(ObjectReference("v1", "Pod", "p1", "p1", "default"), (OwnerRef("apps/v1", "ReplicaSet", "web", "u1"),))
    wrong_name = Node(ObjectReference("v1", "Pod", "p2", "p2", "default"),
                      (OwnerRef("apps/v1", "ReplicaSet", "other", "u1"),))
    elsewhere = Node(ObjectReference("v1", "Pod", "p3", "p3", "team-a"),
                     (OwnerRef("apps/v1", "ReplicaSet", "web", "u1"),))
    matching, nonmatching = partition_dependents([right, wrong_name, elsewhere], owner)
    assert matching == [right] and nonmatching == [wrong_name, elsewhere]
    alt = alternate_owner_identity([right, wrong_name], owner)
    assert alt == ObjectReference("apps/v1", "ReplicaSet", "other", "u1", "default")


def test_the_absent_owner_cache_forgets_the_least_recently_used():
    cache = AbsentOwnerCache(size=2)
    refs = [ObjectReference("apps/v1", "ReplicaSet", n, n, "default") for n in "abc"]
    cache.add(refs[0])
    cache.add(refs[1])
    assert cache.has(refs[0])  # a is used again: b is now the least recent
    cache.add(refs[2])
    assert cache.has(refs[0]) and cache.has(refs[2]) and not cache.has(refs[1])


# ---------------------------------------------------------------- the collector over an API in memory


def _pod(name: str, *owners: tuple[str, str, bool | None], node: str = "") -> core_pb2.Pod:
    """A pod owned by ReplicaSets given as (name, uid, blockOwnerDeletion)."""
    b = MakePod().name(name)
    for i, (owner, uid, block) in enumerate(owners):
        b.owner("ReplicaSet", owner, uid, controller=i == 0, block_owner_deletion=block)
    if node:
        b.node(node)
    return b.obj()


def _replica_set(name: str) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace = name, "default"
    return rs


@pytest.fixture
async def collector():
    api = FakeApi()
    gc = GarbageCollector(api.context())
    await gc.start(2)
    try:
        yield api
    finally:
        await gc.stop()


def _exists(api: FakeApi, kind, name: str) -> bool:
    return api.get(kind, name) is not None


async def test_background_an_owners_removal_collects_its_dependents(collector):
    api = collector
    [rs] = api.seed(_replica_set("web"))
    api.seed(_pod("web-0", ("web", rs.metadata.uid, True)), _pod("web-1", ("web", rs.metadata.uid, None)))
    await asyncio.sleep(0.05)
    assert _exists(api, POD, "web-0") and _exists(api, POD, "web-1"), "dependents of a live owner stay"
    await api.replica_sets.delete("web", "default", propagation_policy="Background")
    assert not _exists(api, REPLICA_SET, "web"), "background: the owner goes at once"
    await eventually(lambda: not api.pods_of(), timeout=5, what="web's pods collected")
    assert ("Pod", "default", "web-0", "Background") in api.deletes


async def test_foreground_the_owner_goes_after_its_blocking_dependents(collector):
    api = collector
    [rs] = api.seed(_replica_set("web"))
    api.seed(_pod("blocking", ("web", rs.metadata.uid, True), node="node-1"),
             _pod("free", ("web", rs.metadata.uid, False), node="node-1"))
    await asyncio.sleep(0.05)
    await api.replica_sets.delete("web", "default", propagation_policy="Foreground")
    marked = api.get(REPLICA_SET, "web")
    assert marked is not None and list(marked.metadata.finalizers) == ["foregroundDeletion"]

    async def both_terminating() -> bool:
        return all(p.metadata.deletion_timestamp for p in api.pods_of()) and len(api.pods_of()) == 2
    await eventually(both_terminating, timeout=5, what="every dependent deleted (gracefully: still terminating)")
    api.remove(POD, "default", "free")  # its kubelet is done with it
    await asyncio.sleep(0.1)
    assert _exists(api, REPLICA_SET, "web"), "a non-blocking dependent does not hold the owner"
    api.remove(POD, "default", "blocking")
    await eventually(lambda: not _exists(api, REPLICA_SET, "web"), timeout=5,
                     what="the foregroundDeletion finalizer removed, the owner gone")
    assert api.removed.index(("Pod", "default", "blocking")) < api.removed.index(("ReplicaSet", "default", "web"))


async def test_orphan_the_dependents_lose_their_reference_then_the_owner_goes(collector):
    api = collector
    [rs, other] = api.seed(_replica_set("web"), _replica_set("other"))
    api.seed(_pod("web-0", ("web", rs.metadata.uid, True)),
             _pod("both", ("web", rs.metadata.uid, True), ("other", other.metadata.uid, None)))
    await asyncio.sleep(0.05)
    await api.replica_sets.delete("web", "default", propagation_policy="Orphan")
    await eventually(lambda: not _exists(api, REPLICA_SET, "web"), timeout=5, what="web orphaned its pods and went")
    web0, both = api.get(POD, "web-0"), api.get(POD, "both")
    assert web0 is not None and not web0.metadata.owner_references and not web0.metadata.deletion_timestamp
    assert both is not None and [r.name for r in both.metadata.owner_references] == ["other"]


async def test_dependents_of_an_owner_that_does_not_exist_or_has_another_uid_are_collected(collector):
    api = collector
    [rs] = api.seed(_replica_set("web"))
    api.seed(_pod("stale-uid", ("web", "not-" + rs.metadata.uid, None)), _pod("ghost", ("nobody", "u-x", None)),
             _pod("kept", ("web", rs.metadata.uid, None)))
    await eventually(lambda: {p.metadata.name for p in api.pods_of()} == {"kept"}, timeout=5,
                     what="the pods of absent owners collected")


async def test_a_dangling_reference_is_removed_when_another_owner_lives(collector):
    api = collector
    [rs] = api.seed(_replica_set("web"))
    api.seed(_pod("shared", ("gone", "u-gone", True), ("web", rs.metadata.uid, None)))

    def only_web() -> bool:
        pod = api.get(POD, "shared")
        return pod is not None and [r.name for r in pod.metadata.owner_references] == ["web"]
    await eventually(only_web, timeout=5, what="the reference to the absent owner removed, the pod kept")


async def test_an_owner_deleting_in_the_foreground_with_no_dependents_goes_at_once(collector):
    api = collector
    api.seed(_replica_set("lonely"))
    await api.replica_sets.delete("lonely", "default", propagation_policy="Foreground")
    await eventually(lambda: not _exists(api, REPLICA_SET, "lonely"), timeout=5, what="lonely gone")
