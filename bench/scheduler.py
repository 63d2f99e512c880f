"""The scheduler benchmark: kube-scheduler's scheduler_perf workload shapes, through the real processes.

test/integration/scheduler_perf/config/performance-config.yaml, the 500-node variants, on a
cluster of etcd, the apiserver, one scheduler and 500 hollow nodes (real kubelets in one
process, 4 cpu / 32Gi / 110 pods each, as scheduler_perf's default node). Unlike scheduler_perf
(an in-process scheduler and no kubelets), every step is a real gRPC call across processes and the
hollow kubelets run the pods they get — they compete for the same two cores.

- ``workloads``: the workloads and their shapes; ``run``: each on a fresh cluster.
- ``_run_workload``, ``_run_resize_workload``, ``_run_replicaset_workload``, ``run_claim_template``,
  ``run_claim_burst``: how each is measured.
- ``profile``: where the scheduler's CPU goes, under cProfile.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import json
import os
import signal
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Coroutine

from bench import cpu, figures
from bench.api import _profile_summary, load_profile, percentile, run_loop_result
from bench.kubelet import _bounded, _running
from cli import cluster, topology
from controllers.resourceclaim import FP_BEFORE_SYNC_POD as FP_HOLD_CLAIMS
from machinery.api import apps_pb2, core_pb2, resource_pb2, scheduling_pb2
from machinery.client import Client
from machinery.informer import Informer
from machinery.kinds import POD
from machinery.process import UVLOOP_COMPONENTS
from machinery.quantity import Quantity

# Measured operations per second (docs/performance.md's targets); a run states whether it met them
# (a benchmark, not a test).
TARGETS = {"SchedulingBasic": 500.0, "PreemptionBasic": 100.0, "Unschedulable": 500.0, "ResizePreemption": 80.0}
GROWTH_TARGET = 0.7  # SchedulingBasic at 5,000 nodes over at 500 (docs/performance.md)
KEP_6132_TARGET = 0.5  # ClaimBurst: scheduler CPU per pod, gate on over off, at the largest N
CHURN_INTERVAL = 0.2  # scheduler_perf's churn op: intervalMilliseconds 200
LABEL = "kplane.dev/bench"
RESIZE_GATE = "SchedulerPreemptionForPodResize=true"
RESIZE_CONDITIONS = ("PodResizePending", "PodResizeInProgress")
PRE_QUEUEING_HINTS = "SchedulerPreQueueingHints"  # KEP-6132's gate, off then on
DRA_DEVICE_CLASS = "gpu.kplane.dev"  # the class kplane up creates for the fake driver
CLAIM_EVENTS = ("ResourceClaimAdd", "ResourceClaimUpdate")


@dataclass(frozen=True)
class Template:
    cpu: str
    memory: str = "500Mi"
    priority: int = 0
    grace: int | None = None
    limits: bool = True
    resizable: bool = False  # a cpu resizePolicy NotRequired: resized in place, without a restart


POD_DEFAULT = Template("100m")
POD_LOW_PRIORITY = Template("900m", grace=0)
POD_HIGH_PRIORITY = Template("3", priority=10)
POD_HIGH_PRIORITY_LARGE_CPU = Template("9", priority=10, limits=False)
# Requests only (Burstable): a resize keeps the QoS class, and there is no limit to raise with the request.
POD_RESIZER = Template("2", priority=1000, limits=False, resizable=True)
POD_RESIZE_FILLER = Template("1", grace=0)


@dataclass(frozen=True)
class Workload:
    """Pods created through the scheduler: throughput in pods bound per second."""
    UNIT: ClassVar[str] = "pod"
    name: str
    init: tuple[tuple[int, Template, bool], ...]  # (count, template, wait until bound)
    measure: tuple[int, Template]
    churn: Template | None = None  # created every CHURN_INTERVAL while the measured pods are scheduled
    feature_gates: str = ""
    node_factor: int = 1  # hollow nodes: this many times the run's (SchedulingBasic5000Nodes: 10)


@dataclass(frozen=True)
class ResizeWorkload:
    """KEP-5836 on every node of the cluster: a ``resizer`` and ``fillers`` bound by spec.nodeName take
    the node's cpu; each resizer is resized to ``resize_to``, which fits once one filler is preempted.
    Throughput in resizes actuated per second."""
    UNIT: ClassVar[str] = "resize"
    name: str
    resizer: Template
    fillers: tuple[int, Template]  # (per node, template)
    resize_to: str
    feature_gates: str = RESIZE_GATE


@dataclass(frozen=True)
class ReplicaSetWorkload:
    """A ReplicaSet scaled from 0 to ``replicas`` through its scale subresource: the controller-manager's
    replicaset controller creates the pods, the scheduler places them, the hollow kubelets run them.
    Throughput in pods Running per second, from the scale request to the last pod Running."""
    UNIT: ClassVar[str] = "pod"
    name: str
    replicas: int
    template: Template
    feature_gates: str = ""


@dataclass(frozen=True)
class ClaimTemplateWorkload:
    """scheduler_perf's SchedulingWithResourceClaimTemplate at each of ``sizes`` pods: ``nodes`` hollow
    nodes whose driver publishes ``devices_per_node`` GPUs; half the pods (each with a claim from one
    ResourceClaimTemplate) placed first, half measured; each size with the gate
    SchedulerPreQueueingHints off and on, ``repeats`` times. Throughput in pods bound per second."""
    UNIT: ClassVar[str] = "pod"
    name: str
    sizes: tuple[int, ...]
    nodes: int
    devices_per_node: int
    repeats: int = 1


@dataclass(frozen=True)
class ClaimBurstWorkload:
    """KEP-6132's situation (its Motivation): at each of ``sizes`` N pods, each with a claim from one
    ResourceClaimTemplate, wait in the scheduler's unschedulable pool — gated by DynamicResources'
    PreEnqueue, their claims not made yet: the resourceclaim controller held back by its failpoint —
    when the claim events come: let go, the controller makes N claims and writes N pod statuses,
    then the scheduler's PreBind allocates them, each claim event a requeue. Measured from the
    let-go until every pod is bound; the headline is the scheduler's CPU per pod. Each size with
    the gate SchedulerPreQueueingHints off and on, ``runs`` times in alternating order, each on a
    fresh cluster of ``nodes`` hollow nodes with ``devices_per_node`` GPUs; the median and spread."""
    UNIT: ClassVar[str] = "pod"
    name: str
    sizes: tuple[int, ...]
    nodes: int
    devices_per_node: int
    runs: int = 5


AnyWorkload = Workload | ResizeWorkload | ReplicaSetWorkload
ClaimWorkload = ClaimTemplateWorkload | ClaimBurstWorkload


def workloads(scale: float) -> list[AnyWorkload | ClaimWorkload]:
    """The workloads, their counts scaled by ``scale``:

    - ``SchedulingBasic``: 500 pods (100m, 500Mi) placed first, then 1000 measured;
    - ``SchedulingBasic5000Nodes`` (5000Nodes_10000Pods): the same on ten times the nodes, 5,000
      pods placed first, 10,000 measured; the summary gives its rate over SchedulingBasic's (the
      growth; the target is at least 0.7);
    - ``PreemptionBasic``: 2000 low-priority pods (900m, grace 0) fill the nodes, then 500
      measured priority-10 pods (3 cpu) each preempt three of them;
    - ``Unschedulable`` (500Nodes/10Init/1kPods): 10 default pods, then 1000 measured default pods
      while a churn creates a priority-10 pod asking 9 cpu every 200 ms (it fits nowhere, and
      preemption cannot help: each is a full failing scan and then waits in the unschedulable pool);
    - ``ResizePreemption`` (kplane's, no scheduler_perf counterpart yet): KEP-5836 "Scheduler
      Preemption for In-Place Pod Resize", the gate SchedulerPreemptionForPodResize on in every
      process of this workload's cluster only. Every node gets, bound by ``spec.nodeName`` (no
      scheduling, so placement is exact), a priority-1000 "resizer" (2 cpu, requests only, cpu
      resizePolicy NotRequired) and two priority-0 fillers (1 cpu, grace 0): the node's 4 cpu are
      taken. The measured phase resizes every resizer to 3 cpu; the kubelet Defers it, the scheduler
      preempts one filler on that node, the kubelet actuates the resize;
    - ``ReplicaSetScaleUp`` (kplane's; the controller-manager's replicaset controller in the loop): a
      ReplicaSet of 100m/500Mi pods scaled from 0 to 2000 through its scale subresource, measured from
      the scale request until every pod Runs; this workload's cluster alone runs a controller-manager,
      whose CPU per pod the summary gives.
    - ``SchedulingWithResourceClaimTemplate`` (test/integration/scheduler_perf/dra/performance-config.yaml,
      its 2000pods_100nodes shape: 100 nodes with devices, 20 claims per node, half the pods placed
      first, half measured — the cluster full at 2,000): KEP-6132's benchmark. Each hollow node's fake
      driver publishes 20 GPUs (``--dra-devices 20``), a controller-manager's resourceclaim controller
      makes every pod's claim from the ResourceClaimTemplate; pods created in a burst (16 requests in
      flight). Run at 500, 1,000 and 2,000 pods, each with the gate SchedulerPreQueueingHints off and
      on, each on a fresh cluster, twice (``run_claim_template``). ``--quick``: 20 nodes, 100/200/400
      pods, once;
    - ``ClaimBurst`` (kplane's): KEP-6132's own situation, N pods waiting for their claims when the
      claim events come (``ClaimBurstWorkload``): 100 nodes x 50 GPUs, N = 500, 2,000 and 5,000,
      five runs per setting of the gate (``run_claim_burst``). ``--quick``: 20 nodes x 20 GPUs,
      100/200/400 pods, once.
    """
    def n(x: int) -> int:
        return max(1, int(x * scale))
    quick = scale < 1.0
    return [
        Workload("SchedulingBasic", ((n(500), POD_DEFAULT, True),), (n(1000), POD_DEFAULT)),
        # scheduler_perf's 5000Nodes_10000Pods: growth, not a rate alone (the summary gives the ratio).
        Workload("SchedulingBasic5000Nodes", ((n(5000), POD_DEFAULT, True),), (n(10000), POD_DEFAULT),
                 node_factor=10),
        Workload("PreemptionBasic", ((n(2000), POD_LOW_PRIORITY, True),), (n(500), POD_HIGH_PRIORITY)),
        Workload("Unschedulable", ((10, POD_DEFAULT, True),), (n(1000), POD_DEFAULT),
                 churn=POD_HIGH_PRIORITY_LARGE_CPU),
        ResizeWorkload("ResizePreemption", POD_RESIZER, (2, POD_RESIZE_FILLER), "3"),  # one resizer per node
        ReplicaSetWorkload("ReplicaSetScaleUp", n(2000), POD_DEFAULT),
        ClaimTemplateWorkload("SchedulingWithResourceClaimTemplate", (100, 200, 400) if quick else (500, 1000, 2000),
                              nodes=20 if quick else 100, devices_per_node=20, repeats=1 if quick else 2),
        ClaimBurstWorkload("ClaimBurst", (100, 200, 400) if quick else (500, 2000, 5000),
                           nodes=20 if quick else 100, devices_per_node=20 if quick else 50, runs=1 if quick else 5),
    ]


def _pod(name: str, t: Template, phase: str, node: str = "") -> core_pb2.Pod:
    pod = core_pb2.Pod(api_version="v1", kind="Pod")
    pod.metadata.name, pod.metadata.namespace = name, "default"
    pod.metadata.labels[LABEL] = phase
    c = pod.spec.containers.add(name="pause", image="registry.k8s.io/pause:3.10")
    c.ports.add(container_port=80)
    c.resources.requests.update({"cpu": t.cpu, "memory": t.memory})
    if t.limits:
        c.resources.limits.update({"cpu": t.cpu, "memory": t.memory})
    if t.resizable:
        c.resize_policy.add(resource_name="cpu", restart_policy="NotRequired")
    if t.priority:
        pod.spec.priority_class_name = f"bench-priority-{t.priority}"
    if t.grace is not None:
        pod.spec.termination_grace_period_seconds = t.grace
    if node:
        pod.spec.node_name = node
    return pod


async def _priority_classes(c: Client, templates: set[Template]) -> None:
    # scheduler_perf sets spec.priority directly (its apiserver runs without the Priority admission
    # plugin); kplane's apiserver resolves it from a PriorityClass, as Kubernetes does.
    for t in templates:
        if t.priority:
            pc = scheduling_pb2.PriorityClass(api_version="scheduling.k8s.io/v1", kind="PriorityClass",
                                              value=t.priority)
            pc.metadata.name = f"bench-priority-{t.priority}"
            await c.priority_classes.create(pc)


async def _until(at: dict[str, float], names: list[str], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not all(n in at for n in names):
        if time.monotonic() > deadline:
            missing = [n for n in names if n not in at]
            raise TimeoutError(f"{len(missing)} of {len(names)} pods never {what} (e.g. {missing[:3]})")
        await asyncio.sleep(0.05)


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
        await _until(self.at, names, timeout, "bound")


class _ResizeSeen:
    """From a watch in this process: when each pod first ran; when each resizer was first seen
    Deferred and first seen actuated at ``cpu``; per node, when a filler was first seen marked
    DisruptionTarget (the scheduler chose it) and first seen deleted; the node of every filler deleted."""

    def __init__(self, client: Client, cpu: str):
        self.informer = Informer(client, POD, label_selector=LABEL)
        self.cpu = Quantity(cpu)
        self.running: dict[str, float] = {}
        self.deferred: dict[str, float] = {}
        self.actuated: dict[str, float] = {}
        self.marked_on: dict[str, float] = {}  # node -> first filler seen with DisruptionTarget
        self.deleted_on: dict[str, float] = {}  # node -> first filler seen deleted
        self.deleted: dict[str, str] = {}  # name -> node, fillers only
        self.informer.add_handler(self._see, lambda old, new: self._see(new), self._gone)

    def _see(self, pod: core_pb2.Pod) -> None:
        now, name = time.perf_counter(), pod.metadata.name
        if name not in self.running and _running(pod):
            self.running[name] = now
        if pod.metadata.labels.get(LABEL) == "filler":
            if any(c.type == "DisruptionTarget" and c.status == "True" for c in pod.status.conditions):
                self.marked_on.setdefault(pod.spec.node_name, now)
            return
        pending = {c.type: c.reason for c in pod.status.conditions if c.type in RESIZE_CONDITIONS}
        if name not in self.deferred and pending.get("PodResizePending") == "Deferred":
            self.deferred[name] = now
        cs = pod.status.container_statuses
        if name not in self.actuated and not pending and cs and \
                Quantity(cs[0].resources.requests.get("cpu", "0")) == self.cpu:
            self.actuated[name] = now

    def _gone(self, pod: core_pb2.Pod) -> None:
        if pod.metadata.labels.get(LABEL) == "filler":
            self.deleted[pod.metadata.name] = pod.spec.node_name
            self.deleted_on.setdefault(pod.spec.node_name, time.perf_counter())


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
    """SchedulingBasic, PreemptionBasic and Unschedulable: the measured pods are created by this process
    (16 at a time) and an informer here records when each is seen bound: throughput = measured pods /
    (last bound - first create), and the create -> bound latency p50 / p99."""
    async with Client(server, token, timeout=60) as c:
        await _priority_classes(c, {t for _, t, _ in w.init} | {w.measure[1]} | ({w.churn} if w.churn else set()))
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


def _claim_pod(name: str, phase: str) -> core_pb2.Pod:
    """scheduler_perf's pod-with-claim-template.yaml: a pause container using the claim "resource",
    which comes from the template "test-claim-template"."""
    pod = core_pb2.Pod(api_version="v1", kind="Pod")
    pod.metadata.name, pod.metadata.namespace = name, "default"
    pod.metadata.labels[LABEL] = phase
    c = pod.spec.containers.add(name="pause", image="registry.k8s.io/pause:3.10.1")
    c.resources.claims.add(name="resource")
    pod.spec.resource_claims.add(name="resource", resource_claim_template_name="test-claim-template")
    return pod


async def _claim_template(c: Client) -> None:
    """scheduler_perf's resourceclaimtemplate.yaml: one device of the driver's class."""
    t = resource_pb2.ResourceClaimTemplate()
    t.metadata.name, t.metadata.namespace = "test-claim-template", "default"
    t.spec.spec.devices.requests.add(name="req-0").exactly.device_class_name = DRA_DEVICE_CLASS
    await c.resource_claim_templates.create(t)


async def _run_claim_template_workload(state: cluster.ClusterState, pods: int, mark=lambda label: None) -> dict:
    """Half of ``pods`` created and bound, then the other half — measured — in one burst."""
    async with Client(state.server, state.admin_token(), timeout=60) as c:
        await _claim_template(c)
        bound = _Bound(c)
        await bound.informer.start()
        await bound.informer.wait_for_sync()
        sent: dict[str, float] = {}

        async def create(names: list[str], phase: str) -> None:
            async def one(name: str) -> None:
                sent[name] = time.perf_counter()
                await c.pods.create(_claim_pod(name, phase))
            await _bounded(16, ((lambda n=n: one(n)) for n in names))

        init = [f"init-{k}" for k in range(pods // 2)]
        await create(init, "init")
        await bound.until(init, timeout=900)
        names = [f"measure-{k}" for k in range(pods - len(init))]
        mark("measure-start")
        t0 = time.perf_counter()
        await create(names, "measure")
        await bound.until(names, timeout=900)
        mark("measure-end")
        last = max(bound.at[n] for n in names)
        latencies = [1000 * (bound.at[n] - sent[n]) for n in names]
        await bound.informer.stop()
    await asyncio.sleep(0.2)  # let gRPC finish cancelling the watch before the loop closes
    return {"measured_pods": len(names), "pods_per_s": round(len(names) / (last - t0), 1),
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1)}


def _metric_sums(state: cluster.ClusterState, component: str, wanted: dict[str, tuple[str, ...]]) -> dict[str, float]:
    """Per key, the sum of ``component``'s series whose line starts with any of its prefixes."""
    import urllib.request
    with urllib.request.urlopen(f"http://{state.processes[component].admin}/metrics", timeout=10) as resp:
        lines = resp.read().decode().splitlines()
    return {key: sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefixes))
            for key, prefixes in wanted.items()}


