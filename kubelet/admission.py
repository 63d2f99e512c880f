"""The kubelet's pod admission, with critical-pod preemption (Kubernetes' pkg/kubelet/preemption).

A pod is admitted once: refused while MemoryPressure holds if BestEffort (the eviction admit
handler), then decided and checkpointed by the allocation manager's two steps, with the KEP-1287
restart failpoints around the checkpoint. A critical pod that does not fit, or a critical pod's
resize left Deferred, evicts the pods ``kubelet.preemption`` picks. A pod the runtime already
runs but whose checkpoint was lost gets its allocation rebuilt from the API and the runtime.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

from kubelet import preemption
from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import Admission, AllocationManager, RecordEvent, resizable_containers
from kubelet.eviction.admission import AdmitResult
from kubelet.eviction.manager import PodKill, PodKiller
from kubelet.restart_failpoints import FP_AFTER_ADMIT_CHECKPOINT, FP_BEFORE_ADMIT_CHECKPOINT
from kubelet.runtime_ops import Observed
from kubelet.status import to_linux
from kubelet.status_manager import StatusManager
from machinery import failpoints
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger

log = get_logger()


class Killer(PodKiller, Protocol):
    """Who kills the pods a critical pod preempts (the kubelet's terminator)."""

    def killed(self, uid: str) -> bool:
        """The pod was evicted or preempted and its containers stopped: it holds nothing."""
        ...


class PodAdmitter:
    """Admits each pod once (Kubernetes' admit handlers), evicting for critical pods that do not fit."""

    def __init__(self, node: str, *, alloc: AllocationManager, status: StatusManager, killer: Killer,
                 active_pods: Callable[[], list[core_pb2.Pod]],
                 admit_under_pressure: Callable[[core_pb2.Pod], AdmitResult], record_event: RecordEvent):
        self._node = node
        self._alloc = alloc
        self._status = status
        self._killer = killer
        self._active_pods = active_pods
        self._eviction_admit = admit_under_pressure
        self._event = record_event

    async def admit(self, pod: core_pb2.Pod, observed: Observed) -> bool:
        """Admit the pod, or write it Failed with the reason (True if admitted)."""
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
        decision = self._alloc.can_admit_pod(pod, others)
        verdict = decision.verdict
        if not verdict.ok and preemption.is_critical(pod):
            verdict = await self._admit_by_preemption(decision.pod, others)
        if not verdict.ok:
            log.info("pod_rejected", node=self._node, pod=key_of(pod), reason=verdict.reason)
            self._event(pod, "Warning", verdict.reason, verdict.message)
            await self._status.write_failed(pod, verdict.reason, verdict.message)
            return False
        await failpoints.hit(FP_BEFORE_ADMIT_CHECKPOINT)
        self._alloc.set_allocated(decision.pod)
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
                self._alloc.set_actuated(pod.metadata.uid, c.name, alloc[c.name])
        self._alloc.record_allocation(pod.metadata.uid, alloc)
        log.warning("allocation_recovered", node=self._node, pod=key_of(pod))

    async def _admit_by_preemption(self, pod: core_pb2.Pod, others: list[core_pb2.Pod]) -> Admission:
        """A critical pod that does not fit is admitted by evicting pods it may preempt."""
        try:
            await self._preempt_for(pod, others)
        except preemption.NoVictims as exc:
            return Admission(False, "UnexpectedAdmissionError", "Unexpected error while attempting to recover from "
                             f"admission failure: preemption: error finding a set of pods to preempt: {exc}")
        return self._alloc.fits(pod, [o for o in others if not self._killer.killed(o.metadata.uid)])

    async def _preempt_for(self, pod: core_pb2.Pod, others: list[core_pb2.Pod]) -> None:
        """Evict the pods ``preemption.pods_to_preempt`` picks so that ``pod`` fits (blocking, as Kubernetes)."""
        missing = self._alloc.missing(pod, others)
        victims = preemption.pods_to_preempt(pod, others, missing, self._alloc.held)
        log.info("preempting_for_critical_pod", node=self._node, pod=key_of(pod), missing=missing,
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
                await self._killer.kill_pod_abnormally(victim, kill)
        except TimeoutError:
            log.warning("preemption_kill_slow", node=self._node, pod=key_of(victim), grace=grace)
        log.info("pod_preempted", node=self._node, pod=key_of(victim))

    async def preempt_for_critical_resizes(self, pods_by_uid: dict[str, core_pb2.Pod]) -> None:
        """KEP-1287: a critical pod's resize that does not fit evicts non-critical pods — not on a
        node whose podPreemptionPolicy disables resize preemption (KEP-5836)."""
        if self._alloc.resize_preemption_disabled_by:
            return
        for uid in self._alloc.pending_uids():
            pod = pods_by_uid.get(uid)
            if pod is None or not preemption.is_critical(pod) or not self._alloc.with_allocation(pod)[1]:
                continue
            active = self._active_pods()
            if self._alloc.resize_verdict(pod, active).reason != cond.DEFERRED:
                continue
            try:
                await self._preempt_for(pod, [p for p in active if p.metadata.uid != uid])
            except preemption.NoVictims as exc:
                log.info("resize_preemption_impossible", node=self._node, pod=key_of(pod), error=str(exc))

    async def _admit_under_pressure(self, pod: core_pb2.Pod) -> bool:
        """The eviction admit handler: BestEffort pods are refused while MemoryPressure holds."""
        verdict = self._eviction_admit(pod)
        if verdict.admit:
            return True
        log.info("pod_rejected", node=self._node, pod=key_of(pod), reason=verdict.reason, message=verdict.message)
        self._event(pod, "Warning", verdict.reason, verdict.message)
        await self._status.write_failed(pod, verdict.reason, verdict.message)
        return False
