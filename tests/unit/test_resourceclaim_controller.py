"""The resourceclaim controller over an in-memory API (tests/unit/fakes_resourceclaim.py): what one
sync does, as Kubernetes' pkg/controller/resourceclaim does it — a claim per pod from its
template, owned by the pod and recorded in its status; never two for one pod claim across a
failed status write or a slow informer; reservations of pods that are gone or done removed, the
claim deallocated when no pod uses it, a done pod's generated claim deleted (Kubernetes docs:
Dynamic Resource Allocation, "API": "The per-Pod ResourceClaims are then created and removed by
Kubernetes automatically")."""

from __future__ import annotations

import asyncio

import pytest

from controllers.resourceclaim import FAILED_CREATION, FP_BEFORE_SYNC_POD, ClaimKey, PodKey, ResourceClaimController
from machinery import errors, failpoints
from machinery.api import core_pb2, resource_pb2
from machinery.dra import resourceclaim as rc
from machinery.kinds import POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE
from tests.harness.builders import MakePod
from tests.unit.fakes_resourceclaim import FakeApi


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def template(name: str = "gpu") -> resource_pb2.ResourceClaimTemplate:
    t = resource_pb2.ResourceClaimTemplate()
    t.metadata.name, t.metadata.namespace = name, "default"
    t.spec.metadata.labels["team"] = "ml"
    r = t.spec.spec.devices.requests.add(name="gpu")
    r.exactly.device_class_name = "gpu.kplane.dev"
    return t


def gpu_pod(name: str = "web", template_name: str = "gpu") -> core_pb2.Pod:
    pod = MakePod().name(name).obj()
    pod.spec.resource_claims.add(name="gpu", resource_claim_template_name=template_name)
    return pod


def claims(api: FakeApi) -> list[resource_pb2.ResourceClaim]:
    return api.list(RESOURCE_CLAIM)


async def made_for(api: FakeApi, ctl: ResourceClaimController, pod_name: str = "web") -> resource_pb2.ResourceClaim:
    """Sync the pod (its claim made and recorded), the writes delivered; the claim."""
    await ctl.sync(PodKey("default", pod_name))
    api.deliver()
    pod = api.get(POD, pod_name)
    [status] = pod.status.resource_claim_statuses
    return api.get(RESOURCE_CLAIM, status.resource_claim_name)


async def web_and_its_claim(api: FakeApi) -> tuple[ResourceClaimController, core_pb2.Pod,
                                                  resource_pb2.ResourceClaim]:
    """The controller, the pod "web" naming the template "gpu", and the claim it made for the pod."""
    ctl = ResourceClaimController(api.context())
    api.add(template())
    pod = api.add(gpu_pod())
    return ctl, pod, await made_for(api, ctl)


def allocate_and_reserve(api: FakeApi, claim: resource_pb2.ResourceClaim, *pods: core_pb2.Pod) -> None:
    """What the scheduler's PreBind writes: its finalizer, the allocation, the pods in reservedFor."""
    def protect(c: resource_pb2.ResourceClaim) -> None:
        c.metadata.finalizers.append(rc.FINALIZER)

    def allocate(c: resource_pb2.ResourceClaim) -> None:
        c.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1",
                                                device="gpu-0")
        for p in pods:
            c.status.reserved_for.add(resource="pods", name=p.metadata.name, uid=p.metadata.uid)
    api.change(claim, protect)
    api.change(claim, allocate, status=True)