# What the measured phase of SchedulingWithResourceClaimTemplate reads from the scheduler.
_CLAIM_METRICS = {
    "claim_events": tuple(f'scheduler_event_handling_duration_seconds_count{{event="{e}"}}' for e in CLAIM_EVENTS),
    "claim_hint_calls": tuple(f'scheduler_queueing_hint_execution_duration_seconds_count{{event="{e}",'
                              for e in CLAIM_EVENTS),
    "hint_calls": ("scheduler_queueing_hint_execution_duration_seconds_count{",),
    "narrowed": ('scheduler_pre_queueing_hint_evaluations_total{plugin="DynamicResources",result="narrowed"}',),
    "all_pods": ('scheduler_pre_queueing_hint_evaluations_total{plugin="DynamicResources",result="all_pods"}',),
    "after_flush": ("scheduler_pod_scheduled_after_flush_total ",),
}


Measure = Callable[[cluster.ClusterState, int, Callable[[str], None]], Coroutine[Any, Any, dict]]


def _claim_run(w: ClaimWorkload, pods: int, gate: bool, measure: Measure) -> dict:
    """One size, one setting of the gate, on a cluster of its own: ``measure(state, pods, mark)``'s result,
    the cost of the phase it marked and the scheduler's claim events and hint calls in it."""
    state = _cluster(w.nodes, feature_gates=f"{PRE_QUEUEING_HINTS}={'true' if gate else 'false'}",
                     controller_managers=1, dra_devices=w.devices_per_node)
    try:
        marks: dict[str, tuple[_Mark, dict[str, float]]] = {}

        def mark(label: str) -> None:
            marks[label] = (_Mark.now(state), _metric_sums(state, "scheduler", _CLAIM_METRICS))
        r = run_loop_result(measure(state, pods, mark))
        (start, m0), (end, m1) = marks["measure-start"], marks["measure-end"]
        delta = {k: m1[k] - m0[k] for k in m1}
        r.update(_measured_phase(start, end, r["measured_pods"], "pod", w.nodes))
        r["measured_phase"] = {k: int(v) for k, v in delta.items()}
        r["claim_hint_calls_per_claim_event"] = round(delta["claim_hint_calls"] / max(1.0, delta["claim_events"]), 2)
        return r
    finally:
        cluster.down(state, purge=True)


