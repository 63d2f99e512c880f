"""The garbage collector (Kubernetes' pkg/controller/garbagecollector).

Objects name their owners in ``metadata.ownerReferences``; the collector deletes an object whose
owners are all gone, and carries out the propagation policy of an owner's deletion
(docs/controller-manager.md "Garbage collector"):

- **Background**: the apiserver removes the owner at once; the collector sees it go and deletes
  the dependents after it.
- **Foreground**: the apiserver keeps the owner, marked for deletion with the
  ``foregroundDeletion`` finalizer; the collector deletes every dependent and, once none of those
  with ``blockOwnerDeletion`` is left, takes the finalizer off, and the owner goes.
- **Orphan**: the owner is kept with the ``orphan`` finalizer; the collector removes the
  ownerReferences to it from its dependents, then the finalizer, and the owner goes while its
  dependents stay.

Three parts, as in Kubernetes. The ``GraphBuilder`` follows every kind kplane serves but Events
(Kubernetes' ignored resources) through the shared informers, whose handlers only put changes on
the ``garbage_collector_graph_changes`` queue; one worker takes them in order and keeps the graph
of owners and dependents by uid. An owner referred to but not seen yet is a *virtual* node,
checked against the API. The graph's changes decide what to look at: an object whose owner went,
an owner waiting for its dependents, a dependent that stopped blocking. Those go on the
``garbage_collector_attempt_to_delete`` and ``garbage_collector_attempt_to_orphan`` queues, whose
workers (``--concurrent-gc-syncs`` each) read the live object and its owners from the API before
they delete or patch anything: the graph says what may be garbage, the API decides. Owners found
absent are remembered (``absent owner cache``, 500 entries) so the dependents of one deleted owner
cost one lookup.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from controllers.controller import Controller, ControllerContext
from machinery import errors, kinds
from machinery.api import meta_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.kinds import EVENT, KINDS, Kind, object_meta
from machinery.logging import get_logger
from machinery.process import supervise
from machinery.retry import DEFAULT_BACKOFF, retry_on_conflict
from machinery.workqueue import RateLimitingQueue

log = get_logger()

# The collector's finalizers and DeleteOptions' propagation policies (metav1's names).
FINALIZER_ORPHAN, FINALIZER_FOREGROUND = "orphan", "foregroundDeletion"
ORPHAN, BACKGROUND, FOREGROUND = "Orphan", "Background", "Foreground"

# Kinds the collector does not follow (Kubernetes' DefaultIgnoredResources).
IGNORED_KINDS = (EVENT,)
ABSENT_OWNER_CACHE_SIZE = 500  # Kubernetes' NewReferenceCache(500)

GRAPH_CHANGES, ATTEMPT_TO_DELETE, ATTEMPT_TO_ORPHAN = (
    "garbage_collector_graph_changes", "garbage_collector_attempt_to_delete", "garbage_collector_attempt_to_orphan")


@dataclass(frozen=True)
class ObjectReference:
    """An object's coordinates in the graph (Kubernetes' objectReference): an ownerReference's
    apiVersion, kind, name and uid, and the namespace."""

    api_version: str
    kind: str
    name: str
    uid: str
    namespace: str = ""

    def __str__(self) -> str:
        return (f"[{self.api_version}/{self.kind}, namespace: {self.namespace}, name: {self.name}, "
                f"uid: {self.uid}]")

    def with_namespace(self, namespace: str) -> ObjectReference:
        return ObjectReference(self.api_version, self.kind, self.name, self.uid, namespace)


@dataclass(frozen=True)
class OwnerRef:
    """One ownerReference, as a value."""

    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool | None = None
    block_owner_deletion: bool | None = None

    @classmethod
    def of(cls, ref: meta_pb2.OwnerReference) -> OwnerRef:
        return cls(ref.api_version, ref.kind, ref.name, ref.uid,
                   ref.controller if ref.HasField("controller") else None,
                   ref.block_owner_deletion if ref.HasField("block_owner_deletion") else None)

    @property
    def blocks(self) -> bool:
        return bool(self.block_owner_deletion)

    def coordinates(self, namespace: str = "") -> ObjectReference:
        return ObjectReference(self.api_version, self.kind, self.name, self.uid, namespace)

    def matches(self, identity: ObjectReference) -> bool:
        """Kubernetes' ownerReferenceMatchesCoordinates: same uid, name, kind and apiVersion."""
        return (self.uid, self.name, self.kind, self.api_version) == (
            identity.uid, identity.name, identity.kind, identity.api_version)


