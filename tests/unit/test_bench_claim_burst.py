"""bench/scheduler.py's ClaimBurst figures: the median and spread of five tries, the on ÷ off ratio
of the medians, and the KEP-6132 target read off them (on ≤ 0.5 of off at the largest N, falling)."""

from __future__ import annotations

from bench import scheduler


def _try(scheduler_ms: float, pods_per_s: float, calls: float = 1.0) -> dict:
    return {"cpu_ms_per_pod_by_component": {"scheduler": scheduler_ms, "apiserver": 9.0}, "pods_per_s": pods_per_s,
            "claim_hint_calls_per_claim_event": calls}


def _size(off_ms: list[float], on_ms: list[float]) -> dict:
    size: dict = {"off": {**scheduler._spread([_try(m, 100.0, 500.0) for m in off_ms]),
                          "tries": [_try(m, 100.0, 500.0) for m in off_ms]},
                  "on": {**scheduler._spread([_try(m, 200.0, 0.0) for m in on_ms]),
                         "tries": [_try(m, 200.0, 0.0) for m in on_ms]}}
    size["ratio_on_off"] = {k: round(size["on"]["median"][k] / size["off"]["median"][k], 3)
                            for k in size["on"]["median"]}
    return size


def test_spread_is_the_median_least_and_most_of_the_scheduler_cpu_and_the_rate():
    s = scheduler._spread([_try(5.0, 90.0), _try(9.0, 70.0), _try(6.0, 80.0), _try(30.0, 10.0), _try(7.0, 85.0)])
    assert s["median"] == {"scheduler_cpu_ms": 7.0, "pods_per_s": 80.0}
    assert s["min"] == {"scheduler_cpu_ms": 5.0, "pods_per_s": 10.0}
    assert s["max"] == {"scheduler_cpu_ms": 30.0, "pods_per_s": 90.0}


def _summary(sizes: dict[str, dict]) -> str:
    return "\n".join(scheduler._claim_burst_summary("ClaimBurst", {"nodes": 100, "devices_per_node": 50, "runs": 5,
                                                                    "burst": sizes}))


def test_the_target_is_met_when_the_ratio_is_at_most_half_at_the_largest_n_and_falls():
    text = _summary({"500": _size([8, 8, 9], [6, 6, 6]), "2000": _size([14, 15, 16], [6, 6, 6]),
                     "5000": _size([30, 31, 32], [6, 6, 7])})
    assert "0.75" in text and "0.40" in text and "0.19" in text
    assert text.endswith("met")


def test_the_target_is_missed_when_the_ratio_stays_above_half_or_does_not_fall():
    above = _summary({"500": _size([8], [6]), "5000": _size([10], [6])})  # 0.75 then 0.6
    rising = _summary({"500": _size([20], [6]), "2000": _size([12], [6]), "5000": _size([13], [6])})
    assert above.endswith("MISSED") and rising.endswith("MISSED")
