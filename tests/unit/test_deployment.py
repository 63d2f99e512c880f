"""The Deployment controller: its arithmetic (controllers.deploymentutil) as Kubernetes'
pkg/controller/deployment/util computes it, and its syncs over an in-memory API
(tests/unit/fakes_replicaset_deployment.py) with the real ReplicaSet controller beside it — rolling updates
step by step within maxSurge and maxUnavailable, Recreate, proportional scaling mid-rollout, pauses,
revision history, conditions and the hash collision."""

from __future__ import annotations

import contextlib
from datetime import timedelta

import pytest

from controllers import deploymentutil as du
from controllers.deployment import sync as deployment_sync
from controllers.deployment.deployment_controller import DeploymentController
from controllers.replicaset import ReplicaSetController
from machinery import errors, timeutil
from machinery.api import apps_pb2
from machinery.kinds import DEPLOYMENT, POD, REPLICA_SET
from tests.harness.builders import MakeDeployment
from tests.unit.fakes_replicaset_deployment import FakeApi

KEY = "default/web"


# ---------------------------------------------------------------- arithmetic


@pytest.mark.parametrize("surge, unavailable, desired, want", [
    ("25%", "25%", 10, (3, 2)),  # surge rounds up, unavailable down
    ("25%", "25%", 1, (1, 0)),
    ("0", "1%", 2, (0, 1)),  # both resolve to 0: unavailable 1
    ("0%", "0%", 3, (0, 1)),
    ("1", "0", 3, (1, 0)),
    ("50%", "2", 5, (3, 2)),
    (None, None, 3, (0, 1)),
])
def test_resolve_fenceposts(surge, unavailable, desired, want):
    assert du.resolve_fenceposts(surge, unavailable, desired) == want


def test_pod_template_hash_is_fnv32a_safe_encoded_and_salted_by_the_collision_count():
    t = MakeDeployment().name("web").image("nginx:1.25").obj().spec.template
    h = du.compute_hash(t, None)
    assert h == du.compute_hash(t, None), "deterministic"
    assert set(h) <= set("bcdfghjklmnpqrstvwxz2456789") and 1 <= len(h) <= 10
    assert du.compute_hash(t, 1) != h and du.compute_hash(t, 1) != du.compute_hash(t, 2)
    other = MakeDeployment().name("web").image("nginx:1.26").obj().spec.template
    assert du.compute_hash(other, None) != h
    # Kubernetes' rand.SafeEncodeString: "0" is 48, and 48 % 27 = 21 is "4" in its alphabet.
    assert du.safe_encode_string("0123456789") == "456789bcdf"


def test_fnv32a_matches_the_reference_values():
    assert du.fnv32a(b"") == 0x811C9DC5
    assert du.fnv32a(b"a") == 0xE40C292C
    assert du.fnv32a(b"foobar") == 0xBF9CF968


def _d(replicas: int = 10, surge: str = "3", unavailable: str = "2") -> apps_pb2.Deployment:
    return MakeDeployment().name("web").replicas(replicas).rolling_update(surge, unavailable).obj()


def _rs(name: str, replicas: int, max_replicas: int | None = None, available: int = 0) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet()
    rs.metadata.name, rs.metadata.uid = name, f"uid-{name}"
    rs.spec.replicas = replicas
    rs.status.available_replicas = available
    if max_replicas is not None:
        rs.metadata.annotations[du.MAX_REPLICAS_ANNOTATION] = str(max_replicas)
    return rs


def test_new_rs_new_replicas_stays_within_replicas_plus_surge():
    d = _d(10, "3", "2")
    new = _rs("new", 0)
    assert du.new_rs_new_replicas(d, [_rs("old", 10), new], new) == 3
    assert du.new_rs_new_replicas(d, [_rs("old", 8), _rs("new", 5)], _rs("new", 5)) == 5, "at 13: no room"
    assert du.new_rs_new_replicas(d, [_rs("old", 2), _rs("new", 8)], _rs("new", 8)) == 10, "never over replicas"
    recreate = MakeDeployment().name("web").replicas(4).recreate().obj()
    assert du.new_rs_new_replicas(recreate, [new], new) == 4