@dataclass(frozen=True)
class ObjectState:
    """What the graph keeps of an object as an informer delivered it."""

    identity: ObjectReference
    owners: tuple[OwnerRef, ...] = ()
    being_deleted: bool = False
    finalizers: tuple[str, ...] = ()

    @classmethod
    def of(cls, kind: Kind[Message, Message], obj: Message) -> ObjectState:
        meta = object_meta(obj)
        return cls(ObjectReference(kind.api_version, kind.name, meta.name, meta.uid, meta.namespace),
                   tuple(OwnerRef.of(r) for r in meta.owner_references), bool(meta.deletion_timestamp),
                   tuple(meta.finalizers))

    def deleting_with(self, finalizer: str) -> bool:
        return self.being_deleted and finalizer in self.finalizers


@dataclass(eq=False)
class GraphEvent:
    """One change on the graph_changes queue: an informer's add, update or delete, or a *virtual*
    delete — the collector found the object absent from the API."""

    type: str  # "add", "update", "delete"
    state: ObjectState
    old: ObjectState | None = None
    virtual: bool = False


@dataclass(eq=False)
class Node:
    """One object in the graph (Kubernetes' node); items of the attempt queues are nodes."""

    identity: ObjectReference
    owners: tuple[OwnerRef, ...] = ()
    dependents: set[Node] = field(default_factory=set)
    being_deleted: bool = False
    deleting_dependents: bool = False  # being deleted with the foregroundDeletion finalizer
    virtual: bool = False  # referred to as an owner, never seen through an informer

    def blocking_dependents(self) -> list[Node]:
        """The dependents whose ownerReference to this node has ``blockOwnerDeletion``."""
        return [d for d in self.dependents if any(o.uid == self.identity.uid and o.blocks for o in d.owners)]

    def __repr__(self) -> str:
        return f"Node({self.identity})"


class AbsentOwnerCache:
    """Owners the API said do not exist (or exist with another uid), least recently used out."""

    def __init__(self, size: int = ABSENT_OWNER_CACHE_SIZE):
        self._size = size
        self._refs: OrderedDict[ObjectReference, None] = OrderedDict()

    def add(self, ref: ObjectReference) -> None:
        self._refs[ref] = None
        self._refs.move_to_end(ref)
        while len(self._refs) > self._size:
            self._refs.popitem(last=False)

    def has(self, ref: ObjectReference) -> bool:
        if ref in self._refs:
            self._refs.move_to_end(ref)
            return True
        return False


def references_diffs(old: Iterable[OwnerRef], new: Iterable[OwnerRef]) -> tuple[
        list[OwnerRef], list[OwnerRef], list[tuple[OwnerRef, OwnerRef]]]:
    """Kubernetes' referencesDiffs by uid: (added, removed, changed as (old, new))."""
    before = {r.uid: r for r in old}
    added, changed = [], []
    for ref in new:
        prior = before.pop(ref.uid, None)
        if prior is None:
            added.append(ref)
        elif prior != ref:
            changed.append((prior, ref))
    return added, list(before.values()), changed


def partition_dependents(dependents: Iterable[Node], owner: ObjectReference) -> tuple[list[Node], list[Node]]:
    """Kubernetes' partitionDependents: the dependents whose reference to ``owner``'s uid matches
    its coordinates, and those whose reference does not (a dependent may be in both)."""
    matching, nonmatching = [], []
    for dep in dependents:
        match = mismatch = False
        if owner.namespace and owner.namespace != dep.identity.namespace:
            mismatch = True
        else:
            for ref in dep.owners:
                if ref.uid == owner.uid:
                    if ref.matches(owner):
                        match = True
                    else:
                        mismatch = True
        if match:
            matching.append(dep)
        if mismatch:
            nonmatching.append(dep)
    return matching, nonmatching


def _reference_order(ref: ObjectReference) -> tuple[str, str, str, str, str]:
    return ref.kind, ref.api_version, ref.namespace, ref.name, ref.uid


def alternate_owner_identity(dependents: Iterable[Node], absent: ObjectReference) -> ObjectReference | None:
    """Kubernetes' getAlternateOwnerIdentity: another identity the dependents refer to ``absent``'s
    uid by — the first after ``absent`` in (kind, apiVersion, namespace, name) order, else the first."""
    cluster_scoped = not absent.namespace
    seen = {absent}
    first: ObjectReference | None = None
    following: ObjectReference | None = None
    for dep in dependents:
        for ref in dep.owners:
            if ref.uid != absent.uid:
                continue
            if ref.matches(absent) and (cluster_scoped or absent.namespace == dep.identity.namespace):
                continue
            alt = ref.coordinates(dep.identity.namespace)
            if cluster_scoped and alt.api_version == absent.api_version and alt.kind == absent.kind:
                alt = alt.with_namespace("")
            if alt in seen:
                continue
            seen.add(alt)
            if first is None or _reference_order(alt) < _reference_order(first):
                first = alt
            if _reference_order(absent) < _reference_order(alt) and (
                    following is None or _reference_order(alt) < _reference_order(following)):
                following = alt
    return following or first


