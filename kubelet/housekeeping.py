"""The kubelet's background loops: housekeeping, the PLEG, pending-resize retries, the Node's policy.

Housekeeping removes runtime pods the API no longer has, reports whether the runtime answers,
and resyncs every pod every ``sync_frequency``; the PLEG loop queues the pods whose containers
changed; pending resizes (KEP-1287) are retried periodically and on the triggers the KEP names.
"""

from __future__ import annotations

import asyncio
import time

from kubelet.allocation.manager import TRIGGER_PERIODIC, TRIGGER_PODS_REMOVED
from kubelet.pod_workers import Cleanup, sync_pod
from kubelet.runtime.errors import RuntimeCallError, RuntimeUnavailable
from machinery.api import core_pb2
from machinery.logging import get_logger

log = get_logger()


class Housekeeping:
    """Mixin of :class:`kubelet.kubelet.Kubelet`: its periodic and event-driven background work."""

    def _on_node(self, node: core_pb2.Node) -> None:
        if not self.node_policy_supported:
            return
        owners = list(node.spec.pod_preemption_policy.disable_resize_preemption)
        if owners == self.alloc.resize_preemption_disabled_by:
            return
        changed = self.alloc.refresh_preemption_policy(owners, self._pods_by_uid())
        by_uid = self._pods_by_uid()
        for uid in changed:
            if uid in by_uid:
                self._enqueue(by_uid[uid])

    async def _retry_pending(self, trigger: str) -> None:
        """Retry every pending resize in the KEP's order; pods whose status changed are synced."""
        if not self.alloc.has_pending():
            return
        by_uid = self._pods_by_uid()
        await self._preempt_for_critical_resizes(by_uid)
        for uid in self.alloc.retry_pending(trigger, by_uid, self._active_pods):
            if uid in by_uid:
                self._enqueue(by_uid[uid])

    async def _resize_retries(self) -> None:
        await asyncio.sleep(self.cfg.resize_retry_initial)
        while True:
            await self._retry_pending(TRIGGER_PERIODIC)
            await asyncio.sleep(self.cfg.resize_retry_interval)

    async def _pleg_loop(self) -> None:
        while True:
            try:
                changed = await self.pleg.relist()
            except (RuntimeUnavailable, RuntimeCallError) as exc:
                log.debug("pleg_relist_failed", node=self.name, error=str(exc))
                changed = set()
            if changed:
                by_uid = self._pods_by_uid()
                for uid in changed:
                    self.queue.add(sync_pod(by_uid[uid]) if uid in by_uid else Cleanup(uid))
            await asyncio.sleep(self.cfg.pleg_relist_period)

    async def _housekeeping(self) -> None:
        last_resync = time.monotonic()
        while True:
            await asyncio.sleep(min(2.0, self.cfg.sync_frequency))
            try:
                known = self._pods_by_uid()
                in_runtime = await self.ops.pod_uids()
                for uid in in_runtime:
                    if uid not in known:
                        self.queue.add(Cleanup(uid))
                # A pod with containers left holds its allocation until its cleanup stopped them.
                if self.alloc.remove_orphans(set(known) | set(in_runtime)):
                    await self._retry_pending(TRIGGER_PODS_REMOVED)
                runtime_ok = True
            except (RuntimeUnavailable, RuntimeCallError) as exc:
                log.warning("runtime_unreachable", node=self.name, error=str(exc))
                runtime_ok = False
            if runtime_ok != self.node_conditions.ready:
                self.node_conditions.ready = runtime_ok
                self.node_conditions.ready_message = ("kubelet is posting ready status" if runtime_ok
                                                      else "container runtime is down")
                self.node_agent.poke()
            if time.monotonic() - last_resync >= self.cfg.sync_frequency:
                last_resync = time.monotonic()
                for pod in self.pods.list_all():
                    self._enqueue(pod)
