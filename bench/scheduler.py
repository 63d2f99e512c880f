"""The scheduler benchmark: kube-scheduler's scheduler_perf workload shapes, through the real processes.

test/integration/scheduler_perf/config/performance-config.yaml, the 500-node variants, on a
cluster of etcd, the apiserver, one scheduler and 500 hollow nodes (real kubelets in one
process, 4 cpu / 32Gi / 110 pods each, as scheduler_perf's default node):

- ``SchedulingBasic``: 500 pods (100m, 500Mi) placed first, then 1000 measured;
- ``PreemptionBasic``: 2000 low-priority pods (900m, grace 0) fill the nodes, then 500
  measured priority-10 pods (3 cpu) each preempt three of them;
- ``Unschedulable`` (500Nodes/10Init/1kPods): 10 default pods, then 1000 measured default pods
  while a churn creates a priority-10 pod asking 9 cpu every 200 ms (it fits nowhere, and
  preemption cannot help: each is a full failing scan and then waits in the unschedulable pool).

For each, the measured pods are created by this process (16 at a time) and an informer here
records when each is seen bound: throughput = measured pods / (last bound - first create), and
the create -> bound latency p50 / p99. Unlike scheduler_perf (an in-process scheduler and no
kubelets), every step is a real gRPC call across processes and the hollow kubelets run the pods
they get — they compete for the same two cores. ``profile``: the first workload that missed its
target (SchedulingBasic, smaller, when none did) again with the scheduler under cProfile (CPU
time, measured phase only): its time by phase of the scheduling cycle, and the functions with the
most self time.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import pstats
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.api import _profile_summary, percentile, run_loop_result
from bench.kubelet import _bounded, _cpu_by_component
from cli import cluster, topology
from machinery.api import core_pb2, scheduling_pb2
from machinery.client import Client
from machinery.informer import Informer
from machinery.kinds import POD

TARGETS = {"SchedulingBasic": 300.0, "PreemptionBasic": 100.0}
CHURN_INTERVAL = 0.2  # scheduler_perf's churn op: intervalMilliseconds 200
LABEL = "kplane.dev/bench"


@dataclass(frozen=True)
class Template:
    cpu: str
    memory: str = "500Mi"
    priority: int = 0
    grace: int | None = None
    limits: bool = True


POD_DEFAULT = Template("100m")
POD_LOW_PRIORITY = Template("900m", grace=0)
POD_HIGH_PRIORITY = Template("3", priority=10)
POD_HIGH_PRIORITY_LARGE_CPU = Template("9", priority=10, limits=False)


@dataclass(frozen=True)
class Workload:
    name: str
    init: tuple[tuple[int, Template, bool], ...]  # (count, template, wait until bound)
    measure: tuple[int, Template]
    churn: Template | None = None  # created every CHURN_INTERVAL while the measured pods are scheduled


def workloads(scale: float) -> list[Workload]:
    def n(x: int) -> int:
        return max(1, int(x * scale))
    return [
        Workload("SchedulingBasic", ((n(500), POD_DEFAULT, True),), (n(1000), POD_DEFAULT)),
        Workload("PreemptionBasic", ((n(2000), POD_LOW_PRIORITY, True),), (n(500), POD_HIGH_PRIORITY)),
        Workload("Unschedulable", ((10, POD_DEFAULT, True),), (n(1000), POD_DEFAULT),
                 churn=POD_HIGH_PRIORITY_LARGE_CPU),
    ]


def _pod(name: str, t: Template, phase: str) -> core_pb2.Pod:
    pod = core_pb2.Pod(api_version="v1", kind="Pod")
    pod.metadata.name, pod.metadata.namespace = name, "default"
    pod.metadata.labels[LABEL] = phase
    c = pod.spec.containers.add(name="pause", image="registry.k8s.io/pause:3.10")
    c.ports.add(container_port=80)
    c.resources.requests.update({"cpu": t.cpu, "memory": t.memory})
    if t.limits:
        c.resources.limits.update({"cpu": t.cpu, "memory": t.memory})
    if t.priority:
        pod.spec.priority_class_name = f"bench-priority-{t.priority}"
    if t.grace is not None:
        pod.spec.termination_grace_period_seconds = t.grace
    return pod


class _Bound:
    """When each pod was first seen with a node, from a watch in this process."""

    def __init__(self, client: Client):
        self.informer = Informer(client, POD, label_selector=LABEL)
        self.at: dict[str, float] = {}
        self.informer.add_handler(self._see, lambda old, new: self._see(new))

    def _see(self, pod: core_pb2.Pod) -> None:
        if pod.spec.node_name and pod.metadata.name not in self.at:
            self.at[pod.metadata.name] = time.perf_counter()

    async def until(self, names: list[str], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not all(n in self.at for n in names):
            if time.monotonic() > deadline:
                missing = [n for n in names if n not in self.at]
                raise TimeoutError(f"{len(missing)} of {len(names)} pods never bound (e.g. {missing[:3]})")
            await asyncio.sleep(0.05)


async def _create(c: Client, names: list[str], t: Template, phase: str, sent: dict[str, float]) -> None:
    async def one(name: str) -> None:
        sent[name] = time.perf_counter()
        await c.pods.create(_pod(name, t, phase))
    await _bounded(16, ((lambda n=n: one(n)) for n in names))


async def _churn(c: Client, t: Template) -> None:
    """scheduler_perf's churn op in create mode: one more pod every CHURN_INTERVAL, until cancelled."""
    for k in itertools.count():
        await c.pods.create(_pod(f"churn-{k}", t, "churn"))
        await asyncio.sleep(CHURN_INTERVAL)


