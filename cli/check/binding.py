"""Rules on the scheduler's bindings: ``bound-at-most-once`` and
``bound-requests-within-allocatable``."""

from __future__ import annotations

from dataclasses import dataclass, field

from cli.check.framework import Entry, Rule, Violation, World
from machinery import resources
from machinery.api import core_pb2


class BoundAtMostOnce(Rule):
    """A pod's spec.nodeName goes from empty to a node once and never changes."""

    name = "bound-at-most-once"
    deciders = ("scheduler",)

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


@dataclass
class _Judged:
    """How an over-committing binding was counted: the node's allocatable, the summed requests of
    the pods that had reported their allocation, and those of the pods counted at their spec."""

    allocatable: dict[str, int]
    reported: dict[str, int] = field(default_factory=dict)
    at_spec: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)


def _reports_allocation(pod: core_pb2.Pod) -> bool:
    return any(cs.allocated_resources for cs in list(pod.status.container_statuses)
               + list(pod.status.init_container_statuses))


class BoundRequestsWithinAllocatable(Rule):
    """No binding over-commits a node: when a pod goes from unbound to bound, the requests of the
    node's pods not finished (Succeeded/Failed) fit its allocatable.

    Checked at bindings, the only moment the scheduler adds load: a pod created with spec.nodeName
    bypasses the scheduler (the kubelet admits it or preempts for it, KEP-1287's critical pods) and a
    resize is the kubelet's to allocate (``allocated-within-allocatable``); both still count towards
    the node. A pod counts with the kubelet's allocation once reported (a Deferred resize has not
    taken room yet), with its spec's requests before (``_committed``).

    A binding the kubelet then refuses (the pod Failed with an ``OutOf<resource>`` reason, never
    having run) is not one: the scheduler decides on the view it has, and a resize the kubelet
    allocated in between is KEP-1287's race ("Scheduler and API Server Interaction"), which the
    kubelet's admission settles. Such a binding's violation is withdrawn when the refusal shows.

    Nor is one that over-commits only by a pod counted at its spec because the kubelet had not
    reported its allocation yet: a pod resized before the kubelet's status said what it admitted
    it at (the resize then Deferred, say) holds what the kubelet admitted, not its spec, and a pod
    the kubelet refused (a resize of a pod in the scheduler's cycle: bound at the size it had, it
    did not fit at the new one) held nothing. When a pod counted so reports its first allocation,
    or is refused, the binding is judged again with each such pod at that allocation (nothing for
    a refused one); it is withdrawn if the node's pods then fit.
    """

    name = "bound-requests-within-allocatable"
    deciders = ("scheduler", "kubelet")

    def __init__(self) -> None:
        self.used: dict[str, dict[str, int]] = {}  # node -> summed requests of its pods not finished
        self.counted: dict[tuple[str, str], tuple[str, dict[str, int]]] = {}  # pod -> (node, requests)
        self.unbound: set[tuple[str, str]] = set()  # pods last seen not finished and not bound
        self.pending: dict[tuple[str, str], Violation] = {}  # over-committing bindings, unless refused
        self.judged: dict[tuple[str, str], _Judged] = {}  # per pending binding: how it was counted
        self.first_allocation: dict[tuple[str, str], dict[str, int]] = {}  # what the kubelet first reported

    def finish(self, world: World) -> list[Violation]:
        return list(self.pending.values())

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
        refused = pod.status.phase == "Failed" and pod.status.reason.startswith("OutOf")
        if key in self.pending and refused:
            del self.pending[key]  # the kubelet refused it: its admission settled the race
        if key not in self.first_allocation and (refused or _reports_allocation(pod)):
            # What the kubelet admitted it at; a pod it refused never held anything.
            self.first_allocation[key] = {} if refused else _committed(pod)
            self._judge_again(key)
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
        self.pending[key] = Violation(self.name, e.rev, f"pod {e.namespace}/{e.name} bound to node {node}: requests "
                                                        f"of its pods {detail}")
        judged = _Judged(allocatable)
        for k, (n_, r) in self.counted.items():
            if n_ != node:
                continue
            if k in self.first_allocation:
                judged.reported = resources.add(judged.reported, r)
            else:
                judged.at_spec[k] = dict(r)
        self.judged[key] = judged
        return []

    def _judge_again(self, reported: tuple[str, str]) -> None:
        """``reported`` now says what the kubelet allocated it: each pending binding that counted it
        at its spec is judged with it (and any other pod that reported since) at its allocation."""
        for key, judged in list(self.judged.items()):
            if key not in self.pending or reported not in judged.at_spec:
                continue
            used = judged.reported
            for k, requests in judged.at_spec.items():
                used = resources.add(used, self.first_allocation.get(k, requests))
            if all(used.get(r, 0) <= judged.allocatable.get(r, 0) for r in ("cpu", "memory")):
                del self.pending[key]
                del self.judged[key]
