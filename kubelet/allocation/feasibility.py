"""Resizes the node's own policies make infeasible, whatever room there is (Kubernetes' resize
admit handler, podResizesAdmitHandler, before its capacity check; KEP-1287 "Resize Status").

A node's kubelet may run the static CPU manager policy (``--cpu-manager-policy static``), the
static Memory manager policy (``--memory-manager-policy Static``) or let Burstable containers swap
(``--memory-swap-behavior LimitedSwap``, Kubernetes' ``memorySwap.swapBehavior``). Each stops some
resizes for good; :func:`infeasible_by_policy` says which, with Kubernetes' message and the
``reason_detail`` of ``kubelet_pod_infeasible_resizes_total``.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubelet.preemption import is_critical
from machinery import resources
from machinery.api import core_pb2

CPU_MANAGER_POLICIES = ("none", "static")
MEMORY_MANAGER_POLICIES = ("None", "Static")
SWAP_BEHAVIORS = ("NoSwap", "LimitedSwap")

SWAP_MESSAGE = "In-place resize of containers with swap is not supported."


@dataclass(frozen=True)
class NodeResourcePolicies:
    """The kubelet's resource-manager policies, as Kubernetes' KubeletConfiguration names them."""

    cpu_manager_policy: str = "none"
    memory_manager_policy: str = "None"
    swap_behavior: str = "NoSwap"

    def __post_init__(self) -> None:
        for flag, value, allowed in (("--cpu-manager-policy", self.cpu_manager_policy, CPU_MANAGER_POLICIES),
                                     ("--memory-manager-policy", self.memory_manager_policy, MEMORY_MANAGER_POLICIES),
                                     ("--memory-swap-behavior", self.swap_behavior, SWAP_BEHAVIORS)):
            if value not in allowed:
                raise ValueError(f"invalid {flag} {value!r}: want one of {', '.join(allowed)}")


DEFAULT_POLICIES = NodeResourcePolicies()


@dataclass(frozen=True)
class Infeasible:
    detail: str  # kubelet_pod_infeasible_resizes_total{reason_detail}
    message: str  # the PodResizePending condition's message


def _memory_request(c: core_pb2.Container) -> int:
    return resources.container_requests(c).get("memory", 0)


def swap_behavior(pod: core_pb2.Pod, container: core_pb2.Container, node: str) -> str:
    """The container's swap (Kubernetes' GetContainerSwapBehavior): LimitedSwap only for a
    Burstable pod's container that asks for memory with a request below its limit, never for a
    critical pod; NoSwap otherwise or when the node does not swap."""
    if node != "LimitedSwap" or is_critical(pod) or resources.qos_class(pod) != "Burstable":
        return "NoSwap"
    request, limit = _memory_request(container), resources.container_limits(container).get("memory", 0)
    if (request == 0 and limit == 0) or request == limit:
        return "NoSwap"
    return "LimitedSwap"


def _restarts_on_memory_resize(container: core_pb2.Container) -> bool:
    return any(p.resource_name == "memory" and p.restart_policy == "RestartContainer" for p in container.resize_policy)


def _request_changes(desired: core_pb2.Pod, allocated: core_pb2.Pod, resource: str) -> bool:
    """Whether a resizable container's request of ``resource`` changes (Kubernetes'
    guaranteedPodResourceResizeRequired: for a Guaranteed pod requests are its limits)."""
    def amount(c: core_pb2.Container) -> int:
        return resources.container_requests(c).get(resource, 0)

    before = {c.name: amount(c) for c in resources.resizable_containers(allocated)}
    return any(amount(c) != before.get(c.name, 0) for c in resources.resizable_containers(desired))


def infeasible_by_policy(desired: core_pb2.Pod, allocated: core_pb2.Pod,
                         policies: NodeResourcePolicies) -> Infeasible | None:
    """Why the node's policies make the resize from ``allocated`` to ``desired`` infeasible, in
    Kubernetes' order: a memory change of a container that swaps and is not restarted for it;
    for a Guaranteed pod, a CPU change under the static CPU manager or a memory change under the
    static Memory manager (each pins resources to the pod as admitted)."""
    allocated_by_name = {c.name: c for c in list(allocated.spec.containers) + list(allocated.spec.init_containers)}
    for want in list(desired.spec.containers) + list(desired.spec.init_containers):
        have = allocated_by_name.get(want.name)
        if have is None or _memory_request(want) == _memory_request(have):
            continue
        if _restarts_on_memory_resize(have):
            continue
        behaviors = (swap_behavior(desired, want, policies.swap_behavior),
                     swap_behavior(allocated, have, policies.swap_behavior))
        if any(b != "NoSwap" for b in behaviors):
            return Infeasible("swap_limitation", SWAP_MESSAGE)
    if resources.qos_class(desired) == "Guaranteed":
        if policies.cpu_manager_policy == "static" and _request_changes(desired, allocated, "cpu"):
            return Infeasible("guaranteed_pod_cpu_manager_static_policy",
                              'Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"')
        if policies.memory_manager_policy == "Static" and _request_changes(desired, allocated, "memory"):
            return Infeasible("guaranteed_pod_memory_manager_static_policy",
                              'Resize is infeasible for Guaranteed Pods alongside Memory Manager policy "Static"')
    return None
