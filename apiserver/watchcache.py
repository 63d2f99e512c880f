"""The watch cache: the apiserver's in-memory copy of every object, and the fan-out of changes.

- ``WatchCache``: one etcd watch over ``/registry/`` feeding a cache per kind;
- ``KindCache``: one kind's current objects and ring of recent events, serving lists and watches;
- ``Watcher`` / ``WatcherGroup``: one client's watch, and the watchers an event is matched and
  encoded once for;
- ``CacheEvent`` / ``FrameEncoding``: events encoded once, shared by every watcher they go to.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from typing import Any, Callable, Generic, Iterable

from google.protobuf.message import Message
from prometheus_client import Counter, Gauge

from apiserver.etcd import CompactedError, EtcdClient, EtcdError
from machinery import errors, failpoints, jsonconv
from machinery.kinds import KINDS, POD, REGISTRY_PREFIX, Kind, M, object_meta, split_key
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise
from machinery.selectors import FieldSelector, LabelSelector

log = get_logger()

WATCH_DELIVERY = failpoints.declare(
    "apiserver/watch-delivery", "before a batch of watch events is written to a client (sleep = informer lag)")
CACHE_INTAKE = failpoints.declare(
    "apiserver/watch-cache-intake", "before the watch cache takes a batch of etcd's events (sleep or pause = a cache "
    "behind etcd, as a busy apiserver's is)")

_EVENTS_RECEIVED = Counter("apiserver_watch_cache_events_received_total",
                           "Counter of events received in watch cache broken by resource type.", ["resource"])
_EVENTS_SENT = Counter("apiserver_watch_events_total", "Number of events sent in watch clients",
                       ["group", "version", "kind"])
_WATCHERS = Gauge("apiserver_registered_watchers", "Number of currently registered watchers for a given resources",
                  ["group", "version", "kind"])
_OBJECTS = Gauge("apiserver_storage_objects", "Number of stored objects at the time of last check split by kind.",
                 ["resource"])
_CACHE_RV = Gauge("apiserver_watch_cache_resource_version", "Current resource version of watch cache broken by "
                  "resource type.", ["resource"])
_TERMINATED = Counter("apiserver_terminated_watchers_total", "Counter of watchers closed due to unresponsiveness.",
                      ["resource"])

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Seconds between two BOOKMARKs to one watcher (the cacher's defaultBookmarkFrequency).
DEFAULT_BOOKMARK_FREQUENCY = 60.0


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


_TYPE_FIELDS = {t: b"\x0a" + _varint(len(t)) + t.encode() for t in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")}


def encode_frame(type_: str, obj_bytes: bytes) -> bytes:
    """One element of ``XWatchResponse.events`` (field 1): WatchEvent{type=1, object=2}, framed."""
    event = _TYPE_FIELDS[type_] + b"\x12" + _varint(len(obj_bytes)) + obj_bytes
    return b"\x0a" + _varint(len(event)) + event


def json_frame(type_: str, obj: Message) -> bytes:
    """One line of a REST watch: Kubernetes' ``{"type": ..., "object": ...}`` and a newline."""
    return json.dumps({"type": type_, "object": jsonconv.to_dict(obj, jsonconv.KUBERNETES_ALWAYS)},
                      separators=(",", ":")).encode() + b"\n"


class FrameEncoding:
    """How a watcher's events go on the wire: ``encode(type, object)`` makes one frame.

    Frames are cached per event under (type, ``name``), so two encodings must not share a name."""

    __slots__ = ("name", "encode")

    def __init__(self, name: str, encode: Callable[[str, Message], bytes]):
        self.name, self.encode = name, encode


# Two encodings are built in: ``PROTOBUF`` (the gRPC API's ``XWatchResponse.events`` elements) and
# ``JSON`` (the REST API's newline-delimited ``{"type": ..., "object": ...}`` lines); the REST API
# adds its Table encodings (``apiserver/rest/tables.py``).
PROTOBUF = FrameEncoding("protobuf", lambda type_, obj: encode_frame(type_, obj.SerializeToString()))
JSON = FrameEncoding("json", json_frame)


