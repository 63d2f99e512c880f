"""PrioritySort: the order of the active queue (kube-scheduler's queuesort plugin).

The one QueueSort plugin of the default profile: a pod with a higher ``spec.priority`` (set by
admission from its PriorityClass; none counts as 0) is tried first, and among equal priorities
the one queued earlier (``QueuedPodInfo.timestamp``) goes first.

It rejects nothing, so it registers no cluster events.
"""

from __future__ import annotations

from typing import Any

from scheduler.framework.plugin_args import no_args
from scheduler.framework.pod_info import QueuedPodInfo, pod_priority

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` goes before ``b``: higher priority first, then the earlier timestamp."""
        pa, pb = pod_priority(a.pod), pod_priority(b.pod)
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def new(args: Any, handle: Any) -> PrioritySort:
    """PrioritySort takes no args: kube-scheduler has no PrioritySortArgs, and any given are an error."""
    no_args(NAME, args)
    return PrioritySort()
