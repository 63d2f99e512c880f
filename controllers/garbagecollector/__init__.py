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

Three parts, as in Kubernetes. The ``GraphBuilder`` (``graph_builder.py``) follows every kind
kplane serves but Events (Kubernetes' ignored resources) through the shared informers, whose
handlers only put changes on the ``garbage_collector_graph_changes`` queue; one worker takes them
in order and keeps the graph of owners and dependents by uid (``graph.py``). An owner referred to
but not seen yet is a *virtual* node, checked against the API. The graph's changes decide what to
look at: an object whose owner went, an owner waiting for its dependents, a dependent that stopped
blocking. Those go on the ``garbage_collector_attempt_to_delete`` and
``garbage_collector_attempt_to_orphan`` queues, whose workers (``--concurrent-gc-syncs`` each;
``garbagecollector.py``) read the live object and its owners from the API before they delete or
patch anything: the graph says what may be garbage, the API decides. Owners found absent are
remembered (``absent owner cache``, 500 entries; ``uid_cache.py``) so the dependents of one deleted
owner cost one lookup. ``errors.py`` holds the errors that make a worker look at an item again
later.
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
