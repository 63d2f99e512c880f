"""KEP-5836 "Processing Deferred Resizes in the Scheduling Cycle": "Only NodeName, NodeResourcesFit,
and DefaultPreemption plugins implement handling for processing Deferred pods. All other plugins
are modified to implement the PreFilter interface and return Skip for Deferred pods" — on real
processes, for the plugin with the most to say about a running pod: DynamicResources.

A high-priority pod holding a device through a ResourceClaim runs beside two low-priority pods on
a node of 4 CPUs (one fake GPU). Its claim is then deleted: the claim stays, being deleted, while
the pod still uses it (its delete-protection finalizer). A new pod naming that claim would wait at
DynamicResources' PreEnqueue; the running pod's Deferred resize must not: its cycle checks
resource fit only, so it preempts the lowest-priority pod and the kubelet actuates the resize.
``kplane check`` replays the history afterwards.
"""

from __future__ import annotations

import pytest

from kubelet.dra.driver import DEVICE_CLASS_NAME
from machinery.api import resource_pb2
from tests.harness.api import resize
from tests.harness.cluster import FAST_KUBELET, start_cluster, stop_cluster
from tests.harness.resize_preemption import (
    GATE,
    WAIT,
    assert_never_nominated_nor_unscheduled,
    gone,
    preempted_by,
    resizable_pod,
    resize_api,
    run_pods,
    running_names,
    wait_actuated,
)
from tests.harness.wait import eventually

pytestmark = pytest.mark.scenario


def _gpu_claim(name: str) -> resource_pb2.ResourceClaim:
    claim = resource_pb2.ResourceClaim()
    claim.metadata.name, claim.metadata.namespace = name, "default"
    claim.spec.devices.requests.add(name="gpu").exactly.device_class_name = DEVICE_CLASS_NAME
    return claim


async def test_a_deferred_resize_preempts_though_its_claim_is_being_deleted():
    tc = start_cluster(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", dra_devices=1,
                       kubelet_args=FAST_KUBELET, feature_gates=GATE)
    try:
        async with resize_api(tc) as api:
            await api.resource_claims.create(_gpu_claim("gpu"))
            holder = resizable_pod("a", "2", "p-high").obj()
            holder.spec.resource_claims.add(name="gpu", resource_claim_name="gpu")
            holder.spec.containers[0].resources.claims.add(name="gpu")
            await run_pods(api, holder, resizable_pod("b", "1", "p-low").obj(),
                           resizable_pod("c", "1", "p-lowest").obj())

            await api.resource_claims.delete("gpu", "default")

            async def being_deleted() -> bool:
                claim = await api.resource_claims.get("gpu", "default")
                return bool(claim.metadata.deletion_timestamp) and bool(claim.status.reserved_for)
            await eventually(being_deleted, timeout=WAIT, what="the claim being deleted, still reserved for a")

            await resize(api, "a", cpu="3")  # 3 + 1 + 1 > 4: the lowest-priority pod must go
            await gone(api, "c")
            pod = await wait_actuated(api, "a", "3")
            assert await preempted_by(api, "c") == "a"
            assert await running_names(api) == {"a", "b"}
            assert_never_nominated_nor_unscheduled(pod)
    finally:
        stop_cluster(tc)
