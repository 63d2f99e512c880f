"""The kubelet's side of resize preemption, on a real kubelet and runtime:

- KEP-1287 "Priority of Resize Requests": a critical pod (system-node-critical) that does not fit
  is not refused: at admission, and for a resize, the kubelet evicts a non-critical pod to make
  room (the victim ends Failed, reason Preempted, with a ``Preempting`` event);
- KEP-5836 "Node-level Preemption Policy" and "PodResizePreemptionDisabled Pod Condition": while
  the Node's ``spec.podPreemptionPolicy.disableResizePreemption`` is non-empty, a Deferred resize
  carries PodResizePreemptionDisabled=True (reason PreemptionDisabledByNodePolicy) and the kubelet
  does not preempt for it; the condition goes when the list empties or the resize resolves;
- version skew: a kubelet emulating 1.35 does not know the policy and never sets the condition.

The gate SchedulerPreemptionForPodResize (alpha, off by default) is on for these clusters.
"""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, start_cluster, stop_cluster
from tests.harness.wait import condition, eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
GATE = "SchedulerPreemptionForPodResize=true"
DISABLED = "PodResizePreemptionDisabled"

policy_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET,
                                 feature_gates=GATE)


@pytest.fixture
async def api(policy_cluster):
    c = policy_cluster.client()
    try:
        yield c
    finally:
        await c.nodes.patch(NODE, {"spec": {"podPreemptionPolicy": None}}, patch_type="merge")
        await delete_all_pods(c)
        await c.close()


_running = wait_running


async def _resize(api, name: str, cpu: str) -> None:
    await resize(api, name, cpu=cpu)


async def _policy(api, owners: list[str]) -> None:
    await api.nodes.patch(NODE, {"spec": {"podPreemptionPolicy": {"disableResizePreemption": owners}}},
                          patch_type="merge")


async def _conditions(api, name: str, want: dict[str, str], what: str) -> core_pb2.Pod:
    """Until the pod's resize conditions are exactly ``want`` (type -> reason)."""
    box = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        got = {c.type: c.reason for c in pod.status.conditions
               if c.type in ("PodResizePending", "PodResizeInProgress", DISABLED)}
        box["got"] = got
        return got == want

    try:
        await eventually(check, timeout=20, what=what)
    except AssertionError:
        raise AssertionError(f"{what}: want {want}, last seen {box.get('got')}") from None
    return box["pod"]


async def _preempted(api, name: str) -> None:
    async def check():
        p = await api.pods.get(name)
        return p.status.phase == "Failed" and p.status.reason == "Preempted"

    await eventually(check, timeout=20, what=f"{name} preempted")
    pod = await api.pods.get(name)
    assert pod.status.message == "Preempted in order to admit critical pod"
    target = condition(pod, "DisruptionTarget")
    assert target is not None and target.status == "True" and target.reason == "TerminationByKubelet"
    assert target.message == "Pod was preempted by Kubelet to accommodate a critical pod."
    events = await api.events.list("default", field_selector=f"involvedObject.name={name}")
    assert any(e.reason == "Preempting" and e.type == "Warning" for e in events.items)


