"""The collector (Kubernetes' garbagecollector.go): the controller that feeds the graph builder
from the shared informers and runs the attempt_to_delete and attempt_to_orphan workers, which
read the live object and its owners from the API before they delete or patch anything."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from google.protobuf.message import Message

from controllers.controller import Controller, ControllerContext
from controllers.garbagecollector.errors import NotObservedYet, OrphaningFailed, RestMappingError
from controllers.garbagecollector.graph import (
    BACKGROUND,
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    FOREGROUND,
    ORPHAN,
    Node,
    ObjectReference,
    OwnerRef,
)
from controllers.garbagecollector.graph_builder import GraphBuilder, GraphEvent, ObjectState
from controllers.garbagecollector.uid_cache import AbsentOwnerCache
from machinery import errors, kinds
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.kinds import EVENT, KINDS, Kind, object_meta
from machinery.logging import get_logger
from machinery.process import supervise
from machinery.retry import DEFAULT_BACKOFF, retry_on_conflict
from machinery.workqueue.rate_limiting import RateLimitingQueue

log = get_logger()

# Kinds the collector does not follow (Kubernetes' DefaultIgnoredResources).
IGNORED_KINDS = (EVENT,)

GRAPH_CHANGES, ATTEMPT_TO_DELETE, ATTEMPT_TO_ORPHAN = (
    "garbage_collector_graph_changes", "garbage_collector_attempt_to_delete", "garbage_collector_attempt_to_orphan")


class _VirtualDeleteEnqueued(Exception):
    """The item is not in the API: a virtual delete event went on graph_changes instead."""


class _NamespacedOwnerOfClusterScopedObject(Exception):
    """A cluster-scoped object refers to a namespaced owner: no retry makes that valid."""


def kind_of(api_version: str, kind: str) -> Kind[Message, Message]:
    try:
        return kinds.for_api_kind(api_version, kind)
    except kinds.UnknownKindError:
        raise RestMappingError(f'unable to map {api_version}/{kind} to a resource kplane serves') from None


class GarbageCollector(Controller[Node]):
    """kube-controller-manager's garbagecollector: ``queue`` is attempt_to_delete.

    The propagation policy of an owner's deletion, carried out:

    - **Background**: the apiserver removes the owner at once; the collector sees it go and deletes
      the dependents after it.
    - **Foreground**: the apiserver keeps the owner, marked for deletion with the
      ``foregroundDeletion`` finalizer; the collector deletes every dependent and, once none of those
      with ``blockOwnerDeletion`` is left, takes the finalizer off, and the owner goes.
    - **Orphan**: the owner is kept with the ``orphan`` finalizer; the collector removes the
      ownerReferences to it from its dependents, then the finalizer, and the owner goes while its
      dependents stay.

    The workers of the ``garbage_collector_attempt_to_delete`` and
    ``garbage_collector_attempt_to_orphan`` queues (``--concurrent-gc-syncs`` each) read the live
    object and its owners from the API before they delete or patch anything: the graph says what may
    be garbage, the API decides. Owners found absent are remembered (``absent owner cache``, 500
    entries; ``uid_cache.py``) so the dependents of one deleted owner cost one lookup.
    """

    name = "garbagecollector"
    queue_name = ATTEMPT_TO_DELETE
    expected_errors = (NotObservedYet, OrphaningFailed, RestMappingError)

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client: Client = ctx.client
        self.attempt_to_orphan: RateLimitingQueue[Node] = RateLimitingQueue(ATTEMPT_TO_ORPHAN)
        self.graph_changes: RateLimitingQueue[GraphEvent] = RateLimitingQueue(GRAPH_CHANGES)
        self.absent_owners = AbsentOwnerCache()
        self._recorder: EventRecorder = ctx.recorder("garbage-collector-controller")
        self.graph = GraphBuilder(self.queue, self.attempt_to_orphan, self.graph_changes, self.absent_owners,
                                  self._report_invalid_namespace)
        for kind in KINDS:
            if kind in IGNORED_KINDS:
                continue
            inf = ctx.informers.informer(kind)
            inf.add_handler(functools.partial(self._added, kind), functools.partial(self._updated, kind),
                            functools.partial(self._deleted, kind))

    # ------------------------------------------------------------ informer handlers: enqueue only

    def _added(self, kind: Kind[Message, Message], obj: Message) -> None:
        self.graph.enqueue(GraphEvent("add", ObjectState.of(kind, obj)))

    def _updated(self, kind: Kind[Message, Message], old: Message, new: Message) -> None:
        self.graph.enqueue(GraphEvent("update", ObjectState.of(kind, new), ObjectState.of(kind, old)))

    def _deleted(self, kind: Kind[Message, Message], obj: Message) -> None:
        self.graph.enqueue(GraphEvent("delete", ObjectState.of(kind, obj)))

    def _report_invalid_namespace(self, node: Node, ref: OwnerRef) -> None:
        """Kubernetes' reportInvalidNamespaceOwnerRef: a Warning on the dependent."""
        try:
            kind = kind_of(node.identity.api_version, node.identity.kind)
        except RestMappingError:
            return
        obj = kind.new()
        meta = object_meta(obj)
        meta.name, meta.namespace, meta.uid = node.identity.name, node.identity.namespace, node.identity.uid
        self._recorder.event(obj, "Warning", "OwnerRefInvalidNamespace",
                             f"ownerRef {ref.coordinates(node.identity.namespace)} does not exist in namespace "
                             f'"{node.identity.namespace}"')

    # ------------------------------------------------------------ workers

    async def start(self, workers: int) -> None:
        self._tasks.append(supervise(f"{self.name}/graph-changes", self._graph_changes_worker))
        for i in range(workers):
            self._tasks.append(supervise(f"{self.name}/attempt-to-delete-{i}", functools.partial(
                self.work, self.queue, self._attempt_to_delete)))
            self._tasks.append(supervise(f"{self.name}/attempt-to-orphan-{i}", functools.partial(
                self.work, self.attempt_to_orphan, self._attempt_to_orphan)))
        log.info("controller_started", controller=self.name, workers=workers)

    async def stop(self) -> None:
        self.graph_changes.shutdown()
        self.attempt_to_orphan.shutdown()
        await super().stop()

    async def sync(self, key: Node) -> None:
        await self._attempt_to_delete(key)

    async def _graph_changes_worker(self) -> None:
        """The one worker of graph_changes: the graph changes in the order its informers saw."""
        while True:
            event, shutdown = await self.graph_changes.get()
            if shutdown or event is None:
                return
            try:
                self.graph.process(event)
            except Exception as exc:  # a bug: log it, keep the graph going
                log.exception("gc_graph_change_failed", object=str(event.state.identity), error=str(exc))
            finally:
                self.graph_changes.forget(event)
                self.graph_changes.done(event)

    # ------------------------------------------------------------ attempt to delete

    async def _attempt_to_delete(self, item: Node) -> None:
        """Kubernetes' attemptToDeleteWorker; raises to look at the item again later."""
        if item.virtual:
            in_graph = self.graph.uid_to_node.get(item.identity.uid)
            if in_graph is None or not in_graph.virtual:
                return  # gone from the graph, or observed meanwhile
        try:
            await self._attempt_to_delete_item(item)
        except (_VirtualDeleteEnqueued, _NamespacedOwnerOfClusterScopedObject):
            return
        if item.virtual:
            raise NotObservedYet(f"{item.identity} not observed through an informer yet")

    async def _attempt_to_delete_item(self, item: Node) -> None:
        """Kubernetes' attemptToDeleteItem: delete the item if every owner is gone, remove its
        references to gone owners if some owner is still there, or carry its own foreground
        deletion on."""
        if item.being_deleted and not item.deleting_dependents:
            return  # on its way out; its dependents are looked at when it is gone
        kind = kind_of(item.identity.api_version, item.identity.kind)
        latest = await self._get(kind, item.identity)
        if latest is None or object_meta(latest).uid != item.identity.uid:
            self.graph.enqueue_virtual_delete(item.identity)
            raise _VirtualDeleteEnqueued()
        if item.deleting_dependents:
            await self._process_deleting_dependents(item)
            return
        meta = object_meta(latest)
        refs = [OwnerRef.of(r) for r in meta.owner_references]
        if not refs:
            return
        solid, dangling, waiting = await self._classify_references(item, refs)
        log.debug("gc_classified", item=str(item.identity), solid=len(solid), dangling=len(dangling),
                  waiting=len(waiting))
        if solid:
            if not dangling and not waiting:
                return
            # Keep the item for its live owners; forget the others (waiting ones too, or their
            # foreground deletion would wait for this item for ever).
            log.info("gc_removing_references", item=str(item.identity), owners=[r.uid for r in dangling + waiting])
            await self._patch_references(kind, item, [{"$patch": "delete", "uid": r.uid} for r in dangling + waiting])
            return
        if waiting and item.dependents:
            blocking = [{"uid": r.uid, "blockOwnerDeletion": False} for r in refs if r.blocks]
            if blocking and any(dep.deleting_dependents for dep in item.dependents):
                # A possible cycle of foreground deletions: stop blocking the owners first.
                await self._patch_references(kind, item, blocking)
            log.info("gc_deleting", item=str(item.identity), propagation=FOREGROUND,
                     why="an owner waits for its dependents and the item has dependents of its own")
            await self._delete(kind, item, meta.resource_version, refs, FOREGROUND)
            return
        policy = BACKGROUND
        if FINALIZER_ORPHAN in meta.finalizers:
            policy = ORPHAN
        elif FINALIZER_FOREGROUND in meta.finalizers:
            policy = FOREGROUND
        log.info("gc_deleting", item=str(item.identity), propagation=policy, why="no owner left")
        await self._delete(kind, item, meta.resource_version, refs, policy)

    async def _process_deleting_dependents(self, item: Node) -> None:
        """An owner deleted in the foreground: done once no blocking dependent is left (its
        finalizer goes), else its blocking dependents are looked at."""
        blocking = item.blocking_dependents()
        if not blocking:
            log.info("gc_foreground_done", item=str(item.identity))
            await self._remove_finalizer(item, FINALIZER_FOREGROUND)
            return
        for dep in blocking:
            if not dep.deleting_dependents:
                self.queue.add(dep)

    async def _classify_references(self, item: Node, refs: list[OwnerRef]) -> tuple[
            list[OwnerRef], list[OwnerRef], list[OwnerRef]]:
        """Kubernetes' classifyReferences: (solid: the owner exists and is not deleting in the
        foreground, dangling: it does not exist, waiting: it is deleting in the foreground)."""
        solid, dangling, waiting = [], [], []
        for ref in refs:
            owner = await self._owner(ref, item)
            if owner is None:
                dangling.append(ref)
                continue
            meta = object_meta(owner)
            if meta.deletion_timestamp and FINALIZER_FOREGROUND in meta.finalizers:
                waiting.append(ref)
            else:
                solid.append(ref)
        return solid, dangling, waiting

    async def _owner(self, ref: OwnerRef, item: Node) -> Message | None:
        """Kubernetes' isDangling: the owner from the API, or None when it does not exist (or
        exists with another uid) — remembered in the absent owner cache."""
        key = ref.coordinates()
        if self.absent_owners.has(key) or self.absent_owners.has(key.with_namespace(item.identity.namespace)):
            return None
        kind = kind_of(ref.api_version, ref.kind)
        if kind.namespaced and not item.identity.namespace:
            log.info("gc_invalid_owner", item=str(item.identity), owner=ref.uid,
                     why="a cluster-scoped object refers to a namespaced owner")
            raise _NamespacedOwnerOfClusterScopedObject()
        absent_key = key.with_namespace(item.identity.namespace) if kind.namespaced else key
        owner = await self._get(kind, ref.coordinates(item.identity.namespace if kind.namespaced else ""))
        if owner is None or object_meta(owner).uid != ref.uid:
            self.absent_owners.add(absent_key)
            return None
        return owner

    # ------------------------------------------------------------ attempt to orphan

    async def _attempt_to_orphan(self, owner: Node) -> None:
        """Kubernetes' attemptToOrphanWorker: every dependent loses its reference to the owner,
        then the owner its orphan finalizer; raises to try again later."""
        dependents = list(owner.dependents)
        results = await asyncio.gather(*(self._orphan(dep, owner.identity) for dep in dependents),
                                       return_exceptions=True)
        failed = [f"orphaning {d.identity} failed, {r}" for d, r in zip(dependents, results, strict=True)
                  if isinstance(r, BaseException)]
        if failed:
            raise OrphaningFailed(f"failed to orphan dependents of owner {owner.identity}, got errors: "
                                  f"{'; '.join(failed)}")
        log.info("gc_orphaned", owner=str(owner.identity), dependents=len(dependents))
        await self._remove_finalizer(owner, FINALIZER_ORPHAN)

    async def _orphan(self, dependent: Node, owner: ObjectReference) -> None:
        kind = kind_of(dependent.identity.api_version, dependent.identity.kind)
        try:
            await self._patch_references(kind, dependent, [{"$patch": "delete", "uid": owner.uid}])
        except errors.NotFound:
            pass

    # ------------------------------------------------------------ the API

    async def _get(self, kind: Kind[Message, Message], ref: ObjectReference) -> Message | None:
        try:
            return await self._client.resource(kind).get(ref.name, ref.namespace)
        except errors.NotFound:
            return None

    async def _patch_references(self, kind: Kind[Message, Message], item: Node, refs: list[dict[str, Any]]) -> None:
        """A strategic merge patch of the item's ownerReferences (merged by uid), with the item's
        uid as precondition, as Kubernetes' GenerateDeleteOwnerRefStrategicMergeBytes."""
        await self._client.resource(kind).patch(item.identity.name, {"metadata": {
            "ownerReferences": refs, "uid": item.identity.uid}}, namespace=item.identity.namespace,
            patch_type="strategic")

    async def _delete(self, kind: Kind[Message, Message], item: Node, resource_version: str,
                      owners: list[OwnerRef], policy: str) -> None:
        """Kubernetes' deleteObject: delete the item as read (uid and resourceVersion), so that an
        owner it was given meanwhile saves it; if only its version moved (a status write), again."""
        rc = self._client.resource(kind)
        name, namespace, uid = item.identity.name, item.identity.namespace, item.identity.uid
        try:
            await rc.delete(name, namespace, uid=uid, resource_version=resource_version, propagation_policy=policy)
            return
        except errors.NotFound:
            self.graph.enqueue_virtual_delete(item.identity)
            raise _VirtualDeleteEnqueued() from None
        except errors.Conflict as exc:
            conflict = exc
        live = await self._get(kind, item.identity)
        if live is None:
            return  # gone meanwhile: what was wanted
        meta = object_meta(live)
        if meta.uid != uid or meta.resource_version == resource_version or \
                [OwnerRef.of(r) for r in meta.owner_references] != owners:
            raise conflict  # its owners changed: look at it again
        try:
            await rc.delete(name, namespace, uid=uid, resource_version=meta.resource_version,
                            propagation_policy=policy)
        except errors.NotFound:
            pass

    async def _remove_finalizer(self, item: Node, finalizer: str) -> None:
        """Kubernetes' removeFinalizer: a JSON merge patch of the finalizers without ``finalizer``,
        at the object's resourceVersion, retried on conflict (``retry.DefaultBackoff``)."""
        kind = kind_of(item.identity.api_version, item.identity.kind)

        async def remove() -> None:
            live = await self._get(kind, item.identity)
            if live is None:
                return
            meta = object_meta(live)
            if meta.uid != item.identity.uid or finalizer not in meta.finalizers:
                return
            try:
                await self._client.resource(kind).patch(item.identity.name, {"metadata": {
                    "finalizers": [f for f in meta.finalizers if f != finalizer],
                    "resourceVersion": meta.resource_version}}, namespace=item.identity.namespace,
                    patch_type="merge")
            except errors.NotFound:
                return

        try:
            await retry_on_conflict(remove, DEFAULT_BACKOFF)
        except errors.Conflict as exc:
            raise errors.Conflict(f"removing the {finalizer} finalizer of {item.identity}: {exc}; "
                                  "the garbage collector will retry later") from exc
