"""The controller-manager over real processes: node lifecycle and taint-based eviction when a kubelet
dies (Kubernetes docs: "Taints and Tolerations", Taint based Evictions), the pod garbage
collector, and leader election between two controller-managers.

The kubelets renew their Lease every second and the node lifecycle controller gives a silent
node 4 s instead of Kubernetes' 50 s, so a killed kubelet's node goes Unknown within seconds.
"""

from __future__ import annotations

import pytest

from machinery import errors
from tests.harness.builders import MakePod
from tests.harness.cluster import cluster_fixture, kill, start
from tests.harness.wait import condition, eventually, wait_deleted, wait_running

pytestmark = pytest.mark.integration

FAST_LEASE = ["--node-lease-duration-seconds=4", "--node-status-interval=1"]
FAST_CONTROLLERS = ["--node-monitor-grace-period=4s", "--node-monitor-period=500ms", "--pod-gc-period=500ms",
                    "--pod-gc-quarantine=1s", "--terminated-pod-gc-threshold=2",
                    "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
                    "--leader-elect-retry-period=500ms"]

kcluster = cluster_fixture(nodes=3, controller_managers=2, kubelet_args=FAST_LEASE,
                           controller_manager_args=FAST_CONTROLLERS)

UNREACHABLE = "node.kubernetes.io/unreachable"


def _taints(node) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in node.spec.taints}


def _ready(node) -> str:
    return next((c.status for c in node.status.conditions if c.type == "Ready"), "")


async def test_a_dead_kubelets_node_goes_unknown_and_tainted_and_its_pods_go_after_their_toleration(
        kcluster, client):
    """Taint based Evictions: Ready Unknown -> node.kubernetes.io/unreachable NoExecute; a pod
    tolerating it for 2 s is deleted after 2 s, one tolerating it for ever stays; the kubelet back,
    the taints go."""
    await client.pods.create(MakePod().name("brief").req(cpu="100m").node("node-2")
                             .toleration(UNREACHABLE, "Exists", effect="NoExecute", toleration_seconds=2).obj())
    await client.pods.create(MakePod().name("stays").req(cpu="100m").node("node-2")
                             .toleration(UNREACHABLE, "Exists", effect="NoExecute").obj())
    await wait_running(client, "brief", "stays")
    kill(kcluster, "kubelet/node-2")
    try:
        async def unknown_and_tainted() -> bool:
            node = await client.nodes.get("node-2")
            return _ready(node) == "Unknown" and {(UNREACHABLE, "NoExecute"), (UNREACHABLE, "NoSchedule")} <= \
                _taints(node)
        await eventually(unknown_and_tainted, timeout=20, what="node-2 Unknown with the unreachable taints")
        node = await client.nodes.get("node-2")
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert (ready.reason, ready.message) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")
        for other in ("node-1", "node-3"):
            assert _ready(await client.nodes.get(other)) == "True", "the other nodes' kubelets still post"

        async def brief_marked() -> bool:
            pod = await client.pods.get("brief")
            return bool(pod.metadata.deletion_timestamp)
        await eventually(brief_marked, timeout=15, what="brief marked for deletion after its 2 s")
        brief = await client.pods.get("brief")
        target = condition(brief, "DisruptionTarget")
        assert target is not None and target.reason == "DeletionByTaintManager"
        stays = await client.pods.get("stays")
        assert not stays.metadata.deletion_timestamp, "a pod that tolerates the taint for ever stays"
        events = (await client.events.list()).items
        assert any(e.reason == "NodeNotReady" and e.involved_object.name == "node-2" for e in events)
        assert any(e.reason == "TaintManagerEviction" and e.message == "Marking for deletion Pod default/brief"
                   for e in events)
    finally:
        start(kcluster, "kubelet/node-2")

    async def ready_untainted() -> bool:
        node = await client.nodes.get("node-2")
        return _ready(node) == "True" and not any(k == UNREACHABLE for k, _ in _taints(node))
    await eventually(ready_untainted, timeout=20, what="node-2 Ready again, its taints gone")
    await wait_deleted(client, "brief", timeout=20)  # its kubelet, back, finishes the deletion
    await wait_running(client, "stays")
    await client.pods.delete("stays", grace_period_seconds=0)


async def test_podgc_deletes_the_pods_of_a_node_that_no_longer_exists(client):
    await client.pods.create(MakePod().name("orphan").req(cpu="100m").node("gone-node").obj())

    async def orphan_gone() -> bool:
        try:
            await client.pods.get("orphan")
            return False
        except errors.NotFound:
            return True
    await eventually(orphan_gone, timeout=20, what="the orphaned pod deleted by podgc")
    events = [e for e in (await client.events.list()).items if e.involved_object.name == "orphan"]
    assert events == [], "podgc records no Event (as Kubernetes')"


async def _mark_failed(client, name: str) -> None:
    """The pod's phase Failed, as its kubelet would leave it (retried while the kubelet writes too)."""
    for _ in range(20):
        pod = await client.pods.get(name)
        pod.status.phase = "Failed"
        try:
            await client.pods.update_status(pod)
            return
        except errors.Conflict:
            continue
    raise AssertionError(f"could not mark {name} Failed")


async def test_podgc_keeps_no_more_terminated_pods_than_its_threshold_oldest_first(client):
    names = ["done-1", "done-2", "done-3"]  # created in this order: done-1 is the oldest (threshold: 2)
    for name in names:
        await client.pods.create(MakePod().name(name).req(cpu="10m").node("node-1").obj())
        await _mark_failed(client, name)
    await wait_deleted(client, "done-1", timeout=20)
    left = {p.metadata.name for p in (await client.pods.list()).items if p.metadata.name in names}
    assert left == {"done-2", "done-3"}
    for name in left:
        await client.pods.delete(name, grace_period_seconds=0)


async def test_the_standby_controller_manager_takes_over_when_the_leader_is_killed(kcluster, client):
    lease = await client.leases.get("kube-controller-manager", "kube-system")
    leader = lease.spec.holder_identity
    assert leader in ("controller-manager", "controller-manager-2")
    standby = "controller-manager-2" if leader == "controller-manager" else "controller-manager"
    kill(kcluster, leader)
    try:
        async def taken_over() -> bool:
            lease = await client.leases.get("kube-controller-manager", "kube-system")
            return lease.spec.holder_identity == standby
        await eventually(taken_over, timeout=20, what=f"{standby} leading")
        # The new leader's podgc works.
        await client.pods.create(MakePod().name("orphan-2").req(cpu="100m").node("gone-node").obj())
        await wait_deleted(client, "orphan-2", timeout=20)
    finally:
        start(kcluster, leader)