def _alternating(runs: int, one: Callable[[bool], dict], what: str) -> dict[str, list[dict]]:
    """``one(gate)`` ``runs`` times per setting of the gate, off, on, then on, off, ... so that a
    burst of load from outside the benchmark costs one side one try, not the ratio."""
    tries: dict[str, list[dict]] = {"off": [], "on": []}
    for attempt in range(runs):
        for gate in ((False, True) if attempt % 2 == 0 else (True, False)):
            print(f"    {what}, {PRE_QUEUEING_HINTS}={'on' if gate else 'off'} ...", flush=True)
            tries["on" if gate else "off"].append(one(gate))
    return tries


def run_claim_template(w: ClaimTemplateWorkload) -> dict:
    """Each size with the gate off and on, ``repeats`` times in alternating order; per setting the
    run with the most pods/s, and the on/off ratio of those.

    Twice in the full run: off, on, then on, off, the best of each, so that a burst of load from
    outside the benchmark costs one side one try, not the ratio. It gives pods/s for both, their
    ratio, and the DynamicResources QueueingHint calls per ResourceClaim event of the measured phase
    (the scheduler's ``scheduler_queueing_hint_execution_duration_seconds_count`` over its
    ``scheduler_event_handling_duration_seconds_count``)."""
    out: dict = {"nodes": w.nodes, "devices_per_node": w.devices_per_node, "repeats": w.repeats, "sizes": {}}
    for pods in w.sizes:
        tries = _alternating(w.repeats, functools.partial(_claim_run, w, pods, measure=_run_claim_template_workload),
                             f"{pods} pods")
        runs: dict = {g: max(results, key=lambda r: r["pods_per_s"]) for g, results in tries.items()}
        runs["ratio"] = round(runs["on"]["pods_per_s"] / runs["off"]["pods_per_s"], 2)
        runs["pods_per_s_of_each_try"] = {g: [r["pods_per_s"] for r in results] for g, results in tries.items()}
        out["sizes"][str(pods)] = runs
    return out


