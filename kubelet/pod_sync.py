"""The per-pod sync: what a pod worker does with a pod, from the current state (Kubernetes' SyncPod).

- ``PodSync.sync_pod``: one pod reconciled, in the kubelet's order (``PodSync._sync``);
- ``PodSync.sync_cleanup``: what the runtime still holds of a pod the API no longer has, removed;
- ``PodSync._prepare_claims``, ``_handle_resize`` and ``_track_in_progress``: the pod's
  ResourceClaims, its resize request and its PodResizeInProgress condition.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import Histogram

from kubelet import volume_resize
from kubelet.admission import PodAdmitter
from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import (
    TRIGGER_POD_RESIZED,
    TRIGGER_POD_UPDATED,
    TRIGGER_PODS_REMOVED,
    AllocationManager,
    RecordEvent,
    resizable_containers,
)
from kubelet.dra.manager import FAILED_PREPARE, DRAManager, NotReady
from kubelet.housekeeping import ResizeRetries
from kubelet.pod_runtime import PodRuntime
from kubelet.pod_workers import PodWorkers
from kubelet.resize import changed_resources
from kubelet.restart_failpoints import FP_RESIZE_AFTER_ALLOCATE
from kubelet.runtime_ops import Observed, RuntimeOps
from kubelet.status_manager import TERMINAL_PHASES, StatusManager
from kubelet.termination import PodTerminator
from machinery import failpoints
from machinery.api import core_pb2
from machinery.logging import get_logger

log = get_logger()

# Each sync is timed in ``kubelet_pod_worker_duration_seconds{operation_type}`` (``operation_type``).
POD_WORKER_DURATION = Histogram(
    "kubelet_pod_worker_duration_seconds", "Duration in seconds to sync a single pod. Broken down by operation type: "
    "create, update, or sync", ["operation_type"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


def operation_type(pod: core_pb2.Pod, alloc: AllocationManager) -> str:
    """Kubernetes' SyncPodType of a sync: ``kill`` for a pod being deleted or ended, ``create`` for
    one not admitted yet, else ``sync`` (kplane's workers do not tell an update from a resync)."""
    if pod.metadata.deletion_timestamp or pod.status.phase in TERMINAL_PHASES:
        return "kill"
    return "sync" if alloc.is_allocated(pod) else "create"


class PodSync:
    """The kubelet's :class:`kubelet.pod_workers.PodSyncer`."""

    def __init__(self, *, get_pod: Callable[[str, str], core_pb2.Pod | None],
                 pods_by_uid: Callable[[], dict[str, core_pb2.Pod]], ops: RuntimeOps, alloc: AllocationManager,
                 runtime: PodRuntime, admitter: PodAdmitter, terminator: PodTerminator, status: StatusManager,
                 retries: ResizeRetries, workers: PodWorkers, resize_supported: bool, record_event: RecordEvent,
                 dra: DRAManager, max_claim_retry: float = 10.0):
        self._get_pod = get_pod
        self._pods_by_uid = pods_by_uid
        self._ops = ops
        self._alloc = alloc
        self._runtime = runtime
        self._admitter = admitter
        self._terminator = terminator
        self._status = status
        self._retries = retries
        self._workers = workers
        self._resize_supported = resize_supported
        self._event = record_event
        self._dra = dra
        self._max_claim_retry = max_claim_retry
        self._claim_waits: dict[str, tuple[str, float]] = {}  # pod uid -> (why its claims are not ready, next delay)
        self._ended: set[str] = set()  # uids of terminal pods whose end retried the pending resizes

    async def sync_cleanup(self, uid: str) -> None:
        """Remove what the runtime still holds of a pod the API no longer has; a pod that freed
        resources retries the pending resizes (KEP-1287's triggers)."""
        self._claim_waits.pop(uid, None)
        self._ended.discard(uid)
        if await self._terminator.cleanup(uid):
            await self._retries.retry(TRIGGER_PODS_REMOVED)

    async def sync_pod(self, key: str) -> bool:
        """Sync the pod with this key; False when the API no longer has it (nothing to resync)."""
        namespace, name = key.split("/", 1)
        pod = self._get_pod(name, namespace)
        if pod is None:
            return False
        operation, start = operation_type(pod, self._alloc), time.perf_counter()
        try:
            await self._sync(pod)
        finally:
            POD_WORKER_DURATION.labels(operation).observe(time.perf_counter() - start)
        return True

    async def _sync(self, pod: core_pb2.Pod) -> None:
        """Reconcile one pod from the API's pod, the runtime's containers and the allocation
        checkpoints, in the kubelet's order:

        1. a pod being deleted is stopped with its grace period, its final status written, and deleted
           (a resize it asked for first is actuated best-effort: ``_resize_terminating``);
        2. a pod being evicted or preempted is killed by its own worker;
        3. a pod that ended stays stopped;
        4. a pod not yet admitted is admitted or refused (``kubelet.admission``);
        5. its ResourceClaims are prepared (``kubelet.dra``, ``_prepare_claims``): until each is
           allocated to this node and reserved for the pod, no container starts;
        6. a changed spec is a resize request: it goes through the allocation manager's pending queue
           (allocated, Deferred or Infeasible: ``_handle_resize``) and PodResizeInProgress follows the
           runtime (``_track_in_progress``);
        7. the runtime is reconciled (``kubelet.pod_runtime``) and the status written if it changed.

        A pod that freed resources, and a resize that completed, retry the pending resizes
        (KEP-1287's triggers).
        """
        uid = pod.metadata.uid
        observed = await self._ops.observe(uid)
        if pod.metadata.deletion_timestamp:
            self._claim_waits.pop(uid, None)
            if self._resize_supported and self._alloc.is_allocated(pod):
                observed = await self._resize_terminating(pod, observed)
            await self._terminator.terminate(pod, observed)
            await self._retries.retry(TRIGGER_PODS_REMOVED)
            return
        if await self._terminator.sync_abnormal_kill(pod, observed):
            return
        if pod.status.phase in TERMINAL_PHASES:
            await self._runtime.stop_all(observed, 0)
            self._dra.unprepare_resources(uid)
            self._claim_waits.pop(uid, None)
            if uid not in self._ended:
                # A pod that ended no longer counts (active_pods): what it held is free for the
                # pending resizes (KEP-1287 "Retry of deferred resizes"), as if it were removed.
                self._ended.add(uid)
                await self._retries.retry(TRIGGER_PODS_REMOVED)
            return
        if not self._alloc.is_allocated(pod):
            if not await self._admitter.admit(pod, observed):
                return
        if not await self._prepare_claims(pod, observed):
            return
        if self._resize_supported:
            before = self._alloc.conditions_of(uid)
            await self._handle_resize(pod)
            completed = self._track_in_progress(pod, observed)
            if before or self._alloc.conditions_of(uid):
                # As Kubernetes' SyncPod: while a resize is in the air the status (allocation,
                # resize conditions) is set before the runtime is asked to act, so it shows while
                # the runtime works. (Nothing is written when it is already what the API has.)
                await self._status.write(pod, observed)
            if completed is not None:
                self._resize_completed(pod, completed)
                await self._retries.retry(TRIGGER_POD_RESIZED)
        allocated_pod, _ = self._alloc.with_allocation(pod)
        changed = await self._runtime.reconcile(pod, allocated_pod, observed)
        completed = None
        if changed:
            # The runtime acted: read it again. A resize it just actuated is complete in this
            # same sync (KEP-1287's "marked for resync to read the latest resources", done at
            # once), so one write carries the new resources and the cleared PodResizeInProgress.
            observed = await self._ops.observe(uid)
            if self._resize_supported:
                completed = self._track_in_progress(pod, observed)
        await self._status.write(pod, observed)
        if completed is not None:
            self._resize_completed(pod, completed)
            await self._retries.retry(TRIGGER_POD_RESIZED)
        delay = self._runtime.requeue_delay(uid)
        if delay is not None:
            self._workers.enqueue_after(pod, delay)

    async def _resize_terminating(self, pod: core_pb2.Pod, observed: Observed) -> Observed:
        """A pod in its graceful shutdown may still be resized (KEP-1287 "Lifecycle Nuances": the
        resize "will be actuated best-effort"): before its containers are stopped, a resize it
        asks for is allocated through the pending queue as any other, actuated on the containers
        still running (one whose policy would restart it is not: it is stopping), and the status
        written, so ``allocatedResources`` and ``resources`` show it while the pod terminates. A
        resize asked for after the stop began is not actuated: the pod's worker is busy stopping
        it, as Kubernetes' is in SyncTerminatingPod. Returns the runtime as it is now."""
        uid = pod.metadata.uid
        before = self._alloc.conditions_of(uid)
        await self._handle_resize(pod)
        allocated_pod, _ = self._alloc.with_allocation(pod)
        if await self._runtime.actuate_running(pod, allocated_pod, observed):
            observed = await self._ops.observe(uid)
        completed = self._track_in_progress(pod, observed)
        if before or self._alloc.conditions_of(uid) or completed is not None:
            await self._status.write(pod, observed)
        if completed is not None:
            self._resize_completed(pod, completed)
            await self._retries.retry(TRIGGER_POD_RESIZED)
        return observed

    async def _prepare_claims(self, pod: core_pb2.Pod, observed: Observed) -> bool:
        """Prepare the pod's ResourceClaims (Kubernetes' PrepareDynamicResources in SyncPod). False
        when they are not ready: the containers wait with the reason (``FailedPrepareDynamicResources``)
        and the message, a Warning event of that reason says why (once per reason), and the pod comes
        back after a back-off (1 s doubling, at most the pod workers' back-off period, 10 s, or the
        sync frequency when shorter)."""
        uid = pod.metadata.uid
        try:
            await self._dra.prepare_resources(pod)
        except NotReady as exc:
            message = str(exc)
            previous, delay = self._claim_waits.get(uid, ("", 0.5))
            delay = min(delay * 2, self._max_claim_retry)
            self._claim_waits[uid] = (message, delay)
            if message != previous:
                log.info("dra_claims_not_ready", pod=f"{pod.metadata.namespace}/{pod.metadata.name}",
                         reason=message)
                self._event(pod, "Warning", FAILED_PREPARE, f"Failed to prepare dynamic resources: {message}")
            await self._status.write(pod, observed, blocked=(FAILED_PREPARE, message))
            self._workers.enqueue_after(pod, delay)
            return False
        self._claim_waits.pop(uid, None)
        return True

    async def _handle_resize(self, pod: core_pb2.Pod) -> None:
        """A resize request goes through the pending queue, as Kubernetes' allocation manager does.

        A new request (a generation not yet decided) is queued and every pending resize is retried
        in the KEP's order (trigger ``pod_updated``): an older, higher-priority resize waiting for
        room gets it first. A request already decided Deferred or Infeasible is not looked at again
        by the pod's own syncs, only by the retries (a pod leaving, a resize completing, a new
        request, the periodic retry) — so room is always handed out in order.
        """
        uid = pod.metadata.uid
        _, differs = self._alloc.with_allocation(pod)
        if not differs:
            self._alloc.handle_resize(pod, ())  # reverted or done: its pending conditions go
            return
        pending = self._alloc.condition(uid, cond.PENDING)
        self._alloc.push_pending(uid, self._pods_by_uid())
        if pending is not None and pending.observed_generation == pod.metadata.generation:
            return
        await self._retries.retry(TRIGGER_POD_UPDATED, syncing=uid)
        if not self._alloc.with_allocation(pod)[1]:
            await failpoints.hit(FP_RESIZE_AFTER_ALLOCATE)

    def _resize_completed(self, pod: core_pb2.Pod, generation: int) -> None:
        """The ResizeCompleted event, once the status that clears PodResizeInProgress is written:
        the event never says "completed" before the pod's status does."""
        self._event(pod, "Normal", "ResizeCompleted", f"Pod resize completed, generation: {generation}")

    def _track_in_progress(self, pod: core_pb2.Pod, observed: Observed) -> int | None:
        """PodResizeInProgress is on while a running container's allocation is not actuated.

        Kubernetes' IsPodResizeInProgress: only resizable containers that run count (others get
        their allocation when they start). After a restart the condition comes back from the
        API status with its lastTransitionTime; if it was lost (restart before the status was
        written) it is set again. Returns the generation of a resize that just completed (its
        event is the caller's, after the status write: ``_resize_completed``), else None.
        """
        uid = pod.metadata.uid
        allocations = self._alloc.allocation_of(uid) or {}
        resizing = False
        for c in resizable_containers(pod):
            v = observed.view.containers.get(c.name)
            alloc = allocations.get(c.name)
            if v is None or v.state != "running" or alloc is None:
                continue
            if changed_resources(alloc, self._alloc.actuated_of(uid, c.name) or Resources()):
                resizing = True
                break
        if not resizing and observed.sandbox_id is not None:  # a memory-backed volume not at its size (KEP-6030)
            resizing = bool(volume_resize.pending(self._alloc, uid))
        in_progress = self._alloc.condition(uid, cond.IN_PROGRESS)
        if resizing and in_progress is None:
            self._alloc.set_in_progress(uid, pod.metadata.generation)
        elif not resizing and in_progress is not None:
            self._alloc.clear_in_progress(uid)
            return in_progress.observed_generation
        return None
