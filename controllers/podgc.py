"""The pod garbage collector (Kubernetes' pkg/controller/podgc).

Every ``--pod-gc-period`` (20 s, Kubernetes' gcCheckPeriod) it looks at every pod in its cache:

- terminated pods (Succeeded, Failed) above ``--terminated-pod-gc-threshold`` (12500; 0 turns it
  off) are deleted, evicted ones first, then the oldest (name breaks ties);
- pods bound to a node that does not exist: the node is put in quarantine for 40 s
  (``--pod-gc-quarantine``: it may just not have reached the informer yet), then asked for by
  name; if the API says it is gone, each of its pods gets a ``DisruptionTarget`` condition (reason
  ``DeletionByPodGC``, "PodGC: node no longer exists"), is marked Failed — no kubelet will ever
  say so — and is deleted at once;
- pods being deleted that were never scheduled are deleted at once.

A pod that is not Succeeded or Failed is first marked Failed, then deleted with grace 0 (what
Kubernetes' markFailedAndDeletePod does). Metrics as Kubernetes':
``pod_gc_collector_force_delete_pods_total{namespace,reason}`` and
``pod_gc_collector_force_delete_pod_errors_total{namespace,reason}``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from prometheus_client import Counter

from controllers.controller import ControllerContext, ObjectController
from machinery import errors, podconditions
from machinery.api import core_pb2
from machinery.kinds import NODE, POD
from machinery.logging import get_logger
from machinery.retry import retry_update

log = get_logger()

REASON_TERMINATED, REASON_ORPHANED, REASON_TERMINATING_UNSCHEDULED = "terminated", "orphaned", "terminating_unscheduled"
DISRUPTION_MESSAGE = "PodGC: node no longer exists"

DELETED = Counter("pod_gc_collector_force_delete_pods_total", "Number of pods that are being forcefully deleted "
                  "since the Pod GC Controller started.", ["namespace", "reason"])
DELETE_ERRORS = Counter("pod_gc_collector_force_delete_pod_errors_total", "Number of errors encountered when "
                        "forcefully deleting the pods since the Pod GC Controller started.", ["namespace", "reason"])


def _terminated(pod: core_pb2.Pod) -> bool:
    return pod.status.phase not in ("Pending", "Running", "Unknown", "")


def _evicted(pod: core_pb2.Pod) -> bool:
    return pod.status.phase == "Failed" and pod.status.reason == "Evicted"


def _gc_order(pod: core_pb2.Pod) -> tuple[bool, str, str]:
    """Kubernetes' byEvictionAndCreationTimestamp: evicted first, then oldest, then by name."""
    return (not _evicted(pod), pod.metadata.creation_timestamp, pod.metadata.name)


class PodGCController(ObjectController):
    name = "podgc"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client = ctx.client
        self._pods = ctx.informers.informer(POD)
        self._nodes = ctx.informers.informer(NODE)
        self._threshold = ctx.options.terminated_pod_gc_threshold
        self._period = ctx.options.pod_gc_period
        self._quarantine = ctx.options.pod_gc_quarantine
        self._quarantined: dict[str, float] = {}  # node name -> when it may be checked

    async def sync(self, key: str) -> None:  # podgc works in periodic passes, not per key
        return None

    def background(self) -> list[tuple[str, Any]]:
        return [("gc", self._gc_loop)]

    async def _gc_loop(self) -> None:
        while True:
            await self.gc()
            await asyncio.sleep(self._period)

    async def gc(self) -> None:
        """One pass over every pod, as Kubernetes' gc()."""
        pods = self._pods.list_all()
        if self._threshold > 0:
            await self._gc_terminated(pods)
        await self._gc_orphaned(pods)
        await self._gc_unscheduled_terminating(pods)

    async def _gc_terminated(self, pods: list[core_pb2.Pod]) -> None:
        terminated = [p for p in pods if _terminated(p)]
        count = len(terminated) - self._threshold
        if count <= 0:
            return
        log.info("podgc_collecting_terminated", pods=count, threshold=self._threshold)
        victims = sorted(terminated, key=_gc_order)[:count]
        await asyncio.gather(*(self._delete(p, REASON_TERMINATED) for p in victims))

    async def _gc_orphaned(self, pods: list[core_pb2.Pod]) -> None:
        existing = {n.metadata.name for n in self._nodes.list_all()}
        now = time.monotonic()
        for p in pods:
            node = p.spec.node_name
            if node and node not in existing:
                self._quarantined.setdefault(node, now + self._quarantine)
        gone = set()
        for node, until in list(self._quarantined.items()):
            if node in existing:
                del self._quarantined[node]
            elif until <= now:
                del self._quarantined[node]
                try:
                    await self._client.nodes.get(node)
                except errors.NotFound:
                    gone.add(node)
                except errors.ApiError as exc:
                    log.info("podgc_node_check_failed", node=node, error=str(exc))  # quarantined again next pass
        for p in pods:
            if p.spec.node_name in gone:
                log.info("podgc_deleting_orphaned", pod=f"{p.metadata.namespace}/{p.metadata.name}",
                         node=p.spec.node_name)
                await self._delete(p, REASON_ORPHANED, disruption=True)

    async def _gc_unscheduled_terminating(self, pods: list[core_pb2.Pod]) -> None:
        for p in pods:
            if p.metadata.deletion_timestamp and not p.spec.node_name:
                await self._delete(p, REASON_TERMINATING_UNSCHEDULED)

    async def _delete(self, pod: core_pb2.Pod, reason: str, disruption: bool = False) -> None:
        """Kubernetes' markFailedAndDeletePod: Failed first (with the condition), then deleted at once."""
        ns, name = pod.metadata.namespace, pod.metadata.name
        DELETED.labels(namespace=ns, reason=reason).inc()
        try:
            if pod.status.phase not in ("Succeeded", "Failed"):
                await self._mark_failed(pod, disruption)
            await self._client.pods.delete(name, ns, grace_period_seconds=0, uid=pod.metadata.uid)
            log.info("podgc_deleted", pod=f"{ns}/{name}", reason=reason)
        except errors.NotFound:
            pass
        except errors.ApiError as exc:
            DELETE_ERRORS.labels(namespace=ns, reason=reason).inc()
            log.warning("podgc_delete_failed", pod=f"{ns}/{name}", reason=reason, error=str(exc))

    async def _mark_failed(self, pod: core_pb2.Pod, disruption: bool) -> None:
        uid = pod.metadata.uid

        async def write(current: core_pb2.Pod) -> None:
            if current.metadata.uid != uid or current.status.phase in ("Succeeded", "Failed"):
                return  # replaced, or ended meanwhile
            fresh = core_pb2.Pod()
            fresh.CopyFrom(current)
            fresh.status.phase = "Failed"
            if disruption:
                podconditions.update_condition(fresh.status, podconditions.disruption_target(
                    podconditions.DELETION_BY_POD_GC, DISRUPTION_MESSAGE))
            await self._client.pods.update_status(fresh)

        try:
            await retry_update(pod, lambda: self._client.pods.get(pod.metadata.name, pod.metadata.namespace), write)
        except errors.Conflict as exc:  # deleted all the same, as before the conflicts
            log.info("podgc_mark_failed_conflicts", pod=f"{pod.metadata.namespace}/{pod.metadata.name}", error=str(exc))
