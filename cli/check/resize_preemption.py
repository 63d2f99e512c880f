"""The rule on preemptions for an in-place resize (KEP-5836): ``one-victim-set-per-resize``."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cli.check.framework import Entry, Rule, Violation, World
from cli.check.victims import Victim, follow_victim, new_naming, uid_of
from machinery import resources
from machinery.api import core_pb2


@dataclass(frozen=True)
class _ResizeRequest:
    """One in-place resize request: the pod's uid and the metadata.generation the resize set (the
    apiserver bumps the generation on every resize)."""

    uid: str
    generation: int

    def __str__(self) -> str:
        return f"{self.uid}/{self.generation}"


def _deferred_request(pod: core_pb2.Pod) -> _ResizeRequest | None:
    """The request of a bound pod whose resize is Deferred (PodResizePending=True, reason
    Deferred: KEP-5836 "Identify Deferred Status"), else None."""
    if not pod.spec.node_name or resources.resize_status(pod) != resources.RESIZE_DEFERRED:
        return None
    return _ResizeRequest(pod.metadata.uid, pod.metadata.generation)


@dataclass(frozen=True)
class _Naming:
    """A ``Preempted`` event of a resize preemption: ``victim`` named for ``request`` at ``rev``."""

    rev: int
    request: _ResizeRequest
    preemptor: str  # namespace/name
    victim: str  # uid
    start: int  # the victim's last mark before ``rev``, or ``rev`` if it had none


@dataclass(frozen=True)
class _Mark:
    """A preemption mark written at ``rev`` on ``victim``, and the requests that may have made it:
    those Deferred then on the victim's node, of a pod of higher priority than the victim."""

    rev: int
    victim: str  # uid
    requests: frozenset[_ResizeRequest]