def with_resource_version(obj: M, rev: int) -> M:
    out = type(obj)()
    out.CopyFrom(obj)
    object_meta(out).resource_version = str(rev)
    return out


def _node_name(pod: Message) -> str:
    """A pod's spec.nodeName: the key of pod watcher groups pinned to a node."""
    return pod.spec.node_name  # type: ignore[attr-defined,no-any-return]


def _name(obj: Message) -> str:
    """An object's metadata.name: the key of other kinds' watcher groups pinned to one object."""
    return object_meta(obj).name


class CacheEvent(Generic[M]):
    """One change to one object at one revision."""

    __slots__ = ("rev", "type", "key", "obj", "prev", "_frames", "_left")

    def __init__(self, rev: int, type_: str, key: str, obj: M, prev: M | None):
        self.rev, self.type, self.key, self.obj, self.prev = rev, type_, key, obj, prev
        # (type, encoding name) -> frame; the protobuf frames under the type alone.
        self._frames: dict[str | tuple[str, str], bytes] = {}
        self._left: dict[str, bytes] | None = None

    def frame(self, type_: str, encoding: FrameEncoding = PROTOBUF) -> bytes:
        """The event as a frame of ``type_`` in ``encoding``: events are encoded once per (event,
        type, encoding) and shared by every watcher they go to."""
        key: str | tuple[str, str] = type_ if encoding is PROTOBUF else (type_, encoding.name)
        f = self._frames.get(key)
        if f is None:
            f = self._frames[key] = encoding.encode(type_, self.obj)
        return f

    def frame_left_selector(self, encoding: FrameEncoding = PROTOBUF) -> bytes:
        """DELETED for a watcher whose selector the object no longer matches: the previous
        state, with this event's resourceVersion (as Kubernetes' cacheWatcher does)."""
        if self.type == "DELETED":
            return self.frame("DELETED", encoding)
        if self._left is None:
            self._left = {}
        f = self._left.get(encoding.name)
        if f is None:
            assert self.prev is not None  # only an event with a previous state can leave a selector
            f = self._left[encoding.name] = encoding.encode("DELETED", with_resource_version(self.prev, self.rev))
        return f


class WatchFilter:
    """What a watch selects: a namespace, a label selector and a field selector."""

    __slots__ = ("namespace", "labels", "fields", "key")

    def __init__(self, namespace: str, labels: LabelSelector, fields: FieldSelector):
        self.namespace, self.labels, self.fields = namespace, labels, fields
        self.key = (namespace, str(labels), str(fields))

    def matches(self, obj: Message) -> bool:
        meta = object_meta(obj)
        if self.namespace and meta.namespace != self.namespace:
            return False
        if not self.labels.empty and not self.labels.matches(meta.labels):
            return False
        if not self.fields.empty and not self.fields.matches(obj):
            return False
        return True


class WatcherGroup:
    """Watchers with the same filter and encoding: each event is matched and encoded once for all
    of them."""

    __slots__ = ("filter", "members", "pin_key", "encoding", "key")

    def __init__(self, flt: WatchFilter, pin_key: str | None, encoding: FrameEncoding = PROTOBUF):
        self.filter = flt
        self.members: set[Watcher] = set()
        self.pin_key = pin_key
        self.encoding = encoding
        self.key = (*flt.key, encoding.name)


