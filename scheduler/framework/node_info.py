"""NodeInfo: one node as the scheduler sees it — the Node, its pods, and what they request.

kube-scheduler's framework.NodeInfo: the cache keeps one per node, updated as pods are added,
assumed, updated (a KEP-1287 resize changes what a pod holds) and removed; each scheduling cycle
reads a snapshot (clones of the NodeInfos that changed). ``generation`` grows with every change,
so the snapshot copies only what changed since the last one.

Amounts are machinery.fit.Resource values (integers: millicores, bytes, pods, scalars).
"""

from __future__ import annotations

import itertools
from typing import Iterable

from machinery import resources
from machinery.api import core_pb2
from machinery.fit import Resource
from scheduler.framework.pod_info import PodInfo

_generations = itertools.count(1)


def next_generation() -> int:
    return next(_generations)


class NodeInfo:
    __slots__ = ("node", "name", "pods", "pods_with_affinity", "pods_with_required_anti_affinity", "requested",
                 "non_zero_requested", "allocatable", "generation", "unschedulable", "taints")

    def __init__(self, node: core_pb2.Node | None = None, pods: Iterable[PodInfo] = ()):
        self.node: core_pb2.Node | None = None
        self.name = ""  # the node's name (read for every node of every cycle: an attribute, not a lookup)
        self.pods: list[PodInfo] = []
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.requested = Resource()
        self.non_zero_requested = Resource()
        self.allocatable = Resource()
        self.generation = next_generation()
        # The node's spec.unschedulable and spec.taints, read by a Filter for every node of every
        # cycle: kept as attributes when the node is set (a protobuf field read costs a lookup).
        self.unschedulable = False
        self.taints: tuple[core_pb2.Taint, ...] = ()
        if node is not None:
            self.set_node(node)
        for pi in pods:
            self.add_pod_info(pi)

    def set_node(self, node: core_pb2.Node) -> None:
        self.node = node
        self.name = node.metadata.name
        self.allocatable = Resource.of(resources.to_resource_list(node.status.allocatable))
        self.unschedulable = node.spec.unschedulable
        self.taints = tuple(node.spec.taints)
        self.generation = next_generation()

    def remove_node(self) -> None:
        self.node = None
        self.name = ""
        self.unschedulable = False
        self.taints = ()
        self.generation = next_generation()

    def add_pod_info(self, pi: PodInfo) -> None:
        self.pods.append(pi)
        if pi.has_affinity:
            self.pods_with_affinity.append(pi)
        if pi.has_required_anti_affinity:
            self.pods_with_required_anti_affinity.append(pi)
        self._account(pi, 1)

    def add_pod(self, pod: core_pb2.Pod) -> None:
        self.add_pod_info(PodInfo(pod))

    def remove_pod(self, pod: core_pb2.Pod) -> bool:
        """Remove the pod with ``pod``'s uid; False when the node does not have it."""
        uid = pod.metadata.uid
        pods = self.pods
        for i in range(len(pods) - 1, -1, -1):  # newest first: a simulation takes back what it just added
            pi = pods[i]
            if pi.pod.metadata.uid == uid:
                del pods[i]
                if self.pods_with_affinity:
                    _remove_uid(self.pods_with_affinity, uid)
                if self.pods_with_required_anti_affinity:
                    _remove_uid(self.pods_with_required_anti_affinity, uid)
                self._account(pi, -1)
                return True
        return False

    def remove_pods(self, infos: list[PodInfo]) -> None:
        """Remove these pods (which the node has), in one pass over its lists."""
        uids = {pi.pod.metadata.uid for pi in infos}
        self.pods = [pi for pi in self.pods if pi.pod.metadata.uid not in uids]
        if self.pods_with_affinity:
            self.pods_with_affinity = [pi for pi in self.pods_with_affinity if pi.pod.metadata.uid not in uids]
        if self.pods_with_required_anti_affinity:
            self.pods_with_required_anti_affinity = [pi for pi in self.pods_with_required_anti_affinity
                                                     if pi.pod.metadata.uid not in uids]
        for pi in infos:
            self._account(pi, -1)

    def _account(self, pi: PodInfo, sign: int) -> None:
        req = self.requested
        req.milli_cpu += sign * pi.cpu
        req.memory += sign * pi.memory
        req.ephemeral_storage += sign * pi.ephemeral_storage
        if pi.scalar:
            for name, amount in pi.scalar.items():
                req.scalar[name] = req.scalar.get(name, 0) + sign * amount
        nz = self.non_zero_requested
        nz.milli_cpu += sign * pi.non_zero_cpu
        nz.memory += sign * pi.non_zero_memory
        self.generation = next(_generations)

    def clone(self) -> "NodeInfo":
        out = NodeInfo.__new__(NodeInfo)
        out.node = self.node
        out.name = self.name
        out.pods = list(self.pods)
        out.pods_with_affinity = list(self.pods_with_affinity)
        out.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        out.requested = self.requested.clone()
        out.non_zero_requested = self.non_zero_requested.clone()
        out.allocatable = self.allocatable.clone()
        out.generation = self.generation
        out.unschedulable = self.unschedulable
        out.taints = self.taints
        return out

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)}, requested={self.requested})"


def _remove_uid(items: list[PodInfo], uid: str) -> None:
    for i, pi in enumerate(items):
        if pi.pod.metadata.uid == uid:
            del items[i]
            return
