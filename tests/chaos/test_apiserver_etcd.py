"""Chaos for the API side: kill the apiserver under load, kill etcd, start with no etcd at all.

- An informer connected across an apiserver restart, with 1,000 writes in flight, resumes from
  its last resourceVersion: every object arrives exactly once, nothing is missed, no relist.
- While etcd is down the apiserver reports unhealthy, and recovers when etcd is back.
- An apiserver started with an unreachable etcd says so, keeps retrying, and does not exit.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter

import pytest

from cli import cluster
from machinery import errors
from machinery.informer import Informer
from machinery.kinds import POD
from tests.harness.builders import MakePod
from tests.harness.cluster import ROOT, start_cluster, stop_cluster
from tests.harness.wait import eventually

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

WRITES = 1000
WRITERS = 16


@pytest.fixture
def fresh_cluster():
    tc = start_cluster()
    try:
        yield tc
    finally:
        stop_cluster(tc)


def _healthz(admin: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{admin}/healthz", timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


async def _create_until_done(client, name: str) -> None:
    """Create, retrying through the restart; an AlreadyExists after a retry means an earlier try landed."""
    retried = False
    while True:
        try:
            await client.pods.create(MakePod().name(name).label("batch", "restart").obj(), timeout=5)
            return
        except errors.AlreadyExists:
            if retried:
                return
            raise
        except (errors.Unavailable, errors.Timeout):
            retried = True
            await asyncio.sleep(0.05)


async def test_informer_resumes_across_apiserver_restart_with_1000_writes_in_flight(fresh_cluster):
    client = fresh_cluster.client()
    watcher_client = fresh_cluster.client()
    inf = Informer(watcher_client, POD, namespace="default", label_selector="batch=restart")
    added: Counter[str] = Counter()
    others: list[str] = []
    revisions: list[int] = []

    def on_add(pod):
        added[pod.metadata.name] += 1
        revisions.append(int(pod.metadata.resource_version))

    inf.add_handler(on_add, lambda old, new: others.append(f"update {new.metadata.name}"),
                    lambda pod: others.append(f"delete {pod.metadata.name}"))
    await inf.start()
    await inf.wait_for_sync(10)
    names = [f"w-{i:04d}" for i in range(WRITES)]
    queue: asyncio.Queue[str] = asyncio.Queue()
    for n in names:
        queue.put_nowait(n)

    async def writer():
        while not queue.empty():
            await _create_until_done(client, queue.get_nowait())

    writers = [asyncio.create_task(writer()) for _ in range(WRITERS)]
    try:
        await eventually(lambda: len(added) >= 300, timeout=60, what="300 writes observed before the restart")
        loop = asyncio.get_running_loop()
        killed = await loop.run_in_executor(None, fresh_cluster.kplane, "kill", "apiserver")
        assert killed.returncode == 0, killed.stderr
        await asyncio.sleep(0.5)  # writes keep coming and fail while the apiserver is down
        started = await loop.run_in_executor(None, fresh_cluster.kplane, "start", "apiserver")
        assert started.returncode == 0, started.stderr
        await asyncio.wait_for(asyncio.gather(*writers), 120)
        await eventually(lambda: len(added) == WRITES, timeout=30, what="every write observed by the informer")
    finally:
        for w in writers:
            w.cancel()
        await inf.stop()
        await client.close()
        await watcher_client.close()
    duplicated = {n: c for n, c in added.items() if c != 1}
    assert not duplicated, f"objects delivered more than once: {duplicated}"
    assert set(added) == set(names)
    assert others == []
    assert revisions == sorted(revisions), "events arrived out of resourceVersion order"
    assert inf.lists == 1, "the informer relisted instead of resuming its watch"


async def test_apiserver_reports_unhealthy_while_etcd_is_down_and_recovers(fresh_cluster):
    api = fresh_cluster.process("apiserver")
    etcd = fresh_cluster.process("etcd")
    client = fresh_cluster.client()
    try:
        await client.pods.create(MakePod().name("before-etcd-kill").obj())
        cluster.kill(etcd)
        await eventually(lambda: _healthz(api.admin)[0] == 503, timeout=15, what="apiserver unhealthy")
        status, body = _healthz(api.admin)
        assert "etcd" in body
        with pytest.raises((errors.Unavailable, errors.Timeout)):
            await client.pods.create(MakePod().name("while-etcd-down").obj(), timeout=3)
        ok, reason = cluster.start(fresh_cluster.state, etcd, 30)
        assert ok, reason
        await eventually(lambda: _healthz(api.admin)[0] == 200, timeout=30, what="apiserver healthy again")
        await client.pods.create(MakePod().name("after-etcd-restart").obj())
        names = [p.metadata.name for p in (await client.pods.list("default")).items]
        assert "before-etcd-kill" in names and "after-etcd-restart" in names
        assert cluster.alive(api.pid), "the apiserver must survive an etcd outage"
    finally:
        await client.close()


def test_apiserver_with_unreachable_etcd_says_so_and_keeps_retrying(tmp_path):
    ports = cluster.free_ports(3)
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('t0ken,admin,admin,"system:masters"\n')
    log = tmp_path / "apiserver.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "apiserver", "--etcd-endpoints", f"127.0.0.1:{ports[0]}",
             "--listen", f"127.0.0.1:{ports[1]}", "--admin-listen", f"127.0.0.1:{ports[2]}",
             "--token-auth-file", str(tokens)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and log.read_text().count("etcd_unreachable") < 2:
            time.sleep(0.2)
        text = log.read_text()
        assert text.count("etcd_unreachable") >= 2, text
        assert proc.poll() is None, "the apiserver exited instead of retrying"
        status, body = _healthz(f"127.0.0.1:{ports[2]}")
        assert status == 503 and "waiting for etcd" in body

        async def ask():
            from machinery.client import Client
            c = Client(f"127.0.0.1:{ports[1]}", "t0ken")
            try:
                with pytest.raises(errors.Unavailable, match="waiting for etcd"):
                    await c.pods.list("default", timeout=2)
            finally:
                await c.close()

        asyncio.run(ask())
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


async def test_informer_relists_when_its_version_is_too_old():
    """A watch that cannot deliver while more changes happen than the watch cache keeps resumes
    from a version the apiserver no longer has (Gone): the informer relists and converges."""
    tc = start_cluster(apiserver_args=["--watch-cache-size=5"])
    client = tc.client()
    inf = Informer(client, POD, namespace="default", label_selector="relist=yes")
    try:
        await inf.start()
        await inf.wait_for_sync(10)
        await client.pods.create(MakePod().name("r-0").label("relist", "yes").obj())
        await eventually(lambda: inf.get("r-0", "default") is not None, what="first pod seen")
        out = tc.kplane("failpoint", "apiserver", "apiserver/watch-delivery", "error")
        assert out.returncode == 0, out.stderr
        for i in range(1, 21):
            await client.pods.create(MakePod().name(f"r-{i}").label("relist", "yes").obj())
        await client.pods.delete("r-0")
        out = tc.kplane("failpoint", "apiserver", "apiserver/watch-delivery", "off")
        assert out.returncode == 0, out.stderr
        want = sorted(f"r-{i}" for i in range(1, 21))
        await eventually(lambda: sorted(p.metadata.name for p in inf.list_all()) == want,
                         timeout=20, what="the informer to converge after relisting")
        assert inf.lists >= 2, "the informer should have relisted"
    finally:
        await inf.stop()
        await client.close()
        stop_cluster(tc)
