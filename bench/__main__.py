"""``make bench``: run the benchmarks, write JSON under .bench/ and print a summary.

``python -m bench [api] [kubelet] [scheduler] [--workloads A,B] [--quick] [--out .bench]``: the suites
named (all three when none is; the scheduler alone with ``--workloads``), ``--workloads`` picking
scheduler workloads by name (e.g. ``python -m bench scheduler --workloads SchedulingBasic,ResizePreemption``).
Benchmarks are not tests: nothing here fails on a time; the summary states each target and whether
this run met it, with the profile that says where the time goes when it did not.
"""

import argparse
import sys
from pathlib import Path

from bench import api, kubelet, scheduler

SUITES = ("api", "kubelet", "scheduler")


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("suites", nargs="*", metavar="SUITE", help=f"any of {', '.join(SUITES)} (default: all)")
    p.add_argument("--workloads", default="", help="scheduler workloads to run, comma-separated (default: all)")
    p.add_argument("--out", default=".bench")
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test of the benchmark itself)")
    args = p.parse_args()
    unknown = set(args.suites) - set(SUITES)
    if unknown:
        p.error(f"unknown suite {', '.join(sorted(unknown))}; choose from {', '.join(SUITES)}")
    only = [w for w in args.workloads.split(",") if w]
    suites = args.suites or (["scheduler"] if only else list(SUITES))
    out = Path(args.out)
    written = []
    if "api" in suites:
        print("== API: creates/s vs raw etcd puts/s; watch delivery to 50 watchers ==", flush=True)
        r = api.run(out, quick=args.quick)
        print(api.summary(r))
        written.append(out / "api.json")
    if "kubelet" in suites:
        print("\n== kubelet: pods started/s on one node; resize request -> actual ==", flush=True)
        k = kubelet.run(out, quick=args.quick)
        print(kubelet.summary(k))
        written.append(out / "kubelet.json")
    if "scheduler" in suites:
        print("\n== scheduler: scheduler_perf's SchedulingBasic, PreemptionBasic, Unschedulable; "
              "ResizePreemption (KEP-5836); SchedulingWithResourceClaimTemplate (KEP-6132) ==", flush=True)
        try:
            sc = scheduler.run(out, quick=args.quick, only=only or None)
        except ValueError as exc:
            p.error(str(exc))
        print(scheduler.summary(sc))
        written.append(out / "scheduler.json")
    print(f"\nresults: {', '.join(str(w) for w in written)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
