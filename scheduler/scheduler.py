"""The scheduler: informers, cache, queue, one framework per profile, and the scheduling loop.

It knows the cluster only through its informers (pods not finished, nodes,
PodDisruptionBudgets and, with DynamicResourceAllocation, ResourceClaims, ResourceSlices and
DeviceClasses: ``scheduler.dra_manager``). ``start`` lists and watches; ``run`` (once leading)
pops pods one at a time and runs a scheduling cycle for each (``schedule_one``); binding cycles
run as their own tasks. A background loop expires assumed pods whose binding never showed up.
"""

from __future__ import annotations

import asyncio
import time

from machinery.api import core_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.informer import Informer
from machinery.kinds import NODE, POD, POD_DISRUPTION_BUDGET
from machinery.logging import get_logger
from machinery.process import STOP_TIMEOUT, cancel_and_wait, supervise, yield_to_others
from scheduler import metrics
from scheduler.algorithm import Algorithm
from scheduler.cache.cache import DEFAULT_ASSUMED_TTL, Cache
from scheduler.cache.snapshot import Snapshot
from scheduler.config import SchedulerConfig
from scheduler.dra_manager import DRAManager
from scheduler.eventhandlers import POD_FIELD_SELECTOR, EventHandlers
from scheduler.framework.features import Features
from scheduler.framework.interfaces import PluginFactory, Services
from scheduler.framework.pod_info import QueuedPodInfo
from scheduler.framework.runtime import Framework, FrameworkError
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import CycleState
from scheduler.queue.scheduling_queue import DEFAULT_MAX_IN_UNSCHEDULABLE, SchedulingQueue
from scheduler.schedule_one import binding_cycle, schedule_one
from scheduler.status_writer import StatusWriter

log = get_logger()

ASSUMED_CLEANUP_PERIOD = 1.0
# Seconds a stopping scheduler gives its binding cycles in flight, inside the process's stop
# budget (SIGTERM to exit, machinery.process.STOP_TIMEOUT), keeping the rest for releasing the
# Lease after them and closing.
BINDING_DRAIN_TIMEOUT = STOP_TIMEOUT - 1.5


