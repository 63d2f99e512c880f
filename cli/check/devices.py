"""The rule on Dynamic Resource Allocation's devices: ``device-allocated-once``."""

from __future__ import annotations

from cli.check.framework import Entry, Rule, Violation, World
from machinery.api import resource_pb2


class DeviceAllocatedOnce(Rule):
    """No device is in two claims' allocations at once (the scheduler's allocated-device tracking,
    its in-flight reservations and the resourceclaim controller's deallocation, together): at no
    revision do two ResourceClaims' ``status.allocation`` name the same device (driver, pool,
    device), so a device is free for another claim only once its claim was deallocated or deleted
    (Kubernetes docs: Dynamic Resource Allocation, "tracking which of those resources have already
    been allocated to existing ResourceClaims")."""

    name = "device-allocated-once"
    deciders = ("scheduler",)

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
