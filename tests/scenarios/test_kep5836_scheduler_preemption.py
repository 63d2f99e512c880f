"""KEP-5836: Scheduler Preemption for In-Place Pod Resize, its "Test Plan", on real processes: etcd,
the apiserver, the scheduler and one node (kubelet + fake runtime) of 4 CPUs, with the gate
SchedulerPreemptionForPodResize on in every component.

A pod's in-place resize that does not fit its node is Deferred by the kubelet; the scheduler
queues the pod (beside its copy in the cache), checks resource fit on that node only and, as for a
new pod, preempts lower-priority pods there; the kubelet then retries the resize and actuates it.

- "A lower-priority pod can be preempted by a higher-priority Deferred resize", then "the Kubelet
  successfully actuates the Deferred resize after the preemption completes";
- "Several lower-priority pods can be preempted by a higher-priority Deferred resize";
- "Non-preempting pods according to the preemptionPolicy do not trigger preemption";
- "Handling Node Evaluation Results": a resize that fits is parked, nothing preempted;
- "Race between a Deferred resize and a new higher-priority pod": the resizing pod is the victim;
- the node's podPreemptionPolicy, through a kubelet that sets PodResizePreemptionDisabled and
  through one too old to (the scheduler reads the Node itself: "Version Skew Strategy"), and
  when it appears after the victims were chosen (checked again before the first eviction);
- the gate off: nothing of this happens.

Victims are told apart by priority (the lowest goes first), never by start time. After each test
``kplane check`` must pass over the whole history.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from machinery import errors
from tests.harness.api import resize
from tests.harness.builders import make_pdb
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.metrics import metric
from tests.harness.resize_preemption import (
    GATE,
    NODE,
    WAIT,
    assert_never_nominated_nor_unscheduled,
    disarm,
    gone,
    preempted_by,
    resizable_pod,
    resize_api,
    resize_attempts,
    run_pods,
    running_names,
    wait_actuated,
    wait_resize_conditions,
)
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

VICTIMS_CHOSEN = "scheduler/preemption-after-victims-chosen"
KUBELET = f"kubelet/{NODE}"

resize_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET,
                                 feature_gates=GATE)
gate_off_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi",
                                   kubelet_args=FAST_KUBELET)
old_kubelet_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", feature_gates=GATE,
                                      kubelet_args=FAST_KUBELET + ["--emulated-version=1.35", "--feature-gates="])
# a kubelet of the gate's release with the gate off: it propagates nothing either
gate_off_kubelet_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", feature_gates=GATE,
                                           kubelet_args=FAST_KUBELET + ["--feature-gates="])


@pytest.fixture
async def api(resize_cluster):
    async with resize_api(resize_cluster) as c:
        yield c


# ------------------------------------------------------------------------------------ Test Plan


async def test_a_lower_priority_pod_is_preempted_by_a_higher_priority_deferred_resize_which_the_kubelet_then_actuates(
        api, resize_cluster):
    await run_pods(api,
                   resizable_pod("a", "2", "p-high").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   resizable_pod("c", "1", "p-lowest").obj())
    preempted = resize_attempts(resize_cluster, "preempted")
    await resize(api, "a", cpu="3")  # 3 + 1 + 1 > 4: one of the 1-CPU pods must go, the lowest
    await gone(api, "c")
    pod = await wait_actuated(api, "a", "3")
    assert await preempted_by(api, "c") == "a"
    assert await running_names(api) == {"a", "b"}
    assert_never_nominated_nor_unscheduled(pod)
    assert resize_attempts(resize_cluster, "preempted") == preempted + 1
    history = [e async for e in api.history(since=0, follow=False)]
    victims = [e for resp in history for e in resp.entries if e.kind == "Event" and e.name.startswith("c.")]
    assert victims, "the Preempted event of c is in the history"


async def test_several_lower_priority_pods_are_preempted_for_one_deferred_resize(api, resize_cluster):
    await run_pods(api,
                   resizable_pod("a", "1", "p-high").obj(),
                   resizable_pod("b", "1", "p-mid").obj(),
                   resizable_pod("c", "1", "p-low").obj(),
                   resizable_pod("d", "1", "p-lowest").obj())
    await resize(api, "a", cpu="3")  # two more CPUs: c and d, the two lowest, go; b stays
    await gone(api, "c")
    await gone(api, "d")
    await wait_actuated(api, "a", "3")
    assert await preempted_by(api, "c") == "a" and await preempted_by(api, "d") == "a"
    assert await running_names(api) == {"a", "b"}


async def test_a_resize_whose_priority_class_never_preempts_preempts_nothing(api, resize_cluster):
    await run_pods(api,
                   resizable_pod("a", "2", "p-high-never").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   resizable_pod("c", "1", "p-lowest").obj())
    unschedulable = resize_attempts(resize_cluster, "unschedulable")
    await resize(api, "a", cpu="3")
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a deferred")
    await eventually(lambda: resize_attempts(resize_cluster, "unschedulable") > unschedulable, timeout=WAIT,
                     what="the scheduler looked at a's resize and found it may not preempt")
    evs = await api.events.list("default", field_selector="involvedObject.name=a")
    failed = [e.message for e in evs.items if e.reason == "FailedScheduling"]
    assert any("not eligible due to preemptionPolicy=Never" in m for m in failed), failed
    assert await running_names(api) == {"a", "b", "c"}
    assert_never_nominated_nor_unscheduled(await api.pods.get("a"))


async def test_a_resize_that_fits_while_the_kubelet_has_not_actuated_it_is_parked_and_preempts_nothing(
        api, resize_cluster):
    # b and c outrank a: a's resize can preempt nothing, and waits Deferred.
    await run_pods(api,
                   resizable_pod("a", "2", "p-low").obj(),
                   resizable_pod("b", "1", "p-high").obj(),
                   resizable_pod("c", "1", "p-mid").obj())
    await resize(api, "a", cpu="3")
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a deferred")
    await eventually(lambda: resize_attempts(resize_cluster, "unschedulable") > 0, timeout=WAIT, what="a's first cycle")
    parked = resize_attempts(resize_cluster, "parked")
    # The kubelet will find room once c goes, but is slow to allocate the resize: it sleeps (its
    # whole loop: the point is synchronous) before the allocation, once.
    failpoint(resize_cluster, f"kubelet/{NODE}", "kubelet/resize-before-allocate", "1*sleep(8000)")
    try:
        await api.pods.delete("c", "default", grace_period_seconds=0)
        await eventually(lambda: resize_attempts(resize_cluster, "parked") > parked, timeout=WAIT,
                         what="the scheduler parked a's resize: it fits, the kubelet has not actuated it")
        assert metric(resize_cluster, "scheduler", "scheduler_pending_resize_pods", 'queue="unschedulable"') == 1
        # Parked is waiting for the kubelet, not a failure: no FailedScheduling says so.
        evs = await api.events.list("default", field_selector="involvedObject.name=a")
        assert not any("pod resize fits" in e.message for e in evs.items), [e.message for e in evs.items]
    finally:
        await disarm(resize_cluster, f"kubelet/{NODE}", "kubelet/resize-before-allocate")
    await wait_actuated(api, "a", "3")
    await eventually(lambda: metric(resize_cluster, "scheduler", "scheduler_pending_resize_pods") == 0, timeout=WAIT,
                     what="a left the scheduling queue once its resize was actuated")
    assert await running_names(api) == {"a", "b"}


async def test_a_pod_disruption_budget_is_honoured_as_for_a_new_pod(api, resize_cluster):
    """"Pod Priority, Graceful Termination, and Pod Disruption Budget": PDBs are supported, not
    guaranteed. c, the lowest, is covered by a budget that allows no disruption, so b — of higher
    priority but unprotected — is the victim; without another choice the budget would give way."""
    c_pod = (resizable_pod("c", "1", "p-lowest").obj())
    c_pod.metadata.labels["app"] = "guarded"
    await api.pod_disruption_budgets.create(make_pdb("guard", {"app": "guarded"}, min_available="1"))
    try:
        await run_pods(api,
                       resizable_pod("a", "2", "p-high").obj(),
                       resizable_pod("b", "1", "p-low").obj(),
                       c_pod)
        await resize(api, "a", cpu="3")
        await gone(api, "b")
        assert await preempted_by(api, "b") == "a"
        await wait_actuated(api, "a", "3")
        assert await running_names(api) == {"a", "c"}
    finally:
        await api.pod_disruption_budgets.delete("guard", "default")


async def test_a_new_higher_priority_pod_may_preempt_the_resizing_pod_itself(api, resize_cluster):
    """"Race between a Deferred resize and a new higher-priority pod": the resize's room is reserved
    as soon as the spec says so, and the resizing pod is the best victim for the newcomer."""
    await run_pods(api,
                   resizable_pod("a", "1", "p-low").obj(),
                   resizable_pod("y", "2", "p-mid").obj())
    await resize(api, "a", cpu="3")  # 3 + 2 > 4, and y outranks a: Deferred for good
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a deferred")
    # z would fit beside a as it runs (1 + 2 + 1), not beside a as it asks to be (3 + 2 + 1): the
    # room of the resize is reserved, and a, the lowest, is the victim.
    await api.pods.create(resizable_pod("z", "1", "p-high").obj())
    await gone(api, "a")
    await wait_running(api, "z", timeout=WAIT)
    assert await preempted_by(api, "a") == "z"
    assert await running_names(api) == {"y", "z"}


POLICY = {"spec": {"podPreemptionPolicy": {"disableResizePreemption": ["autoscaler-a"]}}}


def _kept_out(tc) -> float:
    """Deferred resizes the scheduler kept out of its queue for the kubelet's condition so far."""
    return metric(tc, "scheduler", "scheduler_resize_preemption_skipped_total", 'reason="PodResizePreemptionDisabled"')


