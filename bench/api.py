"""The API benchmark: creates/s against raw etcd puts/s, and watch delivery latency to 50 watchers.

All figures come from one run on one machine, so the ratios mean something on a noisy 2-core box:

- ``raw_etcd_puts_per_s``: 64 concurrent puts of a pod-sized value straight to the cluster's etcd;
- ``creates_per_s``: 64 concurrent pod creates through the apiserver (admission, validation,
  storage, the watch cache); the figure that matters is ``creates_per_s / raw_etcd_puts_per_s``;
- watch delivery: 50 watchers (in their own process) watch pods while pods are created at a
  paced rate (500/s by default); for every (event, watcher) the latency from the create request to
  delivery is recorded; every watcher must receive every event;
- REST beside gRPC (``bench/rest.py``): the creates again as JSON over HTTPS, and the 200 writes/s
  watch phase again with the watchers on the REST API; the apiserver's CPU per create and per
  delivered event of each path, and their ratio (the REST path at most 1.5x the gRPC path's).

When a target is missed, the creates phase is run again with the apiserver under cProfile and
the functions that take the time are reported.
"""

from __future__ import annotations

import asyncio
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Coroutine, Protocol, TypeVar, cast

import aetcd

from bench import cpu, figures, rest
from cli import cluster, topology
from machinery.client import Client
from machinery.process import run_loop
from tests.harness.builders import MakePod

TARGET_CREATE_RATIO = 0.25
TARGET_WATCH_P99_MS = 100.0


def _pod(name: str, sent: float | None = None):
    pod = (MakePod().name(name).labels({"app": "bench", "tier": "web"}).req(cpu="100m", memory="64Mi")
           .lim(cpu="200m", memory="128Mi").obj())
    if sent is not None:
        pod.metadata.annotations["bench.kplane.dev/sent"] = repr(sent)
    return pod


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def raw_etcd_puts(endpoint: str, n: int, concurrency: int) -> float:
    host, _, port = endpoint.rpartition(":")
    value = _pod("raw").SerializeToString()
    async with aetcd.Client(host=host, port=int(port)) as client:
        await client.put(b"/bench-raw/warmup", value)
        it = iter(range(n))

        async def worker():
            for i in it:
                await client.put(f"/bench-raw/{i}".encode(), value)

        start = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        elapsed = time.perf_counter() - start
        await client.delete_prefix(b"/bench-raw/")
    return n / elapsed


async def creates(server: str, token: str, n: int, concurrency: int, channels: int, prefix: str) -> float:
    clients = [Client(server, token) for _ in range(channels)]
    pods = [_pod(f"{prefix}-{i}") for i in range(n)]
    try:
        await clients[0].pods.create(_pod(f"{prefix}-warmup"))
        it = iter(pods)

        async def worker(c: Client):
            for p in it:
                await c.pods.create(p)

        start = time.perf_counter()
        await asyncio.gather(*[worker(clients[i % channels]) for i in range(concurrency)])
        return n / (time.perf_counter() - start)
    finally:
        for c in clients:
            await c.close()


async def paced_writes(server: str, token: str, rate: float, seconds: float, prefix: str) -> int:
    """Create pods at ``rate``/s for ``seconds``; each carries its send time."""
    total = int(rate * seconds)
    clients = [Client(server, token) for _ in range(4)]
    start = time.perf_counter()
    inflight: set[asyncio.Task] = set()
    try:
        for i in range(total):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            t = asyncio.create_task(clients[i % 4].pods.create(_pod(f"{prefix}-{i}", time.time())))
            inflight.add(t)
            t.add_done_callback(inflight.discard)
        results = await asyncio.gather(*inflight, return_exceptions=True)
        failed = [r for r in results if isinstance(r, BaseException)]
        if failed:
            raise RuntimeError(f"{len(failed)} of {total} paced writes failed, e.g. {failed[0]!r}")
    finally:
        for c in clients:
            await c.close()
    return total


T = TypeVar("T")


class Profile(Protocol):
    """A cProfile dump as pstats.Stats reads it: its totals and per-function table (attributes
    pstats' documentation, and so typeshed, leaves out)."""

    total_tt: float
    # (file, line, function) -> (primitive calls, calls, self time, cumulative time, callers)
    stats: dict[tuple[str, int, str], tuple[int, int, float, float, dict[Any, Any]]]


def load_profile(path: str) -> Profile:
    return cast(Profile, pstats.Stats(path))


