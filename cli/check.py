"""``kplane check``: replay the event log and check the cluster's invariants (DESIGN.md section 3).

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


def rules() -> list[Rule]:
    return [BoundAtMostOnce(), AllocatedWithinAllocatable(), BoundRequestsWithinAllocatable(),
            ActuatedWithinAllocated(), PreemptionVictimsLowerPriority()]


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
