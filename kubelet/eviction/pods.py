"""What eviction asks about a pod: its priority, its memory request, whether it is critical.

- priority: ``spec.priority`` (resolved from the PriorityClass by the apiserver), 0 when unset —
  Kubernetes' ``PodPriority``;
- memory request: the pod's spec requests as Kubernetes' ``GetResourceRequestQuantity`` counts
  them (regular containers summed, init containers as max, sidecars as the scheduler does,
  pod-level requests when set, plus overhead), not the resized status;
- critical: ``spec.priority >= 2000000000`` (system-cluster-critical, system-node-critical) —
  Kubernetes' ``IsCriticalPod``, whose other cases (static and mirror pods) kplane does not run.
  Critical pods are never evicted and are admitted under pressure.
"""

from __future__ import annotations

from machinery import resources
from machinery.api import core_pb2

SYSTEM_CRITICAL_PRIORITY = 2_000_000_000


def priority(pod: core_pb2.Pod) -> int:
    return pod.spec.priority if pod.spec.HasField("priority") else 0


def is_critical(pod: core_pb2.Pod) -> bool:
    return pod.spec.HasField("priority") and pod.spec.priority >= SYSTEM_CRITICAL_PRIORITY


def memory_request(pod: core_pb2.Pod) -> int:
    """Bytes of memory the pod's spec requests (0 for a BestEffort pod)."""
    return resources.pod_requests(pod, use_status_resources=False).get("memory", 0)


def termination_grace_period(pod: core_pb2.Pod) -> int:
    if pod.spec.HasField("termination_grace_period_seconds"):
        return max(0, pod.spec.termination_grace_period_seconds)
    return 30
