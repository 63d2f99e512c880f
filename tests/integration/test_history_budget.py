"""The history budget against a real etcd: past ``--history-budget`` the apiserver compacts the
older half of etcd's history (apiserver/compactor.py), says so in its log and metrics, the
history before it answers 410 with the revision to read from, and the cluster goes on."""

from __future__ import annotations

import subprocess
import sys

import pytest

from apiserver.etcd import EtcdClient
from machinery import errors
from tests.harness.builders import MakePod
from tests.harness.cluster import cluster_fixture
from tests.harness.metrics import metric
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

# A budget of one byte: every round finds etcd over it and halves the history kept.
kcluster = cluster_fixture(apiserver_args=["--history-budget", "1", "--compaction-interval", "0.3"])


async def _history_start(client) -> int:
    """The revision ``kplane history`` from 0 is refused at (0: it is whole)."""
    try:
        async for _ in client.history(0):
            pass
    except errors.Gone as exc:
        return int(str(exc).rsplit("--since ", 1)[1])
    return 0


async def test_over_budget_the_older_history_is_compacted_and_the_cluster_goes_on(kcluster, client):
    for i in range(20):
        await client.pods.create(MakePod().name(f"p{i}").obj())
    first = (await client.pods.get("p0")).metadata.resource_version

    async def compacted_past_first_pod() -> bool:
        return await _history_start(client) > int(first)
    await eventually(compacted_past_first_pod, timeout=30, what="history compacted past the first pod")

    assert metric(kcluster, "apiserver", "kplane_history_compactions_total", 'reason="budget"') >= 1
    assert metric(kcluster, "apiserver", "apiserver_storage_size_bytes") > 0
    assert "etcd_history_compacted" in (kcluster.logs())
    # The kept history reads from where the refusal said (the compactor goes on halving it every
    # 0.3 s, so a read may meet the next compaction: then from its revision).
    revs: list[int] = []

    async def kept_history_reads() -> bool:
        start = await _history_start(client)
        revs[:] = [e.rev async for resp in client.history(start) for e in resp.entries]
        return all(r >= start for r in revs)
    await eventually(kept_history_reads, timeout=30, what="the kept history read from its first revision")
    start = await _history_start(client)
    # etcd agrees on where its history begins (the compactor learns it so after a restart).
    etcd = EtcdClient([kcluster.process("etcd").grpc])
    etcd.connect()
    try:
        assert await etcd.compact_revision() >= start
    finally:
        await etcd.close()
    # Writes and reads go on.
    await client.pods.create(MakePod().name("after").obj())
    assert (await client.pods.get("after")).metadata.name == "after"


def test_a_bad_budget_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, "-m", "apiserver", "--etcd-endpoints", "127.0.0.1:1",
                          "--token-auth-file", str(tmp_path / "t.csv"), "--history-budget", "lots"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [out.stderr.strip()]
    assert out.stderr.startswith("--history-budget: "), out.stderr
