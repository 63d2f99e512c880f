"""``kplane run`` and ``kplane chaos``: the commands around runner.py.

Both use the data dir's cluster when one is up. Otherwise they start one in the run's directory
(``<run>/cluster``, with the schedule's ``cluster:`` settings under the ``kplane up`` flags given)
and stop it at the end; its data, the history with it, stays there.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from cli import cluster
from cli.chaos import runner
from cli.chaos.schedule import Schedule, load

# kplane up's flags (cli/main.py cluster_flags) -> ClusterConfig's fields.
_FLAG_FIELDS = ("nodes", "node_cpu", "node_memory", "node_pods", "hollow_nodes", "etcd_members", "apiservers",
                "feature_gates", "version", "scheduler_config", "kube_reserved", "dra_devices", "schedulers",
                "controller_managers")
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
                echo: Callable[[str], None]) -> Iterator[cluster.ClusterState]:
    state = cluster.ClusterState.load(data_dir)
    if state is not None and any(cluster.running(p) for p in state.processes.values()):
        yield state
        return
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


def execute(sched: Schedule, args: argparse.Namespace, data_dir: Path, out: Path,
            echo: Callable[[str], None] = print) -> runner.RunResult:
    with cluster_for(data_dir, _settings(sched, args), out, args.timeout, echo) as state:
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
