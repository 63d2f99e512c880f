"""ReplicaSets and Deployments on real processes — etcd, the apiserver, the scheduler, the
controller-manager and three kubelets of 4 CPUs — as the Kubernetes docs' "ReplicaSet" and
"Deployments" pages and "Pod Priority and Preemption" describe them:

- a ReplicaSet makes its pods, which the scheduler places and the kubelets run; scaled up and
  down (the pods with the lower ``controller.kubernetes.io/pod-deletion-cost`` go first); a pod
  deleted is made again;
- the preemption story: a ReplicaSet's pod preempted by a higher-priority pod is made again and
  scheduled on another node; with no room left it stays Pending, the scheduler saying why
  (FailedScheduling);
- a Deployment rolled from one image to another with maxSurge 1 / maxUnavailable 0, and with
  Recreate; a paused Deployment; old ReplicaSets over revisionHistoryLimit deleted.

After each test ``kplane check`` replays the whole history so far — deployment-surge-and-unavailability
included — and must find nothing.
"""

from __future__ import annotations

import contextlib

import pytest

from cli import check
from machinery import errors
from machinery.api import apps_pb2, core_pb2
from tests.harness.api import delete_all_pods, ensure_priority_classes
from tests.harness.builders import MakeDeployment, MakePod, MakeReplicaSet
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.metrics import informers_reach
from tests.harness.wait import eventually, wait_unschedulable

pytestmark = pytest.mark.scenario

WAIT = 30  # seconds any one wait may take: pods start in well under a second here
CM_ARGS = ["--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
           "--leader-elect-retry-period=500ms", "--node-monitor-period=1s"]
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"

apps_cluster = cluster_fixture(nodes=3, schedulers=1, controller_managers=1, controller_manager_args=CM_ARGS,
                               kubelet_args=FAST_KUBELET)


@pytest.fixture
async def api(apps_cluster):
    """A client; afterwards every Deployment, ReplicaSet and pod goes, and ``kplane check`` must
    find the history so far valid."""
    c = apps_cluster.client()
    try:
        yield c
    finally:
        try:
            for resource in (c.deployments, c.replica_sets):  # (a garbage collector may be deleting them too)
                for obj in (await resource.list("default")).items:
                    with contextlib.suppress(errors.NotFound):
                        await resource.delete(obj.metadata.name, "default")
            await delete_all_pods(c)
        finally:
            await c.close()
    result = apps_cluster.kplane("check")
    assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"


def _owned_by(pod: core_pb2.Pod, kind: str, name: str) -> bool:
    return any(r.controller and r.kind == kind and r.name == name for r in pod.metadata.owner_references)