class Watcher:
    """One client's watch: its filter (shared with its group) and a queue of encoded frames; a
    watcher's stream message is the concatenation of its pending frames (``next_batch``)."""

    def __init__(self, cache: "KindCache[Any]", flt: WatchFilter, min_rev: int, bookmarks: bool, max_pending: int,
                 min_interval: float = 0.0):
        self.cache = cache
        self.filter = flt
        self.min_rev = min_rev
        self.bookmarks = bookmarks
        self.max_pending = max_pending
        self.last_rev = min_rev
        self.group: WatcherGroup | None = None
        self._frames: list[bytes] = []
        self._count = 0
        self._wakeup = asyncio.Event()
        self.closed = False
        self.overflowed = False
        # Under load, wait until ``min_interval`` has passed since the last write so one stream
        # message carries many events; an event after a quiet spell goes out at once.
        self.min_interval = min_interval
        self._last_write = 0.0

    def push(self, frame: bytes, rev: int) -> None:
        if self.closed:
            return
        frames = self._frames
        frames.append(frame)
        self._count += 1
        if rev > self.last_rev:
            self.last_rev = rev
        if len(self._frames) > self.max_pending:
            # A client that cannot keep up is cut off, as Kubernetes does; it re-watches from
            # the last version it saw.
            self.overflowed = True
            _TERMINATED.labels(resource=self.cache.kind.plural).inc()
            self.close()
        elif len(frames) == 1:
            self._wakeup.set()

    @property
    def pending(self) -> int:
        return len(self._frames)

    async def next_batch(self) -> bytes | None:
        """The frames pending, as one watch-response message; None once closed and drained."""
        while not self._frames:
            if self.closed:
                return None
            self._wakeup.clear()
            await self._wakeup.wait()
        if self.min_interval:
            loop = asyncio.get_running_loop()
            wait = self._last_write + self.min_interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            self._last_write = loop.time()
        if self.overflowed:
            return None
        batch = b"".join(self._frames)
        self._frames.clear()
        return batch

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()


