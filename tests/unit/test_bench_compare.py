"""``python -m bench --compare BASE_DIR [HEAD_DIR]`` (bench/compare.py) on two small hand-written runs:
head / base for every figure both runs have, the same ratio in reference units where both have
those, the figures only one run has, and one line of error for a directory without results."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import compare
from bench.__main__ import main


def _run(directory: Path, suites: dict[str, dict], ref_ms: float, puts: float) -> Path:
    directory.mkdir()
    for name, result in suites.items():
        (directory / f"{name}.json").write_text(json.dumps(result))
    snap = {"python_ref_ms": ref_ms, "etcd_puts_per_s": puts, "etcd_sequential_puts_per_s": 1000.0}
    (directory / "reference.json").write_text(json.dumps({"unit": "ref-ms", "start": snap, "end": snap}))
    return directory


BASE = {"machine": {"cpus": 2}, "nodes": 100, "workloads": {"SchedulingBasic": {
    "measured_pods": 200, "pods_per_s": 200.0, "pods_per_s_at_11k": 400.0, "p50_ms": 500.0,
    "target_pods_per_s": 300.0, "target_met": False,
    "cpu_ms_per_pod_by_component": {"apiserver": 4.0, "scheduler": 2.0},
    "cpu_ref_per_pod_by_component": {"apiserver": 1.0, "scheduler": 0.5}}}}
# The same code on a day twice as fast: twice the pods/s and half the CPU as measured, the same in
# reference units; the scheduler's CPU not recorded, a p99 recorded only here.
HEAD = {"machine": {"cpus": 2}, "nodes": 100, "workloads": {"SchedulingBasic": {
    "measured_pods": 200, "pods_per_s": 400.0, "pods_per_s_at_11k": 400.0, "p50_ms": 250.0, "p99_ms": 900.0,
    "target_pods_per_s": 300.0, "target_met": True,
    "cpu_ms_per_pod_by_component": {"apiserver": 2.0}, "cpu_ref_per_pod_by_component": {"apiserver": 1.0}}}}
API = {"raw_etcd_puts_per_s": 5000.0, "creates_per_s": 1000.0}


def test_ratios_of_the_figures_both_runs_have():
    c = compare.compare_suite(BASE, HEAD)
    rows = {r.figure: (r.base, r.head, r.ratio, r.scaled_ratio) for r in c.rows}
    assert rows == {
        "workloads.SchedulingBasic.pods_per_s": (200.0, 400.0, 2.0, 1.0),
        "workloads.SchedulingBasic.p50_ms": (500.0, 250.0, 0.5, None),  # a latency has no scaled form
        "workloads.SchedulingBasic.cpu_ms_per_pod_by_component.apiserver": (4.0, 2.0, 0.5, 1.0),
    }
    assert c.only_base == ["workloads.SchedulingBasic.cpu_ms_per_pod_by_component.scheduler"]
    assert c.only_head == ["workloads.SchedulingBasic.p99_ms"]


def test_report_shows_both_references_then_each_suite(tmp_path):
    base = _run(tmp_path / "base", {"scheduler": BASE, "api": API}, ref_ms=8.0, puts=5500.0)
    head = _run(tmp_path / "head", {"scheduler": HEAD}, ref_ms=4.0, puts=11000.0)
    lines = compare.report(base, head).splitlines()
    assert lines.index("== api: only in base") < lines.index("== scheduler ==")
    ref = next(line for line in lines if "python loop (ref-ms), start" in line)
    assert ref.split()[-3:] == ["8.00", "4.00", "0.50"]
    puts = next(line for line in lines if "64 concurrent, end" in line)
    assert puts.split()[-3:] == ["5500", "11000", "2.00"]
    row = next(line for line in lines if line.strip().startswith("workloads.SchedulingBasic.pods_per_s"))
    assert row.split()[1:] == ["200", "400", "2.00", "1.00"]
    header = lines[lines.index("== scheduler ==") + 1]
    assert header.index("head/base") + len("head/base") == row.index("2.00") + len("2.00")  # aligned columns
    assert any("only in head: workloads.SchedulingBasic.p99_ms" in line for line in lines)


def test_compare_of_a_directory_without_results_is_one_line_and_exit_2(tmp_path, capsys):
    head = _run(tmp_path / "head", {"scheduler": HEAD}, ref_ms=4.0, puts=11000.0)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "reference.json").write_text("{}")  # a reference alone is no result
    with pytest.raises(compare.NoResults):
        compare.load(empty)
    for args in ([str(empty), str(head)], [str(head), str(tmp_path / "missing")]):
        assert main(["--compare", *args]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.splitlines()) == 1 and "no bench results" in err
    assert main(["--compare", str(head), str(head)]) == 0
    assert "== scheduler ==" in capsys.readouterr().out


def test_head_defaults_to_out(tmp_path, capsys):
    base = _run(tmp_path / "base", {"scheduler": BASE}, ref_ms=8.0, puts=5500.0)
    head = _run(tmp_path / "head", {"scheduler": HEAD}, ref_ms=4.0, puts=11000.0)
    assert main(["--compare", str(base), "--out", str(head)]) == 0
    assert f"base {base}, head {head}" in capsys.readouterr().out
