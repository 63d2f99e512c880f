"""The eviction manager: observe memory, report pressure, evict one pod at a time.

- ``EvictionManager.run``: the loop, a ``synchronize`` each monitoring interval or, after an
  eviction, once the pod's containers stopped;
- ``EvictionManager.synchronize``: one round, from the runtime's stats to at most one pod evicted;
- ``EvictionManager._evict``: one eviction, through the killer's ``kill_pod_abnormally``;
- ``EvictionManager.admit``: the admission check under pressure.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Awaitable, Callable, Protocol

from prometheus_client import Counter, Histogram

from kubelet.allocation.manager import RecordEvent
from kubelet.eviction import pods as podinfo
from kubelet.eviction.admission import AdmitResult, admit
from kubelet.eviction.evaluate import EvictionState, by_eviction_priority
from kubelet.eviction.message import REASON, bytes_text, eviction_message
from kubelet.eviction.ranking import rank_memory_pressure
from kubelet.eviction.signals import Observation, PodStats, Summary, observe
from kubelet.eviction.thresholds import ALLOCATABLE_MEMORY_AVAILABLE, MEMORY_AVAILABLE, EvictionConfig, Threshold
from kubelet.runtime.errors import RuntimeCallError, RuntimeUnavailable
from machinery import podconditions
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger

log = get_logger()

# ``kubelet_evictions{eviction_signal}`` counts evictions (``_evict``) and
# ``kubelet_eviction_stats_age_seconds{eviction_signal}`` observes how old the stats were (``synchronize``).
EVICTIONS = Counter("kubelet_evictions", "Cumulative number of pod evictions by eviction signal",
                    ["eviction_signal"])
STATS_AGE = Histogram("kubelet_eviction_stats_age_seconds", "Time between when stats are collected, and when pod "
                      "is evicted based on those stats by eviction signal", ["eviction_signal"])

POD_CLEANUP_TIMEOUT = 30.0
POD_CLEANUP_POLL = 1.0
KILL_TIMEOUT = 30.0  # on top of the grace period
# Signals the manager knows how to rank pods for (kplane simulates memory only).
_RANKED_SIGNALS = frozenset({MEMORY_AVAILABLE, ALLOCATABLE_MEMORY_AVAILABLE})


@dataclass(frozen=True)
class PodKill:
    """How to end a pod abnormally: its grace period, and what its status should say."""

    grace_period: int
    reason: str
    message: str
    condition_type: str = podconditions.DISRUPTION_TARGET
    condition_reason: str = podconditions.TERMINATION_BY_KUBELET
    condition_message: str = ""  # the condition's own message; else ``message``


class PodKiller(Protocol):
    async def kill_pod_abnormally(self, pod: core_pb2.Pod, kill: PodKill) -> None:
        """Stop the pod and write its Failed status; return when both are done."""

    async def pod_cleaned_up(self, pod: core_pb2.Pod) -> bool:
        """True once none of the pod's containers runs."""


