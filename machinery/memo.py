"""Bounded memos of pure functions' results, each named, sized and measured.

The apiserver remembers work that objects made alike repeat (the pods of one workload share
their spec, so their defaulting, validation and managed fields are the same work). Each such
memory is a ``Memo`` with a name and a capacity — cleared when full, which costs only recomputing
— or a ``functools.lru_cache`` registered with ``track``; nothing is hidden in a bare module dict.
Every one is exported at scrape time (counted in plain integers, so a lookup costs no metric
call):

- ``kplane_memo_lookups_total{memo, result="hit"|"miss"}``
- ``kplane_memo_entries{memo}`` and ``kplane_memo_capacity{memo}``
- ``kplane_memo_clears_total{memo}`` (a Memo emptied because it was full)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Hashable, TypeVar

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MEMOS: dict[str, "Memo[Any, Any]"] = {}
_LRU: dict[str, Any] = {}  # name -> an lru_cache-wrapped function


class Memo(Generic[K, V]):
    """At most ``capacity`` remembered results; emptied when full (the keys of a memo are the
    shapes of the objects a cluster is made of: few, and re-learnt at once)."""

    def __init__(self, name: str, capacity: int):
        if name in _MEMOS:
            raise ValueError(f"memo {name!r} exists already")
        self.name, self.capacity = name, capacity
        self._entries: dict[K, V] = {}
        self.hits = self.misses = self.clears = 0
        _MEMOS[name] = self

    def get(self, key: K) -> V | None:
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: K, value: V) -> None:
        if len(self._entries) >= self.capacity and key not in self._entries:
            self._entries.clear()
            self.clears += 1
        self._entries[key] = value

    def setdefault(self, key: K, value: V) -> V:
        """Remember ``value`` unless ``key`` is known (no lookup counted: a result met on the way)."""
        known = self._entries.get(key)
        if known is not None:
            return known
        self.put(key, value)
        return value

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)


def track(name: str, fn: Callable[..., Any]) -> None:
    """Export an ``lru_cache``-wrapped function's ``cache_info()`` as the memo ``name``."""
    if not hasattr(fn, "cache_info"):
        raise TypeError(f"{name}: not an lru_cache function")
    _LRU[name] = fn


class _Collector:
    def collect(self) -> Iterator[Metric]:
        lookups = CounterMetricFamily("kplane_memo_lookups", "Lookups in a memo of the apiserver's, by result.",
                                      labels=["memo", "result"])
        entries = GaugeMetricFamily("kplane_memo_entries", "Results a memo holds.", labels=["memo"])
        capacity = GaugeMetricFamily("kplane_memo_capacity", "Results a memo holds at most (0: no bound).",
                                     labels=["memo"])
        clears = CounterMetricFamily("kplane_memo_clears", "Times a memo was emptied because it was full.",
                                     labels=["memo"])
        for name, m in sorted(_MEMOS.items()):
            lookups.add_metric([name, "hit"], m.hits)
            lookups.add_metric([name, "miss"], m.misses)
            entries.add_metric([name], len(m))
            capacity.add_metric([name], m.capacity)
            clears.add_metric([name], m.clears)
        for name, fn in sorted(_LRU.items()):
            info = fn.cache_info()
            lookups.add_metric([name, "hit"], info.hits)
            lookups.add_metric([name, "miss"], info.misses)
            entries.add_metric([name], info.currsize)
            capacity.add_metric([name], info.maxsize or 0)
        yield from (lookups, entries, capacity, clears)


REGISTRY.register(_Collector())