async def _wait_kept_out(api, tc, before: float) -> None:
    """Until the kubelet disabled preemption for a's deferred resize and the scheduler saw it."""
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred",
                                            "PodResizePreemptionDisabled": "PreemptionDisabledByNodePolicy"},
                                 "a deferred with preemption disabled by the node")
    await eventually(lambda: _kept_out(tc) > before, timeout=WAIT, what="the scheduler left a out of its queue")


async def test_node_policy_through_the_kubelet_keeps_the_resize_out_of_the_queue_until_it_is_cleared(
        api, resize_cluster):
    await run_pods(api,
                   resizable_pod("a", "2", "p-high").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   resizable_pod("c", "1", "p-lowest").obj())
    skipped = _kept_out(resize_cluster)
    await api.nodes.patch(NODE, POLICY, patch_type="merge")
    await resize(api, "a", cpu="3")
    await _wait_kept_out(api, resize_cluster, skipped)
    assert metric(resize_cluster, "scheduler", "scheduler_pending_resize_pods") == 0
    assert await running_names(api) == {"a", "b", "c"}
    await api.nodes.patch(NODE, {"spec": {"podPreemptionPolicy": None}}, patch_type="merge")
    await gone(api, "c")  # the kubelet cleared the condition; the scheduler queued a and preempted
    await wait_actuated(api, "a", "3")
    assert await running_names(api) == {"a", "b"}


