"""The kubelet's side of Dynamic Resource Allocation without processes (tests/harness/kubelet.py):
a pod's claims must be allocated to this node and reserved for the pod before any of its containers
starts (Kubernetes' pkg/kubelet/cm/dra; Kubernetes docs: Dynamic Resource Allocation, "Pre-scheduled
Pods": "the kubelet will fail to run the Pod and re-check periodically"), and are unprepared when
the pod ends."""

from __future__ import annotations

import pytest

from kubelet.dra.driver import DRIVER_NAME
from kubelet.dra.manager import FAILED_PREPARE
from machinery.api import core_pb2, resource_pb2
from tests.harness.builders import MakePod
from tests.harness.kubelet import KubeletHarness


@pytest.fixture
async def h(tmp_path):
    harness = KubeletHarness(tmp_path, cpu="4", memory="8Gi", dra_devices=2)
    await harness.start()
    yield harness
    await harness.stop()


def gpu_pod(name: str = "web") -> core_pb2.Pod:
    pod = MakePod().name(name).uid(f"uid-{name}").obj()
    pod.spec.resource_claims.add(name="gpu", resource_claim_template_name="gpu")
    pod.spec.containers[0].resources.claims.add(name="gpu")
    return pod


def generated_claim(h: KubeletHarness, pod: core_pb2.Pod, *, node: str = "node-1", device: str = "gpu-0",
                    reserved: bool = True) -> resource_pb2.ResourceClaim:
    """The claim the resourceclaim controller made for the pod, allocated on ``node`` by the
    scheduler (and reserved for the pod unless not ``reserved``), recorded in the pod's status."""
    c = resource_pb2.ResourceClaim()
    c.metadata.name, c.metadata.namespace, c.metadata.uid = f"{pod.metadata.name}-gpu-x7k2p", "default", "uid-claim"
    c.metadata.owner_references.add(api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid,
                                    controller=True)
    allocation = c.status.allocation
    allocation.devices.results.add(request="gpu", driver=DRIVER_NAME, pool=node, device=device)
    allocation.node_selector.node_selector_terms.add().match_fields.add(key="metadata.name", operator="In",
                                                                       values=[node])
    if reserved:
        c.status.reserved_for.add(resource="pods", name=pod.metadata.name, uid=pod.metadata.uid)
    h.api.claims[f"default/{c.metadata.name}"] = c
    stored = h.api.pod(pod.metadata.name)
    if not stored.status.resource_claim_statuses:  # the controller's status patch, seen by the kubelet
        stored.status.resource_claim_statuses.add(name="gpu", resource_claim_name=c.metadata.name)
        stored.metadata.resource_version = h.api.next_rv()
        h.deliver_writes()
    return c


def waiting(pod: core_pb2.Pod) -> tuple[str, str]:
    state = pod.status.container_statuses[0].state
    return state.waiting.reason, state.waiting.message


async def test_a_pod_whose_claim_is_not_created_yet_waits_without_a_sandbox(h):
    h.add(gpu_pod())
    await h.drain(limit=1)
    web = h.api.pod("web")
    assert web.status.phase == "Pending"
    assert waiting(web) == (FAILED_PREPARE, 'pod "default/web": ResourceClaim not created yet')
    assert ("web", "Warning", FAILED_PREPARE) in await h.events()
    assert h.runtime._sandboxes == {}, "no sandbox, no container before the claims are prepared"
    assert h.queued() == 0 and len(h.kubelet.workers.queue._waiting_by_key) == 1, "tried again after a back-off"


async def test_a_claim_not_reserved_for_the_pod_is_refused_with_kubernetes_message(h):
    pod = h.add(gpu_pod())
    claim = generated_claim(h, pod, reserved=False)
    await h.sync("web")
    assert waiting(h.api.pod("web")) == (
        FAILED_PREPARE, f"pod web(uid-web) is not allowed to use resource claim {claim.metadata.name}(uid-claim)")
    assert h.runtime._sandboxes == {}
    assert h.kubelet.dra_driver is not None and h.kubelet.dra_driver.prepared() == {}


async def test_a_claim_allocated_on_another_node_is_refused(h):
    pod = h.add(gpu_pod())
    generated_claim(h, pod, node="node-2")
    await h.sync("web")
    assert waiting(h.api.pod("web"))[1] == ("resource claim default/web-gpu-x7k2p is allocated for other nodes, "
                                            "not node-1")
    assert h.runtime._sandboxes == {}


async def test_a_claim_of_a_device_this_node_does_not_publish_is_refused_by_the_driver(h):
    pod = h.add(gpu_pod())
    generated_claim(h, pod, device="gpu-7")  # the node publishes gpu-0 and gpu-1
    await h.sync("web")
    assert "device node-1/gpu-7 of claim default/web-gpu-x7k2p is not one driver dra.kplane.dev publishes" in \
        waiting(h.api.pod("web"))[1]


async def test_an_allocated_reserved_claim_is_prepared_the_pod_runs_and_its_claim_status_stays(h):
    pod = h.add(gpu_pod())
    await h.drain(limit=1)  # not created yet: waiting
    claim = generated_claim(h, pod)
    await h.sync("web")
    web = h.api.pod("web")
    assert web.status.phase == "Running"
    assert [(s.name, s.resource_claim_name) for s in web.status.resource_claim_statuses] == \
        [("gpu", claim.metadata.name)], "the kubelet's status writes keep the controller's resourceClaimStatuses"
    assert h.kubelet.dra_driver is not None
    assert h.kubelet.dra_driver.prepared() == {"uid-claim": ["dra.kplane.dev/gpu=gpu-0"]}
    # The pod ends: its claim is unprepared once its containers are stopped.
    h.delete("web", grace=0)
    await h.sync("web")
    assert h.kubelet.dra_driver.prepared() == {}
    assert not h.kubelet.dra.prepared("uid-web")


async def test_a_pod_without_claims_is_untouched_by_dra(h):
    h.add(MakePod().name("plain").obj())
    await h.drain()
    assert h.api.pod("plain").status.phase == "Running"