class OneVictimSetPerResize(Rule):
    """A Deferred resize preempts once: no new victim for the same request while an earlier one
    is still going.

    KEP-5836 (Scheduler Preemption for In-Place Pod Resize): a pod bound to a node whose in-place
    resize is Deferred (PodResizePending=True, reason Deferred) makes the scheduler preempt
    lower-priority pods on its own node. Victims get the DisruptionTarget condition (reason
    PreemptionByScheduler) and a graceful delete; once all victims of one preemption were asked
    to go the scheduler writes one ``Preempted`` event per victim (involvedObject: the victim,
    related: the preemptor). A resize request is the pod's uid and metadata.generation. The KEP's
    "Tracking Preemption Nominations to Avoid Double Preemption" describes double preemption: a
    victim with a long grace period, or a scheduler restarted mid-preemption, lets the scheduler
    choose new victims for the same request while earlier ones are still terminating. Its alpha
    (Option 1) accepts that; Option 4 takes the pod's spec.nodeName as its nomination and refuses
    to preempt while lower-priority pods there are terminating by preemption. This rule reports
    what Option 4 forbids. (``no-preemption-while-victims-going`` goes by status.nominatedNodeName,
    which a bound preemptor does not have: it never looks at resize preemptions.)

    From the history: a ``Preempted`` event newly naming a victim V (ADDED, or its count bumped)
    whose preemptor (related, as the world shows it then) is bound with a Deferred resize is a
    resize preemption for request R (the preemptor's uid and generation then). V starts at its
    last mark (the revision its DisruptionTarget condition was written, or rewritten), or at the
    event if it was never marked. The earlier victims of R are:

    - the pods an earlier ``Preempted`` event named for R, written before V started: a
      preemption's events come after all its marks, so an event before V's mark ends an earlier
      preemption;
    - orphans: pods marked before V started, at a revision when they were on the node of R's pod,
      of lower priority than it, and R was Deferred — that no ``Preempted`` event ever names (the
      scheduler that marked them died before writing its events). Only the whole history tells
      that, so the rule decides in ``finish``.

    The rule is broken, at V's event, when an earlier victim W of R other than V is going when V
    starts: from its first mark or deletionTimestamp until it finishes (Succeeded or Failed) or is
    DELETED. Each victim is reported once. Not counted: V itself named again by a later decision
    (the scheduler skips deleting a victim already going), victims of another request (a new
    generation, another preemptor), preemptions for unbound pods, earlier victims already deleted
    when V starts.

    Limits, as the history cannot tell them apart: events are best effort (``machinery.events``
    drops them when its queue is full, a killed scheduler leaves the rest unwritten), so an
    unnamed victim of V's own preemption marked before V reads as an orphan; a victim never marked
    (a pod rejected at Permit) starts at its event, after its own preemption's earlier events.
    """

    name = "one-victim-set-per-resize"
    deciders = ("scheduler",)

    def __init__(self) -> None:
        self.victims: dict[str, Victim] = {}  # pod uid -> its life as a victim
        self.names: dict[str, str] = {}  # pod uid -> namespace/name
        self.counts: dict[tuple[str, str], int] = {}  # Preempted event -> its count
        self.deferred: dict[str, dict[str, tuple[int, _ResizeRequest]]] = {}  # node -> uid -> (priority, request)
        self.deferred_on: dict[str, str] = {}  # uid -> the node it is in ``deferred`` under
        self.marks: list[_Mark] = []  # marks some Deferred request may have made
        self.named: set[str] = set()  # uids any Preempted event named
        self.namings: list[_Naming] = []  # resize preemptions' namings, in revision order

    def observe(self, e: Entry, world: World) -> list[Violation]:
        pod, ev = e.pod, e.event
        if pod is not None:
            self._pod(e, pod)
        elif ev is not None and ev.reason == "Preempted" and e.type in ("ADDED", "MODIFIED"):
            self._preempted(e, ev, world)
        return []

    def _pod(self, e: Entry, pod: core_pb2.Pod) -> None:
        uid = pod.metadata.uid
        self.names[uid] = f"{e.namespace}/{e.name}"
        node = self.deferred_on.pop(uid, None)
        if node is not None:
            self.deferred[node].pop(uid, None)
        request = _deferred_request(pod) if e.type != "DELETED" else None
        if request is not None:
            self.deferred.setdefault(pod.spec.node_name, {})[uid] = (pod.spec.priority, request)
            self.deferred_on[uid] = pod.spec.node_name
        if not follow_victim(self.victims, e, pod) or not pod.spec.node_name:
            return
        requests = frozenset(r for other, (priority, r) in self.deferred.get(pod.spec.node_name, {}).items()
                             if other != uid and priority > pod.spec.priority)
        if requests:
            self.marks.append(_Mark(e.rev, uid, requests))

    def _preempted(self, e: Entry, ev: core_pb2.Event, world: World) -> None:
        victim_uid = ev.involved_object.uid or uid_of(world, ev.involved_object.namespace, ev.involved_object.name)
        if victim_uid:
            self.named.add(victim_uid)
        if not new_naming(self.counts, e, ev) or not victim_uid:
            return
        preemptor = world.pod(ev.related.namespace, ev.related.name)
        if preemptor is None or (ev.related.uid and ev.related.uid != preemptor.metadata.uid):
            return
        request = _deferred_request(preemptor)
        if request is None:
            return  # not a resize preemption
        victim = self.victims.get(victim_uid)
        start = victim.marked if victim is not None and victim.marked is not None else e.rev
        self.namings.append(_Naming(e.rev, request, f"{ev.related.namespace}/{ev.related.name}", victim_uid, start))

    def finish(self, world: World) -> list[Violation]:
        orphans: dict[_ResizeRequest, list[_Mark]] = {}
        for m in self.marks:
            if m.victim not in self.named:
                for r in m.requests:
                    orphans.setdefault(r, []).append(m)
        out: list[Violation] = []
        reported: set[str] = set()
        for n in self.namings:
            if n.victim in reported:
                continue
            earlier = self._earlier_going(n, orphans.get(n.request, ()))
            if earlier is None:
                continue
            reported.add(n.victim)
            old_uid, detail = earlier
            out.append(Violation(self.name, n.rev, f"resize of {n.preemptor} (request {n.request}) preempted "
                                                   f"{self.names.get(n.victim, n.victim)} at rev {n.start} while "
                                                   f"{self.names.get(old_uid, old_uid)}, a victim of an earlier "
                                                   f"preemption for the same request ({detail}), was still going"))
        return out

    def _earlier_going(self, n: _Naming, orphans: Iterable[_Mark]) -> tuple[str, str] | None:
        """The first earlier victim of ``n``'s request, other than its victim, still going when
        it started: (its uid, when it was marked or named); None if there is none."""
        found: list[tuple[int, str, str]] = []
        for o in self.namings:
            if o.request == n.request and o.rev < n.start and o.victim != n.victim:
                detail = f"marked at rev {o.start}, named at rev {o.rev}" if o.start < o.rev else \
                    f"named at rev {o.rev}"
                found.append((o.start, o.victim, detail))
        for m in orphans:  # never named, so never ``n``'s victim
            if m.rev < n.start:
                found.append((m.rev, m.victim, f"marked at rev {m.rev}, never named"))
        for _, uid, detail in sorted(found, key=lambda f: f[0]):
            old = self.victims.get(uid)
            if old is not None and old.going_at(n.start):
                return uid, detail
        return None
