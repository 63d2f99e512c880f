"""The scheduling queue: activeQ, backoffQ and the unschedulable pool, driven by QueueingHints.

kube-scheduler's PriorityQueue, on one asyncio loop (no locks needed): ``SchedulingQueue``.

- activeQ: ``pop``, and ``_move_to_active`` (PreEnqueue plugins: scheduling gates);
- backoffQ: ``backoff_duration``, ``flush_backoff_completed``;
- unschedulablePods: ``_worth_requeuing`` (the QueueingHints), ``flush_unschedulable_leftover``;
- PreQueueingHints (KEP-6132): ``_pre_queueing_hints``;
- pods in flight: ``_hint_for_in_flight_pod``;
- the ``pod_requeued`` log record (``_log_requeue``): which event, plugin and hint moved a pod;
- the metrics: the comment over ``INCOMING_PODS``.
"""

from __future__ import annotations

import asyncio
import bisect
import enum
import logging
import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, NamedTuple

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily

from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise
from scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from scheduler.framework.types import (
    BACKOFF_COMPLETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    EVENT_UNSCHEDULED_POD_ADD,
    EVENT_UNSCHEDULED_POD_UPDATE,
    FORCE_ACTIVATE,
    SCHEDULE_ATTEMPT_FAILURE,
    ClusterEvent,
    ClusterEventWithHint,
    NominatingInfo,
    PreQueueingHintResult,
    QueueingHint,
    pod_scheduling_property_changes,
)
from scheduler.queue.heap import KeyedHeap
from scheduler.queue.nominator import Nominator

log = get_logger()

ACTIVE_Q, BACKOFF_Q, UNSCHEDULABLE_Q, GATED = "active", "backoff", "unschedulable", "gated"
IN_FLIGHT = "in-flight"  # popped, its attempt not over (``where``; a pod_requeued record's from_queue)
DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0
BACKOFF_FLUSH_PERIOD = 1.0
UNSCHEDULABLE_FLUSH_PERIOD = 30.0

# Metrics: scheduler_pending_pods{queue} (active, backoff, unschedulable, gated),
# scheduler_queue_incoming_pods_total{event,queue}, scheduler_unschedulable_pods{plugin,profile},
# scheduler_queueing_hint_execution_duration_seconds{plugin,event,hint} (its _count: the
# QueueingHint calls), scheduler_event_handling_duration_seconds{event} (the queue's part of an
# event), scheduler_pre_queueing_hint_evaluations_total{plugin,result}.
INCOMING_PODS = Counter("scheduler_queue_incoming_pods_total", "Number of pods added to scheduling queues by event "
                        "and queue type.", ["event", "queue"])
PRE_QUEUEING_HINT_EVALUATIONS = Counter(
    "scheduler_pre_queueing_hint_evaluations_total", "PreQueueingHint invocations (KEP-6132) by plugin and result: "
    "'narrowed' (only the pods it named are evaluated) or 'all_pods' (every pod it rejected is).",
    ["plugin", "result"])
# kube-scheduler's buckets: from 0.1 ms, the last [~200 ms, Inf).
EVENT_HANDLING = Histogram("scheduler_event_handling_duration_seconds", "Event handling latency in seconds (kplane: "
                           "the scheduling queue's part, the hints included).", ["event"],
                           buckets=tuple(0.0001 * 2 ** i for i in range(12)))
NARROWED, ALL_PODS = "narrowed", "all_pods"
# What PreQueueingHint narrowing logs at debug (KEP-6132 "Monitoring Requirements": at V(5)).
NARROWED_MESSAGE = "PreQueueingHint narrowed pod set"


class Strategy(enum.IntEnum):
    SKIP = 0  # stay in the unschedulable pool
    AFTER_BACKOFF = 1
    IMMEDIATELY = 2


def _key(p: QueuedPodInfo) -> str:
    return p.pod_info.key


class _Verdict(NamedTuple):
    """What a pod's rejectors' hints said about one event: the strategy, and when it moves, the
    plugin whose QueueingHint said so ("" for the queue's own events: no plugin was asked), that
    hint's answer (``Queue``; ``Error``: a hint that failed counts as Queue) and whether that
    plugin's PreQueueingHint had named the pod first (KEP-6132)."""

    strategy: Strategy
    plugin: str = ""
    hint: str = ""
    pre_queueing_hint: bool = False


_SKIP = _Verdict(Strategy.SKIP)
_AFTER_BACKOFF = _Verdict(Strategy.AFTER_BACKOFF)


