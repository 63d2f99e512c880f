"""The resourceclaim controller (Kubernetes' pkg/controller/resourceclaim).

Kubernetes docs: Dynamic Resource Allocation, "API": a ResourceClaimTemplate "Defines the spec and
some metadata for creating ResourceClaims ... The per-Pod ResourceClaims are then created and
removed by Kubernetes automatically." This controller is that "automatically":

- ``ResourceClaimController._sync_pod`` (``PodKey``): a pod's claims made from their templates,
  and the claims of pods bound without the scheduler reserved for them;
- ``ResourceClaimController._sync_claim`` (``ClaimKey``): a claim's reservedFor cleaned, its
  allocation released, and a generated claim deleted with its pod.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from prometheus_client import Counter

from controllers.controller import Controller, ControllerContext
from machinery import errors, failpoints
from machinery.api import core_pb2, resource_pb2
from machinery.dra import resourceclaim as rc
from machinery.informer import key_of
from machinery.kinds import POD, RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE
from machinery.logging import get_logger

log = get_logger()

POD_CLAIM_INDEX: Final = "pod-resource-claim-index"
CLAIM_OWNER_INDEX: Final = "claim-pod-owner-index"
FAILED_CREATION: Final = "FailedResourceClaimCreation"
# Pods known to be deleted, so their reservations go without asking the API (Kubernetes' uidCache).
_DELETED_UIDS_MAX: Final = 500

# Armed with ``pause``, the claims of every pod wait (the pods sit gated in the scheduler's
# unschedulable pool); armed again (``off``) they all come at once: KEP-6132's burst of claim events,
# which bench/scheduler.py's ClaimBurst workload makes this way.
FP_BEFORE_SYNC_POD = failpoints.declare(
    "controller-manager/resourceclaim-before-sync-pod",
    "a pod's claims about to be made from their templates (pause: the resourceclaim controller held back)")

CREATE_ATTEMPTS = Counter("resourceclaim_controller_create_attempts_total",
                          "Number of ResourceClaims creation requests")
CREATE_FAILURES = Counter("resourceclaim_controller_create_failures_total",
                          "Number of ResourceClaims creation request failures")


@dataclass(frozen=True)
class PodKey:
    """A pod to sync: its claims to create, its reservations to make."""

    namespace: str
    name: str


@dataclass(frozen=True)
class ClaimKey:
    """A claim to sync: its reservedFor to clean, its allocation to release, itself to delete."""

    namespace: str
    name: str


WorkItem = PodKey | ClaimKey


class _TemplateMissing(Exception):
    """The pod names a ResourceClaimTemplate that does not exist (yet): retried rate-limited, as
    Kubernetes' controller does (it does not watch templates either)."""


def _owner_uids(claim: resource_pb2.ResourceClaim) -> list[str]:
    owner = rc.controller_of(claim)
    return [owner[1]] if owner is not None else []


def _needs_claims(pod: core_pb2.Pod, deleted: bool) -> bool:
    """Whether the pod may still run (Kubernetes' podNeedsClaims): not deleted, not done."""
    return not deleted and not rc.is_pod_done(pod)