async def test_a_node_policy_that_appears_after_the_victims_are_chosen_stops_the_evictions(api, resize_cluster):
    """The policy is checked again just before the first eviction: the cycle chose c, then (held at
    the failpoint) the node's policy appears and the kubelet disables preemption for a; released,
    the scheduler spares c."""
    await run_pods(api,
                   resizable_pod("a", "2", "p-high").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   resizable_pod("c", "1", "p-lowest").obj())
    skipped = _kept_out(resize_cluster)
    failpoint(resize_cluster, "scheduler", VICTIMS_CHOSEN, "1*pause")
    try:
        await resize(api, "a", cpu="3")
        await wait_paused(resize_cluster, "scheduler", VICTIMS_CHOSEN, timeout=WAIT)
        await api.nodes.patch(NODE, POLICY, patch_type="merge")
        await _wait_kept_out(api, resize_cluster, skipped)  # the scheduler's informer has the condition
    finally:
        await disarm(resize_cluster, "scheduler", VICTIMS_CHOSEN)
    resize_cluster.reload()
    log = Path(resize_cluster.process("scheduler").log)

    async def c_asked_to_go() -> bool:
        try:
            return bool((await api.pods.get("c")).metadata.deletion_timestamp)
        except errors.NotFound:
            return True

    async def decided() -> bool:  # withdrawn, or c asked to go
        return '"resize_preemption_withdrawn"' in log.read_text() or await c_asked_to_go()
    await eventually(decided, timeout=WAIT, what="the scheduler's preemption for a went on or was withdrawn")
    assert not await c_asked_to_go(), "c must be spared: preemption for a was disabled before any eviction"
    assert '"resize_preemption_withdrawn"' in log.read_text()
    assert await running_names(api) == {"a", "b", "c"}


