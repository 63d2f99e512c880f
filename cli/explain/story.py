"""A pod's story: every step it went through, in revision order, from the history's entries and
the scheduler's log records (pure: no I/O, so tests build it from hand-made entries).

Pods may share a name over time (deleted and made again): they are told apart by uid, and the
story is the latest one's unless a uid is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from cli.chaos import marks
from cli.check.framework import Entry
from cli.explain import claims, event_steps, scheduler_log
from cli.explain.placement import HistoryClock, entry_time
from cli.explain.pod_changes import pod_steps
from cli.explain.scheduler_log import LogRecord
from cli.explain.step import Step
from machinery import timeutil
from machinery.api import core_pb2, resource_pb2


class PodNotFound(Exception):
    """No pod of that name (or uid) in the history."""


@dataclass(frozen=True)
class Story:
    namespace: str
    name: str
    uid: str
    uids: list[str]  # every pod of this name the history holds, oldest first
    steps: list[Step] = field(default_factory=list)


@dataclass
class _Life:
    """One pod (one uid) over the history: when it lived, where, and which claims it used."""

    uid: str
    first_rev: int
    last_rev: int | None = None  # its DELETED revision
    created: datetime | None = None
    nodes: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)  # ResourceClaims it names

    def holds(self, rev: int) -> bool:
        return rev >= self.first_rev and (self.last_rev is None or rev <= self.last_rev)


def build(entries: Iterable[Entry], namespace: str, name: str, uid: str = "",
          records: Sequence[LogRecord] = ()) -> Story:
    """The story of pod ``namespace/name`` (the one with ``uid``, else the latest), from the
    history's ``entries`` (in revision order) and the scheduler's log ``records`` about it."""
    entries = list(entries)
    lives = _lives(entries, namespace, name)
    if not lives:
        raise PodNotFound(f'pods "{name}" not found in the history')
    if uid and uid not in lives:
        raise PodNotFound(f'pods "{name}" with uid {uid} not found in the history (its uids: {", ".join(lives)})')
    life = lives[uid] if uid else list(lives.values())[-1]
    later = [lv.created for lv in lives.values() if lv.first_rev > life.first_rev and lv.created is not None]
    own = [r for r in records if _about(r, life, min(later, default=None))]
    steps, clock = _history_steps(entries, namespace, life, scheduler_log.reason_plugins(own))
    placed = []
    for r in own:
        # Right after the change that caused it when the record names one, else by wall clock.
        rev = scheduler_log.trigger_rev(r) or clock.rev_at(r.time)
        step = scheduler_log.step_of(max(rev, life.first_rev), r)
        if step is not None:
            placed.append(step)
    # A record goes after every history step of the revision it is placed at; stable otherwise.
    ordered = sorted([(s.rev, 0, i, s) for i, s in enumerate(steps)] + [(s.rev, 1, i, s) for i, s in enumerate(placed)],
                     key=lambda t: t[:3])
    return Story(namespace, name, life.uid, list(lives), [t[3] for t in ordered])


def _lives(entries: list[Entry], namespace: str, name: str) -> dict[str, _Life]:
    lives: dict[str, _Life] = {}
    for e in entries:
        pod = e.pod
        if pod is None or e.name != name or e.namespace != namespace:
            continue
        life = lives.get(pod.metadata.uid)
        if life is None:
            life = lives[pod.metadata.uid] = _Life(pod.metadata.uid, e.rev,
                                                   created=timeutil.parse(pod.metadata.creation_timestamp))
        if e.type == "DELETED":
            life.last_rev = e.rev
        for node in (pod.spec.node_name, pod.status.nominated_node_name):
            if node:
                life.nodes.add(node)
        life.claims.update(c.resource_claim_name for c in pod.spec.resource_claims if c.resource_claim_name)
        life.claims.update(s.resource_claim_name for s in pod.status.resource_claim_statuses
                           if s.resource_claim_name)
    return lives


def _history_steps(entries: list[Entry], namespace: str, life: _Life,
                   plugins: dict[str, str]) -> tuple[list[Step], HistoryClock]:
    """The steps the history shows, and its wall clock (every entry's time, for the log records)."""
    clock = HistoryClock()
    steps: list[Step] = []
    pod: core_pb2.Pod | None = None
    claim_versions: dict[str, resource_pb2.ResourceClaim] = {}
    for e in entries:
        clock.observe(e.rev, e.obj)
        obj = e.obj
        start = len(steps)
        if isinstance(obj, core_pb2.Pod):
            if obj.metadata.uid == life.uid:
                steps.extend(pod_steps(e.rev, e.type, pod, obj))
                pod = obj
        elif isinstance(obj, core_pb2.Event):
            step = _event_step(e, obj, life, plugins)
            if step is not None:
                steps.append(step)
        elif isinstance(obj, resource_pb2.ResourceClaim) and e.namespace == namespace:
            if claims.owned_by(obj, life.uid) or (obj.metadata.name in life.claims and life.holds(e.rev)):
                prev = claim_versions.get(obj.metadata.name)
                steps.extend(claims.claim_steps(e.rev, e.type, prev, obj, life.uid))
                claim_versions[obj.metadata.name] = obj
        if len(steps) > start:
            when = entry_time(obj)
            stamp = timeutil.rfc3339(when) if when is not None else ""
            steps[start:] = [s if s.time else replace(s, time=stamp) for s in steps[start:]]
    return steps, clock


def _event_step(e: Entry, ev: core_pb2.Event, life: _Life, plugins: dict[str, str]) -> Step | None:
    ref = ev.involved_object
    if ref.kind == "Pod" and ref.uid == life.uid:
        return event_steps.about_pod(e.rev, e.type, ev, plugins)
    if ev.related.kind == "Pod" and ev.related.uid == life.uid:
        return event_steps.preempted_by_pod(e.rev, e.type, ev)
    if marks.is_fault(ev) and e.type == "ADDED" and life.holds(e.rev) and _concerns(marks.fault_component(ev), life):
        return event_steps.fault(e.rev, ev)
    return None


def _concerns(component: str, life: _Life) -> bool:
    """A fault on a control-plane component, or on the kubelet or runtime of a node the pod was
    nominated to or bound to."""
    role, _, node = component.partition("/")
    return role not in ("kubelet", "runtime") or node in life.nodes


def _about(r: LogRecord, life: _Life, until: datetime | None) -> bool:
    """Whether a record of the pod's name is about this pod: its uid when it has one, else its
    time within the pod's life (from its creation to the creation of the next of its name)."""
    uid = r.fields.get("uid")
    if uid:
        return uid == life.uid
    if life.created is not None and r.time < life.created:
        return False
    return until is None or r.time < until