async def test_a_claim_is_made_per_pod_claim_from_its_template_owned_by_the_pod(api):
    ctl, pod, claim = await web_and_its_claim(api)
    assert claim.metadata.generate_name == "web-gpu-" and claim.metadata.name.startswith("web-gpu-")
    assert dict(claim.metadata.annotations) == {rc.POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert dict(claim.metadata.labels) == {"team": "ml"}
    [ref] = claim.metadata.owner_references
    assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == \
        ("v1", "Pod", "web", pod.metadata.uid, True, True)
    assert claim.spec == api.get(RESOURCE_CLAIM_TEMPLATE, "gpu").spec.spec  # as defaulted: ExactCount, count 1
    assert [(s.name, s.resource_claim_name) for s in api.get(POD, "web").status.resource_claim_statuses] == \
        [("gpu", claim.metadata.name)]
    await ctl.sync(PodKey("default", "web"))  # nothing left to do
    assert len(claims(api)) == 1


async def test_a_failed_status_write_or_a_slow_informer_never_makes_a_second_claim(api):
    ctl = ResourceClaimController(api.context())
    api.add(template())
    api.add(gpu_pod())
    api.failures[("patch", "Pod")] = lambda name: errors.Unavailable("apiserver restarting")
    with pytest.raises(errors.Unavailable):
        await ctl.sync(PodKey("default", "web"))
    assert len(claims(api)) == 1
    del api.failures[("patch", "Pod")]
    await ctl.sync(PodKey("default", "web"))  # the claim made earlier, found while the informer lags
    assert len(claims(api)) == 1
    api.deliver()
    [status] = api.get(POD, "web").status.resource_claim_statuses
    assert status.resource_claim_name == claims(api)[0].metadata.name


async def test_a_missing_template_is_an_event_and_a_retry(api):
    ctl = ResourceClaimController(api.context())
    api.add(gpu_pod(template_name="nope"))
    with pytest.raises(Exception, match='resource claim template "nope"'):
        await ctl.sync(PodKey("default", "web"))
    assert ("web", "Warning", FAILED_CREATION,
            'PodResourceClaim gpu: resource claim template "nope": resourceclaimtemplate.resource.k8s.io "nope" '
            'not found') in api.recorded
    assert claims(api) == []


async def test_a_deleted_pods_reservation_goes_and_the_claim_is_deallocated_and_released(api):
    ctl, pod, claim = await web_and_its_claim(api)
    allocate_and_reserve(api, claim, pod)
    api.objects.pop(("Pod", "default", "web"))
    api.emit(POD, "DELETED", pod)
    api.deliver()
    await ctl.sync(ClaimKey("default", claim.metadata.name))
    api.deliver()
    after = api.get(RESOURCE_CLAIM, claim.metadata.name)
    assert list(after.status.reserved_for) == []
    assert not after.status.HasField("allocation"), "used by no pod: deallocated"
    assert rc.FINALIZER not in after.metadata.finalizers, "and released: the garbage collector may remove it"


async def test_a_claim_shared_by_two_pods_stays_allocated_while_one_still_uses_it(api):
    ctl, web, claim = await web_and_its_claim(api)
    reader = MakePod().name("reader").obj()
    reader.spec.resource_claims.add(name="gpu", resource_claim_name=claim.metadata.name)
    reader = api.add(reader)
    allocate_and_reserve(api, claim, web, reader)
    api.change(reader, lambda p: setattr(p.status, "phase", "Succeeded"), status=True)
    await ctl.sync(ClaimKey("default", claim.metadata.name))
    api.deliver()
    after = api.get(RESOURCE_CLAIM, claim.metadata.name)
    assert [r.name for r in after.status.reserved_for] == ["web"]
    assert after.status.HasField("allocation")


async def test_a_done_pods_generated_claim_is_deallocated_and_deleted(api):
    ctl, pod, claim = await web_and_its_claim(api)
    allocate_and_reserve(api, claim, pod)
    api.change(pod, lambda p: setattr(p.status, "phase", "Succeeded"), status=True)
    await ctl.sync(ClaimKey("default", claim.metadata.name))
    api.deliver()
    await ctl.sync(ClaimKey("default", claim.metadata.name))
    assert claims(api) == []


async def test_a_pod_bound_past_the_scheduler_gets_reserved_in_its_allocated_claim(api):
    """Kubernetes docs: Dynamic Resource Allocation, "Pre-scheduled Pods"."""
    ctl, _, claim = await web_and_its_claim(api)
    allocate_and_reserve(api, claim)
    api.change(api.get(POD, "web"), lambda p: setattr(p.spec, "node_name", "node-1"))
    await ctl.sync(PodKey("default", "web"))
    api.deliver()
    assert [r.name for r in api.get(RESOURCE_CLAIM, claim.metadata.name).status.reserved_for] == ["web"]


async def test_events_enqueue_the_pod_and_its_claims(api):
    ctl = ResourceClaimController(api.context())
    api.add(template())
    api.add(gpu_pod())
    assert len(ctl.queue) == 1, "a pod with a template claim to make is queued"
    item, _ = await ctl.queue.get()
    assert item == PodKey("default", "web")


async def test_held_back_by_its_failpoint_no_claim_is_made_until_let_go(api):
    """``controller-manager/resourceclaim-before-sync-pod`` armed with pause holds a pod's sync before
    any write; armed off, the sync goes on and makes the claim (KEP-6132's burst of claim events)."""
    ctl = ResourceClaimController(api.context())
    api.add(template())
    api.add(gpu_pod())
    failpoints.arm(FP_BEFORE_SYNC_POD, "pause")
    try:
        sync = asyncio.create_task(ctl.sync(PodKey("default", "web")))
        async with asyncio.timeout(10):  # the sync reaches the failpoint and waits there
            while not failpoints.paused() and not sync.done():
                await asyncio.sleep(0.005)
        api.deliver()
        assert claims(api) == [] and not sync.done(), "held back: nothing written"
        failpoints.arm(FP_BEFORE_SYNC_POD, "off")
        await sync
    finally:
        failpoints.reset()
    api.deliver()
    assert len(claims(api)) == 1
    assert [s.name for s in api.get(POD, "web").status.resource_claim_statuses] == ["gpu"]
