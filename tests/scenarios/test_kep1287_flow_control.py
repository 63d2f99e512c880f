"""KEP-1287 "Flow Control": the fifteen steps of a pod's in-place resizes, with a kubelet restart
at step 5, checked step by step on a real cluster (apiserver, kubelet, runtime as processes).

At every step the test compares what the KEP lists — spec requests, ``allocatedResources``,
the kubelet's actuated resources (its checkpoint file on disk), ``status.resources`` (actual),
the resize conditions and the CPU shares the runtime really applied — with what the cluster
shows. Steps the KEP shows between two kubelet actions are held with ``pause`` failpoints:
the runtime's ``UpdateContainerResources`` (the runtime has not applied yet) and the kubelet's
``resize-after-actuated`` (applied, status not yet written).

The node has 2 CPUs and a 400m filler pod, so cpu=2 is feasible but does not fit now
(Deferred), 1.6 fits, and 100 is Infeasible.
"""

from __future__ import annotations

import pytest

from kubelet.allocation.checkpoint import ACTUATED_FILE
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.node_state import applied, checkpointed, runtime
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
KUBELET, RUNTIME = f"kubelet/{NODE}", f"runtime/{NODE}"
FP_RUNTIME_UPDATE = "runtime/update-container-resources"
FP_AFTER_ACTUATED = "kubelet/resize-after-actuated"

# The KEP's flow, whose resize #4 reaches the kubelet and is Infeasible there: from Kubernetes 1.36
# the apiserver refuses it at once (PodResizeValidator, tests/scenarios/test_kep1287_resize_admission.py),
# so the cluster runs the release before.
flow_cluster = cluster_fixture(nodes=1, node_cpu="2", node_memory="4Gi", kubelet_args=FAST_KUBELET, version="1.35")


def _milli(q: str | None) -> int | None:
    return None if q is None else Quantity(q).milli_value()


class Flow:
    """The pod of the flow and a snapshot of its resource states, as the KEP lists them."""

    def __init__(self, tc, api, rt):
        self.tc, self.api, self.rt = tc, api, rt
        self.pod: core_pb2.Pod | None = None

    async def snapshot(self, pod: core_pb2.Pod | None = None) -> dict:
        pod = pod or await self.api.pods.get("flow")
        self.pod = pod
        cs = next((c for c in pod.status.container_statuses if c.name == "c1"), None)
        actuated = checkpointed(self.tc, NODE, pod.metadata.uid, ACTUATED_FILE).get("c1")
        shares = None
        if cs is not None and cs.container_id:
            shares = (await applied(self.rt, cs.container_id.split("://", 1)[-1])).cpu_shares
        return {
            "spec": _milli(pod.spec.containers[0].resources.requests.get("cpu")),
            "allocated": (_milli(cs.allocated_resources.get("cpu"))
                          if cs is not None and cs.allocated_resources else None),
            "actuated": _milli(actuated.requests.get("cpu")) if actuated is not None else None,
            "actual": _milli(cs.resources.requests.get("cpu")) if cs is not None and cs.HasField("resources") else None,
            "conditions": {c.type: c.reason for c in pod.status.conditions
                           if c.type in ("PodResizePending", "PodResizeInProgress")},
            "shares": shares,
        }

    async def reach(self, step: str, **expected) -> dict:
        """Wait until the snapshot shows ``expected`` (every key given), then return it."""
        box: dict = {}

        async def check() -> bool:
            box["seen"] = await self.snapshot()
            return all(box["seen"][k] == v for k, v in expected.items())

        try:
            await eventually(check, timeout=20, what=step)
        except AssertionError:
            raise AssertionError(f"{step}: expected {expected}, last seen {box.get('seen')}") from None
        return box["seen"]

    async def resize(self, cpu: str) -> dict:
        """Resize through the ``resize`` subresource; the snapshot of the object the API stored."""
        return await self.snapshot(await resize(self.api, "flow", cpu=cpu))


