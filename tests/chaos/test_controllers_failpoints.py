"""Chaos for the ReplicaSet and Deployment controllers: the controller-manager killed ten times in
a row at each of their failpoints, and nothing made twice, nothing lost.

- ``controller-manager/replicaset-after-create``: a pod create returned, the next not yet sent.
  The restarted process lists every pod before its workers start, so it never makes a pod the
  dead one made: at no revision does the ReplicaSet have more pods (neither finished nor being
  deleted) than its replicas.
- ``controller-manager/replicaset-before-status-update``: pods made, the status not written; the
  next process writes it.
- ``controller-manager/deployment-after-scale``: a ReplicaSet of a rolling Deployment scaled, the
  rest of the sync not done. ``kplane check``'s deployment-surge-and-unavailability rule replays
  every revision: never more pods than replicas + maxSurge, never fewer available than
  replicas - maxUnavailable once a rollout started fully available.

Each round arms the point with ``panic`` (the process dies there as with SIGKILL), gives the
controllers work that reaches it, waits for the death and starts the controller-manager again;
after ten rounds the point is left off and the cluster must converge: every pod asked for
Running, statuses right, ``kplane check`` clean.
"""

from __future__ import annotations

import pytest

from apiserver.watchcache import CACHE_INTAKE
from cli import check
from controllers.deployment.sync import FP_AFTER_SCALE
from controllers.replicaset import FP_AFTER_CREATE, FP_BEFORE_STATUS_UPDATE
from machinery.api import apps_pb2, core_pb2
from tests.harness.builders import MakeDeployment, MakeReplicaSet
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, start, wait_exited
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.metrics import metric
from tests.harness.wait import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

CM = "controller-manager"
ROUNDS = 10
WAIT = 60

chaos_cluster = cluster_fixture(nodes=3, schedulers=1, controller_managers=1,
                                controller_manager_args=["--leader-elect=false"], kubelet_args=FAST_KUBELET)


@pytest.fixture
async def api(chaos_cluster):
    c = chaos_cluster.client()
    start(chaos_cluster, CM)  # a no-op unless an earlier test left it dead
    try:
        yield c
    finally:
        await c.close()


async def _panic_rounds(tc, point: str, work) -> None:
    """``ROUNDS`` times: arm ``point`` with panic, ``await work(i)``, wait for the death, start again."""
    for i in range(ROUNDS):
        failpoint(tc, CM, point, "panic")
        await work(i)
        await wait_exited(tc, CM, timeout=WAIT)
        start(tc, CM)


def _live(pod: core_pb2.Pod) -> bool:
    return not pod.metadata.deletion_timestamp and pod.status.phase not in ("Succeeded", "Failed")


async def _most_pods_over_replicas(api, rs_name: str) -> list[tuple[int, int, int]]:
    """Every revision at which ReplicaSet ``rs_name`` had more live pods than its spec.replicas then:
    (rev, pods, replicas)."""
    replicas, rs_uid = 0, ""
    live: dict[str, bool] = {}
    over = []
    async for e in check.entries_of(api):
        if isinstance(e.obj, apps_pb2.ReplicaSet) and e.name == rs_name:
            replicas, rs_uid = e.obj.spec.replicas, e.obj.metadata.uid
        elif e.pod is not None and rs_uid and any(r.controller and r.uid == rs_uid
                                                  for r in e.pod.metadata.owner_references):
            live[e.pod.metadata.uid] = e.type != "DELETED" and _live(e.pod)
        else:
            continue
        if sum(live.values()) > replicas:
            over.append((e.rev, sum(live.values()), replicas))
    return over


async def _wait_replicaset(api, name: str, replicas: int) -> None:
    async def done() -> bool:
        rs = await api.replica_sets.get(name)
        pods = [p for p in (await api.pods.list("default")).items
                if any(r.controller and r.uid == rs.metadata.uid for r in p.metadata.owner_references)]
        running = [p for p in pods if _live(p) and p.status.phase == "Running"]
        st = rs.status
        return len(pods) == len(running) == replicas and \
            (st.replicas, st.ready_replicas, st.available_replicas, st.observed_generation) == \
            (replicas, replicas, replicas, rs.metadata.generation)

    await eventually(done, timeout=WAIT, interval=0.2, what=f"{name}: {replicas} pods running, status right")


@pytest.mark.parametrize("point", [FP_AFTER_CREATE, FP_BEFORE_STATUS_UPDATE])
async def test_replicaset_controller_killed_ten_times_makes_no_pod_twice(chaos_cluster, api, point):
    name = "chaos-" + point.rsplit("/", 1)[1]
    await api.replica_sets.create(MakeReplicaSet().name(name).replicas(0).req(cpu="10m").obj())

    async def grow(i: int) -> None:  # more pods each round: the next create (or status) is always due
        await api.replica_sets.scale(name, 3 * (i + 1))

    await _panic_rounds(chaos_cluster, point, grow)
    await _wait_replicaset(api, name, 3 * ROUNDS)
    assert await _most_pods_over_replicas(api, name) == [], "a pod made twice"
    result = chaos_cluster.kplane("check")
    assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"
    await api.replica_sets.delete(name)


