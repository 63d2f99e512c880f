"""The apiserver's seats (apiserver/flowcontrol.py): API Priority and Fairness' bootstrap priority
levels and their queues, the legacy inflight pools, and system:masters exempt from both."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from apiserver.auth import MASTERS_GROUP, NODES_GROUP, User
from apiserver.flowcontrol import Refused, flow_schema
from apiserver.requests import Api
from machinery import errors

NODE = User("system:node:node-1", groups=(NODES_GROUP, "system:authenticated"))
SCHEDULER = User("system:kube-scheduler", groups=("system:authenticated",))
CONTROLLERS = User("system:kube-controller-manager", groups=("system:authenticated",))
ALICE = User("alice", groups=("system:authenticated",))
ROBOT = User("system:serviceaccount:ci:robot", groups=("system:serviceaccounts", "system:authenticated"))
ADMIN = User("admin", groups=(MASTERS_GROUP,))


def _api(max_inflight: int = 1, max_mutating: int = 1, apf: bool = True) -> Api:
    """An Api with only its seats (1 per priority level by default: ceil(2 × shares / 245))."""
    api = Api(registry=None, pods=None, cache=None, authn=None,  # type: ignore[arg-type]
              max_inflight=max_inflight, max_mutating_inflight=max_mutating, priority_and_fairness=apf)
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


async def _until_waiting(api: Api, level: str, n: int) -> None:
    while api.flow_control.levels[level].waiting < n:
        await asyncio.sleep(0)


def test_requests_match_the_bootstrap_flow_schemas():
    assert flow_schema(NODE, "UPDATE", "leases", "") == ("system-node-high", "node-high")
    assert flow_schema(NODE, "UPDATE", "nodes", "status") == ("system-node-high", "node-high")
    assert flow_schema(NODE, "CREATE", "nodes", "") == ("system-node-high", "node-high")
    assert flow_schema(NODE, "UPDATE", "pods", "status") == ("system-nodes", "system")
    assert flow_schema(SCHEDULER, "UPDATE", "leases", "") == ("system-leader-election", "leader-election")
    assert flow_schema(CONTROLLERS, "GET", "leases", "") == ("system-leader-election", "leader-election")
    assert flow_schema(CONTROLLERS, "DELETE", "leases", "") == ("kube-controller-manager", "workload-high")
    assert flow_schema(SCHEDULER, "CREATE", "pods", "binding") == ("kube-scheduler", "workload-high")
    assert flow_schema(CONTROLLERS, "UPDATE", "replicasets", "status") == ("kube-controller-manager", "workload-high")
    assert flow_schema(ROBOT, "LIST", "pods", "") == ("service-accounts", "workload-low")
    assert flow_schema(ALICE, "CREATE", "pods", "") == ("global-default", "global-default")
    assert flow_schema(ADMIN, "CREATE", "pods", "") is None  # exempt


def test_each_level_has_its_share_of_the_servers_seats():
    # The server's limit is the two flags' sum; APF's bootstrap shares sum to 245.
    levels = _api(400, 200).flow_control.levels
    assert {name: s.limit for name, s in levels.items()} == {
        "system": 74, "node-high": 98, "leader-election": 25, "workload-high": 98, "workload-low": 245,
        "global-default": 49, "catch-all": 13}
    assert (levels["node-high"].queue_limit, levels["node-high"].flow_limit) == (64 * 50, 6 * 50)
    assert levels["catch-all"].queue_limit == 0  # Reject, no queues
    assert all(s.limit == 0 for s in _api(0, 0).flow_control.levels.values())  # no limit at all


async def test_a_full_level_does_not_hold_back_another():
    api = _api()
    async with _holding(api, SCHEDULER, "CREATE", "pods", "binding"):  # workload-high's one seat
        assert await _call(api, NODE, "UPDATE", "leases") == NODE.name
        assert await _call(api, NODE, "UPDATE", "pods", "status") == NODE.name
        assert await _call(api, SCHEDULER, "UPDATE", "leases") == SCHEDULER.name  # leader-election
        assert await _call(api, ALICE, "GET", "pods") == ALICE.name
        assert await _call(api, ADMIN, "CREATE", "pods") == ADMIN.name


async def test_beyond_its_seats_a_request_waits_in_its_flows_queue_in_order():
    api = _api()
    answered: list[str] = []

    async def renew(name: str) -> None:
        answered.append(await _call(api, User(name, groups=(NODES_GROUP,)), "UPDATE", "leases"))

    async with _holding(api, NODE, "UPDATE", "leases"):
        waiting = [asyncio.create_task(renew(f"system:node:n{i}")) for i in range(3)]
        await _until_waiting(api, "node-high", 3)
        assert answered == []
    await asyncio.gather(*waiting)
    assert answered == ["system:node:n0", "system:node:n1", "system:node:n2"]
    level = api.flow_control.levels["node-high"]
    assert (level.inflight, level.waiting) == (0, 0)


async def test_flows_are_served_in_turn():
    api = _api()
    answered: list[str] = []
    bob = User("bob", groups=("system:authenticated",))

    async def create(user: User) -> None:
        answered.append(await _call(api, user, "CREATE", "pods"))

    async with _holding(api, ALICE, "CREATE", "pods"):
        tasks = [asyncio.create_task(create(ALICE)) for _ in range(3)]
        await _until_waiting(api, "global-default", 3)
        tasks.append(asyncio.create_task(create(bob)))  # came last, served second
        await _until_waiting(api, "global-default", 4)
    await asyncio.gather(*tasks)
    assert answered == ["alice", "bob", "alice", "alice"]


async def test_a_request_is_refused_when_its_wait_runs_out_or_its_queue_is_full():
    api = _api()
    level = api.flow_control.levels["node-high"]
    level.wait_limit = 0.01
    async with _holding(api, NODE, "UPDATE", "leases"):
        with pytest.raises(errors.TooManyRequests):  # time-out: nobody gave the seat back
            await _call(api, NODE, "UPDATE", "nodes", "status")
        assert level.waiting == 0
        level.wait_limit, level.flow_limit = 60.0, 1
        first = asyncio.create_task(_call(api, NODE, "UPDATE", "leases"))
        await _until_waiting(api, "node-high", 1)
        with pytest.raises(errors.TooManyRequests):  # its flow's queue is full
            await _call(api, NODE, "UPDATE", "leases")
        level.queue_limit = 1
        with pytest.raises(errors.TooManyRequests):  # the level's queues are full
            await _call(api, User("system:node:node-2", groups=(NODES_GROUP,)), "UPDATE", "leases")
    assert await first == NODE.name
    assert (level.inflight, level.waiting) == (0, 0)


async def test_a_waiter_that_goes_away_leaves_no_seat_taken():
    api = _api()
    level = api.flow_control.levels["node-high"]
    async with _holding(api, NODE, "UPDATE", "leases"):
        gone = asyncio.create_task(_call(api, NODE, "UPDATE", "leases"))
        after = asyncio.create_task(_call(api, NODE, "UPDATE", "leases"))
        await _until_waiting(api, "node-high", 2)
        gone.cancel()  # the client hung up while queued
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert level.waiting == 1
    assert await after == NODE.name  # the seat went past the one that left
    assert (level.inflight, level.waiting) == (0, 0)


async def test_catch_all_refuses_at_once():
    api = _api()
    level = api.flow_control.levels["catch-all"]
    level.inflight = level.limit  # no bootstrap FlowSchema sends here; its seats are full
    with pytest.raises(Refused) as refused:
        await level.wait("x")
    assert refused.value.reason == "concurrency-limit"


async def test_without_apf_the_legacy_pools_refuse_at_once():
    api = _api(max_inflight=400, max_mutating=1, apf=False)
    async with _holding(api, SCHEDULER, "CREATE", "bindings"):
        with pytest.raises(errors.TooManyRequests):
            await _call(api, SCHEDULER, "CREATE", "pods", "binding")
        with pytest.raises(errors.TooManyRequests):
            await _call(api, NODE, "UPDATE", "leases")  # no level of its own here
        assert await _call(api, SCHEDULER, "GET", "pods") == SCHEDULER.name  # the read pool is apart
        assert await _call(api, ADMIN, "CREATE", "pods") == ADMIN.name  # masters exempt
    assert await _call(api, SCHEDULER, "CREATE", "pods", "binding") == SCHEDULER.name


async def test_an_unauthenticated_request_takes_no_seat():
    api = _api()

    def refuse() -> User:
        raise errors.Unauthorized("Unauthorized")
    with pytest.raises(errors.Unauthorized):
        await api.endpoint("CREATE", "pods").call(refuse, lambda u: asyncio.sleep(0))
    assert all(s.inflight == 0 for s in api.flow_control.levels.values())
