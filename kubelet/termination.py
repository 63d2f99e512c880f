"""The kubelet's end of a pod: graceful termination, cleanup, and kills for eviction or preemption.

A deleted pod is stopped with its grace period, its final status written, its containers and
sandbox removed and the API object deleted; a pod the API no longer has is cleaned up from the
runtime (Kubernetes' SyncTerminatingPod and SyncTerminatedPod). Node-pressure eviction
(``kubelet.eviction``) and critical-pod preemption have a pod killed by that pod's own worker
(``kill_pod_abnormally``, the eviction manager's ``PodKiller``), which leaves it Failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from kubelet.allocation.manager import AllocationManager
from kubelet.dra.manager import DRAManager
from kubelet.eviction.manager import PodKill
from kubelet.pod_runtime import PodRuntime
from kubelet.pod_workers import PodWorkers
from kubelet.runtime_ops import Observed, RuntimeOps
from kubelet.status_manager import StatusManager
from machinery import errors, timeutil
from machinery.api import core_pb2
from machinery.client import Client
from machinery.informer import key_of
from machinery.logging import get_logger

log = get_logger()

PodsByUid = Callable[[], dict[str, core_pb2.Pod]]


@dataclass
class _AbnormalKill:
    """A pod the eviction manager asked to end: its worker kills it once, then keeps it stopped."""

    kill: PodKill
    done: asyncio.Future[None]


class PodTerminator:
    """Ends pods: on deletion, after the API forgot them, and when evicted or preempted."""

    def __init__(self, node: str, *, client: Client, ops: RuntimeOps, runtime: PodRuntime, alloc: AllocationManager,
                 status: StatusManager, workers: PodWorkers, pods_by_uid: PodsByUid, dra: DRAManager):
        self._node = node
        self._client = client
        self._ops = ops
        self._runtime = runtime
        self._alloc = alloc
        self._status = status
        self._workers = workers
        self._pods_by_uid = pods_by_uid
        self._dra = dra
        self._abnormal_kills: dict[str, _AbnormalKill] = {}  # pods being evicted or preempted

    def _forget(self, uid: str) -> None:
        """The pod's containers are gone for good: its allocation, claims and bookkeeping go."""
        self._dra.unprepare_resources(uid)
        self._alloc.remove_pod(uid)
        self._runtime.forget(uid)
        self._status.forget(uid)

    # ------------------------------------------------------------ deletion and cleanup

    async def terminate(self, pod: core_pb2.Pod, observed: Observed) -> None:
        """A pod with a deletionTimestamp: stop it within its grace period, write its end, delete it."""
        deadline = timeutil.parse(pod.metadata.deletion_timestamp)
        if deadline is not None:  # the apiserver set it to the time of deletion plus the grace period,
            # truncated to the second (RFC 3339): the true deadline lies up to a second later, and the pod is
            # owed all of it (counting from the truncated one, a grace period of N s became N-1 s at times).
            grace = max(0, int((deadline - timeutil.now()).total_seconds() + 1 + 0.999))
            if pod.metadata.HasField("deletion_grace_period_seconds"):
                grace = min(grace, pod.metadata.deletion_grace_period_seconds)
        else:
            grace = pod.metadata.deletion_grace_period_seconds
        await self._runtime.stop_all(observed, grace)
        observed = await self._ops.observe(pod.metadata.uid)
        await self._status.write(pod, observed, terminated=True)
        await self._runtime.remove_all(observed)
        try:
            await self._client.pods.delete(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0,
                                           uid=pod.metadata.uid)
        except errors.NotFound:
            pass
        except errors.Conflict:
            pass  # a new pod with the same name: not ours to delete
        self._forget(pod.metadata.uid)
        log.info("pod_terminated", node=self._node, pod=key_of(pod), grace=grace)

    async def cleanup(self, uid: str) -> bool:
        """A pod the API no longer has: stop and remove whatever the runtime still runs for it.
        True if it held an allocation (its resources are free now)."""
        if uid in self._pods_by_uid():
            return False
        observed = await self._ops.observe(uid)
        await self._runtime.stop_all(observed, 0)
        for containers in observed.ids.values():
            for _, cid, _ in containers:
                await self._ops.remove_container(cid)
        uids = await self._ops.pod_uids()
        for sid in uids.get(uid, []):
            await self._ops.remove_sandbox(sid)
        held = self._alloc.allocation_of(uid) is not None
        self._forget(uid)
        return held

    # ------------------------------------------------------------ abnormal kills (eviction.PodKiller)

    def killed(self, uid: str) -> bool:
        """Evicted or preempted, containers stopped: it holds nothing, even before the API says Failed."""
        entry = self._abnormal_kills.get(uid)
        return entry is not None and entry.done.done()

    def being_killed(self, uid: str) -> bool:
        return uid in self._abnormal_kills

    async def kill_pod_abnormally(self, pod: core_pb2.Pod, kill: PodKill) -> None:
        """Evict: the pod's own worker (never two at once) stops it and writes its status; wait for that."""
        known = self._pods_by_uid()
        for uid in [u for u in self._abnormal_kills if u not in known]:
            del self._abnormal_kills[uid]
        entry = _AbnormalKill(kill, asyncio.get_running_loop().create_future())
        self._abnormal_kills[pod.metadata.uid] = entry
        self._workers.enqueue(pod)
        while not entry.done.done() and pod.metadata.uid in self._pods_by_uid():
            await asyncio.wait({entry.done}, timeout=1.0)

    async def pod_cleaned_up(self, pod: core_pb2.Pod) -> bool:
        observed = await self._ops.observe(pod.metadata.uid)
        return not any(v.state in ("running", "created") for v in observed.view.containers.values())

    async def sync_abnormal_kill(self, pod: core_pb2.Pod, observed: Observed) -> bool:
        """Kill a pod the eviction manager chose; keep it stopped until the informer shows it Failed.
        True if the pod is being killed (the sync ends here)."""
        uid = pod.metadata.uid
        entry = self._abnormal_kills.get(uid)
        if entry is None:
            return False
        if entry.done.done():
            if pod.status.phase == "Failed":
                del self._abnormal_kills[uid]  # from here the usual path for finished pods keeps it stopped
                return False
            await self._runtime.stop_all(observed, 0)
            return True
        await self._runtime.stop_all(observed, entry.kill.grace_period)
        observed = await self._ops.observe(uid)
        await self._status.write_killed(pod, observed, entry.kill)
        entry.done.set_result(None)
        log.info("pod_killed", node=self._node, pod=key_of(pod), reason=entry.kill.reason,
                 grace=entry.kill.grace_period)
        return True
