"""A snapshot of the cache for one scheduling cycle (kube-scheduler's cache.Snapshot).

Plugins read nodes only through it, so a cycle sees one consistent state even though informer
events keep arriving. ``node_info_list`` is in the node tree's order (zones interleaved), which
is the order the scheduler walks nodes in.
"""

from __future__ import annotations

from scheduler.framework.node_info import NodeInfo


class Snapshot:
    def __init__(self) -> None:
        self.node_info_map: dict[str, NodeInfo] = {}
        self.node_info_list: list[NodeInfo] = []
        self.have_pods_with_affinity: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity: list[NodeInfo] = []
        self.generation = 0
        # Each node's index in node_info_list, so a node that changed is put in its place
        # without walking the tree (Cache.update_snapshot).
        self.positions: dict[str, int] = {}

    def get(self, name: str) -> NodeInfo | None:
        return self.node_info_map.get(name)

    def node_infos(self) -> list[NodeInfo]:
        return self.node_info_list

    def num_nodes(self) -> int:
        return len(self.node_info_list)

    @classmethod
    def of(cls, node_infos: list[NodeInfo]) -> "Snapshot":
        """A snapshot of these NodeInfos as they are (tests, simulations)."""
        s = cls()
        s.node_info_list = list(node_infos)
        s.node_info_map = {ni.name: ni for ni in node_infos}
        s.positions = {ni.name: i for i, ni in enumerate(s.node_info_list)}
        s.have_pods_with_affinity = [ni for ni in node_infos if ni.pods_with_affinity]
        s.have_pods_with_required_anti_affinity = [ni for ni in node_infos if ni.pods_with_required_anti_affinity]
        return s