async def test_a_critical_pod_that_does_not_fit_is_admitted_by_preempting_a_pod(api):
    await api.pods.create(MakePod().name("victim").req(cpu="3", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("bystander").req(cpu="500m", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "victim", "bystander")
    await api.pods.create(MakePod().name("critical").req(cpu="2", memory="256Mi").priority_class("system-node-critical")
                          .node(NODE).grace(1).resize_policy("cpu", "NotRequired").obj())
    await _preempted(api, "victim")
    await _running(api, "critical")
    assert (await api.pods.get("bystander")).status.phase == "Running"


async def test_a_non_critical_pod_that_does_not_fit_is_refused(api):
    await api.pods.create(MakePod().name("big").req(cpu="3", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "big")
    await api.pods.create(MakePod().name("normal").req(cpu="2", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())

    async def refused():
        p = await api.pods.get("normal")
        return p.status.phase == "Failed" and p.status.reason == "OutOfcpu"

    await eventually(refused, timeout=20, what="normal refused with OutOfcpu")
    assert (await api.pods.get("big")).status.phase == "Running"


async def test_a_critical_pods_resize_preempts_a_non_critical_pod(api):
    await api.pods.create(MakePod().name("critical").req(cpu="1", memory="256Mi").priority_class("system-node-critical")
                          .node(NODE).grace(1).resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("victim").req(cpu="2", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("small").req(cpu="500m", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "critical", "victim", "small")
    await _resize(api, "critical", "3")  # 3 + 2 + 0.5 > 4: the 2-CPU pod must go, the small one may stay
    await _preempted(api, "victim")
    pod = await _conditions(api, "critical", {}, "critical resized")
    assert Quantity(pod.status.container_statuses[0].resources.requests["cpu"]) == Quantity("3")
    assert (await api.pods.get("small")).status.phase == "Running"


async def test_node_policy_sets_and_clears_preemption_disabled_and_stops_kubelet_preemption(api):
    await api.pods.create(MakePod().name("critical").req(cpu="1", memory="256Mi").priority_class("system-node-critical")
                          .node(NODE).grace(1).resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("victim").req(cpu="2500m", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "critical", "victim")
    await _policy(api, ["autoscaler-a", "autoscaler-b"])

    await _resize(api, "critical", "2")  # does not fit; preemption disabled by the node: Deferred
    pod = await _conditions(api, "critical",
                            {"PodResizePending": "Deferred", DISABLED: "PreemptionDisabledByNodePolicy"},
                            "deferred with preemption disabled")
    c = condition(pod, DISABLED)
    assert c.status == "True"
    assert c.message == f"Preemption for in-place pod resize is disabled on node '{NODE}' by preemption policy."
    assert (await api.pods.get("victim")).status.phase == "Running", "the kubelet preempted despite the node policy"

    await _policy(api, ["autoscaler-b"])  # still non-empty: nothing changes
    await _conditions(api, "critical", {"PodResizePending": "Deferred", DISABLED: "PreemptionDisabledByNodePolicy"},
                      "still disabled with one owner left")

    await _policy(api, [])  # the list empties: the condition goes, and the kubelet preempts
    await _preempted(api, "victim")
    await _conditions(api, "critical", {}, "critical resized once preemption is allowed")


async def _free_the_room(api) -> None:
    await api.pods.delete("filler", grace_period_seconds=0)


async def _revert_the_resize(api) -> None:
    await _resize(api, "grow", "1")


@pytest.mark.parametrize("resolve", [_free_the_room, _revert_the_resize], ids=["resize-done", "resize-cancelled"])
async def test_preemption_disabled_goes_when_the_deferred_resize_resolves(api, resolve):
    await api.pods.create(MakePod().name("grow").req(cpu="1", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("filler").req(cpu="3", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await _running(api, "grow", "filler")
    await _policy(api, ["autoscaler-a"])
    await _resize(api, "grow", "2")
    await _conditions(api, "grow", {"PodResizePending": "Deferred", DISABLED: "PreemptionDisabledByNodePolicy"},
                      "deferred with preemption disabled")
    await resolve(api)
    await _conditions(api, "grow", {}, "resize resolved, conditions gone")


async def test_an_old_kubelet_ignores_the_node_policy():
    tc = start_cluster(nodes=1, node_cpu="4", node_memory="8Gi",
                       kubelet_args=FAST_KUBELET + ["--emulated-version=1.35", "--feature-gates="], feature_gates=GATE)
    api = tc.client()
    try:
        await api.pods.create(MakePod().name("grow").req(cpu="1", memory="256Mi").node(NODE).grace(1)
                              .resize_policy("cpu", "NotRequired").obj())
        await api.pods.create(MakePod().name("filler").req(cpu="3", memory="256Mi").node(NODE).grace(1)
                              .resize_policy("cpu", "NotRequired").obj())
        await _running(api, "grow", "filler")
        await _policy(api, ["autoscaler-a"])
        await _resize(api, "grow", "2")
        await _conditions(api, "grow", {"PodResizePending": "Deferred"}, "deferred, no policy condition")
        node = await api.nodes.get(NODE)
        assert node.status.node_info.kubelet_version == "v1.35.0"
    finally:
        await api.close()
        stop_cluster(tc)
