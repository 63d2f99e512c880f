"""kubelet.allocation.feasibility: resizes a node's policies make Infeasible (KEP-1287 "Resize
Status"; Kubernetes' resize admit handler), with Kubernetes' messages and reason details."""

from __future__ import annotations

import pytest

from kubelet.allocation.feasibility import NodeResourcePolicies, infeasible_by_policy, swap_behavior
from machinery.api import core_pb2
from tests.harness.builders import MakePod

STATIC_CPU = NodeResourcePolicies(cpu_manager_policy="static")
STATIC_MEMORY = NodeResourcePolicies(memory_manager_policy="Static")
SWAP = NodeResourcePolicies(swap_behavior="LimitedSwap")


def guaranteed(cpu: str = "1", memory: str = "1Gi") -> core_pb2.Pod:
    return MakePod().name("g").req(cpu=cpu, memory=memory).lim(cpu=cpu, memory=memory).obj()


def burstable(memory: str = "1Gi", limit: str = "2Gi") -> core_pb2.Pod:
    return MakePod().name("b").req(cpu="1", memory=memory).lim(memory=limit).obj()


def reason(desired, allocated, policies) -> tuple[str, str] | None:
    found = infeasible_by_policy(desired, allocated, policies)
    return (found.detail, found.message) if found else None


def test_a_guaranteed_cpu_resize_is_infeasible_under_the_static_cpu_manager():
    assert reason(guaranteed(cpu="2"), guaranteed(), STATIC_CPU) == (
        "guaranteed_pod_cpu_manager_static_policy",
        'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"')
    assert reason(guaranteed(memory="2Gi"), guaranteed(), STATIC_CPU) is None, "memory only: the CPU manager is silent"
    assert reason(guaranteed(cpu="2"), guaranteed(), NodeResourcePolicies()) is None
    assert reason(burstable(memory="1500Mi"), burstable(), STATIC_CPU) is None, "not Guaranteed"


def test_a_guaranteed_memory_resize_is_infeasible_under_the_static_memory_manager():
    assert reason(guaranteed(memory="2Gi"), guaranteed(), STATIC_MEMORY) == (
        "guaranteed_pod_memory_manager_static_policy",
        'Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"')
    assert reason(guaranteed(cpu="2"), guaranteed(), STATIC_MEMORY) is None


def test_a_memory_resize_of_a_swapping_container_is_infeasible_unless_it_restarts():
    assert reason(burstable(memory="1500Mi"), burstable(), SWAP) == (
        "swap_limitation", "In-place resize of containers with swap is not supported.")
    assert reason(burstable(memory="1500Mi"), burstable(), NodeResourcePolicies()) is None, "the node does not swap"
    restarts = burstable(memory="1500Mi")
    restarts.spec.containers[0].resize_policy.add(resource_name="memory", restart_policy="RestartContainer")
    allocated = burstable()
    allocated.spec.containers[0].resize_policy.add(resource_name="memory", restart_policy="RestartContainer")
    assert reason(restarts, allocated, SWAP) is None
    assert reason(guaranteed(memory="2Gi"), guaranteed(), SWAP) is None, "a Guaranteed pod never swaps"


@pytest.mark.parametrize("pod, expected", [
    (burstable(), "LimitedSwap"),
    (burstable(memory="1Gi", limit="1Gi"), "NoSwap"),  # request == limit
    (MakePod().name("x").req(cpu="1").obj(), "NoSwap"),  # no memory asked
    (guaranteed(), "NoSwap"),
])
def test_swap_behavior(pod, expected):
    assert swap_behavior(pod, pod.spec.containers[0], "LimitedSwap") == expected
    assert swap_behavior(pod, pod.spec.containers[0], "NoSwap") == "NoSwap"


def test_a_critical_pod_never_swaps():
    pod = burstable()
    pod.spec.priority = 2_000_000_000
    assert swap_behavior(pod, pod.spec.containers[0], "LimitedSwap") == "NoSwap"


def test_unknown_policies_are_refused_with_the_flag():
    with pytest.raises(ValueError, match="invalid --cpu-manager-policy 'Static': want one of none, static"):
        NodeResourcePolicies(cpu_manager_policy="Static")
    with pytest.raises(ValueError, match="invalid --memory-swap-behavior 'UnlimitedSwap'"):
        NodeResourcePolicies(swap_behavior="UnlimitedSwap")
