"""Informers, as client-go has them: list, then watch from the list's version, into an indexed cache.

    inf = Informer(client, POD, field_selector="spec.nodeName=node-1")
    inf.add_handler(on_add=queue_key, on_update=lambda old, new: queue_key(new), on_delete=queue_key)
    inf.add_indexer("node", lambda pod: [pod.spec.node_name])
    await inf.start(); await inf.wait_for_sync()

Handlers run on the event loop and must only enqueue (client-go's rule): workers reconcile from
the cache, so a missed or repeated event cannot corrupt state. The watch resumes from the last
resourceVersion seen (BOOKMARKs keep it current while nothing changes); when the server says that
version is too old (``Gone``), the informer relists and hands handlers the difference.

The list-and-watch loop itself is ``Reflector`` (client-go's name for it), which anything that
follows a kind can use without a cache: ``kplane get -w`` prints with it.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Generic

from google.protobuf.message import Message
from prometheus_client import Counter, Gauge

from machinery import errors, failpoints
from machinery.client import Client, ResourceClient
from machinery.kinds import Kind, M, object_meta
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise

log = get_logger()

FP_WATCH_RECEIVE = failpoints.declare(
    "informer/watch-receive", "each watch event this process's informers receive, before their handlers see it: "
    "sleep(ms) delays this one component's view of the cluster (informer lag, where apiserver/watch-delivery "
    "delays every watcher)")

_RELISTS = Counter("kplane_informer_relists_total", "Times an informer listed its kind (first list included).",
                   ["kind"])
_WATCH_RESTARTS = Counter("kplane_informer_watch_restarts_total", "Times an informer re-opened its watch.",
                          ["kind", "reason"])
# client-go's reflector_last_resource_version: how far this process's view of a kind has come
# (the highest of its reflectors of that kind), so informer lag can be read off /metrics.
_LAST_RV = Gauge("reflector_last_resource_version", "Last resource version seen for the reflectors of a kind.",
                 ["kind"])
_last_rv: dict[str, int] = {}


def _saw(kind: str, resource_version: str) -> None:
    try:
        rv = int(resource_version)
    except ValueError:
        return
    if rv > _last_rv.get(kind, 0):
        _last_rv[kind] = rv
        _LAST_RV.labels(kind=kind).set(rv)

ListFn = Callable[[list[M], str], None]
EventFn = Callable[[str, M], None]
ErrorFn = Callable[[errors.ApiError, int], None]
AddFn = Callable[[M], None]
UpdateFn = Callable[[M, M], None]
DeleteFn = Callable[[M], None]
IndexFn = Callable[[M], list[str]]


def key_of(obj: Message) -> str:
    """client-go's MetaNamespaceKeyFunc: ``namespace/name`` or ``name``."""
    meta = object_meta(obj)
    ns = meta.namespace
    return f"{ns}/{meta.name}" if ns else meta.name


_BACKOFF_START = 0.1
_BACKOFF_MAX = 2.0


