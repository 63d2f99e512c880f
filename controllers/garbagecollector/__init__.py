"""The garbage collector (Kubernetes' pkg/controller/garbagecollector).

Objects name their owners in ``metadata.ownerReferences``; the collector deletes an object whose
owners are all gone, and carries out the propagation policy of an owner's deletion
(docs/controller-manager.md "Garbage collector"). Three parts, as in Kubernetes:

- ``GraphBuilder`` (``graph_builder.py``): the graph of owners and dependents by uid
  (``graph.py``), whose changes put what may be garbage on the attempt queues;
- ``GarbageCollector`` (``garbagecollector.py``): the propagation policies, and the workers that
  read the live object and its owners from the API before they delete or patch anything;
- ``AbsentOwnerCache`` (``uid_cache.py``): owners found absent.

``errors.py`` holds the errors that make a worker look at an item again later.
"""

from controllers.garbagecollector.errors import NotObservedYet, OrphaningFailed, RestMappingError
from controllers.garbagecollector.garbagecollector import GarbageCollector
from controllers.garbagecollector.graph import Node, ObjectReference, OwnerRef
from controllers.garbagecollector.graph_builder import (
    GraphBuilder,
    GraphEvent,
    ObjectState,
    alternate_owner_identity,
    partition_dependents,
    references_diffs,
)
from controllers.garbagecollector.uid_cache import AbsentOwnerCache

__all__ = [
    "AbsentOwnerCache",
    "GarbageCollector",
    "GraphBuilder",
    "GraphEvent",
    "Node",
    "NotObservedYet",
    "ObjectReference",
    "ObjectState",
    "OrphaningFailed",
    "OwnerRef",
    "RestMappingError",
    "alternate_owner_identity",
    "partition_dependents",
    "references_diffs",
]
