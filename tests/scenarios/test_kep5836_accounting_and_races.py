"""KEP-5836: Scheduler Preemption for In-Place Pod Resize — "Risk of Additional Preemption" and
"Reconsideration Race Conditions", on real processes (etcd, apiserver, scheduler, one 4-CPU node).

"Risk of Additional Preemption", the document's 4-pod example with X = 2 CPUs on a node of 2X:
Pod1 (high priority) desired X, allocated X/2; Pods 2, 3, 4 (low priority) desired 2X, allocated
X/2 — all Deferred. With the alpha accounting (NodeResourcesFit ``deferredResizeAccounting:
AllPodsAtMax``, every pod at max(desired, allocated, actual)) the scheduler preempts all three;
with the kubelet-consistent one (``KubeletConsistent``: the other pods at max(allocated, actual))
only one, Pod 4. The victims are asserted exactly; the low pods have distinct priorities (30, 20,
10) so that "the first it tries to reprieve" is Pod 2 as in the document. And the kubelet's side
of the section: the resizing pod at max(desired, allocated, actual) per container, so a resize
moving a CPU from one container to another on a full node is Deferred, not allocated at once.

"Reconsideration Race Conditions": Pod A's Deferred resize preempts Pod B; meanwhile Pod C, of
higher priority (and non-preempting, so that only A preempts), asks for a resize too. Each of the
document's three eventualities is a test:

1. Pod A is correctly resized: it loses its Deferred condition and leaves the scheduler's queue —
   even after the scheduler parked it (the room was there before the kubelet actuated it);
2. Pod C is resized with the room freed for A: the scheduler had parked A (it fit, beside C as the
   kubelet held C), C's actuation is a scale-up on A's node, NodeResourcesFit's QueueingHint
   brings A back, and A preempts again;
3. both A and C are resized: both leave the queue, nobody else is preempted.

The kubelet is made slow at the right moment by the failpoint ``kubelet/resize-before-allocate``
(a one-shot sleep of its loop), so the scheduler looks at A between the victim's removal and the
kubelet's allocation — the window the document's race lives in. After each test ``kplane check``
must pass over the whole history.
"""

from __future__ import annotations

import pytest

from machinery.quantity import Quantity
from tests.harness.api import ensure_priority_classes, resize
from tests.harness.builders import MakePod
from tests.harness.failpoints import failpoint
from tests.harness.metrics import metric, requeued_by
from tests.harness.resize_preemption import (
    NODE,
    WAIT,
    disarm,
    gone,
    one_node_cluster,
    preempted_by,
    resizable_pod,
    resize_api,
    resize_attempts,
    resize_state,
    run_pods,
    running_names,
    scheduler_config,
    wait_actuated,
    wait_resize_conditions,
)
from tests.harness.wait import eventually

pytestmark = pytest.mark.scenario

SLOW_KUBELET = "kubelet/resize-before-allocate"

def _accounting_cluster(accounting: str):
    @pytest.fixture(scope="module")
    def fixture():
        config = scheduler_config("NodeResourcesFit", {"deferredResizeAccounting": accounting})
        with one_node_cluster(config) as tc:
            yield tc
    return fixture


alpha_cluster = _accounting_cluster("AllPodsAtMax")
kubelet_cluster = _accounting_cluster("KubeletConsistent")


@pytest.fixture
async def alpha_api(alpha_cluster):
    async with resize_api(alpha_cluster) as c:
        yield c


@pytest.fixture
async def kubelet_api(kubelet_cluster):
    async with resize_api(kubelet_cluster) as c:
        try:
            yield c
        finally:
            await disarm(kubelet_cluster, f"kubelet/{NODE}", SLOW_KUBELET)


def _pending(tc) -> float:
    """Pods the scheduler's queue holds for a deferred resize, in any sub-queue."""
    return metric(tc, "scheduler", "scheduler_pending_resize_pods")


# ------------------------------------------------------------------ Risk of Additional Preemption


