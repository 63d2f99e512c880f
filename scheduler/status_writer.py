"""Pod status writes off the scheduling cycle (kube-scheduler's API dispatcher, SchedulerAsyncAPICalls).

A failed attempt ends with a status write (the PodScheduled condition, the nomination). Awaiting
it in the scheduling loop would make every other pod wait a round trip to the apiserver; instead
the write is handed over here and the loop goes on. Per pod, writes happen in order, one at a
time; a write submitted while one is in flight replaces any write still waiting (only the
newest state matters). A pod's binding waits for its pending writes (``flush``), so an
"Unschedulable" condition can never land after the pod was bound.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from machinery.logging import get_logger

log = get_logger()

Write = Callable[[], Awaitable[None]]


class StatusWriter:
    def __init__(self) -> None:
        self._waiting: dict[str, Write] = {}  # uid -> the next write, not started
        self._running: dict[str, asyncio.Task] = {}  # uid -> the write in flight

    def submit(self, uid: str, write: Write) -> None:
        if uid in self._running:
            self._waiting[uid] = write
            return
        self._start(uid, write)

    def _start(self, uid: str, write: Write) -> None:
        task = asyncio.create_task(self._run(uid, write), name=f"status-{uid}")
        self._running[uid] = task

    async def _run(self, uid: str, write: Write) -> None:
        try:
            await write()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("pod_status_write_failed", uid=uid)
        finally:
            self._running.pop(uid, None)
            nxt = self._waiting.pop(uid, None)
            if nxt is not None:
                self._start(uid, nxt)

    async def flush(self, uid: str) -> None:
        """Until no write for this pod is waiting or in flight."""
        while uid in self._running:
            try:
                await asyncio.shield(self._running[uid])
            except Exception:
                pass

    def pending(self) -> int:
        return len(self._running) + len(self._waiting)

    async def close(self, timeout: float = 5.0) -> None:
        """Let the writes in flight finish (or cancel them after ``timeout``)."""
        for uid in list(self._running):
            task = self._running.get(uid)
            if task is None:
                continue
            try:
                async with asyncio.timeout(timeout):
                    await self.flush(uid)
            except TimeoutError:
                task.cancel()
        self._waiting.clear()
