"""The apiserver's compactor: etcd's history kept, within a budget (docs/apiserver.md, "History, within a budget").

Kubernetes' apiserver compacts etcd every five minutes (``--etcd-compaction-interval``), to the
revision it saw five minutes before. kplane keeps the history instead: it is the cluster's event
log, what ``kplane history`` prints and ``kplane check`` replays. Kept whole, it grows until etcd
refuses every write ("mvcc: database space exceeded" at its ``--quota-backend-bytes``, 2 GiB by
default) — 5,000 nodes renewing Leases write ~500 revisions a second and reach it in well under
an hour. So every ``--compaction-interval`` the compactor reads etcd's status, and

- with ``--history-budget B`` (1 GiB by default): when etcd's data in use passes B, compacts the
  older half of the history still kept (again a round later if that was not enough);
- with ``--compaction-retention N``: compacts everything but the last N revisions.

Compaction waits until etcd has applied it (``physical``), so the next round reads the space it
freed. Several apiservers may each run one: a compaction another did first is learnt, not retried.
"""

from __future__ import annotations

import asyncio
from typing import Literal

from prometheus_client import Counter, Gauge

from apiserver.etcd import CompactedError, EtcdClient, EtcdError
from machinery.logging import get_logger

log = get_logger()

DEFAULT_HISTORY_BUDGET = 1 << 30
# A physical compaction of a million revisions takes etcd tens of seconds (it deletes in batches).
COMPACT_TIMEOUT = 300.0

_STORAGE_SIZE = Gauge("apiserver_storage_size_bytes",
                      "Size of the storage database file physically allocated in bytes.", ["storage_cluster_id"])
_COMPACTIONS = Counter("kplane_history_compactions_total",
                       "Compactions of etcd's history by the apiserver, by what asked for it "
                       "(budget: etcd's data in use passed --history-budget; retention: --compaction-retention).",
                       ["reason"])

Reason = Literal["budget", "retention"]


def compaction_target(current: int, compacted: int, in_use: int, budget: int,
                      retention: int) -> tuple[int, Reason] | None:
    """The revision to compact to and why, or None to keep the history as it is.

    ``current`` is etcd's revision, ``compacted`` the revision its history begins at (0: whole),
    ``in_use`` etcd's bytes of data in use. Over ``budget`` (0: none), the older half of what is
    kept goes; ``retention`` (0: none) keeps that many revisions at most. The larger target wins.
    """
    target: tuple[int, Reason] | None = None
    if retention > 0 and current - retention > compacted:
        target = (current - retention, "retention")
    if budget > 0 and in_use > budget:
        half = compacted + (current - compacted) // 2
        if half > compacted and (target is None or half > target[0]):
            target = (half, "budget")
    return target


class Compactor:
    def __init__(self, etcd: EtcdClient, *, budget: int, retention: int, interval: float):
        self.etcd = etcd
        self.budget = budget
        self.retention = retention
        self.interval = interval
        self.compacted = 0
        self._learnt = False  # where etcd's history begins, read once (it may have been compacted before)

    @property
    def enabled(self) -> bool:
        return self.budget > 0 or self.retention > 0

    async def run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                if not self._learnt:
                    self.compacted = await self.etcd.compact_revision()
                    self._learnt = True
                await self.round()
            except EtcdError as exc:  # etcd away: the etcd probe reports it; the next round tries again
                log.info("etcd_compaction_skipped", error=str(exc))

    async def round(self) -> int | None:
        """One look at etcd's status and, when the budget or the retention asks for it, one
        compaction. Returns the revision compacted to, or None."""
        status = await self.etcd.status()
        _STORAGE_SIZE.labels(storage_cluster_id=str(status.header.cluster_id)).set(status.dbSize)
        current = status.header.revision
        chosen = compaction_target(current, self.compacted, status.dbSizeInUse, self.budget, self.retention)
        if chosen is None:
            return None
        target, reason = chosen
        try:
            await self.etcd.compact(target, physical=True, timeout=COMPACT_TIMEOUT)
        except CompactedError:  # another apiserver compacted further first
            self.compacted = await self.etcd.compact_revision()
            log.info("etcd_compaction_skipped", revision=target, compacted=self.compacted)
            return None
        _COMPACTIONS.labels(reason=reason).inc()
        log.warning("etcd_history_compacted", revision=target, reason=reason, previous=self.compacted,
                    current=current, db_size_in_use=status.dbSizeInUse, budget=self.budget,
                    retention=self.retention)
        self.compacted = target
        return target
