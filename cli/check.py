"""``kplane check``: replay the event log and check the cluster's invariants.

Shaped like etcd's robustness tests: run, record (the revision-ordered history is the record),
validate. Each rule sees every entry in revision order and reports the revisions that break it;
any violation makes the command exit 1.

Rules:
- ``bound-at-most-once``: a pod's spec.nodeName goes from empty to a node once and never changes.
- ``allocated-within-allocatable``: at no revision do the kubelet-allocated requests
  (status.containerStatuses[].allocatedResources) of a node's pods exceed its allocatable.
- ``bound-requests-within-allocatable``: no binding over-commits a node — when a pod goes from
  unbound to bound, the requests of the node's pods not finished (Succeeded/Failed) fit its
  allocatable. Checked at bindings, the only moment the scheduler adds load: a pod created with
  spec.nodeName bypasses the scheduler (the kubelet admits it or preempts for it, KEP-1287's
  critical pods) and a resize is the kubelet's to allocate (the rule above); both still count
  towards the node. A pod counts with the kubelet's allocation once reported (a Deferred resize
  has not taken room yet), with its spec's requests before.
- ``actuated-within-allocated``: a container's actual resources (status...resources.requests)
  never show a value the kubelet had not allocated (KEP-1287: desired -> allocated -> actuated).
- ``preemption-victims-lower-priority``: every pod a ``Preempted`` event names was of lower
  priority than the pod that preempted it (the event's related object).
- ``no-preemption-while-victims-going``: a pod does not preempt again while a victim of its
  earlier preemption is still going — from the revision it got the DisruptionTarget condition
  (PreemptionByScheduler) or a deletionTimestamp until it is deleted (kube-scheduler
  DefaultPreemption's eligibility check, KEP-4832's victims in flight). See the rule's class.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from google.protobuf.message import Message

from machinery import resources
from machinery.api import core_pb2
from machinery.client import Client
from machinery.kinds import lookup


@dataclass
class Violation:
    rule: str
    rev: int
    message: str


@dataclass
class Entry:
    rev: int
    type: str
    kind: str
    namespace: str
    name: str
    obj: Message


class Rule:
    name = ""

    def observe(self, e: Entry, world: "World") -> list[Violation]:
        raise NotImplementedError


@dataclass
class World:
    """The latest state of every object, as of the entry being checked."""

    objects: dict[tuple[str, str, str], Message] = field(default_factory=dict)

    def apply(self, e: Entry) -> Message | None:
        key = (e.kind, e.namespace, e.name)
        prev = self.objects.get(key)
        if e.type == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = e.obj
        return prev


class BoundAtMostOnce(Rule):
    name = "bound-at-most-once"

    def __init__(self):
        self.bound: dict[str, tuple[str, int]] = {}

    def observe(self, e: Entry, world: World) -> list[Violation]:
        if e.kind != "Pod" or e.type == "DELETED":
            return []
        node = e.obj.spec.node_name
        if not node:
            return []
        uid = e.obj.metadata.uid
        first = self.bound.get(uid)
        if first is None:
            self.bound[uid] = (node, e.rev)
            return []
        if first[0] != node:
            return [Violation(self.name, e.rev, f"pod {e.namespace}/{e.name} bound to {first[0]} at rev {first[1]} "
                                                f"and to {node} at rev {e.rev}")]
        return []


def _allocated(pod: Message) -> dict[str, int]:
    total: dict[str, int] = {}
    for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses):
        total = resources.add(total, resources.to_resource_list(cs.allocated_resources))
    return total


class AllocatedWithinAllocatable(Rule):
    name = "allocated-within-allocatable"

    def __init__(self):
        self.used: dict[str, dict[str, int]] = {}  # node -> summed allocated requests
        self.counted: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pod -> (node, allocated)

    def observe(self, e: Entry, world: World) -> list[Violation]:
        if e.kind == "Pod":
            key = (e.namespace, e.name)
            before = self.counted.pop(key, None)
            if before is not None:
                self.used[before[0]] = resources.sub(self.used.get(before[0], {}), before[1])
            live = e.type != "DELETED" and e.obj.status.phase not in ("Succeeded", "Failed")
            node = e.obj.spec.node_name
            if live and node:
                alloc = _allocated(e.obj)
                self.counted[key] = (node, alloc)
                self.used[node] = resources.add(self.used.get(node, {}), alloc)
            if not node:
                return []
        elif e.kind == "Node" and e.type != "DELETED":
            node = e.name
        else:
            return []
        n = world.objects.get(("Node", "", node))
        if n is None or not n.status.allocatable:
            return []
        allocatable = resources.to_resource_list(n.status.allocatable)
        used = self.used.get(node, {})
        over = [r for r in ("cpu", "memory") if used.get(r, 0) > allocatable.get(r, 0)]
        if not over:
            return []
        detail = ", ".join(f"{r} {used[r]} > {allocatable.get(r, 0)}" for r in over)
        return [Violation(self.name, e.rev, f"node {node}: allocated {detail}")]


def _committed(pod: Message) -> dict[str, int]:
    """What a bound pod holds on its node: per container the kubelet's allocation where reported,
    the spec's requests otherwise, aggregated as the scheduler does (init phase, overhead)."""
    allocated = {cs.name: cs.allocated_resources
                 for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses)
                 if cs.allocated_resources}
    if allocated:
        copy = core_pb2.Pod()
        copy.CopyFrom(pod)
        for c in list(copy.spec.containers) + list(copy.spec.init_containers):
            if c.name in allocated:
                c.resources.requests.update(allocated[c.name])
        pod = copy
    return resources.pod_requests(pod, use_status_resources=False)


