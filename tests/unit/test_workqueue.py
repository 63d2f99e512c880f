"""Tests for machinery.workqueue, ported from client-go's workqueue tests.

queue_test.go, delaying_queue_test.go, rate_limiting_queue_test.go and
default_rate_limiters_test.go, plus the metrics and the asyncio-specific parts (cancelled
getters, owned background tasks). Rate limiters run on a fake clock; the delaying queue uses
small real delays with generous upper bounds.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import math
import time
from collections.abc import Hashable

import pytest
from prometheus_client import REGISTRY

from machinery.workqueue import (
    BucketRateLimiter,
    DelayingQueue,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    RateLimitingQueue,
    WithMaxWaitRateLimiter,
    WorkQueue,
    default_controller_rate_limiter,
)

_names = itertools.count()


def unique_name(prefix: str) -> str:
    """Metric label values are process-global: give every test queue its own."""
    return f"{prefix}-{next(_names)}"


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def step(self, seconds: float) -> None:
        self.t += seconds


def sample(metric: str, queue_name: str) -> float | None:
    return REGISTRY.get_sample_value(metric, {"name": queue_name})


async def wait_until(predicate, timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.001)


async def get_now(q: WorkQueue, timeout: float = 1.0) -> tuple[Hashable | None, bool]:
    return await asyncio.wait_for(q.get(), timeout)


async def assert_get_blocks(q: WorkQueue, seconds: float = 0.02) -> None:
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.get(), seconds)


# ============================================================================================
# WorkQueue (queue_test.go)
# ============================================================================================


async def test_len_collapses_duplicates() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    assert q.len() == 1
    q.add("bar")
    assert q.len() == 2
    q.add("foo")  # already queued
    assert q.len() == 2 == len(q)


async def test_fifo_order() -> None:
    q: WorkQueue[str] = WorkQueue()
    for key in ["c", "a", "b", "a", "c"]:
        q.add(key)
    got = []
    for _ in range(3):
        key, shutdown = await get_now(q)
        assert not shutdown
        got.append(key)
        q.done(key)
    assert got == ["c", "a", "b"]
    assert q.len() == 0


async def test_reinsert_while_processing_requeues_on_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    key, _ = await get_now(q)
    assert key == "foo"
    q.add("foo")  # dirty while processing: not queued yet
    assert q.len() == 0
    q.done("foo")
    assert q.len() == 1
    key, _ = await get_now(q)
    assert key == "foo"
    q.done("foo")
    assert q.len() == 0


async def test_key_never_handed_to_two_workers() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    await get_now(q)
    q.add("foo")
    q.add("foo")  # collapses into the single dirty mark
    await assert_get_blocks(q)  # must not give "foo" to a second worker
    second = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    assert not second.done()
    q.done("foo")
    assert await asyncio.wait_for(second, 1) == ("foo", False)
    q.done("foo")
    assert q.len() == 0
    await assert_get_blocks(q)  # the two adds while processing gave exactly one re-run


async def test_get_waits_for_add() -> None:
    q: WorkQueue[int] = WorkQueue()
    getter = asyncio.create_task(q.get())
    await asyncio.sleep(0.01)
    assert not getter.done()
    q.add(42)
    assert await asyncio.wait_for(getter, 1) == (42, False)


@pytest.mark.parametrize("drain", [False, True], ids=["shutdown", "shutdown_with_drain"])
async def test_basic_producers_and_consumers(drain: bool) -> None:
    q: WorkQueue = WorkQueue()
    in_flight: set = set()
    processed: list = []

    async def producer(i: int) -> None:
        for _ in range(20):
            q.add(i)
            await asyncio.sleep(0)

    async def consumer() -> None:
        while True:
            key, quit_ = await q.get()
            if quit_:
                return
            assert key != "added after shutdown!"
            assert key not in in_flight, "key handed to two workers at once"
            in_flight.add(key)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            in_flight.discard(key)
            processed.append(key)
            q.done(key)

    consumers = [asyncio.create_task(consumer()) for _ in range(5)]
    await asyncio.gather(*(producer(i) for i in range(20)))
    if drain:
        await asyncio.wait_for(q.shutdown_with_drain(), 5)
    else:
        q.shutdown()
    q.add("added after shutdown!")
    await asyncio.wait_for(asyncio.gather(*consumers), 5)
    assert q.len() == 0
    assert set(processed) == set(range(20))


@pytest.mark.parametrize("drain", [False, True], ids=["shutdown", "shutdown_with_drain"])
async def test_add_while_processing(drain: bool) -> None:
    q: WorkQueue = WorkQueue()
    counts: dict = {}

    async def consumer() -> None:
        seen: dict = {}
        while True:
            key, quit_ = await q.get()
            if quit_:
                return
            seen[key] = seen.get(key, 0) + 1
            counts[key] = counts.get(key, 0) + 1
            if seen[key] < 2:
                q.add(key)  # dirty while processing
            await asyncio.sleep(0)
            q.done(key)

    consumers = [asyncio.create_task(consumer()) for _ in range(10)]
    for i in range(50):
        q.add(i)
    await wait_until(lambda: q.len() == 0 and all(c >= 2 for c in counts.values()) and len(counts) == 50)
    if drain:
        await asyncio.wait_for(q.shutdown_with_drain(), 5)
    else:
        q.shutdown()
    await asyncio.wait_for(asyncio.gather(*consumers), 5)
    assert q.len() == 0
    assert set(counts) == set(range(50))


async def test_add_after_shutdown_is_ignored() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.shutdown()
    assert q.shutting_down()
    q.add("foo")
    assert q.len() == 0
    assert await get_now(q) == (None, True)


async def test_queued_keys_still_served_after_shutdown() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.add("b")
    q.shutdown()
    assert await get_now(q) == ("a", False)
    assert await get_now(q) == ("b", False)
    assert await get_now(q) == (None, True)
    assert await get_now(q) == (None, True)


async def test_shutdown_wakes_every_waiting_getter() -> None:
    q: WorkQueue[str] = WorkQueue()
    getters = [asyncio.create_task(q.get()) for _ in range(5)]
    await asyncio.sleep(0.01)
    assert not any(g.done() for g in getters)
    assert not q.shutting_down()
    q.shutdown()
    results = await asyncio.wait_for(asyncio.gather(*getters), 1)
    assert results == [(None, True)] * 5


async def test_shutdown_with_drain_waits_for_done() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    first, _ = await get_now(q)
    second, _ = await get_now(q)
    drain = asyncio.create_task(q.shutdown_with_drain())
    assert await get_now(q) == (None, True)  # shut down, though items are still in flight
    await asyncio.sleep(0.01)
    assert not drain.done()
    q.done(first)
    await asyncio.sleep(0.01)
    assert not drain.done()
    q.done(second)
    await asyncio.wait_for(drain, 1)


async def test_shutdown_does_not_wait_for_in_flight_items() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    await get_now(q)
    await get_now(q)
    q.shutdown()  # synchronous: returns although nothing was marked done
    assert q.shutting_down()
    assert await get_now(q) == (None, True)


async def test_shutdown_forces_pending_drain_to_return() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    q.add("bar")
    await get_now(q)
    await get_now(q)
    drain = asyncio.create_task(q.shutdown_with_drain())
    assert await get_now(q) == (None, True)
    await asyncio.sleep(0.01)
    assert not drain.done()
    q.shutdown()  # e.g. a second SIGTERM
    await asyncio.wait_for(drain, 1)


async def test_drain_with_dirty_item_serves_it_once_more() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("foo")
    gotten, _ = await get_now(q)
    q.add("foo")
    drain = asyncio.create_task(q.shutdown_with_drain())
    assert await get_now(q) == (None, True)
    q.done(gotten)  # the dirty mark puts it back although we are shutting down
    again, shutdown = await get_now(q)
    assert (again, shutdown) == ("foo", False)
    await asyncio.sleep(0.01)
    assert not drain.done()
    q.done(again)
    assert await get_now(q) == (None, True)
    await asyncio.wait_for(drain, 1)


async def test_cancelled_woken_getter_passes_the_key_on() -> None:
    q: WorkQueue[str] = WorkQueue()
    a = asyncio.create_task(q.get())
    b = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("x")  # wakes a ...
    a.cancel()  # ... which is cancelled before it can take the key
    assert await asyncio.wait_for(b, 1) == ("x", False)
    with pytest.raises(asyncio.CancelledError):
        await a


async def test_cancelled_getter_does_not_swallow_later_adds() -> None:
    q: WorkQueue[str] = WorkQueue()
    a = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    a.cancel()
    with pytest.raises(asyncio.CancelledError):
        await a
    assert len(q._getters) == 0
    b = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    q.add("y")
    assert await asyncio.wait_for(b, 1) == ("y", False)


async def test_done_for_key_not_being_processed_is_ignored() -> None:
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    q.done("a")  # nobody holds "a": must not queue it a second time
    q.done("never-added")
    assert q.len() == 1
    assert await get_now(q) == ("a", False)
    q.done("a")
    assert q.len() == 0


async def test_empty_queue_is_truthy() -> None:
    q: WorkQueue[str] = WorkQueue()
    assert len(q) == 0
    assert bool(q) is True


def test_name_must_be_a_string() -> None:
    with pytest.raises(TypeError):
        RateLimitingQueue(ItemExponentialFailureRateLimiter())  # type: ignore[arg-type]


# ============================================================================================
# Metrics (metrics_test.go)
# ============================================================================================


async def test_named_queue_metrics() -> None:
    name = unique_name("metrics")
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    q.add("a")
    q.add("b")
    q.add("a")  # deduplicated: not an add
    assert sample("workqueue_adds_total", name) == 2
    assert sample("workqueue_depth", name) == 2

    clock.step(1.5)
    assert await get_now(q) == ("a", False)
    assert sample("workqueue_depth", name) == 1
    assert sample("workqueue_queue_duration_seconds_count", name) == 1
    assert sample("workqueue_queue_duration_seconds_sum", name) == pytest.approx(1.5)
    assert sample("workqueue_queue_duration_seconds_bucket", name) is None  # needs "le" too
    assert REGISTRY.get_sample_value(
        "workqueue_queue_duration_seconds_bucket", {"name": name, "le": "1.0"}
    ) == 0
    assert REGISTRY.get_sample_value(
        "workqueue_queue_duration_seconds_bucket", {"name": name, "le": "10.0"}
    ) == 1

    clock.step(2.0)
    q.done("a")
    assert sample("workqueue_work_duration_seconds_count", name) == 1
    assert sample("workqueue_work_duration_seconds_sum", name) == pytest.approx(2.0)
    q.shutdown()


async def test_unfinished_work_metrics_are_computed_when_read() -> None:
    name = unique_name("unfinished")
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(name, clock=clock)
    assert sample("workqueue_unfinished_work_seconds", name) == 0.0
    assert sample("workqueue_longest_running_processor_seconds", name) == 0.0
    q.add("a")
    q.add("b")
    await get_now(q)
    clock.step(2.0)
    await get_now(q)
    clock.step(1.0)  # "a" has run 3 s, "b" 1 s
    assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(4.0)
    assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(3.0)
    assert q._tasks == {}  # no background task computes them
    q.done("a")
    assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(1.0)
    assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(1.0)
    q.shutdown()


async def test_unfinished_work_of_queues_sharing_a_name_sums_and_takes_the_longest() -> None:
    name = unique_name("unfinished-shared")
    clock = FakeClock()
    first: WorkQueue[str] = WorkQueue(name, clock=clock)
    second: WorkQueue[str] = WorkQueue(name, clock=clock)
    first.add("a")
    await get_now(first)
    clock.step(2.0)
    second.add("b")
    await get_now(second)
    clock.step(1.0)  # "a" has run 3 s in one queue, "b" 1 s in the other
    assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(4.0)
    assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(3.0)
    del first  # a dropped queue no longer counts
    gc.collect()
    assert sample("workqueue_unfinished_work_seconds", name) == pytest.approx(1.0)
    assert sample("workqueue_longest_running_processor_seconds", name) == pytest.approx(1.0)
    second.shutdown()


async def test_unnamed_queue_records_no_metrics_and_owns_no_task() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    q.add("a")
    q.add_after("b", 0)
    await get_now(q)
    assert q._tasks == {}
    for metric in ("workqueue_adds_total", "workqueue_depth", "workqueue_retries_total"):
        assert sample(metric, "") is None
    q.shutdown()


async def test_retries_metric_counts_add_after_calls() -> None:
    name = unique_name("retries")
    q: DelayingQueue[str] = DelayingQueue(name)
    q.add_after("a", 0)
    q.add_after("b", -1)
    q.add_after("c", 60)
    assert sample("workqueue_retries_total", name) == 3
    q.shutdown()
    q.add_after("d", 0)  # ignored after shutdown, and not counted
    assert sample("workqueue_retries_total", name) == 3


# ============================================================================================
# DelayingQueue (delaying_queue_test.go)
# ============================================================================================


async def test_add_after_adds_once_the_delay_has_passed() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    start = time.monotonic()
    q.add_after("foo", 0.05)
    assert q.len() == 0
    key, _ = await get_now(q, 2)
    elapsed = time.monotonic() - start
    assert key == "foo"
    assert 0.049 <= elapsed < 1.5
    q.done("foo")
    await asyncio.sleep(0.05)
    assert q.len() == 0  # fired once only
    q.shutdown()


async def test_add_after_non_positive_delay_adds_at_once() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("zero", 0)
    q.add_after("negative", -5)
    assert q.len() == 2
    assert "waiting" not in q._tasks  # no timer needed
    q.shutdown()


async def test_add_after_later_delay_does_not_postpone() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    start = time.monotonic()
    q.add_after("foo", 0.03)
    q.add_after("foo", 0.25)  # later: ignored, still fires at ~30 ms
    assert len(q._waiting_by_key) == 1
    key, _ = await get_now(q, 2)
    assert key == "foo"
    assert time.monotonic() - start < 0.2
    q.done("foo")
    await asyncio.sleep(0.3)  # past the second, ignored ready time
    assert q.len() == 0
    q.shutdown()


async def test_add_after_earlier_delay_wins() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    start = time.monotonic()
    q.add_after("foo", 0.3)
    q.add_after("foo", 0.02)  # earlier: replaces the 300 ms entry
    assert len(q._waiting_by_key) == 1
    key, _ = await get_now(q, 2)
    assert key == "foo"
    assert time.monotonic() - start < 0.25
    q.done("foo")
    await asyncio.sleep(0.35)  # past the superseded ready time: nothing more
    assert q.len() == 0
    q.shutdown()


async def test_add_after_keys_come_out_in_ready_order() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("foo", 0.06)
    q.add_after("bar", 0.04)
    q.add_after("baz", 0.02)
    await wait_until(lambda: q.len() == 3)
    got = [(await get_now(q))[0] for _ in range(3)]
    assert got == ["baz", "bar", "foo"]
    q.shutdown()


async def test_add_two_fire_early() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("first", 0.2)
    q.add_after("second", 0.01)
    key, _ = await get_now(q, 2)
    assert key == "second"
    assert q.len() == 0
    q.add_after("third", 0.4)
    key, _ = await get_now(q, 2)
    assert key == "first"
    key, _ = await get_now(q, 2)
    assert key == "third"
    q.shutdown()


async def test_add_after_while_key_is_queued_collapses() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add("a")
    q.add_after("a", 0.01)
    await wait_until(lambda: not q._waiting_by_key)
    assert q.len() == 1
    q.shutdown()


async def test_shutdown_cancels_waiting_task_and_drops_waiting_keys() -> None:
    q: DelayingQueue[str] = DelayingQueue()
    q.add_after("later", 0.02)
    task = q._tasks["waiting"]
    await asyncio.sleep(0)
    assert not task.done()
    q.shutdown()
    await asyncio.sleep(0)
    assert task.cancelled()
    assert not q._waiting_by_key
    q.add_after("after", 0.01)  # ignored: no new task either
    assert q._tasks["waiting"] is task
    await asyncio.sleep(0.05)
    assert q.len() == 0
    assert await get_now(q) == (None, True)


async def test_shutdown_with_drain_stops_waiting_task() -> None:
    q: DelayingQueue[str] = DelayingQueue(unique_name("drain-delaying"))
    q.add("now")
    q.add_after("later", 10)
    key, _ = await get_now(q)
    drain = asyncio.create_task(q.shutdown_with_drain())
    await asyncio.sleep(0.01)
    assert not drain.done()
    q.done(key)
    await asyncio.wait_for(drain, 1)
    assert all(t.done() for t in q._tasks.values())
    assert await get_now(q) == (None, True)


def test_add_after_needs_a_running_loop() -> None:
    q: DelayingQueue[str] = DelayingQueue()  # constructing outside a loop is fine
    q.add("now")
    q.add_after("zero", 0)
    assert q.len() == 2
    with pytest.raises(RuntimeError):
        q.add_after("x", 1)  # a positive delay needs the loop's timers


# ============================================================================================
# Rate limiters (default_rate_limiters_test.go)
# ============================================================================================


def test_exponential_failure_rate_limiter() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.001, 1.0)
    assert [limiter.when("one") for _ in range(5)] == [0.001, 0.002, 0.004, 0.008, 0.016]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [0.001, 0.002]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.001
    assert limiter.num_requeues("two") == 2  # forget is per key


def test_exponential_defaults_are_client_go_controller_backoff() -> None:
    limiter = ItemExponentialFailureRateLimiter()
    assert [limiter.when("k") for _ in range(5)] == [0.005, 0.01, 0.02, 0.04, 0.08]
    for _ in range(20):
        limiter.when("k")
    assert limiter.when("k") == 1000.0  # 5 ms * 2**25 > 1000 s: capped


def test_exponential_failure_rate_limiter_overflow() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.001, 1000.0)
    for _ in range(5):
        limiter.when("one")
    assert limiter.when("one") == 0.032
    for _ in range(2000):  # far past float overflow of 2**exp
        limiter.when("overflow1")
    assert limiter.when("overflow1") == 1000.0

    limiter = ItemExponentialFailureRateLimiter(60.0, 1000 * 3600.0)
    for _ in range(2):
        limiter.when("two")
    assert limiter.when("two") == 240.0
    for _ in range(1000):
        limiter.when("overflow2")
    assert limiter.when("overflow2") == 1000 * 3600.0


def test_fast_slow_rate_limiter() -> None:
    limiter = ItemFastSlowRateLimiter(0.005, 10.0, 3)
    assert [limiter.when("one") for _ in range(5)] == [0.005, 0.005, 0.005, 10.0, 10.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [0.005, 0.005]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.005


def test_max_of_rate_limiter() -> None:
    limiter = MaxOfRateLimiter(
        ItemFastSlowRateLimiter(0.005, 3.0, 3),
        ItemExponentialFailureRateLimiter(0.001, 1.0),
    )
    assert [limiter.when("one") for _ in range(5)] == [0.005, 0.005, 0.005, 3.0, 3.0]
    assert limiter.num_requeues("one") == 5
    assert [limiter.when("two") for _ in range(2)] == [0.005, 0.005]
    assert limiter.num_requeues("two") == 2
    limiter.forget("one")
    assert limiter.num_requeues("one") == 0
    assert limiter.when("one") == 0.005


def test_max_of_no_limiters_is_zero() -> None:
    limiter = MaxOfRateLimiter()
    assert limiter.when("x") == 0.0
    assert limiter.num_requeues("x") == 0


class _StepRateLimiter:
    """delay ``base`` for the first ``threshold`` calls (any key), ``max_delay`` after."""

    def __init__(self, base: float, max_delay: float, threshold: int) -> None:
        self.count = 0
        self.base, self.max_delay, self.threshold = base, max_delay, threshold

    def when(self, key: Hashable) -> float:
        self.count += 1
        return self.base if self.count <= self.threshold else self.max_delay

    def forget(self, key: Hashable) -> None:
        pass

    def num_requeues(self, key: Hashable) -> int:
        return 0


def test_with_max_wait_rate_limiter() -> None:
    limiter = WithMaxWaitRateLimiter(_StepRateLimiter(0.005, 1000.0, 100), 500.0)
    assert all(limiter.when(i) == 0.005 for i in range(100))
    assert all(limiter.when(i) == 500.0 for i in range(100, 200))


def test_bucket_rate_limiter_burst_then_qps() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=3, clock=clock)
    delays = [limiter.when(f"k{i}") for i in range(5)]
    assert delays[:3] == [0.0, 0.0, 0.0]
    assert delays[3:] == [pytest.approx(0.1), pytest.approx(0.2)]
    clock.step(1.0)  # refills, but never beyond the burst
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.num_requeues("x") == 0
    limiter.forget("x")  # no per-key state: nothing changes
    assert limiter.when("x") == pytest.approx(0.2)


def test_bucket_rate_limiter_partial_refill() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=1, clock=clock)
    assert limiter.when("a") == 0.0
    assert limiter.when("a") == pytest.approx(0.1)  # token debt: -1
    clock.step(0.05)
    assert limiter.when("a") == pytest.approx(0.15)  # debt -1.5 after +0.5 refill
    clock.step(0.35)  # debt -1.5 + 3.5 = 2, capped at burst 1
    assert limiter.when("a") == 0.0
    assert limiter.when("a") == pytest.approx(0.1)


def test_bucket_rate_limiter_edge_cases() -> None:
    clock = FakeClock()
    unlimited = BucketRateLimiter(qps=math.inf, burst=0, clock=clock)
    assert all(unlimited.when(i) == 0.0 for i in range(1000))
    no_burst = BucketRateLimiter(qps=10, burst=0, clock=clock)
    assert no_burst.when("a") == math.inf
    no_refill = BucketRateLimiter(qps=0, burst=2, clock=clock)
    assert [no_refill.when("a") for _ in range(3)] == [0.0, 0.0, math.inf]


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter = default_controller_rate_limiter(clock=clock)
    # Per-key exponential backoff while the 100-token bucket has room.
    assert [limiter.when("a") for _ in range(5)] == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert limiter.num_requeues("a") == 5
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005
    # 6 tokens used; 94 fresh keys use up the burst, then the 10 qps bucket dominates.
    assert all(limiter.when(f"k{i}") == 0.005 for i in range(94))
    assert limiter.when("k-extra") == pytest.approx(0.1)
    assert limiter.when("k-extra2") == pytest.approx(0.2)
    clock.step(100.0)
    assert limiter.when("fresh") == 0.005


# ============================================================================================
# RateLimitingQueue (rate_limiting_queue_test.go)
# ============================================================================================


class _RecordingQueue(RateLimitingQueue[str]):
    """Captures the delays add_rate_limited passes on, instead of waiting for them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.delays: list[tuple[str, float]] = []

    def add_after(self, key: str, delay_seconds: float) -> None:
        self.delays.append((key, delay_seconds))


