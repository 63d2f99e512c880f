"""``kplane explain pod`` on a real cluster — the issue's acceptance: the story of (a) a preempted
pod and its preemptor, (b) a resize Deferred and then actuated (KEP-1287, with KEP-5836's
scheduler trying preemption for it), (c) a pod waiting on its ResourceClaim (DRA) names every step
that applies, in revision order, from the history, the Events and the scheduler's log records
(``pod_requeued``: which event and QueueingHint moved the pod on).

Two nodes of 2 CPUs and one GPU each (the fake DRA driver); (a) runs on node-1, (b) on node-2.
The test's client writes as the field manager ``admin`` (its user), so the pods' creation and the
resize request are told as admin's steps.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from machinery.api import core_pb2
from tests.harness.api import delete_all_pods, ensure_priority_classes, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.dra import create_gpu_template, delete_pods_claims_and_templates, gpu_pod
from tests.harness.wait import condition, eventually, wait_running, wait_unschedulable

pytestmark = pytest.mark.integration

explain_cluster = cluster_fixture(nodes=2, node_cpu="2", node_memory="4Gi", schedulers=1, controller_managers=1,
                                  dra_devices=1, kubelet_args=FAST_KUBELET,
                                  feature_gates="SchedulerPreemptionForPodResize=true")
WAIT = 30
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture
async def api(explain_cluster):
    c = explain_cluster.client()
    try:
        await ensure_priority_classes(c, low=10, high=1000)
        yield c
    finally:
        try:
            await delete_all_pods(c)
        finally:
            await c.close()


def _story(tc, name: str, *extra: str) -> list[dict]:
    run = tc.kplane("explain", "pod", name, "-o", "json", *extra)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def _missing(steps: list[dict], expected: list[str]) -> str:
    """The first of ``expected`` (regular expressions, in order) no step matches after the step
    the one before it matched ("" when every one matched, in order)."""
    i = 0
    for pattern in expected:
        while i < len(steps) and not re.search(pattern, f"{steps[i]['component']}  {steps[i]['what']}"):
            i += 1
        if i == len(steps):
            return pattern
        i += 1
    return ""


async def _tells(tc, name: str, expected: list[str], *anywhere: str) -> list[dict]:
    """Until the story of ``name`` has the ``expected`` steps in this order, and each of
    ``anywhere`` somewhere (the scheduler's log records, placed by wall clock); the story."""
    box: dict = {}

    def check() -> bool:
        box["steps"] = steps = _story(tc, name)
        box["missing"] = _missing(steps, expected) or next(
            (p for p in anywhere if not any(re.search(p, f"{s['component']}  {s['what']}") for s in steps)), "")
        return not box["missing"]

    try:
        await eventually(check, timeout=WAIT, what=f"the story of {name}")
    except AssertionError:
        told = "\n".join(f"rev {s['rev']}  {s['component']}  {s['what']}" for s in box.get("steps", []))
        raise AssertionError(f"the story of {name} lacks {box.get('missing')!r}:\n{told}") from None
    return box["steps"]


def _on(make: MakePod, node: str) -> core_pb2.Pod:
    return make.node_selector({HOSTNAME: node}).grace(0).obj()


async def test_a_preempted_pod_and_its_preemptor(explain_cluster, api):
    tc = explain_cluster
    await api.pods.create(_on(MakePod().name("low-1").priority_class("low").req(cpu="1500m", memory="100Mi"),
                              "node-1"))
    await wait_running(api, "low-1")
    await api.pods.create(_on(MakePod().name("high-1").priority_class("high").req(cpu="1", memory="100Mi"),
                              "node-1"))
    await wait_running(api, "high-1", timeout=WAIT)
    await _tells(tc, "high-1", [
        r"^admin  created: priority 1000 \(high\)",
        r"^scheduler  queued",
        r"^scheduler  FailedScheduling: 0/2 nodes available: .*1 Insufficient cpu \(NodeResourcesFit\)",
        r"^scheduler  preempted pod default/low-1 on node-1",
        r"^scheduler  bound to node-1",
        r"^kubelet/node-1  admitted; running",
    ], r"^scheduler  nominated to node-1", r"^scheduler  requeued by AssignedPodDelete of default/low-1 "
        r"\(NodeResourcesFit QueueingHint: Queue\)",
        r"^scheduler  preemption: victims chosen on node-1: default/low-1")
    await _tells(tc, "low-1", [
        r"^scheduler  bound to node-1",
        r"^kubelet/node-1  admitted; running",
        r"^scheduler  marked for disruption: PreemptionByScheduler",
        r"deleted$",
    ], r"^scheduler  preempted by default/high-1 on node-1")


async def test_a_resize_deferred_then_actuated(explain_cluster, api):
    tc = explain_cluster
    await api.pods.create(_on(MakePod().name("keep").priority_class("high").req(cpu="1", memory="100Mi"), "node-2"))
    await api.pods.create(_on(MakePod().name("r-1").req(cpu="500m", memory="100Mi")
                              .resize_policy("cpu", "NotRequired"), "node-2"))
    await wait_running(api, "keep", "r-1", timeout=WAIT)
    await resize(api, "r-1", cpu="1500m")

    async def deferred() -> bool:
        pending = condition(await api.pods.get("r-1"), "PodResizePending")
        return pending is not None and pending.reason == "Deferred"
    await eventually(deferred, timeout=WAIT, what="r-1's resize Deferred")
    # The scheduler tried to preempt for it (KEP-5836), but "keep" has the higher priority.
    await _tells(tc, "r-1", [r"^scheduler  FailedScheduling: 0/1 nodes available: 1 Insufficient cpu "
                             r"\(NodeResourcesFit\)"])
    await api.pods.delete("keep", grace_period_seconds=0)
    await _tells(tc, "r-1", [
        r"^admin  created: requests cpu 500m",
        r"^scheduler  bound to node-2",
        r"^kubelet/node-2  admitted; running",
        r"^admin  resize requested: c1 cpu 500m -> 1500m",
        r"^kubelet/node-2  resize deferred: Node didn't have enough resource: cpu",
        r"^scheduler  FailedScheduling: 0/1 nodes available: 1 Insufficient cpu \(NodeResourcesFit\)",
        r"^kubelet/node-2  resize no longer deferred",
        r"^kubelet/node-2  allocated c1 cpu 1500m",
        r"^kubelet/node-2  actuated c1 cpu 1500m",
        r"^kubelet/node-2  ResizeCompleted",
    ], r"^scheduler  requeued by AssignedPodDelete of default/keep \(NodeResourcesFit QueueingHint: Queue\)")


async def test_a_pod_waiting_on_its_resource_claim(explain_cluster, api, tmp_path: Path):
    tc = explain_cluster
    await create_gpu_template(api)
    try:
        for name in ("gpu-1", "gpu-2"):
            await api.pods.create(gpu_pod(name, template="gpu"))
        await wait_running(api, "gpu-1", "gpu-2", timeout=WAIT)
        await api.pods.create(gpu_pod("gpu-3", template="gpu"))
        await wait_unschedulable(api, "gpu-3", timeout=WAIT)
        await api.pods.delete("gpu-1", grace_period_seconds=0)
        await wait_running(api, "gpu-3", timeout=WAIT)
        steps = await _tells(tc, "gpu-3", [
            r"^admin  created: .*claims gpu",
            r"^controller-manager  ResourceClaim gpu-3-gpu-\w+ created for the pod",
            r"^scheduler  FailedScheduling: 0/2 nodes available: 2 cannot allocate all claims \(DynamicResources\)",
            r"^scheduler  ResourceClaim gpu-3-gpu-\w+ allocated: dra.kplane.dev/node-\d/gpu-0 on node-\d",
            r"^scheduler  bound to node-\d",
            r"^kubelet/node-\d  admitted; running",
        ], r"^scheduler  requeued by ResourceClaim\w+ of default/gpu-1-gpu-\w+ \(DynamicResources QueueingHint: Queue")
    finally:
        await delete_pods_claims_and_templates(api, WAIT)
    # The same story from a saved history and the scheduler's logs, with no cluster asked.
    saved = tmp_path / "history.jsonl"
    saved.write_text(tc.kplane("history").stdout)
    again = _story(tc, "gpu-3", "--history", str(saved), "--logs", str(Path(tc.data_dir) / "logs"))
    assert again[:len(steps)] == steps
    text = tc.kplane("explain", "pod", "gpu-3", "--history", str(saved))
    assert text.returncode == 0 and text.stdout.startswith("pod default/gpu-3 (uid ")


def test_an_unknown_pod_is_one_line_and_exit_1(explain_cluster):
    run = explain_cluster.kplane("explain", "pod", "nobody")
    assert (run.returncode, run.stdout, run.stderr) == (1, "", 'error: pods "nobody" not found in the history\n')