async def _four_pods(api, tc) -> None:
    """The document's example, X = 2 CPUs: every pod runs at X/2; Pods 2-4 ask for 2X (Deferred,
    and no preemption can help them: 2X beside Pod1 exceeds the node), then Pod1 asks for X."""
    await ensure_priority_classes(api, **{"p-30": 30, "p-20": 20, "p-10": 10})
    await run_pods(api,
                   resizable_pod("pod1", "1", "p-high").obj(),
                   resizable_pod("pod2", "1", "p-30").obj(),
                   resizable_pod("pod3", "1", "p-20").obj(),
                   resizable_pod("pod4", "1", "p-10").obj())
    unschedulable = resize_attempts(tc, "unschedulable")
    for name in ("pod2", "pod3", "pod4"):
        await resize(api, name, cpu="4")
        await wait_resize_conditions(api, name, {"PodResizePending": "Deferred"}, f"{name} deferred")
    await eventually(lambda: resize_attempts(tc, "unschedulable") >= unschedulable + 3, timeout=WAIT,
                     what="the scheduler found no victims for Pods 2-4")
    await resize(api, "pod1", cpu="2")


async def test_risk_of_additional_preemption_the_alpha_accounting_preempts_three(alpha_api, alpha_cluster):
    api = alpha_api
    await _four_pods(api, alpha_cluster)
    for name in ("pod2", "pod3", "pod4"):
        await gone(api, name)
        assert await preempted_by(api, name) == "pod1"
    await wait_actuated(api, "pod1", "2")
    assert await running_names(api) == {"pod1"}


async def test_risk_of_additional_preemption_the_kubelet_consistent_accounting_preempts_one(kubelet_api,
                                                                                           kubelet_cluster):
    api = kubelet_api
    await _four_pods(api, kubelet_cluster)
    await gone(api, "pod4")
    assert await preempted_by(api, "pod4") == "pod1"
    await wait_actuated(api, "pod1", "2")
    assert await running_names(api) == {"pod1", "pod2", "pod3"}
    for name in ("pod2", "pod3"):  # still asking for 2X, still Deferred, not preempted
        await wait_resize_conditions(api, name, {"PodResizePending": "Deferred"}, f"{name} still deferred")
        assert await preempted_by(api, name) == ""


async def test_risk_of_additional_preemption_the_kubelet_counts_the_resizing_pod_at_its_larger_size(
        kubelet_api, kubelet_cluster):
    """The kubelet's fit model the section states: the resizing pod at max(desired, allocated,
    actual) per container. ``duo`` moves a CPU from c1 (2 -> 1) to c2 (1 -> 2) on a full node: the
    sum stays 3, but until c1's decrease is actuated the pod holds 4 — Deferred, with Kubernetes'
    numbers; the scheduler, counting it the same way, preempts ``low`` and the move is actuated."""
    api = kubelet_api
    duo = (MakePod().name("duo").priority_class("p-high").grace(1)
           .container("c1", cpu="2", memory="64Mi").resize_policy("cpu", "NotRequired")
           .container("c2", cpu="1", memory="64Mi").resize_policy("cpu", "NotRequired").obj())
    await run_pods(api, duo, resizable_pod("low", "1", "p-lowest").obj())
    await api.pods.patch("duo", {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}}},
                                                          {"name": "c2", "resources": {"requests": {"cpu": "2"}}}]}},
                         subresource="resize")
    pod = await wait_resize_conditions(api, "duo", {"PodResizePending": "Deferred"}, "duo's move deferred")
    pending = next(c for c in pod.status.conditions if c.type == "PodResizePending")
    assert pending.message == "Node didn't have enough resource: cpu, requested: 4000, used: 1000, capacity: 4000"
    await gone(api, "low")
    assert await preempted_by(api, "low") == "duo"

    async def moved():
        p = await api.pods.get("duo")
        got = {c.name: Quantity(c.resources.requests.get("cpu", "0")) for c in p.status.container_statuses}
        return not resize_state(p) and got == {"c1": Quantity("1"), "c2": Quantity("2")}

    await eventually(moved, timeout=WAIT, what="duo's move actuated: c1 1 CPU, c2 2 CPUs")


