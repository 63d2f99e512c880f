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
  (PreemptionByScheduler) or a deletionTimestamp until it finishes or is deleted (kube-scheduler
  DefaultPreemption's eligibility check, KEP-4832's victims in flight). See the rule's class.
- ``one-victim-set-per-resize``: a pod whose in-place resize is Deferred preempts on its own node
  once per resize request (its uid and metadata.generation): no new victim is chosen for the same
  request while a victim of an earlier preemption for it — named by a Preempted event, or marked
  on the node and never named (its scheduler died first) — is still going (KEP-5836 "Tracking
  Preemption Nominations to Avoid Double Preemption"). See the rule's class.
- ``deployment-surge-and-unavailability``: a RollingUpdate Deployment's pod created never brings its
  pods (through its ReplicaSets; not finished, not being deleted) over replicas + maxSurge, and once
  a rollout started fully available no deletion of an available pod leaves fewer than replicas -
  maxUnavailable available (Kubernetes' deployment controller). See the rule's class.
- ``device-allocated-once``: at no revision do two ResourceClaims' ``status.allocation`` name the
  same device (driver, pool, device): a device is free for another claim only once its claim was
  deallocated or deleted (Kubernetes docs: Dynamic Resource Allocation, "tracking which of those
  resources have already been allocated to existing ResourceClaims").
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from controllers.deploymentutil import resolve_fenceposts
from machinery import resources, timeutil
from machinery.api import apps_pb2, coordination_pb2, core_pb2, resource_pb2
from machinery.client import Client
from machinery.kinds import lookup, object_meta


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

    @property
    def pod(self) -> core_pb2.Pod | None:
        """The object, when this is a pod's entry."""
        return self.obj if isinstance(self.obj, core_pb2.Pod) else None

    @property
    def node(self) -> core_pb2.Node | None:
        """The object, when this is a node's entry."""
        return self.obj if isinstance(self.obj, core_pb2.Node) else None

    @property
    def event(self) -> core_pb2.Event | None:
        """The object, when this is an event's entry."""
        return self.obj if isinstance(self.obj, core_pb2.Event) else None


class Rule:
    name = ""

    def observe(self, e: Entry, world: "World") -> list[Violation]:
        """The violations entry ``e`` shows; ``world`` is the state with ``e`` applied."""
        raise NotImplementedError

    def finish(self, world: "World") -> list[Violation]:
        """The violations only the whole history shows, once every entry was observed (each at the
        revision it concerns). ``world`` is the state after the last entry."""
        return []


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

    def pod(self, namespace: str, name: str) -> core_pb2.Pod | None:
        obj = self.objects.get(("Pod", namespace, name))
        return obj if isinstance(obj, core_pb2.Pod) else None

    def node(self, name: str) -> core_pb2.Node | None:
        obj = self.objects.get(("Node", "", name))
        return obj if isinstance(obj, core_pb2.Node) else None


class BoundAtMostOnce(Rule):
    name = "bound-at-most-once"

    def __init__(self) -> None:
        self.bound: dict[str, tuple[str, int]] = {}

    def observe(self, e: Entry, world: World) -> list[Violation]:
        pod = e.pod
        if pod is None or e.type == "DELETED":
            return []
        node = pod.spec.node_name
        if not node:
            return []
        uid = pod.metadata.uid
        first = self.bound.get(uid)
        if first is None:
            self.bound[uid] = (node, e.rev)
            return []
        if first[0] != node:
            return [Violation(self.name, e.rev, f"pod {e.namespace}/{e.name} bound to {first[0]} at rev {first[1]} "
                                                f"and to {node} at rev {e.rev}")]
        return []


def _allocated(pod: core_pb2.Pod) -> dict[str, int]:
    total: dict[str, int] = {}
    for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses):
        total = resources.add(total, resources.to_resource_list(cs.allocated_resources))
    return total


class AllocatedWithinAllocatable(Rule):
    name = "allocated-within-allocatable"

    def __init__(self) -> None:
        self.used: dict[str, dict[str, int]] = {}  # node -> summed allocated requests
        self.counted: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pod -> (node, allocated)

    def observe(self, e: Entry, world: World) -> list[Violation]:
        pod = e.pod
        if pod is not None:
            key = (e.namespace, e.name)
            before = self.counted.pop(key, None)
            if before is not None:
                self.used[before[0]] = resources.sub(self.used.get(before[0], {}), before[1])
            live = e.type != "DELETED" and pod.status.phase not in ("Succeeded", "Failed")
            node = pod.spec.node_name
            if live and node:
                alloc = _allocated(pod)
                self.counted[key] = (node, alloc)
                self.used[node] = resources.add(self.used.get(node, {}), alloc)
            if not node:
                return []
        elif e.kind == "Node" and e.type != "DELETED":
            node = e.name
        else:
            return []
        n = world.node(node)
        if n is None or not n.status.allocatable:
            return []
        allocatable = resources.to_resource_list(n.status.allocatable)
        used = self.used.get(node, {})
        over = [r for r in ("cpu", "memory") if used.get(r, 0) > allocatable.get(r, 0)]
        if not over:
            return []
        detail = ", ".join(f"{r} {used[r]} > {allocatable.get(r, 0)}" for r in over)
        return [Violation(self.name, e.rev, f"node {node}: allocated {detail}")]


def _committed(pod: core_pb2.Pod) -> dict[str, int]:
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

    def __init__(self) -> None:
        self.used: dict[str, dict[str, int]] = {}  # node -> summed requests of its pods not finished
        self.counted: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pod -> (node, requests)
        self.unbound: set[tuple[str, str]] = set()  # pods last seen not finished and not bound

    def observe(self, e: Entry, world: World) -> list[Violation]:
        pod = e.pod
        if pod is None:
            return []
        key = (e.namespace, e.name)
        before = self.counted.pop(key, None)
        if before is not None:
            self.used[before[0]] = resources.sub(self.used.get(before[0], {}), before[1])
        was_unbound = key in self.unbound
        self.unbound.discard(key)
        if e.type == "DELETED" or pod.status.phase in ("Succeeded", "Failed"):
            return []
        node = pod.spec.node_name
        if not node:
            self.unbound.add(key)
            return []
        requests = _committed(pod)
        self.counted[key] = (node, requests)
        self.used[node] = resources.add(self.used.get(node, {}), requests)
        if not was_unbound:
            return []
        n = world.node(node)
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

    def __init__(self) -> None:
        self.seen: dict[tuple[str, str, str], set[int]] = {}

    def observe(self, e: Entry, world: World) -> list[Violation]:
        pod = e.pod
        if pod is None or e.type == "DELETED":
            return []
        out = []
        uid = pod.metadata.uid
        for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses):
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


@dataclass
class _Victim:
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


def _follow_victim(victims: dict[str, _Victim], e: Entry, pod: core_pb2.Pod) -> bool:
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
    v = victims.setdefault(uid, _Victim())
    if v.since is None:
        v.since = e.rev
    if mark is not None and (v.marked is None or mark.last_transition_time != v.mark):
        v.marked, v.mark = e.rev, mark.last_transition_time
        return True
    return False


def _new_naming(counts: dict[tuple[str, str], int], e: Entry, ev: core_pb2.Event) -> bool:
    """A ``Preempted`` event ``ev`` (entry ``e``) written (ADDED) or its count bumped names its
    victim anew; another field changed does not. ``counts`` keeps each event's last count."""
    key = (e.namespace, e.name)
    count = max(ev.count, 1)
    if count <= counts.get(key, 0):
        return False
    counts[key] = count
    return True


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

    def __init__(self) -> None:
        self.victims: dict[str, _Victim] = {}  # pod uid -> its life as a victim
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
        _follow_victim(self.victims, e, pod)
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
        if not _new_naming(self.counts, e, ev):
            return []
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

    def __init__(self) -> None:
        self.victims: dict[str, _Victim] = {}  # pod uid -> its life as a victim
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
        if not _follow_victim(self.victims, e, pod) or not pod.spec.node_name:
            return
        requests = frozenset(r for other, (priority, r) in self.deferred.get(pod.spec.node_name, {}).items()
                             if other != uid and priority > pod.spec.priority)
        if requests:
            self.marks.append(_Mark(e.rev, uid, requests))

    def _preempted(self, e: Entry, ev: core_pb2.Event, world: World) -> None:
        victim_uid = ev.involved_object.uid or _uid_of(world, ev.involved_object.namespace, ev.involved_object.name)
        if victim_uid:
            self.named.add(victim_uid)
        if not _new_naming(self.counts, e, ev) or not victim_uid:
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


@dataclass
class _Workload:
    """A Deployment as the rule follows it: its bounds at the last revision seen."""

    key: str  # namespace/name
    rolling: bool
    replicas: int
    surge: int
    unavailable: int
    min_ready: int
    template: bytes
    armed: bool = False  # a rollout that started fully available is under way


@dataclass
class _OwnedPod:
    """A pod as the rule follows it: its ReplicaSet (controller uid) and what it holds."""

    name: str  # namespace/name
    rs: str  # its controller's uid ("" if none)
    live: bool  # neither Succeeded/Failed nor being deleted
    ready_since: float | None  # when it became Ready (None if not Ready)
    disrupted: bool  # a DisruptionTarget condition: evicted or preempted, not a controller's choice


def _timestamp(text: str) -> float | None:
    try:
        t = timeutil.parse(text)
    except ValueError:
        return None
    return t.timestamp() if t is not None else None


def _template_bytes(template: core_pb2.PodTemplateSpec) -> bytes:
    """A pod template to compare, its pod-template-hash label left out (Kubernetes' EqualIgnoreHash)."""
    copy = core_pb2.PodTemplateSpec()
    copy.CopyFrom(template)
    copy.metadata.labels.pop("pod-template-hash", None)
    return copy.SerializeToString(deterministic=True)


def _entry_times(e: Entry) -> list[str]:
    """The wall-clock times an entry shows were already past when it was written (never
    deletionTimestamp: a graceful delete sets it in the future)."""
    obj = e.obj
    out = [object_meta(obj).creation_timestamp] if e.type == "ADDED" else []
    if isinstance(obj, core_pb2.Pod):
        out += [c.last_transition_time for c in obj.status.conditions]
    elif isinstance(obj, core_pb2.Node):
        out += [c.last_heartbeat_time for c in obj.status.conditions]
    elif isinstance(obj, core_pb2.Event):
        out.append(obj.last_timestamp)
    elif isinstance(obj, coordination_pb2.Lease):
        out.append(obj.spec.renew_time)
    elif isinstance(obj, apps_pb2.Deployment):
        out += [c.last_update_time for c in obj.status.conditions]
    return [t for t in out if t]


class DeploymentSurgeAndUnavailability(Rule):
    """A rolling Deployment's pods stay within replicas + maxSurge, its available pods within
    replicas - maxUnavailable of the replicas, as Kubernetes' deployment controller guarantees.

    The pods of a Deployment are those whose controller (ownerReference with ``controller:
    true``) is a ReplicaSet controlled by it; a pod counts while it is neither Succeeded/Failed nor
    being deleted. maxSurge and maxUnavailable are resolved as the controller resolves them
    (Kubernetes' ResolveFenceposts: a percentage of the replicas, surge rounded up, unavailable
    rounded down, both 0 making unavailable 1), from the Deployment as the history shows it then.
    What Kubernetes guarantees, and so what the rule checks, for ``strategy: RollingUpdate`` only:

    - *surge*: a pod created (ADDED) for the Deployment never brings its counted pods over
      replicas + maxSurge. Only creations are checked: pods over the bound after a scale-down of
      the Deployment are fine until the ReplicaSet controller deletes them, and an orphan adopted
      is not a pod the controllers made;
    - *unavailability*: from the start of a rollout that started fully available (the pod template
      changed while at least ``replicas`` pods were available) until it is done (every pod left of
      the new template, ``replicas`` of them available), no deletion of an available pod (a
      deletionTimestamp set, or DELETED at once) leaves fewer than replicas - maxUnavailable
      available. Not counted, as Kubernetes does not promise them: pods that stop being Ready by
      themselves, pods evicted or preempted (their DisruptionTarget condition), and everything
      after the Deployment's replicas or strategy changed (a scaling event is proportional, blind
      to availability) until the next rollout. A pod someone deletes by hand during a rollout
      reads as the controllers' deletion.

    A pod is available when Ready for ``minReadySeconds`` (the Ready condition's
    lastTransitionTime). The history has no clock of its own: the time of a revision is the
    latest time it and the revisions before it show (creations, condition transitions, lease
    renewals, node heartbeats, events), and a pod counts as available one second early, since
    those times are cut to the second.
    """

    name = "deployment-surge-and-unavailability"

    def __init__(self) -> None:
        self.deployments: dict[str, _Workload] = {}  # uid -> workload
        self.rs_owner: dict[str, str] = {}  # ReplicaSet uid -> its Deployment's uid
        self.rs_template: dict[str, bytes] = {}  # ReplicaSet uid -> its template, no pod-template-hash
        self.pods: dict[str, _OwnedPod] = {}  # pod uid -> pod
        self.clock = 0.0

    def observe(self, e: Entry, world: World) -> list[Violation]:
        for t in _entry_times(e):
            ts = _timestamp(t)
            if ts is not None and ts > self.clock:
                self.clock = ts
        obj = e.obj
        if isinstance(obj, apps_pb2.Deployment):
            self._deployment(e, obj)
        elif isinstance(obj, apps_pb2.ReplicaSet):
            ref = next((r for r in obj.metadata.owner_references if r.controller), None)
            if e.type == "DELETED":
                self.rs_owner.pop(obj.metadata.uid, None)
                self.rs_template.pop(obj.metadata.uid, None)
            else:
                self.rs_owner[obj.metadata.uid] = ref.uid if ref is not None and ref.kind == "Deployment" else ""
                self.rs_template[obj.metadata.uid] = _template_bytes(obj.spec.template)
        elif isinstance(obj, core_pb2.Pod):
            return self._pod(e, obj)
        return []

    def _deployment(self, e: Entry, d: apps_pb2.Deployment) -> None:
        uid = d.metadata.uid
        if e.type == "DELETED":
            self.deployments.pop(uid, None)
            return
        want = d.spec.replicas if d.spec.HasField("replicas") else 1
        rolling = d.spec.strategy.type == "RollingUpdate"
        surge = unavailable = 0
        if rolling:
            ru = d.spec.strategy.rolling_update
            try:
                surge, unavailable = resolve_fenceposts(ru.max_surge if ru.HasField("max_surge") else None,
                                                        ru.max_unavailable if ru.HasField("max_unavailable")
                                                        else None, want)
            except ValueError:
                rolling = False
            unavailable = min(unavailable, want)
        template = _template_bytes(d.spec.template)
        new = _Workload(f"{e.namespace}/{e.name}", rolling, want, surge, unavailable, d.spec.min_ready_seconds,
                        template)
        old = self.deployments.get(uid)
        if old is not None:
            if (old.replicas, old.surge, old.unavailable, old.rolling) != (want, surge, unavailable, rolling):
                new.armed = False  # a scaling event: proportional, not bound by availability
            elif old.template != template:
                new.armed = self._available(uid, new) >= want  # a rollout, started fully available or not
            else:
                new.armed = old.armed
        self.deployments[uid] = new

    def _owner(self, pod: _OwnedPod) -> str:
        return self.rs_owner.get(pod.rs, "")

    def _available(self, deployment_uid: str, w: _Workload, without: str = "") -> int:
        return sum(1 for uid, p in self.pods.items()
                   if uid != without and p.live and self._owner(p) == deployment_uid and p.ready_since is not None
                   and p.ready_since + w.min_ready <= self.clock + 1)

    def _pod(self, e: Entry, pod: core_pb2.Pod) -> list[Violation]:
        uid = pod.metadata.uid
        before = self.pods.get(uid)
        ref = next((r for r in pod.metadata.owner_references if r.controller), None)
        ready = next((c for c in pod.status.conditions if c.type == "Ready" and c.status == "True"), None)
        now = _OwnedPod(f"{e.namespace}/{e.name}", ref.uid if ref is not None and ref.kind == "ReplicaSet" else "",
                        e.type != "DELETED" and not pod.metadata.deletion_timestamp
                        and pod.status.phase not in ("Succeeded", "Failed"),
                        _timestamp(ready.last_transition_time) if ready is not None else None,
                        any(c.type == "DisruptionTarget" and c.status == "True" for c in pod.status.conditions))
        if e.type == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = now
        owner = self._owner(now)
        w = self.deployments.get(owner) if owner else None
        if w is None or not w.rolling:
            return []
        out: list[Violation] = []
        if e.type == "ADDED" and now.live:
            count = sum(1 for p in self.pods.values() if p.live and self._owner(p) == owner)
            if count > w.replicas + w.surge:
                out.append(Violation(self.name, e.rev, f"deployment {w.key}: pod {now.name} created with {count} "
                                                       f"pods of it neither finished nor being deleted, over "
                                                       f"replicas {w.replicas} + maxSurge {w.surge}"))
        was_available = before is not None and before.live and self._owner(before) == owner and \
            before.ready_since is not None and before.ready_since + w.min_ready <= self.clock + 1
        if w.armed and was_available and not now.live and not now.disrupted:
            available = self._available(owner, w)
            if available < w.replicas - w.unavailable:
                out.append(Violation(self.name, e.rev, f"deployment {w.key}: pod {now.name} deleted leaving "
                                                       f"{available} available, under replicas {w.replicas} - "
                                                       f"maxUnavailable {w.unavailable}"))
        if w.armed and self._rolled_out(owner, w):
            w.armed = False
        return out

    def _rolled_out(self, deployment_uid: str, w: _Workload) -> bool:
        """Every pod left is of the Deployment's template, and ``replicas`` of them are available."""
        live = [p for p in self.pods.values() if p.live and self._owner(p) == deployment_uid]
        return all(self.rs_template.get(p.rs) == w.template for p in live) and \
            self._available(deployment_uid, w) >= w.replicas


class DeviceAllocatedOnce(Rule):
    """No device is in two claims' allocations at once (the scheduler's allocated-device tracking,
    its in-flight reservations and the resourceclaim controller's deallocation, together)."""

    name = "device-allocated-once"

    def __init__(self) -> None:
        self.holder: dict[tuple[str, str, str], tuple[str, str]] = {}  # device -> (claim uid, "ns/name")
        self.held: dict[str, list[tuple[str, str, str]]] = {}  # claim uid -> its devices

    def observe(self, e: Entry, world: World) -> list[Violation]:
        claim = e.obj
        if not isinstance(claim, resource_pb2.ResourceClaim):
            return []
        uid = claim.metadata.uid
        for device in self.held.pop(uid, []):
            if self.holder.get(device, ("",))[0] == uid:
                del self.holder[device]
        if e.type == "DELETED" or not claim.status.HasField("allocation"):
            return []
        out: list[Violation] = []
        devices = [(r.driver, r.pool, r.device) for r in claim.status.allocation.devices.results]
        for device in devices:
            other = self.holder.get(device)
            if other is not None and other[0] != uid:
                out.append(Violation(self.name, e.rev, f"device {'/'.join(device)} allocated to claim "
                                                       f"{e.namespace}/{e.name} while claim {other[1]} holds it"))
                continue
            self.holder[device] = (uid, f"{e.namespace}/{e.name}")
        self.held[uid] = devices
        return out


def _uid_of(world: World, namespace: str, name: str) -> str:
    pod = world.pod(namespace, name)
    return pod.metadata.uid if pod is not None else ""


def rules() -> list[Rule]:
    return [BoundAtMostOnce(), AllocatedWithinAllocatable(), BoundRequestsWithinAllocatable(),
            ActuatedWithinAllocated(), PreemptionVictimsLowerPriority(), NoPreemptionWhileVictimsGoing(),
            OneVictimSetPerResize(), DeploymentSurgeAndUnavailability(), DeviceAllocatedOnce()]


def check_entries(entries: Iterable[Entry], active: list[Rule] | None = None) -> list[Violation]:
    active = active if active is not None else rules()
    world = World()
    violations: list[Violation] = []
    for e in entries:
        world.apply(e)
        for r in active:
            violations.extend(r.observe(e, world))
    for r in active:
        violations.extend(r.finish(world))
    violations.sort(key=lambda v: v.rev)  # stable: the order they were found within a revision
    return violations


async def entries_of(client: Client, since: int = 0) -> AsyncIterator[Entry]:
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
