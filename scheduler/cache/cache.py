"""The scheduler cache: every node and the pods on it, from the informers plus the scheduler's own
assumptions (kube-scheduler's internal cache).

- A pod is **assumed** onto its node right after Reserve, before its binding is even sent: the
  next cycle must already count it. When the binding's watch event arrives (``add_pod``) the
  assumption is confirmed; if binding fails it is forgotten (``forget_pod``); if the binding
  was sent but its event never arrives, the assumption expires ``ttl`` seconds after the binding
  finished (``cleanup_assumed_pods``) so a lost pod cannot hold a node's room forever.
- What a pod holds is its PodInfo's requests — the KEP-1287 rule, so an update of a bound pod
  (a resize, allocated or actual resources reported by its kubelet) changes the node's totals.
- ``update_snapshot`` copies into a Snapshot only the NodeInfos that changed since the last one.
- Nodes are ordered as Kubernetes' node tree does: zones interleaved, so a search that stops
  early still sees every zone.
"""

from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Callable

from prometheus_client import REGISTRY
from prometheus_client.core import GaugeMetricFamily

from machinery import wellknown
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.node_info import NodeInfo, next_generation
from scheduler.framework.pod_info import PodInfo

log = get_logger()

ZONE_LABEL = wellknown.LABEL_TOPOLOGY_ZONE
REGION_LABEL = wellknown.LABEL_TOPOLOGY_REGION
# kube-scheduler's durationToExpireAssumedPod is 0 (never) since 1.23; the issue asks for expiry, and
# 15 minutes (its value before) is far beyond any binding that can still show up.
DEFAULT_ASSUMED_TTL = 15 * 60.0


def zone_key(node: core_pb2.Node) -> str:
    labels = node.metadata.labels
    region, zone = labels.get(REGION_LABEL, ""), labels.get(ZONE_LABEL, "")
    return f"{region}:\x00:{zone}" if region or zone else ""


class CacheError(ValueError):
    pass


@dataclass
class _PodState:
    pod: core_pb2.Pod
    binding_finished: bool = False
    deadline: float | None = None