def test_new_rs_new_replicas_counts_pods_not_yet_being_deleted():
    """kplane: an old ReplicaSet scaled 10 -> 8 whose pods still all run counts 10."""
    d, new = _d(10, "3", "2"), _rs("new", 3)
    old = _rs("old", 8)
    assert du.new_rs_new_replicas(d, [old, new], new) == 5
    assert du.new_rs_new_replicas(d, [old, new], new, {"uid-old": 10}) == 3


def test_proportions_when_a_rollout_is_resized():
    """Kubernetes' TestGetProportion: a replica set sized 5 of max 13 when the deployment grows to
    15 + 3 surge gets 5 * 18 / 13 - 5 = 2 more (rounded), bounded by what is left."""
    d = _d(15, "3", "2")
    rs = _rs("a", 5, max_replicas=13)
    assert du.get_proportion(rs, d, 5, 0) == 2
    assert du.get_proportion(rs, d, 5, 4) == 1, "only one left to add"
    assert du.get_proportion(rs, _d(0), -5, 0) == -5, "scaling to zero takes all of it"
    assert du.get_proportion(_rs("b", 0), d, 5, 0) == 0


def test_find_new_replica_set_ignores_the_hash_label_and_prefers_the_oldest():
    d = MakeDeployment().name("web").image("v2").obj()
    a, b = apps_pb2.ReplicaSet(), apps_pb2.ReplicaSet()
    for rs, name, created in ((a, "a", "2026-01-01T00:00:02Z"), (b, "b", "2026-01-01T00:00:01Z")):
        rs.metadata.name, rs.metadata.uid, rs.metadata.creation_timestamp = name, name, created
        rs.spec.template.CopyFrom(d.spec.template)
        rs.spec.template.metadata.labels[du.POD_TEMPLATE_HASH_LABEL] = name
    old = apps_pb2.ReplicaSet()
    old.metadata.name, old.metadata.uid = "old", "old"
    old.spec.template.CopyFrom(MakeDeployment().name("web").image("v1").obj().spec.template)
    assert du.find_new_replica_set(d, [a, old, b]).metadata.name == "b"
    assert [rs.metadata.name for rs in du.find_old_replica_sets(d, [a, old, b])] == ["a", "old"]


def test_revision_annotations_of_a_rollback_keep_the_history():
    d = MakeDeployment().name("web").obj()
    d.metadata.annotations["team"] = "a"
    d.metadata.annotations[du.REVISION_ANNOTATION] = "9"
    rs = apps_pb2.ReplicaSet()
    rs.metadata.annotations[du.REVISION_ANNOTATION] = "2"
    assert du.set_new_replica_set_annotations(d, rs, 5, exists=True)
    assert rs.metadata.annotations[du.REVISION_ANNOTATION] == "5"
    assert rs.metadata.annotations[du.REVISION_HISTORY_ANNOTATION] == "2"
    assert rs.metadata.annotations["team"] == "a", "the deployment's annotations are copied"
    assert du.set_new_replica_set_annotations(d, rs, 7, exists=True)
    assert rs.metadata.annotations[du.REVISION_HISTORY_ANNOTATION] == "2,5"
    assert not du.set_new_replica_set_annotations(d, rs, 7, exists=True), "nothing new"


# ---------------------------------------------------------------- syncs over the fake API


class _Cluster:
    """The fake API with a Deployment controller and a ReplicaSet controller, synced by hand."""

    def __init__(self) -> None:
        self.api = FakeApi()
        self.api.auto_deliver = True
        self.dc = DeploymentController(self.api.context())
        self.rsc = ReplicaSetController(self.api.context())

    async def settle(self, rounds: int = 6, *, ready: bool = True) -> None:
        """Controllers synced until nothing changes; pods run (Ready unless not ``ready``) and
        their deletions finish in between, as the scheduler and kubelets would."""
        for _ in range(rounds):
            before = len(self.api.writes)
            await self.dc.sync(KEY)
            for rs in self.api.list(REPLICA_SET):
                await self.rsc.sync(f"default/{rs.metadata.name}")
            self.api.run_pods(ready=ready)
            self.api.finish_deletions()
            for rs in self.api.list(REPLICA_SET):
                await self.rsc.sync(f"default/{rs.metadata.name}")
            if len(self.api.writes) == before:
                return

    def rs_sizes(self) -> dict[str, int]:
        return {rs.spec.template.spec.containers[0].image: rs.spec.replicas for rs in self.api.list(REPLICA_SET)}

    def live_pods(self) -> int:
        return sum(1 for p in self.api.list(POD) if not p.metadata.deletion_timestamp)

    def deployment(self) -> apps_pb2.Deployment:
        return self.api.get(DEPLOYMENT, "web")

    def set_image(self, image: str) -> None:
        self.api.change(self.deployment(), lambda d: setattr(d.spec.template.spec.containers[0], "image", image))


