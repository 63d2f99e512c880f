"""KEP-1287 "CRI Changes": the pod-level record a sandbox holds, on real processes (etcd, the
apiserver, the scheduler, one node whose kubelet and fake runtime are processes).

The runtime keeps each sandbox's whole record — the containers' resources summed, plus the
pod's overhead — from RunPodSandbox on, and every ``UpdatePodSandboxResources`` the kubelet sends
carries all of it: a CPU-only resize keeps the memory limit in the record, a memory-only one the
CPU quota. The runtime refuses a container update that would take the containers over the pod's
limit, so the order "Container resource limit update ordering" prescribes is checked by its
outcome: each resize below ends actuated, with no ResizeError.
"""

from __future__ import annotations

import pytest

from machinery.api import cri_pb2
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.node_state import runtime
from tests.harness.resize_preemption import resize_state
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
MI = 1 << 20

cri_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET)


def _pod():
    """Two Guaranteed containers, both resized in place: c1 1 CPU / 100Mi, c2 500m / 200Mi."""
    return (MakePod().name("duo")
            .container("c1", cpu="1", memory="100Mi").lim(cpu="1", memory="100Mi")
            .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired")
            .container("c2", cpu="500m", memory="200Mi").lim(cpu="500m", memory="200Mi")
            .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())


async def _record(tc) -> cri_pb2.LinuxContainerResources:
    rt = runtime(tc, NODE)
    try:
        state = (await rt.get_state(cri_pb2.GetStateRequest())).state
    finally:
        await rt.close()
    (sandbox,) = [s for s in state.sandboxes if s.config.metadata.name == "duo"
                  and s.status.state == cri_pb2.SANDBOX_READY]
    return sandbox.resources


def _fields(r: cri_pb2.LinuxContainerResources) -> dict[str, int]:
    return {"cpu_shares": r.cpu_shares, "cpu_quota": r.cpu_quota, "memory": r.memory_limit_in_bytes}


async def _resize_to(api, tc, c1: dict[str, str], want: dict[str, int]) -> None:
    await api.pods.patch("duo", {"spec": {"containers": [{"name": "c1", "resources": {
        "requests": c1, "limits": c1}}]}}, subresource="resize")
    seen: dict = {}

    async def actuated():
        pod = await api.pods.get("duo")
        seen["conditions"] = {c.type: (c.reason, c.message) for c in pod.status.conditions
                              if c.type.startswith("PodResize")}
        seen["record"] = _fields(await _record(tc))
        return not resize_state(pod) and seen["record"] == want

    await eventually(actuated, timeout=30, what=f"c1 resized to {c1}")
    assert "PodResizeInProgress" not in seen["conditions"], seen


async def test_cri_changes_the_sandbox_keeps_its_whole_record(cri_cluster):
    tc = cri_cluster
    api = tc.client()
    try:
        await api.pods.create(_pod())
        await wait_running(api, "duo", timeout=30)
        # from RunPodSandbox on: 1.5 CPUs (1536 shares, quota 150000), 300Mi
        assert _fields(await _record(tc)) == {"cpu_shares": 1536, "cpu_quota": 150000, "memory": 300 * MI}
        # CPU up: the record raised first, whole — the memory limit stays in it
        await _resize_to(api, tc, {"cpu": "2", "memory": "100Mi"},
                         {"cpu_shares": 2560, "cpu_quota": 250000, "memory": 300 * MI})
        # memory down: the containers first, then the record — the CPU quota stays in it
        await _resize_to(api, tc, {"cpu": "2", "memory": "50Mi"},
                         {"cpu_shares": 2560, "cpu_quota": 250000, "memory": 250 * MI})
        # both the other way at once
        await _resize_to(api, tc, {"cpu": "1", "memory": "150Mi"},
                         {"cpu_shares": 1536, "cpu_quota": 150000, "memory": 350 * MI})
    finally:
        await api.close()
