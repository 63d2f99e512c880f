"""bench/figures.py and bench/reference.py: a suite's rates and CPU figures in reference units (issue 24
items 5-6).

A CPU figure in ms over the python loop's ref-ms is the figure in "ref"; a rate times 11,000 over the
raw etcd puts/s measured beside it is the rate "on a day when raw etcd makes ~11k puts/s"."""

from __future__ import annotations

from bench import figures, reference

# A machine half as fast for etcd as the basis day, whose python loop takes 4 ms.
SCALE = figures.Scale(ref_ms=4.0, etcd_puts_per_s=5500.0)


def _scheduler_result() -> dict:
    return {"machine": {"cpus": 2}, "nodes": 100, "workloads": {"SchedulingBasic": {
        "measured_pods": 200, "pods_per_s": 100.0, "p50_ms": 600.0, "target_pods_per_s": 300.0, "target_met": False,
        "cpu_ms_per_pod_by_component": {"apiserver": 2.0, "scheduler": 1.0},
        "cpu_ms_per_pod_total": 6.0, "cpu_share_by_component": {"apiserver": 0.5},
        "rss_bytes_by_component": {"apiserver": 80 << 20}}},
        "profile": {"workload": "SchedulingBasic", "pods_per_s_under_profiler": 30.0}}


def test_cpu_per_pod_in_ref_units_and_rates_at_11k_etcd_puts():
    r = _scheduler_result()
    figures.scale(r, SCALE)
    w = r["workloads"]["SchedulingBasic"]
    assert w["cpu_ref_per_pod_by_component"] == {"apiserver": 0.5, "scheduler": 0.25}
    assert w["cpu_ref_per_pod_total"] == 1.5
    assert w["pods_per_s_at_11k"] == 200.0  # 100 pods/s on a day raw etcd made 5,500 puts/s
    # Settings, counts, latencies, shares, memory and profiled reruns are left as they are.
    assert "target_pods_per_s_at_11k" not in w and "p50_ms_at_11k" not in w
    assert set(w) == set(_scheduler_result()["workloads"]["SchedulingBasic"]) | {
        "cpu_ref_per_pod_by_component", "cpu_ref_per_pod_total", "pods_per_s_at_11k"}
    assert r["profile"] == _scheduler_result()["profile"]


def test_api_figures_per_create_and_per_event_in_ref_units():
    r = {"raw_etcd_puts_per_s": 5500.0, "creates_per_s": 1000.0,
         "rest": {"creates": {"grpc_per_s": 1000.0, "grpc_cpu_ms": 0.8, "rest_cpu_ms": 1.0, "cpu_ratio": 1.25},
                  "watch": {"grpc_cpu_us_per_event": 40.0, "rest_cpu_us_per_event": 48.0}},
         "kubelet_like": {"resizes": {"per_s": 20.0}}}
    figures.scale(r, SCALE)
    assert r["creates_per_s_at_11k"] == 2000.0
    assert "raw_etcd_puts_per_s_at_11k" not in r  # etcd is what the rates are scaled by
    assert (r["rest"]["creates"]["grpc_cpu_ref"], r["rest"]["creates"]["rest_cpu_ref"]) == (0.2, 0.25)
    assert "cpu_ratio_at_11k" not in r["rest"]["creates"]
    assert (r["rest"]["watch"]["grpc_cpu_ref_per_event"], r["rest"]["watch"]["rest_cpu_ref_per_event"]) == (0.01, 0.012)
    assert r["kubelet_like"]["resizes"]["per_s_at_11k"] == 40.0


def test_each_scaled_form_points_back_at_its_figure():
    for path in [("workloads", "W", "cpu_ms_per_pod_by_component", "apiserver"), ("cpu_ms_per_resize_total",),
                 ("rest", "creates", "grpc_cpu_ms"), ("watch", "grpc_cpu_us_per_event"), ("resizes", "per_s")]:
        to = figures.scaled_path(path)
        assert to is not None and figures.scaled_of(to) == path
        assert figures.kind(to) is None  # a scaled form is no figure of its own
    assert [figures.kind(p) for p in [("pods_per_s",), ("cpu_ms_per_pod_total",), ("watch", "p99_ms"),
                                      ("rss_bytes_by_component", "etcd"), ("target_pods_per_s",),
                                      ("machine", "cpus"), ("victims",)]] == \
        ["rate", "cpu", "latency", "memory", None, None, None]


def test_summary_line_gives_ms_and_ref_side_by_side():
    r = _scheduler_result()
    w = r["workloads"]["SchedulingBasic"]
    assert figures.cpu_per_op(w, "cpu_ms_per_pod_by_component") == "apiserver 2.0, scheduler 1.0, total 6.0 ms"
    figures.scale(r, SCALE)
    assert figures.cpu_per_op(w, "cpu_ms_per_pod_by_component") == \
        "apiserver 2.0 (0.50 ref), scheduler 1.0 (0.25 ref), total 6.0 ms = 1.50 ref"
    assert figures.at_basis(w, "pods_per_s", "pods/s") == "200.0 pods/s at 11k etcd puts/s"
    assert figures.at_basis(w, "p50_ms", "ms") == ""


def _snapshot(label: str, ref_ms: float, puts: float) -> reference.Snapshot:
    return reference.Snapshot(label, "2026-12-01T00:00:00+00:00", ref_ms, (ref_ms,), puts, (puts,), 1000.0)


def test_a_suite_is_scaled_by_the_snapshots_either_side_of_it():
    before, after = _snapshot("start", 4.0, 10000.0), _snapshot("end", 6.0, 12000.0)
    assert reference.between(before, after) == figures.Scale(ref_ms=5.0, etcd_puts_per_s=11000.0)
    recorded = reference.suite_json(before, after)
    assert (recorded["unit"], recorded["ref_ms"], recorded["etcd_puts_per_s"]) == ("ref-ms", 5.0, 11000.0)
    assert (recorded["before"]["label"], recorded["after"]["label"]) == ("start", "end")
    run = reference.run_json([before, _snapshot("after api", 5.0, 9000.0), after])
    assert (run["start"]["python_ref_ms"], run["end"]["python_ref_ms"], len(run["snapshots"])) == (4.0, 6.0, 3)


def test_python_loop_is_the_best_of_its_repeats():
    best, repeats = reference.python_loop_ms()
    assert len(repeats) == reference.REPEATS and best == min(repeats) > 0
