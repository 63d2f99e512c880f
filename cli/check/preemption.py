"""Rules on the scheduler's preemptions: ``preemption-victims-lower-priority`` and
``no-preemption-while-victims-going`` (kube-scheduler DefaultPreemption, KEP-4832)."""

from __future__ import annotations

from cli.check.framework import Entry, Rule, Violation, World
from cli.check.victims import Victim, follow_victim, new_naming, uid_of
from machinery.api import core_pb2


class PreemptionVictimsLowerPriority(Rule):
    """Every pod a ``Preempted`` event names was of lower priority than the pod that preempted it (the
    event's related object)."""

    name = "preemption-victims-lower-priority"
    deciders = ("scheduler",)

    def observe(self, e: Entry, world: World) -> list[Violation]:
        ev = e.event
        if ev is None or e.type != "ADDED" or ev.reason != "Preempted":
            return []
        victim_ref, preemptor_ref = ev.involved_object, ev.related
        if not preemptor_ref.name:
            return []
        victim = world.pod(victim_ref.namespace, victim_ref.name)
        preemptor = world.pod(preemptor_ref.namespace, preemptor_ref.name)
        if victim is None or preemptor is None:
            return []
        if victim.spec.priority >= preemptor.spec.priority:
            return [Violation(self.name, e.rev, f"pod {victim_ref.namespace}/{victim_ref.name} (priority "
                                                f"{victim.spec.priority}) was preempted by {preemptor_ref.name} "
                                                f"(priority {preemptor.spec.priority})")]
        return []


class NoPreemptionWhileVictimsGoing(Rule):
    """A pod preempts again only once every victim of its earlier preemption is gone.

    kube-scheduler's DefaultPreemption refuses a preemptor whose nominated node still has
    lower-priority pods terminating because of a preemption ("not eligible due to a terminating
    pod on the nominated node."), and its async preemption (KEP-4832) keeps the victims in flight
    so that the same pod does not start another preemption meanwhile: a second victim set while
    the first is still going is over-preemption.

    From the history: a ``Preempted`` event written (ADDED, or its count bumped) names a victim
    (involvedObject) and its preemptor (related). A victim is going from the revision it gets the
    DisruptionTarget condition (reason PreemptionByScheduler) or a deletionTimestamp until it
    finishes (Succeeded or Failed) or is DELETED. The scheduler writes a preemption's events once
    every victim of it was asked to go, so all marks of one preemption come before its events: a
    victim named for the preemptor that was (re)marked after an earlier victim of the same
    preemptor had been named — or the same victim named twice — belongs to a later preemption. If
    an earlier victim is still going then, the rule is broken. Not counted, as kube-scheduler
    allows a new preemption there: the preemptor had no nomination, it lost it in between (a
    higher-priority preemptor cleared it), or its nominated node was cordoned, tainted or deleted
    in between (it may have become UnschedulableAndUnresolvable for the pod).
    """

    name = "no-preemption-while-victims-going"
    # the scheduler retries the preemptor; a kubelet that sees the deletion late keeps the victims going
    deciders = ("scheduler", "kubelet")

    def __init__(self) -> None:
        self.victims: dict[str, Victim] = {}  # pod uid -> its life as a victim
        self.named: dict[str, list[tuple[str, int]]] = {}  # preemptor uid -> (victim uid, rev named)
        self.counts: dict[tuple[str, str], int] = {}  # Preempted event -> its count
        self.nominated: dict[str, str] = {}  # pod uid -> status.nominatedNodeName
        self.cleared: dict[str, list[int]] = {}  # pod uid -> revisions its nomination was cleared
        self.node_changed: dict[str, list[int]] = {}  # node -> revisions it was cordoned, tainted or deleted
        self.node_spec: dict[str, tuple[bool, set[str]]] = {}  # node -> (unschedulable, taints)
        self.names: dict[str, str] = {}  # pod uid -> namespace/name

    def observe(self, e: Entry, world: World) -> list[Violation]:
        pod, node, ev = e.pod, e.node, e.event
        if pod is not None:
            self._pod(e, pod)
        elif node is not None:
            self._node(e, node)
        elif ev is not None and ev.reason == "Preempted" and e.type in ("ADDED", "MODIFIED"):
            return self._preempted(e, ev, world)
        return []

    def _pod(self, e: Entry, pod: core_pb2.Pod) -> None:
        uid = pod.metadata.uid
        self.names[uid] = f"{e.namespace}/{e.name}"
        follow_victim(self.victims, e, pod)
        if e.type == "DELETED":
            self.nominated.pop(uid, None)
            return
        node = pod.status.nominated_node_name
        if self.nominated.get(uid, "") and not node:
            self.cleared.setdefault(uid, []).append(e.rev)
        self.nominated[uid] = node

    def _node(self, e: Entry, node: core_pb2.Node) -> None:
        cordoned = bool(node.spec.unschedulable)
        taints = {f"{t.key}={t.value}:{t.effect}" for t in node.spec.taints}
        before = self.node_spec.get(e.name)
        if e.type == "DELETED" or (before is not None and ((cordoned and not before[0]) or taints - before[1])):
            self.node_changed.setdefault(e.name, []).append(e.rev)
        self.node_spec[e.name] = (cordoned, taints)

    def _preempted(self, e: Entry, ev: core_pb2.Event, world: World) -> list[Violation]:
        if not new_naming(self.counts, e, ev):
            return []
        victim_uid = ev.involved_object.uid or uid_of(world, ev.involved_object.namespace, ev.involved_object.name)
        preemptor_uid = ev.related.uid or uid_of(world, ev.related.namespace, ev.related.name)
        if not victim_uid or not preemptor_uid:
            return []
        victim = self.victims.get(victim_uid)
        started = victim.marked if victim is not None and victim.marked is not None else e.rev
        named = self.named.setdefault(preemptor_uid, [])
        out: list[Violation] = []
        for old_uid, named_rev in named:
            if named_rev < started:
                at = started  # (re)marked after an earlier victim was named: a later preemption
            elif old_uid == victim_uid:
                at = e.rev  # the same victim named twice: a later preemption
            else:
                continue  # the same preemption
            old = self.victims.get(old_uid)
            if old is None or not old.going_at(at) or self._allowed(preemptor_uid, named_rev, at):
                continue
            out.append(Violation(self.name, e.rev, f"pod {ev.related.namespace}/{ev.related.name} preempted "
                                                   f"{ev.involved_object.namespace}/{ev.involved_object.name} at rev "
                                                   f"{at} while {self.names.get(old_uid, old_uid)}, a victim of its "
                                                   f"preemption named at rev {named_rev}, was still going"))
            break
        named.append((victim_uid, e.rev))
        return out

    def _allowed(self, preemptor_uid: str, since: int, at: int) -> bool:
        """kube-scheduler lets the pod preempt anew: not nominated, its nomination cleared, or its
        nominated node cordoned, tainted or deleted since ``since``."""
        node = self.nominated.get(preemptor_uid, "")
        if not node:
            return True
        if any(since < rev <= at for rev in self.cleared.get(preemptor_uid, ())):
            return True
        return any(since < rev <= at for rev in self.node_changed.get(node, ()))
