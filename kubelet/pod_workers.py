"""The kubelet's pod workers: typed work items on one workqueue, and the per-pod sync.

As Kubernetes' pod_workers.go: informer handlers only enqueue work — a :class:`SyncPod` for a
pod the API has, a :class:`Cleanup` for a pod it no longer has — and workers take one item at a
time (the workqueue never hands an item to two workers), retrying with back-off on failure.
``sync`` reconciles one pod from the current state: terminate, kill, admit, resize, reconcile
with the runtime, write the status.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubelet.allocation.manager import TRIGGER_POD_RESIZED, count_requested_resizes
from kubelet.runtime.errors import RuntimeUnavailable
from kubelet.status_manager import TERMINAL_PHASES
from machinery import errors, failpoints
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger

log = get_logger()


@dataclass(frozen=True)
class SyncPod:
    """Sync the pod with this ``namespace/name`` key from the current state."""

    key: str

    def __str__(self) -> str:
        return self.key


@dataclass(frozen=True)
class Cleanup:
    """Stop and remove whatever the runtime still runs for a pod the API no longer has."""

    uid: str

    def __str__(self) -> str:
        return f"cleanup:{self.uid}"


WorkItem = SyncPod | Cleanup


def sync_pod(pod: core_pb2.Pod) -> SyncPod:
    return SyncPod(key_of(pod))


class PodWorkers:
    """Mixin of :class:`kubelet.kubelet.Kubelet`: its handlers, workers and ``sync``."""

    def _enqueue(self, pod: core_pb2.Pod) -> None:
        self.queue.add(sync_pod(pod))

    def _on_pod_add(self, pod: core_pb2.Pod) -> None:
        self._enqueue(pod)

    def _on_pod_update(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        if self.resize_supported and old.spec.containers != new.spec.containers:
            count_requested_resizes(old, new)
        if _needs_sync(old, new):
            self._enqueue(new)

    def _on_pod_delete(self, pod: core_pb2.Pod) -> None:
        self.queue.add(Cleanup(pod.metadata.uid))

    async def _worker(self, index: int) -> None:
        while True:
            item, shutdown = await self.queue.get()
            if shutdown:
                return
            try:
                match item:
                    case Cleanup(uid=uid):
                        await self._cleanup(uid)
                    case SyncPod(key=key):
                        await self.sync(key)
                self.queue.forget(item)
            except (errors.Unavailable, errors.Timeout, RuntimeUnavailable) as exc:
                log.info("pod_sync_retry", node=self.name, pod=str(item), error=str(exc))
                self.queue.add_rate_limited(item)
            except failpoints.FailpointError:
                self.queue.add_rate_limited(item)
            except Exception as exc:
                log.exception("pod_sync_failed", node=self.name, pod=str(item), error=str(exc))
                self.queue.add_rate_limited(item)
            finally:
                self.queue.done(item)

    async def sync(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        pod = self.pods.get(name, namespace)
        if pod is None:
            return
        uid = pod.metadata.uid
        observed = await self.ops.observe(uid)
        if pod.metadata.deletion_timestamp:
            await self._terminate(pod, observed)
            return
        if await self._sync_abnormal_kill(pod, observed):
            return
        if pod.status.phase in TERMINAL_PHASES:
            await self._stop_all(observed, 0)
            return
        if not self.alloc.is_allocated(pod):
            if not await self._admit(pod, observed):
                return
        if self.resize_supported:
            before = self.alloc.conditions_of(uid)
            await self._handle_resize(pod)
            completed = self._track_in_progress(pod, observed)
            if before or self.alloc.conditions_of(uid):
                # As Kubernetes' SyncPod: while a resize is in the air the status (allocation,
                # resize conditions) is set before the runtime is asked to act, so it shows while
                # the runtime works. (Nothing is written when it is already what the API has.)
                await self.status_manager.write(pod, observed)
            if completed:
                await self._retry_pending(TRIGGER_POD_RESIZED)
        allocated_pod, _ = self.alloc.with_allocation(pod)
        changed = await self._reconcile(pod, allocated_pod, observed)
        completed = False
        if changed:
            # The runtime acted: read it again. A resize it just actuated is complete in this
            # same sync (KEP-1287's "marked for resync to read the latest resources", done at
            # once), so one write carries the new resources and the cleared PodResizeInProgress.
            observed = await self.ops.observe(uid)
            completed = self.resize_supported and self._track_in_progress(pod, observed)
        await self.status_manager.write(pod, observed)
        if completed:
            await self._retry_pending(TRIGGER_POD_RESIZED)
        self._requeue_for_backoff(pod)


def _needs_sync(old: core_pb2.Pod, new: core_pb2.Pod) -> bool:
    """An update the pod's worker must act on: its spec (a resize), its deletion, or its end.

    Status-only updates — mostly the kubelet's own writes coming back — are not (Kubernetes'
    pod config sends them as RECONCILE, not as a sync); what changes in the runtime reaches the
    workers through the PLEG instead.
    """
    if old.spec != new.spec or old.metadata.deletion_timestamp != new.metadata.deletion_timestamp:
        return True
    if old.metadata.deletion_grace_period_seconds != new.metadata.deletion_grace_period_seconds:
        return True
    return new.status.phase in TERMINAL_PHASES and old.status.phase not in TERMINAL_PHASES