class GraphBuilder:
    """Kubernetes' GraphBuilder: the graph of owners and dependents, changed only by ``process``
    (the graph_changes worker), which puts what may be garbage on the attempt queues."""

    def __init__(self, attempt_to_delete: RateLimitingQueue[Node], attempt_to_orphan: RateLimitingQueue[Node],
                 graph_changes: RateLimitingQueue[GraphEvent], absent_owners: AbsentOwnerCache,
                 report_invalid_namespace: Callable[[Node, OwnerRef], None] = lambda node, ref: None):
        self.uid_to_node: dict[str, Node] = {}
        self.attempt_to_delete = attempt_to_delete
        self.attempt_to_orphan = attempt_to_orphan
        self.graph_changes = graph_changes
        self.absent_owners = absent_owners
        self._report_invalid_namespace = report_invalid_namespace

    # ------------------------------------------------------------ what informers hand in

    def enqueue(self, event: GraphEvent) -> None:
        self.graph_changes.add(event)

    def enqueue_virtual_delete(self, identity: ObjectReference) -> None:
        """The API says the object is not there: its node goes through the graph as if deleted."""
        self.graph_changes.add(GraphEvent("delete", ObjectState(identity), virtual=True))

    # ------------------------------------------------------------ the graph

    def _add_dependent_to_owners(self, node: Node, owners: Iterable[OwnerRef]) -> None:
        """Kubernetes' addDependentToOwners: a virtual node for an owner not in the graph yet (the
        collector asks the API about it), and the dependent looked at when its reference may be
        wrong (another namespace, other coordinates than the owner seen)."""
        potentially_invalid = False
        for ref in owners:
            owner = self.uid_to_node.get(ref.uid)
            created = owner is None
            if owner is None:
                owner = Node(ref.coordinates(node.identity.namespace), virtual=True)
                self.uid_to_node[ref.uid] = owner
            owner.dependents.add(node)
            if created:
                self.attempt_to_delete.add(owner)
            elif not potentially_invalid:
                namespaced = bool(owner.identity.namespace)
                if namespaced and owner.identity.namespace != node.identity.namespace:
                    if not owner.virtual:
                        self._report_invalid_namespace(node, ref)
                    potentially_invalid = True
                elif not ref.matches(owner.identity):
                    potentially_invalid = True
                elif not namespaced and owner.identity.namespace != node.identity.namespace and owner.virtual:
                    potentially_invalid = True
        if potentially_invalid:
            self.attempt_to_delete.add(node)

    def _remove_dependent_from_owners(self, node: Node, owners: Iterable[OwnerRef]) -> None:
        for ref in owners:
            owner = self.uid_to_node.get(ref.uid)
            if owner is not None:
                owner.dependents.discard(node)

    def _unblocked_owners_to_delete_queue(self, removed: list[OwnerRef],
                                          changed: list[tuple[OwnerRef, OwnerRef]]) -> None:
        """A blocking reference removed or made non-blocking: its owner, if waiting for its
        dependents, may be done now."""
        uids = [r.uid for r in removed if r.blocks] + [new.uid for old, new in changed if old.blocks and not new.blocks]
        for uid in uids:
            owner = self.uid_to_node.get(uid)
            if owner is not None:
                self.attempt_to_delete.add(owner)

    def _process_transitions(self, old: ObjectState | None, new: ObjectState, node: Node) -> None:
        """An owner whose deletion starts with the orphan finalizer goes to attempt_to_orphan; one
        whose deletion starts with foregroundDeletion is marked and goes, with every dependent,
        to attempt_to_delete."""
        if _starts_with(old, new, FINALIZER_ORPHAN):
            self.attempt_to_orphan.add(node)
            return
        if _starts_with(old, new, FINALIZER_FOREGROUND):
            node.deleting_dependents = True
            for dep in list(node.dependents):
                self.attempt_to_delete.add(dep)
            self.attempt_to_delete.add(node)

    def process(self, event: GraphEvent) -> None:
        """Kubernetes' processGraphChanges for one event."""
        state = event.state
        uid = state.identity.uid
        existing = self.uid_to_node.get(uid)
        if existing is not None and not event.virtual and existing.virtual:
            # A virtual node observed through an informer at last: its real identity replaces the
            # one its dependents guessed, and those that guessed otherwise are looked at again.
            if state.identity != existing.identity:
                _, invalid = partition_dependents(existing.dependents, state.identity)
                for dep in invalid:
                    if state.identity.namespace and dep.identity.namespace != state.identity.namespace:
                        ref = next((r for r in dep.owners if r.uid == uid), None)
                        if ref is not None:
                            self._report_invalid_namespace(dep, ref)
                    self.attempt_to_delete.add(dep)
                existing.identity = state.identity
            existing.virtual = False
        if event.type in ("add", "update") and existing is None:
            node = Node(state.identity, state.owners, being_deleted=state.being_deleted,
                        deleting_dependents=state.deleting_with(FINALIZER_FOREGROUND))
            self.uid_to_node[uid] = node
            self._add_dependent_to_owners(node, node.owners)
            self._process_transitions(event.old, state, node)
        elif event.type in ("add", "update"):
            assert existing is not None
            if not event.virtual and (existing.identity.api_version, existing.identity.kind) != (
                    state.identity.api_version, state.identity.kind):
                existing.identity = state.identity
            added, removed, changed = references_diffs(existing.owners, state.owners)
            if added or removed or changed:
                self._unblocked_owners_to_delete_queue(removed, changed)
                existing.owners = state.owners
                self._add_dependent_to_owners(existing, added)
                self._remove_dependent_from_owners(existing, removed)
            if state.being_deleted:
                existing.being_deleted = True
            self._process_transitions(event.old, state, existing)
        elif existing is not None:  # delete
            self._process_delete(event, existing)

    def _process_delete(self, event: GraphEvent, existing: Node) -> None:
        deleted = event.state.identity
        remove = True
        if event.virtual:
            if existing.virtual:
                # Not sure of a virtual node's coordinates: dependents that name the uid otherwise
                # keep it in the graph, under one of their identities.
                matching, nonmatching = partition_dependents(existing.dependents, deleted)
                if nonmatching:
                    remove = False
                    if matching:
                        self.absent_owners.add(deleted)
                        for dep in matching:
                            self.attempt_to_delete.add(dep)
                    if existing.identity == deleted:
                        replacement = alternate_owner_identity(nonmatching, deleted)
                        if replacement is not None:
                            existing.identity = replacement
                            self.attempt_to_delete.add_rate_limited(existing)
            elif existing.identity != deleted:
                # The object seen through the informer is not the one found absent: keep it, and
                # look at the dependents that named the absent one.
                remove = False
                matching, _ = partition_dependents(existing.dependents, deleted)
                if matching:
                    self.absent_owners.add(deleted)
                    for dep in matching:
                        self.attempt_to_delete.add(dep)
        if not remove:
            return
        self.uid_to_node.pop(existing.identity.uid, None)
        self._remove_dependent_from_owners(existing, existing.owners)
        if existing.dependents:
            self.absent_owners.add(deleted)
        for dep in list(existing.dependents):
            self.attempt_to_delete.add(dep)
        for ref in existing.owners:
            owner = self.uid_to_node.get(ref.uid)
            if owner is not None and owner.deleting_dependents:
                self.attempt_to_delete.add(owner)  # perhaps its last blocking dependent


