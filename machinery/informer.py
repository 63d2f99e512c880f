"""Informers, as client-go has them: list, then watch from the list's version, into an indexed cache.

    inf = Informer(client, POD, field_selector="spec.nodeName=node-1")
    inf.add_handler(on_add=queue_key, on_update=lambda old, new: queue_key(new), on_delete=queue_key)
    inf.add_indexer("node", lambda pod: [pod.spec.node_name])
    await inf.start(); await inf.wait_for_sync()

Handlers run on the event loop and must only enqueue (client-go's rule): workers reconcile from
the cache, so a missed or repeated event cannot corrupt state. The watch resumes from the last
resourceVersion seen (BOOKMARKs keep it current while nothing changes); when the server says that
version is too old (``Gone``), the informer relists and hands handlers the difference.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Callable

from google.protobuf.message import Message
from prometheus_client import Counter

from machinery import errors
from machinery.client import Client
from machinery.kinds import Kind
from machinery.logging import get_logger
from machinery.process import cancel_and_wait

log = get_logger()

_RELISTS = Counter("kplane_informer_relists_total", "Times an informer listed its kind (first list included).",
                   ["kind"])
_WATCH_RESTARTS = Counter("kplane_informer_watch_restarts_total", "Times an informer re-opened its watch.",
                          ["kind", "reason"])

AddFn = Callable[[Message], None]
UpdateFn = Callable[[Message, Message], None]
DeleteFn = Callable[[Message], None]
IndexFn = Callable[[Message], list[str]]


def key_of(obj: Message) -> str:
    """client-go's MetaNamespaceKeyFunc: ``namespace/name`` or ``name``."""
    ns = obj.metadata.namespace
    return f"{ns}/{obj.metadata.name}" if ns else obj.metadata.name


@dataclass
class _Handler:
    on_add: AddFn | None = None
    on_update: UpdateFn | None = None
    on_delete: DeleteFn | None = None


@dataclass
class _Index:
    fn: IndexFn
    items: dict[str, set[str]] = field(default_factory=dict)