def _gated(state: cluster.ClusterState) -> int:
    """Pods the scheduler holds gated by a PreEnqueue plugin (``scheduler_pending_pods{queue="gated"}``)."""
    return int(_metric_sums(state, "scheduler", {"gated": ('scheduler_pending_pods{queue="gated"}',)})["gated"])


async def _run_claim_burst_workload(state: cluster.ClusterState, pods: int, mark=lambda label: None) -> dict:
    """N pods created with the resourceclaim controller held back, seen all gated in the scheduler,
    then the controller let go: pods/s and latency from the let-go to each pod bound."""
    manager = state.processes["controller-manager"]
    async with Client(state.server, state.admin_token(), timeout=60) as c:
        await _claim_template(c)
        bound = _Bound(c)
        await bound.informer.start()
        await bound.informer.wait_for_sync()
        cluster.arm_failpoint(manager, FP_HOLD_CLAIMS, "pause")
        names = [f"burst-{k}" for k in range(pods)]
        await _bounded(16, ((lambda n=n: c.pods.create(_claim_pod(n, "burst"))) for n in names))
        deadline = time.monotonic() + 600
        while (gated := await asyncio.to_thread(_gated, state)) < pods:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{gated} of {pods} pods gated in the scheduler")
            await asyncio.sleep(0.2)
        mark("measure-start")
        t0 = time.perf_counter()
        await asyncio.to_thread(cluster.arm_failpoint, manager, FP_HOLD_CLAIMS, "off")
        await bound.until(names, timeout=3600)
        mark("measure-end")
        latencies = [1000 * (bound.at[n] - t0) for n in names]
        await bound.informer.stop()
    await asyncio.sleep(0.2)  # let gRPC finish cancelling the watch before the loop closes
    return {"measured_pods": pods, "pods_per_s": round(pods / (max(bound.at.values()) - t0), 1),
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1)}


