"""The pod's ResourceClaims as steps (Dynamic Resource Allocation): a claim made for the pod from
its template, allocated (which devices, on which node), reserved for the pod, released,
deallocated, deleted. Who did it is said by what changed: the resourceclaim controller makes,
releases and deallocates claims; the scheduler allocates and reserves them."""

from __future__ import annotations

from cli.explain.step import CONTROLLER_MANAGER, SCHEDULER, Step
from machinery.api import resource_pb2


def owned_by(claim: resource_pb2.ResourceClaim, uid: str) -> bool:
    """Whether the pod ``uid`` owns the claim (one made for it from a ResourceClaimTemplate)."""
    return any(o.uid == uid for o in claim.metadata.owner_references)


def claim_steps(rev: int, type_: str, prev: resource_pb2.ResourceClaim | None, cur: resource_pb2.ResourceClaim,
                uid: str) -> list[Step]:
    """What one version of a claim of the pod (uid ``uid``) shows."""
    name = cur.metadata.name
    if type_ == "DELETED":
        return [Step(rev, CONTROLLER_MANAGER, f"ResourceClaim {name} deleted")]
    steps = []
    if prev is None:
        made = " for the pod" if owned_by(cur, uid) else ""
        steps.append(Step(rev, CONTROLLER_MANAGER, f"ResourceClaim {name} created{made}"))
    had = prev is not None and prev.status.HasField("allocation")
    if cur.status.HasField("allocation") and not had:
        steps.append(Step(rev, SCHEDULER, f"ResourceClaim {name} allocated: {_devices(cur)}"))
    elif had and not cur.status.HasField("allocation"):
        steps.append(Step(rev, CONTROLLER_MANAGER, f"ResourceClaim {name} deallocated"))
    reserved = any(r.uid == uid for r in cur.status.reserved_for)
    was_reserved = prev is not None and any(r.uid == uid for r in prev.status.reserved_for)
    if reserved and not was_reserved:
        steps.append(Step(rev, SCHEDULER, f"ResourceClaim {name} reserved for the pod"))
    elif was_reserved and not reserved:
        steps.append(Step(rev, CONTROLLER_MANAGER, f"ResourceClaim {name} reservation for the pod released"))
    return steps


def _devices(claim: resource_pb2.ResourceClaim) -> str:
    alloc = claim.status.allocation
    devices = ", ".join(f"{r.driver}/{r.pool}/{r.device}" for r in alloc.devices.results)
    nodes = [v for term in alloc.node_selector.node_selector_terms for f in term.match_fields for v in f.values]
    return devices + (f" on {', '.join(nodes)}" if nodes else "")
