"""``make bench``: run the benchmarks, write JSON under .bench/ and print a summary.

``python -m bench [api] [kubelet] [scheduler] [--workloads A,B] [--quick] [--out .bench]``: the suites
named (all three when none is; the scheduler alone with ``--workloads``), ``--workloads`` picking
scheduler workloads by name (e.g. ``python -m bench scheduler --workloads SchedulingBasic,ResizePreemption``).
Every run times the reference workload (``bench/reference.py``) before the first suite and after each
one, and gives each suite's rates and CPU figures scaled by it beside the measured ones.
``python -m bench --compare BASE_DIR [HEAD_DIR]``: two runs' results side by side (``bench/compare.py``).
Benchmarks are not tests: nothing here fails on a time; the summary states each target and whether
this run met it, with the profile that says where the time goes when it did not.
"""

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from bench import api, compare, figures, kubelet, reference, scheduler

SUITES = ("api", "kubelet", "scheduler")
HEADINGS = {
    "api": "== API: creates/s vs raw etcd puts/s; watch delivery to 50 watchers ==",
    "kubelet": "\n== kubelet: pods started/s on one node; resize request -> actual ==",
    "scheduler": "\n== scheduler: scheduler_perf's SchedulingBasic, PreemptionBasic, Unschedulable; "
                 "ResizePreemption (KEP-5836); SchedulingWithResourceClaimTemplate and ClaimBurst (KEP-6132) ==",
}


def _snapshot(label: str) -> reference.Snapshot:
    s = reference.measure(label)
    print(f"reference ({label}): python loop {s.python_ref_ms:.2f} {figures.UNIT} (CPU, best of "
          f"{reference.REPEATS}); raw etcd {s.etcd_puts_per_s:.0f} puts/s (64 concurrent), "
          f"{s.etcd_sequential_puts_per_s:.0f} one at a time", flush=True)
    return s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("suites", nargs="*", metavar="SUITE", help=f"any of {', '.join(SUITES)} (default: all)")
    p.add_argument("--workloads", default="", help="scheduler workloads to run, comma-separated (default: all)")
    p.add_argument("--out", default=".bench")
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test of the benchmark itself)")
    p.add_argument("--compare", nargs="+", metavar="DIR",
                   help="BASE_DIR [HEAD_DIR]: each figure of two runs, head / base (HEAD_DIR default: --out)")
    args = p.parse_args(argv)
    if args.compare:
        if len(args.compare) > 2 or args.suites:
            p.error("--compare takes BASE_DIR and an optional HEAD_DIR, and runs no suite")
        try:
            print(compare.report(Path(args.compare[0]), Path(args.compare[1] if len(args.compare) > 1 else args.out)))
        except compare.NoResults as exc:
            print(f"python -m bench: {exc}", file=sys.stderr)
            return 2
        return 0
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        p.error(f"unknown suite {', '.join(sorted(unknown))}; choose from {', '.join(SUITES)}")
    only = [w for w in args.workloads.split(",") if w]
    if only:
        try:
            scheduler.choose(only, quick=args.quick)
        except ValueError as exc:
            p.error(str(exc))
    chosen = args.suites or (["scheduler"] if only else list(SUITES))
    suites = [s for s in SUITES if s in chosen]
    out = Path(args.out)
    runs: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], str]]] = {
        "api": (lambda: api.run(out, quick=args.quick), api.summary),
        "kubelet": (lambda: kubelet.run(out, quick=args.quick), kubelet.summary),
        "scheduler": (lambda: scheduler.run(out, quick=args.quick, only=only or None), scheduler.summary),
    }
    snapshots = [_snapshot("start")]
    written = []
    for suite in suites:
        run, summary = runs[suite]
        print(HEADINGS[suite], flush=True)
        result = run()
        snapshots.append(_snapshot("end" if suite == suites[-1] else f"after {suite}"))
        figures.scale(result, reference.between(snapshots[-2], snapshots[-1]))
        result["reference"] = reference.suite_json(snapshots[-2], snapshots[-1])
        path = out / f"{suite}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        written.append(path)
        print(summary(result))
    (out / "reference.json").write_text(json.dumps(reference.run_json(snapshots), indent=2) + "\n")
    written.append(out / "reference.json")
    print(f"\nresults: {', '.join(str(w) for w in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