def _ready(pod: core_pb2.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


async def _pods_of(api, rs: str, *, live: bool = True) -> list[core_pb2.Pod]:
    """The pods ReplicaSet ``rs`` controls (those not being deleted, unless ``live`` is False)."""
    return [p for p in (await api.pods.list("default")).items
            if _owned_by(p, "ReplicaSet", rs) and (not live or not p.metadata.deletion_timestamp)]


async def _wait_running(api, rs: str, count: int) -> list[core_pb2.Pod]:
    """Until ``rs`` has exactly ``count`` pods, none being deleted, every one Running and Ready on a node."""
    box: dict[str, list[core_pb2.Pod]] = {}

    async def check() -> bool:
        pods = box["pods"] = await _pods_of(api, rs, live=False)
        return len(pods) == count and all(p.spec.node_name and p.status.phase == "Running" and _ready(p)
                                          and not p.metadata.deletion_timestamp for p in pods)

    await eventually(check, timeout=WAIT, interval=0.1, what=f"{count} pods of {rs} running")
    return box["pods"]


async def _wait_rs_status(api, name: str, replicas: int) -> apps_pb2.ReplicaSet:
    box: dict[str, apps_pb2.ReplicaSet] = {}

    async def check() -> bool:
        rs = box["rs"] = await api.replica_sets.get(name)
        st = rs.status
        return (st.replicas, st.ready_replicas, st.available_replicas, st.observed_generation) == \
            (replicas, replicas, replicas, rs.metadata.generation)

    await eventually(check, timeout=WAIT, interval=0.1, what=f"{name}'s status at {replicas} replicas")
    return box["rs"]


async def _events(api, kind: str, name: str) -> list[tuple[str, str]]:
    return [(e.reason, e.message) for e in (await api.events.list("default")).items
            if e.involved_object.kind == kind and e.involved_object.name == name]


# ------------------------------------------------------------------------------------------ ReplicaSet


async def test_replicaset_creates_its_pods_which_are_scheduled_and_run(api):
    """Kubernetes docs, ReplicaSet, "Example": three replicas, each a pod named after the
    ReplicaSet with the ReplicaSet as its controller."""
    rs = await api.replica_sets.create(MakeReplicaSet().name("frontend").labels({"tier": "frontend"}).replicas(3)
                                       .req(cpu="100m").obj())
    pods = await _wait_running(api, "frontend", 3)
    for pod in pods:
        assert pod.metadata.name.startswith("frontend-") and pod.metadata.labels["tier"] == "frontend"
        [ref] = pod.metadata.owner_references
        assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == \
            ("apps/v1", "ReplicaSet", "frontend", rs.metadata.uid, True, True)
    rs = await _wait_rs_status(api, "frontend", 3)
    assert rs.status.fully_labeled_replicas == 3 and rs.status.terminating_replicas == 0
    created = sorted(m for r, m in await _events(api, "ReplicaSet", "frontend") if r == "SuccessfulCreate")
    assert created == sorted(f"Created pod: {p.metadata.name}" for p in pods)


async def test_scaling_a_replicaset_up_and_down_deletes_the_cheapest_pods(apps_cluster, api):
    """Kubernetes docs, ReplicaSet, "Pod deletion cost": on a scale-down the pods with the lower
    controller.kubernetes.io/pod-deletion-cost go first."""
    await api.replica_sets.create(MakeReplicaSet().name("scaled").replicas(2).req(cpu="100m").obj())
    await _wait_running(api, "scaled", 2)
    await api.replica_sets.scale("scaled", 5)
    pods = await _wait_running(api, "scaled", 5)
    keep = sorted(p.metadata.name for p in pods)[:2]
    for name in keep:
        last = await api.pods.patch(name, {"metadata": {"annotations": {DELETION_COST: "100"}}})
    # The pods' and the ReplicaSet's watches are apart: the controller must see the costs before the scale.
    await informers_reach(apps_cluster, "controller-manager", "Pod", last.metadata.resource_version)
    await api.replica_sets.scale("scaled", 2)
    left = await _wait_running(api, "scaled", 2)
    assert sorted(p.metadata.name for p in left) == keep
    await _wait_rs_status(api, "scaled", 2)
    deleted = sorted(m.removeprefix("Deleted pod: ") for r, m in await _events(api, "ReplicaSet", "scaled")
                     if r == "SuccessfulDelete")
    assert deleted == sorted(set(p.metadata.name for p in pods) - set(keep))


async def test_a_replicasets_pod_deleted_is_made_again(api):
    await api.replica_sets.create(MakeReplicaSet().name("keeper").replicas(3).req(cpu="100m").obj())
    before = await _wait_running(api, "keeper", 3)
    victim = before[0].metadata.name
    await api.pods.delete(victim)
    after = await _wait_running(api, "keeper", 3)
    names = {p.metadata.name for p in after}
    assert victim not in names and len(names - {p.metadata.name for p in before}) == 1


# ------------------------------------------------------------------------------------------ preemption


async def _run_high(api, name: str, node: str) -> None:
    """A high-priority pod of 3 CPUs that must run on ``node``; until it runs there."""
    await api.pods.create(MakePod().name(name).req(cpu="3").priority_class("high")
                          .node_affinity_in("kubernetes.io/hostname", [node]).obj())

    async def running() -> bool:
        pod = await api.pods.get(name)
        return pod.spec.node_name == node and pod.status.phase == "Running"

    await eventually(running, timeout=WAIT, what=f"{name} running on {node}")


async def test_a_preempted_replicaset_pod_is_made_again_elsewhere_or_waits_pending(api):
    """Kubernetes docs, Pod Priority and Preemption: a pod preempted by a higher-priority one is
    deleted gracefully; its ReplicaSet makes another, which the scheduler places on a node with
    room — and when no node has room left, it stays Pending with FailedScheduling.

    Three nodes of 4 CPUs; ReplicaSet ``low`` (priority 100) runs two pods of 3 CPUs, one on each
    of two nodes. ``high-1`` (priority 1000, 3 CPUs) must run on a node of ``low``: one low pod is
    preempted and made again on the third node. ``high-2`` must run on that third node: the low
    pod there is preempted too, and its replacement finds no node with 3 CPUs free."""
    await ensure_priority_classes(api, low=100, high=1000)
    await api.replica_sets.create(MakeReplicaSet().name("low").replicas(2).req(cpu="3").priority_class("low")
                                  .grace(1).obj())
    pods = await _wait_running(api, "low", 2)
    used = {p.spec.node_name for p in pods}
    [free] = {"node-1", "node-2", "node-3"} - used
    target = sorted(used)[0]
    victim = next(p for p in pods if p.spec.node_name == target)
    await _run_high(api, "high-1", target)
    replaced = await _wait_running(api, "low", 2)
    [moved] = [p for p in replaced if p.metadata.uid not in {q.metadata.uid for q in pods}]
    assert moved.spec.node_name == free, "made again and scheduled on the node with room"
    preempted = [e for e in (await api.events.list("default")).items
                 if e.reason == "Preempted" and e.involved_object.name == victim.metadata.name]
    assert preempted, "the scheduler says why the pod went"

    await _run_high(api, "high-2", free)

    async def one_pending() -> bool:
        pending = [p for p in await _pods_of(api, "low") if not p.spec.node_name]
        return len(pending) == 1 and len(await _pods_of(api, "low")) == 2

    await eventually(one_pending, timeout=WAIT, what="the replacement of the second victim Pending")
    [pending] = [p for p in await _pods_of(api, "low") if not p.spec.node_name]
    message = await wait_unschedulable(api, pending.metadata.name, timeout=WAIT)
    assert message.startswith("0/3 nodes are available:") and "3 Insufficient cpu" in message
    await api.pods.delete("high-1", grace_period_seconds=0)
    await api.pods.delete("high-2", grace_period_seconds=0)
    await _wait_running(api, "low", 2)  # room again: the pending one runs


# ------------------------------------------------------------------------------------------ Deployment


async def _wait_rolled_out(api, name: str, replicas: int) -> apps_pb2.Deployment:
    """Until the Deployment's status says its rollout is complete (kubectl rollout status)."""
    box: dict[str, apps_pb2.Deployment] = {}

    async def check() -> bool:
        d = box["d"] = await api.deployments.get(name)
        st = d.status
        progressing = next((c for c in st.conditions if c.type == "Progressing"), None)
        return st.observed_generation == d.metadata.generation and \
            (st.replicas, st.updated_replicas, st.available_replicas, st.ready_replicas) == (replicas,) * 4 and \
            progressing is not None and progressing.reason == "NewReplicaSetAvailable"

    await eventually(check, timeout=WAIT, interval=0.1, what=f"deployment {name} rolled out")
    return box["d"]


async def _replica_sets(api, deployment: str) -> list[apps_pb2.ReplicaSet]:
    return [rs for rs in (await api.replica_sets.list("default")).items
            if any(r.controller and r.name == deployment for r in rs.metadata.owner_references)]


async def _set_image(api, name: str, image: str) -> None:
    await api.deployments.patch(name, {"spec": {"template": {"spec": {"containers": [{"name": "c1",
                                                                                      "image": image}]}}}})


async def _pod_lives(api, rs_uids: set[str]) -> dict[str, list[tuple[int, int | None]]]:
    """Per ReplicaSet uid, each of its pods' (revision created, revision it stopped counting: being
    deleted or gone), from the cluster's history."""
    first: dict[str, tuple[str, int]] = {}
    end: dict[str, int] = {}
    async for e in check.entries_of(api):
        pod = e.pod
        ref = next((r for r in pod.metadata.owner_references if r.controller), None) if pod is not None else None
        if pod is None or ref is None or ref.uid not in rs_uids:
            continue
        first.setdefault(pod.metadata.uid, (ref.uid, e.rev))
        if (e.type == "DELETED" or pod.metadata.deletion_timestamp) and pod.metadata.uid not in end:
            end[pod.metadata.uid] = e.rev
    out: dict[str, list[tuple[int, int | None]]] = {}
    for uid, (rs, created) in first.items():
        out.setdefault(rs, []).append((created, end.get(uid)))
    return out


async def test_rolling_update_with_max_surge_1_and_max_unavailable_0(api):
    """Kubernetes docs, Deployments, "Updating a Deployment": nginx 1.14.2 -> 1.16.1, one pod
    more than desired at a time and never one fewer available (``kplane check`` replays it)."""
    await api.deployments.create(MakeDeployment().name("nginx").replicas(3).image("nginx:1.14.2").req(cpu="100m")
                                 .rolling_update(max_surge=1, max_unavailable=0).obj())
    d = await _wait_rolled_out(api, "nginx", 3)
    [first] = await _replica_sets(api, "nginx")
    assert first.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "1"
    await _set_image(api, "nginx", "nginx:1.16.1")
    d = await _wait_rolled_out(api, "nginx", 3)
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    rss = {rs.metadata.name: rs for rs in await _replica_sets(api, "nginx")}
    new = next(rs for rs in rss.values() if rs.metadata.name != first.metadata.name)
    hash_ = new.metadata.labels["pod-template-hash"]
    assert new.metadata.name == f"nginx-{hash_}" and new.spec.selector.match_labels["pod-template-hash"] == hash_
    assert (new.spec.replicas, rss[first.metadata.name].spec.replicas) == (3, 0)
    assert new.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    pods = await _pods_of(api, new.metadata.name)
    assert len(pods) == 3 and all(p.spec.containers[0].image == "nginx:1.16.1" for p in pods)
    assert all(p.metadata.labels["pod-template-hash"] == hash_ for p in pods)
    scaling = [m for r, m in await _events(api, "Deployment", "nginx") if r == "ScalingReplicaSet"]
    assert f"Scaled up replica set {new.metadata.name} from 0 to 1" in scaling
    assert f"Scaled down replica set {first.metadata.name} from 3 to 2" in scaling
    available = next(c for c in d.status.conditions if c.type == "Available")
    assert (available.status, available.reason) == ("True", "MinimumReplicasAvailable")
    lives = await _pod_lives(api, {first.metadata.uid, new.metadata.uid})
    revs = sorted({r for spans in lives.values() for span in spans for r in span if r is not None})
    most = max(sum(1 for spans in lives.values() for c, e in spans if c <= rev and (e is None or e > rev))
               for rev in revs)
    assert most <= 4, "never more than replicas + maxSurge pods not being deleted"


async def test_recreate_kills_every_old_pod_before_making_new_ones(api):
    """Kubernetes docs, Deployments, "Recreate Deployment": all existing pods are killed before new
    ones are created — none of the new version's pods is created while an old one still runs (not
    Succeeded or Failed, not gone: Kubernetes' oldPodsRunning)."""
    await api.deployments.create(MakeDeployment().name("batch").replicas(3).image("app:1").req(cpu="100m")
                                 .recreate().obj())
    await _wait_rolled_out(api, "batch", 3)
    [old] = await _replica_sets(api, "batch")
    await _set_image(api, "batch", "app:2")
    await _wait_rolled_out(api, "batch", 3)
    [new] = [rs for rs in await _replica_sets(api, "batch") if rs.metadata.uid != old.metadata.uid]
    gone: dict[str, int] = {}
    created_new: list[int] = []
    async for e in check.entries_of(api):
        pod = e.pod
        if pod is None:
            continue
        if _owned_by(pod, "ReplicaSet", old.metadata.name) and pod.metadata.uid not in gone and \
                (e.type == "DELETED" or pod.status.phase in ("Succeeded", "Failed")):
            gone[pod.metadata.uid] = e.rev
        if _owned_by(pod, "ReplicaSet", new.metadata.name) and e.type == "ADDED":
            created_new.append(e.rev)
    assert len(gone) == 3 and len(created_new) == 3
    assert max(gone.values()) < min(created_new), "every old pod stopped before the first new one"


async def test_a_paused_deployment_scales_but_does_not_roll_out(api):
    """Kubernetes docs, Deployments, "Pausing and Resuming a rollout of a Deployment"."""
    await api.deployments.create(MakeDeployment().name("paused").replicas(2).image("app:1").req(cpu="100m").obj())
    await _wait_rolled_out(api, "paused", 2)
    await api.deployments.patch("paused", {"spec": {"paused": True}})
    await _set_image(api, "paused", "app:2")
    await api.deployments.scale("paused", 3)

    async def scaled() -> bool:
        d = await api.deployments.get("paused")
        cond = next((c for c in d.status.conditions if c.type == "Progressing"), None)
        rss = await _replica_sets(api, "paused")
        return len(rss) == 1 and rss[0].spec.replicas == 3 and cond is not None and \
            (cond.status, cond.reason) == ("Unknown", "DeploymentPaused") and d.status.available_replicas == 3

    await eventually(scaled, timeout=WAIT, interval=0.1, what="paused deployment scaled to 3, no new ReplicaSet")
    [rs] = await _replica_sets(api, "paused")
    assert rs.spec.template.spec.containers[0].image == "app:1"
    await api.deployments.patch("paused", {"spec": {"paused": False}})
    d = await _wait_rolled_out(api, "paused", 3)
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    [new] = [r for r in await _replica_sets(api, "paused") if r.metadata.uid != rs.metadata.uid]
    pods = await _pods_of(api, new.metadata.name)
    assert len(pods) == 3 and all(p.spec.containers[0].image == "app:2" for p in pods)


async def test_old_replica_sets_over_the_revision_history_limit_are_deleted(api):
    """Kubernetes docs, Deployments, "Clean up Policy": revisionHistoryLimit old ReplicaSets are
    kept for rollback, the older ones deleted."""
    await api.deployments.create(MakeDeployment().name("hist").replicas(1).image("app:1").req(cpu="100m")
                                 .revision_history_limit(1).obj())
    await _wait_rolled_out(api, "hist", 1)
    for version in (2, 3, 4):
        await _set_image(api, "hist", f"app:{version}")
        await _wait_rolled_out(api, "hist", 1)

    async def two_left() -> bool:
        return len(await _replica_sets(api, "hist")) == 2

    await eventually(two_left, timeout=WAIT, interval=0.1, what="one old ReplicaSet kept")
    rss = sorted(await _replica_sets(api, "hist"),
                 key=lambda rs: int(rs.metadata.annotations["deployment.kubernetes.io/revision"]))
    assert [(rs.metadata.annotations["deployment.kubernetes.io/revision"], rs.spec.replicas,
             rs.spec.template.spec.containers[0].image) for rs in rss] == [("3", 0, "app:3"), ("4", 1, "app:4")]