class _HintEntry:
    """One registration of one plugin of one profile (identity is the key: no __eq__)."""

    __slots__ = ("event", "plugin", "hint", "pre_hint")

    def __init__(self, event: ClusterEvent, plugin: str, hint, pre_hint=None):
        self.event, self.plugin, self.hint, self.pre_hint = event, plugin, hint, pre_hint


@dataclass(frozen=True)
class _Narrowed:
    """What the PreQueueingHints said about one event: per registration that named pods, those
    pods; ``only``: when every registration the event matches named its pods, their union — the
    only pods worth looking at (None: the whole pool)."""

    by_entry: dict[_HintEntry, frozenset[str]]
    only: frozenset[str] | None


class SchedulingQueue:
    """kube-scheduler's PriorityQueue: **activeQ**, a heap in the profile's QueueSort order
    (PrioritySort: priority, then time); **backoffQ**, pods that failed and may be retried after
    their backoff; **unschedulablePods**, pods the last attempt rejected (and pods gated)."""

    def __init__(self, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool], *,
                 events: dict[str, dict[str, list[ClusterEventWithHint]]] | None = None,
                 pre_enqueue: dict[str, Callable[[core_pb2.Pod], Any]] | None = None,
                 requests_of: Callable[[core_pb2.Pod], dict[str, int]] | None = None,
                 initial_backoff: float = DEFAULT_INITIAL_BACKOFF, max_backoff: float = DEFAULT_MAX_BACKOFF,
                 max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
                 clock: Callable[[], float] = time.monotonic,
                 get_pod: Callable[[str, str], core_pb2.Pod | None] | None = None,
                 pre_queueing_hints: bool = True):
        """``events``: per profile, per plugin, its registered events with hints; ``pre_enqueue``:
        per profile, the function running its PreEnqueue plugins (returns a Status or None);
        ``get_pod``: the informer's pods, which the nominator checks a nomination against;
        ``pre_queueing_hints``: the gate SchedulerPreQueueingHints (off: PreQueueingHints are
        never called and every pod is evaluated)."""
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        # kube-scheduler looks every 30 s; a shorter limit (a test's) is looked at as often as it says.
        self.unschedulable_flush_period = min(UNSCHEDULABLE_FLUSH_PERIOD, max_in_unschedulable)
        self.pre_queueing_hints = pre_queueing_hints
        self._active: KeyedHeap[QueuedPodInfo] = KeyedHeap(_key, less)
        self._backoff: KeyedHeap[QueuedPodInfo] = KeyedHeap(_key, self._backoff_less)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self.nominator = Nominator(get_pod)
        self._pre_enqueue = pre_enqueue or {}
        self._requests_of = requests_of or (lambda pod: PodInfo(pod).requests)
        self._hints: dict[str, list[_HintEntry]] = {}
        self._plugin_events: dict[str, list[ClusterEvent]] = {}
        for profile, by_plugin in (events or {}).items():
            entries = self._hints.setdefault(profile, [])
            for plugin, registered in by_plugin.items():
                for ev in registered:
                    entries.append(_HintEntry(ev.event, plugin, ev.hint, ev.pre_queueing_hint))
                    self._plugin_events.setdefault(plugin, []).append(ev.event)
        self._interesting = [e.event for entries in self._hints.values() for e in entries]
        self._interest: dict[ClusterEvent, bool] = {}  # memo of _is_event_of_interest
        self._matching: dict[ClusterEvent, list[_HintEntry]] = {}  # memo of _entries_matching
        # In-flight pods and the events seen while any pod is in flight.
        self._seq = 0
        self._in_flight: dict[str, int] = {}  # uid -> sequence number when popped
        self._in_flight_events: deque[tuple[int, ClusterEvent, Any, Any]] = deque()
        self._wake = asyncio.Event()
        self._closed = False
        self._tasks: list[asyncio.Task] = []
        _QUEUES.add(self)

    # ------------------------------------------------------------ life

    def run(self) -> None:
        self._tasks = [supervise("queue-flush-backoff", self._flush_backoff_loop),
                       supervise("queue-flush-unschedulable", self._flush_unschedulable_loop)]

    @property
    def closed(self) -> bool:
        return self._closed

    def shut(self) -> None:
        """Hand out no more pods: every pop(), waiting or to come, returns None (kube-scheduler's
        SchedulingQueue.Close). Synchronous, so no other task runs between a stop and its effect."""
        self._closed = True
        self._wake.set()

    async def close(self) -> None:
        self.shut()
        await cancel_and_wait(self._tasks)

    async def _flush_backoff_loop(self) -> None:
        while True:
            await asyncio.sleep(BACKOFF_FLUSH_PERIOD)
            self.flush_backoff_completed()

    async def _flush_unschedulable_loop(self) -> None:
        while True:
            await asyncio.sleep(self.unschedulable_flush_period)
            self.flush_unschedulable_leftover()

    # ------------------------------------------------------------ backoff

    def backoff_duration(self, p: QueuedPodInfo) -> float:
        """``initial * 2^(failures-1)``, at most ``max`` (1 s and 10 s by default)."""
        count = p.consecutive_errors_count or p.unschedulable_count
        if count <= 0:
            return 0.0
        d = self.initial_backoff
        for _ in range(1, count):
            d *= 2
            if d >= self.max_backoff:
                return self.max_backoff
        return min(d, self.max_backoff)

    def backoff_expiration(self, p: QueuedPodInfo) -> float:
        if p.backoff_expiration is None:
            p.backoff_expiration = p.timestamp + self.backoff_duration(p)
        return p.backoff_expiration

    def is_backing_off(self, p: QueuedPodInfo) -> bool:
        return self.backoff_expiration(p) > self._clock()

    def _backoff_less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.backoff_expiration(a) < self.backoff_expiration(b)

    # ------------------------------------------------------------ moving pods between queues

    def _new_info(self, pod: core_pb2.Pod) -> QueuedPodInfo:
        return QueuedPodInfo(PodInfo(pod), self._clock())

    def _run_pre_enqueue(self, p: QueuedPodInfo) -> None:
        run = self._pre_enqueue.get(p.pod.spec.scheduler_name)
        status = run(p.pod) if run is not None else None
        if status is None or status.is_success():
            p.gating_plugin = ""
            return
        p.gating_plugin = status.plugin
        p.unschedulable_plugins.add(status.plugin)

    def _move_to_active(self, p: QueuedPodInfo, event: str) -> bool:
        """To activeQ only if every PreEnqueue plugin agrees (scheduling gates); otherwise the pod
        waits, gated, in the unschedulable pool."""
        self._run_pre_enqueue(p)
        key = p.key
        if p.gated:
            # A flushed pod still gated makes no attempt: the next event, not the flush, moves it on.
            p.flushed = False
            if key in self._active or key in self._backoff or key in self._unschedulable:
                return False
            self._unschedulable[key] = p
            INCOMING_PODS.labels(event, UNSCHEDULABLE_Q).inc()
            return False
        if p.initial_attempt_timestamp is None:
            p.initial_attempt_timestamp = self._clock()
        self._unschedulable.pop(key, None)
        self._backoff.delete(key)
        self._active.add_or_update(p)
        INCOMING_PODS.labels(event, ACTIVE_Q).inc()
        if event in (EVENT_UNSCHEDULED_POD_ADD.label, EVENT_UNSCHEDULED_POD_UPDATE.label):
            self.nominator.add(p.pod_info)
        self._wake.set()
        return True

    def _move_to_backoff(self, p: QueuedPodInfo, event: str) -> None:
        self._unschedulable.pop(p.key, None)
        self._backoff.add_or_update(p)
        INCOMING_PODS.labels(event, BACKOFF_Q).inc()

    def _to_unschedulable(self, p: QueuedPodInfo, event: str) -> None:
        self._unschedulable[p.key] = p
        INCOMING_PODS.labels(event, UNSCHEDULABLE_Q).inc()

    def _requeue(self, p: QueuedPodInfo, strategy: Strategy, event: str) -> str:
        if strategy == Strategy.SKIP:
            self._to_unschedulable(p, event)
            return UNSCHEDULABLE_Q
        if strategy == Strategy.AFTER_BACKOFF and self.is_backing_off(p):
            self._move_to_backoff(p, event)
            return BACKOFF_Q
        if self._move_to_active(p, event):
            return ACTIVE_Q
        return GATED if p.gated else UNSCHEDULABLE_Q

    # ------------------------------------------------------------ the queue's API

    def add(self, pod: core_pb2.Pod, event: str = EVENT_UNSCHEDULED_POD_ADD.label) -> None:
        """A new unscheduled pod, or a bound pod whose resize is Deferred (KEP-5836: it is in the
        cache as well; ``event`` labels its arrival)."""
        self._move_to_active(self._new_info(pod), event)

    async def pop(self) -> QueuedPodInfo | None:
        """The head of activeQ, waiting for one; None once the queue is closed. The pod is in flight
        until ``done`` (``_hint_for_in_flight_pod``)."""
        while True:
            if self._closed:
                return None
            p = self._active.pop()
            if p is not None:
                p.attempts += 1
                # Rejectors are reset: this attempt decides them anew.
                p.unschedulable_plugins = set()
                p.pending_plugins = set()
                self._seq += 1
                self._in_flight[p.pod.metadata.uid] = self._seq
                return p
            self._wake.clear()
            await self._wake.wait()

    def done(self, uid: str) -> None:
        """The pod's attempt is over (bound, or back in the queue)."""
        if self._in_flight.pop(uid, None) is None:
            return
        if not self._in_flight:
            self._in_flight_events.clear()
            return
        oldest = min(self._in_flight.values())
        events = self._in_flight_events
        while events and events[0][0] < oldest:
            events.popleft()

    def _record_in_flight_event(self, event: ClusterEvent, old: Any, new: Any) -> None:
        if self._in_flight:
            self._seq += 1
            self._in_flight_events.append((self._seq, event, old, new))

    def add_unschedulable_if_not_present(self, p: QueuedPodInfo) -> None:
        """A pod whose attempt failed comes back: to the pool, or out again if an event seen
        during its attempt may have made it schedulable."""
        try:
            key = p.key
            if key in self._unschedulable or key in self._active or key in self._backoff:
                return
            if not p.unschedulable_plugins and not p.pending_plugins:
                p.consecutive_errors_count += 1  # an error, not a rejection
            else:
                p.unschedulable_count += 1
                p.consecutive_errors_count = 0
            p.timestamp = self._clock()
            p.backoff_expiration = None
            # Back after an attempt: what moves it next, an event or the flush, is what counts
            # (scheduler_pod_scheduled_after_flush_total, KEP-6132's rollback signal).
            p.flushed = False
            verdict, event, trigger = self._hint_for_in_flight_pod(p)
            to = self._requeue(p, verdict.strategy, SCHEDULE_ATTEMPT_FAILURE)
            if event is not None:
                _log_requeue(p, event.label, verdict, IN_FLIGHT, to, trigger)
        finally:
            self.done(p.pod.metadata.uid)

    def _hint_for_in_flight_pod(self, p: QueuedPodInfo) -> tuple[_Verdict, ClusterEvent | None, Any]:
        """A popped pod is in flight until ``done``; events that arrive meanwhile are recorded, and
        when the pod comes back unschedulable they are replayed through its rejectors' hints, so an
        event during its attempt is never lost. The verdict, and the event behind it with its object
        (None when no event decided: an error's backoff, or none said Queue)."""
        if not p.unschedulable_plugins and not p.pending_plugins:
            return _AFTER_BACKOFF, None, None
        since = self._in_flight.get(p.pod.metadata.uid)
        if since is None:
            return _AFTER_BACKOFF, None, None
        found: tuple[_Verdict, ClusterEvent | None, Any] = (_SKIP, None, None)
        for seq, event, old, new in self._in_flight_events:
            if seq <= since:
                continue
            v = self._worth_requeuing(p, event, old, new)
            if v.strategy == Strategy.IMMEDIATELY or (v.strategy == Strategy.AFTER_BACKOFF and not p.pending_plugins):
                return v, event, _object_of(old, new)
            if v.strategy == Strategy.AFTER_BACKOFF and found[0].strategy == Strategy.SKIP:
                found = (v, event, _object_of(old, new))
        return found

    def activate(self, pods: Iterable[core_pb2.Pod]) -> None:
        """Move these pods to activeQ now (or, if in flight, requeue them when they come back)."""
        for pod in pods:
            key = key_of(pod)
            p = self._unschedulable.get(key) or self._backoff.get(key)
            if p is not None:
                # Out of where it waits first: a pod that is gated now must go (back) to the pool.
                source = UNSCHEDULABLE_Q if self._unschedulable.pop(key, None) is not None else BACKOFF_Q
                self._backoff.delete(key)
                to = ACTIVE_Q if self._move_to_active(p, FORCE_ACTIVATE) else GATED if p.gated else UNSCHEDULABLE_Q
                _log_requeue(p, FORCE_ACTIVATE, _AFTER_BACKOFF, source, to, pod)
            elif pod.metadata.uid in self._in_flight:
                self._seq += 1
                self._in_flight_events.append((self._seq, EVENT_FORCE_ACTIVATE, None, pod))

    def update(self, old: core_pb2.Pod | None, new: core_pb2.Pod) -> None:
        """An unscheduled pod changed."""
        events = pod_scheduling_property_changes(new, old, self._requests_of) if old is not None else []
        uid = new.metadata.uid
        if uid in self._in_flight:
            for ev in events:
                self._seq += 1
                self._in_flight_events.append((self._seq, ev, old, new))
            return
        key = key_of(new)
        for heap in (self._active, self._backoff):
            p = heap.get(key)
            if p is not None:
                old_pod = p.pod
                p.pod_info.update(new)
                heap.add_or_update(p)
                self.nominator.update(old_pod, p.pod_info)
                return
        p = self._unschedulable.get(key)
        if p is not None:
            old_pod = p.pod
            p.pod_info.update(new)
            self.nominator.update(old_pod, p.pod_info)
            for ev in events:
                verdict = self._worth_requeuing(p, ev, old, new)
                if verdict.strategy != Strategy.SKIP:
                    del self._unschedulable[key]
                    source = GATED if p.gated else UNSCHEDULABLE_Q
                    _log_requeue(p, ev.label, verdict, source, self._requeue(p, verdict.strategy, ev.label), new)
                    return
            return
        self._move_to_active(self._new_info(new), EVENT_UNSCHEDULED_POD_UPDATE.label)

    def delete(self, pod: core_pb2.Pod) -> None:
        self.nominator.delete(pod)
        key = key_of(pod)
        self._active.delete(key)
        self._backoff.delete(key)
        self._unschedulable.pop(key, None)

    def move_all_to_active_or_backoff(self, event: ClusterEvent, old: Any = None, new: Any = None,
                                      pre_check: Callable[[core_pb2.Pod], bool] | None = None) -> None:
        """A cluster event: every pod in the unschedulable pool (that ``pre_check`` lets through)
        whose rejecting plugins' hints say Queue moves on. Bound pods' adds and updates come here
        too, with no pre-filter, as in kube-scheduler with QueueingHints: the hints decide. With
        PreQueueingHints (KEP-6132) each registration's hint is asked only about the pods its
        PreQueueingHint named, and when all of them named pods only those are looked at."""
        start = time.perf_counter()
        if not self._is_event_of_interest(event):
            EVENT_HANDLING.labels(event.label).observe(time.perf_counter() - start)
            return  # e.g. a kubelet's status write: no plugin cares
        narrowed = self._pre_queueing_hints(event, old, new) if self.pre_queueing_hints else None
        if narrowed is not None and narrowed.only is not None:
            named = (self._unschedulable.get(key) for key in narrowed.only)
            pods = [p for p in named if p is not None and (pre_check is None or pre_check(p.pod))]
        else:
            pods = [p for p in self._unschedulable.values() if pre_check is None or pre_check(p.pod)]
        self._move_pods(pods, event, old, new, narrowed.by_entry if narrowed is not None else None)
        EVENT_HANDLING.labels(event.label).observe(time.perf_counter() - start)

    def _entries_matching(self, event: ClusterEvent) -> list[_HintEntry]:
        """Every registration, of any profile, that covers ``event``."""
        entries = self._matching.get(event)
        if entries is None:
            entries = self._matching[event] = [e for by_profile in self._hints.values() for e in by_profile
                                               if e.event.matches(event)]
        return entries

    def _pre_queueing_hints(self, event: ClusterEvent, old: Any, new: Any) -> _Narrowed | None:
        """Each PreQueueingHint registered for ``event``, called once (KEP-6132 "Design Details");
        None when there is none, or for the queue's own wildcard events.

        With the gate SchedulerPreQueueingHints, a registration may carry a PreQueueingHint, called
        once per matching event before the pool is walked; the plugin's QueueingHint is then asked
        only about the pods it named — per plugin: a plugin registered for the same event without one
        is still asked about every pod it rejected. When every registration the event matches named
        its pods, only the union of those pods is looked at (O(named), not O(pool))."""
        if event.is_wildcard():
            return None
        entries = self._entries_matching(event)
        by_entry: dict[_HintEntry, frozenset[str]] = {}
        everyone = False
        for e in entries:
            if e.pre_hint is None:
                everyone = True  # no PreQueueingHint: every pod this plugin rejected, for its hint alone
                continue
            try:
                result = e.pre_hint(old, new)
                if not isinstance(result, PreQueueingHintResult):
                    raise TypeError(f"returned {type(result).__name__}, not a PreQueueingHintResult")
            except Exception as exc:  # never strand a pod on a buggy PreQueueingHint
                log.warning("pre_queueing_hint_failed", plugin=e.plugin, cluster_event=event.label, error=str(exc))
                result = PreQueueingHintResult(all_pods=True)
            if result.all_pods:
                PRE_QUEUEING_HINT_EVALUATIONS.labels(e.plugin, ALL_PODS).inc()
                everyone = True
                continue
            PRE_QUEUEING_HINT_EVALUATIONS.labels(e.plugin, NARROWED).inc()
            by_entry[e] = frozenset(result.pods)
            log.debug("pre_queueing_hint_narrowed", msg=NARROWED_MESSAGE, plugin=e.plugin,
                      cluster_event=event.label, pods=len(result.pods), unschedulable=len(self._unschedulable))
        if not by_entry:
            return None
        return _Narrowed(by_entry, None if everyone else frozenset().union(*by_entry.values()))

    def _move_pods(self, pods: list[QueuedPodInfo], event: ClusterEvent, old: Any, new: Any,
                   narrowed: dict[_HintEntry, frozenset[str]] | None = None) -> None:
        for p in pods:
            if p.gated and not any(e.matches(event) for e in self._plugin_events.get(p.gating_plugin, ())):
                continue
            verdict = self._worth_requeuing(p, event, old, new, narrowed)
            if verdict.strategy == Strategy.SKIP:
                continue
            self._unschedulable.pop(p.key, None)
            if event == EVENT_UNSCHEDULABLE_TIMEOUT:
                p.flushed = True
            source = GATED if p.gated else UNSCHEDULABLE_Q
            _log_requeue(p, event.label, verdict, source, self._requeue(p, verdict.strategy, event.label),
                         _object_of(old, new))
        self._record_in_flight_event(event, old, new)

    def _is_event_of_interest(self, event: ClusterEvent) -> bool:
        interesting = self._interest.get(event)
        if interesting is None:
            interesting = self._interest[event] = event.is_wildcard() or any(
                e.matches(event) for e in self._interesting)
        return interesting

    def _worth_requeuing(self, p: QueuedPodInfo, event: ClusterEvent, old: Any, new: Any,
                         narrowed: dict[_HintEntry, frozenset[str]] | None = None) -> _Verdict:
        """What the hints of the pod's rejectors say about ``event``; ``narrowed``: per registration,
        the pods its PreQueueingHint named (a registration in it is not asked about other pods).
        The verdict names the first plugin whose hint said Queue.

        A cluster event moves a pod out of unschedulablePods only if a QueueingHint of one of the
        plugins that rejected it (``unschedulable_plugins``) says Queue; Pending plugins' Queue skips
        the backoff."""
        rejectors = p.unschedulable_plugins | p.pending_plugins
        if not rejectors:
            return _AFTER_BACKOFF
        if event.is_wildcard():
            if isinstance(new, core_pb2.Pod) and new.metadata.uid != p.pod.metadata.uid:
                return _SKIP  # a wildcard for another pod (ForceActivate)
            return _AFTER_BACKOFF
        entries = self._hints.get(p.pod.spec.scheduler_name)
        if entries is None:
            return _AFTER_BACKOFF
        verdict = _SKIP
        for e in entries:
            if e.plugin not in rejectors or not e.event.matches(event):
                continue
            named = None
            if narrowed is not None:
                named = narrowed.get(e)
                if named is not None and p.key not in named:
                    continue  # its PreQueueingHint did not name this pod: this hint is not asked
            if e.hint is None:
                hint, label = QueueingHint.QUEUE, _HINT_LABELS[QueueingHint.QUEUE]
            else:
                start = time.perf_counter()
                try:
                    hint = e.hint(p.pod, old, new)
                    label = _HINT_LABELS[hint]
                except Exception as exc:  # never strand a pod on a buggy hint
                    log.warning("queueing_hint_failed", plugin=e.plugin, cluster_event=event.label, pod=p.key,
                                error=str(exc))
                    hint, label = QueueingHint.QUEUE, _HINT_ERROR
                HINT_DURATIONS.observe(e.plugin, event.label, label, time.perf_counter() - start)
            if hint == QueueingHint.QUEUE_SKIP:
                continue
            if e.plugin in p.pending_plugins:
                return _Verdict(Strategy.IMMEDIATELY, e.plugin, label, named is not None)
            if not p.pending_plugins:
                return _Verdict(Strategy.AFTER_BACKOFF, e.plugin, label, named is not None)
            if verdict.strategy == Strategy.SKIP:
                verdict = _Verdict(Strategy.AFTER_BACKOFF, e.plugin, label, named is not None)
        return verdict

    def flush_backoff_completed(self) -> None:
        """backoffQ's pods whose backoff is over, to activeQ (every second)."""
        now = self._clock()
        while True:
            head = self._backoff.peek()
            if head is None or self.backoff_expiration(head) > now:
                return
            self._backoff.pop()
            self._move_to_active(head, BACKOFF_COMPLETE)

    def flush_unschedulable_leftover(self) -> None:
        """Pods waiting longer than ``max_in_unschedulable`` (5 min) are flushed every 30 s anyway
        (``UnschedulableTimeout``; a limit under 30 s is checked that often)."""
        now = self._clock()
        stale = [p for p in self._unschedulable.values() if now - p.timestamp > self.max_in_unschedulable]
        if stale:
            self._move_pods(stale, EVENT_UNSCHEDULABLE_TIMEOUT, None, None)

    # ------------------------------------------------------------ nominations

    def add_nominated_pod(self, pi: PodInfo, info: NominatingInfo | None) -> None:
        self.nominator.add(pi, info)

    def delete_nominated_pod_if_exists(self, pod: core_pb2.Pod) -> None:
        self.nominator.delete(pod)

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]:
        return self.nominator.nominated_pods_for_node(node)

    # ------------------------------------------------------------ inspection

    def get(self, pod: core_pb2.Pod) -> QueuedPodInfo | None:
        key = key_of(pod)
        return self._active.get(key) or self._backoff.get(key) or self._unschedulable.get(key)

    def where(self, pod: core_pb2.Pod) -> str:
        key = key_of(pod)
        if key in self._active:
            return ACTIVE_Q
        if key in self._backoff:
            return BACKOFF_Q
        p = self._unschedulable.get(key)
        if p is not None:
            return GATED if p.gated else UNSCHEDULABLE_Q
        return IN_FLIGHT if pod.metadata.uid in self._in_flight else ""

    def counts(self) -> dict[str, int]:
        """Pending pods per sub-queue (deferred resizes of bound pods not included: ``resize_counts``)."""
        resize = self.resize_counts()
        gated = sum(1 for p in self._unschedulable.values() if p.gated and not p.pod.spec.node_name)
        return {ACTIVE_Q: len(self._active) - resize[ACTIVE_Q], BACKOFF_Q: len(self._backoff) - resize[BACKOFF_Q],
                UNSCHEDULABLE_Q: len(self._unschedulable) - gated - resize[UNSCHEDULABLE_Q], GATED: gated}

    def resize_counts(self) -> dict[str, int]:
        """Bound pods queued for a deferred in-place resize (KEP-5836), per sub-queue."""
        return {ACTIVE_Q: sum(1 for p in self._active if p.pod.spec.node_name),
                BACKOFF_Q: sum(1 for p in self._backoff if p.pod.spec.node_name),
                UNSCHEDULABLE_Q: sum(1 for p in self._unschedulable.values() if p.pod.spec.node_name)}

    def unschedulable_pods(self) -> Iterator[QueuedPodInfo]:
        return iter(list(self._unschedulable.values()))

    def in_flight_count(self) -> int:
        return len(self._in_flight)

    def in_flight_events_count(self) -> int:
        return len(self._in_flight_events)