class ResourceClaimController(Controller[WorkItem]):
    """Work items are typed (``PodKey``, ``ClaimKey``) on one queue, ``resource_claim``, with 10
    workers (kube-controller-manager runs it with 10). Pods and claims are found from each other
    through the shared pod informer's claim index (``machinery.dra.resourceclaim.claim_keys``) and
    the claim informer's index of owning pods."""

    name = "resourceclaim"
    queue_name = "resource_claim"
    expected_errors = (_TemplateMissing,)

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client = ctx.client
        self._recorder = ctx.recorder("resource_claim")
        self._pods = ctx.informers.informer(POD)
        self._claims = ctx.informers.informer(RESOURCE_CLAIM)
        self._templates = ctx.informers.informer(RESOURCE_CLAIM_TEMPLATE)
        self._pods.add_indexer(POD_CLAIM_INDEX, rc.claim_keys)
        self._claims.add_indexer(CLAIM_OWNER_INDEX, _owner_uids)
        # Claims this controller created that its informer may not show yet (Kubernetes' mutation
        # cache): pod uid -> pod claim name -> the claim the create returned.
        self._created: dict[str, dict[str, resource_pb2.ResourceClaim]] = {}
        self._deleted_uids: OrderedDict[str, None] = OrderedDict()
        self._pods.add_handler(lambda p: self._pod_changed(p, False), lambda old, new: self._pod_changed(new, False),
                               lambda p: self._pod_changed(p, True))
        self._claims.add_handler(self._claim_changed, lambda old, new: self._claim_changed(new),
                                 lambda c: self._claim_changed(c, deleted=True))

    # ------------------------------------------------------------ handlers: enqueue only

    def _pod_changed(self, pod: core_pb2.Pod, deleted: bool) -> None:
        if not pod.spec.resource_claims:
            return
        if deleted:
            self._deleted_uids[pod.metadata.uid] = None
            while len(self._deleted_uids) > _DELETED_UIDS_MAX:
                self._deleted_uids.popitem(last=False)
            self._created.pop(pod.metadata.uid, None)
        if not _needs_claims(pod, deleted):
            # Its reservations are to be released.
            for key in rc.claim_keys(pod):
                namespace, _, name = key.partition("/")
                self.queue.add(ClaimKey(namespace, name))
        if not deleted and self._pod_needs_work(pod):
            self.queue.add(PodKey(pod.metadata.namespace, pod.metadata.name))

    def _pod_needs_work(self, pod: core_pb2.Pod) -> bool:
        """Kubernetes' podNeedsWork: a claim to create, or (scheduled) an allocated claim to reserve."""
        if pod.metadata.deletion_timestamp:
            return False
        for pod_claim in pod.spec.resource_claims:
            try:
                resolved = rc.claim_name(pod, pod_claim)
            except rc.ClaimNameError:
                return True
            if resolved is None:
                continue
            claim = self._claims.get(resolved.name, pod.metadata.namespace)
            if claim is None:
                if pod_claim.HasField("resource_claim_template_name"):
                    return True
                continue  # the user's to create
            if resolved.must_check_owner and rc.is_for_pod(pod, claim) is not None:
                continue
            if pod.spec.node_name and claim.status.HasField("allocation") and \
                    not rc.is_reserved_for_pod(pod, claim) and rc.can_be_reserved(claim):
                return True
        return False

    def _claim_changed(self, claim: resource_pb2.ResourceClaim, deleted: bool = False) -> None:
        if not deleted:
            self.queue.add(ClaimKey(claim.metadata.namespace, claim.metadata.name))
        for pod in self._pods.by_index(POD_CLAIM_INDEX, key_of(claim)):
            self._pod_changed(pod, False)

    # ------------------------------------------------------------ workers

    async def sync(self, key: WorkItem) -> None:
        if isinstance(key, PodKey):
            await self._sync_pod(key)
        else:
            await self._sync_claim(key)

    async def _sync_pod(self, key: PodKey) -> None:
        """A claim per pod claim from its template (``_handle_claim``), then the pod's
        ``status.resourceClaimStatuses`` gets ``{name, resourceClaimName}`` (a strategic merge patch
        keyed by name). A pod being deleted gets none. A missing template is an error, retried, with
        the event ``FailedResourceClaimCreation`` on the pod.

        A pod bound without the scheduler whose claim is allocated gets reserved in it
        (``status.reservedFor``), if there is room — Kubernetes docs: Dynamic Resource Allocation,
        "Pre-scheduled Pods"."""
        await failpoints.hit(FP_BEFORE_SYNC_POD)
        pod = self._pods.get(key.name, key.namespace)
        if pod is None or pod.metadata.deletion_timestamp:
            return
        new_statuses: dict[str, str] = {}
        for pod_claim in pod.spec.resource_claims:
            try:
                await self._handle_claim(pod, pod_claim, new_statuses)
            except (errors.ApiError, _TemplateMissing, rc.ClaimNameError) as exc:
                message = exc.message if isinstance(exc, errors.ApiError) else str(exc)
                self._recorder.event(pod, "Warning", FAILED_CREATION, f"PodResourceClaim {pod_claim.name}: {message}")
                raise
        if new_statuses:
            statuses = [{"name": n, "resourceClaimName": c} for n, c in sorted(new_statuses.items())]
            await self._client.pods.patch(pod.metadata.name, {"status": {"resourceClaimStatuses": statuses}},
                                          namespace=pod.metadata.namespace, subresource="status")
            log.info("resourceclaim_statuses_written", pod=key_of(pod), claims=new_statuses)
        if not pod.spec.node_name:
            return  # the scheduler reserves the claims of pods it schedules
        for pod_claim in pod.spec.resource_claims:
            try:
                resolved = rc.claim_name(pod, pod_claim)
            except rc.ClaimNameError:
                return  # the status patch above comes back as a pod update
            if resolved is None:
                continue
            claim = self._claims.get(resolved.name, pod.metadata.namespace)
            if claim is None:
                return
            if resolved.must_check_owner and rc.is_for_pod(pod, claim) is not None:
                return
            if claim.status.HasField("allocation") and not rc.is_reserved_for_pod(pod, claim) and \
                    rc.can_be_reserved(claim):
                reserved = resource_pb2.ResourceClaim()
                reserved.CopyFrom(claim)
                reserved.status.reserved_for.add(resource="pods", name=pod.metadata.name, uid=pod.metadata.uid)
                await self._client.resource_claims.update_status(reserved)
                log.info("resourceclaim_reserved", claim=key_of(claim), pod=key_of(pod))

    async def _handle_claim(self, pod: core_pb2.Pod, pod_claim: core_pb2.PodResourceClaim,
                            new_statuses: dict[str, str]) -> None:
        """Make the pod claim's ResourceClaim from its template, unless it is there already (found by
        ``_find_claim``, or else made by ``_create_claim``). A generated claim recorded in the status
        but gone is made anew."""
        try:
            resolved = rc.claim_name(pod, pod_claim)
        except rc.ClaimNotCreated:
            pass  # not made yet (or not recorded yet): below
        else:
            if resolved is None:
                return  # decided: no claim needed
            claim = self._claims.get(resolved.name, pod.metadata.namespace)
            if claim is not None:
                if not resolved.must_check_owner or rc.is_for_pod(pod, claim) is None:
                    return  # there already
                log.warning("resourceclaim_not_owned", pod=key_of(pod), claim=key_of(claim))
        if not pod_claim.HasField("resource_claim_template_name"):
            return  # a claim the user names: the user's to create
        claim = self._find_claim(pod, pod_claim.name)
        if claim is None:
            claim = await self._create_claim(pod, pod_claim)
        new_statuses[pod_claim.name] = claim.metadata.name

    def _find_claim(self, pod: core_pb2.Pod, pod_claim_name: str) -> resource_pb2.ResourceClaim | None:
        """A claim made for this pod claim earlier: owned by the pod, annotated with the claim's name.
        One whose name did not reach the pod's status yet (a restart between the two writes, a lagging
        informer) is found again so instead of being made twice."""
        uid = pod.metadata.uid
        for claim in self._claims.by_index(CLAIM_OWNER_INDEX, uid):
            if claim.metadata.annotations.get(rc.POD_CLAIM_NAME_ANNOTATION) == pod_claim_name:
                return claim
        created = self._created.get(uid, {}).get(pod_claim_name)
        if created is not None and self._claims.get(created.metadata.name, created.metadata.namespace) is None:
            return created
        return None

    async def _create_claim(self, pod: core_pb2.Pod,
                            pod_claim: core_pb2.PodResourceClaim) -> resource_pb2.ResourceClaim:
        """A ResourceClaim with ``generateName: <pod>-<claim name>-`` (both cut in proportion beyond 57
        characters), the template's labels and annotations plus ``resource.kubernetes.io/pod-claim-name:
        <claim name>``, the template's spec, and an ownerReference to the pod with ``controller`` and
        ``blockOwnerDeletion``. Counted by ``resourceclaim_controller_create_attempts_total`` and
        ``resourceclaim_controller_create_failures_total``."""
        template = self._templates.get(pod_claim.resource_claim_template_name, pod.metadata.namespace)
        if template is None:
            raise _TemplateMissing(f'resource claim template "{pod_claim.resource_claim_template_name}": '
                                   f'resourceclaimtemplate.resource.k8s.io '
                                   f'"{pod_claim.resource_claim_template_name}" not found')
        claim = resource_pb2.ResourceClaim(api_version="resource.k8s.io/v1", kind="ResourceClaim")
        meta = claim.metadata
        meta.namespace = pod.metadata.namespace
        meta.generate_name = rc.generate_name(pod.metadata.name, pod_claim.name)
        meta.labels.update(template.spec.metadata.labels)
        meta.annotations.update(template.spec.metadata.annotations)
        meta.annotations[rc.POD_CLAIM_NAME_ANNOTATION] = pod_claim.name
        meta.owner_references.add(api_version="v1", kind="Pod", name=pod.metadata.name, uid=pod.metadata.uid,
                                  controller=True, block_owner_deletion=True)
        claim.spec.CopyFrom(template.spec.spec)
        CREATE_ATTEMPTS.inc()
        try:
            created = await self._client.resource_claims.create(claim)
        except errors.ApiError:
            CREATE_FAILURES.inc()
            raise
        self._created.setdefault(pod.metadata.uid, {})[pod_claim.name] = created
        log.info("resourceclaim_created", claim=key_of(created), pod=key_of(pod), pod_claim=pod_claim.name)
        return created

    async def _sync_claim(self, key: ClaimKey) -> None:
        """Clean ``status.reservedFor``: an entry whose pod is gone (deleted, replaced by another of the
        same name) or done (Succeeded, Failed, or deleted before it was scheduled) is removed; a pod the
        informer does not know yet is asked for from the API before its entry goes (``_still_uses``).

        When that leaves the claim used by no pod and it carries the scheduler's finalizer
        ``resource.kubernetes.io/delete-protection``, its ``status.allocation`` is cleared in the same
        write, then the finalizer taken off — the devices are free for other claims, and the
        scheduler's hint for a deallocated claim requeues the pods waiting for devices. A claim being
        deleted that no pod uses is deallocated and released the same way.

        Generated claims go with their pods: a claim no pod uses whose owning pod is done or replaced
        is deleted here; one whose pod is gone from the API is deleted by the garbage collector (the
        ownerReference)."""
        claim = self._claims.get(key.name, key.namespace)
        if claim is None:
            return
        valid: list[resource_pb2.ResourceClaimConsumerReference] = []
        for ref in claim.status.reserved_for:
            if ref.api_group or ref.resource != "pods":
                raise errors.InternalError(f"unsupported ReservedFor entry: {ref}")
            if await self._still_uses(claim, ref):
                valid.append(ref)
        protected = rc.FINALIZER in claim.metadata.finalizers
        if len(valid) < len(claim.status.reserved_for):
            updated = resource_pb2.ResourceClaim()
            updated.CopyFrom(claim)
            del updated.status.reserved_for[:]
            updated.status.reserved_for.extend(valid)
            if not valid and protected:
                # Used by no pod any more: deallocate, so the devices are free for other claims.
                updated.status.ClearField("allocation")
            written = await self._client.resource_claims.update_status(updated)
            log.info("resourceclaim_reservations_cleaned", claim=key_of(claim), reserved=len(valid),
                     deallocated=not written.status.HasField("allocation"))
            if rc.FINALIZER in written.metadata.finalizers and not written.status.HasField("allocation"):
                await self._release(written)
        elif protected and claim.metadata.deletion_timestamp and not valid:
            current = claim
            if claim.status.HasField("allocation"):
                updated = resource_pb2.ResourceClaim()
                updated.CopyFrom(claim)
                updated.status.ClearField("allocation")
                current = await self._client.resource_claims.update_status(updated)
                log.info("resourceclaim_deallocated", claim=key_of(claim))
            await self._release(current)
        if valid:
            return
        owner = rc.controller_of(claim)
        if owner is None:
            return
        pod = self._pods.get(owner[0], claim.metadata.namespace)
        if pod is None:
            return  # the garbage collector deletes it once the pod is surely gone
        if pod.metadata.uid != owner[1] or rc.is_pod_done(pod):
            try:
                await self._client.resource_claims.delete(claim.metadata.name, claim.metadata.namespace,
                                                          uid=claim.metadata.uid)
                log.info("resourceclaim_deleted", claim=key_of(claim), pod=key_of(pod))
            except errors.NotFound:
                pass

    async def _release(self, claim: resource_pb2.ResourceClaim) -> None:
        """Take the scheduler's finalizer off a claim no longer allocated."""
        released = resource_pb2.ResourceClaim()
        released.CopyFrom(claim)
        kept = [f for f in released.metadata.finalizers if f != rc.FINALIZER]
        del released.metadata.finalizers[:]
        released.metadata.finalizers.extend(kept)
        try:
            await self._client.resource_claims.update(released)
        except errors.NotFound:
            pass

    async def _still_uses(self, claim: resource_pb2.ResourceClaim,
                          ref: resource_pb2.ResourceClaimConsumerReference) -> bool:
        """Whether the pod of a reservedFor entry may still run (Kubernetes' three cases: known
        deleted; in the cache — replaced or done; not in the cache — asked for from the API, as the
        scheduler may be binding a pod the informer has not shown yet)."""
        if ref.uid in self._deleted_uids:
            return False
        pod = self._pods.get(ref.name, claim.metadata.namespace)
        if pod is None:
            try:
                pod = await self._client.pods.get(ref.name, claim.metadata.namespace)
            except errors.NotFound:
                return False
            return pod.metadata.uid == ref.uid
        return pod.metadata.uid == ref.uid and not rc.is_pod_done(pod)
