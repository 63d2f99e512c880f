"""The allocation manager: admission of pods and of resizes, and the pending-resize queue.

Kubernetes' pkg/kubelet/allocation, as KEP-1287 describes it. The manager only decides and
records; the kubelet's pod workers actuate. Its state — the checkpoints, the resize conditions,
the pending queue — is private: everyone asks its methods (``AllocationManager``).

- ``AllocationManager.add_pod``: a new pod admitted, or refused;
- ``AllocationManager.handle_resize``: a resize allocated, Deferred or Infeasible;
- ``AllocationManager.retry_pending``: the pending resizes retried, in the KEP's order.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Mapping, Protocol

from google.protobuf.message import Message
from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily

from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import ACTUATED_FILE, ALLOCATED_FILE, CheckpointStore, Resources
from kubelet.allocation.feasibility import DEFAULT_POLICIES, NodeResourcePolicies, infeasible_by_policy
from machinery import emptydir, failpoints, resources
from machinery.api import core_pb2
from machinery.fit import Insufficient, Resource, fits_request
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.resources import resizable_containers

log = get_logger()

# A safety check switched off, for chaos to find (docs/chaos.md, "Proof that it finds races").
FP_SKIP_FIT_CHECK = failpoints.declare(
    "kubelet/skip-fit-check", "return: the kubelet's fit predicate says yes whatever the room, so admission admits "
    "and resizes are allocated past allocatable (allocated-within-allocatable must catch it)")

TRIGGER_POD_RESIZED = "pod_resized"
TRIGGER_POD_UPDATED = "pod_updated"
TRIGGER_PODS_ADDED = "pods_added"
TRIGGER_PODS_REMOVED = "pods_removed"
TRIGGER_PERIODIC = "periodic_retry"

REQUESTED_RESIZES = Counter("kubelet_container_requested_resizes_total", "Number of requested resizes, counted "
                            "at the container level.", ["resource", "requirement", "operation"])
INFEASIBLE_RESIZES = Counter("kubelet_pod_infeasible_resizes_total", "Number of infeasible resizes for pods.",
                             ["reason_detail"])
DEFERRED_ACCEPTED = Counter("kubelet_pod_deferred_resize_accepted_total", "Cumulative number of resizes that were "
                            "accepted after being deferred.", ["retry_trigger"])


class RecordEvent(Protocol):
    """Records a Kubernetes Event about an object (``machinery.events.EventRecorder.event``)."""

    def __call__(self, obj: Message, type_: str, reason: str, message: str, /) -> None: ...


@dataclass(frozen=True)
class Admission:
    ok: bool
    reason: str = ""
    message: str = ""
    detail: str = ""  # an Infeasible resize's kubelet_pod_infeasible_resizes_total{reason_detail}


ADMITTED = Admission(True)


@dataclass(frozen=True)
class PodAdmission:
    """``can_admit_pod``'s decision: the pod at the resources it is admitted at, and the verdict."""

    pod: core_pb2.Pod
    verdict: Admission


def allocation_from_pod(pod: core_pb2.Pod, volumes: bool = False) -> dict[str, Resources]:
    """The pod's containers' resources; with ``volumes`` (KEP-6030) also each memory-backed
    emptyDir's sizeLimit, as a memory limit under its checkpoint key: allocated together."""
    out = {c.name: Resources.of(c.resources) for c in resizable_containers(pod)}
    if volumes:
        for name, limit in emptydir.size_limits(pod).items():
            out[emptydir.checkpoint_key(name)] = volume_resources(limit)
    return out


def volume_resources(size_limit: str) -> Resources:
    """A memory-backed volume's size as the checkpoints keep it."""
    return Resources({}, {"memory": size_limit})


def volume_size(r: Resources) -> int:
    """Bytes, from what the checkpoints keep."""
    return resources.to_resource_list(r.limits).get("memory", 0)


def _copy(pod: core_pb2.Pod) -> core_pb2.Pod:
    out = core_pb2.Pod()
    out.CopyFrom(pod)
    return out


