"""Several apiservers over one etcd (``kplane up --apiservers 2``), on real processes: each has its
own watch cache, a list from either reflects every write acknowledged before it began (Kubernetes'
consistent reads), and a client given both fails over when one dies — the scheduler and kubelets
included."""

from __future__ import annotations

import asyncio

import pytest

from machinery import errors
from machinery.client import Client
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

replicas_cluster = cluster_fixture(apiservers=2, nodes=1, schedulers=1, node_cpu="64", node_memory="256Gi",
                                   node_pods=500, kubelet_args=FAST_KUBELET)


def _one(tc, name: str) -> Client:
    """A client of one apiserver only (no failover)."""
    return Client(tc.process(name).grpc, tc.token)


def test_every_client_is_given_every_apiserver_its_own_first(replicas_cluster):
    tc = replicas_cluster
    first, second = tc.process("apiserver").grpc, tc.process("apiserver-2").grpc
    assert tc.server == f"{first},{second}"
    servers = {name: p.argv[p.argv.index("--server") + 1] for name, p in tc.state.processes.items()
               if "--server" in p.argv}
    assert servers == {"scheduler": f"{first},{second}", "kubelet/node-1": f"{first},{second}"}


async def test_a_create_through_one_apiserver_is_in_a_list_from_the_other_at_once(replicas_cluster):
    """Issue 22's acceptance, 1,000 times in a row: no list from apiserver-2 misses a pod
    apiserver-1 acknowledged before the list was sent."""
    tc = replicas_cluster
    one, two = _one(tc, "apiserver"), _one(tc, "apiserver-2")
    try:
        for i in range(1000):
            name = f"seen-{i}"
            # (bound to a node no kubelet runs: no component acts on it between the two calls)
            await one.pods.create(MakePod().name(name).label("batch", "seen").node("nowhere").obj())
            listed = await two.pods.list("default", field_selector=f"metadata.name={name}")
            assert [p.metadata.name for p in listed.items] == [name], f"create {i} not in apiserver-2's list"
    finally:
        await one.close()
        await two.close()


async def test_clients_fail_over_when_an_apiserver_dies(replicas_cluster):
    """Creates in flight through a client of both while apiserver-1 is killed: every acknowledged
    create is stored and scheduled (the scheduler fails over too), and a watcher on apiserver-2
    sees each of them added exactly once, in revision order. apiserver-1 comes back and serves
    the same pods."""
    tc = replicas_cluster
    writer, watcher = tc.client(), _one(tc, "apiserver-2")
    start_rv = (await watcher.pods.list("default")).metadata.resource_version
    added: list[tuple[int, str]] = []
    created: set[str] = set()
    total = 200

    async def watch() -> None:
        async for ev in watcher.pods.watch("default", label_selector="batch=failover", resource_version=start_rv,
                                           allow_bookmarks=False):
            if ev.type == "ADDED":
                added.append((int(ev.object.metadata.resource_version), ev.object.metadata.name))

    async def create(i: int) -> None:
        try:
            await writer.pods.create(MakePod().name(f"fo-{i}").label("batch", "failover")
                                     .req(cpu="10m", memory="16Mi").grace(0).obj())
        except errors.ApiError:
            return  # refused or cut off while apiserver-1 went: it may or may not have landed
        created.add(f"fo-{i}")

    watch_task = asyncio.create_task(watch())
    try:
        sem = asyncio.Semaphore(16)

        async def limited(i: int) -> None:
            async with sem:
                await create(i)
                if i == total // 4:
                    kill(tc, "apiserver")

        await asyncio.gather(*(limited(i) for i in range(total)))
        assert len(created) >= total // 2, f"only {len(created)} of {total} creates acknowledged"
        listed = await watcher.pods.list("default", label_selector="batch=failover")
        stored = {p.metadata.name: p for p in listed.items}
        assert created <= set(stored), f"acknowledged but not stored: {sorted(created - set(stored))}"

        async def all_bound() -> bool:
            pods = (await watcher.pods.list("default", label_selector="batch=failover")).items
            return all(p.spec.node_name for p in pods)

        await eventually(all_bound, timeout=60, what="every pod bound by the scheduler after the failover")

        async def watched_all() -> bool:
            return {n for _, n in added} >= set(stored)

        await eventually(watched_all, timeout=30, what="apiserver-2's watcher saw every pod")
        names = [n for _, n in added]
        assert len(names) == len(set(names)), "a pod was ADDED twice on one watch"
        revisions = [rv for rv, _ in added]
        assert revisions == sorted(revisions), "ADDED events out of revision order"

        start(tc, "apiserver")
        back = _one(tc, "apiserver")
        try:
            again = await back.pods.list("default", label_selector="batch=failover")
            assert {p.metadata.name for p in again.items} == set(stored)
        finally:
            await back.close()
    finally:
        watch_task.cancel()
        await asyncio.gather(watch_task, return_exceptions=True)
        await writer.close()
        await watcher.close()
