"""Recording Kubernetes Events (Scheduled, Preempted, ResizeDeferred, Evicted, ...).

``recorder.event(obj, "Warning", "ResizeDeferred", "...")`` never blocks and never fails the
caller: events go through a bounded queue to one background task that writes them. An event
repeating one already written (same object, type, reason, message) within ``dedup_window`` bumps
that Event's ``count`` and ``lastTimestamp`` instead of creating another, as Kubernetes' event
correlator does, remembering the last ``MAX_REMEMBERED`` events written as its LRU cache does.
Events are best effort: when the queue is full they are dropped and counted.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from dataclasses import dataclass

from google.protobuf.message import Message
from prometheus_client import Counter

from machinery import errors, timeutil
from machinery.api import core_pb2
from machinery.client import Client
from machinery.kinds import accessor, object_meta, of_message
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise

log = get_logger()

# client-go's event correlator: maxLruCacheEntries (the events it remembers, to count repeats).
MAX_REMEMBERED = 4096

_DROPPED = Counter("kplane_events_dropped_total", "Events not written because the queue was full or the API "
                   "refused them.", ["component"])


@dataclass(frozen=True)
class _Key:
    namespace: str
    kind: str
    name: str
    uid: str
    type: str
    reason: str
    message: str


class EventRecorder:
    def __init__(self, client: Client, component: str, host: str = "", *, max_queue: int = 1000,
                 dedup_window: float = 600.0):
        self.client = client
        self.component = component
        self.host = host
        self.dedup_window = dedup_window
        self._queue: asyncio.Queue[tuple[_Key, Message, str, str]] = asyncio.Queue(maxsize=max_queue)
        self._written: OrderedDict[_Key, tuple[str, float]] = OrderedDict()  # key -> (event name, when), LRU last
        self._task: asyncio.Task[None] | None = None
        self._dropped = _DROPPED.labels(component=component)

    def start(self) -> None:
        if self._task is None:
            self._task = supervise(f"events-{self.component}", self._run)

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    async def flush(self, timeout: float = 5.0) -> None:
        """Wait until every queued event is written (tests)."""
        deadline = time.monotonic() + timeout
        while not self._queue.empty() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    def event(self, obj: Message, type_: str, reason: str, message: str, related: Message | None = None,
              action: str = "") -> None:
        """Record an event on ``obj``; ``related`` and ``action`` as events.k8s.io/v1 has them
        (the scheduler's Preempted event: related = the preemptor, action = "Preempting")."""
        kind = of_message(obj).name
        meta = object_meta(obj)
        key = _Key(meta.namespace or "default", kind, meta.name, meta.uid, type_, reason, message)
        related_ref = ""
        if related is not None:
            rmeta = object_meta(related)
            related_ref = f"{of_message(related).name}/{rmeta.namespace}/{rmeta.name}/{rmeta.uid}"
        try:
            self._queue.put_nowait((key, obj, related_ref, action))
        except asyncio.QueueFull:
            self._dropped.inc()

    async def _run(self) -> None:
        while True:
            key, obj, related, action = await self._queue.get()
            try:
                await self._write(key, obj, related, action)
            except errors.ApiError as exc:
                self._dropped.inc()
                log.debug("event_write_failed", reason=key.reason, error=exc.message)
            except Exception:  # never let event writing take a component down
                self._dropped.inc()
                log.exception("event_write_crashed", reason=key.reason)

    async def _write(self, key: _Key, obj: Message, related: str, action: str = "") -> None:
        now = timeutil.rfc3339()
        seen = self._written.get(key)
        if seen is not None and time.monotonic() - seen[1] < self.dedup_window:
            try:
                ev = await self.client.events.get(seen[0], key.namespace)
                ev.count += 1
                ev.last_timestamp = now
                await self.client.events.update(ev)
                self._remember(key, seen[0])
                return
            except (errors.NotFound, errors.Conflict):
                pass
        ev = core_pb2.Event(api_version="v1", kind="Event", reason=key.reason, message=key.message, type=key.type,
                            count=1, first_timestamp=now, last_timestamp=now, reporting_component=self.component,
                            reporting_instance=self.host, action=action)
        ev.metadata.namespace = key.namespace
        ev.metadata.generate_name = f"{key.name}."
        ref = ev.involved_object
        ref.kind, ref.namespace, ref.name, ref.uid = key.kind, key.namespace, key.name, key.uid
        ref.api_version = accessor(obj).api_version or "v1"
        ev.source.component, ev.source.host = self.component, self.host
        if related:
            kind, ns, name, uid = related.split("/", 3)
            ev.related.kind, ev.related.namespace, ev.related.name, ev.related.uid = kind, ns, name, uid
        created = await self.client.events.create(ev)
        self._remember(key, created.metadata.name)

    def _remember(self, key: _Key, name: str) -> None:
        """The event ``key`` was written as ``name`` now; the least recently written one forgotten
        past ``MAX_REMEMBERED`` (each write O(1): the old sweep of the whole map at 10,000 entries
        ran on every event once that many were younger than the window)."""
        self._written[key] = (name, time.monotonic())
        self._written.move_to_end(key)
        if len(self._written) > MAX_REMEMBERED:
            self._written.popitem(last=False)
