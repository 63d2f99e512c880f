"""Leader election against a real apiserver: two schedulers' electors on one Lease.

Durations are short (lease 2 s, renew deadline 1 s, retry 0.2 s); waits are eventual and generous.
"""

from __future__ import annotations

import asyncio

import pytest

from machinery.leaderelection import LeaderElectionConfig, LeaderElector
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

NS, LEASE = "kube-system", "kube-scheduler"


def _config(identity: str) -> LeaderElectionConfig:
    return LeaderElectionConfig(NS, LEASE, identity, lease_duration=2.0, renew_deadline=1.0, retry_period=0.2,
                                release_on_cancel=False)


async def test_the_standby_takes_over_when_the_leading_scheduler_is_killed(kcluster, client):
    leading: list[str] = []
    stopped: list[str] = []

    def elector(identity: str) -> LeaderElector:
        async def lead() -> None:
            leading.append(identity)
            await asyncio.Event().wait()
        return LeaderElector(client, _config(identity), lead, lambda: stopped.append(identity))

    electors = {name: elector(name) for name in ("scheduler-a", "scheduler-b")}
    tasks = {name: asyncio.create_task(e.run()) for name, e in electors.items()}
    try:
        await eventually(lambda: len(leading) == 1, timeout=15, what="one scheduler leads")
        first = leading[0]
        second = next(n for n in electors if n != first)
        lease = await client.leases.get(LEASE, NS)
        assert lease.spec.holder_identity == first
        assert lease.spec.lease_duration_seconds == 2 and lease.spec.lease_transitions == 0
        assert electors[first].is_leader() and not electors[second].is_leader()
        await eventually(lambda: electors[second].leader() == first, timeout=15, what="the standby sees the leader")

        # Kill the leader without releasing the Lease: the standby waits it out, then takes over.
        tasks[first].cancel()
        with pytest.raises(asyncio.CancelledError):
            await tasks[first]
        assert stopped == [first]
        await eventually(electors[second].is_leader, timeout=20, what="the standby leads")
        assert leading == [first, second]

        lease = await client.leases.get(LEASE, NS)
        assert lease.spec.holder_identity == second and lease.spec.lease_transitions == 1
        assert lease.spec.renew_time >= lease.spec.acquire_time
    finally:
        for t in tasks.values():
            t.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)


async def test_a_leader_stopped_with_release_hands_over_at_once(kcluster, client):
    # A 30 s lease: only the release lets the standby in within the wait below.
    def config(identity: str) -> LeaderElectionConfig:
        return LeaderElectionConfig(NS, "kube-controller-manager", identity, lease_duration=30.0,
                                    renew_deadline=20.0, retry_period=0.2, release_on_cancel=True)

    async def lead() -> None:
        await asyncio.Event().wait()

    a = LeaderElector(client, config("a"), lead, lambda: None)
    b = LeaderElector(client, config("b"), lead, lambda: None)
    task_a = asyncio.create_task(a.run())
    task_b: asyncio.Task | None = None
    try:
        await eventually(a.is_leader, timeout=15, what="a leads")
        task_b = asyncio.create_task(b.run())
        await eventually(lambda: b.leader() == "a", timeout=15, what="b sees a")
        task_a.cancel()
        await asyncio.gather(task_a, return_exceptions=True)
        await eventually(b.is_leader, timeout=10, what="b takes the released lease")
        lease = await client.leases.get("kube-controller-manager", NS)
        assert (lease.spec.holder_identity, lease.spec.lease_transitions) == ("b", 1)
    finally:
        for t in (task_a, task_b):
            if t is not None:
                t.cancel()
        await asyncio.gather(*(t for t in (task_a, task_b) if t is not None), return_exceptions=True)