@pytest.fixture
def cluster() -> _Cluster:
    return _Cluster()


def _condition(d: apps_pb2.Deployment, type_: str) -> apps_pb2.DeploymentCondition:
    return next(c for c in d.status.conditions if c.type == type_)


async def test_a_new_deployment_gets_its_replica_set_and_pods(cluster):
    d = cluster.api.add(MakeDeployment().name("web").replicas(3).image("v1").obj())
    await cluster.settle()
    [rs] = cluster.api.list(REPLICA_SET)
    pod_hash = du.compute_hash(d.spec.template, None)
    assert rs.metadata.name == f"web-{pod_hash}"
    assert rs.metadata.labels[du.POD_TEMPLATE_HASH_LABEL] == pod_hash
    assert rs.spec.selector.match_labels == {"app": "web", du.POD_TEMPLATE_HASH_LABEL: pod_hash}
    assert rs.spec.template.metadata.labels[du.POD_TEMPLATE_HASH_LABEL] == pod_hash
    assert [(r.kind, r.name, r.controller, r.block_owner_deletion) for r in rs.metadata.owner_references] == \
        [("Deployment", "web", True, True)]
    assert dict(rs.metadata.annotations) == {du.REVISION_ANNOTATION: "1", du.DESIRED_REPLICAS_ANNOTATION: "3",
                                             du.MAX_REPLICAS_ANNOTATION: "4"}
    assert all(p.metadata.labels[du.POD_TEMPLATE_HASH_LABEL] == pod_hash for p in cluster.api.list(POD))
    d = cluster.deployment()
    assert d.metadata.annotations[du.REVISION_ANNOTATION] == "1"
    assert d.metadata.generation == 1, "the revision annotation travels with the status: no new generation"
    st = d.status
    assert (st.observed_generation, st.replicas, st.updated_replicas, st.ready_replicas, st.available_replicas,
            st.unavailable_replicas, st.terminating_replicas) == (1, 3, 3, 3, 3, 0, 0)
    assert (_condition(d, "Available").status, _condition(d, "Available").reason) == \
        ("True", "MinimumReplicasAvailable")
    assert _condition(d, "Progressing").reason == "NewReplicaSetAvailable"
    assert ("web", "Normal", "ScalingReplicaSet", f"Scaled up replica set {rs.metadata.name} from 0 to 3") in \
        cluster.api.recorded


async def test_rolling_update_with_max_surge_1_and_max_unavailable_0_goes_one_pod_at_a_time(cluster):
    """At no point more than 4 pods, or fewer than 3 available (Kubernetes docs' example)."""
    cluster.api.add(MakeDeployment().name("web").replicas(3).image("v1").rolling_update(1, 0).obj())
    await cluster.settle()
    cluster.set_image("v2")
    seen = []
    for _ in range(20):
        await cluster.dc.sync(KEY)
        for rs in cluster.api.list(REPLICA_SET):
            await cluster.rsc.sync(f"default/{rs.metadata.name}")
        seen.append((cluster.live_pods(), dict(cluster.rs_sizes())))
        assert cluster.live_pods() <= 4, seen
        available = sum(1 for p in cluster.api.list(POD) if not p.metadata.deletion_timestamp and
                        any(c.type == "Ready" and c.status == "True" for c in p.status.conditions))
        assert available >= 3, seen
        cluster.api.run_pods()
        cluster.api.finish_deletions()
        for rs in cluster.api.list(REPLICA_SET):
            await cluster.rsc.sync(f"default/{rs.metadata.name}")
    assert cluster.rs_sizes() == {"v1": 0, "v2": 3}
    d = cluster.deployment()
    assert d.metadata.annotations[du.REVISION_ANNOTATION] == "2"
    assert _condition(d, "Progressing").reason == "NewReplicaSetAvailable"
    steps = [m for _, _, reason, m in cluster.api.recorded if reason == "ScalingReplicaSet"][1:]
    assert [m.split(" replica set ")[0] for m in steps] == ["Scaled up", "Scaled down"] * 3