def _starts_with(old: ObjectState | None, new: ObjectState, finalizer: str) -> bool:
    """Kubernetes' deletionStartsWithFinalizer: being deleted with ``finalizer`` now, not before."""
    if not new.deleting_with(finalizer):
        return False
    return old is None or not old.deleting_with(finalizer)


class RestMappingError(Exception):
    """An ownerReference names an apiVersion/kind kplane does not serve (retried: it may be a typo
    or a kind not yet served, as Kubernetes' restMappingError)."""


class _VirtualDeleteEnqueued(Exception):
    """The item is not in the API: a virtual delete event went on graph_changes instead."""


class NotObservedYet(Exception):
    """A virtual node the API has but no informer delivered yet: looked at again later (Kubernetes
    requeues it so that a node added and removed while a watch was down cannot stay for ever)."""


class OrphaningFailed(Exception):
    """Some dependents of an orphaning owner could not be patched: the owner is looked at again."""


class _NamespacedOwnerOfClusterScopedObject(Exception):
    """A cluster-scoped object refers to a namespaced owner: no retry makes that valid."""


def kind_of(api_version: str, kind: str) -> Kind[Message, Message]:
    try:
        return kinds.for_api_kind(api_version, kind)
    except kinds.UnknownKindError:
        raise RestMappingError(f'unable to map {api_version}/{kind} to a resource kplane serves') from None


class GarbageCollector(Controller[Node]):
    """kube-controller-manager's garbagecollector: ``queue`` is attempt_to_delete."""

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
