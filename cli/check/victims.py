"""A pod's life as a preemption victim, and the ``Preempted`` events that name one, as the history
shows them: what the preemption rules share."""

from __future__ import annotations

from dataclasses import dataclass

from cli.check.framework import Entry, World
from machinery.api import core_pb2


@dataclass
class Victim:
    """A pod's life as a preemption victim: going from ``since`` until ``deleted`` (or finished:
    Succeeded or Failed, when it holds nothing on its node any more)."""

    since: int | None = None  # first DisruptionTarget mark or deletionTimestamp
    marked: int | None = None  # the revision the mark was last written (first, or rewritten)
    mark: str = ""  # the mark's lastTransitionTime: a new one is a new mark
    deleted: int | None = None

    def going_at(self, rev: int) -> bool:
        return self.since is not None and self.since <= rev and (self.deleted is None or self.deleted > rev)


def _preemption_mark(pod: core_pb2.Pod) -> core_pb2.PodCondition | None:
    for c in pod.status.conditions:
        if c.type == "DisruptionTarget" and c.status == "True" and c.reason == "PreemptionByScheduler":
            return c
    return None


def follow_victim(victims: dict[str, Victim], e: Entry, pod: core_pb2.Pod) -> bool:
    """Follow a pod's life as a victim through its entry ``e`` (of ``pod``). True when ``e``
    writes a new preemption mark (the first, or one with a new lastTransitionTime)."""
    uid = pod.metadata.uid
    if e.type == "DELETED" or pod.status.phase in ("Succeeded", "Failed"):
        # Gone, or finished: a finished pod holds nothing on its node (the scheduler's informer
        # no longer lists it, the kubelet no longer counts it), so it is no longer going.
        v = victims.get(uid)
        if v is not None and v.deleted is None:
            v.deleted = e.rev
        return False
    mark = _preemption_mark(pod)
    if mark is None and not pod.metadata.deletion_timestamp:
        return False
    v = victims.setdefault(uid, Victim())
    if v.since is None:
        v.since = e.rev
    if mark is not None and (v.marked is None or mark.last_transition_time != v.mark):
        v.marked, v.mark = e.rev, mark.last_transition_time
        return True
    return False


def new_naming(counts: dict[tuple[str, str], int], e: Entry, ev: core_pb2.Event) -> bool:
    """A ``Preempted`` event ``ev`` (entry ``e``) written (ADDED) or its count bumped names its
    victim anew; another field changed does not. ``counts`` keeps each event's last count."""
    key = (e.namespace, e.name)
    count = max(ev.count, 1)
    if count <= counts.get(key, 0):
        return False
    counts[key] = count
    return True


def uid_of(world: World, namespace: str, name: str) -> str:
    """The uid of the pod ``namespace/name`` as ``world`` has it; "" if it has no such pod."""
    pod = world.pod(namespace, name)
    return pod.metadata.uid if pod is not None else ""