class Reflector(Generic[M]):
    """client-go's Reflector: list, then watch from the list's resourceVersion, until cancelled.

    The watch resumes from the last resourceVersion seen (an event's, or a BOOKMARK's while nothing
    changes) whenever its stream ends or fails — UNAVAILABLE while the apiserver restarts, a reset
    stream — after a jittered backoff (0.1 s doubling to 2 s) once it failed or ended without
    delivering anything. Only when the server says that version is too old (``Gone``) does it list
    again. ``on_list(items, resource_version)`` gets every list, ``on_event(type, object)`` every
    ADDED, MODIFIED and DELETED event, ``on_error(error, failures)`` every failure (``failures``:
    how many in a row since the last event) and may raise to end the loop.
    """

    def __init__(self, resource: ResourceClient[M, Any], *, on_list: ListFn[M], on_event: EventFn[M],
                 on_error: ErrorFn | None = None, namespace: str = "", label_selector: str = "",
                 field_selector: str = ""):
        self._resource = resource
        self._on_list = on_list
        self._on_event = on_event
        self._on_error = on_error
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.resource_version = ""

    async def run(self, resource_version: str = "") -> None:
        """List and watch until cancelled. Given ``resource_version``, the caller has listed at that
        version already (and shown what it got): the loop starts with the watch."""
        kind = self._resource.kind.name
        need_list = not resource_version
        self.resource_version = resource_version
        backoff, failures = _BACKOFF_START, 0
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                delivered = False
                async for ev in self._resource.watch(self.namespace, label_selector=self.label_selector,
                                                     field_selector=self.field_selector,
                                                     resource_version=self.resource_version, allow_bookmarks=True):
                    delivered = True
                    backoff, failures = _BACKOFF_START, 0
                    if ev.type != "BOOKMARK":
                        await failpoints.hit(FP_WATCH_RECEIVE)
                        self._on_event(ev.type, ev.object)
                    rv = object_meta(ev.object).resource_version
                    if rv and _rv_str(rv) > _rv_str(self.resource_version):
                        self.resource_version = rv
                        _saw(kind, rv)
                _WATCH_RESTARTS.labels(kind=kind, reason="closed").inc()
                if not delivered:  # a stream that ends at once must not become a busy loop
                    backoff = await _sleep(backoff)
            except asyncio.CancelledError:
                raise
            except errors.Gone as exc:
                _WATCH_RESTARTS.labels(kind=kind, reason="gone").inc()
                failures += 1
                if self._on_error is not None:
                    self._on_error(exc, failures)
                need_list = True
            except errors.ApiError as exc:
                _WATCH_RESTARTS.labels(kind=kind, reason=type(exc).__name__).inc()
                failures += 1
                if self._on_error is not None:
                    self._on_error(exc, failures)
                backoff = await _sleep(backoff)

    async def _list(self) -> None:
        """List at resourceVersion "": a consistent read, never older than what was written before
        it (client-go's WatchList streams its initial state the same way). A list at "0" may be
        served by a watch cache that is behind etcd: a controller-manager restarted a moment after
        its previous incarnation created pods would not see them and create them again."""
        _RELISTS.labels(kind=self._resource.kind.name).inc()
        resp = await self._resource.list(self.namespace, label_selector=self.label_selector,
                                         field_selector=self.field_selector, resource_version="")
        self.resource_version = resp.metadata.resource_version
        self._on_list(list(resp.items), self.resource_version)
        _saw(self._resource.kind.name, self.resource_version)


async def _sleep(backoff: float) -> float:
    """Sleep about ``backoff`` seconds (jittered up to +50%); the next backoff."""
    await asyncio.sleep(backoff * (1 + random.random() / 2))
    return min(backoff * 2, _BACKOFF_MAX)


@dataclass
class _Handler(Generic[M]):
    on_add: AddFn[M] | None = None
    on_update: UpdateFn[M] | None = None
    on_delete: DeleteFn[M] | None = None


@dataclass
class _Index(Generic[M]):
    fn: IndexFn[M]
    items: dict[str, set[str]] = field(default_factory=dict)


