"""``make bench``: run the benchmarks, write JSON under .bench/ and print a summary.

``python -m bench [--quick] [--out .bench]``. Benchmarks are not tests: nothing here fails on a
time; the summary states each target and whether this run met it, with the profile that says
where the time goes when it did not.
"""

import argparse
import sys
from pathlib import Path

from bench import api, kubelet, scheduler


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench")
    p.add_argument("--out", default=".bench")
    p.add_argument("--quick", action="store_true", help="smaller runs (a smoke test of the benchmark itself)")
    args = p.parse_args()
    out = Path(args.out)
    print("== API: creates/s vs raw etcd puts/s; watch delivery to 50 watchers ==", flush=True)
    r = api.run(out, quick=args.quick)
    print(api.summary(r))
    print("\n== kubelet: pods started/s on one node; resize request -> actual ==", flush=True)
    k = kubelet.run(out, quick=args.quick)
    print(kubelet.summary(k))
    print("\n== scheduler: scheduler_perf's SchedulingBasic, PreemptionBasic, Unschedulable ==", flush=True)
    sc = scheduler.run(out, quick=args.quick)
    print(scheduler.summary(sc))
    print(f"\nresults: {out / 'api.json'}, {out / 'kubelet.json'}, {out / 'scheduler.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
