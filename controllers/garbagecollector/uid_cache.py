"""The absent owner cache (Kubernetes' garbagecollector uid_cache.go, ReferenceCache): owners the
API said are gone, so the dependents of one deleted owner cost one lookup."""

from __future__ import annotations

from collections import OrderedDict

from controllers.garbagecollector.graph import ObjectReference

ABSENT_OWNER_CACHE_SIZE = 500  # Kubernetes' NewReferenceCache(500)


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
