"""What a run came to, read from its history: per pod, where it was bound (and how often),
whether it was preempted and by whom, how it ended, and each in-place resize's result — the
things ``kplane diff`` compares between two runs of the same workload.

Pods are matched across runs by a key: ``namespace/name`` for a pod a user named, and
``namespace/<owner kind>/<owner name>#N`` for the N-th pod a controller made for its owner (by
the order they were created), since a controller's pods get random names. A ReplicaSet made by
a Deployment is named by the Deployment and its pod template's hash, the same in both runs when
the template is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from cli.check.framework import Entry
from machinery import podconditions, quantity
from machinery.api import core_pb2

RESIZE_PENDING: Final = "PodResizePending"
RESIZE_IN_PROGRESS: Final = "PodResizeInProgress"
UNKNOWN_PREEMPTOR: Final = "(unknown)"  # marked by the scheduler, its Preempted event lost


@dataclass
class Resize:
    """One resize request (a new pod generation through the resize subresource) and what became
    of it: the states it went through, in order (``deferred``, ``infeasible``, ``completed``;
    ``pending`` while none was seen)."""

    requested: str  # "c1 cpu=500m memory=256Mi", the containers' new requests and limits
    states: list[str] = field(default_factory=list)

    @property
    def result(self) -> str:
        return " then ".join(self.states) if self.states else "pending"

    def reach(self, state: str) -> None:
        if not self.states or self.states[-1] != state:
            self.states.append(state)


@dataclass
class PodOutcome:
    key: str
    node: str = ""  # the node it was last bound to
    bindings: int = 0
    preempted_by: str = ""  # the preemptor's key, UNKNOWN_PREEMPTOR, or "" (not preempted)
    phase: str = ""
    reason: str = ""
    deleted: bool = False
    allocated: str = ""  # the kubelet's allocated resources at the end: "c1 cpu=500m memory=256Mi"
    resizes: list[Resize] = field(default_factory=list)

    @property
    def end(self) -> str:
        """How it ended, in words: ``Running``, ``Failed (Evicted)``, ``Succeeded, deleted``."""
        text = self.phase or "Pending"
        if self.reason:
            text += f" ({self.reason})"
        return text + (", deleted" if self.deleted else "")


@dataclass
class Outcome:
    pods: dict[str, PodOutcome]

    def totals(self) -> dict[str, int]:
        results = [r.states[-1] if r.states else "pending" for p in self.pods.values() for r in p.resizes]
        return {
            "pods": len(self.pods),
            "scheduled": sum(1 for p in self.pods.values() if p.bindings),
            "preempted": sum(1 for p in self.pods.values() if p.preempted_by),
            "failed": sum(1 for p in self.pods.values() if p.phase == "Failed"),
            "resizes": len(results),
            "resizes completed": results.count("completed"),
            "resizes deferred": results.count("deferred"),
            "resizes infeasible": results.count("infeasible"),
        }


def outcome(entries: Iterable[Entry]) -> Outcome:
    """The outcome of a history, entry by entry."""
    o = _Reader()
    for e in entries:
        o.observe(e)
    return Outcome(o.pods)


def _resources(c: core_pb2.Container) -> str:
    parts = [f"{r}={c.resources.requests[r]}" for r in ("cpu", "memory") if r in c.resources.requests]
    parts += [f"limit_{r}={c.resources.limits[r]}" for r in ("cpu", "memory") if r in c.resources.limits]
    return f"{c.name} {' '.join(parts)}" if parts else ""


def _same(a: str, b: str) -> bool:
    try:
        return quantity.parse_quantity(a) == quantity.parse_quantity(b)
    except ValueError:
        return a == b


def _actuated(pod: core_pb2.Pod) -> bool:
    """Whether every container runs with the cpu and memory its spec asks for (KEP-1287: the
    resize is done once status.containerStatuses[].resources match the spec)."""
    statuses = {s.name: s for s in [*pod.status.container_statuses, *pod.status.init_container_statuses]}
    for c in pod.spec.containers:
        s = statuses.get(c.name)
        if s is None:
            return False
        for section in ("requests", "limits"):
            want, have = getattr(c.resources, section), getattr(s.resources, section)
            for r in ("cpu", "memory"):
                if r in want and not (r in have and _same(want[r], have[r])):
                    return False
    return True


class _Reader:
    def __init__(self) -> None:
        self.pods: dict[str, PodOutcome] = {}
        self.keys: dict[str, str] = {}  # pod uid -> key
        self.last: dict[str, core_pb2.Pod] = {}  # pod uid -> its latest version
        self.ordinals: dict[str, int] = {}  # owner -> pods made for it so far

    def observe(self, e: Entry) -> None:
        if e.pod is not None:
            self._pod(e, e.pod)
        elif e.event is not None and e.type != "DELETED":
            self._event(e.event)

    def _key(self, pod: core_pb2.Pod) -> str:
        uid = pod.metadata.uid
        key = self.keys.get(uid)
        if key is None:
            ns = pod.metadata.namespace or "default"
            owner = next((r for r in pod.metadata.owner_references if r.controller), None)
            if owner is None:
                key = f"{ns}/{pod.metadata.name}"
            else:
                who = f"{ns}/{owner.kind.lower()}/{owner.name}"
                self.ordinals[who] = self.ordinals.get(who, 0) + 1
                key = f"{who}#{self.ordinals[who]}"
            self.keys[uid] = key
        return key

    def _pod(self, e: Entry, pod: core_pb2.Pod) -> None:
        key = self._key(pod)
        out = self.pods.setdefault(key, PodOutcome(key))
        prev = self.last.get(pod.metadata.uid)
        self.last[pod.metadata.uid] = pod
        if pod.spec.node_name and (prev is None or not prev.spec.node_name):
            out.node, out.bindings = pod.spec.node_name, out.bindings + 1
        if prev is not None:
            old = {c.name: _resources(c) for c in prev.spec.containers}
            changed = [_resources(c) for c in pod.spec.containers if _resources(c) != old.get(c.name)]
            if changed:
                out.resizes.append(Resize("; ".join(changed)))
        elif e.type == "ADDED":
            out.deleted = False  # a pod of the same name again
        if out.resizes:
            self._resize_state(out.resizes[-1], pod)
        if podconditions.is_disruption_target(pod, podconditions.PREEMPTION_BY_SCHEDULER) and not out.preempted_by:
            out.preempted_by = UNKNOWN_PREEMPTOR
        out.phase, out.reason = pod.status.phase, pod.status.reason
        statuses = [*pod.status.container_statuses]
        allocated = [f"{s.name} " + " ".join(f"{r}={s.allocated_resources[r]}" for r in ("cpu", "memory")
                                             if r in s.allocated_resources)
                     for s in statuses if s.allocated_resources]
        if allocated:
            out.allocated = "; ".join(allocated)
        if e.type == "DELETED":
            out.deleted = True
            self.last.pop(pod.metadata.uid, None)

    @staticmethod
    def _resize_state(r: Resize, pod: core_pb2.Pod) -> None:
        pending = podconditions.get_condition(pod.status, RESIZE_PENDING)
        if pending is not None and pending.status == "True" and pending.reason in ("Deferred", "Infeasible"):
            r.reach(pending.reason.lower())
        elif pending is None and podconditions.get_condition(pod.status, RESIZE_IN_PROGRESS) is None \
                and pod.status.container_statuses and _actuated(pod):
            r.reach("completed")

    def _event(self, ev: core_pb2.Event) -> None:
        if ev.involved_object.kind != "Pod":
            return
        key = self.keys.get(ev.involved_object.uid) or f"{ev.involved_object.namespace}/{ev.involved_object.name}"
        out = self.pods.get(key)
        if out is None:
            return
        if ev.reason == "Preempted":
            rel = ev.related
            out.preempted_by = self.keys.get(rel.uid) or (f"{rel.namespace}/{rel.name}" if rel.name
                                                         else UNKNOWN_PREEMPTOR)
        elif ev.reason == "ResizeCompleted" and out.resizes:
            out.resizes[-1].reach("completed")
