"""DynamicResources: a pod runs only where its ResourceClaims are allocated and reserved for it.

kube-scheduler's dynamicresources plugin, structured parameters only (Kubernetes docs: Dynamic
Resource Allocation, "With structured parameters": the scheduler allocates from the devices the
ResourceSlices publish, "keeping information about ResourceClaim allocations in memory and writing
this information to the ResourceClaim objects in the background while concurrently binding").

- ``DynamicResources``: PreEnqueue, PreFilter, Filter, Reserve / Unreserve and PreBind, in that order.
- ``DynamicResources.events_to_register``: what makes a pod this plugin rejected schedulable.
- ``pods_for_claim``: the claim -> pods index behind the claim events' PreQueueingHint (KEP-6132).

Not here (PostFilter's deallocation, CEL beyond exact values, ...): docs/scheduler.md, "Dynamic Resource Allocation".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Final

from machinery import errors, failpoints
from machinery.api import core_pb2, resource_pb2
from machinery.dra import resourceclaim as rc
from machinery.dra.allocator import AllocationError, Allocator, DeviceID, Picks, allocated_device_ids, usable_devices
from machinery.dra.selectors import SelectorError, compile_selectors
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.placement import NodeSelector
from machinery.retry import DEFAULT_RETRY, retry_update
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.interfaces import Handle, SharedDRAManager
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.plugin_args import no_args
from scheduler.framework.runtime import new_handle
from scheduler.framework.types import (
    ALL_PODS,
    DEVICE_CLASS,
    NODE,
    POD,
    RESOURCE_CLAIM,
    RESOURCE_SLICE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    PreFilterResult,
    PreQueueingHintResult,
    QueueingHint,
    StateData,
    Status,
)

log = get_logger()

NAME = "DynamicResources"
_STATE_KEY = NAME
# The pod informer's index: claim "namespace/name" -> the pods whose spec.resourceClaims resolve to it.
POD_RESOURCE_CLAIM_INDEX: Final = "pod-resource-claim-index"

ERR_NOT_AVAILABLE = "resourceclaim not available on the node"
ERR_CANNOT_ALLOCATE = "cannot allocate all claims"
ERR_IN_USE = "resourceclaim in use"
WAITING_FOR_CLAIM = "waiting for resource claim"

FP_PRE_QUEUEING_HINT_SKIP = failpoints.declare(
    "scheduler/dra-pre-queueing-hint-skip", "armed with 'error': the claim events' PreQueueingHint names no pod, "
    "whatever the event (KEP-6132's risk 'PreQueueingHintFn incorrectly signals no pods affected'); only the "
    "periodic flush of the unschedulable pool brings such pods back")


def pods_for_claim(handle: Handle, namespace: str, name: str) -> list[core_pb2.Pod]:
    """The pods (of the scheduler's pod informer) whose ``spec.resourceClaims`` name the claim
    ``namespace/name`` directly or through ``status.resourceClaimStatuses`` — every pod that shares
    it, not only the one its ownerReference names (KEP-6132 "Design Details"). It reads the index
    ``POD_RESOURCE_CLAIM_INDEX`` this plugin adds to that informer; KeyError when no DynamicResources
    plugin added it."""
    return handle.pods_by_index(POD_RESOURCE_CLAIM_INDEX, f"{namespace}/{name}")


class _NotSchedulable(Exception):
    """The pod's claims are not ready for it to be scheduled; the message says why."""


@dataclass
class _State(StateData):
    """What PreFilter found, for the pod's later extension points (shared by clones, as in
    Kubernetes: Filter only adds node allocations, which preemption's simulations may share)."""

    claims: list[resource_pb2.ResourceClaim] = field(default_factory=list)
    # Per claim: the node selector of its allocation, for claims allocated already.
    available_on: list[NodeSelector | None] = field(default_factory=list)
    allocator: Allocator | None = None
    # node -> the devices each request takes there (Filter's result; Reserve makes the allocations).
    node_picks: dict[str, Picks] = field(default_factory=dict)
    # Per claim: the allocation Reserve set aside, for PreBind to write.
    allocations: list[resource_pb2.AllocationResult | None] = field(default_factory=list)

    def clone(self) -> StateData:
        return self


def _unschedulable(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)


class DynamicResources:
    name = NAME

    def __init__(self, handle: Handle, features: Features = Features()):
        self._handle = handle
        self._enabled = features.enable_dynamic_resource_allocation
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize  # KEP-5836: Skip them
        # Claim uid -> the claim with the allocation Reserve chose, until PreBind wrote it or Unreserve.
        self._in_flight: dict[str, resource_pb2.ResourceClaim] = {}
        # Claim uid -> the claim as PreBind wrote it, until the informer shows that version.
        self._assumed: dict[str, resource_pb2.ResourceClaim] = {}
        self._unreserving: set[asyncio.Task[None]] = set()
        if self._enabled:
            handle.add_pod_indexer(POD_RESOURCE_CLAIM_INDEX, rc.claim_keys)

    # ------------------------------------------------------------ claims as this scheduler knows them

    def _dra(self) -> SharedDRAManager | None:
        return self._handle.dra

    def _get_claim(self, namespace: str, name: str) -> resource_pb2.ResourceClaim | None:
        """The informer's claim, or the newer one PreBind wrote while the informer lags."""
        dra = self._dra()
        claim = dra.get_claim(namespace, name) if dra is not None else None
        if claim is None:
            return None
        assumed = self._assumed.get(claim.metadata.uid)
        if assumed is None:
            return claim
        if _rv(claim) >= _rv(assumed):
            del self._assumed[claim.metadata.uid]  # the informer caught up
            return claim
        return assumed

    def _extra_allocated(self) -> set[DeviceID]:
        """Devices held by allocations the informer does not show yet: in flight (Reserve to
        PreBind) and written but not yet seen."""
        out: set[DeviceID] = set()
        for claim in self._in_flight.values():
            out.update(allocated_device_ids(claim))
        dra = self._dra()
        for uid, assumed in list(self._assumed.items()):
            current = dra.get_claim(assumed.metadata.namespace, assumed.metadata.name) if dra is not None else None
            if current is None or current.metadata.uid != uid or _rv(current) >= _rv(assumed):
                del self._assumed[uid]
                continue
            out.update(allocated_device_ids(assumed))
        return out

    def _pod_claims(self, pod: core_pb2.Pod) -> list[resource_pb2.ResourceClaim]:
        """Each claim the pod's spec.resourceClaims resolve to (Kubernetes' foreachPodResourceClaim);
        _NotSchedulable when one is missing, being deleted or not the pod's own."""
        out: list[resource_pb2.ResourceClaim] = []
        for pod_claim in pod.spec.resource_claims:
            try:
                resolved = rc.claim_name(pod, pod_claim)
            except rc.ClaimNameError as exc:
                raise _NotSchedulable(f"{WAITING_FOR_CLAIM}: {exc}") from None
            if resolved is None:
                continue
            claim = self._get_claim(pod.metadata.namespace, resolved.name)
            if claim is None:
                raise _NotSchedulable(f'{WAITING_FOR_CLAIM}: resourceclaim.resource.k8s.io "{resolved.name}" '
                                      f'not found')
            if claim.metadata.deletion_timestamp:
                raise _NotSchedulable(f'resourceclaim "{resolved.name}" is being deleted')
            if resolved.must_check_owner:
                why = rc.is_for_pod(pod, claim)
                if why is not None:
                    raise _NotSchedulable(why)
            out.append(claim)
        return out

    # ------------------------------------------------------------ enqueue

    def pre_enqueue(self, pod: core_pb2.Pod) -> Status | None:
        """Kubernetes' PreEnqueue: every claim the pod names must exist, be its own when generated
        and not be being deleted before it is worth an attempt (the same checks as PreFilter's first
        step, ``_pod_claims``); otherwise the pod is not popped at all: it waits, gated, in the
        unschedulable pool for the claim events and its own status update (UnschedulableAndUnresolvable),
        with no failing attempt, no backoff and no status write. A deferred resize passes: it runs
        with its claims already, and its cycle checks resource fit only (KEP-5836), so a claim being
        deleted must not hold back the preemption its resize needs."""
        if not self._enabled or not pod.spec.resource_claims or skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None
        try:
            self._pod_claims(pod)
        except _NotSchedulable as exc:
            return _unschedulable(str(exc))
        return None

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: list[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        """Skip for a pod without claims and for a deferred resize (KEP-5836: every plugin but
        NodeName and NodeResourcesFit skips one, so Filter does not run for it either).

        Every claim the pod names must exist (a template's claim recorded by the resourceclaim
        controller in ``status.resourceClaimStatuses``, and controlled by the pod), not be being
        deleted, and, when allocated, be reserved for the pod or have room in ``status.reservedFor``;
        otherwise the pod waits, UnschedulableAndUnresolvable (``waiting for resource claim: pod
        "default/p": ResourceClaim not created yet``), until an event of ``events_to_register``. A
        claim another pod's cycle allocated but has not yet written waits too (``resource claim
        default/c is in the process of being allocated``). The claims to allocate must pass
        ``_check_requests``; an ``Allocator`` is prepared over the devices allocated now: those the
        informer's claims hold, plus those this plugin set aside for pods in flight.
        """
        if not self._enabled or not pod.spec.resource_claims or skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        try:
            claims = self._pod_claims(pod)
        except _NotSchedulable as exc:
            return None, _unschedulable(str(exc))
        if not claims:
            return None, Status(Code.SKIP)
        s = _State(claims=claims, available_on=[None] * len(claims), allocations=[None] * len(claims))
        to_allocate: list[resource_pb2.ResourceClaim] = []
        for i, claim in enumerate(claims):
            if claim.status.HasField("allocation"):
                if not rc.can_be_reserved(claim) and not rc.is_reserved_for_pod(pod, claim):
                    return None, _unschedulable(ERR_IN_USE)
                if claim.status.allocation.HasField("node_selector"):
                    s.available_on[i] = NodeSelector(claim.status.allocation.node_selector)
                continue
            if claim.metadata.uid in self._in_flight:
                return None, _unschedulable(f"resource claim {key_of(claim)} is in the process of being allocated")
            status = self._check_requests(claim)
            if status is not None:
                return None, status
            to_allocate.append(claim)
        if to_allocate:
            dra = self._dra()
            if dra is None:
                return None, Status(Code.ERROR, "no DRA informers in this scheduler")
            extra = self._extra_allocated()
            informer_allocated = dra.is_allocated
            try:
                s.allocator = Allocator(to_allocate, dra.get_device_class,
                                        lambda d: d in extra or informer_allocated(d))
            except AllocationError as exc:
                return None, _unschedulable(str(exc))
        state.write(_STATE_KEY, s)
        return None, None

    def _check_requests(self, claim: resource_pb2.ResourceClaim) -> Status | None:
        """Every request of a claim to allocate names an existing class (``request gpu: device class X
        does not exist``) and only selectors kplane evaluates, exact values (``machinery.dra.selectors``;
        Kubernetes' validateDeviceClass; the selectors are kplane's restriction)."""
        dra = self._dra()
        for request in claim.spec.devices.requests:
            if not request.HasField("exactly"):
                return _unschedulable(f"resource claim {key_of(claim)}, request {request.name}: firstAvailable "
                                      f"is not supported by kplane's allocator")
            class_name = request.exactly.device_class_name
            if dra is None or dra.get_device_class(class_name) is None:
                return _unschedulable(f"request {request.name}: device class {class_name} does not exist")
            try:
                compile_selectors(list(request.exactly.selectors))
            except SelectorError as exc:
                return _unschedulable(f"resource claim {key_of(claim)}, request {request.name}: {exc}")
        return None

    def filter(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo) -> Status | None:
        """An allocated claim's ``allocation.nodeSelector`` must match the node (``resourceclaim not
        available on the node``); the claims to allocate must all fit the node's free devices
        (``cannot allocate all claims``: each request ``count`` devices of its class, matching its
        selectors, no device twice). Both are UnschedulableAndUnresolvable, as in Kubernetes:
        preempting pods frees no devices. The node's allocation is kept for Reserve."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.claims:
            return None
        node = node_info.node
        if node is None:
            return Status(Code.ERROR, "node not found")
        for selector in s.available_on:
            if selector is not None and not selector.matches(node):
                return _unschedulable(ERR_NOT_AVAILABLE)
        if s.allocator is None:
            return None
        dra = self._dra()
        picks = s.allocator.pick(dra.usable_devices(node) if dra is not None else usable_devices(node, []))
        if picks is None:
            return _unschedulable(ERR_CANNOT_ALLOCATE)
        s.node_picks[node.metadata.name] = picks
        return None

    # ------------------------------------------------------------ reserve

    def reserve(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status | None:
        """Set the chosen node's allocation aside (``_in_flight``, Kubernetes' inFlightAllocations), so
        the next pod's cycle, which runs before this pod's PreBind, counts those devices as taken."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None or s.allocator is None:
            return None
        picks = s.node_picks.get(node_name)
        to_allocate = s.allocator.claims
        if picks is None:
            return Status(Code.ERROR, f"claim allocation not found for node {node_name}")
        allocations = s.allocator.results(node_name, picks)
        for claim, allocation in zip(to_allocate, allocations, strict=True):
            index = next(i for i, c in enumerate(s.claims) if c.metadata.uid == claim.metadata.uid)
            s.allocations[index] = allocation
            pending = resource_pb2.ResourceClaim()
            pending.CopyFrom(claim)
            pending.status.allocation.CopyFrom(allocation)
            self._in_flight[claim.metadata.uid] = pending
            log.debug("dra_reserved", pod=key_of(pod), claim=key_of(claim), node=node_name,
                      devices=[r.device for r in allocation.devices.results])
        return None

    def unreserve(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> None:
        """Give back what Reserve set aside, and take the pod out of ``reservedFor`` of a claim PreBind
        reserved."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None:
            return
        for claim in s.claims:
            self._in_flight.pop(claim.metadata.uid, None)
            current = self._get_claim(claim.metadata.namespace, claim.metadata.name)
            if current is not None and rc.is_reserved_for_pod(pod, current):
                task = asyncio.get_running_loop().create_task(self._unreserve_claim(current, pod))
                self._unreserving.add(task)
                task.add_done_callback(self._unreserving.discard)

    async def _unreserve_claim(self, claim: resource_pb2.ResourceClaim, pod: core_pb2.Pod) -> None:
        """Take the pod out of the claim's reservedFor (a strategic merge patch deletes that one
        entry whatever the rest is); a failure is left to the next attempt, as in Kubernetes."""
        patch = {"metadata": {"uid": claim.metadata.uid},
                 "status": {"reservedFor": [{"$patch": "delete", "uid": pod.metadata.uid}]}}
        try:
            await self._handle.require_client().resource_claims.patch(
                claim.metadata.name, patch, namespace=claim.metadata.namespace, subresource="status")
            log.info("dra_unreserved", pod=key_of(pod), claim=key_of(claim))
        except errors.ApiError as exc:
            log.warning("dra_unreserve_failed", pod=key_of(pod), claim=key_of(claim), error=exc.message)

    async def close(self) -> None:
        """The scheduler stops: let the reservedFor clean-ups in flight finish (briefly)."""
        if self._unreserving:
            await asyncio.wait(set(self._unreserving), timeout=2.0)
        for task in list(self._unreserving):
            task.cancel()

    # ------------------------------------------------------------ pre-bind

    async def pre_bind(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status | None:
        """Before Bind, write each claim not reserved for the pod yet (``_bind_claim``)."""
        s: _State | None = state.get(_STATE_KEY)
        if s is None or not s.claims:
            return None
        for i, claim in enumerate(s.claims):
            if rc.is_reserved_for_pod(pod, claim):
                continue
            try:
                s.claims[i] = await self._bind_claim(claim, s.allocations[i], pod)
            except (errors.ApiError, _NotSchedulable) as exc:
                return Status(Code.ERROR, str(exc), error=exc)
        return None

    async def _bind_claim(self, claim: resource_pb2.ResourceClaim, allocation: resource_pb2.AllocationResult | None,
                          pod: core_pb2.Pod) -> resource_pb2.ResourceClaim:
        """Write the allocation Reserve chose (if any) and the pod's reservation (Kubernetes'
        bindClaim): the finalizer ``resource.kubernetes.io/delete-protection`` with a normal update
        first, then ``status.allocation`` (the devices and the node selector) and the pod in
        ``status.reservedFor`` through the status subresource; a conflict is retried from a fresh
        read. The claim as written is kept (``_assumed``) until the informer shows that version, so
        its devices count as allocated meanwhile."""
        client = self._handle.require_client().resource_claims
        uid = claim.metadata.uid
        current = resource_pb2.ResourceClaim()
        current.CopyFrom(claim)

        async def write(current: resource_pb2.ResourceClaim) -> resource_pb2.ResourceClaim:
            if current.metadata.deletion_timestamp:
                raise _NotSchedulable(f"claim {key_of(claim)} got deleted in the meantime")
            if allocation is not None:
                if current.status.HasField("allocation"):
                    raise _NotSchedulable(f"claim {key_of(claim)} got allocated elsewhere in the meantime")
                if rc.FINALIZER not in current.metadata.finalizers:
                    current.metadata.finalizers.append(rc.FINALIZER)
                    current = await client.update(current)
                current.status.allocation.CopyFrom(allocation)
            current.status.reserved_for.add(resource="pods", name=pod.metadata.name, uid=pod.metadata.uid)
            return await client.update_status(current)

        try:
            written = await retry_update(current, lambda: client.get(claim.metadata.name, claim.metadata.namespace),
                                         write, DEFAULT_RETRY)
        finally:
            if allocation is not None:
                self._in_flight.pop(uid, None)
        if allocation is not None:
            self._assumed[uid] = written
        log.info("dra_claim_bound", pod=key_of(pod), claim=key_of(claim), allocated=allocation is not None,
                 devices=[r.device for r in written.status.allocation.devices.results])
        return written

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """What makes a pod this plugin rejected schedulable; each registration says why."""
        if not self._enabled:
            return []
        return [
            # A new node may carry devices (its slices come with it), and a node's labels decide
            # whether a slice's nodeSelector or an allocated claim's node selector matches it.
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)),
            # Allocation is tracked in ResourceClaims: the pod's own claim created or changed, or any
            # claim deallocated (its devices are free again). The PreQueueingHint (KEP-6132) names
            # the pods whose claim it is, so only they are asked — all of them on a deallocation.
            ClusterEventWithHint(ClusterEvent(RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_claim_change, self.pre_queueing_hint_for_claim),
            # The resourceclaim controller recorded the pod's generated claims in its status.
            ClusterEventWithHint(ClusterEvent(POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM),
                                 self.is_schedulable_after_pod_change),
            # A pod may be waiting for its class to be created, or for a class whose selectors now match.
            ClusterEventWithHint(ClusterEvent(DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE)),
            # A driver published devices (a new slice, or devices added to one).
            ClusterEventWithHint(ClusterEvent(RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE),
                                 self.is_schedulable_after_slice_change),
        ]

    def is_schedulable_after_claim_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Kubernetes' isSchedulableAfterClaimChange: Queue when one of the pod's claims was created
        or its status changed, or when any claim was deallocated — unless the pod's own claims are
        not all there yet (then only their creation helps)."""
        if not isinstance(new, resource_pb2.ResourceClaim):
            return QueueingHint.QUEUE
        try:
            claims = self._pod_claims(pod)
        except _NotSchedulable:
            return QueueingHint.QUEUE_SKIP
        if isinstance(old, resource_pb2.ResourceClaim) and old.status.HasField("allocation") and \
                not new.status.HasField("allocation"):
            return QueueingHint.QUEUE  # deallocated: its devices may be what the pod waits for
        if not any(c.metadata.uid == new.metadata.uid for c in claims):
            return QueueingHint.QUEUE_SKIP  # not a claim the pod waits for
        if not isinstance(old, resource_pb2.ResourceClaim):
            return QueueingHint.QUEUE  # the pod's claim was created
        if old.status == new.status:
            return QueueingHint.QUEUE_SKIP  # a finalizer or label: nothing the pod waits for
        return QueueingHint.QUEUE

    def pre_queueing_hint_for_claim(self, old: Any, new: Any) -> PreQueueingHintResult:
        """KEP-6132 "DRA Plugin Implementation": a claim deallocated (its allocation non-nil ->
        nil) may free devices for any pod, so every pod; otherwise the pods whose
        spec.resourceClaims reference the claim, by the pod informer's index — its owner and every
        pod sharing it; none when no pod references it yet (the pod's status update naming it is
        an event of its own). Any error reading the index: every pod. So the queue asks the claim
        hint about the pods named alone instead of every pod in the unschedulable pool.

        The failpoint ``scheduler/dra-pre-queueing-hint-skip`` (armed with ``error``) makes it wrongly
        name no pod, so a test can see the periodic flush rescue a pod."""
        try:
            failpoints.hit_sync(FP_PRE_QUEUEING_HINT_SKIP)
        except failpoints.FailpointError:
            return PreQueueingHintResult.narrowed(())  # wrongly: no pod at all
        if not isinstance(new, resource_pb2.ResourceClaim):
            return ALL_PODS
        if isinstance(old, resource_pb2.ResourceClaim) and old.status.HasField("allocation") and \
                not new.status.HasField("allocation"):
            return ALL_PODS  # deallocated: freed devices may be what any waiting pod needs
        try:
            pods = pods_for_claim(self._handle, new.metadata.namespace, new.metadata.name)
        except Exception as exc:
            log.warning("dra_pre_queueing_hint_index_failed", claim=key_of(new), error=repr(exc))
            return ALL_PODS
        return PreQueueingHintResult.narrowed(key_of(p) for p in pods)

    def is_schedulable_after_pod_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Kubernetes' isSchedulableAfterPodChange: the pod itself got its generated claims' names,
        and those claims are all there."""
        if not isinstance(new, core_pb2.Pod) or new.metadata.uid != pod.metadata.uid:
            return QueueingHint.QUEUE_SKIP
        try:
            self._pod_claims(new)
        except _NotSchedulable:
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE

    def is_schedulable_after_slice_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """A slice added, or one whose devices or pool changed; a rewrite of the same spec frees
        nothing (Kubernetes queues on every slice event)."""
        if isinstance(old, resource_pb2.ResourceSlice) and isinstance(new, resource_pb2.ResourceSlice) and \
                old.spec == new.spec:
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE


def _rv(obj: resource_pb2.ResourceClaim) -> int:
    try:
        return int(obj.metadata.resource_version)
    except ValueError:
        return 0


def new(args: Any, handle: Any) -> DynamicResources:
    """DynamicResources takes no args: kube-scheduler has no DynamicResourcesArgs in v1, and any given
    are an error."""
    no_args(NAME, args)
    if handle is None:
        handle = new_handle()
    return DynamicResources(handle, features_of(handle))