class BoundRequestsWithinAllocatable(Rule):
    name = "bound-requests-within-allocatable"

    def __init__(self):
        self.used: dict[str, dict[str, int]] = {}  # node -> summed requests of its pods not finished
        self.counted: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pod -> (node, requests)
        self.unbound: set[tuple[str, str]] = set()  # pods last seen not finished and not bound

    def observe(self, e: Entry, world: World) -> list[Violation]:
        if e.kind != "Pod":
            return []
        key = (e.namespace, e.name)
        before = self.counted.pop(key, None)
        if before is not None:
            self.used[before[0]] = resources.sub(self.used.get(before[0], {}), before[1])
        was_unbound = key in self.unbound
        self.unbound.discard(key)
        if e.type == "DELETED" or e.obj.status.phase in ("Succeeded", "Failed"):
            return []
        node = e.obj.spec.node_name
        if not node:
            self.unbound.add(key)
            return []
        requests = _committed(e.obj)
        self.counted[key] = (node, requests)
        self.used[node] = resources.add(self.used.get(node, {}), requests)
        if not was_unbound:
            return []
        n = world.objects.get(("Node", "", node))
        if n is None or not n.status.allocatable:
            return []
        allocatable = resources.to_resource_list(n.status.allocatable)
        used = self.used[node]
        over = [r for r in ("cpu", "memory") if used.get(r, 0) > allocatable.get(r, 0)]
        if not over:
            return []
        detail = ", ".join(f"{r} {used[r]} > {allocatable.get(r, 0)}" for r in over)
        return [Violation(self.name, e.rev, f"pod {e.namespace}/{e.name} bound to node {node}: requests of its "
                                            f"pods {detail}")]


