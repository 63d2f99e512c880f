"""The apiserver's seats (apiserver/requests.py ``Seats``): the legacy inflight pools, the node
heartbeats' own pool (API Priority and Fairness' node-high level, which queues) and
system:masters exempt."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from apiserver.auth import MASTERS_GROUP, NODES_GROUP, User
from apiserver.requests import Api
from machinery import errors

NODE = User("system:node:node-1", groups=(NODES_GROUP, "system:authenticated"))
SCHEDULER = User("system:kube-scheduler", groups=("system:authenticated",))
ADMIN = User("admin", groups=(MASTERS_GROUP,))


def _api(max_inflight: int = 400, max_mutating: int = 1) -> Api:
    api = Api(registry=None, pods=None, cache=None, authn=None,  # type: ignore[arg-type]
              max_inflight=max_inflight, max_mutating_inflight=max_mutating)
    api.ready = True
    return api


@contextlib.asynccontextmanager
async def _holding(api: Api, user: User, verb: str, resource: str, subresource: str = ""):
    """One request of ``user`` in flight (it holds its seat) for the block's duration."""
    started, release = asyncio.Event(), asyncio.Event()

    async def held(_: User) -> None:
        started.set()
        await release.wait()

    task = asyncio.create_task(api.endpoint(verb, resource, subresource).call(lambda: user, held))
    await started.wait()
    try:
        yield
    finally:
        release.set()
        await task


async def _call(api: Api, user: User, verb: str, resource: str, subresource: str = "") -> str:
    async def answer(u: User) -> str:
        return u.name
    return await api.endpoint(verb, resource, subresource).call(lambda: user, answer)


async def test_beyond_the_mutating_pool_a_write_is_refused_with_429():
    api = _api()
    async with _holding(api, SCHEDULER, "CREATE", "bindings"):
        with pytest.raises(errors.TooManyRequests):
            await _call(api, SCHEDULER, "CREATE", "pods", "binding")
        with pytest.raises(errors.TooManyRequests):
            await _call(api, NODE, "UPDATE", "pods", "status")  # a node's pod status is no heartbeat
        with pytest.raises(errors.TooManyRequests):
            await _call(api, SCHEDULER, "UPDATE", "leases")  # leader election is no node heartbeat
        assert await _call(api, SCHEDULER, "GET", "pods") == SCHEDULER.name  # the read pool is apart
    assert await _call(api, SCHEDULER, "CREATE", "pods", "binding") == SCHEDULER.name


async def test_a_nodes_heartbeats_have_seats_of_their_own():
    api = _api()
    async with _holding(api, SCHEDULER, "CREATE", "pods", "binding"):
        assert await _call(api, NODE, "UPDATE", "leases") == NODE.name
        assert await _call(api, NODE, "UPDATE", "nodes", "status") == NODE.name
        assert await _call(api, NODE, "CREATE", "nodes") == NODE.name


def test_node_high_seats_are_its_share_of_the_servers_concurrency():
    # APF's default shares: node-high 40 of 245; the server's limit is the two flags' sum.
    assert _api(400, 200).seats["node-high"].limit == 98
    assert _api(0, 200).seats["node-high"].limit == 0  # no limit anywhere: none here either


async def test_beyond_node_high_seats_a_heartbeat_waits_for_one_in_order():
    api = _api(max_inflight=1, max_mutating=1)  # node-high: ceil(2 * 40 / 245) = 1 seat
    pool = api.seats["node-high"]
    answered: list[str] = []

    async def renew(name: str) -> None:
        answered.append(await _call(api, User(name, groups=(NODES_GROUP,)), "UPDATE", "leases"))

    async with _holding(api, NODE, "UPDATE", "leases"):
        waiting = [asyncio.create_task(renew(f"system:node:n{i}")) for i in range(3)]
        while pool.waiting < 3:
            await asyncio.sleep(0)
        assert answered == [] and pool.inflight == 1
    await asyncio.gather(*waiting)
    assert answered == ["system:node:n0", "system:node:n1", "system:node:n2"]  # first come, first served
    assert (pool.inflight, pool.waiting) == (0, 0)


async def test_a_heartbeat_is_refused_when_its_wait_runs_out_or_the_queue_is_full():
    api = _api(max_inflight=1, max_mutating=1)
    pool = api.seats["node-high"]
    pool.wait_limit, pool.queue_limit = 0.01, 1
    async with _holding(api, NODE, "UPDATE", "leases"):
        with pytest.raises(errors.TooManyRequests):  # time-out: nobody gave the seat back
            await _call(api, NODE, "UPDATE", "nodes", "status")
        assert pool.waiting == 0
        pool.wait_limit = 60.0
        first = asyncio.create_task(_call(api, NODE, "UPDATE", "leases"))
        while pool.waiting < 1:
            await asyncio.sleep(0)
        with pytest.raises(errors.TooManyRequests):  # queue-full
            await _call(api, NODE, "UPDATE", "leases")
    assert await first == NODE.name
    assert (pool.inflight, pool.waiting) == (0, 0)


async def test_a_waiter_that_goes_away_leaves_no_seat_taken():
    api = _api(max_inflight=1, max_mutating=1)
    pool = api.seats["node-high"]
    async with _holding(api, NODE, "UPDATE", "leases"):
        gone = asyncio.create_task(_call(api, NODE, "UPDATE", "leases"))
        after = asyncio.create_task(_call(api, NODE, "UPDATE", "leases"))
        while pool.waiting < 2:
            await asyncio.sleep(0)
        gone.cancel()  # the client hung up while queued
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert pool.waiting == 1
    assert await after == NODE.name  # the seat went past the one that left
    assert (pool.inflight, pool.waiting) == (0, 0)


async def test_system_masters_are_exempt():
    api = _api()
    async with _holding(api, SCHEDULER, "CREATE", "pods", "binding"):
        assert await _call(api, ADMIN, "CREATE", "pods") == ADMIN.name


async def test_an_unauthenticated_request_takes_no_seat():
    api = _api()

    def refuse() -> User:
        raise errors.Unauthorized("Unauthorized")
    with pytest.raises(errors.Unauthorized):
        await api.endpoint("CREATE", "pods").call(refuse, lambda u: asyncio.sleep(0))
    assert api.seats["mutating"].inflight == 0