async def test_failures_and_reconsideration_a_new_request_is_judged_before_the_kubelet_defers_it(api, resize_cluster):
    """KEP-5836 "Failures and Reconsideration": a change of the Deferred pod's own request brings it
    back through NodeResourcesFit's hint at once. ``ra`` asks for 4 CPUs, which no preemption can
    make (``rc``, as high, holds 2): Deferred, nothing evicted. With the kubelet down, so that it
    cannot judge the new request, ``ra`` asks for 2 instead: the scheduler preempts ``rb`` for it
    without waiting for the kubelet to defer it again (its condition still speaks of generation 2,
    which upstream's IsPodResizeDeferred does not look at). The kubelet, back, actuates 2."""
    await run_pods(api,
                   resizable_pod("ra", "1", "p-high").obj(),
                   resizable_pod("rb", "1", "p-low").obj(),
                   resizable_pod("rc", "2", "p-high").obj())
    await resize(api, "ra", cpu="4")
    deferred = await wait_resize_conditions(api, "ra", {"PodResizePending": "Deferred"}, "ra's 4 CPUs deferred")
    assert deferred.metadata.generation == 2
    assert await preempted_by(api, "rb") == "", "nothing can make 4 CPUs: no victim"
    kill(resize_cluster, KUBELET)
    try:
        again = await resize(api, "ra", cpu="2")
        assert again.metadata.generation == 3

        async def b_evicted() -> bool:
            b = await api.pods.get("rb")
            return bool(b.metadata.deletion_timestamp)

        await eventually(b_evicted, timeout=WAIT, what="rb preempted for ra's new request, the kubelet still down")
        a = await api.pods.get("ra")
        pending = next(c for c in a.status.conditions if c.type == "PodResizePending")
        assert pending.observed_generation == 2, "the kubelet judged the new request: the test proves nothing"
        assert await preempted_by(api, "rb") == "ra"
    finally:
        start(resize_cluster, KUBELET)
    await gone(api, "rb")
    await wait_actuated(api, "ra", "2")
    assert await running_names(api) == {"ra", "rc"}


async def test_resize_preemption_metrics_are_exposed_by_the_scheduler(api, resize_cluster):
    resize_cluster.reload()
    with urllib.request.urlopen(f"http://{resize_cluster.process('scheduler').admin}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for name in ("scheduler_resize_preemption_attempts_total", "scheduler_resize_preemption_victims",
                 "scheduler_resize_scheduling_algorithm_duration_seconds", "scheduler_pending_resize_pods",
                 "scheduler_resize_preemption_skipped_total"):
        assert name in text, name