async def test_a_sync_waits_until_its_replicaset_informer_shows_its_own_last_write(cluster):
    """The rollout to v2 creates its ReplicaSet (2 pods: replicas 6 + maxSurge 2); the template
    changes to v3 before the ReplicaSet informer shows that create. Sized from that cache the v3
    ReplicaSet would get 2 more (v1's scale-down to 5 unseen too) and the rollout 9 pods; the sync
    waits for its own writes instead, and the rollout never asks for more than 8."""
    cluster.api.add(MakeDeployment().name("web").replicas(6).image("v1").rolling_update(2, 1).obj())
    await cluster.settle()
    cluster.api.auto_deliver = False

    def asked() -> int:
        return sum(rs.spec.replicas for rs in cluster.api.list(REPLICA_SET))

    cluster.set_image("v2")
    await cluster.dc.sync(KEY)
    assert cluster.rs_sizes() == {"v1": 5, "v2": 2}  # and one old pod less: maxUnavailable 1
    cluster.set_image("v3")  # delivered; the ReplicaSet informer has not seen v2's ReplicaSet yet
    with contextlib.suppress(errors.Conflict):  # a sync may end so (and be retried): not what is checked
        await cluster.dc.sync(KEY)
    assert asked() == 7 and "v3" not in cluster.rs_sizes(), cluster.rs_sizes()
    cluster.api.deliver()
    await cluster.dc.sync(KEY)
    assert asked() <= 8, cluster.rs_sizes()
    cluster.api.auto_deliver = True
    await cluster.settle(rounds=12)
    assert cluster.rs_sizes()["v3"] == 6 and cluster.live_pods() == 6


async def test_recreate_scales_old_to_zero_and_waits_for_its_pods_to_be_gone(cluster):
    cluster.api.add(MakeDeployment().name("web").replicas(2).image("v1").recreate().obj())
    await cluster.settle()
    cluster.set_image("v2")
    await cluster.dc.sync(KEY)
    assert cluster.rs_sizes() == {"v1": 0}, "no new ReplicaSet before the old one is down"
    for rs in cluster.api.list(REPLICA_SET):
        await cluster.rsc.sync(f"default/{rs.metadata.name}")
    await cluster.dc.sync(KEY)
    assert cluster.rs_sizes() == {"v1": 0}, "old pods still terminating: wait"
    cluster.api.finish_deletions()
    for rs in cluster.api.list(REPLICA_SET):
        await cluster.rsc.sync(f"default/{rs.metadata.name}")
    await cluster.dc.sync(KEY)
    assert cluster.rs_sizes() == {"v1": 0, "v2": 2}
    await cluster.settle()
    assert cluster.deployment().status.updated_replicas == 2


async def test_a_paused_deployment_only_scales(cluster):
    cluster.api.add(MakeDeployment().name("web").replicas(2).image("v1").obj())
    await cluster.settle()
    cluster.api.change(cluster.deployment(), lambda d: setattr(d.spec, "paused", True))
    cluster.set_image("v2")
    await cluster.settle()
    assert cluster.rs_sizes() == {"v1": 2}, "no rollout while paused"
    cond = _condition(cluster.deployment(), "Progressing")
    assert (cond.status, cond.reason, cond.message) == ("Unknown", "DeploymentPaused", "Deployment is paused")
    cluster.api.change(cluster.deployment(), lambda d: setattr(d.spec, "replicas", 4))
    await cluster.settle()
    assert cluster.rs_sizes() == {"v1": 4}, "but it scales"
    cluster.api.change(cluster.deployment(), lambda d: setattr(d.spec, "paused", False))
    await cluster.settle(rounds=20)
    assert cluster.rs_sizes() == {"v1": 0, "v2": 4}