def _spread(tries: list[dict]) -> dict:
    """The median, least and most of the headline figures over ``tries``."""
    figs = {"scheduler_cpu_ms": [t["cpu_ms_per_pod_by_component"].get("scheduler", 0.0) for t in tries],
            "pods_per_s": [t["pods_per_s"] for t in tries]}
    return {stat: {k: round(f(v), 2) for k, v in figs.items()}
            for stat, f in (("median", statistics.median), ("min", min), ("max", max))}


def run_claim_burst(w: ClaimBurstWorkload) -> dict:
    """Each size with the gate off and on, ``runs`` times (off, on, then on, off, ...); per setting
    the median and spread of the scheduler's CPU ms per pod and of pods/s, and the on ÷ off ratio of
    the medians (KEP-6132's target: scheduler CPU on ≤ 0.5 of off at 5,000 pods, falling as N grows)."""
    out: dict = {"nodes": w.nodes, "devices_per_node": w.devices_per_node, "runs": w.runs, "burst": {}}
    for pods in w.sizes:
        tries = _alternating(w.runs, functools.partial(_claim_run, w, pods, measure=_run_claim_burst_workload),
                             f"{pods} pods waiting")
        size: dict = {g: {**_spread(t), "tries": t} for g, t in tries.items()}
        size["ratio_on_off"] = {k: round(size["on"]["median"][k] / size["off"]["median"][k], 3)
                                for k in size["on"]["median"] if size["off"]["median"][k]}
        out["burst"][str(pods)] = size
    return out


async def _run_resize_workload(server: str, token: str, w: ResizeWorkload, nodes: int,
                               mark=lambda label: None) -> dict:
    """ResizePreemption: the measured step is the resize request (16 at a time), seen done when the
    resizer has no PodResizePending / PodResizeInProgress condition and its container status reports
    3 cpu: resizes/s = resizes / (last actuated - first request), request -> actuated p50 / p99, and
    the victims (fillers deleted: one per resize is right)."""
    per_node, filler = w.fillers
    node_names = [f"{topology.HOLLOW_PREFIX}{i}" for i in range(1, nodes + 1)]
    resizers = [f"resizer-{k}" for k in range(nodes)]
    placed = [(r, w.resizer, "resizer", node) for r, node in zip(resizers, node_names, strict=True)] + \
        [(f"filler{j}-{k}", filler, "filler", node) for j in range(per_node) for k, node in enumerate(node_names)]
    async with Client(server, token, timeout=60) as c:
        await _priority_classes(c, {w.resizer, filler})
        seen = _ResizeSeen(c, w.resize_to)
        await seen.informer.start()
        await seen.informer.wait_for_sync()
        await _bounded(16, ((lambda p=p: c.pods.create(_pod(*p))) for p in placed))  # (name, template, phase, node)
        await _until(seen.running, [name for name, *_ in placed], timeout=600, what="ran")
        sent: dict[str, float] = {}

        async def resize(name: str) -> None:
            sent[name] = time.perf_counter()
            await c.pods.patch(name, {"spec": {"containers": [{"name": "pause", "resources": {
                "requests": {"cpu": w.resize_to}}}]}}, subresource="resize")

        mark("measure-start")
        await _bounded(16, ((lambda n=n: resize(n)) for n in resizers))
        await _until(seen.actuated, resizers, timeout=900, what="actuated their resize")
        mark("measure-end")
        await asyncio.sleep(2)  # a second victim for one resize, chosen late, still counts
        victims = dict(seen.deleted)
        await seen.informer.stop()
    await asyncio.sleep(0.2)  # let gRPC finish cancelling the watch before the loop closes
    count = len(resizers)
    first, last = min(sent.values()), max(seen.actuated[n] for n in resizers)
    latencies = [1000 * (seen.actuated[n] - sent[n]) for n in resizers]
    # Where a resize's time goes, step by step, each as first seen here (p50 over the resizes that
    # showed both ends; a state set and cleared between two watch events is not seen):
    on = dict(zip(resizers, node_names, strict=True))
    steps: list[Callable[[str], float | None]] = [
        seen.deferred.get, lambda n: seen.marked_on.get(on[n]), lambda n: seen.deleted_on.get(on[n])]
    at = {n: [sent[n], *(f(n) for f in steps), seen.actuated[n]] for n in resizers}
    stages = {}
    for i, stage in enumerate(("request_to_deferred", "deferred_to_victim_marked", "victim_marked_to_deleted",
                               "victim_deleted_to_actuated")):
        ends = [(t[i], t[i + 1]) for t in at.values()]
        ms = [1000 * (end - start) for start, end in ends if start is not None and end is not None]
        stages[stage] = {"p50_ms": round(percentile(ms, 50), 1), "seen": len(ms)}
    by_node = collections.Counter(victims.values())
    return {"measured_resizes": count, "resizes_per_s": round(count / (last - first), 1),
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1),
            "stages": stages, "victims": len(victims), "victims_per_resize": round(len(victims) / count, 2),
            "nodes_not_one_victim": sum(1 for node in node_names if by_node[node] != 1)}


class _Running:
    """When each pod with the bench label was first seen Running, from a watch in this process."""

    def __init__(self, client: Client):
        self.informer = Informer(client, POD, label_selector=LABEL)
        self.at: dict[str, float] = {}
        self.informer.add_handler(self._see, lambda old, new: self._see(new))

    def _see(self, pod: core_pb2.Pod) -> None:
        if pod.metadata.name not in self.at and _running(pod):
            self.at[pod.metadata.name] = time.perf_counter()