async def _run_workload(server: str, token: str, w: Workload, mark=lambda label: None) -> dict:
    async with Client(server, token, timeout=60) as c:
        # scheduler_perf sets spec.priority directly (its apiserver runs without the Priority admission
        # plugin); kplane's apiserver resolves it from a PriorityClass, as Kubernetes does.
        for t in {t for _, t, _ in w.init} | {w.measure[1]} | ({w.churn} if w.churn else set()):
            if t.priority:
                pc = scheduling_pb2.PriorityClass(api_version="scheduling.k8s.io/v1", kind="PriorityClass",
                                                  value=t.priority)
                pc.metadata.name = f"bench-priority-{t.priority}"
                await c.priority_classes.create(pc)
        bound = _Bound(c)
        await bound.informer.start()
        await bound.informer.wait_for_sync()
        sent: dict[str, float] = {}
        for i, (count, t, wait) in enumerate(w.init):
            names = [f"init{i}-{k}" for k in range(count)]
            await _create(c, names, t, "init", sent)
            if wait:
                await bound.until(names, timeout=600)
        count, t = w.measure
        names = [f"measure-{k}" for k in range(count)]
        churn = asyncio.create_task(_churn(c, w.churn)) if w.churn else None
        mark("measure-start")
        t0 = time.perf_counter()
        try:
            await _create(c, names, t, "measure", sent)
            await bound.until(names, timeout=900)
            mark("measure-end")
        finally:
            if churn is not None:
                churn.cancel()
                await asyncio.gather(churn, return_exceptions=True)
        last = max(bound.at[n] for n in names)
        latencies = [1000 * (bound.at[n] - sent[n]) for n in names]
        await bound.informer.stop()
    await asyncio.sleep(0.2)  # let gRPC finish cancelling the watch before the loop closes
    return {"measured_pods": count, "pods_per_s": round(count / (last - t0), 1),
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1)}


def _scheduler_metrics(state: cluster.ClusterState) -> dict[str, float]:
    import urllib.request
    proc = state.processes["scheduler"]
    with urllib.request.urlopen(f"http://{proc.admin}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("scheduler_schedule_attempts_total", "scheduler_preemption_attempts_total",
                            "scheduler_preemption_victims_count", "scheduler_pod_scheduled_after_flush_total")):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def _cluster(nodes: int, profile_path: str = "") -> cluster.ClusterState:
    data = tempfile.mkdtemp(prefix="kplane-bench-sched-")
    cfg = topology.ClusterConfig(data_dir=data, nodes=0, hollow_nodes=nodes, node_cpu="4", node_memory="32Gi",
                                 node_pods=110, schedulers=1)
    state = cluster.up(cfg, timeout=300, echo=lambda *_: None)
    if profile_path:
        sched = state.processes["scheduler"]
        cluster.stop(sched)
        sched.env = {**sched.env, "KPLANE_PROFILE": profile_path}
        ok, reason = cluster.start(state, sched, 60)
        if not ok:
            cluster.down(state, purge=True)
            raise RuntimeError(f"scheduler did not restart for profiling: {reason}")
    return state


def run_one(w: Workload, nodes: int) -> dict:
    state = _cluster(nodes)
    try:
        marks: dict[str, tuple[float, dict[str, float]]] = {}
        r = run_loop_result(_run_workload(state.server, state.admin_token(), w, mark=lambda label: marks.__setitem__(
            label, (time.perf_counter(), _cpu_by_component(state)))))
        (t0, cpu_before), (t1, cpu_after) = marks["measure-start"], marks["measure-end"]
        wall = t1 - t0
        # The measured phase only: each component's share of a core, and its CPU per measured pod.
        r["cpu_share_by_component"] = {k: round((cpu_after[k] - cpu_before[k]) / wall, 2) for k in cpu_after}
        r["cpu_ms_per_pod_by_component"] = {k: round(1000 * (cpu_after[k] - cpu_before[k]) / r["measured_pods"], 1)
                                            for k in cpu_after}
        r["scheduler_metrics"] = _scheduler_metrics(state)
        target = TARGETS.get(w.name)
        if target:
            r["target_pods_per_s"] = target
            r["target_met"] = r["pods_per_s"] >= target
        return r
    finally:
        cluster.down(state, purge=True)


