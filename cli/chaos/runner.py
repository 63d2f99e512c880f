"""One schedule run end to end: the steps at their times, then the heal, convergence, ``kplane
check`` and the schedule's expectations; everything written to the run's directory.

The shape is etcd's robustness tests and Jepsen's: run (operations and faults), heal (every paused
process resumed, every failpoint the run armed turned off, every killed component started),
settle (converge.py), validate (the history through every ``kplane check`` rule, then ``expect:``).
A run's directory holds ``schedule.yaml`` (what ran), ``steps.jsonl`` (each step: when, how long,
its outcome), ``history.jsonl`` (``kplane history``'s lines), ``result.json`` and, when the run
failed, ``timeline.html`` (the run's revisions drawn: cli/timeline).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cli import cluster, preflight, timeline, topology
from cli.chaos import expect, steps
from cli.chaos.converge import converged
from cli.chaos.schedule import FAULTS, Schedule, ScheduleError
from cli.check.framework import Entry, Violation
from cli.check.runner import check_entries, entries_of
from machinery import errors, failpoints, jsonconv
from machinery.client import Client


@dataclass
class RunResult:
    ok: bool
    reason: str  # the first thing that failed, in one line ("" when ok)
    out_dir: str
    steps_run: int = 0
    counts: dict[str, int] = field(default_factory=dict)  # user, fault, wait steps run; revisions checked
    violations: list[dict[str, Any]] = field(default_factory=list)
    unmet: list[str] = field(default_factory=list)
    failed_step: int = 0  # 1-based; 0: none
    seconds: float = 0.0
    since_rev: int = 0


def components_named(sched: Schedule, state: cluster.ClusterState) -> None:
    """Every fault step names a component the cluster has (or a node the schedule adds first)."""
    known = set(state.processes) | {"etcd"}
    for i, s in enumerate(sched.steps, 1):
        if s.op == "node-add":
            known |= {f"kubelet/{s.arg('name')}", f"runtime/{s.arg('name')}"}
        if s.op in FAULTS and s.arg("component") is not None and s.arg("component") not in known:
            raise ScheduleError(f'step {i} ({s.op}): unknown component "{s.arg("component")}" (this cluster has: '
                                f'{", ".join(sorted(state.processes))})')


def cluster_config(data_dir: Path, settings: dict[str, Any]) -> topology.ClusterConfig:
    """``kplane up``'s configuration from a schedule's ``cluster:`` (and the flags given over it)."""
    cfg = topology.ClusterConfig(data_dir=str(data_dir))
    for key, value in settings.items():
        if value is not None and key != "failpoints":
            setattr(cfg, key, list(value) if isinstance(value, (list, tuple)) else value)
    if cfg.scheduler_config:
        cfg.scheduler_config = str(Path(cfg.scheduler_config).resolve())
    return cfg


def start_cluster(cfg: topology.ClusterConfig, timeout: float, echo: Callable[[str], None]) -> cluster.ClusterState:
    try:
        preflight.check_up(cfg, timeout)
    except preflight.PreflightError as exc:
        raise ScheduleError(str(exc)) from None
    return cluster.up(cfg, timeout=timeout, echo=echo)


async def _arm_everywhere(state: cluster.ClusterState, text: str, echo: Callable[[str], None]) -> None:
    """A schedule's ``cluster.failpoints``: armed in every running process that has the point, and
    in ``$KPLANE_FAILPOINTS`` for every process started from now on (a restart keeps them)."""
    os.environ[failpoints.ENV_VAR] = text
    for item in filter(None, (x.strip() for x in text.split(";"))):
        name, _, action = item.partition("=")
        for p in state.processes.values():
            if p.role == "etcd" or not cluster.running(p):
                continue
            declared = (await asyncio.to_thread(cluster.failpoints_of, p)).get("declared", {})
            if name in declared:
                await asyncio.to_thread(cluster.arm_failpoint, p, name, action)
                echo(f"{p.name}: {name}={action} for the whole run")


async def _revision(client: Client) -> int:
    lst = await client.nodes.list()
    return int(lst.metadata.resource_version or 0)


async def _heal(ctx: steps.Context, echo: Callable[[str], None]) -> None:
    """Undo what the run did to the processes, so the cluster can settle."""
    for name in sorted(ctx.paused):
        cluster.signal_process(ctx.state.processes[name], signal.SIGCONT)
        echo(f"heal: {name} resumed")
    ctx.paused.clear()
    for name, points in sorted(ctx.armed.items()):
        for point in sorted(points):
            try:
                await asyncio.to_thread(cluster.arm_failpoint, ctx.state.processes[name], point, "off")
                echo(f"heal: {name} failpoint {point} off")
            except cluster.ClusterError as exc:
                echo(f"heal: {name} failpoint {point}: {exc}")
    ctx.armed.clear()
    for p in list(ctx.state.processes.values()):
        if not cluster.running(p):
            ok, reason = await asyncio.to_thread(cluster.start, ctx.state, p, 30.0 * ctx.wait_scale)
            echo(f"heal: {p.name} started" + ("" if ok else f" (not healthy: {reason})"))
    ctx.killed.clear()


async def _settle(ctx: steps.Context, timeout: float) -> tuple[bool, str]:
    deadline = time.monotonic() + timeout
    why = ""
    while True:
        try:
            ok, why = await converged(ctx.client, ctx.state)
        except errors.ApiError as exc:
            ok, why = False, f"{type(exc).__name__}: {' '.join(exc.message.split())}"
        if ok:
            return True, why
        if time.monotonic() >= deadline:
            return False, why
        await asyncio.sleep(0.5)


def _write_history(path: Path, entries: list[Entry]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w") as f:
        for e in entries:
            f.write(json.dumps({"rev": e.rev, "type": e.type, "kind": e.kind, "namespace": e.namespace,
                                "name": e.name, "object": jsonconv.to_dict(e.obj)}) + "\n")
    tmp.replace(path)


async def run(sched: Schedule, state: cluster.ClusterState, out_dir: Path, *, converge_timeout: float = 120.0,
              wait_scale: float = 1.0, echo: Callable[[str], None] = print) -> RunResult:
    """Run ``sched`` against the cluster ``state`` describes; the result says whether it held."""
    components_named(sched, state)
    out_dir.mkdir(parents=True, exist_ok=True)
    sched.write(out_dir / "schedule.yaml")
    client = Client(state.server, state.admin_token(), timeout=10.0 * wait_scale)
    started = time.monotonic()
    env_before = os.environ.get(failpoints.ENV_VAR)
    try:
        if sched.cluster.get("failpoints"):
            await _arm_everywhere(state, str(sched.cluster["failpoints"]), echo)
        ctx = steps.Context(state, client, wait_scale=wait_scale)
        # The baseline: a run starts on a settled cluster, or what fails is not the run's doing.
        settled, why = await _settle(ctx, converge_timeout * wait_scale)
        if not settled:
            raise ScheduleError(f"the cluster did not settle before the run: {why}")
        since = await _revision(client)
        result = RunResult(False, "", str(out_dir), since_rev=since)
        counts = {"user": 0, "fault": 0, "wait": 0}
        with (out_dir / "steps.jsonl").open("w") as log:
            for i, s in enumerate(sched.steps, 1):
                if s.after:
                    await asyncio.sleep(s.after)
                t0 = time.monotonic()
                outcome = await steps.perform(s, ctx)
                counts[s.kind] += 1
                result.steps_run = i
                mark = "ok" if outcome.ok else "FAILED" if outcome.fatal else "refused"
                echo(f"{t0 - started:8.2f}s  step {i}/{len(sched.steps)}  {s.describe()}  -> {mark}"
                     + (f" ({outcome.detail})" if outcome.detail else ""))
                log.write(json.dumps({"step": i, "op": s.op, "at": round(t0 - started, 3),
                                      "took": round(time.monotonic() - t0, 3), "ok": outcome.ok,
                                      "detail": outcome.detail}) + "\n")
                log.flush()
                if outcome.fatal:
                    result.failed_step = i
                    result.reason = f"step {i} ({s.op}): {outcome.detail}"
                    break
        await _heal(ctx, echo)
        settled, why = await _settle(ctx, converge_timeout * wait_scale)
        if not settled and not result.reason:
            result.reason = f"did not converge within {converge_timeout * wait_scale:.0f} s: {why}"
        entries = [e async for e in entries_of(client, 0)]
        _write_history(out_dir / "history.jsonl", entries)
        violations: list[Violation] = check_entries(entries)
        counts["revisions"] = len(entries)
        result.counts = counts
        result.violations = [asdict(v) for v in violations]
        if violations and not result.reason:
            v = violations[0]
            result.reason = f"{v.rule} at rev {v.rev}: {v.message}"
        if settled:
            result.unmet = await expect.unmet(client, sched.expect, entries, since)
            if result.unmet and not result.reason:
                result.reason = result.unmet[0]
        result.ok = not result.reason
        result.seconds = round(time.monotonic() - started, 1)
        if not result.ok:
            page = out_dir / "timeline.html"
            page.write_text(timeline.render(entries, "html", since=since))
            echo(f"timeline: {page}")
        (out_dir / "result.json").write_text(json.dumps(asdict(result), indent=2) + "\n")
        return result
    finally:
        if env_before is None:
            os.environ.pop(failpoints.ENV_VAR, None)
        else:
            os.environ[failpoints.ENV_VAR] = env_before
        await client.close()

