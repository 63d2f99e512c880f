"""Eviction signals: what the node's memory looks like now (Kubernetes' summary API, cut to memory).

    summary = await collect(runtime, memory_capacity=1 << 30, system_usage=0)
    observations = observe(summary)          # {"memory.available": Observation(available, capacity, time)}

The runtime's ``ListContainerStats`` gives each running container's ``working_set_bytes``; a pod's
working set is the sum over its containers (grouped by the ``io.kubernetes.pod.uid`` label). The
node's working set is the pods' plus ``system_usage`` — the simulated memory of everything that
is not a pod (kernel, system daemons, the kubelet itself), set by ``--system-memory-usage``.

    memory.available := node capacity[memory] − node working set      (never below 0)

as the Kubernetes documentation defines it. Kubernetes reads the node's working set from the
root cgroup (which excludes inactive_file); kplane's simulated containers have no page cache, so
their usage is their working set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from kubelet.eviction.thresholds import MEMORY_AVAILABLE
from kubelet.runtime_ops import LABEL_CONTAINER_NAME, LABEL_POD_UID
from machinery.api import cri_pb2


@dataclass
class PodStats:
    """One pod's memory: working set bytes per running container."""

    uid: str
    containers: dict[str, int] = field(default_factory=dict)

    @property
    def working_set(self) -> int:
        return sum(self.containers.values())


@dataclass
class Summary:
    """The node's memory at one moment (``time``: unix seconds of the newest sample, None if none)."""

    memory_capacity: int
    system_usage: int
    pods: dict[str, PodStats]
    time: float | None = None

    @property
    def working_set(self) -> int:
        return self.system_usage + sum(p.working_set for p in self.pods.values())


@dataclass(frozen=True)
class Observation:
    """A signal's value: how much is available of how much there is, and when it was sampled."""

    available: int
    capacity: int
    time: float | None = None


def summarize(stats: Iterable[cri_pb2.ContainerStats], memory_capacity: int, system_usage: int = 0) -> Summary:
    """A Summary from ``ListContainerStats`` results (running containers only)."""
    pods: dict[str, PodStats] = {}
    newest = 0
    for s in stats:
        labels = s.attributes.labels
        uid = labels.get(LABEL_POD_UID)
        if not uid:
            continue  # not a kubelet-managed container
        name = labels.get(LABEL_CONTAINER_NAME) or s.attributes.metadata.name
        pod = pods.setdefault(uid, PodStats(uid))
        pod.containers[name] = pod.containers.get(name, 0) + s.memory.working_set_bytes.value
        newest = max(newest, s.memory.timestamp)
    return Summary(memory_capacity, system_usage, pods, newest / 1e9 if newest else None)


async def collect(runtime, memory_capacity: int, system_usage: int = 0) -> Summary:
    """Ask the runtime (a ``RuntimeApi``) for its container stats and summarize them."""
    resp = await runtime.list_container_stats(cri_pb2.ListContainerStatsRequest())
    return summarize(resp.stats, memory_capacity, system_usage)


def observe(summary: Summary) -> dict[str, Observation]:
    """The signals kplane simulates, from a Summary."""
    capacity = summary.memory_capacity
    available = max(0, capacity - summary.working_set)
    return {MEMORY_AVAILABLE: Observation(available, capacity, summary.time)}
