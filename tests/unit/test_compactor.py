"""The apiserver's compactor: which revision a round compacts to, and what it learns when
another apiserver compacted first (apiserver/compactor.py)."""

from __future__ import annotations

import asyncio
import contextlib
from types import SimpleNamespace

from apiserver.compactor import Compactor, compaction_target
from apiserver.etcd import CompactedError, EtcdError

GIB = 1 << 30


def test_history_within_budget_is_kept_whole():
    assert compaction_target(current=1_000_000, compacted=0, in_use=GIB - 1, budget=GIB, retention=0) is None


def test_over_budget_the_older_half_of_the_kept_history_goes():
    assert compaction_target(1_000_000, 0, GIB + 1, GIB, 0) == (500_000, "budget")
    # A round later, still over: half of what is left.
    assert compaction_target(1_000_000, 500_000, GIB + 1, GIB, 0) == (750_000, "budget")


def test_no_budget_keeps_everything():
    assert compaction_target(1_000_000, 0, 100 * GIB, 0, 0) is None


def test_retention_keeps_the_last_n_revisions():
    assert compaction_target(1_000, 0, 0, 0, 100) == (900, "retention")
    assert compaction_target(1_000, 900, 0, 0, 100) is None
    assert compaction_target(50, 0, 0, 0, 100) is None


def test_the_larger_target_wins():
    assert compaction_target(1_000, 0, GIB + 1, GIB, 800) == (500, "budget")
    assert compaction_target(1_000, 0, GIB + 1, GIB, 100) == (900, "retention")


def test_nothing_left_to_halve():
    assert compaction_target(11, 10, GIB + 1, GIB, 0) is None


class FakeEtcd:
    def __init__(self, revision: int, in_use: int, compacted_elsewhere: int = 0):
        self.revision = revision
        self.in_use = in_use
        self.compacted_elsewhere = compacted_elsewhere
        self.compactions: list[tuple[int, bool]] = []

    async def status(self):
        return SimpleNamespace(header=SimpleNamespace(revision=self.revision, cluster_id=7),
                               dbSize=2 * self.in_use, dbSizeInUse=self.in_use)

    async def compact(self, revision: int, physical: bool = False, timeout: float | None = None) -> None:
        if revision <= self.compacted_elsewhere:
            raise CompactedError()
        self.compactions.append((revision, physical))

    async def compact_revision(self) -> int:
        return self.compacted_elsewhere


async def test_a_round_over_budget_compacts_physically_and_remembers():
    etcd = FakeEtcd(revision=1_000, in_use=GIB + 1)
    c = Compactor(etcd, budget=GIB, retention=0, interval=60)  # type: ignore[arg-type]
    assert await c.round() == 500
    assert etcd.compactions == [(500, True)]
    assert c.compacted == 500
    etcd.in_use = GIB // 2
    assert await c.round() is None
    assert etcd.compactions == [(500, True)]


async def test_a_compaction_another_apiserver_made_first_is_learnt_not_retried():
    etcd = FakeEtcd(revision=1_000, in_use=GIB + 1, compacted_elsewhere=800)
    c = Compactor(etcd, budget=GIB, retention=0, interval=60)  # type: ignore[arg-type]
    assert await c.round() is None
    assert c.compacted == 800
    assert await c.round() == 900  # the half of what the other left
    assert etcd.compactions == [(900, True)]


async def test_the_loop_learns_where_history_begins_once_and_outlives_an_etcd_outage():
    class Flaky(FakeEtcd):
        learnt = 0
        outages = 1

        async def compact_revision(self) -> int:
            self.learnt += 1
            return await super().compact_revision()

        async def status(self):
            if self.outages:
                self.outages -= 1
                raise EtcdError("etcd status failed: UNAVAILABLE")
            return await super().status()

    etcd = Flaky(revision=1_000, in_use=GIB + 1, compacted_elsewhere=100)
    c = Compactor(etcd, budget=GIB, retention=0, interval=0)  # type: ignore[arg-type]
    task = asyncio.create_task(c.run())
    async with asyncio.timeout(10):
        while len(etcd.compactions) < 2:
            await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert etcd.learnt == 1
    assert etcd.compactions[:2] == [(550, True), (775, True)]