def _set_resources(container: core_pb2.Container, r: Resources) -> None:
    container.resources.ClearField("requests")
    container.resources.ClearField("limits")
    container.resources.requests.update(r.requests)
    container.resources.limits.update(r.limits)


def _same(a: Resources, b: Resources) -> bool:
    """Semantic equality of two requirements (1 == 1000m)."""
    return (resources.to_resource_list(a.requests) == resources.to_resource_list(b.requests)
            and resources.to_resource_list(a.limits) == resources.to_resource_list(b.limits))


class AllocationManager:
    """Kubernetes' allocation ``Manager``: the kubelet asks it; its stores stay private.

    The allocated and actuated checkpoints, the resize conditions and the pending-resize queue are
    read and changed only through the methods below.
    """

    def __init__(self, checkpoint_dir: str | os.PathLike, node_name: str, allocatable: Mapping[str, int],
                 max_pods: int, record_event: RecordEvent | None = None,
                 before_allocate: Callable[[core_pb2.Pod], None] | None = None,
                 policies: NodeResourcePolicies = DEFAULT_POLICIES, memory_backed_volumes: bool = False):
        self._node_name = node_name
        # KEP-6030 (InPlacePodVerticalScalingMemoryBackedVolumes): memory-backed emptyDir sizes are
        # allocated with the containers' resources, in the same checkpoint entry.
        self._volumes = memory_backed_volumes
        self._policies = policies  # the CPU/Memory managers' policies and swap (kubelet.allocation.feasibility)
        self._allocated = CheckpointStore(checkpoint_dir, ALLOCATED_FILE)
        self._actuated = CheckpointStore(checkpoint_dir, ACTUATED_FILE)
        self._conditions = cond.ResizeConditions()
        self._allocatable = dict(allocatable)
        self._allocatable_resource = Resource.of(self._allocatable)
        self._allocatable_resource.allowed_pod_number = max_pods
        # Owners that disabled resize preemption on this node (KEP-5836), from the Node's spec.
        self._preemption_disabled_by: list[str] = []
        self._pending: list[str] = []
        self._record = record_event or (lambda *a: None)
        # Called between deciding a resize fits and checkpointing it (the kubelet's failpoint).
        self._before_allocate = before_allocate
        _MANAGERS.add(self)

    def load(self) -> None:
        """Read both checkpoints (Kubernetes: NewManager's state checkpoints)."""
        self._allocated.load()
        self._actuated.load()

    # ------------------------------------------------------------ allocation views

    def is_allocated(self, pod: core_pb2.Pod) -> bool:
        """Whether the pod has a checkpointed allocation, i.e. was admitted."""
        return self._allocated.get_pod(pod.metadata.uid) is not None

    def allocation_of(self, uid: str) -> dict[str, Resources] | None:
        """A pod's allocation per container, None if not admitted (Kubernetes: GetContainerResourceAllocation)."""
        alloc = self._allocated.get_pod(uid)
        if alloc is None or not self._volumes:
            return alloc
        return {k: r for k, r in alloc.items() if emptydir.volume_of_key(k) is None}

    def volume_allocation_of(self, uid: str) -> dict[str, Resources]:
        """A pod's allocated memory-backed volume sizes (KEP-6030), by volume name."""
        alloc = self._allocated.get_pod(uid) or {}
        return {v: r for k, r in alloc.items() if (v := emptydir.volume_of_key(k)) is not None}

    def actuated_volume(self, uid: str, volume: str) -> Resources | None:
        """The size the volume is mounted at now (KEP-6030's actuated state)."""
        return self._actuated.get(uid, emptydir.checkpoint_key(volume))

    def set_actuated_volume(self, uid: str, volume: str, r: Resources) -> None:
        self._actuated.set_container(uid, emptydir.checkpoint_key(volume), r)

    def with_allocation(self, pod: core_pb2.Pod) -> tuple[core_pb2.Pod, bool]:
        """The pod with its containers' resources replaced by the allocation, and whether they differ.

        Kubernetes' UpdatePodFromAllocation.
        """
        alloc = self._allocated.get_pod(pod.metadata.uid)
        if alloc is None:
            return pod, False
        out = None
        for group in ("containers", "init_containers"):
            for i, c in enumerate(getattr(pod.spec, group)):
                r = alloc.get(c.name)
                if r is None or _same(Resources.of(c.resources), r):
                    continue
                if out is None:
                    out = _copy(pod)
                _set_resources(getattr(out.spec, group)[i], r)
        if self._volumes:
            differ = {name: r.limits["memory"] for name, r in self.volume_allocation_of(pod.metadata.uid).items()
                      if not _same(volume_resources(emptydir.size_limits(pod).get(name, "0")), r)}
            if differ:
                if out is None:
                    out = _copy(pod)
                emptydir.set_size_limits(out, differ)
        return (out, True) if out is not None else (pod, False)

    def set_allocated(self, pod: core_pb2.Pod) -> None:
        """Checkpoint the pod's containers' resources (and memory-backed volume sizes, KEP-6030) as
        its allocation, atomically (Kubernetes: SetAllocatedResources)."""
        self._allocated.set_pod(pod.metadata.uid, allocation_from_pod(pod, self._volumes))

    def record_allocation(self, uid: str, allocation: Mapping[str, Resources]) -> None:
        """Checkpoint an allocation rebuilt from the API status and the runtime (the kubelet's recovery)."""
        self._allocated.set_pod(uid, allocation)

    def actuated_of(self, uid: str, container: str) -> Resources | None:
        """What the runtime was last given for a container (Kubernetes: GetActuatedResources)."""
        return self._actuated.get(uid, container)

    def set_actuated(self, uid: str, container: str, r: Resources) -> None:
        """Record what the runtime now runs a container with (Kubernetes: SetActuatedResources)."""
        self._actuated.set_container(uid, container, r)

    def remove_pod(self, uid: str) -> None:
        """Forget a pod: allocation, actuation, conditions, pending resize (Kubernetes: RemovePod)."""
        self._allocated.remove_pod(uid)
        self._actuated.remove_pod(uid)
        self._conditions.forget(uid)
        if uid in self._pending:
            self._pending.remove(uid)

    def remove_orphans(self, keep: set[str]) -> list[str]:
        """Forget pods not in ``keep``; the uids whose allocation went (Kubernetes: RemoveOrphanedPods)."""
        gone = self._allocated.remove_orphans(keep)
        for uid in gone:
            self._conditions.forget(uid)
        self._actuated.remove_orphans(keep)
        self._pending = [u for u in self._pending if u in keep]
        return gone

    # ------------------------------------------------------------ resize conditions

    def restore_conditions(self, uid: str, pod_conditions: Iterable[core_pb2.PodCondition]) -> None:
        """Take a pod's resize conditions from its API status, times kept (kubelet start, KEP-1287)."""
        self._conditions.restore(uid, pod_conditions)

    def conditions_of(self, uid: str) -> dict[str, cond.ResizeCondition]:
        """A pod's resize conditions by type (Kubernetes: status manager's GetPodResizeConditions)."""
        return self._conditions.get(uid)

    def condition(self, uid: str, type_: str) -> cond.ResizeCondition | None:
        """One of a pod's resize conditions, None if it is not on."""
        return self._conditions.condition(uid, type_)

    def is_deferred(self, uid: str) -> bool:
        """PodResizePending with reason Deferred (Kubernetes: status manager's IsPodResizeDeferred)."""
        return self._conditions.is_deferred(uid)

    def is_infeasible(self, uid: str) -> bool:
        """PodResizePending with reason Infeasible (Kubernetes: status manager's IsPodResizeInfeasible)."""
        return self._conditions.is_infeasible(uid)

    def set_in_progress(self, uid: str, generation: int, reason: str = "", message: str = "") -> bool:
        """Set PodResizeInProgress; True if it changed (Kubernetes: SetPodResizeInProgressCondition)."""
        return self._conditions.put(uid, cond.IN_PROGRESS, reason, message, generation)

    def clear_in_progress(self, uid: str) -> bool:
        """Clear PodResizeInProgress; True if it was on (Kubernetes: ClearPodResizeInProgressCondition)."""
        return self._conditions.clear(uid, cond.IN_PROGRESS)

    # ------------------------------------------------------------ fit

    def _usage(self, pod: core_pb2.Pod) -> dict[str, int]:
        """What an admitted pod holds: per container max(allocated, actuated) requests, plus overhead."""
        held, _ = self.with_allocation(pod)
        uid = pod.metadata.uid
        raised = None
        for group in ("containers", "init_containers"):
            for i, c in enumerate(getattr(held.spec, group)):
                act = self._actuated.get(uid, c.name)
                if act is None:
                    continue
                want = resources.to_resource_list(c.resources.requests)
                have = resources.to_resource_list(act.requests)
                if any(v > want.get(k, 0) for k, v in have.items()):
                    if raised is None:
                        raised = _copy(held)
                    merged = resources.max_of(want, have)
                    target = getattr(raised.spec, group)[i]
                    target.resources.requests.update(resources.format_resource_list(merged))
        return resources.pod_requests(raised or held, use_status_resources=False)

    def _resizing(self, pod: core_pb2.Pod) -> core_pb2.Pod:
        """The pod as a resize's fit check counts it (KEP-5836 "Risk of Additional Preemption":
        the kubelet takes the resizing pod at max(desired, allocated, actual), per container and
        resource, as Kubernetes' PodRequests with status resources does): a container that gives
        up what another takes does not free it before it is actuated."""
        uid = pod.metadata.uid
        allocation = self.allocation_of(uid) or {}
        out = None
        for group in ("containers", "init_containers"):
            for i, c in enumerate(getattr(pod.spec, group)):
                want = resources.to_resource_list(c.resources.requests)
                merged = dict(want)
                for r in (allocation.get(c.name), self._actuated.get(uid, c.name)):
                    if r is not None:
                        merged = resources.max_of(merged, resources.to_resource_list(r.requests))
                if merged != want:
                    if out is None:
                        out = _copy(pod)
                    getattr(out.spec, group)[i].resources.requests.update(resources.format_resource_list(merged))
        return out or pod

    def held(self, pod: core_pb2.Pod) -> dict[str, int]:
        """What an admitted pod holds on the node, its one pod slot included (preemption's view)."""
        return {**self._usage(pod), "pods": 1}

    def _lacking(self, pod: core_pb2.Pod, others: Iterable[core_pb2.Pod]) -> list[Insufficient]:
        """What the node lacks for ``pod`` next to ``others`` (each counted at what it holds):
        machinery.fit's check, the one the scheduler's NodeResourcesFit runs (as Kubernetes'
        kubelet calls the scheduler's noderesources.Fits)."""
        others = [o for o in others if o.metadata.uid != pod.metadata.uid]
        used = Resource()
        for o in others:
            used.add(self._usage(o))
        request = Resource.of(resources.pod_requests(pod, use_status_resources=False))
        return fits_request(request, self._allocatable_resource, used, len(others))

    def missing(self, pod: core_pb2.Pod, others: Iterable[core_pb2.Pod]) -> dict[str, int]:
        """What the node lacks for ``pod`` next to ``others``: resource -> amount; empty if it fits.

        Kubernetes' InsufficientResourceError amounts: requested - (capacity - used).
        """
        return {i.resource: i.short for i in self._lacking(pod, others)}

    def fits(self, pod: core_pb2.Pod, others: Iterable[core_pb2.Pod]) -> Admission:
        """Kubernetes' kubelet fit predicate: the first thing lacking, as OutOf<resource>."""
        if failpoints.returns(FP_SKIP_FIT_CHECK):
            return ADMITTED
        lacking = self._lacking(pod, others)
        if not lacking:
            return ADMITTED
        i = lacking[0]
        return Admission(False, f"OutOf{i.resource}", f"Node didn't have enough resource: {i.resource}, requested: "
                                                      f"{i.requested}, used: {i.used}, capacity: {i.capacity}")

    # ------------------------------------------------------------ admission

    def can_admit_pod(self, pod: core_pb2.Pod, active_pods: Iterable[core_pb2.Pod]) -> PodAdmission:
        """Admission's decision, nothing written (Kubernetes: AddPod's UpdatePodFromAllocation + canAdmitPod).

        The pod is taken at its checkpointed allocation when it has one, so after a restart a resize
        the kubelet had not admitted does not sneak in ("Kubelet Restart Tolerance").
        """
        pod_alloc, _ = self.with_allocation(pod)
        return PodAdmission(pod_alloc, self.fits(pod_alloc, active_pods))

    def add_pod(self, pod: core_pb2.Pod, active_pods: Iterable[core_pb2.Pod]) -> Admission:
        """Admit a pod; on success its allocation is checkpointed (Kubernetes: AddPod).

        A new pod is admitted against the node's allocatable and the other admitted pods
        (``OutOfcpu`` / ``OutOfmemory`` / ``OutOfpods`` otherwise — what resolves scheduler races).
        After a kubelet restart a pod is re-admitted at its checkpointed allocation, not its spec, so
        a resize that was not yet admitted does not sneak in ("Kubelet Restart Tolerance").

        ``can_admit_pod``, then ``set_allocated`` if the pod fits: the two steps the kubelet's
        admission takes, with its failpoints around the checkpoint write and, for a critical pod
        that does not fit, preemption and a new fit check in between.
        """
        decision = self.can_admit_pod(pod, active_pods)
        if decision.verdict.ok:
            self.set_allocated(decision.pod)
        else:
            log.info("pod_admission_denied", pod=key_of(pod), node=self._node_name, reason=decision.verdict.reason,
                     message=decision.verdict.message)
        return decision.verdict

    def handle_resize(self, pod: core_pb2.Pod, active_pods: Iterable[core_pb2.Pod]) -> bool:
        """Try to allocate a pod's desired resources; True if the allocation changed now.

        Kubernetes' handlePodResourcesResize, for desired != allocated. Infeasible when the node's
        policies forbid it (``kubelet.allocation.feasibility``: static CPU or Memory manager, swap) or
        the pod's requests exceed what the node has at all ("Node didn't have enough capacity: cpu,
        requested: 5000, capacity: 4000"); Deferred when they do not fit next to the other pods now
        ("Node didn't have enough resource: ..."), as ``resize_verdict`` decides; else the allocation
        is checkpointed and PodResizeInProgress set with the pod's generation. The pod counts for
        max(desired, allocated, actuated) of each container, the other pods for max(allocated,
        actuated), so a downsize frees room once actuated.

        KEP-5836: a Deferred resize on a node whose ``spec.podPreemptionPolicy.disableResizePreemption``
        is non-empty also gets PodResizePreemptionDisabled (reason PreemptionDisabledByNodePolicy).
        """
        uid = pod.metadata.uid
        _, differs = self.with_allocation(pod)
        if not differs:
            self._conditions.clear(uid, cond.PENDING)
            self._conditions.clear(uid, cond.PREEMPTION_DISABLED)
            return False
        generation = pod.metadata.generation
        verdict = self.resize_verdict(pod, active_pods)
        if verdict.ok:
            if self._before_allocate is not None:
                self._before_allocate(pod)
            self.set_allocated(pod)
            self._conditions.clear(uid, cond.PENDING)
            self._conditions.clear(uid, cond.PREEMPTION_DISABLED)
            self._conditions.clear(uid, cond.IN_PROGRESS)
            self._conditions.put(uid, cond.IN_PROGRESS, "", "", generation)
            self._record(pod, "Normal", "ResizeStarted", f"Pod resize started: {_summary(pod)}, generation: "
                                                         f"{generation}")
            log.info("resize_allocated", pod=key_of(pod), node=self._node_name, generation=generation)
            return True
        if self._conditions.put(uid, cond.PENDING, verdict.reason, verdict.message, generation):
            if verdict.reason == cond.INFEASIBLE:  # once per resize request, not per retry
                INFEASIBLE_RESIZES.labels(reason_detail=verdict.detail).inc()
            event = "ResizeInfeasible" if verdict.reason == cond.INFEASIBLE else "ResizeDeferred"
            self._record(pod, "Warning", event, f"Pod resize {verdict.reason}: {verdict.message}, generation: "
                                                 f"{generation}")
            log.info("resize_pending", pod=key_of(pod), node=self._node_name, reason=verdict.reason,
                     message=verdict.message)
        if verdict.reason == cond.DEFERRED and self._preemption_disabled_by:
            self._conditions.put(uid, cond.PREEMPTION_DISABLED, cond.PREEMPTION_DISABLED_BY_NODE_POLICY,
                                 f"Preemption for in-place pod resize is disabled on node '{self._node_name}' by "
                                 f"preemption policy.", generation)
        else:
            self._conditions.clear(uid, cond.PREEMPTION_DISABLED)
        return False

    def resize_verdict(self, pod: core_pb2.Pod, active_pods: Iterable[core_pb2.Pod]) -> Admission:
        """Whether a resize fits: Infeasible, Deferred or admitted, nothing written (Kubernetes: the
        resize admit handler). Infeasible first by the node's policies, then by capacity."""
        blocked = infeasible_by_policy(pod, self.with_allocation(pod)[0], self._policies)
        if blocked is not None:
            return Admission(False, cond.INFEASIBLE, blocked.message, blocked.detail)
        want = resources.pod_requests(pod, use_status_resources=False)
        for name in ("memory", "cpu"):
            capacity = self._allocatable.get(name, 0)
            if want.get(name, 0) > capacity:
                return Admission(False, cond.INFEASIBLE, f"Node didn't have enough capacity: {name}, requested: "
                                                          f"{want[name]}, capacity: {capacity}",
                                 "insufficient_node_allocatable")
        fit = self.fits(self._resizing(pod), active_pods)
        if fit.ok:
            return ADMITTED
        return Admission(False, cond.DEFERRED, fit.message)

    @property
    def resize_preemption_disabled_by(self) -> list[str]:
        """The owners that disabled resize preemption on this node (KEP-5836), as last refreshed."""
        return list(self._preemption_disabled_by)

    def refresh_preemption_policy(self, owners: list[str], pods_by_uid: Mapping[str, core_pb2.Pod]) -> list[str]:
        """The Node's disableResizePreemption changed: update Deferred pods' conditions (KEP-5836).

        Returns the uids whose conditions changed (their status must be written).
        """
        self._preemption_disabled_by = list(owners)
        changed = []
        for uid, pod in pods_by_uid.items():
            if not self._conditions.is_deferred(uid):
                continue
            if owners:
                did = self._conditions.put(uid, cond.PREEMPTION_DISABLED, cond.PREEMPTION_DISABLED_BY_NODE_POLICY,
                                           f"Preemption for in-place pod resize is disabled on node "
                                           f"'{self._node_name}' by preemption policy.", pod.metadata.generation)
            else:
                did = self._conditions.clear(uid, cond.PREEMPTION_DISABLED)
            if did:
                changed.append(uid)
        return changed

    # ------------------------------------------------------------ pending resizes

    def _increases_requests(self, pod: core_pb2.Pod) -> bool:
        allocated, differs = self.with_allocation(pod)
        if not differs:
            return False
        old = resources.pod_requests(allocated, use_status_resources=False)
        new = resources.pod_requests(pod, use_status_resources=False)
        return new.get("memory", 0) > old.get("memory", 0) or new.get("cpu", 0) > old.get("cpu", 0)

    def _sort_key(self, pod: core_pb2.Pod):
        qos = resources.qos_class(pod)
        pending = self._conditions.condition(pod.metadata.uid, cond.PENDING)
        since = pending.last_transition_time if pending is not None and pending.last_transition_time else None
        return (self._increases_requests(pod), -(pod.spec.priority if pod.spec.HasField("priority") else 0),
                qos != "Guaranteed", since is None, since or "")

    def push_pending(self, uid: str, pods_by_uid: Mapping[str, core_pb2.Pod]) -> None:
        """Queue a pod's resize for retries, in the KEP's order (Kubernetes: PushPendingResize)."""
        if uid not in self._pending:
            self._pending.append(uid)
        self._sort_pending(pods_by_uid)

    def has_pending(self) -> bool:
        """Whether any resize waits to be retried (Kubernetes: HasPendingResizes)."""
        return bool(self._pending)

    def pending_uids(self) -> list[str]:
        """The pods whose resizes wait to be retried, in the order they will be."""
        return list(self._pending)

    def _sort_pending(self, pods_by_uid: Mapping[str, core_pb2.Pod]) -> None:
        live = [pods_by_uid[u] for u in self._pending if u in pods_by_uid]
        live.sort(key=self._sort_key)
        self._pending = [p.metadata.uid for p in live]

    def retry_pending(self, trigger: str, pods_by_uid: Mapping[str, core_pb2.Pod],
                      active_pods: Callable[[], list[core_pb2.Pod]]) -> list[str]:
        """Retry every pending resize in priority order; the uids whose status changed.

        Kubernetes' RetryPendingResizes. Pending resizes are retried in the KEP's order
        (``_sort_key``) — resizes that do not increase requests first, then higher priority, then
        Guaranteed before Burstable, then longest pending — on pod removal, another pod's update or
        resize, and periodically (``trigger``).
        """
        self._sort_pending(pods_by_uid)
        still: list[str] = []
        changed: list[str] = []
        for uid in self._pending:
            pod = pods_by_uid.get(uid)
            if pod is None:
                continue
            before = self._conditions.get(uid)
            was_deferred = self._conditions.is_deferred(uid)
            allocated = self.handle_resize(pod, active_pods())
            if self._conditions.is_deferred(uid):
                still.append(uid)
            elif allocated and was_deferred:
                DEFERRED_ACCEPTED.labels(retry_trigger=trigger).inc()
                log.info("deferred_resize_accepted", pod=key_of(pod), node=self._node_name, trigger=trigger)
            if allocated or self._conditions.get(uid) != before:
                changed.append(uid)
        self._pending = still
        return changed


