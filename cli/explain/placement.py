"""Where a log record goes among the history's revisions — by wall clock, unless it names its
cause: a ``pod_requeued`` record carries the resourceVersion of the change that moved the pod
(``trigger_rv``) and goes right after that revision (``story.build``).

A log record has a wall time (its ``ts``, to the microsecond); a revision has none of its own,
but the object versions carry times: ``creationTimestamp``, ``deletionTimestamp``, each field
manager's last change (``managedFields[].time``), an Event's ``firstTimestamp`` /
``lastTimestamp``, a pod condition's ``lastTransitionTime`` — all to the second, and the latest of
them is when that version was written (or just before). A record goes after the last revision
whose time is not after the record's: placed by wall clock, so a record written within the same
second as later revisions comes after them too, and clocks of different machines would have to
agree.
"""

from __future__ import annotations

import bisect
from datetime import datetime

from google.protobuf.message import Message

from machinery import timeutil
from machinery.api import core_pb2
from machinery.kinds import object_meta


def entry_time(obj: Message) -> datetime | None:
    """The wall time one object version carries: the latest of the times above (None: none)."""
    meta = object_meta(obj)
    texts = [meta.creation_timestamp, meta.deletion_timestamp, *(e.time for e in meta.managed_fields)]
    if isinstance(obj, core_pb2.Event):
        texts += [obj.first_timestamp, obj.last_timestamp, obj.event_time]
    elif isinstance(obj, core_pb2.Pod):
        texts += [c.last_transition_time for c in obj.status.conditions]
    times = [t for t in (_parse(x) for x in texts if x) if t is not None]
    return max(times) if times else None


def _parse(text: str) -> datetime | None:
    try:
        return timeutil.parse(text)
    except ValueError:
        return None


class HistoryClock:
    """The history's revisions and their wall times, fed in revision order (a version that
    carries no time, or an earlier one, keeps the time before it: the clock never goes back)."""

    def __init__(self) -> None:
        self._revs: list[int] = []
        self._times: list[datetime] = []

    def observe(self, rev: int, obj: Message) -> None:
        t = entry_time(obj)
        if t is None:
            return
        if self._times and t < self._times[-1]:
            t = self._times[-1]
        self._revs.append(rev)
        self._times.append(t)

    def rev_at(self, when: datetime) -> int:
        """The last revision whose time is not after ``when`` (0: before them all)."""
        i = bisect.bisect_right(self._times, when)
        return self._revs[i - 1] if i else 0