class KindCache(Generic[M]):
    """The current objects of one kind, the ring of its recent events, and its watchers.

    It serves lists (``select``, at the cache's revision, after waiting for it to reach a requested
    one: ``WatchCache.wait_for``) and watches from a resourceVersion (``watch``).
    """

    def __init__(self, owner: "WatchCache", kind: Kind[M, Message], capacity: int):
        self.owner = owner
        self.kind = kind
        self.capacity = capacity
        self.store: dict[str, M] = {}
        self.ring: deque[CacheEvent[M]] = deque()
        self.start_rev = 0
        self._groups: dict[tuple, WatcherGroup] = {}
        # Watcher groups whose field selector pins one field, indexed by its value, so an event
        # is matched against its own watchers, not all: pods by spec.nodeName (kubelets, the
        # scheduler's unassigned pods), other kinds by metadata.name (a kubelet's own Node, as
        # Kubernetes' cacher indexes them). Thousands of nodes then cost no more per event than one.
        self._pin_field = "spec.nodeName" if kind is POD else "metadata.name"
        self._pin_of: Callable[[Message], str] = _node_name if kind is POD else _name
        self._pinned: dict[str, dict[tuple, WatcherGroup]] = {}
        self._gauge = _WATCHERS.labels(group=kind.group, version="v1", kind=kind.name)
        self._sent = _EVENTS_SENT.labels(group=kind.group, version="v1", kind=kind.name)
        self._received = _EVENTS_RECEIVED.labels(resource=kind.plural)

    # ------------------------------------------------------------ state

    def reset(self, objects: Iterable[tuple[str, M]], rev: int) -> None:
        self.store = dict(objects)
        self.ring.clear()
        self.start_rev = rev
        for w in list(self._all_watchers()):
            w.close()
        _OBJECTS.labels(resource=self.kind.plural).set(len(self.store))

    def apply(self, ev: CacheEvent[M]) -> None:
        if ev.type == "DELETED":
            self.store.pop(ev.key, None)
        else:
            self.store[ev.key] = ev.obj
        self.ring.append(ev)
        if len(self.ring) > self.capacity:
            self.start_rev = self.ring.popleft().rev
        self._received.inc()
        self._dispatch(ev)

    def _targets(self, ev: CacheEvent[M]) -> Iterable[WatcherGroup]:
        if not self._pinned:
            return self._groups.values()
        targets = list(self._groups.values())
        pin_of = self._pin_of
        node = pin_of(ev.obj)
        by_node = self._pinned.get(node)
        if by_node:
            targets.extend(by_node.values())
        if ev.prev is not None and pin_of(ev.prev) != node:
            by_node = self._pinned.get(pin_of(ev.prev))
            if by_node:
                targets.extend(by_node.values())
        return targets

    def _dispatch(self, ev: CacheEvent[M]) -> None:
        sent = 0
        rev = ev.rev
        for g in self._targets(ev):
            frame = self._frame_for(g.filter, ev, g.encoding)
            if frame is None:
                continue
            for w in g.members:
                if rev > w.min_rev:
                    w.push(frame, rev)
                    sent += 1
        if sent:
            self._sent.inc(sent)

    @staticmethod
    def _frame_for(flt: WatchFilter, ev: CacheEvent[Any], encoding: FrameEncoding) -> bytes | None:
        cur = ev.type != "DELETED" and flt.matches(ev.obj)
        old = ev.prev is not None and flt.matches(ev.prev)
        if cur:
            return ev.frame("MODIFIED" if old else "ADDED", encoding)
        if old:
            return ev.frame_left_selector(encoding)
        return None

    # ------------------------------------------------------------ reads

    def select(self, namespace: str, labels: LabelSelector, fields: FieldSelector) -> list[M]:
        """The objects matching, in key order. A selector pinning ``metadata.name`` (a kubelet's
        list of its own Node, every such watch's initial events) looks the one key up instead of
        walking the store: thousands of nodes registering would otherwise cost O(nodes) each."""
        name = fields.value_of("metadata.name")
        if name is not None and (namespace or not self.kind.namespaced):
            obj = self.store.get(self.kind.key(namespace, name))
            if obj is None or (not labels.empty and not labels.matches(object_meta(obj).labels)) \
                    or not fields.matches(obj):
                return []
            return [obj]
        prefix = self.kind.prefix(namespace)
        out = []
        for key in sorted(self.store):
            if not key.startswith(prefix):
                continue
            obj = self.store[key]
            if not labels.empty and not labels.matches(object_meta(obj).labels):
                continue
            if not fields.empty and not fields.matches(obj):
                continue
            out.append(obj)
        return out

    def get(self, namespace: str, name: str) -> M | None:
        return self.store.get(self.kind.key(namespace, name))

    # ------------------------------------------------------------ watches

    def _all_groups(self) -> Iterable[WatcherGroup]:
        yield from self._groups.values()
        for groups in self._pinned.values():
            yield from groups.values()

    def _all_watchers(self) -> Iterable[Watcher]:
        for g in list(self._all_groups()):
            yield from list(g.members)

    @property
    def watcher_count(self) -> int:
        return sum(len(g.members) for g in self._all_groups())

    def watch(self, namespace: str, labels: LabelSelector, fields: FieldSelector, resource_version: str,
              bookmarks: bool, initial_events_end: bool, max_pending: int,
              encoding: FrameEncoding = PROTOBUF) -> Watcher:
        """Register a watcher; synchronous, so no event can slip between replay and live.

        From a resourceVersion, events after it are replayed from the ring, then live; a version
        older than the ring fails with ``Gone`` ("too old resource version") and the client relists,
        as with Kubernetes.
        """
        interval = self.owner.watch_batch_interval
        current = self.owner.rev
        flt = WatchFilter(namespace, labels, fields)
        if resource_version in ("", "0"):
            w = Watcher(self, flt, current, bookmarks, max_pending, interval)
            for obj in self.select(namespace, labels, fields):
                w.push(encoding.encode("ADDED", obj), 0)
            w.last_rev = current
            if initial_events_end:
                w.push(encoding.encode("BOOKMARK", self._bookmark(current, initial_end=True)), current)
        else:
            try:
                rv = int(resource_version)
            except ValueError:
                raise errors.BadRequest(f'invalid resource version "{resource_version}"') from None
            if rv < self.start_rev:
                raise errors.Gone(f"too old resource version: {rv} ({self.start_rev})")
            w = Watcher(self, flt, rv, bookmarks, max_pending, interval)
            replay = []
            for ev in reversed(self.ring):
                if ev.rev <= rv:
                    break
                replay.append(ev)
            for ev in reversed(replay):
                frame = self._frame_for(flt, ev, encoding)
                if frame is not None:
                    w.push(frame, ev.rev)
        node = fields.value_of(self._pin_field)
        groups = self._groups if node is None else self._pinned.setdefault(node, {})
        group_key = (*flt.key, encoding.name)
        group = groups.get(group_key)
        if group is None:
            group = groups[group_key] = WatcherGroup(flt, node, encoding)
        group.members.add(w)
        w.group = group
        self._gauge.inc()
        if bookmarks:
            self.owner.bookmarks.add(w, asyncio.get_running_loop().time())
        return w

    def remove(self, w: Watcher) -> None:
        w.close()
        g = w.group
        if g is None or w not in g.members:
            return
        g.members.discard(w)
        self._gauge.dec()
        if not g.members:
            groups = self._groups if g.pin_key is None else self._pinned.get(g.pin_key, {})
            groups.pop(g.key, None)
            if g.pin_key is not None and not groups:
                self._pinned.pop(g.pin_key, None)

    def _bookmark(self, rev: int, initial_end: bool = False) -> M:
        obj = self.kind.new()
        meta = object_meta(obj)
        meta.resource_version = str(rev)
        if initial_end:
            meta.annotations[INITIAL_EVENTS_END] = "true"
        return obj

    def publish_gauges(self) -> None:
        _CACHE_RV.labels(resource=self.kind.plural).set(self.owner.rev)
        _OBJECTS.labels(resource=self.kind.plural).set(len(self.store))


