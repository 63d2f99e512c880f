"""KEP-1287 "Resize Status": Infeasible is more than "over the node's capacity". On real processes,
two nodes whose kubelets run Kubernetes' resource-manager policies —

- node-1 (``kplane up --kubelet-arg=--cpu-manager-policy=static``): a Guaranteed pod's CPU resize is
  Infeasible, "Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"";
- node-2, added with ``kplane node add --kubelet-arg=--cpu-manager-policy=none
  --kubelet-arg=--memory-manager-policy=Static --kubelet-arg=--memory-swap-behavior=LimitedSwap`` (its
  own flags after the cluster's): a Guaranteed pod's memory resize is Infeasible
  (the Memory manager) while its CPU resize is actuated, and a Burstable container that may swap
  cannot have its memory resized ("In-place resize of containers with swap is not supported.");

each counted in ``kubelet_pod_infeasible_resizes_total{reason_detail}`` as Kubernetes names it. A
``--kubelet-arg`` the kubelet would refuse is refused by ``kplane node add`` with one line.
"""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.metrics import metric
from tests.harness.resize_preemption import wait_actuated, wait_resize_conditions
from tests.harness.wait import wait_running

pytestmark = pytest.mark.scenario

policy_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi",
                                 kubelet_args=FAST_KUBELET + ["--cpu-manager-policy=static"])
# The cluster's --kubelet-arg flags go to node-2's kubelet too; its own come after them and win.
NODE_2_ARGS = ["--kubelet-arg=--cpu-manager-policy=none", "--kubelet-arg=--memory-manager-policy=Static",
               "--kubelet-arg=--memory-swap-behavior=LimitedSwap"]


def _pod(name: str, node: str, cpu: str, memory: str, memory_limit: str, cpu_limit: str | None = None) -> core_pb2.Pod:
    return (MakePod().name(name).node(node).req(cpu=cpu, memory=memory).lim(cpu=cpu_limit, memory=memory_limit)
            .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())


async def _resize(api, name: str, requests: dict[str, str], limits: dict[str, str]) -> None:
    await api.pods.patch(name, {"spec": {"containers": [{"name": "c1", "resources": {
        "requests": requests, "limits": limits}}]}}, subresource="resize")


async def _infeasible(api, name: str) -> str:
    pod = await wait_resize_conditions(api, name, {"PodResizePending": "Infeasible"}, f"{name}'s resize Infeasible")
    return next(c.message for c in pod.status.conditions if c.type == "PodResizePending")


def _infeasible_count(tc, node: str, detail: str) -> float:
    return metric(tc, f"kubelet/{node}", "kubelet_pod_infeasible_resizes_total", f'reason_detail="{detail}"')


async def test_each_node_policy_makes_its_resizes_infeasible(policy_cluster):
    tc = policy_cluster
    added = tc.kplane("node", "add", "node-2", "--cpu", "4", "--memory", "8Gi", *NODE_2_ARGS)
    assert added.returncode == 0, added.stderr
    api = tc.client()
    try:
        await api.pods.create(_pod("pinned-cpu", "node-1", "1", "1Gi", "1Gi", cpu_limit="1"))
        await api.pods.create(_pod("pinned-memory", "node-2", "1", "1Gi", "1Gi", cpu_limit="1"))
        await api.pods.create(_pod("swapping", "node-2", "500m", "1Gi", "2Gi"))
        await wait_running(api, "pinned-cpu", "pinned-memory", "swapping", timeout=30)

        await _resize(api, "pinned-cpu", {"cpu": "2"}, {"cpu": "2"})
        assert await _infeasible(api, "pinned-cpu") == \
            'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"'
        assert _infeasible_count(tc, "node-1", "guaranteed_pod_cpu_manager_static_policy") == 1

        await _resize(api, "pinned-memory", {"memory": "2Gi"}, {"memory": "2Gi"})
        assert await _infeasible(api, "pinned-memory") == \
            'Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"'
        assert _infeasible_count(tc, "node-2", "guaranteed_pod_memory_manager_static_policy") == 1
        # Back to its allocation, then CPU only: the Memory manager has nothing against that.
        await _resize(api, "pinned-memory", {"memory": "1Gi", "cpu": "2"}, {"memory": "1Gi", "cpu": "2"})
        await wait_actuated(api, "pinned-memory", "2")

        await _resize(api, "swapping", {"memory": "1500Mi"}, {"memory": "2Gi"})
        assert await _infeasible(api, "swapping") == "In-place resize of containers with swap is not supported."
        assert _infeasible_count(tc, "node-2", "swap_limitation") == 1
    finally:
        await api.close()


def test_node_add_refuses_a_kubelet_arg_the_kubelet_would_refuse(policy_cluster):
    refused = policy_cluster.kplane("node", "add", "node-3", "--kubelet-arg=--cpu-manager-policy=Static")
    assert refused.returncode != 0
    assert refused.stderr.strip().splitlines() == [
        "error: invalid --kubelet-arg: invalid --cpu-manager-policy 'Static': want one of none, static"]
    policy_cluster.reload()
    assert "kubelet/node-3" not in policy_cluster.state.processes, "nothing was started"