async def test_replicas_changed_mid_rollout_are_shared_in_proportion(cluster):
    """10 replicas, maxSurge 3, maxUnavailable 2, the new pods never Ready: stuck at old 8, new 5.
    Scaled to 15: 18 allowed, 5 more shared 8:5 between them (the largest takes the leftover)."""
    cluster.api.add(MakeDeployment().name("web").replicas(10).image("v1").rolling_update(3, 2).obj())
    await cluster.settle()
    cluster.set_image("v2")
    await cluster.settle(ready=False)
    assert cluster.rs_sizes() == {"v1": 8, "v2": 5}
    cluster.api.change(cluster.deployment(), lambda d: setattr(d.spec, "replicas", 15))
    await cluster.dc.sync(KEY)
    assert cluster.rs_sizes() == {"v1": 11, "v2": 7}
    assert sum(cluster.rs_sizes().values()) == 18


async def test_old_replica_sets_over_the_revision_history_limit_are_deleted(cluster):
    cluster.api.add(MakeDeployment().name("web").replicas(1).image("v1").revision_history_limit(1).obj())
    await cluster.settle()
    for image in ("v2", "v3", "v4"):
        cluster.set_image(image)
        await cluster.settle(rounds=12)
    assert cluster.rs_sizes() == {"v3": 0, "v4": 1}, "one old revision kept, scaled to 0"
    revisions = sorted(int(rs.metadata.annotations[du.REVISION_ANNOTATION]) for rs in cluster.api.list(REPLICA_SET))
    assert revisions == [3, 4]


async def test_progress_deadline_exceeded_when_new_pods_never_become_ready(cluster, monkeypatch):
    cluster.api.add(MakeDeployment().name("web").replicas(1).image("v1").progress_deadline_seconds(30).obj())
    await cluster.settle()
    cluster.set_image("v2")
    await cluster.settle(ready=False)
    assert _condition(cluster.deployment(), "Progressing").reason == "ReplicaSetUpdated"
    later = cluster.api.clock + timedelta(seconds=31)  # no progress for progressDeadlineSeconds
    monkeypatch.setattr(timeutil, "now", lambda: later)
    await cluster.dc.sync(KEY)
    cond = _condition(cluster.deployment(), "Progressing")
    assert (cond.status, cond.reason) == ("False", "ProgressDeadlineExceeded")
    assert cond.message.endswith("has timed out progressing.")


async def test_a_hash_collision_bumps_the_collision_count(cluster):
    """Someone else's ReplicaSet has the new one's name: collisionCount goes up, the next name differs."""
    d = cluster.api.add(MakeDeployment().name("web").replicas(1).image("v1").obj())
    squatter = apps_pb2.ReplicaSet()
    squatter.metadata.name = f"web-{du.compute_hash(d.spec.template, None)}"
    squatter.spec.selector.match_labels["app"] = "other"
    squatter.spec.template.metadata.labels["app"] = "other"
    squatter.spec.template.spec.containers.add(name="c1", image="x")
    cluster.api.add(squatter)
    with pytest.raises(errors.AlreadyExists):
        await cluster.dc.sync(KEY)
    assert cluster.deployment().status.collision_count == 1
    await cluster.settle()
    names = {rs.metadata.name for rs in cluster.api.list(REPLICA_SET)}
    assert f"web-{du.compute_hash(d.spec.template, 1)}" in names


def test_failpoint_is_declared():
    from machinery import failpoints
    assert deployment_sync.FP_AFTER_SCALE == "controller-manager/deployment-after-scale"
    assert deployment_sync.FP_AFTER_SCALE in failpoints.declared()


def test_calculate_status_sums_the_replica_sets():
    d = _d(3, "1", "0")
    a, b = _rs("a", 2, available=2), _rs("b", 2, available=1)
    a.status.replicas, b.status.replicas = 2, 2
    a.status.ready_replicas, b.status.ready_replicas = 2, 1
    a.status.terminating_replicas, b.status.terminating_replicas = 1, 0
    st = du.calculate_status([a, b], b, d)
    assert (st.replicas, st.updated_replicas, st.ready_replicas, st.available_replicas, st.unavailable_replicas,
            st.terminating_replicas) == (4, 2, 3, 3, 1, 1)
    assert _condition(apps_pb2.Deployment(status=st), "Available").reason == "MinimumReplicasAvailable"