def count_requested_resizes(old: core_pb2.Pod, new: core_pb2.Pod) -> None:
    """kubelet_container_requested_resizes_total for a spec change the kubelet observed."""
    before = {c.name: c.resources for c in resizable_containers(old)}
    for c in resizable_containers(new):
        prev = before.get(c.name)
        if prev is None:
            continue
        for requirement in ("requests", "limits"):
            a = resources.to_resource_list(getattr(prev, requirement))
            b = resources.to_resource_list(getattr(c.resources, requirement))
            for name in ("cpu", "memory"):
                if a.get(name) == b.get(name):
                    continue
                if name not in a:
                    op = "add"
                elif name not in b:
                    op = "remove"
                else:
                    op = "increase" if b[name] > a[name] else "decrease"
                REQUESTED_RESIZES.labels(resource=name, requirement=requirement, operation=op).inc()


def _summary(pod: core_pb2.Pod) -> str:
    parts = []
    for c in resizable_containers(pod):
        req = ",".join(f"{k}={v}" for k, v in sorted(c.resources.requests.items()))
        lim = ",".join(f"{k}={v}" for k, v in sorted(c.resources.limits.items()))
        parts.append(f"{c.name}(requests {req or '-'}; limits {lim or '-'})")
    return " ".join(parts)


# ----------------------------------------------------------------------------------------------
# kubelet_pod_pending_resizes{reason} and kubelet_pod_in_progress_resizes: read at scrape time
# from the resize conditions of every allocation manager in this process (one per kubelet; many
# in a hollow-node process), so they can never drift from the conditions the pods show.

_MANAGERS: "weakref.WeakSet[AllocationManager]" = weakref.WeakSet()


class _ResizeGauges:
    def collect(self) -> Iterator[GaugeMetricFamily]:
        totals = {"deferred": 0, "infeasible": 0, "in_progress": 0}
        for manager in list(_MANAGERS):
            for key, n in manager._conditions.counts().items():
                totals[key] += n
        pending = GaugeMetricFamily("kubelet_pod_pending_resizes", "Number of pending resizes for pods.",
                                    labels=["reason"])
        pending.add_metric(["deferred"], totals["deferred"])
        pending.add_metric(["infeasible"], totals["infeasible"])
        yield pending
        yield GaugeMetricFamily("kubelet_pod_in_progress_resizes", "Number of in-progress resizes for pods.",
                                value=totals["in_progress"])

    def describe(self) -> list:
        return []


REGISTRY.register(_ResizeGauges())