def _object_of(old: Any, new: Any) -> Any:
    """The object a cluster event is about: its new version, or the old one of a deletion."""
    return new if new is not None else old


def _log_requeue(p: QueuedPodInfo, event: str, verdict: _Verdict, source: str, to: str, trigger: Any) -> None:
    """``pod_requeued``: a cluster event moved the pod on — one record per moved pod, never per
    event, at info (the level every process runs at), so ``kplane explain`` can say which event,
    which plugin's QueueingHint (and PreQueueingHint) moved it, from which sub-queue to which.
    ``trigger`` is the event's object: its ``namespace/name`` and resourceVersion (the revision of
    the change that moved the pod; "" for the queue's own events) are logged. The record's fields
    are values, never formatted; a disabled level costs one call."""
    if not log.is_enabled_for(logging.INFO):
        return
    meta = getattr(trigger, "metadata", None)
    log.info("pod_requeued", pod=p.key, uid=p.pod.metadata.uid, cluster_event=event, plugin=verdict.plugin,
             hint=verdict.hint, pre_queueing_hint=verdict.pre_queueing_hint, from_queue=source, to_queue=to,
             trigger=f"{meta.namespace}/{meta.name}" if meta is not None and meta.namespace else
             getattr(meta, "name", ""), trigger_rv=getattr(meta, "resource_version", ""))