def _profile_summary(path: str, top: int = 20) -> list[dict[str, Any]]:
    stats = load_profile(path)
    total = stats.total_tt or 1.0
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]:
        rows.append({"function": f"{Path(file).name}:{line}({fn})", "self_s": round(tt, 3),
                     "self_pct": round(100 * tt / total, 1), "cumulative_s": round(ct, 3), "calls": nc})
    return rows


def run(out_dir: Path, quick: bool = False) -> dict:
    n_raw, n_creates, watch_seconds = (2000, 1500, 4) if quick else (6000, 4000, 10)
    rate = 500.0
    watchers = 50
    data = tempfile.mkdtemp(prefix="kplane-bench-")
    cfg = topology.ClusterConfig(data_dir=data, nodes=0, schedulers=0, controller_managers=0)  # the API alone
    state = cluster.up(cfg, timeout=60, echo=lambda *_: None)
    result: dict = {"machine": {"cpus": os.cpu_count()}, "targets": {
        "create_ratio": TARGET_CREATE_RATIO, "watch_p99_ms": TARGET_WATCH_P99_MS, "watch_rate": rate,
        "watchers": watchers}}
    try:
        server, token = state.server, state.admin_token()
        etcd = state.processes["etcd"].grpc
        raw = run_loop_result(raw_etcd_puts(etcd, n_raw, 64))
        api_pid = state.processes["apiserver"].pid
        cpu0 = cpu.seconds(api_pid)
        made = run_loop_result(creates(server, token, n_creates, 64, 8, "c"))
        grpc_cpu = cpu.seconds(api_pid) - cpu0
        result["raw_etcd_puts_per_s"] = round(raw, 1)
        result["creates_per_s"] = round(made, 1)
        result["create_ratio"] = round(made / raw, 3)

        # The same creates over REST (JSON over HTTPS), right after, with the apiserver's CPU for both.
        endpoint = rest.Endpoint(state, token)
        bodies = [rest.pod_body(_pod(f"r-{i}")) for i in range(n_creates)]
        run_loop_result(rest.creates(endpoint, [rest.pod_body(_pod("r-warmup"))], 1, 1))
        cpu0 = cpu.seconds(api_pid)
        rest_made = run_loop_result(rest.creates(endpoint, bodies, 64, 8))
        rest_cpu = cpu.seconds(api_pid) - cpu0
        grpc_ms, rest_ms = grpc_cpu * 1000 / (n_creates + 1), rest_cpu * 1000 / n_creates
        result["rest"] = {"creates": {"grpc_per_s": round(made, 1), "rest_per_s": round(rest_made, 1),
                                      "grpc_cpu_ms": round(grpc_ms, 3), "rest_cpu_ms": round(rest_ms, 3),
                                      "cpu_ratio": rest.cpu_ratio(rest_ms, grpc_ms)}}

        # Watch delivery: 50 watchers in their own process, paced writes from this one; at the
        # target rate, and at a lower one to show what this machine sustains.
        w = watch_phase(server, token, rate, watch_seconds, watchers, data, "w")
        result["watch"] = w
        result["watch_p99_ms_worst_watcher"] = w["worst_watcher_p99_ms"]
        result["watch_all_kept_up"] = w["all_complete"]
        result["watch_at_200"] = watch_phase(server, token, 200.0, watch_seconds, watchers, data, "v", api_pid)
        rest_watch = watch_phase(server, token, 200.0, watch_seconds, watchers, data, "x", api_pid, endpoint)
        grpc_us = result["watch_at_200"]["apiserver_cpu_us_per_event"]
        rest_us = rest_watch["apiserver_cpu_us_per_event"]
        result["rest"]["watch"] = {"rate": 200.0, "watchers": watchers, "grpc": result["watch_at_200"],
                                   "rest": rest_watch, "grpc_cpu_us_per_event": grpc_us,
                                   "rest_cpu_us_per_event": rest_us, "cpu_ratio": rest.cpu_ratio(rest_us, grpc_us)}

        missed = []
        if result["create_ratio"] < TARGET_CREATE_RATIO:
            missed.append("create_ratio")
        if not w["all_complete"] or w["worst_watcher_p99_ms"] >= TARGET_WATCH_P99_MS:
            missed.append("watch")
        if not result["rest"]["creates"]["cpu_ratio"] <= rest.TARGET_CPU_RATIO:
            missed.append("rest_create_cpu")
        if not (rest_watch["all_complete"] and result["rest"]["watch"]["cpu_ratio"] <= rest.TARGET_CPU_RATIO):
            missed.append("rest_watch")
        result["targets_missed"] = missed
        if missed:
            result["profile"] = profile_creates(state, n_creates, data)
    finally:
        cluster.down(state, purge=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "api.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def watch_phase(server: str, token: str, rate: float, seconds: float, watchers: int, data: str, prefix: str,
                api_pid: int | None = None, over_rest: rest.Endpoint | None = None) -> dict:
    """Watchers in their own process (gRPC, or REST given ``over_rest``), pods written over gRPC at
    ``rate``; with ``api_pid``, the apiserver's CPU from the writes' start to the last delivery,
    per delivered event."""
    expect = int(rate * seconds)
    report = Path(data) / f"watchers-{prefix}.json"
    via = ["--rest", over_rest.base, "--ca", over_rest.ca] if over_rest else []
    proc = subprocess.Popen([sys.executable, "-m", "bench.watchers", "--server", server, "--token", token,
                             "--watchers", str(watchers), "--expect", str(expect), "--prefix", f"{prefix}-",
                             "--out", str(report), "--timeout", str(seconds + 60), *via])
    ready = Path(str(report) + ".ready")
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    cpu0 = cpu.seconds(api_pid)
    run_loop_result(paced_writes(server, token, rate, seconds, prefix))
    proc.wait(timeout=seconds + 90)
    used = cpu.seconds(api_pid) - cpu0
    w = json.loads(report.read_text())
    w["rate"] = rate
    if api_pid is not None:
        delivered = w["min_events_per_watcher"] * watchers
        w["apiserver_cpu_us_per_event"] = round(used * 1e6 / delivered, 2) if delivered else float("nan")
    return w


