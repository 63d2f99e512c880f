"""The kubelet's background work: housekeeping, the PLEG loop, pending-resize retries, the Node's policy.

Housekeeping removes runtime pods the API no longer has and reports whether the runtime answers
(each pod's periodic resync is the pod workers', ``kubelet.pod_workers``); the PLEG loop queues
the pods whose containers changed (with the Evented PLEG the relist runs every 5 min, or at once
when the event stream failed, and the events queue the pods between); pending resizes (KEP-1287)
are retried periodically and on the triggers the KEP names (``ResizeRetries``); a change of the Node's
``podPreemptionPolicy`` (KEP-5836) re-decides the Deferred resizes it concerns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kubelet.allocation.manager import TRIGGER_PERIODIC, TRIGGER_PODS_REMOVED, AllocationManager
from kubelet.node import Conditions, NodeAgent
from kubelet.pleg import GenericPLEG
from kubelet.pod_workers import PodWorkers
from kubelet.runtime.errors import RuntimeCallError, RuntimeUnavailable
from kubelet.runtime_ops import RuntimeOps
from machinery.api import core_pb2
from machinery.logging import get_logger

log = get_logger()

PodsByUid = Callable[[], dict[str, core_pb2.Pod]]
ActivePods = Callable[[], list[core_pb2.Pod]]


class ResizeRetries:
    """Pending resizes retried in the KEP's order: on a trigger, and every ``interval`` seconds."""

    def __init__(self, *, alloc: AllocationManager, workers: PodWorkers, pods_by_uid: PodsByUid,
                 active_pods: ActivePods, preempt_for_critical: Callable[[dict[str, core_pb2.Pod]], Awaitable[None]],
                 initial: float, interval: float):
        self._alloc = alloc
        self._workers = workers
        self._pods_by_uid = pods_by_uid
        self._active_pods = active_pods
        self._preempt_for_critical = preempt_for_critical
        self._initial = initial
        self._interval = interval

    async def retry(self, trigger: str, syncing: str = "") -> None:
        """Retry every pending resize in the KEP's order; pods whose status changed are synced
        (but ``syncing``, the pod whose own sync asks: it goes on with what was decided)."""
        if not self._alloc.has_pending():
            return
        by_uid = self._pods_by_uid()
        await self._preempt_for_critical(by_uid)
        for uid in self._alloc.retry_pending(trigger, by_uid, self._active_pods):
            if uid in by_uid and uid != syncing:
                self._workers.enqueue(by_uid[uid])

    async def run(self) -> None:
        await asyncio.sleep(self._initial)
        while True:
            await self.retry(TRIGGER_PERIODIC)
            await asyncio.sleep(self._interval)


class Housekeeping:
    """The periodic and event-driven background loops of one kubelet."""

    def __init__(self, node: str, *, ops: RuntimeOps, pleg: GenericPLEG, alloc: AllocationManager,
                 workers: PodWorkers, retries: ResizeRetries, pods_by_uid: PodsByUid,
                 node_conditions: Conditions, node_agent: NodeAgent,
                 sync_frequency: float, pleg_relist_period: float, node_policy_supported: bool,
                 evented: bool = False):
        self._node = node
        self._ops = ops
        self._pleg = pleg
        self._alloc = alloc
        self._workers = workers
        self._retries = retries
        self._pods_by_uid = pods_by_uid
        self._node_conditions = node_conditions
        self._node_agent = node_agent
        self._sync_frequency = sync_frequency
        self._pleg_relist_period = pleg_relist_period
        self._node_policy_supported = node_policy_supported
        # With the Evented PLEG the relist waits on this, so that a failed stream relists at once.
        self._relist_wake: asyncio.Event | None = asyncio.Event() if evented else None

    def on_node(self, node: core_pb2.Node) -> None:
        """KEP-5836: the Node's podPreemptionPolicy changed: its Deferred resizes are decided again."""
        if not self._node_policy_supported:
            return
        owners = list(node.spec.pod_preemption_policy.disable_resize_preemption)
        if owners == self._alloc.resize_preemption_disabled_by:
            return
        by_uid = self._pods_by_uid()
        for uid in self._alloc.refresh_preemption_policy(owners, by_uid):
            if uid in by_uid:
                self._workers.enqueue(by_uid[uid])

    def pods_changed(self, changed: set[str]) -> None:
        """The PLEG found these pods changed in the runtime: sync those the API has, clean up the rest."""
        by_uid = self._pods_by_uid()
        for uid in changed:
            if uid in by_uid:
                self._workers.enqueue(by_uid[uid])
            else:
                self._workers.cleanup(uid)

    def relist_now(self) -> None:
        """Relist at once (the Evented PLEG's stream failed: what it missed is found there)."""
        if self._relist_wake is not None:
            self._relist_wake.set()

    def use_relist_period(self, period: float) -> None:
        """Relist every ``period`` seconds from now on (the Evented PLEG fell back), the first at once."""
        self._pleg_relist_period = period
        self.relist_now()

    async def pleg_loop(self) -> None:
        wake = self._relist_wake
        while True:
            if wake is not None:
                wake.clear()  # a wake-up asked for during the relist asks for the next one
            try:
                changed = await self._pleg.relist()
            except (RuntimeUnavailable, RuntimeCallError) as exc:
                log.debug("pleg_relist_failed", node=self._node, error=str(exc))
                changed = set()
            if changed:
                self.pods_changed(changed)
            if wake is None:
                await asyncio.sleep(self._pleg_relist_period)
                continue
            try:
                async with asyncio.timeout(self._pleg_relist_period):
                    await wake.wait()
            except TimeoutError:
                pass

    async def housekeeping_loop(self) -> None:
        while True:
            await asyncio.sleep(min(2.0, self._sync_frequency))
            try:
                known = self._pods_by_uid()
                in_runtime = await self._ops.pod_uids()
                for uid in in_runtime:
                    if uid not in known:
                        self._workers.cleanup(uid)
                # A pod with containers left holds its allocation until its cleanup stopped them.
                if self._alloc.remove_orphans(set(known) | set(in_runtime)):
                    await self._retries.retry(TRIGGER_PODS_REMOVED)
                runtime_ok = True
            except (RuntimeUnavailable, RuntimeCallError) as exc:
                log.warning("runtime_unreachable", node=self._node, error=str(exc))
                runtime_ok = False
            if runtime_ok != self._node_conditions.ready:
                self._node_conditions.ready = runtime_ok
                self._node_conditions.ready_message = ("kubelet is posting ready status" if runtime_ok
                                                       else "container runtime is down")
                self._node_agent.poke()
