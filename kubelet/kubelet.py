"""The kubelet: one node's agent, level-triggered like Kubernetes' (pod workers over a workqueue).

The parts, as the Kubernetes kubelet splits them, each an object with the few collaborators it
needs: ``kubelet.pod_workers`` (typed work items, the queue, the workers), ``kubelet.pod_sync``
(the per-pod sync, the workers' PodSyncer), ``kubelet.pod_runtime`` (the runtime side: sandbox,
containers, restarts, resize actuation), ``kubelet.admission`` (admission, critical-pod
preemption), ``kubelet.termination`` (deletion, cleanup, abnormal kills), ``kubelet.housekeeping``
(background loops, pending-resize retries) and ``kubelet.status_manager`` (status writes), over
the allocation manager (``kubelet.allocation``). ``Kubelet`` builds and wires them, owns the
informers, and starts and stops it all (how a pod is synced: ``Kubelet``; on start:
``Kubelet.start``; node-pressure eviction: ``Kubelet._new_eviction_manager``).
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field

from google.protobuf.message import Message

from kubelet.admission import PodAdmitter
from kubelet.allocation.feasibility import NodeResourcePolicies
from kubelet.allocation.manager import TRIGGER_PODS_ADDED, AllocationManager
from kubelet.dra.driver import FakeDriver
from kubelet.dra.manager import DRAManager
from kubelet.eviction import signals as eviction_signals
from kubelet.eviction.evaluate import MEMORY_PRESSURE
from kubelet.eviction.manager import EvictionManager
from kubelet.eviction.thresholds import EvictionConfig
from kubelet.housekeeping import Housekeeping, ResizeRetries
from kubelet.node import Conditions, NodeAgent, NodeConfig, allocatable_units
from kubelet.pleg import EVENTED_RELIST_PERIOD, EventedPLEG, GenericPLEG
from kubelet.pod_runtime import PodRuntime
from kubelet.pod_sync import PodSync
from kubelet.pod_workers import WORKER_BACKOFF_PERIOD, PodWorkers, _needs_sync
from kubelet.restart_failpoints import (
    FP_AFTER_ADMIT_CHECKPOINT,
    FP_BEFORE_ADMIT_CHECKPOINT,
    FP_BEFORE_CREATE_ACK,
    FP_RESIZE_AFTER_ACTUATED,
    FP_RESIZE_AFTER_ALLOCATE,
    FP_RESIZE_AFTER_CRI,
    FP_RESIZE_BEFORE_ALLOCATE,
)
from kubelet.runtime.client import RuntimeApi
from kubelet.runtime.errors import RuntimeCallError, RuntimeUnavailable
from kubelet.runtime_ops import RuntimeOps
from kubelet.status_manager import MANAGED_CONDITIONS, TERMINAL_PHASES, StatusManager, _same_status
from kubelet.termination import PodTerminator
from machinery import errors, failpoints, quantity
from machinery.api import core_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.informer import Informer
from machinery.kinds import NODE, POD
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise
from machinery.version import BINARY, Version

__all__ = [  # re-exported: other modules import these from kubelet.kubelet
    "FP_AFTER_ADMIT_CHECKPOINT", "FP_BEFORE_ADMIT_CHECKPOINT", "FP_BEFORE_CREATE_ACK", "FP_RESIZE_AFTER_ACTUATED",
    "FP_RESIZE_AFTER_ALLOCATE", "FP_RESIZE_AFTER_CRI", "FP_RESIZE_BEFORE_ALLOCATE", "MANAGED_CONDITIONS",
    "TERMINAL_PHASES", "Kubelet", "KubeletConfig", "_needs_sync", "_same_status",
]

log = get_logger()


@dataclass
class KubeletConfig:
    node: NodeConfig
    checkpoint_dir: str
    release: Version = BINARY  # --emulated-version: nodeInfo.kubeletVersion; the gates below are at it
    in_place_resize: bool = True  # the InPlacePodVerticalScaling gate
    resize_preemption: bool = False  # the SchedulerPreemptionForPodResize gate (KEP-5836, alpha)
    memory_backed_volumes: bool = False  # InPlacePodVerticalScalingMemoryBackedVolumes (KEP-6030, alpha)
    container_restart_rules: bool = True  # ContainerRestartRules (KEP-5307, beta from 1.35)
    sync_frequency: float = 60.0
    resize_retry_initial: float = 30.0
    resize_retry_interval: float = 180.0
    restart_backoff: float = 10.0
    restart_backoff_max: float = 300.0
    workers: int = 8
    node_status_interval: float = 10.0
    node_lease_duration: int = 40
    pleg_relist_period: float = 1.0
    evented_pleg: bool = False  # the EventedPLEG gate (KEP-3386, alpha): the runtime's events, relist every 5 min
    eviction: EvictionConfig = field(default_factory=EvictionConfig)
    system_memory_usage: int = 0  # bytes of simulated non-pod memory use (kubelet/eviction/signals.py)
    dra_devices: int = 0  # GPUs the fake DRA driver publishes for this node (kubelet/dra); 0: no driver
    # --cpu-manager-policy, --memory-manager-policy, --memory-swap-behavior: resizes they make Infeasible.
    resource_policies: NodeResourcePolicies = field(default_factory=NodeResourcePolicies)


class Kubelet:
    """One node's kubelet: its parts, wired, and its lifecycle.

    Informers watch this node's pods (``spec.nodeName=N``) and its Node; handlers only enqueue pod
    keys. Workers sync one pod at a time (the workqueue never hands a key to two workers), always
    from the current state — the API's pod, the runtime's containers, the allocation checkpoints:

    1. a pod being deleted is stopped with its grace period, its final status written, and deleted;
    2. a pod not yet admitted is admitted or refused (OutOfcpu ... the pod fails with that reason);
    3. a changed spec is a resize: allocated, Deferred or Infeasible (``kubelet.allocation``);
    4. the runtime is reconciled: sandbox, init containers, containers (created with the allocated
       resources, which then count as actuated), restarts with back-off, and the KEP-1287 actuation
       of allocated resizes (``kubelet.resize``); RestartContainer restarts with the new resources;
    5. the status is written if it changed, keeping conditions other components own.

    Housekeeping removes runtime pods the API no longer has and retries pending resizes periodically
    and after pods go; each pod is resynced ``sync_frequency`` (jittered) after its last sync.
    """

    def __init__(self, cfg: KubeletConfig, client: Client, runtime: RuntimeApi):
        self.cfg = cfg
        self.name = name = cfg.node.name
        self.client = client
        cfg.node.kubelet_version = cfg.release.git_version
        self.resize_supported = cfg.in_place_resize
        self.node_policy_supported = cfg.resize_preemption
        self.ops = RuntimeOps(runtime)
        self.pleg = GenericPLEG(runtime)
        self.recorder = EventRecorder(client, "kubelet", name)
        self.alloc = AllocationManager(cfg.checkpoint_dir, name, allocatable_units(cfg.node), cfg.node.pods,
                                       record_event=self.event,
                                       before_allocate=lambda pod: failpoints.hit_sync(FP_RESIZE_BEFORE_ALLOCATE),
                                       policies=cfg.resource_policies,
                                       memory_backed_volumes=cfg.in_place_resize and cfg.memory_backed_volumes)
        self.node_conditions = Conditions()
        self.node_agent = NodeAgent(client, cfg.node, lambda: self.node_conditions,
                                    status_interval=cfg.node_status_interval, lease_duration=cfg.node_lease_duration,
                                    on_node=self._on_node)
        self.pods = Informer(client, POD, field_selector=f"spec.nodeName={name}")
        self.node_informer = Informer(client, NODE, field_selector=f"metadata.name={name}")
        self.status_manager = StatusManager(client, self.pods, self.alloc, report_resources=self.resize_supported,
                                            host_ip=cfg.node.address,
                                            container_restart_rules=cfg.container_restart_rules)
        self.workers = PodWorkers(name, count_resizes=self.resize_supported, resync_interval=cfg.sync_frequency)
        self.dra_driver = FakeDriver(name, cfg.dra_devices) if cfg.dra_devices > 0 else None
        self.dra = DRAManager(name, client, self.dra_driver, lambda: self.node_agent.node)
        self.runtime = PodRuntime(name, self.ops, self.alloc, resize_supported=self.resize_supported,
                                  restart_backoff=cfg.restart_backoff, restart_backoff_max=cfg.restart_backoff_max,
                                  record_event=self.event, container_restart_rules=cfg.container_restart_rules)
        self.terminator = PodTerminator(name, client=client, ops=self.ops, runtime=self.runtime, alloc=self.alloc,
                                        status=self.status_manager, workers=self.workers,
                                        pods_by_uid=self.pods_by_uid, dra=self.dra)
        self.eviction = self._new_eviction_manager()
        self.admitter = PodAdmitter(name, alloc=self.alloc, status=self.status_manager, killer=self.terminator,
                                    active_pods=self.active_pods,
                                    admit_under_pressure=self.eviction.admit, record_event=self.event)
        self.retries = ResizeRetries(alloc=self.alloc, workers=self.workers, pods_by_uid=self.pods_by_uid,
                                     active_pods=self.active_pods,
                                     preempt_for_critical=self.admitter.preempt_for_critical_resizes,
                                     initial=cfg.resize_retry_initial, interval=cfg.resize_retry_interval)
        self.housekeeping = Housekeeping(name, ops=self.ops, pleg=self.pleg, alloc=self.alloc, workers=self.workers,
                                         retries=self.retries, pods_by_uid=self.pods_by_uid,
                                         node_conditions=self.node_conditions, node_agent=self.node_agent,
                                         sync_frequency=cfg.sync_frequency,
                                         pleg_relist_period=(EVENTED_RELIST_PERIOD if cfg.evented_pleg
                                                             else cfg.pleg_relist_period),
                                         node_policy_supported=self.node_policy_supported, evented=cfg.evented_pleg)
        hk = self.housekeeping
        self.evented_pleg = EventedPLEG(
            runtime, on_changed=hk.pods_changed, relist=hk.relist_now,
            fall_back=lambda: hk.use_relist_period(cfg.pleg_relist_period), node=name) if cfg.evented_pleg else None
        self.pod_sync = PodSync(get_pod=self.pods.get, pods_by_uid=self.pods_by_uid, ops=self.ops, alloc=self.alloc,
                                runtime=self.runtime, admitter=self.admitter, terminator=self.terminator,
                                status=self.status_manager, retries=self.retries, workers=self.workers,
                                resize_supported=self.resize_supported, record_event=self.event, dra=self.dra,
                                max_claim_retry=min(cfg.sync_frequency, WORKER_BACKOFF_PERIOD))
        self._tasks: list[asyncio.Task[None]] = []
        self.ready = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """On start the allocation is read from its checkpoints, resize conditions are restored from
        the pods' API status, and pods the runtime still runs are recognised by their labels — a
        kubelet restart never loses a pod."""
        self.alloc.load()
        await self._wait_runtime()
        self.recorder.start()
        await self.node_agent.register()
        if self.dra_driver is not None:
            self._tasks.append(supervise(f"{self.name}/dra-publish", self._publish_devices))
        self.pods.add_handler(self.workers.on_pod_add, self.workers.on_pod_update, self.workers.on_pod_delete)
        self.node_informer.add_handler(self._on_node, lambda old, new: self._on_node(new))
        await self.pods.start()
        await self.node_informer.start()
        await self.pods.wait_for_sync()
        await self.node_informer.wait_for_sync()
        for pod in self.pods.list_all():
            self.alloc.restore_conditions(pod.metadata.uid, pod.status.conditions)
        self._tasks += [supervise(f"{self.name}/pod-worker-{i}", functools.partial(self.workers.run, self.pod_sync))
                        for i in range(self.cfg.workers)]
        self._tasks += [supervise(f"{self.name}/node-agent", self.node_agent.run),
                        supervise(f"{self.name}/housekeeping", self.housekeeping.housekeeping_loop),
                        supervise(f"{self.name}/pleg", self.housekeeping.pleg_loop),
                        *([supervise(f"{self.name}/evented-pleg", self.evented_pleg.run)]
                          if self.evented_pleg is not None else []),
                        supervise(f"{self.name}/resize-retries", self.retries.run),
                        supervise(f"{self.name}/eviction-manager", self.eviction.run)]
        # "Pending resizes are handled after all existing Pods have been added" (KEP-1287): pods
        # re-admitted from the checkpoint whose spec differs are queued and retried once.
        by_uid = self.pods_by_uid()
        for pod in by_uid.values():
            if self.alloc.is_allocated(pod) and self.alloc.with_allocation(pod)[1]:
                self.alloc.push_pending(pod.metadata.uid, by_uid)
        await self.retries.retry(TRIGGER_PODS_ADDED)
        for pod in self.pods.list_all():
            self.workers.enqueue(pod)
        self.ready = True
        log.info("kubelet_ready", node=self.name, pods=len(self.pods.list_all()), resize=self.resize_supported,
                 emulated_version=str(self.cfg.release))

    async def _publish_devices(self) -> None:
        """The fake DRA driver publishes the node's ResourceSlice, retrying until the API takes it."""
        assert self.dra_driver is not None
        delay = 0.2
        while True:
            try:
                await self.dra_driver.publish(self.client)
                return
            except errors.ApiError as exc:
                log.warning("dra_publish_failed", node=self.name, error=exc.message, retry_in=delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def _wait_runtime(self) -> None:
        delay = 0.2
        while True:
            try:
                await self.ops.rt.version()
                return
            except (RuntimeUnavailable, RuntimeCallError) as exc:
                log.warning("runtime_unreachable", node=self.name, error=str(exc), retry_in=delay)
                self.node_conditions.ready = False
                self.node_conditions.ready_message = "container runtime is down"
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def stop(self) -> None:
        self.workers.shutdown()
        await cancel_and_wait(self._tasks)
        await self.pods.stop()
        await self.node_informer.stop()
        await self.recorder.stop()

    # ------------------------------------------------------------ what the parts share

    def event(self, obj: Message, type_: str, reason: str, message: str) -> None:
        self.recorder.event(obj, type_, reason, message)

    def pods_by_uid(self) -> dict[str, core_pb2.Pod]:
        return {p.metadata.uid: p for p in self.pods.list_all()}

    def active_pods(self) -> list[core_pb2.Pod]:
        """Admitted pods still holding resources (not finished)."""
        return [p for p in self.pods.list_all() if self.alloc.is_allocated(p)
                and not self.terminator.killed(p.metadata.uid) and p.status.phase not in TERMINAL_PHASES]

    def _on_node(self, node: core_pb2.Node) -> None:
        self.housekeeping.on_node(node)

    # ------------------------------------------------------------ node-pressure eviction

    def _new_eviction_manager(self) -> EvictionManager:
        """Node-pressure eviction (``kubelet.eviction``) runs as its own task: it reports MemoryPressure
        through the node agent, refuses BestEffort pods while it holds, and has the pod it picks killed
        by that pod's worker (``kill_pod_abnormally``), which leaves the pod Failed with reason
        Evicted."""
        capacity = quantity.bytes_value(self.cfg.node.memory)

        async def stats() -> eviction_signals.Summary:
            return await eviction_signals.collect(self.ops.rt, capacity, self.cfg.system_memory_usage)

        return EvictionManager(self.cfg.eviction, stats=stats, active_pods=self._eviction_candidates,
                               killer=self.terminator, record_event=self.event, node_ref=lambda: self.node_agent.node,
                               on_conditions=self._on_pressure, node=self.name)

    def _eviction_candidates(self) -> list[core_pb2.Pod]:
        """Kubernetes' active pods: admitted, not finished, not being deleted, not already being killed."""
        return [p for p in self.active_pods()
                if not p.metadata.deletion_timestamp and not self.terminator.being_killed(p.metadata.uid)]

    def _on_pressure(self, conditions: list[str]) -> None:
        pressure = MEMORY_PRESSURE in conditions
        if pressure != self.node_conditions.memory_pressure:
            self.node_conditions.memory_pressure = pressure
            self.node_agent.poke()
