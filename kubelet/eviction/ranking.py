"""The order in which pods are evicted under memory pressure (Kubernetes' ``rankMemoryPressure``).

The documentation's order, as three comparisons applied in turn:

1. ``exceeds_memory_requests``: pods whose memory usage exceeds their request come first
   (BestEffort pods request nothing, so any usage exceeds it); a pod with no stats at all comes
   before both;
2. ``by_priority``: lower ``spec.priority`` first;
3. ``by_memory_above_request``: larger ``usage − request`` first.

So BestEffort and Burstable pods above their requests go first, by priority and then by how far
above; Guaranteed pods and Burstable pods below their requests go last, by priority (and then by
usage relative to request). Ties keep the input order.
"""

from __future__ import annotations

from functools import cmp_to_key
from typing import Callable, Iterable

from kubelet.eviction import pods as podinfo
from kubelet.eviction.signals import PodStats
from machinery.api import core_pb2

StatsFunc = Callable[[core_pb2.Pod], PodStats | None]
Compare = Callable[[core_pb2.Pod, core_pb2.Pod], int]  # < 0: the first is evicted before the second


def _cmp_bool(a: bool, b: bool) -> int:
    """True before False."""
    return 0 if a == b else (-1 if a else 1)


def exceeds_memory_requests(stats: StatsFunc) -> Compare:
    def cmp(p1: core_pb2.Pod, p2: core_pb2.Pod) -> int:
        s1, s2 = stats(p1), stats(p2)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)  # no stats: evict that one first
        return _cmp_bool(s1.working_set > podinfo.memory_request(p1), s2.working_set > podinfo.memory_request(p2))
    return cmp


def by_priority(p1: core_pb2.Pod, p2: core_pb2.Pod) -> int:
    a, b = podinfo.priority(p1), podinfo.priority(p2)
    return (a > b) - (a < b)


def by_memory_above_request(stats: StatsFunc) -> Compare:
    def cmp(p1: core_pb2.Pod, p2: core_pb2.Pod) -> int:
        s1, s2 = stats(p1), stats(p2)
        if s1 is None or s2 is None:
            return _cmp_bool(s1 is None, s2 is None)
        a = s1.working_set - podinfo.memory_request(p1)
        b = s2.working_set - podinfo.memory_request(p2)
        return (b > a) - (b < a)  # the larger consumer first
    return cmp


def ordered_by(*comparisons: Compare) -> Callable[[Iterable[core_pb2.Pod]], list[core_pb2.Pod]]:
    """A sort by the comparisons in turn: the first that tells two pods apart decides."""
    def cmp(p1: core_pb2.Pod, p2: core_pb2.Pod) -> int:
        for c in comparisons:
            r = c(p1, p2)
            if r:
                return r
        return 0
    return lambda pods: sorted(pods, key=cmp_to_key(cmp))


def rank_memory_pressure(pods: Iterable[core_pb2.Pod], stats: StatsFunc) -> list[core_pb2.Pod]:
    """``pods`` in eviction order for memory pressure, the first to evict first."""
    return ordered_by(exceeds_memory_requests(stats), by_priority, by_memory_above_request(stats))(pods)
