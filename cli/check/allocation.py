"""Rules on the kubelet's allocation (KEP-1287: desired -> allocated -> actuated):
``allocated-within-allocatable`` and ``actuated-within-allocated``."""

from __future__ import annotations

from cli.check.framework import Entry, Rule, Violation, World
from machinery import resources
from machinery.api import core_pb2


def _allocated(pod: core_pb2.Pod) -> dict[str, int]:
    total: dict[str, int] = {}
    for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses):
        total = resources.add(total, resources.to_resource_list(cs.allocated_resources))
    return total


class AllocatedWithinAllocatable(Rule):
    """At no revision do the kubelet-allocated requests (status.containerStatuses[].allocatedResources)
    of a node's pods exceed its allocatable."""

    name = "allocated-within-allocatable"
    deciders = ("kubelet",)

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


class ActuatedWithinAllocated(Rule):
    """A container's actual resources (status...resources.requests) never show a value the kubelet had
    not allocated (KEP-1287: desired -> allocated -> actuated)."""

    name = "actuated-within-allocated"
    deciders = ("kubelet",)

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
