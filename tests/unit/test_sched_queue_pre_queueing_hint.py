"""KEP-6132 PreQueueingHint in the scheduling queue ("Design Details", "PreQueueingHintFn
Interface"): called once per matching cluster event inside move-all-to-active-or-backoff, before
the walk over the unschedulable pool; each plugin's QueueingHint is then asked only about the pods
its own PreQueueingHint named, and a plugin without one keeps every pod it rejected ("Multiple
plugins may register a PreQueueingHintFn for the same event..."). The gate
SchedulerPreQueueingHints off: PreQueueingHints ignored, every pod evaluated.

The document's TestPriorityQueue_PreQueueingHint is ``test_priority_queue_pre_queueing_hint``
(gate enabled/disabled, hint narrows to specific pods, hint signals all, multiple hints union);
the issue's "Mixed plugins on one event" is its own test."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from machinery.api import core_pb2
from scheduler.framework.pod_info import QueuedPodInfo
from scheduler.framework.types import (
    ALL_PODS,
    EVENT_RESOURCE_CLAIM_UPDATE,
    RESOURCE_CLAIM,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    PreQueueingHintResult,
    QueueingHint,
)
from scheduler.queue.scheduling_queue import NARROWED_MESSAGE, UNSCHEDULABLE_Q, SchedulingQueue
from tests.harness.builders import MakePod
from tests.unit.test_sched_queue import Clock, less, pop, reject

PROFILE = "default-scheduler"
# What a DRA-like plugin registers: ResourceClaim adds and updates.
CLAIMS = ClusterEvent(RESOURCE_CLAIM, ActionType.ADD | ActionType.UPDATE)


def narrowed(*pods: str) -> PreQueueingHintResult:
    return PreQueueingHintResult.narrowed(f"default/{p}" for p in pods)


@dataclass
class Plugin:
    """A plugin registered for claim events: its QueueingHint says Queue for any pod and records
    whom it was asked about; its PreQueueingHint (none when ``pre`` is None) answers ``pre``."""

    name: str
    pre: PreQueueingHintResult | None = None
    asked: list[str] = field(default_factory=list)
    pre_calls: int = 0

    def hint(self, pod: core_pb2.Pod, old: object, new: object) -> QueueingHint:
        self.asked.append(pod.metadata.name)
        return QueueingHint.QUEUE

    def pre_hint(self, old: object, new: object) -> PreQueueingHintResult:
        self.pre_calls += 1
        assert self.pre is not None
        return self.pre

    def registration(self) -> ClusterEventWithHint:
        return ClusterEventWithHint(CLAIMS, self.hint, self.pre_hint if self.pre is not None else None)


def queue_of(clock: Clock, plugins: list[Plugin], *, gate: bool = True) -> SchedulingQueue:
    return SchedulingQueue(less, events={PROFILE: {p.name: [p.registration()] for p in plugins}}, clock=clock,
                           pre_queueing_hints=gate)


async def pool(q: SchedulingQueue, rejected: dict[str, tuple[str, ...]]) -> dict[str, QueuedPodInfo]:
    """Each pod added, popped and rejected by its plugins: all of them in the unschedulable pool."""
    infos = {}
    for name, plugins in rejected.items():
        q.add(MakePod().name(name).uid(f"uid-{name}").scheduler_name(PROFILE).obj())
        infos[name] = p = await pop(q)
        reject(q, p, *plugins)
        assert q.where(p.pod) == UNSCHEDULABLE_Q
    return infos


def requeued(q: SchedulingQueue, infos: dict[str, QueuedPodInfo]) -> set[str]:
    return {name for name, p in infos.items() if q.where(p.pod) != UNSCHEDULABLE_Q}


def evaluations(plugin: str, result: str) -> float:
    return REGISTRY.get_sample_value("scheduler_pre_queueing_hint_evaluations_total",
                                     {"plugin": plugin, "result": result}) or 0.0


@dataclass(frozen=True)
class Case:
    gate: bool
    pre: dict[str, PreQueueingHintResult | None]  # plugin -> what its PreQueueingHint says (None: it has none)
    rejected: dict[str, tuple[str, ...]]  # pod -> the plugins that rejected it
    requeued: set[str]
    asked: dict[str, list[str]]  # plugin -> the pods its QueueingHint was asked about
    pre_calls: int = 1  # per PreQueueingHint


CASES = {
    "gate disabled: PreQueueingHints ignored, every pod evaluated": Case(
        gate=False, pre={"A": narrowed("x")}, rejected={"x": ("A",), "y": ("A",)},
        requeued={"x", "y"}, asked={"A": ["x", "y"]}, pre_calls=0),
    "gate enabled: the hint narrows to specific pods": Case(
        gate=True, pre={"A": narrowed("x")}, rejected={"x": ("A",), "y": ("A",)},
        requeued={"x"}, asked={"A": ["x"]}),
    "gate enabled: the hint signals all pods": Case(
        gate=True, pre={"A": ALL_PODS}, rejected={"x": ("A",), "y": ("A",)},
        requeued={"x", "y"}, asked={"A": ["x", "y"]}),
    "gate enabled: an empty list, no pod affected": Case(
        gate=True, pre={"A": narrowed()}, rejected={"x": ("A",), "y": ("A",)},
        requeued=set(), asked={"A": []}),
    "gate enabled: multiple hints union, each plugin asked about its own pods": Case(
        gate=True, pre={"A": narrowed("x"), "B": narrowed("y")},
        rejected={"x": ("A",), "y": ("B",), "z": ("A", "B")},
        requeued={"x", "y"}, asked={"A": ["x"], "B": ["y"]}),
    "gate enabled: a pod named by another plugin's hint only is not asked about by this one": Case(
        gate=True, pre={"A": narrowed("x", "y"), "B": narrowed("x")},
        rejected={"x": ("B",), "y": ("B",)},
        requeued={"x"}, asked={"A": [], "B": ["x"]}),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_priority_queue_pre_queueing_hint(case: Case):
    """TestPriorityQueue_PreQueueingHint: one claim update, pods rejected by one plugin or two."""
    plugins = [Plugin(name, pre) for name, pre in case.pre.items()]
    q = queue_of(Clock(), plugins, gate=case.gate)
    infos = await pool(q, case.rejected)
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None)
    assert requeued(q, infos) == case.requeued
    assert {p.name: p.asked for p in plugins} == case.asked
    assert {p.name: p.pre_calls for p in plugins} == {p.name: case.pre_calls for p in plugins}, \
        "once per event with the gate on, never with it off"


async def test_mixed_plugins_on_one_event_a_plugin_without_a_pre_queueing_hint_keeps_every_pod_it_rejected():
    """KEP-6132 "Design Details": "Plugins without PreQueueingHintFn default to 'all pods' only for
    their own QueueingHint evaluation." Plugin A's PreQueueingHint names pod x only; plugin B,
    registered for the same event, has none. Pod y, rejected by B, is still requeued by B's hint —
    upstream moved the feature back to alpha because a union of the PreQueueingHints' pods lost
    such pods. Pod z, rejected by both and not named by A, is asked about by B alone."""
    a, b = Plugin("A", narrowed("x")), Plugin("B")
    q = queue_of(Clock(), [a, b])
    infos = await pool(q, {"x": ("A",), "y": ("B",), "z": ("A", "B")})
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None)
    assert requeued(q, infos) == {"x", "y", "z"}
    assert a.asked == ["x"], "A's QueueingHint: only the pod its own PreQueueingHint named"
    assert b.asked == ["y", "z"], "B's QueueingHint: every pod B rejected"


async def test_an_event_every_registration_narrowed_looks_at_the_named_pods_only():
    """KEP-6132 "Summary": the requeue path from O(N) to O(1) — with 1,000 pods waiting, a claim
    event whose PreQueueingHint names one pod looks at that pod alone (``pre_check`` sees each pod
    the queue considers)."""
    a = Plugin("A", narrowed("p-7"))
    q = queue_of(Clock(), [a])
    infos = await pool(q, {f"p-{i}": ("A",) for i in range(1000)})
    considered: list[str] = []

    def pre_check(pod: core_pb2.Pod) -> bool:
        considered.append(pod.metadata.name)
        return True
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None, pre_check)
    assert considered == ["p-7"] and a.asked == ["p-7"] and requeued(q, infos) == {"p-7"}
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None, pre_check)
    assert considered == ["p-7"], "no longer in the pool: nothing to look at"


async def test_pre_queueing_hint_metric_and_debug_log():
    """KEP-6132 "Monitoring Requirements": scheduler_pre_queueing_hint_evaluations_total{plugin,
    result} counts each call as 'narrowed' or 'all_pods'; a narrowing logs "PreQueueingHint
    narrowed pod set" at debug (Kubernetes: V(5))."""
    narrowing, signalling = Plugin("MetricNarrows", narrowed("x")), Plugin("MetricAll", ALL_PODS)
    q = queue_of(Clock(), [narrowing, signalling])
    await pool(q, {"x": ("MetricNarrows",), "y": ("MetricAll",)})
    before = {(p, r): evaluations(p, r) for p in ("MetricNarrows", "MetricAll") for r in ("narrowed", "all_pods")}
    with capture_logs() as logs:
        q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None)
    after = {k: evaluations(*k) - v for k, v in before.items()}
    assert after == {("MetricNarrows", "narrowed"): 1, ("MetricNarrows", "all_pods"): 0,
                     ("MetricAll", "narrowed"): 0, ("MetricAll", "all_pods"): 1}
    lines = [e for e in logs if e.get("msg") == NARROWED_MESSAGE]
    assert NARROWED_MESSAGE == "PreQueueingHint narrowed pod set"
    assert [(e["log_level"], e["plugin"], e["cluster_event"], e["pods"]) for e in lines] == \
        [("debug", "MetricNarrows", "ResourceClaimUpdate", 1)]