class Scheduler:
    def __init__(self, client: Client, cfg: SchedulerConfig, registry: dict[str, PluginFactory], *,
                 identity: str = "kplane-scheduler", assumed_ttl: float = DEFAULT_ASSUMED_TTL,
                 max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE, feature_gates=None,
                 tie_break_seed: str = ""):
        self.client = client
        self.cfg = cfg
        self.identity = identity
        self.recorder: EventRecorder | None = EventRecorder(client, "default-scheduler", identity)
        self.cache = Cache(ttl=assumed_ttl)
        self.snapshot = Snapshot()
        self.percentage_of_nodes_to_score = cfg.percentage_of_nodes_to_score
        self.tie_breaks = TieBreaks(tie_break_seed)  # unseeded unless --tie-break-seed (framework/tiebreaks.py)
        self.pods = Informer(client, POD, field_selector=POD_FIELD_SELECTOR)
        self.nodes = Informer(client, NODE)
        self.pdbs = Informer(client, POD_DISRUPTION_BUDGET)
        features = Features.from_gates(feature_gates)  # what the gates mean to plugins, through their handle
        # DRA's informers, before any handler of the queue's is added (its tracker runs first).
        self.dra: DRAManager | None = (DRAManager(client, self.nodes) if features.enable_dynamic_resource_allocation
                                       else None)
        self.frameworks: dict[str, Framework] = {}
        async_api = feature_gates is None or feature_gates.enabled("SchedulerAsyncAPICalls")
        self.status_writer: StatusWriter | None = StatusWriter() if async_api else None
        # KEP-5836: Deferred resizes of bound pods are queued too (eventhandlers, schedule_one).
        self.resize_preemption = features.enable_scheduler_preemption_for_pod_resize
        for profile in cfg.profiles:
            services = Services(client=client, recorder=self.recorder, pods=self._all_pods,
                                get_pod=self.get_pod, get_node=self.nodes.get, pdbs=lambda: self.pdbs.list_all(),
                                activate=self._activate,
                                features=features, dra=self.dra, pod_indexes=self.pods, snapshot=self.snapshot,
                                status_writer=self.status_writer, tie_breaks=self.tie_breaks)
            self.frameworks[profile.scheduler_name] = Framework(
                profile.scheduler_name, profile.plugins, registry, services, profile.percentage_of_nodes_to_score)
        sorts = {type(fw.queue_sort) for fw in self.frameworks.values()}
        if len(sorts) != 1:
            raise FrameworkError("all profiles must use the same queueSort plugin")
        first = next(iter(self.frameworks.values()))
        self.queue = SchedulingQueue(
            first.less, events={name: fw.events_to_register() for name, fw in self.frameworks.items()},
            pre_enqueue={name: fw.run_pre_enqueue_plugins for name, fw in self.frameworks.items()},
            initial_backoff=cfg.pod_initial_backoff_seconds, max_backoff=cfg.pod_max_backoff_seconds,
            max_in_unschedulable=max_in_unschedulable, get_pod=self.get_pod,
            # KEP-6132: off, the PreQueueingHints plugins register are never called.
            pre_queueing_hints=feature_gates is None or feature_gates.enabled("SchedulerPreQueueingHints"))
        for fw in self.frameworks.values():
            fw.set_pod_nominator(self.queue.nominator)  # the queue's, made after the profiles
        self.queue_clock = time.monotonic
        self.algorithm = Algorithm(self.cache, self.snapshot, self.queue.nominator, self.percentage_of_nodes_to_score,
                                   self.tie_breaks)
        self.handlers = EventHandlers(self)
        self._bindings: set[asyncio.Task] = set()
        self.drained = True  # False once a stop cut a binding short (see _finish_bindings)
        self._tasks: list[asyncio.Task] = []
        self.synced = False

    # ------------------------------------------------------------ the handle's views

    def _all_pods(self):
        return self.pods.list_all()

    def get_pod(self, namespace: str, name: str) -> core_pb2.Pod | None:
        return self.pods.get(name, namespace)

    def _informers(self) -> list[Informer]:
        return [self.nodes, self.pods, self.pdbs, *(self.dra.informers() if self.dra is not None else [])]

    def _activate(self, pods) -> None:
        self.queue.activate(pods)

    # ------------------------------------------------------------ life

    async def start(self) -> None:
        """List and watch; the cache and queue fill from the informers."""
        h = self.handlers
        self.nodes.add_handler(h.on_node_add, h.on_node_update, h.on_node_delete)
        self.pods.add_handler(h.on_pod_add, h.on_pod_update, h.on_pod_delete)
        if self.dra is not None:
            self.dra.claims.add_handler(h.on_claim_add, h.on_claim_update, h.on_claim_delete)
            self.dra.slices.add_handler(h.on_slice_add, h.on_slice_update)
            self.dra.classes.add_handler(h.on_device_class_add, h.on_device_class_update)
        if self.recorder is not None:
            self.recorder.start()
        for inf in self._informers():
            await inf.start()
        for inf in self._informers():
            await inf.wait_for_sync()
        self.synced = True
        log.info("scheduler_synced", nodes=self.cache.node_count(), pods=self.cache.pod_count(),
                 pending=self.queue.counts())

    async def run(self) -> None:
        """Schedule until cancelled (called once this scheduler leads)."""
        self.queue.run()
        self._tasks.append(supervise("cleanup-assumed", self._cleanup_assumed))
        log.info("scheduler_running", identity=self.identity, profiles=list(self.frameworks))
        try:
            while True:
                p = await self.queue.pop()
                if p is None:
                    # Shut by a stop (stop_scheduling), which cancels this task a few hops later:
                    # returning now would drain the bindings below only to have that cancel cut
                    # the drain short. Wait for it; the drain then runs as on any other way out.
                    await asyncio.Event().wait()
                    continue
                try:
                    await schedule_one(self, p)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("schedule_one_crashed", pod=p.key)
                    self.queue.done(p.pod.metadata.uid)
                # A cycle is CPU work that never waits: without this the loop would run cycle after
                # cycle while activeQ has pods, and informer events, binding cycles and evictions
                # (kube-scheduler's other goroutines) would wait for the queue to drain — the cache
                # would lag seconds behind the cluster.
                await yield_to_others()
        finally:
            # The Lease guards the binding cycles too: they end before this does, so the Lease is
            # not released while a binding the next leader cannot know of is still to land.
            await self._finish_bindings(BINDING_DRAIN_TIMEOUT)

    def start_binding(self, fw: Framework, state: CycleState, p: QueuedPodInfo, assumed: core_pb2.Pod, host: str,
                      start: float) -> None:
        metrics.GOROUTINES.inc()
        task = asyncio.create_task(binding_cycle(self, fw, state, p, assumed, host, start),
                                   name=f"bind-{assumed.metadata.name}")
        self._bindings.add(task)
        task.add_done_callback(self._bindings.discard)

    async def _cleanup_assumed(self) -> None:
        while True:
            await asyncio.sleep(ASSUMED_CLEANUP_PERIOD)
            self.cache.cleanup_assumed_pods()

    async def _finish_bindings(self, timeout: float) -> None:
        """Let the binding cycles and evictions in flight finish (each may be mid-request), all
        within ``timeout`` seconds; then cancel what is left. A binding cut short may still land
        (its request may be at the apiserver already), so ``drained`` turns False: the Lease is
        then left to expire rather than released (``may_release``). Cancelled meanwhile (the
        process's last sweep: its time is up), the bindings are cancelled at once, the same way."""
        pending = {t for t in self._bindings if not t.done()}
        try:
            if pending:
                _, pending = await asyncio.wait(pending, timeout=timeout)
        finally:
            pending = {t for t in pending if not t.done()}
            if pending:
                self.drained = False
                log.warning("bindings_abandoned", pods=sorted(t.get_name().removeprefix("bind-") for t in pending),
                            timeout=timeout)
                for t in pending:
                    t.cancel()
        for fw in self.frameworks.values():
            await fw.close()
        if self.status_writer is not None:
            await self.status_writer.close()

    def stop_scheduling(self) -> None:
        """Start no new scheduling cycle from now on (the first thing a stop does, as kube-scheduler
        closes its queue when its context ends); cycles' bindings in flight go on."""
        if not self.queue.closed:
            log.info("scheduling_stopped", identity=self.identity)
        self.queue.shut()

    async def stop(self) -> None:
        self.stop_scheduling()
        await self.queue.close()
        for t in self._tasks:
            t.cancel()
        await self._finish_bindings(BINDING_DRAIN_TIMEOUT)
        await cancel_and_wait(self._tasks)
        for inf in self._informers():
            await inf.stop()
        if self.recorder is not None:
            await self.recorder.flush(2.0)
            await self.recorder.stop()
