"""What a controller wrote that its own informer has not shown it yet: read-your-writes for a
controller that acts on a cache.

The Deployment controller sizes ReplicaSets from its ReplicaSet informer. Its write of one sync
(a ReplicaSet scaled up, or created) reaches that informer a little later, through the watch; a
sync of the same Deployment that runs in between — the next template change, say — reads the
ReplicaSet as it was before and counts room that write already took: the rollout overshoots
replicas + maxSurge (Kubernetes' controller reads its lister the same way). So each write is
recorded with the resourceVersion the API answered, and a sync first asks ``behind``: while a
ReplicaSet the controller wrote is older in the cache than its write (or not in it yet), the sync
is put off; the informer's event of that write enqueues the Deployment again.

A restarted process starts with nothing recorded, which is safe: its informers' first lists are
consistent reads (machinery/informer.py), so they hold every write the dead process made. An
entry is forgotten when the informer shows the write, when the object is deleted, or after
``timeout`` (a watch event lost for good must not hold a controller back for ever).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf.message import Message

from machinery.kinds import object_meta

OWN_WRITES_TIMEOUT = 300.0  # seconds, as Kubernetes' ExpectationsTimeout


@dataclass(frozen=True)
class _Write:
    name: str
    resource_version: int
    at: float  # monotonic


class OwnWrites:
    """Per owner key (a Deployment's ``namespace/name``): the objects written, by uid."""

    def __init__(self, timeout: float = OWN_WRITES_TIMEOUT, clock: Callable[[], float] = time.monotonic):
        self._timeout = timeout
        self._clock = clock
        self._writes: dict[str, dict[str, _Write]] = {}

    def wrote(self, key: str, obj: Message) -> None:
        """``obj`` as the API answered a write of it made for ``key``."""
        meta = object_meta(obj)
        self._writes.setdefault(key, {})[meta.uid] = _Write(meta.name, int(meta.resource_version), self._clock())

    def behind(self, key: str, cached: Iterable[Message]) -> list[str]:
        """The names of the objects written for ``key`` that ``cached`` (what the informer holds of
        them) does not show yet; the writes it shows are forgotten."""
        writes = self._writes.get(key)
        if not writes:
            return []
        seen = {object_meta(o).uid: int(object_meta(o).resource_version or 0) for o in cached}
        now = self._clock()
        for uid, w in list(writes.items()):
            if seen.get(uid, 0) >= w.resource_version or now - w.at > self._timeout:
                del writes[uid]
        if not writes:
            del self._writes[key]
            return []
        return sorted(w.name for w in writes.values())

    def deleted(self, uid: str) -> None:
        """The object is gone: its write will never show."""
        for key, writes in list(self._writes.items()):
            if writes.pop(uid, None) is not None and not writes:
                del self._writes[key]

    def forget(self, key: str) -> None:
        self._writes.pop(key, None)
