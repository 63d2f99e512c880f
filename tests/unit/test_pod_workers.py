"""The pod workers' resync (kubelet/pod_workers.py): a pod synced without error comes back after
the resync interval jittered by up to half of it, as pod_workers.go's completeWork requeues it; a
pod the API no longer has, a failed sync and a cleanup do not."""

from __future__ import annotations

import asyncio

from kubelet.pod_workers import RESYNC_JITTER, RETRY_BASE, WORKER_BACKOFF_PERIOD, Cleanup, PodWorkers, SyncPod
from machinery import errors


class Syncer:
    def __init__(self, exists: bool = True, fail: bool = False):
        self.exists, self.fail = exists, fail
        self.synced: list[str] = []
        self.cleaned: list[str] = []

    async def sync_pod(self, key: str) -> bool:
        self.synced.append(key)
        if self.fail:
            raise errors.Unavailable("apiserver away")
        return self.exists

    async def sync_cleanup(self, uid: str) -> None:
        self.cleaned.append(uid)


async def _work_once(workers: PodWorkers, syncer: Syncer, item) -> list[tuple[object, float]]:
    """Run one worker over ``item``; the delayed adds it made (key, delay)."""
    delayed: list[tuple[object, float]] = []
    workers.queue.add_after = lambda key, delay: delayed.append((key, delay))  # type: ignore[method-assign]
    task = asyncio.create_task(workers.run(syncer))
    workers.queue.add(item)
    async with asyncio.timeout(10):
        while not (syncer.synced or syncer.cleaned):
            await asyncio.sleep(0)
    workers.shutdown()
    await task
    return delayed


async def test_a_synced_pod_comes_back_after_one_to_one_and_a_half_intervals():
    delays = []
    for _ in range(20):
        workers = PodWorkers("node-1", count_resizes=False, resync_interval=60.0)
        delayed = await _work_once(workers, Syncer(), SyncPod("default/web"))
        assert [key for key, _ in delayed] == [SyncPod("default/web")]
        delays.append(delayed[0][1])
    assert all(60.0 <= d <= 60.0 * (1 + RESYNC_JITTER) for d in delays), delays
    assert len(set(delays)) > 1, "jittered, not one fixed interval"


async def test_a_pod_the_api_no_longer_has_is_not_resynced():
    workers = PodWorkers("node-1", count_resizes=False, resync_interval=60.0)
    assert await _work_once(workers, Syncer(exists=False), SyncPod("default/gone")) == []


async def test_a_failed_sync_is_retried_by_the_rate_limiter_not_the_resync():
    workers = PodWorkers("node-1", count_resizes=False, resync_interval=60.0)
    limited: list[object] = []
    workers.queue.add_rate_limited = limited.append  # type: ignore[method-assign]
    assert await _work_once(workers, Syncer(fail=True), SyncPod("default/web")) == []
    assert limited == [SyncPod("default/web")]


async def test_no_resync_interval_no_resync_and_cleanups_never_resync():
    workers = PodWorkers("node-1", count_resizes=False)
    assert await _work_once(workers, Syncer(), SyncPod("default/web")) == []
    workers = PodWorkers("node-1", count_resizes=False, resync_interval=60.0)
    assert await _work_once(workers, Syncer(), Cleanup("uid-1")) == []


def test_a_pod_failing_again_and_again_is_retried_at_least_every_backoff_period():
    # Kubernetes retries a failed sync after its backOffPeriod (10 s); client-go's default limiter
    # would have grown to 1,000 s, and no periodic resync covers a failing pod any more.
    workers = PodWorkers("node-1", count_resizes=False, resync_interval=60.0)
    delays = [workers.queue.rate_limiter.when(SyncPod("default/web")) for _ in range(30)]
    assert delays[0] == RETRY_BASE
    assert max(delays) == WORKER_BACKOFF_PERIOD
