"""Admission under node pressure (Kubernetes' eviction admit handler).

While the eviction manager reports a node condition:

- critical pods are admitted (they keep the node running);
- with MemoryPressure alone, pods that are not BestEffort are admitted, and so are BestEffort
  pods that tolerate the ``node.kubernetes.io/memory-pressure:NoSchedule`` taint;
- everything else is refused: phase Failed, reason ``Evicted``, message
  ``The node had condition: [MemoryPressure].`` (any other pressure refuses all but critical pods).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kubelet.eviction import pods as podinfo
from kubelet.eviction.evaluate import MEMORY_PRESSURE
from kubelet.eviction.message import REASON, node_condition_message
from machinery import resources, wellknown
from machinery.api import core_pb2
from machinery.placement import tolerates

TAINT_MEMORY_PRESSURE = wellknown.TAINT_NODE_MEMORY_PRESSURE


@dataclass(frozen=True)
class AdmitResult:
    admit: bool
    reason: str = ""
    message: str = ""


def admit(pod: core_pb2.Pod, conditions: Sequence[str]) -> AdmitResult:
    if not conditions or podinfo.is_critical(pod):
        return AdmitResult(True)
    if list(conditions) == [MEMORY_PRESSURE]:
        if resources.qos_class(pod) != resources.QOS_BEST_EFFORT:
            return AdmitResult(True)
        taint = core_pb2.Taint(key=TAINT_MEMORY_PRESSURE, effect="NoSchedule")
        if any(tolerates(t, taint) for t in pod.spec.tolerations):
            return AdmitResult(True)
    return AdmitResult(False, REASON, node_condition_message(conditions))
