"""The kubelet's pod workers: typed work items on one workqueue, taken by workers one at a time.

As Kubernetes' pod_workers.go: informer handlers only enqueue work — a :class:`SyncPod` for a
pod the API has, a :class:`Cleanup` for a pod it no longer has — and workers take one item at a
time (the workqueue never hands an item to two workers), retrying with back-off on failure. A pod
synced without error comes back after the resync interval (``--sync-frequency``), jittered by up to
half of it, as pod_workers.go's completeWork requeues it: each pod on its own clock, never all of a
node's at once. What an item does is the :class:`PodSyncer`'s (``kubelet.pod_sync``), as
pod_workers.go calls its podSyncer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol

from kubelet.allocation.manager import count_requested_resizes
from kubelet.runtime.errors import RuntimeUnavailable
from kubelet.status_manager import TERMINAL_PHASES
from machinery import errors, failpoints
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.workqueue.rate_limiters import ItemExponentialFailureRateLimiter
from machinery.workqueue.rate_limiting import RateLimitingQueue

log = get_logger()

# pod_workers.go's workerResyncIntervalJitterFactor: a resync comes after 1 to 1.5 intervals.
RESYNC_JITTER = 0.5
# The kubelet's backOffPeriod, the pod workers' longest wait after a failed sync.
WORKER_BACKOFF_PERIOD = 10.0
RETRY_BASE = 0.005


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


class PodSyncer(Protocol):
    """What a work item does (Kubernetes' podSyncer)."""

    async def sync_pod(self, key: str) -> bool:
        """Reconcile the pod with this key from the current state; False when it is gone."""

    async def sync_cleanup(self, uid: str) -> None:
        """Remove what the runtime still holds of a pod the API no longer has."""


class PodWorkers:
    """The work queue of one node's pods, its informer handlers, and the worker loop."""

    def __init__(self, node: str, *, count_resizes: bool, resync_interval: float = 0.0):
        self._node = node
        self._count_resizes = count_resizes  # the kubelet_container_requested_resizes_total metric
        self._resync_interval = resync_interval  # 0: no periodic resync
        # A failed sync is retried after 5 ms doubling, at most the kubelet's backOffPeriod (Kubernetes
        # waits that period, jittered, at once; client-go's default limiter would go to 1,000 s).
        self.queue: RateLimitingQueue[WorkItem] = RateLimitingQueue(
            f"kubelet-{node}", ItemExponentialFailureRateLimiter(RETRY_BASE, WORKER_BACKOFF_PERIOD))

    # ------------------------------------------------------------ enqueueing

    def enqueue(self, pod: core_pb2.Pod) -> None:
        self.queue.add(sync_pod(pod))

    def enqueue_after(self, pod: core_pb2.Pod, delay: float) -> None:
        self.queue.add_after(sync_pod(pod), delay)

    def cleanup(self, uid: str) -> None:
        self.queue.add(Cleanup(uid))

    def on_pod_add(self, pod: core_pb2.Pod) -> None:
        self.enqueue(pod)

    def on_pod_update(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        if self._count_resizes and old.spec.containers != new.spec.containers:
            count_requested_resizes(old, new)
        if _needs_sync(old, new):
            self.enqueue(new)

    def on_pod_delete(self, pod: core_pb2.Pod) -> None:
        self.cleanup(pod.metadata.uid)

    # ------------------------------------------------------------ working

    def shutdown(self) -> None:
        self.queue.shutdown()

    async def run(self, syncer: PodSyncer) -> None:
        """One worker: take items until the queue shuts down."""
        while True:
            item, shutdown = await self.queue.get()
            if shutdown or item is None:
                return
            try:
                match item:
                    case Cleanup(uid=uid):
                        await syncer.sync_cleanup(uid)
                    case SyncPod(key=key):
                        if await syncer.sync_pod(key) and self._resync_interval > 0:
                            self.queue.add_after(item, self._resync_interval * (1 + RESYNC_JITTER * random.random()))
                self.queue.forget(item)
            except (errors.Unavailable, errors.Timeout, RuntimeUnavailable) as exc:
                log.info("pod_sync_retry", node=self._node, pod=str(item), error=str(exc))
                self.queue.add_rate_limited(item)
            except failpoints.FailpointError:
                self.queue.add_rate_limited(item)
            except Exception as exc:
                log.exception("pod_sync_failed", node=self._node, pod=str(item), error=str(exc))
                self.queue.add_rate_limited(item)
            finally:
                self.queue.done(item)


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
