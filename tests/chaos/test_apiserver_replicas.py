"""Chaos for a replicated control plane (``kplane up --etcd-members 3 --apiservers 2 --nodes 2``):
1,000 creates in flight through clients of both apiservers while an etcd member and then the
first apiserver are killed and started again (issue 22's acceptance).

Afterwards: every create a client had acknowledged is in the cluster's history; an informer on
each apiserver (each watching its own, no failover) saw every pod added exactly once and in
revision order, resuming across its apiserver's restart; ``kplane check`` finds nothing wrong.
The kubelets and the scheduler run through it all, failing over as the creates do.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from machinery import errors
from machinery.client import Client
from machinery.informer import Informer
from machinery.kinds import POD
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, kill, start, start_cluster, stop_cluster
from tests.harness.wait import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

WRITES = 1000
WRITERS = 16


@pytest.fixture
def replicated():
    tc = start_cluster(etcd_members=3, apiservers=2, nodes=2, schedulers=1, node_cpu="64", node_memory="256Gi",
                       node_pods=600, kubelet_args=FAST_KUBELET)
    try:
        yield tc
    finally:
        stop_cluster(tc)


class _Watcher:
    """An informer on one apiserver only, counting the pods it saw added and their revisions."""

    def __init__(self, tc, apiserver: str):
        self.client = Client(tc.process(apiserver).grpc, tc.token)
        self.informer = Informer(self.client, POD, namespace="default", label_selector="batch=replicas")
        self.added: Counter[str] = Counter()
        self.revisions: list[int] = []
        self.informer.add_handler(self._on_add, lambda old, new: None, lambda pod: None)

    def _on_add(self, pod) -> None:
        self.added[pod.metadata.name] += 1
        self.revisions.append(int(pod.metadata.resource_version))

    async def start(self) -> None:
        await self.informer.start()
        await self.informer.wait_for_sync(30)

    async def stop(self) -> None:
        await self.informer.stop()
        await self.client.close()


async def _create(client: Client, name: str, acknowledged: set[str], cut_off: Counter[str]) -> None:
    """Create until acknowledged; an AlreadyExists after a failed try means that try landed.
    ``cut_off`` counts the tries that failed, by error."""
    retried = False
    while True:
        try:
            await client.pods.create(MakePod().name(name).label("batch", "replicas").grace(0).obj(), timeout=5)
            break
        except errors.AlreadyExists:
            if not retried:
                raise
            break
        except (errors.Unavailable, errors.Timeout, errors.InternalError) as exc:
            cut_off[type(exc).__name__] += 1
            retried = True
            await asyncio.sleep(0.05)
    acknowledged.add(name)


async def test_creates_survive_an_etcd_member_and_an_apiserver_killed_under_load(replicated):
    tc = replicated
    watchers = [_Watcher(tc, "apiserver"), _Watcher(tc, "apiserver-2")]
    for w in watchers:
        await w.start()
    clients = [tc.client(), Client(tc.process("apiserver-2").grpc + "," + tc.process("apiserver").grpc, tc.token)]
    names = [f"r-{i:04d}" for i in range(WRITES)]
    queue: asyncio.Queue[str] = asyncio.Queue()
    for n in names:
        queue.put_nowait(n)
    acknowledged: set[str] = set()
    cut_off: Counter[str] = Counter()

    async def writer(client: Client) -> None:
        while not queue.empty():
            await _create(client, queue.get_nowait(), acknowledged, cut_off)

    loop = asyncio.get_running_loop()

    async def at(count: int, action, component: str) -> None:
        await eventually(lambda: len(acknowledged) >= count, timeout=120, what=f"{count} creates acknowledged")
        await loop.run_in_executor(None, action, tc, component)

    writers = [asyncio.create_task(writer(clients[i % 2])) for i in range(WRITERS)]
    try:
        await at(200, kill, "etcd-2")
        await at(350, start, "etcd-2")
        await at(500, kill, "apiserver")
        await at(650, start, "apiserver")
        async with asyncio.timeout(180):
            await asyncio.gather(*writers)
        assert acknowledged == set(names)
        assert cut_off, "no create was cut off: the kills did not happen under load"

        history: set[str] = set()
        async for resp in clients[1].history(since=0, follow=False):
            history |= {e.name for e in resp.entries if e.kind == "Pod" and e.type == "ADDED"}
        assert acknowledged <= history, f"acknowledged, not in the history: {sorted(acknowledged - history)[:10]}"

        for w in watchers:
            await eventually(lambda w=w: set(w.added) >= acknowledged, timeout=60,
                             what="every acknowledged pod seen by the informer on each apiserver")
            twice = {n: c for n, c in w.added.items() if c != 1}
            assert not twice, f"pods added more than once: {twice}"
            assert w.revisions == sorted(w.revisions), "pods added out of revision order"

        async def all_running() -> bool:
            pods = (await clients[0].pods.list("default", label_selector="batch=replicas")).items
            return len(pods) == WRITES and all(p.status.phase == "Running" for p in pods)

        await eventually(all_running, timeout=180, what="every pod scheduled and Running")
        result = await loop.run_in_executor(None, tc.kplane, "check")
        assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"
    finally:
        for t in writers:
            t.cancel()
        await asyncio.gather(*writers, return_exceptions=True)
        for w in watchers:
            await w.stop()
        for c in clients:
            await c.close()
