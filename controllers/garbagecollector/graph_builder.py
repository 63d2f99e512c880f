"""The graph builder (Kubernetes' garbagecollector graph_builder.go): the events the informers
hand in, and the one worker's changes to the graph of owners and dependents, which put what may
be garbage on the attempt_to_delete and attempt_to_orphan queues."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf.message import Message

from controllers.garbagecollector.graph import (
    FINALIZER_FOREGROUND,
    FINALIZER_ORPHAN,
    Node,
    ObjectReference,
    OwnerRef,
)
from controllers.garbagecollector.uid_cache import AbsentOwnerCache
from machinery.kinds import Kind, object_meta
from machinery.workqueue.rate_limiting import RateLimitingQueue


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
    (the graph_changes worker), which puts what may be garbage on the attempt queues.

    It follows every kind kplane serves but Events (Kubernetes' ignored resources) through the
    shared informers, whose handlers only put changes on the ``garbage_collector_graph_changes``
    queue; one worker takes them in order and keeps the graph of owners and dependents by uid
    (``graph.py``). An owner referred to but not seen yet is a *virtual* node, checked against the
    API. The graph's changes decide what to look at: an object whose owner went, an owner waiting for
    its dependents, a dependent that stopped blocking. Those go on the
    ``garbage_collector_attempt_to_delete`` and ``garbage_collector_attempt_to_orphan`` queues."""

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
