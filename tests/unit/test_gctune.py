"""machinery.gctune: the collector's thresholds from KPLANE_GC, and its time as a metric."""

import gc

import pytest
from prometheus_client import REGISTRY

from machinery import gctune


def test_thresholds_default_and_override(monkeypatch):
    monkeypatch.delenv("KPLANE_GC", raising=False)
    assert gctune.thresholds() == gctune.THRESHOLDS
    monkeypatch.setenv("KPLANE_GC", "default")
    assert gctune.thresholds() is None
    monkeypatch.setenv("KPLANE_GC", "5000,20,30")
    assert gctune.thresholds() == (5000, 20, 30)


@pytest.mark.parametrize("raw", ["1,2", "a,b,c", "1,-2,3"])
def test_thresholds_malformed(monkeypatch, raw):
    monkeypatch.setenv("KPLANE_GC", raw)
    with pytest.raises(ValueError):
        gctune.thresholds()


def test_configure_sets_thresholds_and_times_collections(monkeypatch):
    before = gc.get_threshold()
    monkeypatch.setenv("KPLANE_GC", "12345,11,12")
    try:
        gctune.configure()
        gctune.configure()  # idempotent: one callback
        assert gc.get_threshold() == (12345, 11, 12)
        assert gc.callbacks.count(gctune._timed) == 1
        count = REGISTRY.get_sample_value("python_gc_duration_seconds_count", {"generation": "2"}) or 0.0
        gc.collect()
        assert REGISTRY.get_sample_value("python_gc_duration_seconds_count", {"generation": "2"}) == count + 1
        assert REGISTRY.get_sample_value("python_gc_duration_seconds_sum", {"generation": "2"}) >= 0.0
    finally:
        gc.set_threshold(*before)
        gc.callbacks.remove(gctune._timed)