async def test_rate_limiting_queue_delays_follow_the_limiter() -> None:
    q = _RecordingQueue(rate_limiter=ItemExponentialFailureRateLimiter(0.001, 1.0))
    q.add_rate_limited("one")
    q.add_rate_limited("one")
    assert q.num_requeues("one") == 2
    q.add_rate_limited("two")
    q.add_rate_limited("two")
    q.forget("one")
    assert q.num_requeues("one") == 0
    q.add_rate_limited("one")
    assert q.delays == [("one", 0.001), ("one", 0.002), ("two", 0.001), ("two", 0.002), ("one", 0.001)]
    q.shutdown()


async def test_rate_limiting_queue_end_to_end() -> None:
    name = unique_name("ratelimited")
    q: RateLimitingQueue[str] = RateLimitingQueue(name, ItemExponentialFailureRateLimiter(0.01, 1.0))
    start = time.monotonic()
    q.add_rate_limited("ns/pod")
    key, _ = await get_now(q, 2)
    assert key == "ns/pod"
    assert time.monotonic() - start >= 0.0099
    q.add_rate_limited(key)  # failed: retry in 20 ms, after done()
    q.done(key)
    key, _ = await get_now(q, 2)
    assert key == "ns/pod"
    assert q.num_requeues(key) == 2
    assert sample("workqueue_retries_total", name) == 2
    q.forget(key)
    q.done(key)
    assert q.num_requeues(key) == 0
    await q.shutdown_with_drain()
    assert await get_now(q) == (None, True)


async def test_rate_limiting_queue_default_limiter() -> None:
    q: RateLimitingQueue[str] = RateLimitingQueue()
    assert isinstance(q.rate_limiter, MaxOfRateLimiter)
    q.add_rate_limited("a")
    assert q.num_requeues("a") == 1
    key, _ = await get_now(q, 2)  # 5 ms
    assert key == "a"
    q.done(key)
    q.shutdown()