# ------------------------------------------------------------------------------------------
# scheduler_queueing_hint_execution_duration_seconds{plugin,event,hint}: observed on every
# QueueingHint call, the hot path of the O(pool) walk KEP-6132 narrows, so kept as plain bucket
# counts and exported at scrape time (kube-scheduler records it asynchronously for the same reason).

_HINT_LABELS = {QueueingHint.QUEUE: "Queue", QueueingHint.QUEUE_SKIP: "QueueSkip"}
_HINT_ERROR = "Error"


class _HintDurations:
    # kube-scheduler's buckets: from 0.01 ms by a factor of 1.5, the last [~22 ms, Inf).
    BOUNDS = tuple(0.00001 * 1.5 ** i for i in range(20))

    def __init__(self) -> None:
        # (plugin, event, hint) -> per bucket (and +Inf) the count, then the sum in the last slot.
        self._series: dict[tuple[str, str, str], list[float]] = {}

    def observe(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        key = (plugin, event, hint)
        series = self._series.get(key)
        if series is None:
            series = self._series[key] = [0.0] * (len(self.BOUNDS) + 2)
        series[bisect.bisect_left(self.BOUNDS, seconds)] += 1
        series[-1] += seconds

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily("scheduler_queueing_hint_execution_duration_seconds", "Duration for running a "
                                       "queueing hint function of a plugin.", labels=["plugin", "event", "hint"])
        for key, series in sorted(self._series.items()):
            buckets, total = [], 0.0
            for bound, n in zip((*(repr(b) for b in self.BOUNDS), "+Inf"), series[:-1], strict=True):
                total += n
                buckets.append((bound, total))
            family.add_metric(list(key), buckets, series[-1])
        yield family

    def describe(self) -> list[HistogramMetricFamily]:
        return []


HINT_DURATIONS = _HintDurations()
REGISTRY.register(HINT_DURATIONS)


# ------------------------------------------------------------------------------------------
# scheduler_pending_pods{queue} and scheduler_unschedulable_pods{plugin,profile}, read at scrape time.

_QUEUES: "weakref.WeakSet[SchedulingQueue]" = weakref.WeakSet()


class _QueueGauges:
    def collect(self) -> Iterator[GaugeMetricFamily]:
        pending = GaugeMetricFamily("scheduler_pending_pods", "Number of pending pods, by the queue type. 'active' "
                                    "means number of pods in activeQ; 'backoff' means number of pods in backoffQ; "
                                    "'unschedulable' means number of pods in unschedulablePods that the scheduler "
                                    "attempted to schedule and failed; 'gated' is the number of unschedulable pods "
                                    "that the scheduler never attempted to schedule because they are gated.",
                                    labels=["queue"])
        resize = GaugeMetricFamily("scheduler_pending_resize_pods", "Number of pods whose in-place resize is "
                                   "Deferred and which wait in the scheduling queue for preemption (KEP-5836), by "
                                   "the queue type.", labels=["queue"])
        totals = {ACTIVE_Q: 0, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 0, GATED: 0}
        resize_totals = {ACTIVE_Q: 0, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 0}
        by_plugin: dict[tuple[str, str], int] = {}
        for q in list(_QUEUES):
            for k, v in q.counts().items():
                totals[k] += v
            for k, v in q.resize_counts().items():
                resize_totals[k] += v
            for p in q.unschedulable_pods():
                if p.pod.spec.node_name:
                    continue  # a deferred resize: not an unschedulable pod
                for plugin in p.unschedulable_plugins | p.pending_plugins:
                    key = (plugin, p.pod.spec.scheduler_name)
                    by_plugin[key] = by_plugin.get(key, 0) + 1
        for k, v in totals.items():
            pending.add_metric([k], v)
        yield pending
        for k, v in resize_totals.items():
            resize.add_metric([k], v)
        yield resize
        unsched = GaugeMetricFamily("scheduler_unschedulable_pods", "The number of unschedulable pods broken down by "
                                    "plugin name. A pod will increment the gauge for all plugins that caused it to "
                                    "not schedule and so this metric have meaning only when broken down by plugin.",
                                    labels=["plugin", "profile"])
        for (plugin, profile), n in sorted(by_plugin.items()):
            unsched.add_metric([plugin, profile], n)
        yield unsched

    def describe(self):
        return []


REGISTRY.register(_QueueGauges())
