"""Dynamic Resource Allocation in the scenario tests: a ResourceClaimTemplate asking for one device
of the fake driver's class, a pod using a claim from it (or naming a claim), whether a pod runs,
and the clean-up a DRA module's ``api`` fixture does after each test."""

from __future__ import annotations

import contextlib

from kubelet.dra.driver import DEVICE_CLASS_NAME
from machinery import errors
from machinery.api import core_pb2, resource_pb2
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod
from tests.harness.wait import eventually


async def create_gpu_template(api, name: str = "gpu") -> None:
    """A ResourceClaimTemplate asking for one device of the class gpu.kplane.dev."""
    t = resource_pb2.ResourceClaimTemplate()
    t.metadata.name, t.metadata.namespace = name, "default"
    t.spec.spec.devices.requests.add(name="gpu").exactly.device_class_name = DEVICE_CLASS_NAME
    await api.resource_claim_templates.create(t)


def gpu_pod(name: str, *, template: str = "", claim: str = "") -> core_pb2.Pod:
    """A pod whose container uses the pod claim "gpu": from ``template``, or the claim ``claim``."""
    pod = MakePod().name(name).grace(0).obj()
    if template:
        pod.spec.resource_claims.add(name="gpu", resource_claim_template_name=template)
    else:
        pod.spec.resource_claims.add(name="gpu", resource_claim_name=claim)
    pod.spec.containers[0].resources.claims.add(name="gpu")
    return pod


def running(p: core_pb2.Pod) -> bool:
    return p.status.phase == "Running" and all(cs.ready for cs in p.status.container_statuses)


async def delete_pods_claims_and_templates(c, timeout: float) -> None:
    """Every pod goes, their generated claims with them (the garbage collector), then the templates."""
    await delete_all_pods(c)

    async def claims_gone() -> bool:
        return not (await c.resource_claims.list("default")).items
    await eventually(claims_gone, timeout=timeout, what="every generated claim gone")
    for t in (await c.resource_claim_templates.list("default")).items:
        with contextlib.suppress(errors.NotFound):
            await c.resource_claim_templates.delete(t.metadata.name, "default")