async def _run_replicaset_workload(server: str, token: str, w: ReplicaSetWorkload, mark=lambda label: None) -> dict:
    rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace = "bench", "default"
    rs.spec.replicas = 0
    rs.spec.selector.match_labels[LABEL] = "replicaset"
    template = _pod("unused", w.template, "replicaset")
    rs.spec.template.metadata.labels.update(template.metadata.labels)
    rs.spec.template.spec.CopyFrom(template.spec)
    async with Client(server, token, timeout=60) as c:
        await _priority_classes(c, {w.template})
        running = _Running(c)
        await running.informer.start()
        await running.informer.wait_for_sync()
        await c.replica_sets.create(rs)
        mark("measure-start")
        t0 = time.perf_counter()
        await c.replica_sets.scale("bench", w.replicas)
        deadline = time.monotonic() + 900
        while len(running.at) < w.replicas:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{w.replicas - len(running.at)} of {w.replicas} replicas never ran")
            await asyncio.sleep(0.05)
        mark("measure-end")
        await running.informer.stop()
    await asyncio.sleep(0.2)  # let gRPC finish cancelling the watch before the loop closes
    latencies = [1000 * (t - t0) for t in running.at.values()]
    return {"measured_pods": w.replicas, "pods_per_s": round(w.replicas / (max(running.at.values()) - t0), 1),
            "p50_ms": round(percentile(latencies, 50), 1), "p99_ms": round(percentile(latencies, 99), 1)}


async def _measure(state: cluster.ClusterState, w: AnyWorkload, nodes: int, mark=lambda label: None) -> dict:
    if isinstance(w, ReplicaSetWorkload):
        return await _run_replicaset_workload(state.server, state.admin_token(), w, mark=mark)
    if isinstance(w, ResizeWorkload):
        return await _run_resize_workload(state.server, state.admin_token(), w, nodes, mark=mark)
    return await _run_workload(state.server, state.admin_token(), w, mark=mark)


def _scheduler_metrics(state: cluster.ClusterState) -> dict[str, float]:
    import urllib.request
    proc = state.processes["scheduler"]
    with urllib.request.urlopen(f"http://{proc.admin}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("scheduler_schedule_attempts_total", "scheduler_preemption_attempts_total",
                            "scheduler_preemption_victims_count", "scheduler_pod_scheduled_after_flush_total",
                            "scheduler_resize_preemption_attempts_total", "scheduler_resize_preemption_victims_sum",
                            "scheduler_resize_preemption_victims_count", "scheduler_pending_resize_pods")):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def _cluster(nodes: int, profile_path: str = "", feature_gates: str = "",
             controller_managers: int = 0, dra_devices: int = 0) -> cluster.ClusterState:
    data = tempfile.mkdtemp(prefix="kplane-bench-sched-")
    # scheduler_perf's shape: the scheduler and what it needs; a controller-manager only for the
    # workloads whose pods (or claims) a controller makes.
    cfg = topology.ClusterConfig(data_dir=data, nodes=0, hollow_nodes=nodes, node_cpu="4", node_memory="32Gi",
                                 node_pods=110, schedulers=1, controller_managers=controller_managers,
                                 feature_gates=feature_gates, dra_devices=dra_devices)
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


@dataclass(frozen=True)
class _Mark:
    """The cluster at one end of a measured phase: when, each process's CPU seconds and resident bytes."""
    at: float
    cpu: dict[str, float]
    rss: dict[str, int]

    @classmethod
    def now(cls, state: cluster.ClusterState) -> _Mark:
        return cls(time.perf_counter(), cpu.by_component(state), cpu.rss_by_component(state))


