"""``kplane run`` and ``kplane chaos``: the commands around runner.py.

Both use the data dir's cluster when one is up. Otherwise they start one in the run's directory
(``<run>/cluster``, with the schedule's ``cluster:`` settings under the ``kplane up`` flags given)
and stop it at the end; its data, the history with it, stays there.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from cli import cluster
from cli.chaos import diff, generate, historyfile, outcome, record, runner, shrink
from cli.chaos.schedule import Schedule, ScheduleError, load, parse
from cli.check.framework import Entry
from cli.check.runner import entries_of, rules
from machinery import failpoints
from machinery.client import Client

# kplane up's flags (cli/main.py cluster_flags) -> ClusterConfig's fields.
_FLAG_FIELDS = ("nodes", "node_cpu", "node_memory", "node_pods", "hollow_nodes", "hollow_processes", "etcd_members",
                "apiservers", "feature_gates", "version", "scheduler_config", "kube_reserved", "dra_devices",
                "schedulers", "controller_managers")
_LIST_FLAGS = {"apiserver_arg": "apiserver_args", "scheduler_arg": "scheduler_args",
               "controller_manager_arg": "controller_manager_args", "kubelet_arg": "kubelet_args"}


def _settings(sched: Schedule, args: argparse.Namespace) -> dict[str, Any]:
    out = dict(sched.cluster)
    for name in _FLAG_FIELDS:
        if getattr(args, name, None) is not None:
            out[name] = getattr(args, name)
    for flag, name in _LIST_FLAGS.items():
        if getattr(args, flag, None):
            out[name] = list(out.get(name) or []) + list(getattr(args, flag))
    return out


@contextmanager
def cluster_for(data_dir: Path, settings: dict[str, Any], run_dir: Path, timeout: float,
                echo: Callable[[str], None], fresh: bool = False) -> Iterator[cluster.ClusterState]:
    state = None if fresh else cluster.ClusterState.load(data_dir)
    if state is not None and any(cluster.running(p) for p in state.processes.values()):
        yield state
        return
    if settings.get("failpoints"):  # every process starts with them (runner.py arms running ones)
        os.environ[failpoints.ENV_VAR] = str(settings["failpoints"])
    cfg = runner.cluster_config(run_dir / "cluster", settings)
    echo(f"starting a cluster for the run in {cfg.data_dir}")
    state = runner.start_cluster(cfg, timeout, echo)
    try:
        yield state
    finally:
        stopped = cluster.down(state)
        echo(f"stopped the run's cluster ({len(stopped)} processes); its data stays in {state.data_dir}")


def run_dir(data_dir: Path, label: str, given: str | None) -> Path:
    if given:
        return Path(given).resolve()
    return (data_dir / "runs" / f"{label}-{time.strftime('%Y%m%d-%H%M%S')}").resolve()


def summary(result: runner.RunResult) -> str:
    c = result.counts
    return (f"{result.steps_run} steps ({c.get('user', 0)} operations, {c.get('fault', 0)} faults, "
            f"{c.get('wait', 0)} waits), {c.get('revisions', 0)} revisions checked, "
            f"{len(result.violations)} violations, {result.seconds:.0f} s; files in {result.out_dir}")


def _stop_on_sigterm() -> None:
    """SIGTERM ends a run as Ctrl-C does: through the ``finally`` that stops the cluster it started
    (without it the run's processes outlive it)."""
    def stop(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)


def execute(sched: Schedule, args: argparse.Namespace, data_dir: Path, out: Path,
            echo: Callable[[str], None] = print, fresh: bool = False) -> runner.RunResult:
    _stop_on_sigterm()
    with cluster_for(data_dir, _settings(sched, args), out, args.timeout, echo, fresh) as state:
        return asyncio.run(runner.run(sched, state, out, converge_timeout=args.converge_timeout,
                                      wait_scale=args.wait_scale, echo=echo))


def cmd_run(args: argparse.Namespace, data_dir: Path) -> int:
    sched = load(args.schedule)
    out = run_dir(data_dir, sched.name or Path(args.schedule).stem, args.out)
    result = execute(sched, args, data_dir, out)
    if result.ok:
        print(f"ok: {summary(result)}")
        return 0
    print(f"FAILED: {result.reason}\n{summary(result)}")
    return 1


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``2m``, ``1h``: seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip()
    factor = units.get(t[-1:], 0)
    try:
        value = float(t[:-1] if factor else t) * (factor or 1)
    except ValueError:
        raise ScheduleError(f"invalid duration {text!r}: want seconds, or a number with s, m or h") from None
    if value <= 0:
        raise ScheduleError(f"invalid duration {text!r}: must be more than 0")
    return value


def nodes_of_running_cluster(data_dir: Path) -> list[str]:
    """The nodes of the data dir's cluster when one is up, those a chaos schedule's node faults can
    reach (a kubelet process of their own); [] when none is up. A cluster that is up with no such
    node (hollow nodes only) is refused: a schedule would have no node to fault."""
    state = cluster.ClusterState.load(data_dir)
    if state is None or not any(cluster.running(p) for p in state.processes.values()):
        return []
    nodes = sorted(p.name.split("/", 1)[1] for p in state.processes.values() if p.role == "kubelet")
    if not nodes:
        raise ScheduleError(f"the cluster in {data_dir} has no node with a kubelet of its own (hollow nodes only): "
                            "kplane chaos needs one to fault; stop it (kplane down) and let chaos start its own")
    return nodes


def _chaos_schedule(seed: int, duration: float, profile: str, arm: str, nodes: list[str]) -> Schedule:
    sched = generate.generate(seed, duration, profile, nodes)
    if arm:
        sched.cluster["failpoints"] = arm
        sched.description += f" --failpoints '{arm}'"
    return sched


def cmd_chaos(args: argparse.Namespace, data_dir: Path) -> int:
    if args.action == "shrink":
        return cmd_shrink(args, data_dir)
    if args.file:
        raise ScheduleError(f"unexpected argument {args.file!r} (kplane chaos shrink FILE shrinks one)")
    duration = parse_duration(args.duration)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    profiles = list(generate.PROFILES) if args.each_profile else [args.profile]
    each = duration / len(profiles)
    failed: list[str] = []
    totals = {"operations": 0, "faults": 0, "checks": 0, "revisions": 0}
    nodes = nodes_of_running_cluster(data_dir)
    for profile in profiles:
        sched = _chaos_schedule(seed, each, profile, args.failpoints or "", nodes)
        out = run_dir(data_dir, sched.name, args.out and str(Path(args.out) / profile) if len(profiles) > 1
                      else args.out)
        print(f"kplane chaos: seed {seed}, profile {profile}, {each:g} s: {len(sched.steps)} steps; "
              f"schedule {out / 'schedule.yaml'}", flush=True)
        result = execute(sched, args, data_dir, out, echo=lambda line: print(line, flush=True))
        totals["operations"] += result.counts.get("user", 0)
        totals["faults"] += result.counts.get("fault", 0)
        totals["checks"] += 1
        totals["revisions"] += result.counts.get("revisions", 0)
        if result.ok:
            print(f"ok: seed {seed}, profile {profile}: {summary(result)}", flush=True)
        else:
            failed.append(profile)
            print(f"FAILED: seed {seed}, profile {profile}: {result.reason}\n{summary(result)}\n"
                  f"rerun: kplane run {out / 'schedule.yaml'}\nshrink: kplane chaos shrink {out / 'schedule.yaml'}",
                  flush=True)
    print(f"chaos: seed {seed}, {len(profiles)} profile(s), {totals['operations']} operations, "
          f"{totals['faults']} faults, {totals['revisions']} revisions through {totals['checks']} check(s): "
          + (f"FAILED ({', '.join(failed)})" if failed else "0 violations"), flush=True)
    return 1 if failed else 0


def cmd_shrink(args: argparse.Namespace, data_dir: Path) -> int:
    if not args.file:
        raise ScheduleError("kplane chaos shrink needs the failing schedule: kplane chaos shrink FILE")
    path = Path(args.file)
    sched = load(path)
    out = run_dir(data_dir, f"shrink-{sched.name or path.stem}", args.out)
    out.mkdir(parents=True, exist_ok=True)

    def run_once(candidate: Schedule, label: str) -> runner.RunResult:
        where = out / label
        result = execute(candidate, args, data_dir, where, echo=lambda line: None, fresh=True)
        if result.ok:
            shutil.rmtree(where / "cluster", ignore_errors=True)  # a passing candidate: nothing to read
        else:  # a failing one: its logs and history stay, etcd's preallocated files go
            for d in (where / "cluster").glob("etcd*"):
                shutil.rmtree(d, ignore_errors=True)
        return result

    target, pods, near = "", frozenset[str](), frozenset[str]()
    beside = path.with_name("result.json")
    if beside.exists():
        first = runner.RunResult(**json.loads(beside.read_text()))
        target, pods = shrink.signature(first), shrink.named_pods(first)
        history = path.with_name("history.jsonl")
        if pods and history.exists():
            near = shrink.neighbours(historyfile.read(history), pods)
    if not target:
        for i in range(args.tries * 2):
            target = shrink.signature(run_once(sched, f"first-{i + 1}"))
            if target:
                break
    if not target:
        raise ScheduleError(f"{path} did not fail in {args.tries * 2} runs: nothing to shrink")
    rule = target.removeprefix("violation ")
    deciders = next((r.deciders for r in rules() if r.name == rule), ())
    s = shrink.Shrinker(run_once, target, tries=args.tries, echo=lambda line: print(line, flush=True), pods=pods,
                        neighbours=near, deciders=deciders)
    small = s.shrink(sched)
    held = shrink.confirm(run_once, small, target, runs=3)
    small, held = steadiest(s, run_once, small, held)
    small.description = (f"shrunk from {path} ({len(sched.steps)} steps) by kplane chaos shrink in {s.runs} runs; "
                         f"fails with {target} in {held} of 3 runs")
    dest = out / "minimal.yaml"
    small.write(dest)
    print(f"minimal schedule: {len(small.steps)} steps, fails with {target} in {held} of 3 runs: {dest}\n"
          f"reproduce: kplane run {dest}")
    return 0 if held else 1


def steadiest(s: shrink.Shrinker, run_once: Callable[[Schedule, str], runner.RunResult], small: Schedule,
              held: int) -> tuple[Schedule, int]:
    """When the minimal schedule failed fewer than 3 confirming runs: the same schedule with the
    scheduler's tie-breaks pinned (``Shrinker.pinned_all``), else led by a lag (``lagged_all``),
    each candidate that fails every try confirmed by 3 runs of its own, until one fails all 3; the
    steadiest, with how many it failed."""
    if held == 3:
        return small, held
    print(f"  the minimal schedule failed {held} of 3 confirming runs: pinning tie-breaks, else adding a lag",
          flush=True)
    tries = itertools.chain((("pinned", c) for c in s.pinned_all(small)), (("lagged", c) for c in s.lagged_all(small)))
    for n, (how, steadier) in enumerate(tries, 1):
        got = shrink.confirm(run_once, steadier, target=s.target, runs=3, label=f"confirm-{how}-{n}")
        what = " ".join(steadier.cluster.get("scheduler_args", [])) if how == "pinned" else steadier.steps[0].describe()
        print(f"  {what}: failed {got} of 3 confirming runs", flush=True)
        if got > held:
            small, held = steadier, got
        if held == 3:
            break
    return small, held


def cmd_record(args: argparse.Namespace, connect: Callable[[], Client]) -> int:
    """The history's user operations and fault marks as a schedule (record.py), from the cluster's
    history or a saved one; the file is written whole or not at all."""
    if args.since < 0 or (args.until is not None and args.until < args.since):
        raise ScheduleError("--since must be >= 0 and --until >= --since")
    out = Path(args.output)
    if not out.parent.is_dir():
        raise ScheduleError(f"cannot write {out}: no directory {out.parent}")
    if args.history:
        try:
            entries = historyfile.read(args.history)
        except historyfile.HistoryFileError as exc:
            raise ScheduleError(str(exc)) from None
        return _write_recorded(args, entries, args.history)

    async def go() -> list[Entry]:
        client = connect()
        try:
            # From the start: what a user made before --since tells what later revisions change.
            return [e async for e in entries_of(client, 0)]
        finally:
            await client.close()

    return _write_recorded(args, asyncio.run(go()), "the cluster's history")


def _write_recorded(args: argparse.Namespace, entries: list[Entry], source: str) -> int:
    try:
        recorded = record.record(entries, since=args.since, until=args.until)
    except record.NothingToRecord as exc:
        raise ScheduleError(str(exc)) from None
    last = max((e.rev for e in entries), default=0)
    upto = args.until if args.until is not None else last
    recorded.name = Path(args.output).stem
    recorded.description = f"recorded by kplane record from {source}, revisions {args.since} to {upto}"
    # What kplane run will read: the file must parse back to the same steps.
    try:
        again = parse(yaml.safe_load(recorded.dump()), str(args.output))
    except ScheduleError as exc:
        raise ScheduleError(f"the recorded schedule does not parse back (a kplane bug): {exc}") from None
    if [s.to_dict() for s in again.steps] != [s.to_dict() for s in recorded.steps]:
        raise ScheduleError("the recorded schedule does not parse back to the same steps (a kplane bug)")
    recorded.write(args.output)
    counts: dict[str, int] = {}
    for step in recorded.steps:
        counts[step.op] = counts.get(step.op, 0) + 1
    print(f"recorded {len(recorded.steps)} steps ({', '.join(f'{n} {op}' for op, n in counts.items())}) "
          f"to {args.output}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Exit 0 when the two runs came to the same, 1 when they differ, 2 on bad input (diff(1))."""
    try:
        a = outcome.outcome(historyfile.read(args.history_a))
        b = outcome.outcome(historyfile.read(args.history_b))
    except historyfile.HistoryFileError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    names = (args.history_a, args.history_b)
    diffs = diff.compare(a, b)
    if args.output == "json":
        print(diff.to_json(a, b, diffs, names))
    else:
        for d in diffs:
            print(d.line())
        print(diff.summary(a, b, diffs, names))
    return 1 if diffs else 0
