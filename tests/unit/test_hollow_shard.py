"""kubelet/hollow/shard.py: replicas of the hollow-nodes service claim distinct slots through the
first node's Lease, a restarted container gets its own slot back, a dead shard's slot is taken
over once its Lease has expired."""

from __future__ import annotations

import asyncio
import datetime

import pytest

from kubelet.hollow.shard import SHARD_ANNOTATION, claim_slot
from machinery import errors, timeutil
from machinery.api import coordination_pb2


class _Leases:
    """kube-node-lease's Leases, as the apiserver answers them (resourceVersions, conflicts)."""

    def __init__(self) -> None:
        self.store: dict[str, coordination_pb2.Lease] = {}
        self.rv = 0

    def _stored(self, lease: coordination_pb2.Lease) -> coordination_pb2.Lease:
        self.rv += 1
        lease.metadata.resource_version = str(self.rv)
        self.store[lease.metadata.name] = lease
        out = coordination_pb2.Lease()
        out.CopyFrom(lease)
        return out

    async def get(self, name: str, namespace: str) -> coordination_pb2.Lease:
        await asyncio.sleep(0)
        if name not in self.store:
            raise errors.not_found("leases", name)
        out = coordination_pb2.Lease()
        out.CopyFrom(self.store[name])
        return out

    async def create(self, lease: coordination_pb2.Lease) -> coordination_pb2.Lease:
        await asyncio.sleep(0)
        if lease.metadata.name in self.store:
            raise errors.already_exists("leases", lease.metadata.name)
        return self._stored(lease)

    async def update(self, lease: coordination_pb2.Lease) -> coordination_pb2.Lease:
        await asyncio.sleep(0)
        if self.store[lease.metadata.name].metadata.resource_version != lease.metadata.resource_version:
            raise errors.conflict("leases", lease.metadata.name, "the object has been modified")
        return self._stored(lease)


class _Client:
    def __init__(self, leases: _Leases):
        self.leases = leases


@pytest.fixture
def leases() -> _Leases:
    return _Leases()


async def _claim(leases: _Leases, identity: str, slots: int = 4) -> int:
    return await claim_slot(lambda name: _Client(leases), "hollow-", slots, identity)  # type: ignore[arg-type,return-value]


async def test_replicas_starting_together_claim_distinct_slots(leases):
    got = await asyncio.gather(*(_claim(leases, f"container-{i}") for i in range(4)))
    assert sorted(got) == [1, 2, 3, 4]
    assert {leases.store[f"hollow-{s}-1"].metadata.annotations[SHARD_ANNOTATION] for s in got} == \
        {f"container-{i}" for i in range(4)}


async def test_a_restarted_container_gets_its_slot_back_and_a_fifth_replica_finds_none(leases):
    for i in range(4):
        await _claim(leases, f"container-{i}")
    assert await _claim(leases, "container-2") == 3
    with pytest.raises(SystemExit, match="all 4 hollow-node shard slots are taken"):
        await _claim(leases, "container-9")


async def test_a_dead_shards_slot_is_taken_over_once_its_lease_expired(leases):
    await _claim(leases, "gone")
    await _claim(leases, "alive")
    with pytest.raises(SystemExit):  # both held and renewed
        await _claim(leases, "new", slots=2)
    old = timeutil.now() - datetime.timedelta(seconds=41)
    leases.store["hollow-1-1"].spec.renew_time = timeutil.rfc3339_micro(old)
    assert await _claim(leases, "new", slots=2) == 1
    assert leases.store["hollow-1-1"].metadata.annotations[SHARD_ANNOTATION] == "new"
