"""The StatusWriter: per pod, one write at a time, in order, the newest waiting write replacing an
older one; flush waits for a pod's writes (a binding waits for its pod's "Unschedulable")."""

from __future__ import annotations

import asyncio

from scheduler.status_writer import StatusWriter


async def test_writes_of_one_pod_run_in_order_and_only_the_newest_waiting_one_runs():
    w = StatusWriter()
    done: list[str] = []
    gate = asyncio.Event()

    def write(tag: str, wait: bool = False):
        async def run():
            if wait:
                await gate.wait()
            done.append(tag)
        return run

    w.submit("p1", write("first", wait=True))
    w.submit("p1", write("second"))
    w.submit("p1", write("third"))  # replaces "second", which never started
    w.submit("p2", write("other pod"))
    await asyncio.sleep(0.01)
    assert done == ["other pod"], "another pod's write does not wait for p1's"
    gate.set()
    await w.flush("p1")
    assert done == ["other pod", "first", "third"]
    assert w.pending() == 0


async def test_a_failing_write_does_not_block_the_next():
    w = StatusWriter()
    done: list[str] = []

    async def boom():
        raise RuntimeError("apiserver said no")

    async def ok():
        done.append("ok")

    w.submit("p", boom)
    w.submit("p", ok)
    await w.flush("p")
    assert done == ["ok"]


async def test_close_lets_writes_finish_and_cancels_those_that_hang():
    w = StatusWriter()
    finished: list[str] = []

    async def quick():
        finished.append("quick")

    async def hangs():
        await asyncio.Event().wait()

    w.submit("a", quick)
    w.submit("b", hangs)
    await w.close(timeout=0.1)
    assert finished == ["quick"]