class BookmarkSchedule:
    """When each watcher that asked for BOOKMARKs gets its next one: Kubernetes' cacher keeps its
    watchers in one-second time buckets (``timeBucketWatchers``) and sends each a BOOKMARK every
    ``defaultBookmarkFrequency`` (a minute) from its start, so an apiserver with thousands of idle
    watchers sends a few each second, not all of them at once. A watcher that has something
    pending, or is already at the cache's revision, is skipped for that round."""

    def __init__(self, frequency: float):
        self.frequency = frequency
        self.buckets: dict[int, list[Watcher]] = {}

    def add(self, w: Watcher, now: float) -> None:
        self.buckets.setdefault(int(now + self.frequency), []).append(w)

    def due(self, now: float) -> list[Watcher]:
        """Every open watcher whose time has come (each is scheduled again once sent)."""
        out: list[Watcher] = []
        for second in [b for b in self.buckets if b <= now]:
            out.extend(w for w in self.buckets.pop(second) if not w.closed)
        return out

    def send(self, rev: int, now: float) -> int:
        """A BOOKMARK at ``rev`` to every watcher due and behind it; how many were sent."""
        frames: dict[tuple[str, str], bytes] = {}  # (kind, encoding) -> the BOOKMARK frame
        sent = 0
        for w in self.due(now):
            if w.last_rev < rev and not w.pending and w.group is not None:
                key = (w.cache.kind.name, w.group.encoding.name)
                frame = frames.get(key)
                if frame is None:
                    frame = frames[key] = w.group.encoding.encode("BOOKMARK", w.cache._bookmark(rev))
                w.push(frame, rev)
                sent += 1
            self.add(w, now)
        return sent


