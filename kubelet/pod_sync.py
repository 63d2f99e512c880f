"""The kubelet's runtime side of a pod sync: resize requests, containers, actuation, restarts.

Reconciles the runtime with the allocated pod: sandbox, init containers in order (sidecars keep
running), containers (created with the allocated resources, which then count as actuated),
restarts with back-off, and the KEP-1287 actuation of allocated resizes (``kubelet.resize``);
a resize request goes through the allocation manager's pending queue first.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import TRIGGER_POD_UPDATED, resizable_containers
from kubelet.pod_workers import sync_pod
from kubelet.resize import ContainerResize, actuate, changed_resources, needs_restart
from kubelet.restart_failpoints import (
    FP_BEFORE_CREATE_ACK,
    FP_RESIZE_AFTER_ACTUATED,
    FP_RESIZE_AFTER_ALLOCATE,
    FP_RESIZE_AFTER_CRI,
)
from kubelet.runtime_ops import Observed
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


class PodSync:
    """Mixin of :class:`kubelet.kubelet.Kubelet`: resizes and reconciling a pod with the runtime."""

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
        return bool(outcome.actuated or outcome.restart)  # the sync reads the runtime again (``sync``)

    def _requeue_for_backoff(self, pod: core_pb2.Pod) -> None:
        st = self._state.get(pod.metadata.uid)
        if st is None:
            return
        now = time.monotonic()
        waits = [b.until - now for b in st.backoff.values() if b.until > now]
        if waits:
            self.queue.add_after(sync_pod(pod), min(waits) + 0.01)