class ActuatedWithinAllocated(Rule):
    name = "actuated-within-allocated"

    def __init__(self):
        self.seen: dict[tuple[str, str, str], set[int]] = {}

    def observe(self, e: Entry, world: World) -> list[Violation]:
        if e.kind != "Pod" or e.type == "DELETED":
            return []
        out = []
        uid = e.obj.metadata.uid
        for cs in list(e.obj.status.container_statuses) + list(e.obj.status.init_container_statuses):
            allocated = resources.to_resource_list(cs.allocated_resources)
            for r, v in allocated.items():
                self.seen.setdefault((uid, cs.name, r), set()).add(v)
            if not cs.HasField("resources"):
                continue
            for r, v in resources.to_resource_list(cs.resources.requests).items():
                known = self.seen.get((uid, cs.name, r))
                if known is not None and v not in known:
                    out.append(Violation(self.name, e.rev, f"pod {e.namespace}/{e.name} container {cs.name}: actual "
                                                           f"{r} {v} was never allocated (allocated: {sorted(known)})"))
        return out


class PreemptionVictimsLowerPriority(Rule):
    name = "preemption-victims-lower-priority"

    def observe(self, e: Entry, world: World) -> list[Violation]:
        if e.kind != "Event" or e.type != "ADDED" or e.obj.reason != "Preempted":
            return []
        victim_ref, preemptor_ref = e.obj.involved_object, e.obj.related
        if not preemptor_ref.name:
            return []
        victim = world.objects.get(("Pod", victim_ref.namespace, victim_ref.name))
        preemptor = world.objects.get(("Pod", preemptor_ref.namespace, preemptor_ref.name))
        if victim is None or preemptor is None:
            return []
        if victim.spec.priority >= preemptor.spec.priority:
            return [Violation(self.name, e.rev, f"pod {victim_ref.namespace}/{victim_ref.name} (priority "
                                                f"{victim.spec.priority}) was preempted by {preemptor_ref.name} "
                                                f"(priority {preemptor.spec.priority})")]
        return []


@dataclass
class _Victim:
    """A pod's life as a preemption victim: going from ``since`` until ``deleted``."""

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