class Clock:
    """Monotonic time and sleeping (tests pass a fake one)."""

    def now(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class EvictionManager:
    """Observes memory, reports node pressure and evicts pods; the kubelet wires it::

        manager = EvictionManager(config, stats=..., active_pods=..., killer=kubelet, record_event=...,
                                  node_ref=..., on_conditions=...)
        task = asyncio.create_task(manager.run())
        manager.admit(pod)        # the admission check under pressure
    """

    def __init__(self, config: EvictionConfig, *, stats: Callable[[], Awaitable[Summary]],
                 active_pods: Callable[[], list[core_pb2.Pod]], killer: PodKiller,
                 record_event: RecordEvent,
                 node_ref: Callable[[], core_pb2.Node | None] = lambda: None,
                 on_conditions: Callable[[list[str]], None] = lambda conditions: None,
                 clock: Clock | None = None, node: str = ""):
        self.config = config
        self.stats = stats
        self.active_pods = active_pods
        self.killer = killer
        self.record_event = record_event
        self.node_ref = node_ref
        self.on_conditions = on_conditions
        self.clock = clock or Clock()
        self.node = node
        self.state = EvictionState()
        self._published: list[str] = []
        self._reclaiming = False

    @property
    def conditions(self) -> list[str]:
        """The node conditions the manager reports now (MemoryPressure, ...)."""
        return list(self.state.node_conditions)

    def admit(self, pod: core_pb2.Pod) -> AdmitResult:
        return admit(pod, self.state.node_conditions)

    # ------------------------------------------------------------ loop

    async def run(self) -> None:
        """``synchronize`` every ``--eviction-monitoring-interval`` (Kubernetes' housekeeping period).
        After an eviction the manager waits (up to 30 s, ``POD_CLEANUP_TIMEOUT``) for the pod's
        containers to stop and synchronizes again at once, as Kubernetes does, so reclaim goes on
        while the signal stays low."""
        self._log_config()
        while True:
            evicted = None
            try:
                evicted = await self.synchronize()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("eviction_synchronize_failed", node=self.node, error=str(exc))
            if evicted is not None:
                await self._wait_for_cleanup(evicted)
            else:
                await self.clock.sleep(self.config.monitoring_interval)

    def _log_config(self) -> None:
        for statement in self.config.ignored:
            log.warning("eviction_signal_not_simulated", node=self.node, threshold=statement,
                        detail="kplane simulates memory.available only; this threshold is ignored")
        log.info("eviction_manager_started", node=self.node, thresholds=[str(t) for t in self.config.thresholds],
                 max_pod_grace_period=self.config.max_pod_grace_period,
                 pressure_transition_period=self.config.pressure_transition_period,
                 monitoring_interval=self.config.monitoring_interval)

    async def synchronize(self) -> core_pb2.Pod | None:
        """One round; returns the pod evicted, if any.

        Stats from the runtime → observations → :class:`~kubelet.eviction.evaluate.EvictionState` step
        (thresholds met, minimum reclaim, grace periods, node conditions with the transition period)
        → ``on_conditions`` when the node conditions change → if a threshold may act: rank the active
        pods (:mod:`~kubelet.eviction.ranking`) and evict the first that is not critical. One pod per
        synchronize. One Warning event ``EvictionThresholdMet`` goes to the node when reclaim starts.
        """
        thresholds = self.config.thresholds
        if not thresholds:
            return None
        active = self.active_pods()
        try:
            summary = await self.stats()
        except (RuntimeUnavailable, RuntimeCallError) as exc:
            log.warning("eviction_stats_failed", node=self.node, error=str(exc))
            return None
        observations = observe(summary)
        step = self.state.step(thresholds, observations, self.clock.now(), self.config.pressure_transition_period)
        self._publish(step.conditions, observations)
        threshold = next((t for t in by_eviction_priority(step.to_act) if t.signal in _RANKED_SIGNALS), None)
        if threshold is None:
            self._reclaiming = False
            return None
        observed = observations[threshold.signal]
        resource = threshold.resource
        if not self._reclaiming:
            self._reclaiming = True
            node = self.node_ref()
            if node is not None:
                self.record_event(node, "Warning", "EvictionThresholdMet", f"Attempting to reclaim {resource}")
            log.info("eviction_threshold_met", node=self.node, signal=threshold.signal, threshold=str(threshold),
                     available=bytes_text(observed.available))
        if not active:
            log.error("eviction_no_active_pods", node=self.node, signal=threshold.signal)
            return None

        def stats_of(pod: core_pb2.Pod) -> PodStats | None:
            return summary.pods.get(pod.metadata.uid)

        ranked = rank_memory_pressure(active, stats_of)
        for t in step.to_act:
            sampled = observations[t.signal].time
            if sampled is not None:
                STATS_AGE.labels(eviction_signal=t.signal).observe(max(0.0, time.time() - sampled))
        for pod in ranked:
            if podinfo.is_critical(pod):
                log.info("eviction_skip_critical_pod", node=self.node, pod=key_of(pod), priority=podinfo.priority(pod))
                continue
            await self._evict(pod, threshold, stats_of(pod), observed.available, observed.capacity)
            return pod
        log.info("eviction_unable_to_evict", node=self.node, signal=threshold.signal, pods=len(ranked))
        return None

    def _publish(self, conditions: list[str], observations: dict[str, Observation]) -> None:
        if conditions == self._published:
            return
        self._published = list(conditions)
        memory = observations.get(MEMORY_AVAILABLE)
        log.info("node_pressure_changed", node=self.node, conditions=conditions,
                 memory_available=bytes_text(memory.available) if memory is not None else None)
        self.on_conditions(list(conditions))

    # ------------------------------------------------------------ evicting

    def grace_period(self, pod: core_pb2.Pod, threshold: Threshold) -> int:
        """0 for a hard threshold; min(pod's grace period, --eviction-max-pod-grace-period) for a soft one."""
        if threshold.hard:
            return 0
        return min(podinfo.termination_grace_period(pod), self.config.max_pod_grace_period)

    async def _evict(self, pod: core_pb2.Pod, threshold: Threshold, stats: PodStats | None, available: int,
                     capacity: int) -> None:
        """The killer's ``kill_pod_abnormally`` (the kubelet: stop the containers with the grace
        period, then status Failed / ``Evicted`` / the message, plus condition DisruptionTarget with
        reason TerminationByKubelet). The grace period is 0 for a hard threshold and
        ``min(pod's terminationGracePeriodSeconds, --eviction-max-pod-grace-period)`` for a soft one
        (``grace_period``). A Warning event ``Evicted`` goes to the pod."""
        quantity = threshold.value.quantity_of(capacity)
        msg = eviction_message(threshold.resource, pod, stats, quantity, available)
        grace = self.grace_period(pod, threshold)
        self.record_event(pod, "Warning", REASON, msg.text)
        try:
            async with asyncio.timeout(grace + KILL_TIMEOUT):
                await self.killer.kill_pod_abnormally(pod, PodKill(grace, REASON, msg.text))
        except TimeoutError:
            log.error("eviction_kill_timeout", node=self.node, pod=key_of(pod), grace=grace)
        except Exception as exc:  # Kubernetes counts the eviction whatever the kill returned
            log.error("eviction_kill_failed", node=self.node, pod=key_of(pod), error=str(exc))
        EVICTIONS.labels(eviction_signal=threshold.signal).inc()
        log.info("pod_evicted", node=self.node, pod=key_of(pod), uid=pod.metadata.uid, signal=threshold.signal,
                 threshold=str(quantity), observed=bytes_text(available), hard=threshold.hard, grace=grace,
                 usage=bytes_text(stats.working_set) if stats is not None else None,
                 request=bytes_text(podinfo.memory_request(pod)), priority=podinfo.priority(pod),
                 message=msg.text, **msg.offending)

    async def _wait_for_cleanup(self, pod: core_pb2.Pod) -> None:
        deadline = self.clock.now() + POD_CLEANUP_TIMEOUT
        poll = min(POD_CLEANUP_POLL, self.config.monitoring_interval)
        while self.clock.now() < deadline:
            await self.clock.sleep(poll)
            try:
                if await self.killer.pod_cleaned_up(pod):
                    return
            except (RuntimeUnavailable, RuntimeCallError) as exc:
                log.warning("eviction_cleanup_check_failed", node=self.node, pod=key_of(pod), error=str(exc))
        log.warning("eviction_cleanup_timeout", node=self.node, pod=key_of(pod))


