"""The kubelet's node agent against a real apiserver, with a kubelet's own token."""

from __future__ import annotations

import pytest

from kubelet.node import Conditions, NodeAgent, NodeConfig
from machinery import errors
from machinery.api import core_pb2
from tests.harness.cluster import cluster_fixture

pytestmark = pytest.mark.integration

# KEP-5836's node podPreemptionPolicy, which a restarted kubelet must keep, is served with its gate.
kcluster = cluster_fixture(feature_gates="SchedulerPreemptionForPodResize=true")


async def test_registers_node_with_allocatable_minus_reserved_and_renews_its_lease(kcluster):
    kubelet = kcluster.client("system:node:node-1")
    state = Conditions()
    cfg = NodeConfig("node-1", cpu="4", memory="8Gi", kube_reserved={"cpu": "500m", "memory": "1Gi"},
                     labels={"zone": "a"}, taints=[core_pb2.Taint(key="dedicated", value="x", effect="NoSchedule")],
                     kubelet_version="v1.34.0")
    agent = NodeAgent(kubelet, cfg, lambda: state)
    try:
        node = await agent.register()
        assert dict(node.status.capacity)["cpu"] == "4"
        assert dict(node.status.allocatable) == {"cpu": "3500m", "memory": "7Gi", "pods": "110",
                                                 "ephemeral-storage": "100Gi"}
        assert node.status.node_info.kubelet_version == "v1.34.0"
        assert node.metadata.labels["zone"] == "a" and node.spec.taints[0].key == "dedicated"
        ready = {c.type: c for c in node.status.conditions}["Ready"]
        assert (ready.status, ready.reason) == ("True", "KubeletReady")
        await agent.renew_lease()
        lease = await kubelet.leases.get("node-1", "kube-node-lease")
        assert lease.spec.holder_identity == "node-1" and lease.spec.lease_duration_seconds == 40
        first = lease.spec.renew_time
        await agent.renew_lease()
        assert (await kubelet.leases.get("node-1", "kube-node-lease")).spec.renew_time >= first

        # A condition change is written; an unchanged status is not (no new revision).
        rv = (await kubelet.nodes.get("node-1")).metadata.resource_version
        await agent.update_status()
        assert (await kubelet.nodes.get("node-1")).metadata.resource_version == rv
        state.memory_pressure = True
        await agent.update_status()
        node = await kubelet.nodes.get("node-1")
        mp = {c.type: c for c in node.status.conditions}["MemoryPressure"]
        assert (mp.status, mp.reason) == ("True", "KubeletHasInsufficientMemory")
    finally:
        await kubelet.close()


async def test_a_restarted_kubelet_adopts_its_node_and_keeps_what_others_set(kcluster, client):
    kubelet = kcluster.client("system:node:node-2")
    try:
        await NodeAgent(kubelet, NodeConfig("node-2"), Conditions).register()
        await client.nodes.patch("node-2", {"spec": {"unschedulable": True,
                                                     "podPreemptionPolicy": {"disableResizePreemption": ["a.io/b"]}}})
        seen = []
        agent = NodeAgent(kubelet, NodeConfig("node-2"), Conditions, on_node=seen.append)
        node = await agent.register()
        assert node.spec.unschedulable
        assert list(node.spec.pod_preemption_policy.disable_resize_preemption) == ["a.io/b"]
        assert seen and seen[-1].spec.unschedulable
    finally:
        await kubelet.close()


async def test_a_kubelet_cannot_register_another_node(kcluster):
    kubelet = kcluster.client("system:node:node-3")
    try:
        with pytest.raises(errors.Forbidden):
            await NodeAgent(kubelet, NodeConfig("node-1-impostor"), Conditions).register()
    finally:
        await kubelet.close()
