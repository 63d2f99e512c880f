"""Kubernetes docs: "Taints and Tolerations", Taint based Evictions — a node whose kubelet dies, with a
ReplicaSet's pods on it, over real processes: the node lifecycle controller marks it Unknown and
taints it ``node.kubernetes.io/unreachable``; the taint eviction controller deletes its pods once
their ``tolerationSeconds`` ran out; the ReplicaSet, counting pods being deleted as gone, makes
replacements, which the scheduler places on the other nodes (the dead one is tainted NoSchedule
too). The kubelet back, the taints go and it finishes the old pods' deletion.

Periods are shortened by flag: the kubelets renew their Lease every second and a node is silent
after 4 s (Kubernetes: 10 s and 50 s); the pods tolerate the unreachable taint for 2 s (Kubernetes'
DefaultTolerationSeconds gives 300 s).
"""

from __future__ import annotations

import pytest

from tests.harness.builders import MakeReplicaSet
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.wait import eventually

pytestmark = pytest.mark.scenario

UNREACHABLE = "node.kubernetes.io/unreachable"

kcluster = cluster_fixture(
    nodes=3, schedulers=1, controller_managers=1,
    kubelet_args=[*FAST_KUBELET, "--node-lease-duration-seconds=4"],
    controller_manager_args=["--node-monitor-grace-period=4s", "--node-monitor-period=500ms"])


def _live(pods) -> list:
    return [p for p in pods if not p.metadata.deletion_timestamp and p.status.phase not in ("Succeeded", "Failed")]


async def test_a_dead_kubelets_replicaset_pods_are_evicted_after_their_toleration_and_come_back_elsewhere(
        kcluster, client):
    rs = MakeReplicaSet().name("web").replicas(3).req(cpu="100m").obj()  # grace 30 s: its pods go gracefully
    rs.spec.template.spec.tolerations.add(key=UNREACHABLE, operator="Exists", effect="NoExecute",
                                          toleration_seconds=2)
    await client.replica_sets.create(rs)

    async def running(count: int, avoid: str = "") -> bool:
        pods = _live((await client.pods.list(label_selector="app=web")).items)
        ok = [p for p in pods if p.status.phase == "Running" and p.spec.node_name and p.spec.node_name != avoid]
        return len(ok) == count == len(pods)
    await eventually(lambda: running(3), timeout=30, what="the ReplicaSet's 3 pods running")
    pods = (await client.pods.list(label_selector="app=web")).items
    victim_node = pods[0].spec.node_name
    on_victim = {p.metadata.name for p in pods if p.spec.node_name == victim_node}

    kill(kcluster, f"kubelet/{victim_node}")
    try:
        async def tainted() -> bool:
            node = await client.nodes.get(victim_node)
            ready = next((c.status for c in node.status.conditions if c.type == "Ready"), "")
            return ready == "Unknown" and (UNREACHABLE, "NoExecute") in {(t.key, t.effect) for t in node.spec.taints}
        await eventually(tainted, timeout=20, what=f"{victim_node} Unknown and tainted unreachable:NoExecute")

        # Its pods are deleted after their 2 s, and the ReplicaSet's replacements run elsewhere.
        await eventually(lambda: running(3, avoid=victim_node), timeout=40,
                         what=f"3 replicas running off {victim_node}")
        by_name = {p.metadata.name: p for p in (await client.pods.list(label_selector="app=web")).items}
        for name in on_victim:
            old = by_name.get(name)
            assert old is not None and old.metadata.deletion_timestamp, \
                f"{name} is Terminating: its kubelet is dead and cannot finish the deletion"
            assert any(c.type == "DisruptionTarget" and c.reason == "DeletionByTaintManager"
                       for c in old.status.conditions)
        events = (await client.events.list()).items
        assert any(e.reason == "TaintManagerEviction" and e.involved_object.name in on_victim for e in events)
        assert any(e.reason == "SuccessfulCreate" and e.involved_object.name == "web" for e in events)
    finally:
        start(kcluster, f"kubelet/{victim_node}")

    async def healed() -> bool:
        node = await client.nodes.get(victim_node)
        ready = next((c.status for c in node.status.conditions if c.type == "Ready"), "")
        names = {p.metadata.name for p in (await client.pods.list(label_selector="app=web")).items}
        return ready == "True" and not any(t.key == UNREACHABLE for t in node.spec.taints) and not names & on_victim
    await eventually(healed, timeout=30, what=f"{victim_node} Ready, untainted, its old pods gone")
    assert await running(3)
    check = kcluster.kplane("check")
    assert check.returncode == 0, check.stdout + check.stderr
    await client.replica_sets.delete("web")