class NoPreemptionWhileVictimsGoing(Rule):
    """A pod preempts again only once every victim of its earlier preemption is gone.

    kube-scheduler's DefaultPreemption refuses a preemptor whose nominated node still has
    lower-priority pods terminating because of a preemption ("not eligible due to a terminating
    pod on the nominated node."), and its async preemption (KEP-4832) keeps the victims in flight
    so that the same pod does not start another preemption meanwhile: a second victim set while
    the first is still going is over-preemption.

    From the history: a ``Preempted`` event written (ADDED, or its count bumped) names a victim
    (involvedObject) and its preemptor (related). A victim is going from the revision it gets the
    DisruptionTarget condition (reason PreemptionByScheduler) or a deletionTimestamp until it is
    DELETED. The scheduler writes a preemption's events once every victim of it was asked to go,
    so all marks of one preemption come before its events: a victim named for the preemptor that
    was (re)marked after an earlier victim of the same preemptor had been named — or the same
    victim named twice — belongs to a later preemption. If an earlier victim is still going then,
    the rule is broken. Not counted, as kube-scheduler allows a new preemption there: the
    preemptor had no nomination, it lost it in between (a higher-priority preemptor cleared it),
    or its nominated node was cordoned, tainted or deleted in between (it may have become
    UnschedulableAndUnresolvable for the pod).
    """

    name = "no-preemption-while-victims-going"

    def __init__(self):
        self.victims: dict[str, _Victim] = {}  # pod uid -> its life as a victim
        self.named: dict[str, list[tuple[str, int]]] = {}  # preemptor uid -> (victim uid, rev named)
        self.counts: dict[tuple[str, str], int] = {}  # Preempted event -> its count
        self.nominated: dict[str, str] = {}  # pod uid -> status.nominatedNodeName
        self.cleared: dict[str, list[int]] = {}  # pod uid -> revisions its nomination was cleared
        self.node_changed: dict[str, list[int]] = {}  # node -> revisions it was cordoned, tainted or deleted
        self.node_spec: dict[str, tuple[bool, set[str]]] = {}  # node -> (unschedulable, taints)
        self.names: dict[str, str] = {}  # pod uid -> namespace/name

    def observe(self, e: Entry, world: World) -> list[Violation]:
        if e.kind == "Pod":
            self._pod(e)
        elif e.kind == "Node":
            self._node(e)
        elif e.kind == "Event" and e.obj.reason == "Preempted" and e.type in ("ADDED", "MODIFIED"):
            return self._preempted(e, world)
        return []

    def _pod(self, e: Entry) -> None:
        pod, uid = e.obj, e.obj.metadata.uid
        self.names[uid] = f"{e.namespace}/{e.name}"
        if e.type == "DELETED":
            v = self.victims.get(uid)
            if v is not None and v.deleted is None:
                v.deleted = e.rev
            self.nominated.pop(uid, None)
            return
        node = pod.status.nominated_node_name
        if self.nominated.get(uid, "") and not node:
            self.cleared.setdefault(uid, []).append(e.rev)
        self.nominated[uid] = node
        mark = _preemption_mark(pod)
        if mark is None and not pod.metadata.deletion_timestamp:
            return
        v = self.victims.setdefault(uid, _Victim())
        if v.since is None:
            v.since = e.rev
        if mark is not None and (v.marked is None or mark.last_transition_time != v.mark):
            v.marked, v.mark = e.rev, mark.last_transition_time

    def _node(self, e: Entry) -> None:
        cordoned = bool(e.obj.spec.unschedulable)
        taints = {f"{t.key}={t.value}:{t.effect}" for t in e.obj.spec.taints}
        before = self.node_spec.get(e.name)
        if e.type == "DELETED" or (before is not None and ((cordoned and not before[0]) or taints - before[1])):
            self.node_changed.setdefault(e.name, []).append(e.rev)
        self.node_spec[e.name] = (cordoned, taints)

    def _preempted(self, e: Entry, world: World) -> list[Violation]:
        ev = e.obj
        key = (e.namespace, e.name)
        count = max(ev.count, 1)
        if count <= self.counts.get(key, 0):
            return []  # not a new naming (another field changed)
        self.counts[key] = count
        victim_uid = ev.involved_object.uid or _uid_of(world, ev.involved_object.namespace, ev.involved_object.name)
        preemptor_uid = ev.related.uid or _uid_of(world, ev.related.namespace, ev.related.name)
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


def _uid_of(world: World, namespace: str, name: str) -> str:
    pod = world.objects.get(("Pod", namespace, name))
    return pod.metadata.uid if pod is not None else ""


def rules() -> list[Rule]:
    return [BoundAtMostOnce(), AllocatedWithinAllocatable(), BoundRequestsWithinAllocatable(),
            ActuatedWithinAllocated(), PreemptionVictimsLowerPriority(), NoPreemptionWhileVictimsGoing()]


def check_entries(entries, active: list[Rule] | None = None) -> list[Violation]:
    active = active if active is not None else rules()
    world = World()
    violations: list[Violation] = []
    for e in entries:
        world.apply(e)
        for r in active:
            violations.extend(r.observe(e, world))
    return violations


async def entries_of(client: Client, since: int = 0):
    async for resp in client.history(since):
        for h in resp.entries:
            kind = lookup(h.kind)
            obj = kind.message()
            h.object.Unpack(obj)
            yield Entry(h.rev, h.type, h.kind, h.namespace, h.name, obj)


async def run(client: Client, since: int = 0) -> int:
    entries = [e async for e in entries_of(client, since)]
    violations = check_entries(entries)
    last = entries[-1].rev if entries else 0
    names = ", ".join(r.name for r in rules())
    if not violations:
        print(f"ok: {len(entries)} revisions checked (up to {last}): {names}")
        return 0
    for v in violations:
        print(f"rev {v.rev}: {v.rule}: {v.message}", file=sys.stderr)
    revs = sorted({v.rev for v in violations})
    print(f"FAILED: {len(violations)} violation(s) at revisions {', '.join(map(str, revs))}", file=sys.stderr)
    return 1