def _expect(step: str, seen: dict, **expected) -> None:
    wrong = {k: seen[k] for k, v in expected.items() if seen[k] != v}
    assert not wrong, f"{step}: expected {expected}, got {wrong} (whole state {seen})"


IN_PROGRESS = {"PodResizeInProgress": ""}
DEFERRED = {"PodResizePending": "Deferred"}
INFEASIBLE = {"PodResizePending": "Infeasible"}


async def test_kep1287_flow_control_steps_1_to_15(flow_cluster):
    tc = flow_cluster
    api = tc.client()
    rt = runtime(tc, NODE)
    try:
        await _flow(tc, api, rt)
    finally:
        for component, name in ((RUNTIME, FP_RUNTIME_UPDATE), (KUBELET, FP_AFTER_ACTUATED)):
            try:
                failpoint(tc, component, name, "off")
            except OSError:
                pass
        await rt.close()
        await api.close()


async def _flow(tc, api, rt) -> None:
    node = await api.nodes.get(NODE)
    assert node.status.allocatable["cpu"] == "2", "the flow's numbers need a 2-CPU node"
    await api.pods.create(MakePod().name("filler").req(cpu="400m", memory="64Mi").node(NODE).obj())
    # Admitted and running before the failpoints below are armed: a pause meant for the flow
    # pod's admission must not catch the filler's (under load the kubelet admits it late).
    await wait_running(api, "filler")
    flow = Flow(tc, api, rt)

    # 1. A new pod is created: requests cpu=1, resizePolicy cpu NotRequired, all status unset.
    pod = MakePod().name("flow").req(cpu="1", memory="64Mi").grace(1).obj()
    pod.spec.containers[0].resize_policy.add(resource_name="cpu", restart_policy="NotRequired")
    created = await api.pods.create(pod)
    _expect("step 1", await flow.snapshot(created), spec=1000, allocated=None, actuated=None, actual=None,
            conditions={})
    assert not created.status.container_statuses and not created.spec.node_name

    # 2. The pod is scheduled (bound as the scheduler binds); its status is still unset: the
    #    kubelet is held right after admitting it, before it creates anything.
    failpoint(tc, KUBELET, "kubelet/admit-after-checkpoint", "1*pause")
    await api.pods.bind("flow", NODE)
    await wait_paused(tc, KUBELET, "kubelet/admit-after-checkpoint")
    seen = await flow.snapshot()
    _expect("step 2", seen, spec=1000, allocated=None, actual=None, conditions={}, shares=None)
    assert flow.pod.spec.node_name == NODE
    failpoint(tc, KUBELET, "kubelet/admit-after-checkpoint", "off")

    # 3. The kubelet runs the pod: allocated = actuated = actual = 1, shares 1024.
    await flow.reach("step 3", spec=1000, allocated=1000, actuated=1000, actual=1000, conditions={}, shares=1024)
    container_id = flow.pod.status.container_statuses[0].container_id

    # 4. Resize #1 to 1.5, with the kubelet down: the API accepts it, nothing else moves.
    kill(tc, KUBELET)
    _expect("step 4", await flow.resize("1.5"), spec=1500, allocated=1000, actuated=1000, actual=1000,
            conditions={}, shares=1024)

    # 5. The kubelet restarts: allocated and actuated come back from the checkpoint; the pod is
    #    re-admitted at its allocation (1), not re-created. The runtime holds the resize it will
    #    be asked for, so the state of step 6 can be seen.
    failpoint(tc, RUNTIME, FP_RUNTIME_UPDATE, "pause")
    _expect("step 5 (kubelet down)", await flow.snapshot(), spec=1500, allocated=1000, actuated=1000, actual=1000,
            shares=1024)
    start(tc, KUBELET)

    # 6. The kubelet syncs the pod, admits resize #1: allocated 1.5, PodResizeInProgress; the
    #    runtime has not applied it (actuated and shares unchanged).
    await wait_paused(tc, RUNTIME, FP_RUNTIME_UPDATE)
    await flow.reach("step 6", spec=1500, allocated=1500, actuated=1000, actual=1000, conditions=IN_PROGRESS,
                     shares=1024)
    cs = flow.pod.status.container_statuses[0]
    assert cs.container_id == container_id and cs.restart_count == 0, "the restart re-created the container"

    # 7. Resize #2 to 2, accepted while resize #1 is being actuated.
    _expect("step 7", await flow.resize("2"), spec=2000, allocated=1500, actual=1000, conditions=IN_PROGRESS)
    _expect("step 7 (kubelet busy)", await flow.snapshot(), spec=2000, allocated=1500, actuated=1000, actual=1000,
            conditions=IN_PROGRESS, shares=1024)

    # 8. The runtime applies cpu=1.5: actuated 1.5, shares 1536, the status not written yet.
    failpoint(tc, KUBELET, FP_AFTER_ACTUATED, "1*pause")
    failpoint(tc, RUNTIME, FP_RUNTIME_UPDATE, "off")
    await wait_paused(tc, KUBELET, FP_AFTER_ACTUATED)
    _expect("step 8", await flow.snapshot(), spec=2000, allocated=1500, actuated=1500, actual=1000,
            conditions=IN_PROGRESS, shares=1536)

    # 9. The kubelet syncs, sees resize #2: feasible but no room now (1.6 + 0.4 of 2 CPUs at most)
    #    -> Deferred; resize #1 is done: InProgress removed, actual 1.5.
    failpoint(tc, RUNTIME, FP_RUNTIME_UPDATE, "pause")
    failpoint(tc, KUBELET, FP_AFTER_ACTUATED, "off")
    await flow.reach("step 9", spec=2000, allocated=1500, actuated=1500, actual=1500, conditions=DEFERRED,
                     shares=1536)
    deferred = next(c for c in flow.pod.status.conditions if c.type == "PodResizePending")
    assert "Node didn't have enough resource: cpu" in deferred.message, deferred.message

    # 10. Resize #3 to 1.6, accepted; still Deferred until the kubelet looks.
    _expect("step 10", await flow.resize("1.6"), spec=1600, allocated=1500, actual=1500, conditions=DEFERRED)

    # 11. The kubelet admits resize #3: Pending removed, InProgress added; the runtime holds it.
    await wait_paused(tc, RUNTIME, FP_RUNTIME_UPDATE)
    await flow.reach("step 11", spec=1600, allocated=1600, actuated=1500, actual=1500, conditions=IN_PROGRESS,
                     shares=1536)

    # 12. The runtime applies cpu=1.6: actuated 1.6, shares 1638, status not written yet.
    failpoint(tc, KUBELET, FP_AFTER_ACTUATED, "1*pause")
    failpoint(tc, RUNTIME, FP_RUNTIME_UPDATE, "off")
    await wait_paused(tc, KUBELET, FP_AFTER_ACTUATED)
    _expect("step 12", await flow.snapshot(), spec=1600, allocated=1600, actuated=1600, actual=1500,
            conditions=IN_PROGRESS, shares=1638)

    # 13. The kubelet syncs the pod: actual 1.6, InProgress removed.
    failpoint(tc, KUBELET, FP_AFTER_ACTUATED, "off")
    await flow.reach("step 13", spec=1600, allocated=1600, actuated=1600, actual=1600, conditions={}, shares=1638)

    # 14. Resize #4 to 100 CPUs: the API accepts it (it does not know the node's size).
    _expect("step 14", await flow.resize("100"), spec=100_000, allocated=1600, actual=1600, conditions={})

    # 15. The kubelet sees resize #4: the node does not have 100 CPUs -> Infeasible.
    seen = await flow.reach("step 15", spec=100_000, allocated=1600, actuated=1600, actual=1600,
                            conditions=INFEASIBLE, shares=1638)
    infeasible = next(c for c in flow.pod.status.conditions if c.type == "PodResizePending")
    assert "Node didn't have enough capacity: cpu, requested: 100000, capacity: 2000" in infeasible.message, \
        (infeasible.message, seen)