# ------------------------------------------------------------------------------------ version skew


@pytest.fixture
async def old_api(old_kubelet_cluster):
    async with resize_api(old_kubelet_cluster) as c:
        yield c


async def test_an_old_kubelets_node_policy_is_read_by_the_scheduler_itself(old_api, old_kubelet_cluster):
    """"Version Skew Strategy": a 1.35 kubelet defers the resize but knows nothing of the Node's
    podPreemptionPolicy; the scheduler reads the Node and does not preempt until it is cleared."""
    node = await old_api.nodes.get(NODE)
    assert node.status.node_info.kubelet_version == "v1.35.0"
    await _policy_read_by_the_scheduler(old_api, old_kubelet_cluster)


@pytest.fixture
async def gate_off_kubelet_api(gate_off_kubelet_cluster):
    async with resize_api(gate_off_kubelet_cluster) as c:
        yield c


async def test_a_kubelet_with_the_gate_off_has_its_node_policy_read_by_the_scheduler(gate_off_kubelet_api,
                                                                                   gate_off_kubelet_cluster):
    """The fallback by what the kubelet does, not only by its version: a kubelet of the gate's
    release with the gate off declares no SchedulerPreemptionForPodResize on its Node (KEP-5328
    ``status.declaredFeatures``) and propagates nothing; the scheduler reads the Node itself."""
    node = await gate_off_kubelet_api.nodes.get(NODE)
    assert node.status.node_info.kubelet_version == "v1.37.0"
    assert list(node.status.declared_features) == ["InPlacePodVerticalScaling"]
    await _policy_read_by_the_scheduler(gate_off_kubelet_api, gate_off_kubelet_cluster)


async def _policy_read_by_the_scheduler(api, tc) -> None:
    await run_pods(api,
                   resizable_pod("a", "2", "p-high").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   resizable_pod("c", "1", "p-lowest").obj())
    await api.nodes.patch(NODE, {"spec": {"podPreemptionPolicy": {"disableResizePreemption": ["autoscaler-a"]}}},
                          patch_type="merge")
    skipped = metric(tc, "scheduler", "scheduler_resize_preemption_skipped_total", 'reason="NodePodPreemptionPolicy"')
    await resize(api, "a", cpu="3")
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"},
                                 "a deferred, no condition from the kubelet")
    await eventually(lambda: metric(tc, "scheduler", "scheduler_resize_preemption_skipped_total",
                                    'reason="NodePodPreemptionPolicy"') > skipped, timeout=WAIT,
                     what="the scheduler read the node's policy and left a out")
    assert await running_names(api) == {"a", "b", "c"}
    await api.nodes.patch(NODE, {"spec": {"podPreemptionPolicy": None}}, patch_type="merge")
    await gone(api, "c")
    await wait_actuated(api, "a", "3")


# ------------------------------------------------------------------------------------ gate off


@pytest.fixture
async def off_api(gate_off_cluster):
    async with resize_api(gate_off_cluster) as c:
        yield c


async def test_with_the_gate_off_a_deferred_resize_preempts_nothing(off_api, gate_off_cluster):
    api, tc = off_api, gate_off_cluster
    await run_pods(api,
                   resizable_pod("a", "2", "p-high").obj(),
                   resizable_pod("b", "1", "p-low").obj(),
                   resizable_pod("c", "1", "p-lowest").obj())
    await resize(api, "a", cpu="3")
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a deferred")
    # A pod created afterwards is scheduled: the scheduler is working, and has seen a's update.
    await api.pods.create(resizable_pod("probe", "0", "p-low").obj())
    await wait_running(api, "probe", timeout=WAIT)
    assert metric(tc, "scheduler", "scheduler_resize_preemption_attempts_total") == 0
    assert metric(tc, "scheduler", "scheduler_pending_resize_pods") == 0
    assert await running_names(api) == {"a", "b", "c", "probe"}