class Informer(Generic[M]):
    def __init__(self, client: Client, kind: Kind[M, Any], *, namespace: str = "", label_selector: str = "",
                 field_selector: str = ""):
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store: dict[str, M] = {}
        self.lists = 0  # how many times the kind was listed (1 = never relisted)
        self._handlers: list[_Handler[M]] = []
        self._indexes: dict[str, _Index[M]] = {}
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._resource = client.resource(kind)
        self._reflector = Reflector(self._resource, on_list=self._listed, on_event=self._apply,
                                    on_error=self._watch_failed, namespace=namespace,
                                    label_selector=label_selector, field_selector=field_selector)

    # ------------------------------------------------------------ set-up

    def add_handler(self, on_add: AddFn[M] | None = None, on_update: UpdateFn[M] | None = None,
                    on_delete: DeleteFn[M] | None = None) -> None:
        """Register handlers; objects already in the cache are delivered as adds at once."""
        h = _Handler(on_add, on_update, on_delete)
        self._handlers.append(h)
        if on_add is not None:
            for obj in list(self.store.values()):
                on_add(obj)

    def add_indexer(self, name: str, fn: IndexFn[M]) -> None:
        idx = _Index(fn)
        self._indexes[name] = idx
        for key, obj in self.store.items():
            self._index_add(idx, key, obj)

    async def start(self) -> None:
        if self._task is None:
            self._task = supervise(f"informer-{self.kind.plural}", self._run)

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    @property
    def resource_version(self) -> str:
        """The last resourceVersion the informer has seen (its watch resumes from it)."""
        return self._reflector.resource_version

    @property
    def has_synced(self) -> bool:
        """True once the first list has been delivered to the cache and handlers."""
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        async with asyncio.timeout(timeout):
            await self._synced.wait()

    # ------------------------------------------------------------ reads

    def get(self, name: str, namespace: str = "") -> M | None:
        return self.store.get(f"{namespace}/{name}" if self.kind.namespaced else name)

    def list_all(self) -> list[M]:
        return list(self.store.values())

    def by_index(self, name: str, value: str) -> list[M]:
        keys = self._indexes[name].items.get(value, ())
        return [self.store[k] for k in keys if k in self.store]

    # ------------------------------------------------------------ machinery

    def _index_add(self, idx: _Index[M], key: str, obj: M) -> None:
        for v in idx.fn(obj):
            idx.items.setdefault(v, set()).add(key)

    def _index_remove(self, idx: _Index[M], key: str, obj: M) -> None:
        for v in idx.fn(obj):
            keys = idx.items.get(v)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del idx.items[v]

    def _put(self, key: str, obj: M) -> M | None:
        old = self.store.get(key)
        for idx in self._indexes.values():
            if old is not None:
                self._index_remove(idx, key, old)
            self._index_add(idx, key, obj)
        self.store[key] = obj
        return old

    def _remove(self, key: str) -> M | None:
        old = self.store.pop(key, None)
        if old is not None:
            for idx in self._indexes.values():
                self._index_remove(idx, key, old)
        return old

    # A handler that raises is logged and skipped: the other handlers still see the event.

    def _dispatch_add(self, obj: M) -> None:
        for h in self._handlers:
            if h.on_add is not None:
                try:
                    h.on_add(obj)
                except Exception:
                    self._handler_failed("add")

    def _dispatch_update(self, old: M, new: M) -> None:
        for h in self._handlers:
            if h.on_update is not None:
                try:
                    h.on_update(old, new)
                except Exception:
                    self._handler_failed("update")

    def _dispatch_delete(self, obj: M) -> None:
        for h in self._handlers:
            if h.on_delete is not None:
                try:
                    h.on_delete(obj)
                except Exception:
                    self._handler_failed("delete")

    def _handler_failed(self, handler: str) -> None:
        log.exception("informer_handler_failed", kind=self.kind.name, handler=handler)

    def _replace(self, items: list[M]) -> None:
        fresh = {key_of(o): o for o in items}
        for key in [k for k in self.store if k not in fresh]:
            old = self._remove(key)
            if old is not None:  # always: key was in the store
                self._dispatch_delete(old)
        for key, obj in fresh.items():
            old = self._put(key, obj)
            if old is None:
                self._dispatch_add(obj)
            elif object_meta(old).resource_version != object_meta(obj).resource_version:
                self._dispatch_update(old, obj)

    def _apply(self, type_: str, obj: M) -> None:
        key = key_of(obj)
        if type_ == "DELETED":
            old = self._remove(key)
            if old is not None:
                self._dispatch_delete(obj)
            return
        old = self.store.get(key)
        if old is not None and _rv(old) >= _rv(obj):
            return  # already seen (a replayed event): level-triggered, nothing to do
        self._put(key, obj)
        if old is None:
            self._dispatch_add(obj)
        else:
            self._dispatch_update(old, obj)

    def _listed(self, items: list[M], resource_version: str) -> None:
        self.lists += 1
        self._replace(items)
        self._synced.set()

    def _watch_failed(self, exc: errors.ApiError, failures: int) -> None:
        if isinstance(exc, errors.Gone):
            log.info("informer_relist", kind=self.kind.name, resource_version=self.resource_version)
        else:
            log.debug("informer_watch_error", kind=self.kind.name, error=exc.message, failures=failures)

    async def _run(self) -> None:
        await self._reflector.run()


def _rv(obj: Message) -> int:
    return _rv_str(object_meta(obj).resource_version)


def _rv_str(rv: str) -> int:
    try:
        return int(rv)
    except ValueError:
        return 0
