"""The kubelet: one node's agent, level-triggered like Kubernetes' (pod workers over a workqueue).

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

Housekeeping removes runtime pods the API no longer has, retries pending resizes periodically
and after pods go, and resyncs every pod every ``sync_frequency``. On start the allocation is
read from its checkpoints, resize conditions are restored from the pods' API status, and pods
the runtime still runs are recognised by their labels — a kubelet restart never loses a pod.

Node-pressure eviction (``kubelet.eviction``) runs as its own task: it reports MemoryPressure
through the node agent, refuses BestEffort pods while it holds, and has the pod it picks killed
by that pod's worker (``kill_pod_abnormally``), which leaves the pod Failed with reason Evicted.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field

from kubelet import preemption
from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import (
    TRIGGER_PERIODIC,
    TRIGGER_POD_RESIZED,
    TRIGGER_POD_UPDATED,
    TRIGGER_PODS_ADDED,
    TRIGGER_PODS_REMOVED,
    Admission,
    AllocationManager,
    count_requested_resizes,
    resizable_containers,
)
from kubelet.eviction import signals as eviction_signals
from kubelet.eviction.evaluate import MEMORY_PRESSURE
from kubelet.eviction.manager import EvictionManager, PodKill
from kubelet.eviction.thresholds import EvictionConfig
from kubelet.node import Conditions, NodeAgent, NodeConfig, allocatable_units
from kubelet.pleg import GenericPLEG
from kubelet.resize import ContainerResize, actuate, changed_resources, needs_restart
from kubelet.runtime.errors import RuntimeCallError, RuntimeUnavailable
from kubelet.runtime_ops import Observed, RuntimeOps
from kubelet.status import compute_status, to_linux
from machinery import errors, failpoints, quantity, resources, timeutil
from machinery.api import core_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.informer import Informer, key_of
from machinery.kinds import NODE, POD
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise
from machinery.workqueue import RateLimitingQueue

log = get_logger()

# KEP-1287 "Kubelet Restart Analysis": one failpoint per restart point.
FP_BEFORE_ADMIT_CHECKPOINT = failpoints.declare(
    "kubelet/admit-before-checkpoint", "a new pod passed admission; its allocation is not checkpointed yet")
FP_AFTER_ADMIT_CHECKPOINT = failpoints.declare(
    "kubelet/admit-after-checkpoint", "a new pod's allocation is checkpointed; its containers are not created yet")
FP_BEFORE_CREATE_ACK = failpoints.declare(
    "kubelet/create-before-actuated", "a container was created; its resources are not recorded as actuated yet")
FP_RESIZE_BEFORE_ALLOCATE = failpoints.declare(
    "kubelet/resize-before-allocate", "a resize fits; the allocation checkpoint is not updated yet")
FP_RESIZE_AFTER_ALLOCATE = failpoints.declare(
    "kubelet/resize-after-allocate", "a resize is allocated and checkpointed; nothing sent to the runtime yet")
FP_RESIZE_AFTER_CRI = failpoints.declare(
    "kubelet/resize-after-cri", "UpdateContainerResources succeeded; the actuated checkpoint is not updated yet")
FP_RESIZE_AFTER_ACTUATED = failpoints.declare(
    "kubelet/resize-after-actuated", "the actuated checkpoint is updated; the status is not written yet")

TERMINAL_PHASES = ("Succeeded", "Failed")
MANAGED_CONDITIONS = frozenset({"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                *cond.RESIZE_CONDITION_TYPES})
RESIZE_VERSION = (1, 33)  # in-place resize on by default (KEP-1287 beta)
NODE_POLICY_VERSION = (1, 36)  # KEP-5836's node-level podPreemptionPolicy


def parse_version(text: str) -> tuple[int, int]:
    text = text.lstrip("v")
    major, _, rest = text.partition(".")
    minor = rest.split(".")[0] if rest else "0"
    return int(major), int(minor)


@dataclass
class KubeletConfig:
    node: NodeConfig
    checkpoint_dir: str
    emulated_version: str = "1.36"
    in_place_resize: bool = True  # the InPlacePodVerticalScaling gate
    resize_preemption: bool = False  # the SchedulerPreemptionForPodResize gate (KEP-5836, alpha)
    sync_frequency: float = 10.0
    resize_retry_initial: float = 30.0
    resize_retry_interval: float = 180.0
    restart_backoff: float = 10.0
    restart_backoff_max: float = 300.0
    workers: int = 8
    node_status_interval: float = 10.0
    node_lease_duration: int = 40
    pleg_relist_period: float = 1.0
    eviction: EvictionConfig = field(default_factory=EvictionConfig)
    system_memory_usage: int = 0  # bytes of simulated non-pod memory use (kubelet/eviction/signals.py)


@dataclass
class _Backoff:
    delay: float
    until: float


@dataclass
class _AbnormalKill:
    """A pod the eviction manager asked to end: its worker kills it once, then keeps it stopped."""

    kill: PodKill
    done: asyncio.Future


@dataclass
class _PodState:
    """Per pod bookkeeping that is not in the checkpoints."""

    backoff: dict[str, _Backoff] = field(default_factory=dict)
    # The pod as our last status write left it, and the resourceVersions of the chain of our own
    # writes that led to it (with the one the first was based on): while the informer shows one
    # of those, our last write is the newer object (as the status manager's cache of what it
    # wrote), so the next write does not conflict with our own.
    written: core_pb2.Pod | None = None
    written_chain: set[str] = field(default_factory=set)


class Kubelet:
    def __init__(self, cfg: KubeletConfig, client: Client, runtime):
        self.cfg = cfg
        self.name = cfg.node.name
        self.client = client
        self.ops = RuntimeOps(runtime)
        self.pleg = GenericPLEG(runtime)
        version = parse_version(cfg.emulated_version)
        cfg.node.kubelet_version = f"v{version[0]}.{version[1]}.0"
        self.resize_supported = cfg.in_place_resize and version >= RESIZE_VERSION
        self.node_policy_supported = cfg.resize_preemption and version >= NODE_POLICY_VERSION
        self.recorder = EventRecorder(client, "kubelet", self.name)
        self.alloc = AllocationManager(cfg.checkpoint_dir, self.name, allocatable_units(cfg.node), cfg.node.pods,
                                       record_event=self._event,
                                       before_allocate=lambda pod: failpoints.hit_sync(FP_RESIZE_BEFORE_ALLOCATE))
        self.node_conditions = Conditions()
        self.node_agent = NodeAgent(client, cfg.node, lambda: self.node_conditions,
                                    status_interval=cfg.node_status_interval, lease_duration=cfg.node_lease_duration,
                                    on_node=self._on_node)
        self.pods = Informer(client, POD, field_selector=f"spec.nodeName={self.name}")
        self.node_informer = Informer(client, NODE, field_selector=f"metadata.name={self.name}")
        self.queue: RateLimitingQueue[str] = RateLimitingQueue(f"kubelet-{self.name}")
        self._state: dict[str, _PodState] = {}
        self._abnormal_kills: dict[str, _AbnormalKill] = {}  # pods being evicted or preempted
        self.eviction = self._new_eviction_manager()
        self._tasks: list[asyncio.Task] = []
        self.ready = False

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.alloc.load()
        await self._wait_runtime()
        self.recorder.start()
        await self.node_agent.register()
        self.pods.add_handler(self._on_pod_add, self._on_pod_update, self._on_pod_delete)
        self.node_informer.add_handler(self._on_node, lambda old, new: self._on_node(new))
        await self.pods.start()
        await self.node_informer.start()
        await self.pods.wait_for_sync()
        await self.node_informer.wait_for_sync()
        for pod in self.pods.list():
            self.alloc.restore_conditions(pod.metadata.uid, pod.status.conditions)
        self._tasks += [supervise(f"{self.name}/pod-worker-{i}", functools.partial(self._worker, i))
                        for i in range(self.cfg.workers)]
        self._tasks += [supervise(f"{self.name}/node-agent", self.node_agent.run),
                        supervise(f"{self.name}/housekeeping", self._housekeeping),
                        supervise(f"{self.name}/pleg", self._pleg_loop),
                        supervise(f"{self.name}/resize-retries", self._resize_retries),
                        supervise(f"{self.name}/eviction-manager", self.eviction.run)]
        # "Pending resizes are handled after all existing Pods have been added" (KEP-1287): pods
        # re-admitted from the checkpoint whose spec differs are queued and retried once.
        by_uid = self._pods_by_uid()
        for pod in by_uid.values():
            if self.alloc.is_allocated(pod) and self.alloc.with_allocation(pod)[1]:
                self.alloc.push_pending(pod.metadata.uid, by_uid)
        await self._retry_pending(TRIGGER_PODS_ADDED)
        for pod in self.pods.list():
            self._enqueue(pod)
        self.ready = True
        log.info("kubelet_ready", node=self.name, pods=len(self.pods.list()), resize=self.resize_supported,
                 emulated_version=self.cfg.emulated_version)

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
        self.queue.shutdown()
        await cancel_and_wait(self._tasks)
        await self.pods.stop()
        await self.node_informer.stop()
        await self.recorder.stop()

    # ------------------------------------------------------------ events in

    def _event(self, pod, type_: str, reason: str, message: str) -> None:
        self.recorder.event(pod, type_, reason, message)

    def _enqueue(self, pod: core_pb2.Pod) -> None:
        self.queue.add(key_of(pod))

    def _on_pod_add(self, pod: core_pb2.Pod) -> None:
        self._enqueue(pod)

    def _on_pod_update(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        if self.resize_supported and old.spec.containers != new.spec.containers:
            count_requested_resizes(old, new)
        if _needs_sync(old, new):
            self._enqueue(new)

    def _on_pod_delete(self, pod: core_pb2.Pod) -> None:
        self.queue.add(f"cleanup:{pod.metadata.uid}")

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

    def _pods_by_uid(self) -> dict[str, core_pb2.Pod]:
        return {p.metadata.uid: p for p in self.pods.list()}

    def _active_pods(self) -> list[core_pb2.Pod]:
        """Admitted pods still holding resources (not finished)."""
        return [p for p in self.pods.list() if self.alloc.is_allocated(p) and not self._killed(p.metadata.uid)
                and p.status.phase not in TERMINAL_PHASES]

    def _killed(self, uid: str) -> bool:
        """Evicted or preempted, containers stopped: it holds nothing, even before the API says Failed."""
        entry = self._abnormal_kills.get(uid)
        return entry is not None and entry.done.done()

    # ------------------------------------------------------------ workers

    async def _worker(self, index: int) -> None:
        while True:
            key, shutdown = await self.queue.get()
            if shutdown:
                return
            try:
                if key.startswith("cleanup:"):
                    await self._cleanup(key.split(":", 1)[1])
                else:
                    await self.sync(key)
                self.queue.forget(key)
            except (errors.Unavailable, errors.Timeout, RuntimeUnavailable) as exc:
                log.info("pod_sync_retry", node=self.name, pod=key, error=str(exc))
                self.queue.add_rate_limited(key)
            except failpoints.FailpointError:
                self.queue.add_rate_limited(key)
            except Exception as exc:
                log.exception("pod_sync_failed", node=self.name, pod=key, error=str(exc))
                self.queue.add_rate_limited(key)
            finally:
                self.queue.done(key)

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
                await self._write_status(pod, observed)
            if completed:
                await self._retry_pending(TRIGGER_POD_RESIZED)
        allocated_pod, _ = self.alloc.with_allocation(pod)
        changed = await self._reconcile(pod, allocated_pod, observed)
        if changed:
            observed = await self.ops.observe(uid)
        await self._write_status(pod, observed)
        self._requeue_for_backoff(pod)

    # ------------------------------------------------------------ admission and resize

    async def _admit(self, pod: core_pb2.Pod, observed: Observed) -> bool:
        running = any(v.state == "running" for v in observed.view.containers.values())
        if running:
            # Our checkpoint was lost but the runtime runs the pod: it was admitted before.
            self._recover_allocation(pod, observed)
            return True
        if not await self._admit_under_pressure(pod):
            return False
        # The allocation manager's add_pod, step by step: decide, then checkpoint — with the
        # restart failpoints around the checkpoint and critical-pod preemption in between.
        others = [p for p in self._active_pods() if p.metadata.uid != pod.metadata.uid]
        decision = self.alloc.can_admit_pod(pod, others)
        verdict = decision.verdict
        if not verdict.ok and preemption.is_critical(pod):
            verdict = await self._admit_by_preemption(decision.pod, others)
        if not verdict.ok:
            log.info("pod_rejected", node=self.name, pod=key_of(pod), reason=verdict.reason)
            self._event(pod, "Warning", verdict.reason, verdict.message)
            await self._write_failed(pod, verdict.reason, verdict.message)
            return False
        await failpoints.hit(FP_BEFORE_ADMIT_CHECKPOINT)
        self.alloc.set_allocated(decision.pod)
        await failpoints.hit(FP_AFTER_ADMIT_CHECKPOINT)
        return True

    def _recover_allocation(self, pod: core_pb2.Pod, observed: Observed) -> None:
        """Rebuild allocated/actuated from what the API and the runtime say (lost checkpoint dir)."""
        statuses = {cs.name: cs
                    for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses)}
        alloc: dict[str, Resources] = {}
        for c in resizable_containers(pod):
            cs = statuses.get(c.name)
            requests = dict(cs.allocated_resources) if cs is not None and cs.allocated_resources else dict(
                c.resources.requests)
            limits = dict(cs.resources.limits) if cs is not None and cs.HasField("resources") else dict(
                c.resources.limits)
            alloc[c.name] = Resources(requests, limits)
            view = observed.view.containers.get(c.name)
            if view is not None and view.state == "running" and to_linux(alloc[c.name]) == view.applied:
                self.alloc.set_actuated(pod.metadata.uid, c.name, alloc[c.name])
        self.alloc.record_allocation(pod.metadata.uid, alloc)
        log.warning("allocation_recovered", node=self.name, pod=key_of(pod))

    def _track_in_progress(self, pod: core_pb2.Pod, observed: Observed) -> bool:
        """PodResizeInProgress is on while a running container's allocation is not actuated.

        Kubernetes' IsPodResizeInProgress: only resizable containers that run count (others get
        their allocation when they start). After a restart the condition comes back from the
        API status with its lastTransitionTime; if it was lost (restart before the status was
        written) it is set again. Returns True when a resize just completed.
        """
        uid = pod.metadata.uid
        allocations = self.alloc.allocation_of(uid) or {}
        resizing = False
        for c in resizable_containers(pod):
            v = observed.view.containers.get(c.name)
            alloc = allocations.get(c.name)
            if v is None or v.state != "running" or alloc is None:
                continue
            if changed_resources(alloc, self.alloc.actuated_of(uid, c.name) or Resources()):
                resizing = True
                break
        in_progress = self.alloc.condition(uid, cond.IN_PROGRESS)
        if resizing and in_progress is None:
            self.alloc.set_in_progress(uid, pod.metadata.generation)
        elif not resizing and in_progress is not None:
            self.alloc.clear_in_progress(uid)
            self._event(pod, "Normal", "ResizeCompleted",
                        f"Pod resize completed, generation: {in_progress.observed_generation}")
            return True
        return False

    async def _admit_by_preemption(self, pod: core_pb2.Pod, others: list[core_pb2.Pod]) -> Admission:
        """A critical pod that does not fit is admitted by evicting pods it may preempt."""
        try:
            await self._preempt_for(pod, others)
        except preemption.NoVictims as exc:
            return Admission(False, "UnexpectedAdmissionError", "Unexpected error while attempting to recover from "
                             f"admission failure: preemption: error finding a set of pods to preempt: {exc}")
        return self.alloc.fits(pod, [o for o in others if not self._killed(o.metadata.uid)])

    async def _preempt_for(self, pod: core_pb2.Pod, others: list[core_pb2.Pod]) -> None:
        """Evict the pods ``preemption.pods_to_preempt`` picks so that ``pod`` fits (blocking, as Kubernetes)."""
        missing = self.alloc.missing(pod, others)
        victims = preemption.pods_to_preempt(pod, others, missing, self.alloc.held)
        log.info("preempting_for_critical_pod", node=self.name, pod=key_of(pod), missing=missing,
                 victims=[key_of(v) for v in victims])
        signal = next(iter(missing), "")
        for victim in victims:
            await self._kill_preempted(victim)
            preemption.PREEMPTIONS.labels(preemption_signal=signal).inc()

    async def _kill_preempted(self, victim: core_pb2.Pod) -> None:
        """Kill a victim through its own worker (as an eviction), with its grace period; wait for it."""
        self._event(victim, "Warning", preemption.PREEMPTING_EVENT, preemption.PREEMPTED_MESSAGE)
        grace = int(victim.spec.termination_grace_period_seconds or 0)
        kill = PodKill(grace, preemption.PREEMPTED_REASON, preemption.PREEMPTED_MESSAGE,
                       condition_message=preemption.DISRUPTION_MESSAGE)
        try:
            async with asyncio.timeout(grace + 30):
                await self.kill_pod_abnormally(victim, kill)
        except TimeoutError:
            log.warning("preemption_kill_slow", node=self.name, pod=key_of(victim), grace=grace)
        log.info("pod_preempted", node=self.name, pod=key_of(victim))

    async def _handle_resize(self, pod: core_pb2.Pod) -> None:
        """A resize request goes through the pending queue, as Kubernetes' allocation manager does.

        A new request (a generation not yet decided) is queued and every pending resize is retried
        in the KEP's order (trigger ``pod_updated``): an older, higher-priority resize waiting for
        room gets it first. A request already decided Deferred or Infeasible is not looked at again
        by the pod's own syncs, only by the retries (a pod leaving, a resize completing, a new
        request, the periodic retry) — so room is always handed out in order.
        """
        uid = pod.metadata.uid
        _, differs = self.alloc.with_allocation(pod)
        if not differs:
            self.alloc.handle_resize(pod, ())  # reverted or done: its pending conditions go
            return
        pending = self.alloc.condition(uid, cond.PENDING)
        self.alloc.push_pending(uid, self._pods_by_uid())
        if pending is not None and pending.observed_generation == pod.metadata.generation:
            return
        await self._retry_pending(TRIGGER_POD_UPDATED)
        if not self.alloc.with_allocation(pod)[1]:
            await failpoints.hit(FP_RESIZE_AFTER_ALLOCATE)

    async def _preempt_for_critical_resizes(self, pods_by_uid: dict[str, core_pb2.Pod]) -> None:
        """KEP-1287: a critical pod's resize that does not fit evicts non-critical pods — not on a
        node whose podPreemptionPolicy disables resize preemption (KEP-5836)."""
        if self.alloc.resize_preemption_disabled_by:
            return
        for uid in self.alloc.pending_uids():
            pod = pods_by_uid.get(uid)
            if pod is None or not preemption.is_critical(pod) or not self.alloc.with_allocation(pod)[1]:
                continue
            active = self._active_pods()
            if self.alloc.resize_verdict(pod, active).reason != cond.DEFERRED:
                continue
            try:
                await self._preempt_for(pod, [p for p in active if p.metadata.uid != uid])
            except preemption.NoVictims as exc:
                log.info("resize_preemption_impossible", node=self.name, pod=key_of(pod), error=str(exc))

    # ------------------------------------------------------------ runtime reconcile

    async def _reconcile(self, pod: core_pb2.Pod, allocated: core_pb2.Pod, observed: Observed) -> bool:
        uid = pod.metadata.uid
        changed = False
        sandbox = observed.sandbox_id
        if sandbox is None or not observed.sandbox_ready:
            if sandbox is not None:
                await self.ops.remove_sandbox(sandbox)
            sandbox = await self.ops.run_sandbox(pod, observed.sandbox_attempt + 1)
            observed = await self.ops.observe(uid)
            changed = True
        view = observed.view
        allocations = self.alloc.allocation_of(uid) or {}
        # Init containers, in order; sidecars keep running.
        for c in allocated.spec.init_containers:
            sidecar = resources.is_restartable_init_container(c)
            v = view.containers.get(c.name)
            if sidecar:
                if await self._ensure_running(pod, sandbox, c, observed, allocations.get(c.name)):
                    changed = True
                continue
            if v is not None and v.state == "exited" and v.exit_code == 0:
                continue
            if v is None or v.state == "exited":
                if v is not None and not self._may_restart(pod, c.name, v):
                    return changed
                cid = await self._start(pod, sandbox, c, observed, allocations.get(c.name))
                await self.ops.finish_init_container(cid)
                changed = True
                continue
            return changed  # running: wait for it
        for c in allocated.spec.containers:
            if await self._ensure_running(pod, sandbox, c, observed, allocations.get(c.name)):
                changed = True
        if self.resize_supported and await self._actuate(pod, allocated, observed, sandbox, allocations):
            changed = True
        return changed

    def _may_restart(self, pod: core_pb2.Pod, name: str, v, sidecar: bool = False) -> bool:
        policy = "Always" if sidecar else (pod.spec.restart_policy or "Always")
        if policy == "Never" or (policy == "OnFailure" and v.exit_code == 0):
            return False
        b = self._state.setdefault(pod.metadata.uid, _PodState()).backoff.get(name)
        return b is None or time.monotonic() >= b.until

    async def _ensure_running(self, pod, sandbox: str, c, observed: Observed, allocated: Resources | None) -> bool:
        v = observed.view.containers.get(c.name)
        if v is not None and v.state in ("running", "created"):
            return False
        if v is not None and v.state == "exited":
            if not self._may_restart(pod, c.name, v, sidecar=resources.is_restartable_init_container(c)):
                return False
            self._bump_backoff(pod.metadata.uid, c.name)
        await self._start(pod, sandbox, c, observed, allocated)
        return True

    def _bump_backoff(self, uid: str, name: str) -> None:
        st = self._state.setdefault(uid, _PodState())
        prev = st.backoff.get(name)
        delay = self.cfg.restart_backoff if prev is None else min(prev.delay * 2, self.cfg.restart_backoff_max)
        st.backoff[name] = _Backoff(delay, time.monotonic() + delay)

    async def _start(self, pod, sandbox: str, c, observed: Observed, allocated: Resources | None) -> str:
        instances = observed.ids.get(c.name, [])
        attempt = instances[-1][0] + 1 if instances else 0
        for _, old_id, state in instances[:-1]:  # older instances go; the newest stays as lastState
            if state != "running":
                await self.ops.remove_container(old_id)
        resources_ = allocated or Resources.of(c.resources)
        cid = await self.ops.start_container(pod, sandbox, c, attempt, resources_)
        await failpoints.hit(FP_BEFORE_CREATE_ACK)
        self.alloc.set_actuated(pod.metadata.uid, c.name, resources_)
        log.info("container_started", node=self.name, pod=key_of(pod), container=c.name, attempt=attempt)
        return cid

    async def _actuate(self, pod, allocated_pod, observed: Observed, sandbox: str,
                       allocations: dict[str, Resources]) -> bool:
        uid = pod.metadata.uid
        plan = []
        for c in resizable_containers(allocated_pod):
            v = observed.view.containers.get(c.name)
            alloc = allocations.get(c.name)
            if v is None or v.state != "running" or alloc is None:
                continue
            act = self.alloc.actuated_of(uid, c.name) or Resources()
            changed_r = changed_resources(alloc, act)
            if changed_r:
                plan.append(ContainerResize(c.name, v.id, alloc, act, needs_restart(c, changed_r)))
        if not plan:
            # Allocated == actuated: nothing to do. What the runtime really applied may differ
            # (rounding); status shows it, and it is not acted upon (KEP-1287 "Actuating Resizes").
            # PodResizeInProgress goes on the next sync (``_track_in_progress``), as Kubernetes'
            # goes on the sync the runtime's pod event triggers.
            return False
        in_progress = self.alloc.condition(uid, cond.IN_PROGRESS)
        outcome = await actuate(plan, self.ops.for_sandbox(sandbox), pod=key_of(pod))
        for name, r in outcome.actuated.items():
            await failpoints.hit(FP_RESIZE_AFTER_CRI)
            self.alloc.set_actuated(uid, name, r)
        if outcome.actuated:
            await failpoints.hit(FP_RESIZE_AFTER_ACTUATED)
        for name in outcome.restart:
            v = observed.view.containers[name]
            await self.ops.stop_container(v.id, int(pod.spec.termination_grace_period_seconds or 0))
            c = next(x for x in resizable_containers(allocated_pod) if x.name == name)
            await self._start(pod, sandbox, c, await self.ops.observe(uid), allocations.get(name))
        gen = in_progress.observed_generation if in_progress is not None else pod.metadata.generation
        if outcome.errors:
            if self.alloc.set_in_progress(uid, gen, cond.ERROR, outcome.error_message):
                self._event(pod, "Warning", "ResizeError", outcome.error_message)
        elif in_progress is not None and in_progress.reason == cond.ERROR:
            self.alloc.set_in_progress(uid, gen)
        if outcome.actuated:
            self._enqueue(pod)  # "marked for resync to read the latest resources" (KEP-1287)
        return bool(outcome.actuated or outcome.restart)

    def _requeue_for_backoff(self, pod: core_pb2.Pod) -> None:
        st = self._state.get(pod.metadata.uid)
        if st is None:
            return
        now = time.monotonic()
        waits = [b.until - now for b in st.backoff.values() if b.until > now]
        if waits:
            self.queue.add_after(key_of(pod), min(waits) + 0.01)

    # ------------------------------------------------------------ termination

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
        await self._write_status(pod, observed, terminated=True)
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
        if removed:
            await self._retry_pending(TRIGGER_PODS_REMOVED)

    # ------------------------------------------------------------ status

    async def _write_failed(self, pod: core_pb2.Pod, reason: str, message: str) -> None:
        def build(current: core_pb2.Pod) -> core_pb2.PodStatus:
            st = core_pb2.PodStatus()
            st.CopyFrom(current.status)
            st.phase, st.reason, st.message = "Failed", reason, message
            return st
        await self._update_status(pod, build)

    async def _write_status(self, pod: core_pb2.Pod, observed: Observed, terminated: bool = False) -> None:
        uid = pod.metadata.uid
        allocation = self.alloc.allocation_of(uid)
        computed = compute_status(pod, observed.view, allocation, self.alloc.conditions_of(uid),
                                  report_resources=self.resize_supported, host_ip=self.cfg.node.address)
        if terminated:
            # A deleted pod ends in a terminal phase (Kubernetes 1.27+): Failed unless all succeeded.
            views = [observed.view.containers.get(c.name) for c in pod.spec.containers]
            ok = all(v is None or (v.state == "exited" and v.exit_code == 0) for v in views)
            computed.phase = "Succeeded" if ok else "Failed"
        if pod.status.reason and pod.status.phase == "Failed":
            return

        def build(current: core_pb2.Pod) -> core_pb2.PodStatus:
            st = core_pb2.PodStatus()
            st.CopyFrom(computed)
            kept = [c for c in current.status.conditions if c.type not in MANAGED_CONDITIONS]
            present = {c.type for c in kept}
            # Ours, plus what the kubelet fills in when nobody has (PodScheduled of a bound pod).
            mine = [c for c in computed.conditions if c.type in MANAGED_CONDITIONS or c.type not in present]
            del st.conditions[:]
            st.conditions.extend(kept + mine)
            st.nominated_node_name = current.status.nominated_node_name
            st.qos_class = current.status.qos_class
            return st

        await self._update_status(pod, build)

    async def _update_status(self, pod: core_pb2.Pod, build) -> None:
        current = pod
        st = self._state.get(pod.metadata.uid)
        if st is not None and st.written is not None and pod.metadata.resource_version in st.written_chain:
            current = st.written  # the informer has not brought our last write back yet
        for _ in range(5):
            desired = build(current)
            if _same_status(current.status, desired):
                return
            if current.status.phase in TERMINAL_PHASES and desired.phase not in TERMINAL_PHASES:
                # As Kubernetes' status manager: a pod that ended (Failed by preemption or
                # eviction, or Succeeded) never goes back to a running phase.
                return
            new = core_pb2.Pod()
            new.CopyFrom(current)
            new.status.CopyFrom(desired)
            try:
                written = await self.client.pods.update_status(new)
                self._remember_write(current, written)
                return
            except errors.Conflict:
                current = await self.client.pods.get(pod.metadata.name, pod.metadata.namespace)
                if current.metadata.uid != pod.metadata.uid:
                    return
            except errors.NotFound:
                return

    def _remember_write(self, based_on: core_pb2.Pod, written: core_pb2.Pod) -> None:
        known = self.pods.get(written.metadata.name, written.metadata.namespace)
        if known is None or known.metadata.uid != written.metadata.uid:
            return  # gone already: nothing to remember it for
        st = self._state.setdefault(written.metadata.uid, _PodState())
        if based_on.metadata.resource_version not in st.written_chain:
            st.written_chain = {based_on.metadata.resource_version}
        st.written_chain.add(written.metadata.resource_version)
        st.written = written

    # ------------------------------------------------------------ background loops

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
                    self.queue.add(key_of(by_uid[uid]) if uid in by_uid else f"cleanup:{uid}")
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
                        self.queue.add(f"cleanup:{uid}")
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
                for pod in self.pods.list():
                    self._enqueue(pod)

    # ------------------------------------------------------------ node-pressure eviction (kubelet/eviction)

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

    async def _admit_under_pressure(self, pod: core_pb2.Pod) -> bool:
        """The eviction admit handler: BestEffort pods are refused while MemoryPressure holds."""
        verdict = self.eviction.admit(pod)
        if verdict.admit:
            return True
        log.info("pod_rejected", node=self.name, pod=key_of(pod), reason=verdict.reason, message=verdict.message)
        self._event(pod, "Warning", verdict.reason, verdict.message)
        await self._write_failed(pod, verdict.reason, verdict.message)
        return False

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
        await self._write_killed_status(pod, observed, entry.kill)
        entry.done.set_result(None)
        log.info("pod_killed", node=self.name, pod=key_of(pod), reason=entry.kill.reason,
                 grace=entry.kill.grace_period)
        return True

    async def _write_killed_status(self, pod: core_pb2.Pod, observed: Observed, kill: PodKill) -> None:
        """Failed with the kill's reason and message, plus its condition (DisruptionTarget)."""
        uid = pod.metadata.uid
        computed = compute_status(pod, observed.view, self.alloc.allocation_of(uid), self.alloc.conditions_of(uid),
                                  report_resources=self.resize_supported, host_ip=self.cfg.node.address)
        computed.phase, computed.reason, computed.message = "Failed", kill.reason, kill.message
        now = timeutil.rfc3339()

        def build(current: core_pb2.Pod) -> core_pb2.PodStatus:
            st = core_pb2.PodStatus()
            st.CopyFrom(computed)
            kept = [c for c in current.status.conditions
                    if c.type not in MANAGED_CONDITIONS and c.type != kill.condition_type]
            present = {c.type for c in kept}
            mine = [c for c in computed.conditions if c.type != kill.condition_type
                    and (c.type in MANAGED_CONDITIONS or c.type not in present)]
            del st.conditions[:]
            st.conditions.extend(kept + mine)
            st.conditions.add(type=kill.condition_type, status="True", reason=kill.condition_reason,
                              message=kill.condition_message or kill.message, last_transition_time=now)
            st.nominated_node_name = current.status.nominated_node_name
            st.qos_class = current.status.qos_class
            return st

        await self._update_status(pod, build)


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


def _same_status(a: core_pb2.PodStatus, b: core_pb2.PodStatus) -> bool:
    """Equal but for probe times (which change on every write)."""
    x, y = core_pb2.PodStatus(), core_pb2.PodStatus()
    x.CopyFrom(a)
    y.CopyFrom(b)
    for st in (x, y):
        for c in st.conditions:
            c.last_probe_time = ""
    return x.SerializeToString(deterministic=True) == y.SerializeToString(deterministic=True)
