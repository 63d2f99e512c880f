"""The runtime side of a pod's sync: sandbox, containers, restarts, resize actuation, stopping.

Kubernetes' kuberuntime manager (``SyncPod``, ``KillPod``) in the kubelet's terms. ``reconcile``
brings the runtime to the allocated pod: the sandbox, init containers in order (sidecars keep
running), containers (created with the allocated resources, which then count as actuated),
restarts with back-off, and the KEP-1287 actuation of allocated resizes (``kubelet.resize``).
``stop_all`` and ``remove_all`` end a pod's containers and sandbox. The per-pod restart back-off
is this part's own state; the allocation manager says what is allocated and records what the
runtime accepted.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from kubelet import restart_rules, volume_resize
from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import AllocationManager, RecordEvent, resizable_containers
from kubelet.resize import (
    ContainerResize,
    Outcome,
    actuate,
    changed_resources,
    needs_restart,
    pod_overhead,
    sandbox_record,
    set_sandbox_record,
)
from kubelet.restart_failpoints import FP_BEFORE_CREATE_ACK, FP_RESIZE_AFTER_ACTUATED, FP_RESIZE_AFTER_CRI
from kubelet.runtime_ops import Observed, RuntimeOps, init_exit_code
from kubelet.status import ContainerView
from machinery import failpoints, resources
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger

log = get_logger()


@dataclass
class _Backoff:
    delay: float
    until: float


@dataclass
class _PodState:
    """Per pod bookkeeping that is not in the checkpoints."""

    backoff: dict[str, _Backoff] = field(default_factory=dict)


class PodRuntime:
    """One node's pods in its runtime: what a sync asks of it, and the restart back-off."""

    def __init__(self, node: str, ops: RuntimeOps, alloc: AllocationManager, *, resize_supported: bool,
                 restart_backoff: float, restart_backoff_max: float, record_event: RecordEvent,
                 container_restart_rules: bool = True):
        self._node = node
        self._container_rules = container_restart_rules  # KEP-5307 (restart_rules.py)
        self._ops = ops
        self._alloc = alloc
        self._resize_supported = resize_supported
        self._restart_backoff = restart_backoff
        self._restart_backoff_max = restart_backoff_max
        self._record_event = record_event
        self._state: dict[str, _PodState] = {}

    def forget(self, uid: str) -> None:
        """The pod is gone: drop its back-off."""
        self._state.pop(uid, None)

    def requeue_delay(self, uid: str) -> float | None:
        """Seconds until a container of the pod may restart (its back-off ends), if one waits."""
        st = self._state.get(uid)
        if st is None:
            return None
        now = time.monotonic()
        waits = [b.until - now for b in st.backoff.values() if b.until > now]
        return min(waits) + 0.01 if waits else None

    # ------------------------------------------------------------ ending a pod

    async def stop_all(self, observed: Observed, grace: int) -> None:
        """Stop every running or created container of the pod, each with ``grace`` seconds."""
        running = [v for v in observed.view.containers.values() if v.state in ("running", "created")]
        await asyncio.gather(*(self._ops.stop_container(v.id, grace) for v in running))

    async def remove_all(self, observed: Observed) -> None:
        """Remove every container instance of the pod, then its newest sandbox."""
        for containers in observed.ids.values():
            for _, cid, _ in containers:
                await self._ops.remove_container(cid)
        if observed.sandbox_id is not None:
            await self._ops.remove_sandbox(observed.sandbox_id)

    # ------------------------------------------------------------ reconcile

    async def reconcile(self, pod: core_pb2.Pod, allocated: core_pb2.Pod, observed: Observed) -> bool:
        """Bring the runtime to the allocated pod; True if the runtime was asked to change anything."""
        uid = pod.metadata.uid
        changed = False
        sandbox = observed.sandbox_id
        if sandbox is None or not observed.sandbox_ready:
            if sandbox is not None:
                await self._ops.remove_sandbox(sandbox)
            record = sandbox_record((self._alloc.allocation_of(uid) or {}).values(), pod_overhead(pod))
            sandbox = await self._ops.run_sandbox(pod, observed.sandbox_attempt + 1, record, pod_overhead(pod))
            for volume, size in self._alloc.volume_allocation_of(uid).items():
                self._alloc.set_actuated_volume(uid, volume, size)  # its tmpfs mounted at that size (KEP-6030)
            observed = await self._ops.observe(uid)
            changed = True
        view = observed.view
        allocations = self._alloc.allocation_of(uid) or {}
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
                if v is not None:
                    if not self._may_restart(pod, c, v):
                        return changed
                    self._bump_backoff(uid, c.name)  # a failed init container is retried with back-off
                instances = observed.ids.get(c.name, [])
                attempt = instances[-1][0] + 1 if instances else 0  # as _start numbers it
                cid = await self._start(pod, sandbox, c, observed, allocations.get(c.name))
                code = init_exit_code(pod, c.name, attempt)
                await self._ops.finish_init_container(cid, code)
                changed = True
                if code != 0:
                    return changed  # the next sync decides on a restart (restart_rules.py)
                continue
            return changed  # running: wait for it
        for c in allocated.spec.containers:
            if await self._ensure_running(pod, sandbox, c, observed, allocations.get(c.name)):
                changed = True
        if self._resize_supported and await self._actuate(pod, allocated, observed, sandbox, allocations):
            changed = True
        return changed

    async def actuate_running(self, pod: core_pb2.Pod, allocated: core_pb2.Pod, observed: Observed) -> bool:
        """Actuate an allocated resize on the containers running now, restarting none (a pod in
        its graceful shutdown); True if the runtime was asked to change anything."""
        if not self._resize_supported or observed.sandbox_id is None or not observed.sandbox_ready:
            return False
        allocations = self._alloc.allocation_of(pod.metadata.uid) or {}
        return await self._actuate(pod, allocated, observed, observed.sandbox_id, allocations, restart=False)

    def _may_restart(self, pod: core_pb2.Pod, c: core_pb2.Container, v: ContainerView) -> bool:
        """Whether the exited container is started again now: its restart policy or rules say so
        (restart_rules.py) and its back-off has ended."""
        if not restart_rules.will_restart(pod, c, v.exit_code, self._container_rules):
            return False
        name = c.name
        b = self._state.setdefault(pod.metadata.uid, _PodState()).backoff.get(name)
        return b is None or time.monotonic() >= b.until

    async def _ensure_running(self, pod: core_pb2.Pod, sandbox: str, c: core_pb2.Container, observed: Observed,
                              allocated: Resources | None) -> bool:
        v = observed.view.containers.get(c.name)
        if v is not None and v.state in ("running", "created"):
            return False
        if v is not None and v.state == "exited":
            if not self._may_restart(pod, c, v):
                return False
            self._bump_backoff(pod.metadata.uid, c.name)
        await self._start(pod, sandbox, c, observed, allocated)
        return True

    def _bump_backoff(self, uid: str, name: str) -> None:
        st = self._state.setdefault(uid, _PodState())
        prev = st.backoff.get(name)
        delay = self._restart_backoff if prev is None else min(prev.delay * 2, self._restart_backoff_max)
        st.backoff[name] = _Backoff(delay, time.monotonic() + delay)

    async def _start(self, pod: core_pb2.Pod, sandbox: str, c: core_pb2.Container, observed: Observed,
                     allocated: Resources | None) -> str:
        instances = observed.ids.get(c.name, [])
        attempt = instances[-1][0] + 1 if instances else 0
        for _, old_id, state in instances[:-1]:  # older instances go; the newest stays as lastState
            if state != "running":
                await self._ops.remove_container(old_id)
        resources_ = allocated or Resources.of(c.resources)
        cid = await self._ops.start_container(pod, sandbox, c, attempt, resources_)
        await failpoints.hit(FP_BEFORE_CREATE_ACK)
        self._alloc.set_actuated(pod.metadata.uid, c.name, resources_)
        log.info("container_started", node=self._node, pod=key_of(pod), container=c.name, attempt=attempt)
        return cid

    async def _actuate(self, pod: core_pb2.Pod, allocated_pod: core_pb2.Pod, observed: Observed, sandbox: str,
                       allocations: dict[str, Resources], *, restart: bool = True) -> bool:
        """Apply each running container's allocated resources the runtime has not got yet; with
        ``restart`` False, a container whose resize policy asks for a restart is left as it is."""
        uid = pod.metadata.uid
        plan = []  # every running container: the sandbox's record is over all of them
        changing = False
        for c in resizable_containers(allocated_pod):
            v = observed.view.containers.get(c.name)
            alloc = allocations.get(c.name)
            if v is None or v.state != "running" or alloc is None:
                continue
            act = self._alloc.actuated_of(uid, c.name) or Resources()
            changed_r = changed_resources(alloc, act)
            if changed_r and not restart and needs_restart(c, changed_r):
                alloc, changed_r = act, set()  # left as it is: counted at what it has
            changing = changing or bool(changed_r)
            plan.append(ContainerResize(c.name, v.id, alloc, act, needs_restart(c, changed_r)))
        volumes = volume_resize.pending(self._alloc, uid)
        if not changing and not volumes:
            # Allocated == actuated: nothing to do. What the runtime really applied may differ
            # (rounding); status shows it, and it is not acted upon (KEP-1287 "Actuating Resizes").
            return False
        in_progress = self._alloc.condition(uid, cond.IN_PROGRESS)
        overhead = pod_overhead(pod)
        runtime = self._ops.for_sandbox(sandbox)
        # KEP-6030: volumes shrink before the cgroups change, and grow after (volume_resize.py).
        remounted, volume_errors = self._remount([v for v in volumes if v.shrinks], pod)
        if volume_errors:
            outcome = Outcome(errors=volume_errors)
        else:
            outcome = await actuate(plan, runtime, pod=key_of(pod), overhead=overhead) if changing else Outcome()
            if not outcome.errors:
                grown, volume_errors = self._remount([v for v in volumes if not v.shrinks], pod)
                remounted += grown
                outcome.errors.extend(volume_errors)
        for name, r in outcome.actuated.items():
            await failpoints.hit(FP_RESIZE_AFTER_CRI)
            self._alloc.set_actuated(uid, name, r)
        if outcome.actuated:
            await failpoints.hit(FP_RESIZE_AFTER_ACTUATED)
        for name in outcome.restart:
            v = observed.view.containers[name]
            await self._ops.stop_container(v.id, int(pod.spec.termination_grace_period_seconds or 0))
            c = next(x for x in resizable_containers(allocated_pod) if x.name == name)
            await self._start(pod, sandbox, c, await self._ops.observe(uid), allocations.get(name))
        if outcome.restart:
            # The restarted containers run with their new resources: the record follows them.
            now = [self._alloc.actuated_of(uid, p.name) or p.actuated for p in plan]
            await set_sandbox_record(runtime, sandbox_record(now, overhead), key_of(pod))
        gen = in_progress.observed_generation if in_progress is not None else pod.metadata.generation
        if outcome.errors:
            if self._alloc.set_in_progress(uid, gen, cond.ERROR, outcome.error_message):
                self._record_event(pod, "Warning", "ResizeError", outcome.error_message)
        elif in_progress is not None and in_progress.reason == cond.ERROR:
            self._alloc.set_in_progress(uid, gen)
        # The sync reads the runtime again and completes the resize there (``PodSync.sync_pod``).
        return bool(outcome.actuated or outcome.restart or remounted)

    def _remount(self, volumes: list[volume_resize.VolumeResize], pod: core_pb2.Pod) -> tuple[int, list[str]]:
        """Remount each volume at its allocated size, recording those that took it: how many did,
        and the errors of those that did not."""
        done, errors = 0, []
        for v in volumes:
            error = volume_resize.remount(pod, v, self._node)
            if error is None:
                self._alloc.set_actuated_volume(pod.metadata.uid, v.name, v.allocated)
                done += 1
            else:
                errors.append(error)
        return done, errors
