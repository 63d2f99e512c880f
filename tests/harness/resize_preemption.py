"""Helpers for KEP-5836 (Scheduler Preemption for In-Place Pod Resize) scenarios on real processes:
a one-node cluster with the gate on, its priority classes, the pods' resize conditions, the
victims, the scheduler's resize metrics, and the cleanup after each test (``kplane check`` over the
whole history must pass)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from cli import check
from machinery import errors
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods, ensure_priority_classes
from tests.harness.builders import MakePod, make_priority_class
from tests.harness.cluster import FAST_KUBELET, TestCluster, start_cluster, stop_cluster
from tests.harness.failpoints import failpoint
from tests.harness.metrics import metric
from tests.harness.wait import condition, eventually, wait_deleted, wait_running

NODE = "node-1"
GATE = "SchedulerPreemptionForPodResize=true"
WAIT = 30
PRIORITIES = {"p-high": 1000, "p-mid": 500, "p-low": 20, "p-lowest": 10}
OPTION_1 = "option-1"  # DefaultPreemption's deferredResizeNomination: None, the default
OPTION_4 = "option-4"  # ... SpecNodeName


def scheduler_config(plugin: str, args: dict[str, str]) -> str:
    """A KubeSchedulerConfiguration giving ``plugin`` these args in the default profile."""
    lines = "".join(f"      {k}: {v}\n" for k, v in args.items())
    return ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
            f"- schedulerName: default-scheduler\n  pluginConfig:\n  - name: {plugin}\n    args:\n{lines}")


# "Tracking Preemption Nominations to Avoid Double Preemption", Option 4 (minCandidateNodes* keep
# their defaults).
OPTION_4_CONFIG = scheduler_config("DefaultPreemption", {"deferredResizeNomination": "SpecNodeName"})


@contextlib.contextmanager
def one_node_cluster(config: str = "") -> Iterator[TestCluster]:
    """One node of 4 CPUs, fast kubelet, the KEP-5836 gate on, a scheduler with ``config`` (a
    KubeSchedulerConfiguration; the defaults when empty)."""
    config_dir = tempfile.mkdtemp(prefix="kplane-sched-config-")
    path = ""
    if config:
        path = str(Path(config_dir) / "scheduler.yaml")
        Path(path).write_text(config)
    tc = start_cluster(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET,
                       feature_gates=GATE, scheduler_config=path)
    try:
        yield tc
    finally:
        stop_cluster(tc)
        shutil.rmtree(config_dir, ignore_errors=True)


def option_clusters():
    """A module fixture run under Option 1 and under Option 4; ``tc.option`` says which."""
    @pytest.fixture(scope="module", params=[OPTION_1, OPTION_4])
    def fixture(request):
        with one_node_cluster(OPTION_4_CONFIG if request.param == OPTION_4 else "") as tc:
            tc.option = request.param
            yield tc
    return fixture


async def resize_client(tc):
    """A client of ``tc``, with the priority classes these tests use (``p-high-never`` never preempts)."""
    c = tc.client()
    await ensure_priority_classes(c, **PRIORITIES)
    try:
        await c.priority_classes.create(make_priority_class("p-high-never", 1000, preemption_policy="Never"))
    except errors.AlreadyExists:
        pass
    return c


async def finish(tc, c) -> None:
    """After a test: the node's policy cleared, every pod gone, ``kplane check`` clean; the client closed."""
    try:
        await c.nodes.patch(NODE, {"spec": {"podPreemptionPolicy": None}}, patch_type="merge")
        await delete_all_pods(c)
        entries = [e async for e in check.entries_of(c)]
        assert check.check_entries(entries) == []
    finally:
        await c.close()


@contextlib.asynccontextmanager
async def resize_api(tc: TestCluster):
    """A test's client of ``tc``: priority classes made before, ``finish`` after."""
    c = await resize_client(tc)
    try:
        yield c
    finally:
        await finish(tc, c)


def resizable_pod(name: str, cpu: str, priority_class: str, grace: int = 1) -> MakePod:
    """The pod of these scenarios: ``cpu`` and 128Mi, its cpu resized in place (``NotRequired``),
    of ``priority_class``, ``grace`` seconds to terminate. A builder: end it with ``.obj()``."""
    return (MakePod().name(name).req(cpu=cpu, memory="128Mi").priority_class(priority_class).grace(grace)
            .resize_policy("cpu", "NotRequired"))


async def run_pods(api, *pods: core_pb2.Pod) -> None:
    """Create the pods one by one (the scheduler binds each) and wait until all run."""
    for p in pods:
        await api.pods.create(p)
        await wait_running(api, p.metadata.name, timeout=WAIT)


def resize_state(pod: core_pb2.Pod) -> dict[str, str]:
    return {c.type: c.reason for c in pod.status.conditions
            if c.type in ("PodResizePending", "PodResizeInProgress", "PodResizePreemptionDisabled")}


async def wait_resize_conditions(api, name: str, want: dict[str, str], what: str) -> core_pb2.Pod:
    box: dict = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        box["got"] = resize_state(pod)
        return box["got"] == want

    try:
        await eventually(check, timeout=WAIT, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: want {want}, last seen {box.get('got')}") from None
    return box["pod"]


async def wait_actuated(api, name: str, cpu: str) -> core_pb2.Pod:
    """Until the kubelet actuated the resize: no resize condition, the container runs with ``cpu``."""
    box: dict = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        cs = pod.status.container_statuses
        return (not resize_state(pod) and bool(cs)
                and Quantity(cs[0].resources.requests.get("cpu", "0")) == Quantity(cpu))

    await eventually(check, timeout=WAIT, what=f"{name}'s resize to {cpu} actuated")
    return box["pod"]


async def gone(api, name: str, timeout: float = WAIT) -> None:
    await wait_deleted(api, name, timeout)


async def preempted_by(api, victim: str) -> str:
    """The preemptor named by the ``Preempted`` event of ``victim``."""
    evs = await api.events.list("default", field_selector=f"involvedObject.name={victim}")
    named = [e.related.name for e in evs.items if e.reason == "Preempted"]
    return named[-1] if named else ""


async def running_names(api) -> set[str]:
    return {p.metadata.name for p in (await api.pods.list("default")).items
            if p.status.phase == "Running" and not p.metadata.deletion_timestamp}


async def disarm(tc, component: str, name: str) -> None:
    """Turn a failpoint off, once the component answers again (a sleep at a synchronous point
    holds its whole loop, its admin port included)."""
    def off() -> bool:
        try:
            failpoint(tc, component, name, "off")
        except OSError:
            return False
        return True

    await eventually(off, timeout=WAIT, what=f"{name} turned off in {component}")


def resize_attempts(tc, result: str) -> float:
    return metric(tc, "scheduler", "scheduler_resize_preemption_attempts_total",
                  f'profile="default-scheduler",result="{result}"')


def assert_never_nominated_nor_unscheduled(pod: core_pb2.Pod) -> None:
    """KEP-5836 "Failure Handler Adjustments": no nominatedNodeName, PodScheduled untouched."""
    assert pod.status.nominated_node_name == ""
    scheduled = condition(pod, "PodScheduled")
    assert scheduled is not None and scheduled.status == "True", scheduled