def profile_creates(state: cluster.ClusterState, n: int, data: str) -> dict:
    """Run the creates phase again with the apiserver under cProfile; return where its time goes."""
    api = state.processes["apiserver"]
    path = str(Path(data) / "apiserver.prof")
    cluster.stop(api)
    api.env = {**api.env, "KPLANE_PROFILE": path}
    ok, reason = cluster.start(state, api, 60)
    if not ok:
        return {"error": f"apiserver did not restart for profiling: {reason}"}
    rate = run_loop_result(creates(state.server, state.admin_token(), n, 64, 8, "p"))
    cluster.stop(api)
    api.env = {k: v for k, v in api.env.items() if k != "KPLANE_PROFILE"}
    return {"creates_per_s_under_profiler": round(rate, 1), "top_self_time": _profile_summary(path)}


def run_loop_result(coro: Coroutine[Any, Any, T]) -> T:
    box: dict[str, T] = {}

    async def main() -> None:
        box["v"] = await coro

    run_loop(main())
    return box["v"]


def summary(r: dict) -> str:
    lines = [
        f"raw etcd puts/s:            {r['raw_etcd_puts_per_s']:>8.0f}",
        f"apiserver creates/s:        {r['creates_per_s']:>8.0f}   ratio {r['create_ratio']:.2f} "
        f"(target >= {TARGET_CREATE_RATIO})",
        f"watch @ {r['targets']['watch_rate']:.0f} writes/s to {r['targets']['watchers']} watchers: every watcher "
        f"complete: {r['watch_all_kept_up']}; p50 {r['watch']['p50_ms']:.1f} ms, p99 {r['watch']['p99_ms']:.1f} ms, "
        f"worst watcher p99 {r['watch_p99_ms_worst_watcher']:.1f} ms (target < {TARGET_WATCH_P99_MS:.0f})",
        f"watch @ 200 writes/s: every watcher complete: {r['watch_at_200']['all_complete']}; "
        f"p50 {r['watch_at_200']['p50_ms']:.1f} ms, "
        f"worst watcher p99 {r['watch_at_200']['worst_watcher_p99_ms']:.1f} ms",
    ]
    scaled = [figures.at_basis(r, "creates_per_s", "creates/s"),
              figures.at_basis(r["rest"]["creates"], "rest_per_s", "REST creates/s")]
    if all(scaled):
        lines.insert(2, f"  {'; '.join(scaled)}")
    lines.extend(rest.summary_lines(r["rest"]))
    if r.get("targets_missed"):
        lines.append(f"targets missed: {', '.join(r['targets_missed'])}; apiserver profile of the creates phase "
                     f"({r['profile'].get('creates_per_s_under_profiler', '?')} creates/s under cProfile):")
        for row in r["profile"].get("top_self_time", [])[:12]:
            lines.append(f"  {row['self_pct']:>5.1f}%  {row['function']}")
    return "\n".join(lines)
