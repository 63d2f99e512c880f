"""Which pods are nominated to which node (kube-scheduler's nominator).

A pod that preempted victims is nominated to their node (``status.nominatedNodeName``) while the
victims terminate; the filters count pods nominated to a node with priority >= the pod being
scheduled as if they were already there (the preemption design's two-pass check). The nominator
holds these nominations in memory, from the scheduler's own decisions (PostFilter) and from the
pods' status when they are added or updated (so a restarted scheduler knows them again).
"""

from __future__ import annotations

from typing import Callable

from machinery.api import core_pb2
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.types import NominatingInfo, NominatingMode


class Nominator:
    def __init__(self, get_pod: Callable[[str, str], core_pb2.Pod | None] | None = None) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}  # node -> uid -> pod info
        self._node_of: dict[str, str] = {}  # uid -> node
        self._get_pod = get_pod  # the informer's pods (kube-scheduler's podLister)

    def add(self, pi: PodInfo, info: NominatingInfo | None = None) -> None:
        """Nominate ``pi`` as ``info`` says (Override: that node; else its status's nominatedNodeName)."""
        pod = pi.pod
        self.delete(pod)
        if pod.spec.node_name:
            return  # already bound or assumed: no nomination
        if self._get_pod is not None:
            # A decision about a pod that meanwhile went away or got bound (its events were handled
            # while the cycle waited on PostFilter) would otherwise hold room on the node for good.
            live = self._get_pod(pod.metadata.namespace, pod.metadata.name)
            if live is None or live.metadata.uid != pod.metadata.uid or live.spec.node_name:
                return
        if info is not None and info.mode == NominatingMode.OVERRIDE:
            node = info.node_name
        elif info is None or info.mode == NominatingMode.NOOP:
            node = pod.status.nominated_node_name
        else:
            node = ""
        if not node:
            return
        self._node_of[pod.metadata.uid] = node
        self._by_node.setdefault(node, {})[pod.metadata.uid] = pi

    def delete(self, pod: core_pb2.Pod) -> None:
        uid = pod.metadata.uid
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._by_node[node]

    def update(self, old: core_pb2.Pod, new: PodInfo) -> None:
        """Kubernetes' UpdateNominatedPod: an update that neither sets nor clears a nomination
        keeps the one the scheduler made (the informer may not show it yet)."""
        info = None
        if not old.status.nominated_node_name and not new.pod.status.nominated_node_name:
            node = self._node_of.get(old.metadata.uid)
            if node:
                info = NominatingInfo(node, NominatingMode.OVERRIDE)
        self.delete(old)
        self.add(new, info)

    def node_of(self, pod: core_pb2.Pod) -> str:
        return self._node_of.get(pod.metadata.uid, "")

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]:
        pods = self._by_node.get(node)
        return list(pods.values()) if pods else []

    def __len__(self) -> int:
        return len(self._node_of)