# Where the scheduler's CPU goes, by phase: (phase, file, function) whose cumulative time counts.
PHASES = [
    ("Filter (find nodes that fit)", "schedule_one.py", "find_nodes_that_fit"),
    ("Score", "schedule_one.py", "prioritize_nodes"),
    ("PostFilter: preemption dry run", "evaluator.py", "find_candidates"),
    ("PostFilter: pick a node", "evaluator.py", "pick_one_node"),
    ("binding cycle", "schedule_one.py", "binding_cycle"),
    ("informer events (decode, cache, queue)", "informer.py", "_run"),
    ("API calls (client side)", "client.py", "call"),
]


def _phases(path: str) -> list[dict]:
    stats = pstats.Stats(path)
    total = stats.total_tt or 1.0
    out = []
    for phase, file, fn in PHASES:
        ct = sum(v[3] for (f, _, name), v in stats.stats.items() if name == fn and f.endswith("/" + file))
        out.append({"phase": phase, "cumulative_s": round(ct, 3), "pct": round(100 * ct / total, 1)})
    return out


def profile(nodes: int, out_dir: Path, scale: float, w: Workload | None = None) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = str(out_dir / "scheduler.prof")
    if w is None:
        w = Workload("SchedulingBasic", ((max(1, int(200 * scale)), POD_DEFAULT, True),),
                     (max(1, int(500 * scale)), POD_DEFAULT))
    state = _cluster(nodes, path)
    pid = state.processes["scheduler"].pid

    def measured_only(label: str) -> None:
        if label == "measure-start":
            os.kill(pid, signal.SIGUSR1)  # the profile forgets the setup phase (machinery.process)

    try:
        r = run_loop_result(_run_workload(state.server, state.admin_token(), w, mark=measured_only))
    finally:
        cluster.down(state, purge=True)
    return {"workload": w.name, "pods_per_s_under_profiler": r["pods_per_s"], "phases": _phases(path),
            "top_self_time": _profile_summary(path)}


def run(out_dir: Path, quick: bool = False) -> dict:
    nodes, scale = (100, 0.2) if quick else (500, 1.0)
    result: dict = {"machine": {"cpus": os.cpu_count()}, "nodes": nodes, "workloads": {}}
    for w in workloads(scale):
        print(f"  {w.name} ...", flush=True)
        result["workloads"][w.name] = run_one(w, nodes)
    missed = [w for w in workloads(scale) if result["workloads"][w.name].get("target_met") is False]
    result["profile"] = profile(nodes, out_dir, scale, missed[0] if missed else None)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scheduler.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def summary(r: dict) -> str:
    lines = [f"{r['nodes']} hollow nodes (4 cpu, 32Gi, 110 pods), create -> bound through the real processes, "
             f"event loop {os.environ.get('KPLANE_EVENT_LOOP') or 'asyncio'}:"]
    for name, w in r["workloads"].items():
        target = f"   target >= {w['target_pods_per_s']:.0f}: {'met' if w['target_met'] else 'MISSED'}" \
            if "target_pods_per_s" in w else ""
        lines.append(f"  {name:<16} {w['pods_per_s']:>7.1f} pods/s   p50 {w['p50_ms']:>7.0f} ms   "
                     f"p99 {w['p99_ms']:>7.0f} ms   ({w['measured_pods']} pods){target}")
        shares = ", ".join(f"{k} {v:.2f}" for k, v in sorted(w["cpu_share_by_component"].items(), key=lambda kv: -kv[1])
                           if v >= 0.01)
        lines.append(f"  {'':<16} CPU cores: {shares}")
        per_pod = ", ".join(f"{k} {v:.1f}" for k, v in sorted(w["cpu_ms_per_pod_by_component"].items(),
                                                                key=lambda kv: -kv[1]) if v >= 0.1)
        lines.append(f"  {'':<16} CPU ms per measured pod: {per_pod}")
        sets = w.get("scheduler_metrics", {}).get("scheduler_preemption_victims_count")
        if sets:  # one victim set per preemptor, whatever the event loop (a second one over-preempts)
            lines.append(f"  {'':<16} victim sets chosen: {sets:.0f} for {w['measured_pods']} measured pods")
    prof = r.get("profile", {})
    if prof.get("top_self_time"):
        lines.append(f"scheduler CPU profile of {prof['workload']} ({prof['pods_per_s_under_profiler']} pods/s under "
                     f"cProfile), by phase (cumulative, they overlap where one calls another):")
        for row in prof["phases"]:
            lines.append(f"  {row['pct']:>5.1f}%  {row['phase']}")
        lines.append("and the functions with the most self time:")
        for row in prof["top_self_time"][:12]:
            lines.append(f"  {row['self_pct']:>5.1f}%  {row['function']}")
    return "\n".join(lines)
