"""Node-pressure eviction with real processes: a 1Gi node whose kubelet runs with
``--eviction-hard=memory.available<200Mi``, pods bound by nodeName, their memory usage driven
through the runtime's control API. The documentation's expectations: MemoryPressure and its taint
while memory is low, pods failed with reason Evicted in the documented order (usage above
requests first, then priority, then usage above requests), critical pods spared, BestEffort pods
refused while the pressure lasts, and the condition cleared after the transition period."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from kubelet.runtime.client import RuntimeClient
from machinery import errors
from machinery.api import core_pb2, cri_pb2
from tests.harness.builders import MakePod, make_priority_class
from tests.harness.cluster import cluster_fixture, start_cluster, stop_cluster
from tests.harness.metrics import metric
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

Mi = 1 << 20
FAST = ["--sync-frequency=1", "--restart-backoff=0.2", "--node-status-interval=1"]
HARD = ["--eviction-hard=memory.available<200Mi", "--eviction-monitoring-interval=0.5",
        "--eviction-pressure-transition-period=5s"]
TAINT = "node.kubernetes.io/memory-pressure"
MEMORY_USAGE = "kplane.dev/memory-usage"  # what the fake runtime reports the pod's container uses
# How long a pod's container takes to exit after SIGTERM; the eviction tests' pods take 5 s. A
# graceful stop would take 5 s and exit 0: a hard eviction's grace period 0 kills at once (137).
SHUTDOWN_SECONDS = "kplane.dev/shutdown-seconds"


pressure_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="1Gi", kubelet_args=FAST + HARD)


@pytest.fixture
async def api(pressure_cluster):
    c = pressure_cluster.client()
    try:
        for name, value in (("evict-low", 100), ("evict-mid", 1000), ("evict-high", 2000)):
            try:
                await c.priority_classes.create(make_priority_class(name, value))
            except errors.AlreadyExists:
                pass
        yield c
    finally:
        await _delete_all(c)
        await c.close()


@pytest.fixture
async def runtime(pressure_cluster):
    rt = _runtime_of(pressure_cluster)
    try:
        yield rt
    finally:
        await rt.close()


def _runtime_of(tc) -> RuntimeClient:
    return RuntimeClient(f"unix://{Path(tc.data_dir) / 'nodes' / 'node-1' / 'runtime.sock'}")


async def _delete_all(c) -> None:
    for p in (await c.pods.list("default")).items:
        try:
            await c.pods.delete(p.metadata.name, grace_period_seconds=0)
        except errors.NotFound:
            pass

    async def empty():
        return not (await c.pods.list("default")).items

    await eventually(empty, timeout=20, what="pods gone")


def _cond(obj, type_: str):
    return next((c for c in obj.status.conditions if c.type == type_), None)


async def _running(api, *names: str) -> dict[str, core_pb2.Pod]:
    box: dict[str, core_pb2.Pod] = {}

    async def check():
        for n in names:
            box[n] = await api.pods.get(n)
        return all(p.status.phase == "Running" and all(c.ready for c in p.status.container_statuses)
                   for p in box.values())

    await eventually(check, timeout=20, what=f"{names} running")
    return box


async def _set_usage(runtime: RuntimeClient, pod: core_pb2.Pod, memory: int) -> None:
    cid = pod.status.container_statuses[0].container_id.split("://", 1)[1]
    await runtime.set_container_usage(cri_pb2.SetContainerUsageRequest(container_id=cid, memory_bytes=memory))


async def _failed(api, name: str, timeout: float = 15) -> core_pb2.Pod:
    box = {}

    async def check():
        box["pod"] = await api.pods.get(name)
        return box["pod"].status.phase == "Failed"

    await eventually(check, timeout=timeout, what=f"pod {name} Failed")
    return box["pod"]


async def _node_pressure(api, want: bool, timeout: float = 15) -> core_pb2.Node:
    box = {}

    async def check():
        node = box["node"] = await api.nodes.get("node-1")
        mp = _cond(node, "MemoryPressure")
        tainted = any(t.key == TAINT and t.effect == "NoSchedule" for t in node.spec.taints)
        return mp is not None and (mp.status == "True") == want and tainted == want

    await eventually(check, timeout=timeout, what=f"MemoryPressure={want} with the taint {'on' if want else 'off'}")
    return box["node"]


async def _events(api, name: str, reason: str) -> list[core_pb2.Event]:
    evs = await api.events.list("default", field_selector=f"involvedObject.name={name}")
    return [e for e in evs.items if e.reason == reason]


async def _failed_revision(api, name: str) -> int:
    """The etcd revision at which the pod first became Failed (the cluster's event log)."""
    async for resp in api.history(0):
        for e in resp.entries:
            if e.name == name and e.type == "MODIFIED":
                pod = core_pb2.Pod()
                e.object.Unpack(pod)
                if pod.status.phase == "Failed":
                    return e.rev
    raise AssertionError(f"{name} never became Failed")


def _metric(tc, name: str, labels: str) -> float:
    return metric(tc, "kubelet/node-1", name, labels + "}")


def _log_events(tc, event: str) -> list[dict]:
    out = []
    for line in Path(tc.process("kubelet/node-1").log).read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == event:
            out.append(entry)
    return out


async def test_hard_threshold_evicts_in_the_documented_order_then_the_pressure_clears(api, runtime, pressure_cluster):
    evictions_before = _metric(pressure_cluster, "kubelet_evictions_total", 'eviction_signal="memory.available"')
    # 1Gi node, memory.available<200Mi. Usage 150 + 150 + 100 = 400Mi: 624Mi available.
    await api.pods.create(MakePod().name("guaranteed").req(cpu="100m", memory="200Mi").lim(cpu="100m", memory="200Mi")
                          .priority_class("evict-low").node("node-1").grace(30).annotation(MEMORY_USAGE, "150Mi")
                          .annotation(SHUTDOWN_SECONDS, "5").obj())
    await api.pods.create(MakePod().name("burstable").req(cpu="100m", memory="100Mi").priority_class("evict-mid")
                          .node("node-1").grace(30).annotation(MEMORY_USAGE, "150Mi")
                          .annotation(SHUTDOWN_SECONDS, "5").obj())
    await api.pods.create(MakePod().name("besteffort").priority_class("evict-high").node("node-1").grace(30)
                          .annotation(MEMORY_USAGE, "100Mi").annotation(SHUTDOWN_SECONDS, "5").obj())
    pods = await _running(api, "guaranteed", "burstable", "besteffort")
    assert [pods[n].status.qos_class for n in ("guaranteed", "burstable", "besteffort")] == [
        "Guaranteed", "Burstable", "BestEffort"]
    node = await api.nodes.get("node-1")
    assert _cond(node, "MemoryPressure").status == "False" and not any(t.key == TAINT for t in node.spec.taints)

    # The BestEffort pod grows to 700Mi: 1000Mi used, 24Mi available.
    await _set_usage(runtime, pods["besteffort"], 700 * Mi)

    # Both the BestEffort and the Burstable pod exceed their requests; the Burstable one has the
    # lower priority, so it goes first although the BestEffort pod uses far more.
    burstable = await _failed(api, "burstable")
    assert (burstable.status.reason, burstable.status.message) == (
        "Evicted", "The node was low on resource: memory. Threshold quantity: 200Mi, available: 24Mi. "
                   "Container c1 was using 150Mi, request is 100Mi, has larger consumption of memory.")
    dt = _cond(burstable, "DisruptionTarget")
    assert (dt.status, dt.reason, dt.message) == ("True", "TerminationByKubelet", burstable.status.message)
    terminated = burstable.status.container_statuses[0].state.terminated
    assert terminated.exit_code == 137  # hard threshold: grace period 0, not the pod's 30 s
    node = await _node_pressure(api, True)
    mp = _cond(node, "MemoryPressure")
    assert (mp.reason, mp.message) == ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available")

    # 850Mi used, 174Mi available: still below 200Mi, so the BestEffort pod goes next.
    besteffort = await _failed(api, "besteffort")
    assert (besteffort.status.reason, besteffort.status.message) == (
        "Evicted", "The node was low on resource: memory. Threshold quantity: 200Mi, available: 174Mi. "
                   "Container c1 was using 700Mi, request is 0, has larger consumption of memory.")
    assert await _failed_revision(api, "burstable") < await _failed_revision(api, "besteffort")

    # 150Mi used: the pressure is gone; the condition and the taint stay for the 5 s transition period.
    started = time.monotonic()
    node = await _node_pressure(api, False, timeout=20)
    assert time.monotonic() - started >= 3  # at least the transition period minus the time already spent
    mp = _cond(node, "MemoryPressure")
    assert (mp.reason, mp.message) == ("KubeletHasSufficientMemory", "kubelet has sufficient memory available")

    # The Guaranteed pod, within its request, was never evicted although its priority is the lowest.
    guaranteed = await api.pods.get("guaranteed")
    assert guaranteed.status.phase == "Running" and _cond(guaranteed, "DisruptionTarget") is None
    assert guaranteed.status.container_statuses[0].restart_count == 0
    # Evicted pods stay (Failed pods are not deleted by the kubelet); each got a Warning event.
    for name, pod in (("burstable", burstable), ("besteffort", besteffort)):
        assert (await api.pods.get(name)).status.phase == "Failed"

        async def has_event(name=name, pod=pod):
            evs = await _events(api, name, "Evicted")
            return any(e.type == "Warning" and e.message == pod.status.message for e in evs)

        await eventually(has_event, what=f"Evicted event for {name}")
    evs = await api.events.list("default", field_selector="involvedObject.name=node-1")
    assert any(e.reason == "EvictionThresholdMet" and e.message == "Attempting to reclaim memory" for e in evs.items)
    assert _metric(pressure_cluster, "kubelet_evictions_total",
                   'eviction_signal="memory.available"') == evictions_before + 2
    logged = {e["pod"]: e for e in _log_events(pressure_cluster, "pod_evicted")}
    assert {k: logged["default/burstable"][k] for k in ("signal", "threshold", "observed", "usage", "grace")} == {
        "signal": "memory.available", "threshold": "200Mi", "observed": "24Mi", "usage": "150Mi", "grace": 0}


async def test_under_pressure_critical_pods_are_spared_and_best_effort_pods_are_refused(api, runtime):
    # A system-node-critical pod uses 900Mi: 124Mi available, and nothing the kubelet may evict.
    await api.pods.create(MakePod().name("critical").priority_class("system-node-critical").node("node-1").grace(30)
                          .annotation(MEMORY_USAGE, "900Mi").annotation(SHUTDOWN_SECONDS, "5").obj())
    critical = (await _running(api, "critical"))["critical"]
    await _node_pressure(api, True)

    await api.pods.create(MakePod().name("late-besteffort").node("node-1").grace(30).annotation(MEMORY_USAGE, "0")
                          .annotation(SHUTDOWN_SECONDS, "5").obj())
    refused = await _failed(api, "late-besteffort")
    assert (refused.status.reason, refused.status.message) == ("Evicted", "The node had condition: [MemoryPressure].")
    assert not refused.status.container_statuses or not refused.status.container_statuses[0].state.HasField("running")

    async def refused_event():
        return any(e.message == "The node had condition: [MemoryPressure]."
                   for e in await _events(api, "late-besteffort", "Evicted"))

    await eventually(refused_event, what="the refusal's Evicted event")

    # A critical BestEffort pod is admitted, and runs.
    await api.pods.create(MakePod().name("late-critical").priority_class("system-cluster-critical").node("node-1")
                          .grace(30).annotation(MEMORY_USAGE, "0").annotation(SHUTDOWN_SECONDS, "5").obj())
    await _running(api, "late-critical")
    # A Burstable pod is admitted — and, being the only pod the kubelet may evict, is then evicted.
    await api.pods.create(MakePod().name("late-burstable").req(cpu="100m", memory="50Mi").node("node-1").grace(30)
                          .annotation(MEMORY_USAGE, "0").annotation(SHUTDOWN_SECONDS, "5").obj())
    evicted = await _failed(api, "late-burstable")
    assert evicted.status.message == ("The node was low on resource: memory. Threshold quantity: 200Mi, "
                                      "available: 124Mi.")  # not refused: admitted, then evicted

    for name in ("critical", "late-critical"):
        pod = await api.pods.get(name)
        assert pod.status.phase == "Running" and _cond(pod, "DisruptionTarget") is None, name

    # The critical pod shrinks: the pressure ends, and after the transition period so do the
    # condition and the taint.
    await _set_usage(runtime, critical, 100 * Mi)
    await _node_pressure(api, False, timeout=20)
    await api.pods.create(MakePod().name("after-besteffort").node("node-1").grace(30).annotation(MEMORY_USAGE, "0")
                          .annotation(SHUTDOWN_SECONDS, "5").obj())
    await _running(api, "after-besteffort")


async def test_soft_threshold_waits_for_its_grace_period_and_caps_the_pods_grace_period():
    soft = ["--eviction-soft=memory.available<300Mi", "--eviction-soft-grace-period=memory.available=3s",
            "--eviction-max-pod-grace-period=2", "--eviction-monitoring-interval=0.5",
            "--eviction-pressure-transition-period=2s"]
    tc = start_cluster(nodes=1, node_cpu="4", node_memory="1Gi", kubelet_args=FAST + soft)
    api = tc.client()
    runtime = _runtime_of(tc)
    try:
        pod = (MakePod().name("soft").node("node-1").grace(30).annotation(MEMORY_USAGE, "100Mi")
               .annotation(SHUTDOWN_SECONDS, "5").obj())
        pod.metadata.annotations["kplane.dev/shutdown-seconds"] = "1"
        await api.pods.create(pod)
        pod = (await _running(api, "soft"))["soft"]
        # 800Mi used: 224Mi available — below the soft 300Mi, above the default hard 100Mi.
        await _set_usage(runtime, pod, 800 * Mi)
        started = time.monotonic()
        await _node_pressure(api, True)  # the condition does not wait for the grace period ...
        assert (await api.pods.get("soft")).status.phase == "Running"  # ... the eviction does
        evicted = await _failed(api, "soft", timeout=20)
        assert time.monotonic() - started >= 3
        assert (evicted.status.reason, evicted.status.message) == (
            "Evicted", "The node was low on resource: memory. Threshold quantity: 300Mi, available: 224Mi. "
                       "Container c1 was using 800Mi, request is 0, has larger consumption of memory.")
        # Grace period min(30, 2) = 2 s: the container's 1 s shutdown completed (exit 0), no kill.
        terminated = evicted.status.container_statuses[0].state.terminated
        assert (terminated.exit_code, terminated.reason) == (0, "Completed")
        assert _cond(evicted, "DisruptionTarget").reason == "TerminationByKubelet"
        await _node_pressure(api, False, timeout=20)
    finally:
        await runtime.close()
        await api.close()
        stop_cluster(tc)
