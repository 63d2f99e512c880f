"""The kubelet's end of a pod: graceful termination, cleanup, and kills for eviction or preemption.

A deleted pod is stopped with its grace period, its final status written, its containers and
sandbox removed and the API object deleted; a pod the API no longer has is cleaned up from the
runtime. Node-pressure eviction (``kubelet.eviction``) and critical-pod preemption have a pod
killed by that pod's own worker (``kill_pod_abnormally``), which leaves it Failed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kubelet.allocation.manager import TRIGGER_PODS_REMOVED
from kubelet.eviction import signals as eviction_signals
from kubelet.eviction.evaluate import MEMORY_PRESSURE
from kubelet.eviction.manager import EvictionManager, PodKill
from kubelet.runtime_ops import Observed
from machinery import errors, quantity, timeutil
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger

log = get_logger()


@dataclass
class _AbnormalKill:
    """A pod the eviction manager asked to end: its worker kills it once, then keeps it stopped."""

    kill: PodKill
    done: asyncio.Future


class Termination:
    """Mixin of :class:`kubelet.kubelet.Kubelet`: termination, cleanup and abnormal kills."""

    async def _stop_all(self, observed: Observed, grace: int) -> None:
        running = [v for v in observed.view.containers.values() if v.state in ("running", "created")]
        await asyncio.gather(*(self.ops.stop_container(v.id, grace) for v in running))

    async def _terminate(self, pod: core_pb2.Pod, observed: Observed) -> None:
        deadline = timeutil.parse(pod.metadata.deletion_timestamp)
        if deadline is not None:  # the apiserver set it to the time of deletion plus the grace period,
            # truncated to the second (RFC 3339): the true deadline lies up to a second later, and the pod is
            # owed all of it (counting from the truncated one, a grace period of N s became N-1 s at times).
            grace = max(0, int((deadline - timeutil.now()).total_seconds() + 1 + 0.999))
            if pod.metadata.HasField("deletion_grace_period_seconds"):
                grace = min(grace, pod.metadata.deletion_grace_period_seconds)
        else:
            grace = pod.metadata.deletion_grace_period_seconds
        await self._stop_all(observed, grace)
        observed = await self.ops.observe(pod.metadata.uid)
        await self.status_manager.write(pod, observed, terminated=True)
        for containers in observed.ids.values():
            for _, cid, _ in containers:
                await self.ops.remove_container(cid)
        if observed.sandbox_id is not None:
            await self.ops.remove_sandbox(observed.sandbox_id)
        try:
            await self.client.pods.delete(pod.metadata.name, pod.metadata.namespace, grace_period_seconds=0,
                                          uid=pod.metadata.uid)
        except errors.NotFound:
            pass
        except errors.Conflict:
            pass  # a new pod with the same name: not ours to delete
        self.alloc.remove_pod(pod.metadata.uid)
        self._state.pop(pod.metadata.uid, None)
        self.status_manager.forget(pod.metadata.uid)
        log.info("pod_terminated", node=self.name, pod=key_of(pod), grace=grace)
        await self._retry_pending(TRIGGER_PODS_REMOVED)

    async def _cleanup(self, uid: str) -> None:
        """A pod the API no longer has: stop and remove whatever the runtime still runs for it."""
        if uid in self._pods_by_uid():
            return
        observed = await self.ops.observe(uid)
        await self._stop_all(observed, 0)
        for containers in observed.ids.values():
            for _, cid, _ in containers:
                await self.ops.remove_container(cid)
        uids = await self.ops.pod_uids()
        for sid in uids.get(uid, []):
            await self.ops.remove_sandbox(sid)
        removed = self.alloc.allocation_of(uid) is not None
        self.alloc.remove_pod(uid)
        self._state.pop(uid, None)
        self.status_manager.forget(uid)
        if removed:
            await self._retry_pending(TRIGGER_PODS_REMOVED)

    def _new_eviction_manager(self) -> EvictionManager:
        capacity = quantity.bytes_value(self.cfg.node.memory)

        async def stats() -> eviction_signals.Summary:
            return await eviction_signals.collect(self.ops.rt, capacity, self.cfg.system_memory_usage)

        return EvictionManager(self.cfg.eviction, stats=stats, active_pods=self._eviction_candidates, killer=self,
                               record_event=self._event, node_ref=lambda: self.node_agent.node,
                               on_conditions=self._on_pressure, node=self.name)

    def _eviction_candidates(self) -> list[core_pb2.Pod]:
        """Kubernetes' active pods: admitted, not finished, not being deleted, not already being killed."""
        return [p for p in self._active_pods()
                if not p.metadata.deletion_timestamp and p.metadata.uid not in self._abnormal_kills]

    def _on_pressure(self, conditions: list[str]) -> None:
        pressure = MEMORY_PRESSURE in conditions
        if pressure != self.node_conditions.memory_pressure:
            self.node_conditions.memory_pressure = pressure
            self.node_agent.poke()

    async def kill_pod_abnormally(self, pod: core_pb2.Pod, kill: PodKill) -> None:
        """Evict: the pod's own worker (never two at once) stops it and writes its status; wait for that."""
        known = self._pods_by_uid()
        for uid in [u for u in self._abnormal_kills if u not in known]:
            del self._abnormal_kills[uid]
        entry = _AbnormalKill(kill, asyncio.get_running_loop().create_future())
        self._abnormal_kills[pod.metadata.uid] = entry
        self._enqueue(pod)
        while not entry.done.done() and pod.metadata.uid in self._pods_by_uid():
            await asyncio.wait({entry.done}, timeout=1.0)

    async def pod_cleaned_up(self, pod: core_pb2.Pod) -> bool:
        observed = await self.ops.observe(pod.metadata.uid)
        return not any(v.state in ("running", "created") for v in observed.view.containers.values())

    async def _sync_abnormal_kill(self, pod: core_pb2.Pod, observed: Observed) -> bool:
        """Kill a pod the eviction manager chose; keep it stopped until the informer shows it Failed."""
        uid = pod.metadata.uid
        entry = self._abnormal_kills.get(uid)
        if entry is None:
            return False
        if entry.done.done():
            if pod.status.phase == "Failed":
                del self._abnormal_kills[uid]  # from here the usual path for finished pods keeps it stopped
                return False
            await self._stop_all(observed, 0)
            return True
        await self._stop_all(observed, entry.kill.grace_period)
        observed = await self.ops.observe(uid)
        await self.status_manager.write_killed(pod, observed, entry.kill)
        entry.done.set_result(None)
        log.info("pod_killed", node=self.name, pod=key_of(pod), reason=entry.kill.reason,
                 grace=entry.kill.grace_period)
        return True
