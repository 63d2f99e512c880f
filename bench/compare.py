"""``python -m bench --compare BASE_DIR [HEAD_DIR]``: two runs' figures side by side, head / base.

Each directory holds what one ``python -m bench`` wrote (api.json, kubelet.json, scheduler.json,
reference.json). A figure is a numeric leaf of a suite's JSON, named by its dotted keys
(``workloads.SchedulingBasic.pods_per_s``), that bench/figures.py's ``kind`` calls a rate, a CPU
cost per operation, a latency or memory; the figures both runs have are listed per suite in the
order of the head's JSON, with head / base and, where both runs have the figure's scaled form, the
same ratio in reference units (rates at 11k etcd puts/s, CPU in ref) — the ratio that survives
the machine's speed changing between the runs. The reference workload of both runs comes first.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import figures

SUITES = ("api", "kubelet", "scheduler")
Path_ = tuple[str, ...]


class NoResults(Exception):
    """A directory holds no benchmark results."""


def load(directory: Path) -> dict[str, dict[str, Any]]:
    """Each suite's results in ``directory``, by suite name; NoResults when there are none."""
    found = {s: json.loads((directory / f"{s}.json").read_text()) for s in SUITES
             if (directory / f"{s}.json").is_file()}
    if not found:
        raise NoResults(f"no bench results ({', '.join(f'{s}.json' for s in SUITES)}) in {directory}")
    return found


def flatten(tree: dict[str, Any], path: Path_ = ()) -> dict[Path_, float]:
    """Every numeric leaf of ``tree`` by its path of keys (lists, strings, booleans and nulls left out)."""
    out: dict[Path_, float] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flatten(value, (*path, str(key))))
        elif figures.number(value):
            out[(*path, str(key))] = float(value)
    return out


def _ratio(head: float, base: float) -> float:
    return head / base if base else math.nan


@dataclass(frozen=True)
class Row:
    """One figure of both runs."""
    figure: str
    base: float
    head: float
    ratio: float  # head / base
    scaled_ratio: float | None  # head / base of the scaled forms, when both runs have them


@dataclass(frozen=True)
class SuiteComparison:
    rows: list[Row]
    only_base: list[str]
    only_head: list[str]


def compare_suite(base: dict[str, Any], head: dict[str, Any]) -> SuiteComparison:
    b, h = flatten(base), flatten(head)
    rows = []
    for path, value in h.items():
        if figures.kind(path) is None or path not in b:
            continue
        to = figures.scaled_path(path)
        scaled = _ratio(h[to], b[to]) if to is not None and to in b and to in h else None
        rows.append(Row(".".join(path), b[path], value, _ratio(value, b[path]), scaled))
    return SuiteComparison(rows, _only(b, h), _only(h, b))


def _only(one: dict[Path_, float], other: dict[Path_, float]) -> list[str]:
    """The figures of ``one`` that ``other`` lacks."""
    return [".".join(p) for p in one if p not in other and figures.kind(p) is not None]


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "-"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.1f}M"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3g}"


def _ratio_text(r: float) -> str:
    return "-" if math.isnan(r) else f"{r:.2f}"


def _table(header: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    """Columns aligned: the first to the left, the others to the right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()
    return [indent + line(r) for r in [header, *rows]]


def _reference_rows(base: dict[str, Any] | None, head: dict[str, Any] | None) -> list[list[str]]:
    rows = []
    for key, what in (("python_ref_ms", f"python loop ({figures.UNIT})"),
                      ("etcd_puts_per_s", "raw etcd puts/s, 64 concurrent"),
                      ("etcd_sequential_puts_per_s", "raw etcd puts/s, one at a time")):
        for when in ("start", "end"):
            b = (base or {}).get(when, {}).get(key)
            h = (head or {}).get(when, {}).get(key)
            rows.append([f"{what}, {when}", _fmt(b) if b is not None else "?", _fmt(h) if h is not None else "?",
                         _ratio_text(_ratio(h, b)) if b is not None and h is not None else ""])
    return rows


def _read_reference(directory: Path) -> dict[str, Any] | None:
    path = directory / "reference.json"
    return json.loads(path.read_text()) if path.is_file() else None


def report(base_dir: Path, head_dir: Path) -> str:
    """The comparison as a terminal reads it; NoResults when either directory holds no results."""
    base, head = load(base_dir), load(head_dir)
    lines = [f"base {base_dir}, head {head_dir}", "", "reference workload (bench/reference.py):"]
    lines += _table(["", "base", "head", "head/base"],
                    _reference_rows(_read_reference(base_dir), _read_reference(head_dir)))
    lines += ["", f"head/base: as measured; scaled: the same ratio with rates at "
              f"{figures.BASIS_PUTS_PER_S / 1000:.0f}k etcd puts/s and CPU in ref units, where both runs have them"]
    for suite in SUITES:
        if suite not in base or suite not in head:
            if suite in base or suite in head:
                lines += ["", f"== {suite}: only in {'base' if suite in base else 'head'}"]
            continue
        c = compare_suite(base[suite], head[suite])
        lines += ["", f"== {suite} =="]
        lines += _table(["figure", "base", "head", "head/base", "scaled"],
                        [[r.figure, _fmt(r.base), _fmt(r.head), _ratio_text(r.ratio),
                          _ratio_text(r.scaled_ratio) if r.scaled_ratio is not None else ""] for r in c.rows])
        for side, names in (("base", c.only_base), ("head", c.only_head)):
            if names:
                lines.append(f"  only in {side}: {', '.join(names)}")
    return "\n".join(lines)
