"""Which shard of hollow nodes this process is, when replicas of one service run them
(``docker compose up --scale hollow-nodes=4``, a ``docker stack`` service's replicas): each claims
a free slot ``s`` and runs nodes ``<prefix><s>-1`` … ``<prefix><s>-<n>``, whose tokens the
cluster made in advance (``kplane tokens --hollow-slots S --hollow-nodes-per-shard N``).

The claim is the first node's own Lease, ``kube-node-lease/<prefix><s>-1`` — the one object a
kubelet of that node may write (node restriction) — marked with the claimant's identity (its
hostname: a container keeps it across restarts) in the annotation ``kplane.dev/hollow-shard``:

- no such Lease: create it, marked; the slot is ours (a replica creating it at the same moment
  gets AlreadyExists and tries the next slot);
- marked with our identity: ours already (this container restarted);
- renewed within its duration by another: taken, try the next;
- not renewed for its whole duration: its shard is gone; mark it ours, at the resourceVersion
  read (a conflict: another replica took it first, try the next).

The kubelet then renews that Lease as any node's (its renewals keep the annotation).
"""

from __future__ import annotations

from collections.abc import Callable

from machinery import errors, timeutil
from machinery.api import coordination_pb2
from machinery.client import Client
from machinery.logging import get_logger

log = get_logger()

SHARD_ANNOTATION = "kplane.dev/hollow-shard"
NODE_LEASE_NAMESPACE = "kube-node-lease"
CLAIM_LEASE_SECONDS = 40  # the kubelet's node lease duration


def slot_node(prefix: str, slot: int, index: int) -> str:
    return f"{prefix}{slot}-{index}"


def _stale(lease: coordination_pb2.Lease, now: float) -> bool:
    renewed = timeutil.parse(lease.spec.renew_time) if lease.spec.renew_time else None
    if renewed is None:
        return True
    return now - renewed.timestamp() > max(lease.spec.lease_duration_seconds, 1)


async def claim_slot(client_for: Callable[[str], Client], prefix: str, slots: int, identity: str) -> int:
    """The first slot of 1..``slots`` this process may run; SystemExit with one line when none is
    free. ``client_for(node)`` is a client with that node's token."""
    for slot in range(1, slots + 1):
        name = slot_node(prefix, slot, 1)
        c = client_for(name)
        try:
            lease = await c.leases.get(name, NODE_LEASE_NAMESPACE)
        except errors.NotFound:
            lease = coordination_pb2.Lease(api_version="coordination.k8s.io/v1", kind="Lease")
            lease.metadata.name, lease.metadata.namespace = name, NODE_LEASE_NAMESPACE
            lease.metadata.annotations[SHARD_ANNOTATION] = identity
            lease.spec.holder_identity = name
            lease.spec.lease_duration_seconds = CLAIM_LEASE_SECONDS
            lease.spec.renew_time = timeutil.rfc3339_micro()
            try:
                await c.leases.create(lease)
            except errors.AlreadyExists:
                continue
            log.info("hollow_shard_claimed", slot=slot, identity=identity, how="new")
            return slot
        if lease.metadata.annotations.get(SHARD_ANNOTATION) == identity:
            log.info("hollow_shard_claimed", slot=slot, identity=identity, how="ours")
            return slot
        if not _stale(lease, timeutil.now().timestamp()):
            continue
        previous = lease.metadata.annotations.get(SHARD_ANNOTATION, "")
        lease.metadata.annotations[SHARD_ANNOTATION] = identity
        lease.spec.renew_time = timeutil.rfc3339_micro()
        try:
            await c.leases.update(lease)
        except errors.Conflict:
            continue
        log.info("hollow_shard_claimed", slot=slot, identity=identity, how="taken over",
                 previous=previous)
        return slot
    raise SystemExit(f"all {slots} hollow-node shard slots are taken (kplane tokens --hollow-slots makes more)")