# ------------------------------------------------------------------ Reconsideration Race Conditions


async def _a_preempts_d(api, tc) -> None:
    """A (p-mid, 1 CPU) asks for 2; the node is full; D (p-lowest, terminating for 2 s) is A's
    victim. The kubelet will sleep once before it allocates the next resize that fits."""
    failpoint(tc, f"kubelet/{NODE}", SLOW_KUBELET, "1*sleep(6000)")
    await resize(api, "a", cpu="2")
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a deferred")


def _slow_victim(name: str, cpu: str):
    pod = (resizable_pod(name, cpu, "p-lowest", 5).obj())
    pod.metadata.annotations["kplane.dev/shutdown-seconds"] = "2"
    return pod


async def test_reconsideration_a_is_resized_and_leaves_the_queue_even_after_being_parked(kubelet_api,
                                                                                         kubelet_cluster):
    api, tc = kubelet_api, kubelet_cluster
    await run_pods(api,
                   resizable_pod("a", "1", "p-mid").obj(),
                   resizable_pod("c", "1", "p-high-never").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   _slow_victim("d", "1"))
    parked = resize_attempts(tc, "parked")
    await _a_preempts_d(api, tc)
    await gone(api, "d")
    assert await preempted_by(api, "d") == "a"
    await eventually(lambda: resize_attempts(tc, "parked") > parked, timeout=WAIT,
                     what="the scheduler parked a: d gone, the kubelet not done")
    await wait_actuated(api, "a", "2")
    await eventually(lambda: _pending(tc) == 0, timeout=WAIT, what="a left the scheduler's queue")
    assert await running_names(api) == {"a", "b", "c"}


async def test_reconsideration_c_takes_the_room_and_a_preempts_again(kubelet_api, kubelet_cluster):
    api, tc = kubelet_api, kubelet_cluster
    await run_pods(api,
                   resizable_pod("a", "1", "p-mid").obj(),
                   resizable_pod("c", "1", "p-high-never").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   _slow_victim("d", "1"))
    parked, scale_ups = resize_attempts(tc, "parked"), requeued_by(tc, "AssignedPodUpdatePodScaleUp")
    await _a_preempts_d(api, tc)
    # While d terminates, C — of higher priority, so the kubelet serves it first — asks for room too.
    await resize(api, "c", cpu="2")
    await wait_resize_conditions(api, "c", {"PodResizePending": "Deferred"}, "c deferred")
    await gone(api, "d")
    await eventually(lambda: resize_attempts(tc, "parked") > parked, timeout=WAIT,
                     what="the scheduler parked a: beside c as the kubelet holds it, a fits")
    await wait_actuated(api, "c", "2")  # the kubelet gave d's room to c
    await eventually(lambda: requeued_by(tc, "AssignedPodUpdatePodScaleUp") > scale_ups, timeout=WAIT,
                     what="c's scale-up brought a back through NodeResourcesFit's hint")
    await gone(api, "b")  # a preempted again
    assert await preempted_by(api, "b") == "a"
    await wait_actuated(api, "a", "2")
    assert await running_names(api) == {"a", "c"}


async def test_reconsideration_a_and_c_are_both_resized_and_nobody_else_goes(kubelet_api, kubelet_cluster):
    api, tc = kubelet_api, kubelet_cluster
    await run_pods(api,
                   resizable_pod("a", "1", "p-mid").obj(),
                   resizable_pod("c", "1", "p-high-never").obj(),
                   _slow_victim("d", "2"))
    await _a_preempts_d(api, tc)
    await resize(api, "c", cpu="2")
    await wait_resize_conditions(api, "c", {"PodResizePending": "Deferred"}, "c deferred")
    await gone(api, "d")
    assert await preempted_by(api, "d") == "a"
    await wait_actuated(api, "c", "2")
    await wait_actuated(api, "a", "2")
    await eventually(lambda: _pending(tc) == 0, timeout=WAIT, what="a and c left the scheduler's queue")
    assert await running_names(api) == {"a", "c"}
