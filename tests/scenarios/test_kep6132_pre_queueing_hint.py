"""KEP-6132 "Test Plan", Integration Tests: "PreQueueingHintFn correctly narrows the pod set and
missed pods are rescued by periodic flush" — over real processes: etcd, the apiserver, the
scheduler (gate SchedulerPreQueueingHints on), the controller-manager (the resourceclaim
controller) and one kubelet whose fake driver publishes a single GPU, so one pod from the template
runs and the others wait ("cannot allocate all claims").

- Narrowing: with pods waiting, a new pod's generated claim is created and written; each of those
  claim events asks the claim QueueingHint about the pods of that claim alone — at most one call
  per event, where every waiting pod would be asked without the PreQueueingHint.
- Rescue: the failpoint ``scheduler/dra-pre-queueing-hint-skip`` makes the PreQueueingHint name no
  pod whatever the event (KEP-6132 "Risks and Mitigations": "PreQueueingHintFn incorrectly signals
  'no pods affected'"). The running pod is deleted; its claim's deallocation, which would requeue
  the waiting pod, requeues nobody; the periodic flush of the unschedulable pool brings it back and
  it is scheduled on the freed device — counted by ``scheduler_pod_scheduled_after_flush_total``,
  the metric the KEP says should inform a rollback ("Rollout, Upgrade and Rollback Planning").
  The scheduler runs with ``--pod-max-in-unschedulable-pods-duration=3s`` so the flush comes in
  seconds rather than five minutes.

After each test ``kplane check`` replays the history (device-allocated-once included).
"""

from __future__ import annotations

import pytest

from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.dra import create_gpu_template, delete_pods_claims_and_templates, gpu_pod, running
from tests.harness.failpoints import failpoint
from tests.harness.metrics import metric, requeued_by
from tests.harness.wait import eventually, wait_unschedulable

pytestmark = pytest.mark.scenario

WAIT = 40
FLUSH_AFTER = 3  # seconds a pod may wait in the unschedulable pool before the flush retries it
SKIP = "scheduler/dra-pre-queueing-hint-skip"
NO_DEVICE = ("0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are available: "
             "1 Preemption is not helpful for scheduling.")

cluster = cluster_fixture(nodes=1, schedulers=1, controller_managers=1, dra_devices=1, kubelet_args=FAST_KUBELET,
                          feature_gates="SchedulerPreQueueingHints=true",
                          scheduler_args=[f"--pod-max-in-unschedulable-pods-duration={FLUSH_AFTER}s"])


@pytest.fixture
async def api(cluster):
    c = cluster.client()
    try:
        yield c
    finally:
        try:
            failpoint(cluster, "scheduler", SKIP, "off")
            await delete_pods_claims_and_templates(c, WAIT)
        finally:
            await c.close()
    result = cluster.kplane("check")
    assert result.returncode == 0, f"kplane check failed:\n{result.stdout}{result.stderr}"


def _scheduler(tc, name: str, labels: str = "") -> float:
    return metric(tc, "scheduler", name, labels)


def _claim_hint_calls(tc) -> float:
    return sum(_scheduler(tc, "scheduler_queueing_hint_execution_duration_seconds_count",
                          f'event="{event}",hint="{hint}",plugin="DynamicResources"')
               for event in ("ResourceClaimAdd", "ResourceClaimUpdate") for hint in ("Queue", "QueueSkip", "Error"))


def _claim_events(tc) -> float:
    return sum(_scheduler(tc, "scheduler_event_handling_duration_seconds_count", f'event="{event}"')
               for event in ("ResourceClaimAdd", "ResourceClaimUpdate"))


async def _one_running_and_waiting(api, waiting: list[str]) -> None:
    """The template; "first" runs on the node's only GPU; the ``waiting`` pods find no device."""
    await create_gpu_template(api)
    await api.pods.create(gpu_pod("first", template="gpu"))

    async def first_runs() -> bool:
        return running(await api.pods.get("first"))
    await eventually(first_runs, timeout=WAIT, what="first running")
    for name in waiting:
        await api.pods.create(gpu_pod(name, template="gpu"))
    for name in waiting:
        async def no_device(name: str = name) -> bool:
            pod = await api.pods.get(name)
            return any(c.type == "PodScheduled" and c.message == NO_DEVICE for c in pod.status.conditions)
        await eventually(no_device, timeout=WAIT, what=f"{name} waiting for a device")


async def test_kep6132_pre_queueing_hint_narrows_each_claim_event_to_the_pods_of_that_claim(api, cluster):
    waiting = [f"waiting-{i}" for i in range(5)]
    await _one_running_and_waiting(api, waiting)
    calls, events = _claim_hint_calls(cluster), _claim_events(cluster)
    narrowed = _scheduler(cluster, "scheduler_pre_queueing_hint_evaluations_total",
                          'plugin="DynamicResources",result="narrowed"')
    # One more pod: its claim is created, then the controller records it in the pod's status.
    await api.pods.create(gpu_pod("late", template="gpu"))
    await wait_unschedulable(api, "late")

    async def claimed() -> bool:
        return bool((await api.pods.get("late")).status.resource_claim_statuses)
    await eventually(claimed, timeout=WAIT, what="late's claim recorded")
    new_events = _claim_events(cluster) - events
    assert new_events >= 1, "late's claim was created"
    assert _scheduler(cluster, "scheduler_pre_queueing_hint_evaluations_total",
                      'plugin="DynamicResources",result="narrowed"') - narrowed == new_events, \
        "every one of those claim events narrowed"
    assert _claim_hint_calls(cluster) - calls <= new_events, \
        f"at most the claim's own pod asked per event, not the {len(waiting)} others waiting"
    assert _scheduler(cluster, "scheduler_queueing_hint_execution_duration_seconds_count",
                      'event="UnschedulablePodUpdatePodGeneratedResourceClaim"') > 0, \
        "the hint calls are counted (late's own status update asked its pod hint)"


async def test_kep6132_a_pod_the_pre_queueing_hint_wrongly_skipped_is_rescued_by_the_periodic_flush(api, cluster):
    await _one_running_and_waiting(api, ["second"])
    failpoint(cluster, "scheduler", SKIP, "error")
    after_flush = _scheduler(cluster, "scheduler_pod_scheduled_after_flush_total")
    by_claim_update = requeued_by(cluster, "ResourceClaimUpdate")
    skipped = _scheduler(cluster, "kplane_failpoint_hits_total", f'action="error",name="{SKIP}"')

    await api.pods.delete("first", "default")  # its claim is deallocated: the device is free

    async def second_runs() -> bool:
        pod = await api.pods.get("second")
        return pod.spec.node_name == "node-1" and running(pod)
    await eventually(second_runs, timeout=WAIT, interval=0.2, what="second running on the freed GPU")
    assert _scheduler(cluster, "kplane_failpoint_hits_total", f'action="error",name="{SKIP}"') > skipped, \
        "the deallocation's PreQueueingHint named no pod"
    assert requeued_by(cluster, "ResourceClaimUpdate") == by_claim_update, "no claim event requeued it"
    assert requeued_by(cluster, "UnschedulableTimeout") > 0
    assert _scheduler(cluster, "scheduler_pod_scheduled_after_flush_total") == after_flush + 1, \
        "scheduled after the periodic flush moved it: the rollback signal"