async def test_a_pre_queueing_hint_that_fails_counts_as_all_pods():
    """Never strand a pod on a buggy PreQueueingHint (as on a buggy QueueingHint): an exception,
    or an answer that is no PreQueueingHintResult, is 'all pods'."""
    def broken(old: object, new: object) -> PreQueueingHintResult:
        raise RuntimeError("index gone")
    for fn in (broken, lambda old, new: ["default/x"]):
        a = Plugin("A")
        q = SchedulingQueue(less, events={PROFILE: {"A": [ClusterEventWithHint(CLAIMS, a.hint, fn)]}}, clock=Clock())
        infos = await pool(q, {"x": ("A",), "y": ("A",)})
        q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None)
        assert requeued(q, infos) == {"x", "y"} and a.asked == ["x", "y"]


async def test_a_pod_in_flight_is_not_narrowed_away():
    """An event that arrives while a pod is being scheduled is replayed through its rejectors'
    QueueingHints when it comes back (the queue's in-flight events), without PreQueueingHint
    narrowing: conservative, the pod's claim may be what changed."""
    a = Plugin("A", narrowed())
    q = queue_of(Clock(), [a])
    q.add(MakePod().name("x").uid("uid-x").scheduler_name(PROFILE).obj())
    p = await pop(q)
    q.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, None, None)
    reject(q, p, "A")
    assert q.where(p.pod) != UNSCHEDULABLE_Q and a.asked == ["x"]