class _NodeTree:
    """Node names by zone; ``ordered`` interleaves the zones (node-1 of zone a, of zone b, ...)."""

    def __init__(self) -> None:
        self.zones: dict[str, list[str]] = {}
        self._ordered: list[str] | None = None

    def add(self, node: core_pb2.Node) -> None:
        names = self.zones.setdefault(zone_key(node), [])
        if node.metadata.name not in names:
            names.append(node.metadata.name)
            self._ordered = None

    def remove(self, node: core_pb2.Node) -> None:
        zone = zone_key(node)
        names = self.zones.get(zone)
        if names and node.metadata.name in names:
            names.remove(node.metadata.name)
            if not names:
                del self.zones[zone]
            self._ordered = None

    def update(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        if zone_key(old) != zone_key(new):
            self.remove(old)
            self.add(new)

    def ordered(self) -> list[str]:
        if self._ordered is None:
            out: list[str] = []
            lists = list(self.zones.values())
            i = 0
            while True:
                added = False
                for names in lists:
                    if i < len(names):
                        out.append(names[i])
                        added = True
                if not added:
                    break
                i += 1
            self._ordered = out
        return self._ordered


class Cache:
    def __init__(self, ttl: float = DEFAULT_ASSUMED_TTL, clock: Callable[[], float] = time.monotonic):
        self.ttl = ttl
        self._clock = clock
        self._nodes: dict[str, NodeInfo] = {}
        self._tree = _NodeTree()
        self._pods: dict[str, _PodState] = {}  # uid -> state
        self._assumed: set[str] = set()
        self._dirty: set[str] = set()  # node names changed since the last snapshot
        self._order_changed = True
        _CACHES.add(self)

    # ------------------------------------------------------------ pods

    def _node_info(self, name: str) -> NodeInfo:
        ni = self._nodes.get(name)
        if ni is None:
            ni = self._nodes[name] = NodeInfo()
        return ni

    def _add(self, pod: core_pb2.Pod, pi: PodInfo | None = None) -> None:
        name = pod.spec.node_name
        self._node_info(name).add_pod_info(pi or PodInfo(pod))
        self._dirty.add(name)

    def _remove(self, pod: core_pb2.Pod) -> None:
        name = pod.spec.node_name
        ni = self._nodes.get(name)
        if ni is None:
            return
        ni.remove_pod(pod)
        self._dirty.add(name)
        if ni.node is None and not ni.pods:
            del self._nodes[name]

    def assume_pod(self, pod: core_pb2.Pod, pi: PodInfo | None = None) -> None:
        """``pod`` (its nodeName set to the chosen node) counts on that node from now on."""
        uid = pod.metadata.uid
        if uid in self._pods:
            raise CacheError(f"pod {pod.metadata.namespace}/{pod.metadata.name} ({uid}) is in the cache, so can't "
                             f"be assumed")
        self._add(pod, pi)
        self._pods[uid] = _PodState(pod)
        self._assumed.add(uid)

    def finish_binding(self, pod: core_pb2.Pod) -> None:
        st = self._pods.get(pod.metadata.uid)
        if st is not None and pod.metadata.uid in self._assumed:
            st.binding_finished = True
            st.deadline = self._clock() + self.ttl

    def forget_pod(self, pod: core_pb2.Pod) -> None:
        uid = pod.metadata.uid
        st = self._pods.get(uid)
        if st is None or uid not in self._assumed:
            return
        self._remove(st.pod)
        del self._pods[uid]
        self._assumed.discard(uid)

    def add_pod(self, pod: core_pb2.Pod) -> None:
        """A bound pod from the informer (confirms an assumption of it)."""
        uid = pod.metadata.uid
        st = self._pods.get(uid)
        if st is not None and uid in self._assumed:
            self._remove(st.pod)
            self._add(pod)
            self._assumed.discard(uid)
            st.pod, st.deadline, st.binding_finished = pod, None, False
            return
        if st is not None:
            self.update_pod(st.pod, pod)  # a relist delivers a pod we have as an add
            return
        self._add(pod)
        self._pods[uid] = _PodState(pod)

    def update_pod(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        uid = new.metadata.uid
        st = self._pods.get(uid)
        if st is None:
            self.add_pod(new)
            return
        if uid in self._assumed:
            # The informer shows the bound pod before we saw its add: treat as the confirmation.
            self.add_pod(new)
            return
        self._remove(st.pod)
        self._add(new)
        st.pod = new

    def remove_pod(self, pod: core_pb2.Pod) -> None:
        uid = pod.metadata.uid
        st = self._pods.pop(uid, None)
        self._assumed.discard(uid)
        self._remove(st.pod if st is not None else pod)

    def is_assumed(self, pod: core_pb2.Pod) -> bool:
        return pod.metadata.uid in self._assumed

    def get_pod(self, pod: core_pb2.Pod) -> core_pb2.Pod | None:
        st = self._pods.get(pod.metadata.uid)
        return st.pod if st is not None else None

    def cleanup_assumed_pods(self) -> list[core_pb2.Pod]:
        """Expire assumptions whose binding finished ``ttl`` ago without the pod showing up bound."""
        now = self._clock()
        expired = []
        for uid in list(self._assumed):
            st = self._pods[uid]
            if st.binding_finished and st.deadline is not None and now > st.deadline:
                log.warning("assumed_pod_expired", pod=key_of(st.pod),
                            node=st.pod.spec.node_name)
                self._remove(st.pod)
                del self._pods[uid]
                self._assumed.discard(uid)
                expired.append(st.pod)
        return expired

    # ------------------------------------------------------------ nodes

    def add_node(self, node: core_pb2.Node) -> None:
        name = node.metadata.name
        ni = self._node_info(name)
        if ni.node is not None:
            self._tree.update(ni.node, node)
        else:
            self._tree.add(node)
        ni.set_node(node)
        self._dirty.add(name)
        self._order_changed = True

    def update_node(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        name = new.metadata.name
        ni = self._node_info(name)
        if ni.node is None:
            self._tree.add(new)
            self._order_changed = True
        else:
            before = list(self._tree.ordered())
            self._tree.update(ni.node, new)
            if self._tree.ordered() != before:
                self._order_changed = True
        ni.set_node(new)
        self._dirty.add(name)

    def remove_node(self, node: core_pb2.Node) -> None:
        name = node.metadata.name
        ni = self._nodes.get(name)
        if ni is None:
            return
        self._tree.remove(ni.node or node)
        ni.remove_node()
        if not ni.pods:
            del self._nodes[name]
        self._dirty.add(name)
        self._order_changed = True

    def node_count(self) -> int:
        return sum(1 for ni in self._nodes.values() if ni.node is not None)

    def pod_count(self) -> int:
        return len(self._pods)

    def assumed_count(self) -> int:
        return len(self._assumed)

    def node_infos(self) -> dict[str, NodeInfo]:
        return self._nodes

    def node(self, name: str) -> core_pb2.Node | None:
        ni = self._nodes.get(name)
        return ni.node if ni is not None else None

    def pods_on(self, name: str) -> list[core_pb2.Pod]:
        ni = self._nodes.get(name)
        return [pi.pod for pi in ni.pods] if ni is not None else []

    # ------------------------------------------------------------ snapshots

    def update_snapshot(self, snap: Snapshot) -> None:
        """Bring ``snap`` up to date, copying only the nodes that changed.

        A node that changed replaces its NodeInfo in a copy of the list (a cycle that still holds
        the old list keeps its view); the list is rebuilt from the node tree only when nodes came,
        went or the tree's order changed — kube-scheduler's updateAllLists."""
        if not self._dirty and not self._order_changed:
            return
        affinity_changed = rebuild = self._order_changed
        changed: list[NodeInfo] = []
        for name in self._dirty:
            ni = self._nodes.get(name)
            before = snap.node_info_map.get(name)
            if ni is None or ni.node is None:
                if before is not None:
                    del snap.node_info_map[name]
                    affinity_changed = rebuild = True
                continue
            clone = ni.clone()
            snap.node_info_map[name] = clone
            changed.append(clone)
            if before is None:
                rebuild = True
            if before is None or bool(before.pods_with_affinity) != bool(clone.pods_with_affinity) or \
                    bool(before.pods_with_required_anti_affinity) != bool(clone.pods_with_required_anti_affinity):
                affinity_changed = True
        if rebuild or any(c.name not in snap.positions for c in changed):
            order = self._tree.ordered()
            snap.node_info_list = [snap.node_info_map[n] for n in order if n in snap.node_info_map]
            snap.positions = {ni.name: i for i, ni in enumerate(snap.node_info_list)}
        elif changed:
            nodes = list(snap.node_info_list)
            for clone in changed:
                nodes[snap.positions[clone.name]] = clone
            snap.node_info_list = nodes
        if affinity_changed or snap.have_pods_with_affinity or snap.have_pods_with_required_anti_affinity:
            snap.have_pods_with_affinity = [ni for ni in snap.node_info_list if ni.pods_with_affinity]
            snap.have_pods_with_required_anti_affinity = [ni for ni in snap.node_info_list
                                                          if ni.pods_with_required_anti_affinity]
        snap.generation = next_generation()
        self._dirty.clear()
        self._order_changed = False


# ------------------------------------------------------------------------------------------
# scheduler_cache_size{type}: nodes, pods and assumed pods, read at scrape time.

_CACHES: "weakref.WeakSet[Cache]" = weakref.WeakSet()


class _CacheGauges:
    def collect(self):
        g = GaugeMetricFamily("scheduler_cache_size", "Number of nodes, pods, and assumed (bound) pods in the "
                              "scheduler cache.", labels=["type"])
        totals = {"nodes": 0, "pods": 0, "assumed_pods": 0}
        for c in list(_CACHES):
            totals["nodes"] += c.node_count()
            totals["pods"] += c.pod_count()
            totals["assumed_pods"] += c.assumed_count()
        for k, v in totals.items():
            g.add_metric([k], v)
        yield g

    def describe(self):
        return []


REGISTRY.register(_CacheGauges())