async def test_replicaset_controller_restarted_while_the_watch_cache_lags_makes_no_pod_twice(chaos_cluster, api):
    """A controller-manager dies right after a pod create that the apiserver's watch cache has not
    taken in yet (its intake paused: a busy apiserver's cache behind etcd). The next process must
    still see that pod: its informers list at resourceVersion "", a consistent read, which the
    apiserver serves from etcd once the cache has not caught up within 3 s. A list at "0" would be
    served by the stale cache, and the ReplicaSet would get a pod made twice."""
    name = "lagging-cache"
    await api.replica_sets.create(MakeReplicaSet().name(name).replicas(0).req(cpu="10m").obj())
    failpoint(chaos_cluster, CM, FP_AFTER_CREATE, "1*pause")
    await api.replica_sets.scale(name, 2)  # slow start: a batch of 1 (held here), then a batch of 1
    await wait_paused(chaos_cluster, CM, FP_AFTER_CREATE)
    rs = await api.replica_sets.get(name)

    async def cached_pods() -> list[core_pb2.Pod]:
        return [p for p in (await api.pods.list("default", resource_version="0")).items
                if any(r.uid == rs.metadata.uid for r in p.metadata.owner_references)]

    await eventually(lambda: _count(cached_pods(), 1), timeout=WAIT, what="the first pod in the watch cache")
    fallbacks = metric(chaos_cluster, "apiserver", "apiserver_watch_cache_consistent_read_total",
                       'fallback="true",resource="pods"')
    failpoint(chaos_cluster, "apiserver", CACHE_INTAKE, "pause")
    try:
        failpoint(chaos_cluster, CM, FP_AFTER_CREATE, "panic")  # releases the held create: the second one dies here
        await wait_exited(chaos_cluster, CM, timeout=WAIT)
        assert len(await cached_pods()) == 1, "the watch cache took in the second pod: nothing lags"
        before = (await api.replica_sets.get(name)).metadata.resource_version
        start(chaos_cluster, CM)
        failpoint(chaos_cluster, CM, FP_AFTER_CREATE, "off")

        async def synced() -> bool:  # its first sync ends with a status write (the dead one wrote none)
            return (await api.replica_sets.get(name)).metadata.resource_version != before

        await eventually(synced, timeout=WAIT, what="the new controller-manager's sync of the ReplicaSet")
        from_etcd = metric(chaos_cluster, "apiserver", "apiserver_watch_cache_consistent_read_total",
                           'fallback="true",resource="pods"') - fallbacks
    finally:
        failpoint(chaos_cluster, "apiserver", CACHE_INTAKE, "off")
    await _wait_replicaset(api, name, 2)
    assert await _most_pods_over_replicas(api, name) == [], "a pod made twice"
    assert from_etcd > 0, "no list of pods was served from etcd while the cache lagged"
    result = chaos_cluster.kplane("check")
    assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"
    await api.replica_sets.delete(name)


async def _count(pods, n: int) -> bool:
    return len(await pods) == n


async def test_deployment_controller_killed_ten_times_mid_rollout_stays_within_its_bounds(chaos_cluster, api):
    """Six replicas, maxSurge 2, maxUnavailable 1, a new image each round: ten rollouts broken
    off after a scale, then one to the end."""
    await api.deployments.create(MakeDeployment().name("roller").replicas(6).image("app:0").req(cpu="10m")
                                 .rolling_update(max_surge=2, max_unavailable=1).obj())

    async def rolled_out(image: str) -> bool:
        d = await api.deployments.get("roller")
        pods = [p for p in (await api.pods.list("default")).items if p.metadata.labels.get("app") == "roller"]
        return d.status.observed_generation == d.metadata.generation and \
            (d.status.replicas, d.status.updated_replicas, d.status.available_replicas) == (6, 6, 6) and \
            len(pods) == 6 and all(p.spec.containers[0].image == image and _live(p) for p in pods)

    await eventually(lambda: rolled_out("app:0"), timeout=WAIT, interval=0.2, what="roller at app:0")

    async def roll(i: int) -> None:
        await api.deployments.patch("roller", {"spec": {"template": {"spec": {"containers": [
            {"name": "c1", "image": f"app:{i + 1}"}]}}}})

    await _panic_rounds(chaos_cluster, FP_AFTER_SCALE, roll)
    await roll(ROUNDS)
    await eventually(lambda: rolled_out(f"app:{ROUNDS + 1}"), timeout=WAIT, interval=0.2,
                     what=f"roller at app:{ROUNDS + 1}")
    result = chaos_cluster.kplane("check")
    assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"
    await api.deployments.delete("roller")
