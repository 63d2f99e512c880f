"""The kubelet benchmark: pods started per second on one node, and resize latency (request -> actual).

One cluster (etcd, apiserver, one runtime and one kubelet with room for every pod), one run:

- ``api_creates_per_s``: pods created with no node (nothing but the API works on them), the
  baseline that says how much of a pod start is the API's;
- ``pods_started_per_s``: pods created bound to the node, from the first create to the last pod
  seen Running with its container ready (admission, sandbox, container, status writes through
  the real processes); ``start_ratio`` = pods_started_per_s / api_creates_per_s, and the
  create -> Running latency of each pod (p50, p99);
- ``resizes``: running pods resized 100m -> 200m CPU through the ``resize`` subresource, latency
  from the request to the pod's ``status.containerStatuses[].resources`` showing 200m (allocated,
  actuated by the runtime, read back, written), p50 / p99, and resizes completed per second;
- ``profile``: a second, smaller start phase with the kubelet under cProfile (CPU time), the
  functions that take the time.

Figures are from one run on a small noisy machine: compare ratios, not absolute numbers.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Callable

from bench import cpu, figures
from bench.api import _profile_summary, percentile, run_loop_result
from cli import cluster, topology
from machinery.api import core_pb2
from machinery.client import Client
from machinery.informer import Informer
from machinery.kinds import POD
from tests.harness.builders import MakePod

NODE = "node-1"


def _pod(name: str, node: str = NODE) -> core_pb2.Pod:
    pod = MakePod().name(name).label("app", "kubelet-bench").req(cpu="100m", memory="32Mi").node(node).grace(0).obj()
    pod.spec.containers[0].resize_policy.add(resource_name="cpu", restart_policy="NotRequired")
    return pod


def _running(pod: core_pb2.Pod) -> bool:
    return pod.status.phase == "Running" and bool(pod.status.container_statuses) and \
        all(cs.ready for cs in pod.status.container_statuses)


def _actual_cpu(pod: core_pb2.Pod) -> str:
    cs = pod.status.container_statuses[0] if pod.status.container_statuses else None
    return cs.resources.requests.get("cpu", "") if cs is not None else ""


class _Seen:
    """Times at which pods reached a state, from a watch (an informer) in this process."""

    def __init__(self, client: Client):
        self.informer = Informer(client, POD, label_selector="app=kubelet-bench")
        self.running: dict[str, float] = {}
        self.resized: dict[str, float] = {}
        self.informer.add_handler(self._see, lambda old, new: self._see(new))

    def _see(self, pod: core_pb2.Pod) -> None:
        now = time.perf_counter()
        name = pod.metadata.name
        if name not in self.running and _running(pod):
            self.running[name] = now
        if name not in self.resized and _actual_cpu(pod) == "200m":
            self.resized[name] = now

    async def until(self, what: dict[str, float], names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(n in what for n in names):
            if time.monotonic() > deadline:
                missing = [n for n in names if n not in what]
                raise TimeoutError(f"{len(missing)} pods never got there (e.g. {missing[:3]})")
            await asyncio.sleep(0.02)


async def _bounded(concurrency: int, jobs) -> None:
    it = iter(jobs)

    async def worker():
        for job in it:
            await job()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def _api_baseline(server: str, token: str, n: int) -> float:
    async with Client(server, token) as c:
        t0 = time.perf_counter()
        await _bounded(16, ((lambda i=i: c.pods.create(_pod(f"unbound-{i}", node=""))) for i in range(n)))
        rate = n / (time.perf_counter() - t0)
        await _bounded(16, ((lambda i=i: c.pods.delete(f"unbound-{i}", grace_period_seconds=0)) for i in range(n)))
    return rate


async def _start_and_resize(server: str, token: str, n_pods: int, n_resize: int, prefix: str,
                            mark: Callable[[str], None] = lambda label: None) -> dict:
    """Start ``n_pods`` pods, then resize ``n_resize`` of them; ``mark`` is called at "start" (before the
    first create), "started" (every pod Running) and "resized" (every resize seen actuated)."""
    async with Client(server, token) as c:
        seen = _Seen(c)
        await seen.informer.start()
        await seen.informer.wait_for_sync()
        names = [f"{prefix}-{i}" for i in range(n_pods)]
        sent: dict[str, float] = {}

        async def create(name: str) -> None:
            sent[name] = time.perf_counter()
            await c.pods.create(_pod(name))

        mark("start")
        t0 = time.perf_counter()
        await _bounded(16, ((lambda n=n: create(n)) for n in names))
        await seen.until(seen.running, names, timeout=120 + n_pods)
        mark("started")
        elapsed = max(seen.running[n] for n in names) - t0
        start_ms = [1000 * (seen.running[n] - sent[n]) for n in names]
        out: dict = {"pods": n_pods, "pods_started_per_s": round(n_pods / elapsed, 1),
                     "start_p50_ms": round(percentile(start_ms, 50), 1),
                     "start_p99_ms": round(percentile(start_ms, 99), 1)}

        if n_resize:
            targets = names[:n_resize]
            requested: dict[str, float] = {}

            async def resize(name: str) -> None:
                requested[name] = time.perf_counter()
                await c.pods.patch(name, {"spec": {"containers": [{"name": "c1", "resources": {
                    "requests": {"cpu": "200m"}}}]}}, subresource="resize")

            t1 = time.perf_counter()
            await _bounded(8, ((lambda n=n: resize(n)) for n in targets))
            await seen.until(seen.resized, targets, timeout=120 + n_resize)
            mark("resized")
            resize_ms = [1000 * (seen.resized[n] - requested[n]) for n in targets]
            out["resizes"] = {"pods": n_resize,
                              "per_s": round(n_resize / (max(seen.resized[n] for n in targets) - t1), 1),
                              "p50_ms": round(percentile(resize_ms, 50), 1),
                              "p99_ms": round(percentile(resize_ms, 99), 1)}
        await _bounded(16, ((lambda n=n: c.pods.delete(n, grace_period_seconds=0)) for n in names))
        await seen.informer.stop()
    return out


async def _wait_node_empty(server: str, token: str) -> None:
    async with Client(server, token) as c:
        while (await c.pods.list("default", label_selector="app=kubelet-bench")).items:
            await asyncio.sleep(0.1)


def profile_starts(state: cluster.ClusterState, n: int, out_dir: Path) -> dict:
    """The start phase again with the kubelet under cProfile; where its CPU time goes (the raw
    profile is kept as ``kubelet.prof`` next to the results, for ``python -m pstats``)."""
    kubelet = state.processes[f"kubelet/{NODE}"]
    out_dir.mkdir(parents=True, exist_ok=True)
    path = str(out_dir / "kubelet.prof")
    cluster.stop(kubelet)
    kubelet.env = {**kubelet.env, "KPLANE_PROFILE": path}
    ok, reason = cluster.start(state, kubelet, 60)
    if not ok:
        return {"error": f"kubelet did not restart for profiling: {reason}"}
    r = run_loop_result(_start_and_resize(state.server, state.admin_token(), n, 0, "prof"))
    run_loop_result(_wait_node_empty(state.server, state.admin_token()))
    cluster.stop(kubelet)
    kubelet.env = {k: v for k, v in kubelet.env.items() if k != "KPLANE_PROFILE"}
    return {"pods_started_per_s_under_profiler": r["pods_started_per_s"], "top_self_time": _profile_summary(path)}


def _per_op(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
    return {name: round(1000 * (after[name] - before[name]) / count, 2) for name in after}


def run(out_dir: Path, quick: bool = False) -> dict:
    n_pods, n_resize, n_profile = (60, 20, 30) if quick else (300, 100, 100)
    data = tempfile.mkdtemp(prefix="kplane-bench-kubelet-")
    cfg = topology.ClusterConfig(data_dir=data, nodes=1, node_cpu="512", node_memory="1Ti", node_pods=n_pods + 10,
                                 schedulers=0, controller_managers=0)  # bound by nodeName: the kubelet alone
    state = cluster.up(cfg, timeout=60, echo=lambda *_: None)
    result: dict = {"machine": {"cpus": os.cpu_count()}}
    try:
        server, token = state.server, state.admin_token()
        result["api_creates_per_s"] = round(run_loop_result(_api_baseline(server, token, n_pods)), 1)
        marks: dict[str, tuple[float, dict[str, float]]] = {}

        def mark(label: str) -> None:
            marks[label] = (time.perf_counter(), cpu.by_component(state))
        result.update(run_loop_result(_start_and_resize(server, token, n_pods, n_resize, "start", mark)))
        (t0, cpu0), (_, cpu1), (t2, cpu2) = marks["start"], marks["started"], marks.get("resized", marks["started"])
        # Which process was busy: CPU seconds per second of the start+resize phase (1.0 = one core).
        result["cpu_share_by_component"] = {name: round((cpu2[name] - cpu0[name]) / (t2 - t0), 2) for name in cpu2}
        # What a pod start (and a resize) costs each process: the start phase's CPU over the pods started.
        result["cpu_ms_per_pod_start_by_component"] = _per_op(cpu0, cpu1, n_pods)
        result["cpu_ms_per_pod_start_total"] = round(sum(result["cpu_ms_per_pod_start_by_component"].values()), 2)
        if n_resize:
            result["cpu_ms_per_resize_by_component"] = _per_op(cpu1, cpu2, n_resize)
            result["cpu_ms_per_resize_total"] = round(sum(result["cpu_ms_per_resize_by_component"].values()), 2)
        result["start_ratio"] = round(result["pods_started_per_s"] / result["api_creates_per_s"], 3)
        run_loop_result(_wait_node_empty(server, token))
        result["profile"] = profile_starts(state, n_profile, out_dir)
    finally:
        cluster.down(state, purge=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "kubelet.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def summary(r: dict) -> str:
    rz = r.get("resizes", {})
    lines = [
        f"API creates/s (no node):    {r['api_creates_per_s']:>8.0f}",
        f"pods started/s on 1 node:   {r['pods_started_per_s']:>8.1f}   ratio {r['start_ratio']:.2f} of the API's "
        f"creates; create -> Running p50 {r['start_p50_ms']:.0f} ms, p99 {r['start_p99_ms']:.0f} ms ({r['pods']} pods)",
        f"resize request -> actual:   p50 {rz.get('p50_ms', float('nan')):.0f} ms, "
        f"p99 {rz.get('p99_ms', float('nan')):.0f} ms, "
        f"{rz.get('per_s', float('nan')):.1f} resizes/s ({rz.get('pods', 0)} pods, 8 at a time)",
    ]
    for key, unit in (("api_creates_per_s", "creates/s (API, no node)"), ("pods_started_per_s", "pods started/s"),
                      ("per_s", "resizes/s")):
        scaled = figures.at_basis(rz if key == "per_s" else r, key, unit)
        if scaled:
            lines.append(f"  {scaled}")
    shares = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r.get("cpu_share_by_component", {}).items(),
                                                           key=lambda kv: -kv[1]))
    lines.append(f"CPU cores used during the phase, by process: {shares} (the bench client: the rest)")
    for key, what in (("cpu_ms_per_pod_start_by_component", "pod start"), ("cpu_ms_per_resize_by_component", "resize")):
        if key in r:
            lines.append(f"CPU ms per {what}: {figures.cpu_per_op(r, key, least=0.01)}")
    prof = r.get("profile", {})
    if prof.get("top_self_time"):
        lines.append(f"kubelet CPU profile of a start phase ({prof['pods_started_per_s_under_profiler']} pods/s under "
                     f"cProfile):")
        for row in prof["top_self_time"][:10]:
            lines.append(f"  {row['self_pct']:>5.1f}%  {row['function']}")
    elif prof.get("error"):
        lines.append(f"kubelet profile: {prof['error']}")
    return "\n".join(lines)
