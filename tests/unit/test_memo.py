"""machinery/memo.py: bounded, named memos, exported at scrape time."""

from __future__ import annotations

from functools import lru_cache

import pytest
from prometheus_client import REGISTRY

from machinery import memo
from machinery.memo import Memo


def _sample(name: str, **labels: str) -> float | None:
    return REGISTRY.get_sample_value(name, labels)


def test_a_memo_counts_its_lookups_and_empties_when_full():
    m: Memo[str, int] = Memo("test.small", 2)
    assert m.get("a") is None
    m.put("a", 1)
    m.put("b", 2)
    assert m.get("a") == 1 and len(m) == 2
    m.put("b", 3)  # a known key does not overflow it
    assert len(m) == 2 and m.clears == 0
    m.put("c", 4)
    assert len(m) == 1 and m.get("a") is None and m.clears == 1
    assert m.setdefault("c", 9) == 4 and m.setdefault("d", 5) == 5
    assert _sample("kplane_memo_lookups_total", memo="test.small", result="hit") == 1
    assert _sample("kplane_memo_lookups_total", memo="test.small", result="miss") == 2
    assert _sample("kplane_memo_entries", memo="test.small") == 2
    assert _sample("kplane_memo_capacity", memo="test.small") == 2
    assert _sample("kplane_memo_clears_total", memo="test.small") == 1


def test_a_name_is_one_memo():
    Memo("test.once", 1)
    with pytest.raises(ValueError):
        Memo("test.once", 1)


def test_lru_caches_are_exported_too():
    @lru_cache(maxsize=8)
    def square(x: int) -> int:
        return x * x

    memo.track("test.square", square)
    square(2), square(2), square(3)
    assert _sample("kplane_memo_lookups_total", memo="test.square", result="hit") == 1
    assert _sample("kplane_memo_entries", memo="test.square") == 2
    assert _sample("kplane_memo_capacity", memo="test.square") == 8
    with pytest.raises(TypeError):
        memo.track("test.plain", lambda x: x)


def test_the_apiservers_memos_are_all_registered():
    import apiserver.defaults  # noqa: F401
    import apiserver.fieldmanager.manager  # noqa: F401
    import apiserver.validation.pod  # noqa: F401
    names = {s.labels["memo"] for m in REGISTRY.collect() if m.name == "kplane_memo_entries" for s in m.samples}
    assert {"apiserver.defaults.container_merges", "apiserver.defaults.pod_spec_merges",
            "apiserver.validation.valid_pod_specs", "apiserver.fieldmanager.parsed_fields",
            "apiserver.fieldmanager.created_fields", "apiserver.fieldmanager.key_texts",
            "apiserver.defaults.normalized_quantity"} <= names
