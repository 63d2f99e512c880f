"""The scheduler's view of Dynamic Resource Allocation objects (kube-scheduler's DefaultDRAManager).

Informers on ResourceClaims, ResourceSlices and DeviceClasses, and what the DynamicResources plugin
asks of them through its handle (``SharedDRAManager``): a claim or class by name, the slices a node
can use — indexed by ``spec.nodeName``, so a Filter on one node reads that node's slices and the
few not tied to a node, never all of them — and whether a device is allocated. The allocated
devices are kept up to date from the claim informer's events (Kubernetes' allocatedDevices tracker,
allocateddevices.go), so a scheduling cycle never walks every claim. Each node's usable devices are
remembered while its and its slices' versions hold (``UsableDevices``), and forgotten when the node
or its slice is deleted.

The manager's handlers run before the scheduler's queue handlers for the same event (they are added
first), so a QueueingHint or a cycle that follows an event sees it in the tracker.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from machinery.api import core_pb2, resource_pb2
from machinery.client import Client
from machinery.dra.allocator import DeviceID, NodeDevices, UsableDevices, allocated_device_ids
from machinery.informer import Informer
from machinery.kinds import DEVICE_CLASS, RESOURCE_CLAIM, RESOURCE_SLICE

_NODE_INDEX = "node"
_NO_NODE = ""  # the node index's value for slices not tied to one node


def _slice_node(s: resource_pb2.ResourceSlice) -> list[str]:
    return [s.spec.node_name if s.spec.HasField("node_name") else _NO_NODE]


class DRAManager:
    """The informers and the allocated-device tracker (implements ``SharedDRAManager``)."""

    def __init__(self, client: Client, nodes: Informer[core_pb2.Node] | None = None):
        self.claims: Informer[resource_pb2.ResourceClaim] = Informer(client, RESOURCE_CLAIM)
        self.slices: Informer[resource_pb2.ResourceSlice] = Informer(client, RESOURCE_SLICE)
        self.classes: Informer[resource_pb2.DeviceClass] = Informer(client, DEVICE_CLASS)
        self.slices.add_indexer(_NODE_INDEX, _slice_node)
        self._held: dict[str, tuple[DeviceID, ...]] = {}  # claim uid -> the devices its allocation holds
        self._allocated: Counter[DeviceID] = Counter()
        self.claims.add_handler(self._claim_added, self._claim_updated, self._claim_deleted)
        self._usable = UsableDevices()
        self.slices.add_handler(on_delete=self._slice_deleted)
        if nodes is not None:
            nodes.add_handler(on_delete=lambda node: self._usable.forget(node.metadata.name))

    def informers(self) -> list[Informer[Any]]:
        return [self.claims, self.slices, self.classes]

    # ------------------------------------------------------------ SharedDRAManager

    def get_claim(self, namespace: str, name: str) -> resource_pb2.ResourceClaim | None:
        return self.claims.get(name, namespace)

    def get_device_class(self, name: str) -> resource_pb2.DeviceClass | None:
        return self.classes.get(name)

    def slices_for(self, node_name: str) -> list[resource_pb2.ResourceSlice]:
        return self.slices.by_index(_NODE_INDEX, node_name) + self.slices.by_index(_NODE_INDEX, _NO_NODE)

    def usable_devices(self, node: core_pb2.Node) -> NodeDevices:
        return self._usable.get(node, self.slices_for(node.metadata.name))

    def is_allocated(self, device: DeviceID) -> bool:
        return self._allocated[device] > 0

    def _slice_deleted(self, s: resource_pb2.ResourceSlice) -> None:
        if s.spec.HasField("node_name"):
            self._usable.forget(s.spec.node_name)

    # ------------------------------------------------------------ the tracker

    def allocated_count(self) -> int:
        return sum(1 for n in self._allocated.values() if n > 0)

    def _set(self, claim: resource_pb2.ResourceClaim) -> None:
        uid = claim.metadata.uid
        now = tuple(allocated_device_ids(claim))
        before = self._held.get(uid, ())
        if now == before:
            return
        self._allocated.subtract(before)
        self._allocated.update(now)
        for d in before:
            if self._allocated[d] <= 0:
                del self._allocated[d]
        if now:
            self._held[uid] = now
        else:
            self._held.pop(uid, None)

    def _claim_added(self, claim: resource_pb2.ResourceClaim) -> None:
        self._set(claim)

    def _claim_updated(self, old: resource_pb2.ResourceClaim, new: resource_pb2.ResourceClaim) -> None:
        if old.metadata.uid != new.metadata.uid:
            self._claim_deleted(old)
        self._set(new)

    def _claim_deleted(self, claim: resource_pb2.ResourceClaim) -> None:
        gone = resource_pb2.ResourceClaim()
        gone.metadata.uid = claim.metadata.uid
        self._set(gone)
