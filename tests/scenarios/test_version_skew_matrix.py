"""The version skew matrix on real processes (issue 22; docs/version-skew.md shows it).

One cluster per (apiserver, scheduler) release pair the version skew policy allows, for apiservers
at 1.35, 1.36 and 1.37; in each, one node per kubelet release the policy allows beside that
apiserver. Every component gets KEP-5836's alpha gate where its release has it. On each node, at
once: KEP-1287's flow (a pod resized to what still fits the node) and KEP-5836's single victim (a
high-priority pod resized to what fits only once a low-priority pod goes). What each cell did —
resized, refused, preempted, deferred forever — is compared with what its components' gates say
it must do (``tests/harness/skew_matrix.py``, the model docs/version-skew.md's table is checked
against).

"Deferred forever" is shown, not waited for: once the resize is Deferred, a pod no node can take
is created with the lowest priority; when the scheduler has marked it unschedulable it has
handled every pod event before it — the Deferred resize included, which it would have queued
first — and its KEP-5836 metrics still show no pending resize and no attempt, and the victim
still runs.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from cli import topology
from machinery import errors
from tests.harness import skew_matrix
from tests.harness.api import ensure_priority_classes, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, start_cluster, stop_cluster
from tests.harness.metrics import metric
from tests.harness.resize_preemption import resizable_pod, resize_state, wait_actuated, wait_resize_conditions
from tests.harness.wait import condition, eventually, wait_running

pytestmark = pytest.mark.scenario

PAIRS = [(a, s) for (a, s), _ in itertools.groupby(skew_matrix.cells(), key=lambda c: (c.apiserver, c.scheduler))]
WAIT = 60


def _node(release) -> str:
    return f"v{release.major}-{release.minor}"


def _gate_args(release) -> list[str]:
    gates = skew_matrix.gates_for(release)
    return [f"--emulated-version={release}", f"--feature-gates={gates}"]


@pytest.fixture(scope="module", params=PAIRS, ids=[f"apiserver-{a}-scheduler-{s}" for a, s in PAIRS])
def matrix_cluster(request):
    apiserver, scheduler = request.param
    kubelets = [c.kubelet for c in skew_matrix.cells() if (c.apiserver, c.scheduler) == (apiserver, scheduler)]
    nodes = [topology.NodeSpec(_node(k), cpu="8", memory="16Gi", pods=20,
                               kubelet_args=FAST_KUBELET + _gate_args(k)) for k in kubelets]
    tc = start_cluster(schedulers=1, version=str(apiserver), added_nodes=nodes,
                       apiserver_args=_gate_args(apiserver), scheduler_args=_gate_args(scheduler))
    tc.apiserver_release, tc.scheduler_release, tc.kubelets = apiserver, scheduler, kubelets
    try:
        yield tc
    finally:
        stop_cluster(tc)


async def _flow(api, node: str) -> str:
    """KEP-1287's flow: 1 CPU resized to 2, which fits the node."""
    try:
        await resize(api, f"flow-{node}", cpu="2")
    except errors.Invalid:
        return skew_matrix.REFUSED
    await wait_actuated(api, f"flow-{node}", "2")
    return skew_matrix.RESIZED


async def _single_victim(tc, api, node: str) -> str:
    """KEP-5836's single victim: the node is full (flow 2, grow 1, filler 5 of 8 CPUs); grow, high
    priority, asks for one more CPU, which only the low-priority filler's going makes."""
    grow, filler, marker = f"grow-{node}", f"filler-{node}", f"marker-{node}"
    try:
        await resize(api, grow, cpu="2")
    except errors.Invalid:
        return skew_matrix.REFUSED
    await wait_resize_conditions(api, grow, {"PodResizePending": "Deferred"}, f"{grow} deferred")
    await api.pods.create(MakePod().name(marker).req(cpu="100").priority_class("p-lowest").obj())
    seen: dict[str, str] = {}

    async def decided() -> bool:
        pods = {p.metadata.name: p for p in (await api.pods.list("default")).items}
        if filler not in pods and not resize_state(pods[grow]):
            seen["outcome"] = skew_matrix.PREEMPTED
            return True
        scheduled = condition(pods[marker], "PodScheduled")
        untouched = (filler in pods and not pods[filler].metadata.deletion_timestamp
                     and condition(pods[filler], "DisruptionTarget") is None
                     and resize_state(pods[grow]) == {"PodResizePending": "Deferred"})
        quiet = (metric(tc, "scheduler", "scheduler_pending_resize_pods") == 0
                 and metric(tc, "scheduler", "scheduler_resize_preemption_attempts_total") == 0)
        if scheduled is not None and scheduled.status == "False" and untouched and quiet:
            seen["outcome"] = skew_matrix.DEFERRED
            return True
        return False

    await eventually(decided, timeout=WAIT, what=f"{grow}'s resize preempted, or left deferred by the scheduler")
    return seen["outcome"]


async def _cell(tc, api, kubelet) -> skew_matrix.Outcome:
    node = _node(kubelet)
    for name, cpu, priority in ((f"flow-{node}", "1", "p-high"), (f"grow-{node}", "1", "p-high"),
                                (f"filler-{node}", "5", "p-low")):
        await api.pods.create(resizable_pod(name, cpu, priority).node(node).obj())
    for name in (f"flow-{node}", f"grow-{node}", f"filler-{node}"):
        await wait_running(api, name, timeout=WAIT)
    flow = await _flow(api, node)
    single = await _single_victim(tc, api, node)
    return skew_matrix.Outcome(flow, single, "")


async def test_each_cell_does_what_its_components_releases_say(matrix_cluster):
    tc = matrix_cluster
    api = tc.client()
    try:
        await ensure_priority_classes(api, **{"p-high": 1000, "p-low": 20, "p-lowest": 10})
        results = await asyncio.gather(*(_cell(tc, api, k) for k in tc.kubelets))
    finally:
        await api.close()
    got = {str(k): (r.flow, r.single_victim) for k, r in zip(tc.kubelets, results, strict=True)}
    want = {}
    for k in tc.kubelets:
        e = skew_matrix.expected(skew_matrix.Cell(tc.apiserver_release, tc.scheduler_release, k))
        want[str(k)] = (e.flow, e.single_victim)
    assert got == want, f"apiserver {tc.apiserver_release}, scheduler {tc.scheduler_release}: by kubelet release"