class Informer:
    def __init__(self, client: Client, kind: Kind, *, namespace: str = "", label_selector: str = "",
                 field_selector: str = ""):
        self.client = client
        self.kind = kind
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.store: dict[str, Message] = {}
        self.resource_version = ""
        self.lists = 0  # how many times the kind was listed (1 = never relisted)
        self._handlers: list[_Handler] = []
        self._indexes: dict[str, _Index] = {}
        self._synced = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._resource = client.resource(kind)

    # ------------------------------------------------------------ set-up

    def add_handler(self, on_add: AddFn | None = None, on_update: UpdateFn | None = None,
                    on_delete: DeleteFn | None = None) -> None:
        """Register handlers; objects already in the cache are delivered as adds at once."""
        h = _Handler(on_add, on_update, on_delete)
        self._handlers.append(h)
        if on_add is not None:
            for obj in list(self.store.values()):
                on_add(obj)

    def add_indexer(self, name: str, fn: IndexFn) -> None:
        idx = _Index(fn)
        self._indexes[name] = idx
        for key, obj in self.store.items():
            self._index_add(idx, key, obj)

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=f"informer-{self.kind.plural}")

    async def stop(self) -> None:
        await cancel_and_wait([self._task])
        self._task = None

    @property
    def has_synced(self) -> bool:
        """True once the first list has been delivered to the cache and handlers."""
        return self._synced.is_set()

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        await asyncio.wait_for(self._synced.wait(), timeout)

    # ------------------------------------------------------------ reads

    def get(self, name: str, namespace: str = "") -> Message | None:
        return self.store.get(f"{namespace}/{name}" if self.kind.namespaced else name)

    def list(self) -> list[Message]:
        return list(self.store.values())

    def by_index(self, name: str, value: str) -> list[Message]:
        keys = self._indexes[name].items.get(value, ())
        return [self.store[k] for k in keys if k in self.store]

    # ------------------------------------------------------------ machinery

    def _index_add(self, idx: _Index, key: str, obj: Message) -> None:
        for v in idx.fn(obj):
            idx.items.setdefault(v, set()).add(key)

    def _index_remove(self, idx: _Index, key: str, obj: Message) -> None:
        for v in idx.fn(obj):
            keys = idx.items.get(v)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del idx.items[v]

    def _put(self, key: str, obj: Message) -> Message | None:
        old = self.store.get(key)
        for idx in self._indexes.values():
            if old is not None:
                self._index_remove(idx, key, old)
            self._index_add(idx, key, obj)
        self.store[key] = obj
        return old

    def _remove(self, key: str) -> Message | None:
        old = self.store.pop(key, None)
        if old is not None:
            for idx in self._indexes.values():
                self._index_remove(idx, key, old)
        return old

    def _dispatch(self, kind: str, *args: Message) -> None:
        for h in self._handlers:
            fn = h.on_add if kind == "add" else h.on_update if kind == "update" else h.on_delete
            if fn is None:
                continue
            try:
                fn(*args)
            except Exception:
                log.exception("informer_handler_failed", kind=self.kind.name, event=kind)

    def _replace(self, items: list[Message]) -> None:
        fresh = {key_of(o): o for o in items}
        for key in [k for k in self.store if k not in fresh]:
            old = self._remove(key)
            self._dispatch("delete", old)
        for key, obj in fresh.items():
            old = self._put(key, obj)
            if old is None:
                self._dispatch("add", obj)
            elif old.metadata.resource_version != obj.metadata.resource_version:
                self._dispatch("update", old, obj)

    def _apply(self, type_: str, obj: Message) -> None:
        key = key_of(obj)
        if type_ == "DELETED":
            old = self._remove(key)
            if old is not None:
                self._dispatch("delete", obj)
            return
        old = self.store.get(key)
        if old is not None and _rv(old) >= _rv(obj):
            return  # already seen (a replayed event): level-triggered, nothing to do
        self._put(key, obj)
        if old is None:
            self._dispatch("add", obj)
        else:
            self._dispatch("update", old, obj)

    async def _list(self) -> None:
        _RELISTS.labels(kind=self.kind.name).inc()
        self.lists += 1
        resp = await self._resource.list(self.namespace, label_selector=self.label_selector,
                                         field_selector=self.field_selector, resource_version="0")
        self._replace(list(resp.items))
        self.resource_version = resp.metadata.resource_version
        self._synced.set()

    async def _run(self) -> None:
        backoff = 0.1
        need_list = True
        while True:
            try:
                if need_list:
                    await self._list()
                    need_list = False
                async for ev in self._resource.watch(self.namespace, label_selector=self.label_selector,
                                                     field_selector=self.field_selector,
                                                     resource_version=self.resource_version, allow_bookmarks=True):
                    backoff = 0.1
                    if ev.type != "BOOKMARK":
                        self._apply(ev.type, ev.object)
                    rv = ev.object.metadata.resource_version
                    if rv and _rv_str(rv) > _rv_str(self.resource_version):
                        self.resource_version = rv
                _WATCH_RESTARTS.labels(kind=self.kind.name, reason="closed").inc()
            except asyncio.CancelledError:
                raise
            except errors.Gone:
                _WATCH_RESTARTS.labels(kind=self.kind.name, reason="gone").inc()
                log.info("informer_relist", kind=self.kind.name, resource_version=self.resource_version)
                need_list = True
            except errors.ApiError as exc:
                _WATCH_RESTARTS.labels(kind=self.kind.name, reason=type(exc).__name__).inc()
                log.debug("informer_watch_error", kind=self.kind.name, error=exc.message)
                await asyncio.sleep(backoff * (1 + random.random() / 2))
                backoff = min(backoff * 2, 2.0)


def _rv(obj: Message) -> int:
    return _rv_str(obj.metadata.resource_version)


def _rv_str(rv: str) -> int:
    try:
        return int(rv)
    except ValueError:
        return 0
