"""Which pods a controller deletes first: Kubernetes' ActivePodsWithRanks (pkg/controller).

- ``pods_to_delete``: the ReplicaSet controller's getPodsToDelete, the pods to delete first;
- ``rank_by_related_pods_on_node``: each pod's rank, the related pods on its node;
- ``sort_for_deletion`` / ``_less`` / ``_compare_times``: the rules that order the pods;
- ``is_pod_active``, ``is_pod_terminating``, ``is_pod_ready``, ``is_pod_available``: also here,
  the pod predicates every controller shares.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from machinery import timeutil
from machinery.api import core_pb2
from machinery.disruption import is_pod_ready

__all__ = ["DELETION_COST_ANNOTATION", "deletion_cost", "is_pod_active", "is_pod_available", "is_pod_ready",
           "is_pod_terminating", "pods_to_delete", "rank_by_related_pods_on_node", "ready_since", "sort_for_deletion"]

DELETION_COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}  # any other phase counts as Pending (Go's zero)
_INT32 = re.compile(r"^[+-]?[0-9]+$")


def is_pod_active(pod: core_pb2.Pod) -> bool:
    """Kubernetes' IsPodActive: not Succeeded, not Failed, not being deleted."""
    return pod.status.phase not in ("Succeeded", "Failed") and not pod.metadata.deletion_timestamp


def is_pod_terminating(pod: core_pb2.Pod) -> bool:
    """Kubernetes' IsPodTerminating: being deleted and not yet Succeeded or Failed."""
    return pod.status.phase not in ("Succeeded", "Failed") and bool(pod.metadata.deletion_timestamp)


def ready_since(pod: core_pb2.Pod) -> datetime | None:
    """When the pod last became Ready (its Ready condition's lastTransitionTime); None if it is not Ready."""
    for c in pod.status.conditions:
        if c.type == "Ready" and c.status == "True":
            return timeutil.parse(c.last_transition_time)
    return None


