"""The dependency graph's vocabulary (Kubernetes' garbagecollector graph.go): an object's
coordinates, its ownerReferences as values, and the graph's nodes; the finalizers and propagation
policies the collector carries out."""

from __future__ import annotations

from dataclasses import dataclass, field

from machinery.api import meta_pb2

# The collector's finalizers and DeleteOptions' propagation policies (metav1's names).
FINALIZER_ORPHAN, FINALIZER_FOREGROUND = "orphan", "foregroundDeletion"
ORPHAN, BACKGROUND, FOREGROUND = "Orphan", "Background", "Foreground"


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
