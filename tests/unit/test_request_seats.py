"""The apiserver's seats (apiserver/requests.py ``Seats``): the legacy inflight pools, the node
heartbeats' own pool (API Priority and Fairness' node-high level) and system:masters exempt."""

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


async def test_the_node_high_pool_is_limited_too():
    api = _api(max_inflight=1, max_mutating=1)  # node-high: ceil(2 * 40 / 245) = 1 seat
    async with _holding(api, NODE, "UPDATE", "leases"):
        with pytest.raises(errors.TooManyRequests):
            await _call(api, NODE, "UPDATE", "nodes", "status")


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