def is_pod_available(pod: core_pb2.Pod, min_ready_seconds: int, now: datetime) -> bool:
    """Kubernetes' IsPodAvailable: Ready, and for ``minReadySeconds`` already (strictly before ``now``)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = ready_since(pod)
    return since is not None and since.timestamp() + min_ready_seconds < now.timestamp()


def deletion_cost(pod: core_pb2.Pod) -> int:
    """The pod-deletion-cost annotation as an int32; 0 when absent or not one (Kubernetes ignores it then)."""
    text = pod.metadata.annotations.get(DELETION_COST_ANNOTATION, "")
    if not _INT32.match(text):
        return 0
    value = int(text)
    return value if -(2**31) <= value < 2**31 else 0


def _max_restarts(pod: core_pb2.Pod) -> int:
    return max((cs.restart_count for cs in pod.status.container_statuses), default=0)


def _nanos(t: datetime | None) -> int | None:
    return None if t is None else int(t.timestamp()) * 10**9 + t.microsecond * 1000


def _log_rank(t: int, now: int) -> int:
    """floor(log2(now - t)) in nanoseconds, -1 for a time not in the past (logarithmicRankDiff)."""
    d = now - t
    return int(math.log2(d)) if d > 0 else -1


@dataclass(frozen=True)
class _Ranked:
    pod: core_pb2.Pod
    rank: int


def _compare_times(a: int | None, b: int | None, now: int | None, uid_a: str, uid_b: str) -> int:
    """-1 when the pod of time ``a`` goes first: newer first, an unset time before any, on a log
    scale when ``now`` is known (ties by uid). Only called when ``a != b``.

    The times of rules 6 and 8 of ``_less`` are compared on a logarithmic scale from ``now``
    (LogarithmicScaleDown, on by default since Kubernetes 1.22): ``floor(log2(nanoseconds ago))``,
    so pods of about the same age tie and are ordered by uid, a pseudo-random spread instead of
    always the very newest. A time that is unset comes first.
    """
    if a is None or b is None or now is None or a == 0 or b == 0:
        if a is None or a == 0:
            return -1
        if b is None or b == 0:
            return 1
        return -1 if a > b else 1
    diff = _log_rank(a, now) - _log_rank(b, now)
    if diff == 0:
        return -1 if uid_a < uid_b else (1 if uid_a > uid_b else 0)
    return -1 if diff < 0 else 1


def _less(x: _Ranked, y: _Ranked, now: int | None) -> bool:
    """ActivePodsWithRanks.Less: True when ``x`` should be deleted before ``y``.

    Rule by rule, the first rule that tells two pods apart deciding:

    1. unassigned before assigned (no ``spec.nodeName``);
    2. Pending before Unknown before Running;
    3. not Ready before Ready;
    4. the lower ``controller.kubernetes.io/pod-deletion-cost`` annotation first (PodDeletionCost, GA);
    5. the higher rank first (doubled-up pods go first, spreading what is left);
    6. both Ready: the one Ready for less time first;
    7. the one with more container restarts first;
    8. the newer first (creation time).

    Times in 6 and 8 are compared by ``_compare_times``.
    """
    a, b = x.pod, y.pod
    if a.spec.node_name != b.spec.node_name and (not a.spec.node_name or not b.spec.node_name):
        return not a.spec.node_name
    pa, pb = _PHASE_ORDINAL.get(a.status.phase, 0), _PHASE_ORDINAL.get(b.status.phase, 0)
    if pa != pb:
        return pa < pb
    ra, rb = is_pod_ready(a), is_pod_ready(b)
    if ra != rb:
        return not ra
    ca, cb = deletion_cost(a), deletion_cost(b)
    if ca != cb:
        return ca < cb
    if x.rank != y.rank:
        return x.rank > y.rank
    if ra and rb:
        ta, tb = _nanos(ready_since(a)) or 0, _nanos(ready_since(b)) or 0
        if ta != tb:
            return _compare_times(ta, tb, now, a.metadata.uid, b.metadata.uid) < 0
    restarts_a, restarts_b = _max_restarts(a), _max_restarts(b)
    if restarts_a != restarts_b:
        return restarts_a > restarts_b
    created_a = _nanos(timeutil.parse(a.metadata.creation_timestamp)) or 0
    created_b = _nanos(timeutil.parse(b.metadata.creation_timestamp)) or 0
    if created_a != created_b:
        return _compare_times(created_a, created_b, now, a.metadata.uid, b.metadata.uid) < 0
    return False


def rank_by_related_pods_on_node(pods: Sequence[core_pb2.Pod], related: Iterable[core_pb2.Pod]) -> list[int]:
    """getPodsRankedByRelatedPodsOnSameNode: each pod's rank is the number of active related pods
    on its node (unassigned pods share the node "")."""
    on_node: dict[str, int] = {}
    for p in related:
        if is_pod_active(p):
            on_node[p.spec.node_name] = on_node.get(p.spec.node_name, 0) + 1
    return [on_node.get(p.spec.node_name, 0) for p in pods]


def sort_for_deletion(pods: Sequence[core_pb2.Pod], ranks: Sequence[int],
                      now: datetime | None = None) -> list[core_pb2.Pod]:
    """The pods, those to delete first first (ActivePodsWithRanks with LogarithmicScaleDown), by
    the rules of ``_less``. Pods no rule tells apart keep their order. Without ``now`` times are
    compared as they are, not on the logarithmic scale."""
    now_ns = _nanos(now)

    def cmp(x: _Ranked, y: _Ranked) -> int:
        if _less(x, y, now_ns):
            return -1
        if _less(y, x, now_ns):
            return 1
        return 0

    ranked = sorted((_Ranked(p, r) for p, r in zip(pods, ranks, strict=True)), key=functools.cmp_to_key(cmp))
    return [r.pod for r in ranked]


def pods_to_delete(pods: Sequence[core_pb2.Pod], related: Iterable[core_pb2.Pod], count: int,
                   now: datetime) -> list[core_pb2.Pod]:
    """The ReplicaSet controller's getPodsToDelete: the first ``count`` of ``pods`` in deletion
    order, ranked by ``related`` pods on the same node; no ordering when every pod goes.

    Each pod is ranked by how many active pods *related* to it (the pods of every ReplicaSet with
    the same owner, the pod's own included) run on its node (``rank_by_related_pods_on_node``), then
    the pods are ordered so that those best deleted come first (``sort_for_deletion``).
    """
    if count >= len(pods):
        return list(pods)
    return sort_for_deletion(pods, rank_by_related_pods_on_node(pods, related), now)[:count]