class WatchCache:
    """All kinds' caches, fed by one etcd watch over ``/registry/``.

    Kubernetes runs one per resource; one shared watch lets every cache know the global revision,
    so BOOKMARKs advance idle watchers of rarely written kinds too.
    """

    def __init__(self, etcd: EtcdClient, capacity: int = 20_000, window: int = 20_000,
                 bookmark_interval: float = DEFAULT_BOOKMARK_FREQUENCY, watch_batch_interval: float = 0.025):
        self.etcd = etcd
        self.watch_batch_interval = watch_batch_interval
        self.window = window
        self.bookmarks = BookmarkSchedule(bookmark_interval)
        self.caches: dict[str, KindCache[Any]] = {k.name: KindCache(self, k, capacity) for k in KINDS}
        self.rev = 0
        self._rev_changed = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self.healthy = False
        self.last_error: str | None = None

    def __getitem__(self, kind: Kind[M, Message]) -> KindCache[M]:
        return self.caches[kind.name]

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Load the state ``window`` revisions back, replay history from there, start following.

        Replaying up to ``window`` revisions of etcd history into the rings lets clients resuming
        across an apiserver restart continue from where they were without a relist."""
        current = await self.etcd.current_revision()
        start = max(1, current - self.window)
        try:
            await self._load(start)
        except CompactedError:
            await self._load(current)
        self._tasks.append(supervise("watchcache-follow", self._follow))
        self._tasks.append(supervise("watchcache-bookmarks", self._bookmarks))
        await self.wait_for(current, timeout=60)
        log.info("watch_cache_ready", revision=self.rev, history_from=min(c.start_rev for c in self.caches.values()),
                 objects=sum(len(c.store) for c in self.caches.values()))

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks.clear()
        for c in self.caches.values():
            for w in list(c._all_watchers()):
                w.close()

    async def _load(self, rev: int) -> None:
        kvs, header_rev, _ = await self.etcd.list(REGISTRY_PREFIX, revision=rev)
        at = rev or header_rev
        grouped: dict[str, list[tuple[str, Message]]] = {k.name: [] for k in KINDS}
        for kv in kvs:
            parts = split_key(kv.key)
            if parts is None:
                continue
            kind = parts[0]
            obj = kind.message.FromString(kv.value)
            object_meta(obj).resource_version = str(kv.mod_revision)
            grouped[kind.name].append((kv.key, obj))
        for name, objs in grouped.items():
            self.caches[name].reset(objs, at)
        self.rev = at
        log.info("watch_cache_loaded", revision=at, objects=len(kvs))

    async def _follow(self) -> None:
        backoff = 0.2
        while True:
            try:
                async for resp in self.etcd.watch(REGISTRY_PREFIX, self.rev + 1, prev_kv=False):
                    if not self.healthy:
                        self.healthy, self.last_error = True, None
                        log.info("watch_cache_following", revision=self.rev)
                    backoff = 0.2
                    if resp.created:  # its header revision is not progress: catch-up events follow
                        continue
                    if resp.events:
                        await failpoints.hit(CACHE_INTAKE)
                        self._apply(resp.events)
                    elif resp.header.revision > self.rev:  # progress notification
                        await self._advance(resp.header.revision)
                        continue
                    await self._advance(self.rev)
            except CompactedError as exc:
                log.warning("watch_cache_compacted", revision=self.rev, compact_revision=exc.compact_revision)
                try:
                    await self._load(0)
                except EtcdError as err:
                    self._unhealthy(str(err))
                    await asyncio.sleep(backoff)
            except EtcdError as exc:
                self._unhealthy(str(exc))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)

    def _unhealthy(self, reason: str) -> None:
        if self.healthy or self.last_error is None:
            log.warning("watch_cache_etcd_error", error=reason, revision=self.rev)
        self.healthy, self.last_error = False, reason

    def _apply(self, events) -> None:
        for e in events:
            kv = e.kv
            key = kv.key.decode()
            parts = split_key(key)
            rev = kv.mod_revision
            if parts is None:
                self.rev = max(self.rev, rev)
                continue
            cache = self.caches[parts[0].name]
            prev = cache.store.get(key)
            if e.type == 1:  # DELETE
                if prev is None:
                    self.rev = max(self.rev, rev)
                    continue
                ev = CacheEvent(rev, "DELETED", key, with_resource_version(prev, rev), prev)
            else:
                obj = cache.kind.message.FromString(kv.value)
                object_meta(obj).resource_version = str(rev)
                ev = CacheEvent(rev, "ADDED" if prev is None else "MODIFIED", key, obj, prev)
            self.rev = max(self.rev, rev)
            cache.apply(ev)

    async def _advance(self, rev: int) -> None:
        self.rev = max(self.rev, rev)
        async with self._rev_changed:
            self._rev_changed.notify_all()

    async def _bookmarks(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(min(1.0, self.bookmarks.frequency))
            self.bookmarks.send(self.rev, loop.time())
            for c in self.caches.values():
                c.publish_gauges()

    async def wait_for(self, rev: int, timeout: float = 3.0) -> None:
        """Wait until the cache has seen revision ``rev``."""
        if self.rev >= rev:
            return
        deadline = time.monotonic() + timeout
        async with self._rev_changed:
            while self.rev < rev:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise errors.Timeout(f"Too large resource version: {rev}, current: {self.rev}")
                try:
                    async with asyncio.timeout(remaining):
                        await self._rev_changed.wait()
                except TimeoutError:
                    pass
