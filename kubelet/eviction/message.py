"""What an evicted or rejected pod is told: Kubernetes' eviction texts, word for word.

    The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. Container c1
    was using 500Mi, request is 100Mi, has larger consumption of memory.

    The node had condition: [MemoryPressure].

Each container (regular, then init) whose usage exceeds its request is named; with pod-level
resources the pod is named first. Kubernetes ends every sentence with ". " and so leaves a
trailing space; kplane drops it. Quantities print as Kubernetes prints them (``24Mi``,
``157286401``). ``offending`` lists what Kubernetes puts in the Evicted event's annotations
(``offending_containers``, ``offending_containers_usage``, ``starved_resource``); kplane logs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kubelet.eviction.signals import PodStats
from machinery import resources
from machinery.api import core_pb2
from machinery.quantity import BINARY_SI, Quantity, parse_quantity

REASON = "Evicted"


def bytes_text(n: int) -> str:
    """Bytes as Kubernetes prints a BinarySI quantity."""
    return str(Quantity.from_int(n, BINARY_SI))


@dataclass
class EvictionMessage:
    text: str
    offending: dict[str, str] = field(default_factory=dict)


def eviction_message(resource: str, pod: core_pb2.Pod, stats: PodStats | None, threshold: Quantity | None,
                     available: int | None) -> EvictionMessage:
    parts = [f"The node was low on resource: {resource}."]
    if threshold is not None and available is not None:
        parts.append(f"Threshold quantity: {threshold}, available: {bytes_text(available)}.")
    if stats is None:
        return EvictionMessage(" ".join(parts))
    offending: dict[str, str] = {}
    if resource == "memory" and resources.is_pod_level_resources_set(pod):
        request = pod.spec.resources.requests.get("memory")
        if request:
            parts.append(f"Pod {pod.metadata.name} was using {bytes_text(stats.working_set)}, request is "
                         f"{parse_quantity(request)}, has larger consumption of {resource}.")
            offending["offending_pod"] = pod.metadata.name
            offending["offending_pod_usage"] = bytes_text(stats.working_set)
    names, usages = [], []
    for c in list(pod.spec.containers) + list(pod.spec.init_containers):
        used = stats.containers.get(c.name)
        if used is None:
            continue
        text = c.resources.requests.get(resource)
        request_q = parse_quantity(text) if text else Quantity.from_int(0, BINARY_SI)
        if used > request_q.value():
            parts.append(f"Container {c.name} was using {bytes_text(used)}, request is {request_q}, "
                         f"has larger consumption of {resource}.")
            names.append(c.name)
            usages.append(bytes_text(used))
    offending.update({"offending_containers": ",".join(names), "offending_containers_usage": ",".join(usages),
                      "starved_resource": resource})
    return EvictionMessage(" ".join(parts), offending)


def node_condition_message(conditions: Iterable[str]) -> str:
    """Kubernetes' admission refusal text (a Go slice prints as ``[A B]``)."""
    return f"The node had condition: [{' '.join(conditions)}]."
