"""What the feature gates mean to the in-tree plugins (kube-scheduler's plugins/feature.Features).

kube-scheduler reads its feature gates once and hands each plugin factory a ``Features`` value,
so plugins never consult the gates themselves and their args hold only what a
KubeSchedulerConfiguration may set. kplane's scheduler does the same through the ``Handle`` it
gives every plugin (``Handle.features``); a plugin built without a handle, as in unit tests,
gets the defaults, every gate at its default.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machinery.featuregates import FeatureGates


@dataclass(frozen=True)
class Features:
    # InPlacePodVerticalScaling (KEP-1287): NodeResourcesFit requeues on a pod scaled down in place.
    enable_in_place_pod_vertical_scaling: bool = True
    # SchedulerAsyncPreemption (KEP-4832): DefaultPreemption evicts victims off the scheduling cycle.
    enable_async_preemption: bool = True
    # SchedulerPreemptionForPodResize (KEP-5836, alpha; upstream's InPlacePodVerticalScalingSchedulerPreemption):
    # a Deferred in-place resize is queued and may preempt lower-priority pods on its node.
    enable_scheduler_preemption_for_pod_resize: bool = False
    # DynamicResourceAllocation (structured parameters, GA): the DynamicResources plugin allocates claims.
    enable_dynamic_resource_allocation: bool = True

    @classmethod
    def from_gates(cls, gates: FeatureGates | None) -> "Features":
        """The features of these gates; None is every gate at its default."""
        if gates is None:
            return cls()
        return cls(enable_in_place_pod_vertical_scaling=gates.enabled("InPlacePodVerticalScaling"),
                   enable_async_preemption=gates.enabled("SchedulerAsyncPreemption"),
                   enable_scheduler_preemption_for_pod_resize=gates.enabled("SchedulerPreemptionForPodResize"),
                   enable_dynamic_resource_allocation=gates.enabled("DynamicResourceAllocation"))


def features_of(handle: Any) -> Features:
    """The features a plugin factory's handle carries (the defaults without one)."""
    features = getattr(handle, "features", None)
    return features if isinstance(features, Features) else Features()