def _measured_phase(start: _Mark, end: _Mark, count: int, unit: str, nodes: int) -> dict:
    """The measured phase's cost: each process's share of a core and CPU ms per measured pod (resize),
    their total across processes, and each process's resident memory at the end (every hollow-nodes
    process's together, per hollow node)."""
    used = {k: end.cpu[k] - start.cpu[k] for k in end.cpu}
    return {"cpu_share_by_component": {k: round(v / (end.at - start.at), 2) for k, v in used.items()},
            f"cpu_ms_per_{unit}_by_component": {k: round(1000 * v / count, 1) for k, v in used.items()},
            f"cpu_ms_per_{unit}_total": round(1000 * sum(used.values()) / count, 1),
            "rss_bytes_by_component": end.rss, "rss_bytes_per_hollow_node": cpu.hollow_rss_bytes(end.rss) // nodes}


def run_one(w: AnyWorkload, nodes: int) -> dict:
    """One workload on a cluster of its own; result keys say the unit (``pods_per_s``, ``resizes_per_s``)."""
    unit = w.UNIT
    state = _cluster(nodes, feature_gates=w.feature_gates,
                     controller_managers=1 if isinstance(w, ReplicaSetWorkload) else 0)
    try:
        marks: dict[str, _Mark] = {}
        r = run_loop_result(_measure(state, w, nodes, mark=lambda label: marks.__setitem__(label, _Mark.now(state))))
        r.update(_measured_phase(marks["measure-start"], marks["measure-end"], r[f"measured_{unit}s"], unit, nodes))
        r["scheduler_metrics"] = _scheduler_metrics(state)
        r["nodes"] = nodes
        target = TARGETS.get(w.name)
        if target:
            r[f"target_{unit}s_per_s"] = target
            r["target_met"] = r[f"{unit}s_per_s"] >= target
        return r
    finally:
        cluster.down(state, purge=True)


# Where the scheduler's CPU goes, by phase: (phase, file, function) whose cumulative time counts.
PHASES = [
    ("Filter (find nodes that fit)", "algorithm.py", "find_nodes_that_fit"),
    ("Score", "algorithm.py", "prioritize_nodes"),
    ("PostFilter: preemption dry run", "evaluator.py", "find_candidates"),
    ("PostFilter: pick a node", "evaluator.py", "pick_one_node"),
    ("binding cycle", "schedule_one.py", "binding_cycle"),
    ("informer events (decode, cache, queue)", "informer.py", "_run"),
    ("API calls (client side)", "client.py", "call"),
]
RESIZE_PHASES = [
    ("deferred resize cycle (fit on its node, PostFilter)", "schedule_deferred_resize.py", "schedule_deferred_resize"),
    ("PostFilter: preemption dry run", "evaluator.py", "find_candidates"),
    ("evictions (DisruptionTarget, delete)", "evaluator.py", "_evict"),
    ("informer events (decode, cache, queue)", "informer.py", "_run"),
    ("API calls (client side)", "client.py", "call"),
]


def _phases(path: str, phases: list[tuple[str, str, str]]) -> list[dict]:
    stats = load_profile(path)
    total = stats.total_tt or 1.0
    out = []
    for phase, file, fn in phases:
        ct = sum(v[3] for (f, _, name), v in stats.stats.items() if name == fn and f.endswith("/" + file))
        out.append({"phase": phase, "cumulative_s": round(ct, 3), "pct": round(100 * ct / total, 1)})
    return out


def profile(nodes: int, out_dir: Path, scale: float, w: AnyWorkload | None = None) -> dict:
    """The first workload that missed its target (SchedulingBasic, smaller, when none did) again with the
    scheduler under cProfile (CPU time, measured phase only): its time by phase of the scheduling
    cycle, and the functions with the most self time."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = str(out_dir / "scheduler.prof")
    if w is None:
        w = Workload("SchedulingBasic", ((max(1, int(200 * scale)), POD_DEFAULT, True),),
                     (max(1, int(500 * scale)), POD_DEFAULT))
    state = _cluster(nodes, path, w.feature_gates)
    pid = state.processes["scheduler"].pid
    assert pid is not None  # the cluster just started it

    def measured_only(label: str) -> None:
        if label == "measure-start":
            os.kill(pid, signal.SIGUSR1)  # the profile forgets the setup phase (machinery.process)

    try:
        r = run_loop_result(_measure(state, w, nodes, mark=measured_only))
    finally:
        cluster.down(state, purge=True)
    unit = w.UNIT
    return {"workload": w.name, "unit": unit, f"{unit}s_per_s_under_profiler": r[f"{unit}s_per_s"],
            "phases": _phases(path, RESIZE_PHASES if isinstance(w, ResizeWorkload) else PHASES),
            "top_self_time": _profile_summary(path)}


def _size(quick: bool) -> tuple[int, float]:
    """Hollow nodes, and the scale of the workloads' pod counts."""
    return (100, 0.2) if quick else (500, 1.0)


def choose(only: list[str] | None, quick: bool) -> list[AnyWorkload | ClaimWorkload]:
    """The workloads named in ``only`` (every one when it is empty); ValueError for a name there is none of."""
    chosen = workloads(_size(quick)[1])
    if not only:
        return chosen
    unknown = set(only) - {w.name for w in chosen}
    if unknown:
        raise ValueError(f"no scheduler workload {sorted(unknown)}; there are {[w.name for w in chosen]}")
    return [w for w in chosen if w.name in only]


def run(out_dir: Path, quick: bool = False, only: list[str] | None = None) -> dict:
    """Every workload (``only``: those named), each on a fresh cluster, then the profile."""
    nodes, scale = _size(quick)
    chosen = choose(only, quick)
    result: dict = {"machine": {"cpus": os.cpu_count()}, "nodes": nodes, "workloads": {}}
    for w in chosen:
        print(f"  {w.name} ...", flush=True)
        if isinstance(w, ClaimTemplateWorkload):
            result["workloads"][w.name] = run_claim_template(w)
        elif isinstance(w, ClaimBurstWorkload):
            result["workloads"][w.name] = run_claim_burst(w)
        else:
            result["workloads"][w.name] = run_one(w, nodes * getattr(w, "node_factor", 1))
    missed = [w for w in chosen if not isinstance(w, (ClaimTemplateWorkload, ClaimBurstWorkload))
              and result["workloads"][w.name].get("target_met") is False]
    if missed or not only or "SchedulingBasic" in only:
        result["profile"] = profile(nodes, out_dir, scale, missed[0] if missed else None)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "scheduler.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


_DEFAULT_LOOPS = f"uvloop for {' and '.join(sorted(UVLOOP_COMPONENTS))}, asyncio for the rest"


def summary(r: dict) -> str:
    nodes = f"{r['nodes']} hollow nodes (4 cpu, 32Gi, 110 pods)" if any(
        "sizes" not in w and "burst" not in w for w in r["workloads"].values()) \
        else "Hollow nodes (4 cpu, 32Gi, 110 pods)"
    lines = [f"{nodes}, create -> bound (ResizePreemption: resize request -> actuated) through the real "
             f"processes, event loop {os.environ.get('KPLANE_EVENT_LOOP') or _DEFAULT_LOOPS}:"]
    for name, w in r["workloads"].items():
        if "sizes" in w:
            lines += _claim_template_summary(name, w)
            continue
        if "burst" in w:
            lines += _claim_burst_summary(name, w)
            continue
        unit = "resize" if "resizes_per_s" in w else "pod"
        target = f"   target >= {w[f'target_{unit}s_per_s']:.0f}: {'met' if w['target_met'] else 'MISSED'}" \
            if f"target_{unit}s_per_s" in w else ""
        lines.append(f"  {name:<16} {w[f'{unit}s_per_s']:>7.1f} {unit}s/s   p50 {w['p50_ms']:>7.0f} ms   "
                     f"p99 {w['p99_ms']:>7.0f} ms   ({w[f'measured_{unit}s']} {unit}s){target}")
        scaled = figures.at_basis(w, f"{unit}s_per_s", f"{unit}s/s")
        if scaled:
            lines.append(f"  {'':<16} {scaled}")
        shares = ", ".join(f"{k} {v:.2f}" for k, v in sorted(w["cpu_share_by_component"].items(), key=lambda kv: -kv[1])
                           if v >= 0.01)
        lines.append(f"  {'':<16} CPU cores: {shares}")
        per_op = figures.cpu_per_op(w, f"cpu_ms_per_{unit}_by_component")
        lines.append(f"  {'':<16} CPU ms per measured {unit}: {per_op}")
        if "rss_bytes_by_component" in w:
            rss = ", ".join(f"{k} {v / 2**20:.0f}" for k, v in sorted(w["rss_bytes_by_component"].items(),
                                                                       key=lambda kv: -kv[1]))
            lines.append(f"  {'':<16} RSS MB at the end: {rss}; {w['rss_bytes_per_hollow_node'] / 2**20:.2f} MB "
                         f"per hollow node")
        sets = w.get("scheduler_metrics", {}).get("scheduler_preemption_victims_count")
        if sets:  # one victim set per preemptor, whatever the event loop (a second one over-preempts)
            lines.append(f"  {'':<16} victim sets chosen: {sets:.0f} for {w['measured_pods']} measured pods")
        if unit == "resize":  # one filler per resize is right; more is over-preemption
            sets = w.get("scheduler_metrics", {}).get("scheduler_resize_preemption_victims_count", 0)
            lines.append(f"  {'':<16} victims: {w['victims']} fillers deleted, "
                         f"{w['victims_per_resize']:.2f} per resize "
                         f"(nodes without exactly one: {w['nodes_not_one_victim']}); victim sets chosen: {sets:.0f}")
            lines.append(f"  {'':<16} p50 by step: " + ", ".join(
                f"{k.replace('_', ' ')} {v['p50_ms']:.0f} ms" for k, v in w["stages"].items()))
            ref = r["workloads"].get("SchedulingBasic")
            if ref:
                lines.append(f"  {'':<16} vs SchedulingBasic of this run: {w['resizes_per_s']:.1f} resizes/s / "
                             f"{ref['pods_per_s']:.1f} pods/s = {w['resizes_per_s'] / ref['pods_per_s']:.2f}")
        if name == "SchedulingBasic5000Nodes":
            ref = r["workloads"].get("SchedulingBasic")
            lines.append(f"  {'':<16} {w['nodes']} hollow nodes" + (
                f"; vs SchedulingBasic at {r['nodes']}: {w['pods_per_s']:.1f} / {ref['pods_per_s']:.1f} pods/s = "
                f"{w['pods_per_s'] / ref['pods_per_s']:.2f} (target >= {GROWTH_TARGET})" if ref else ""))
        if name == "ReplicaSetScaleUp":
            ref = r["workloads"].get("SchedulingBasic")
            cm = w["cpu_ms_per_pod_by_component"].get("controller-manager", 0.0)
            lines.append(f"  {'':<16} controller-manager CPU per pod: {cm:.1f} ms" + (
                f"; vs SchedulingBasic of this run: {w['pods_per_s'] / ref['pods_per_s']:.2f}" if ref else ""))
    prof = r.get("profile", {})
    if prof.get("top_self_time"):
        unit = prof.get("unit", "pod")
        lines.append(f"scheduler CPU profile of {prof['workload']} ({prof[f'{unit}s_per_s_under_profiler']} {unit}s/s "
                     f"under cProfile), by phase (cumulative, they overlap where one calls another):")
        for row in prof["phases"]:
            lines.append(f"  {row['pct']:>5.1f}%  {row['phase']}")
        lines.append("and the functions with the most self time:")
        for row in prof["top_self_time"][:12]:
            lines.append(f"  {row['self_pct']:>5.1f}%  {row['function']}")
    return "\n".join(lines)


def _claim_template_summary(name: str, w: dict) -> list[str]:
    lines = [f"  {name} ({w['nodes']} hollow nodes x {w['devices_per_node']} GPUs; half the pods placed first, "
             f"half measured; gate {PRE_QUEUEING_HINTS} off -> on, best of {w['repeats']}):",
             f"  {'pods':>8} {'off pods/s':>11} {'on pods/s':>10} {'on/off':>7}   hint calls per claim event off / on"
             f"   scheduler CPU ms per pod off / on   p50 ms off / on"]
    for pods, runs in w["sizes"].items():
        off, on = runs["off"], runs["on"]
        cpu = [x["cpu_ms_per_pod_by_component"].get("scheduler", 0.0) for x in (off, on)]
        calls = [x["claim_hint_calls_per_claim_event"] for x in (off, on)]
        lines.append(f"  {pods:>8} {off['pods_per_s']:>11.1f} {on['pods_per_s']:>10.1f} {runs['ratio']:>7.2f}"
                     f"   {calls[0]:>16.1f} / {calls[1]:<8.2f}"
                     f"   {cpu[0]:>20.1f} / {cpu[1]:<8.1f}   {off['p50_ms']:>8.0f} / {on['p50_ms']:.0f}")
    scaled = [f"{pods} pods {off['pods_per_s_at_11k']:.1f} / {on['pods_per_s_at_11k']:.1f}, "
              f"{off['cpu_ref_per_pod_by_component'].get('scheduler', 0.0):.2f} / "
              f"{on['cpu_ref_per_pod_by_component'].get('scheduler', 0.0):.2f} ref"
              for pods, runs in w["sizes"].items() for off, on in [(runs["off"], runs["on"])]
              if "pods_per_s_at_11k" in off and "pods_per_s_at_11k" in on]
    if scaled:
        lines.append("  at 11k etcd puts/s, pods/s off / on, and scheduler CPU per pod off / on in ref units: "
                     + "; ".join(scaled))
    return lines


def _claim_burst_summary(name: str, w: dict) -> list[str]:
    lines = [f"  {name} ({w['nodes']} hollow nodes x {w['devices_per_node']} GPUs; N pods gated waiting for "
             f"their claims, then the resourceclaim controller let go; gate {PRE_QUEUEING_HINTS} off / on, "
             f"{w['runs']} runs each, median [least-most]):",
             f"  {'N':>8}   scheduler CPU ms per pod off / on        on/off   pods/s off / on"
             f"                      hint calls per claim event off / on"]
    ratios = []
    for pods, size in w["burst"].items():
        off, on = size["off"], size["on"]

        def fig(side: dict, key: str) -> str:
            return f"{side['median'][key]:.1f} [{side['min'][key]:.1f}-{side['max'][key]:.1f}]"
        calls = [statistics.median(t["claim_hint_calls_per_claim_event"] for t in side["tries"]) for side in (off, on)]
        ratio = size["ratio_on_off"].get("scheduler_cpu_ms", float("nan"))
        ratios.append(ratio)
        lines.append(f"  {pods:>8}   {fig(off, 'scheduler_cpu_ms'):>17} / {fig(on, 'scheduler_cpu_ms'):<17}"
                     f" {ratio:>6.2f}   {fig(off, 'pods_per_s'):>19} / {fig(on, 'pods_per_s'):<19}"
                     f" {calls[0]:>10.1f} / {calls[1]:.2f}")
    falling = all(b < a for a, b in zip(ratios, ratios[1:], strict=False))
    met = bool(ratios) and ratios[-1] <= KEP_6132_TARGET and falling
    lines.append(f"  {'':<8}   target: on/off <= {KEP_6132_TARGET} at N = {list(w['burst'])[-1]} and falling as N "
                 f"grows: {'met' if met else 'MISSED'}")
    return lines
