"""KEP-5836 "Detecting Deferred Resizes in UpdatePod": the scheduler's event handlers put a bound pod
whose resize is Deferred in the queue beside its copy in the cache, and take it out when the
condition goes, when preemption for it is disabled (its kubelet's PodResizePreemptionDisabled, or —
"Version Skew Strategy" — its Node's podPreemptionPolicy read by the scheduler for a kubelet older
than 1.37) or when it is deleted. Such pods are counted in ``scheduler_pending_resize_pods``, never
in ``scheduler_pending_pods``.

The handlers run over the real cache and queue; the scheduler around them is a namespace with the
few attributes the handlers read."""

from __future__ import annotations

import gc
from types import SimpleNamespace
from typing import Callable

from prometheus_client import REGISTRY

from machinery.api import core_pb2
from scheduler.cache.cache import Cache
from scheduler.eventhandlers import EventHandlers
from scheduler.framework.pod_info import QueuedPodInfo
from scheduler.framework.types import Code, Status
from scheduler.queue.scheduling_queue import ACTIVE_Q, BACKOFF_Q, GATED, UNSCHEDULABLE_Q, SchedulingQueue
from tests.harness.builders import MakeNode, MakePod

PROFILE = "default-scheduler"
DISABLED = "PodResizePreemptionDisabled"
NODE_POLICY = "NodePodPreemptionPolicy"
NOTHING = {ACTIVE_Q: 0, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 0, GATED: 0}


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    pa, pb = a.pod.spec.priority, b.pod.spec.priority
    return pa > pb if pa != pb else a.timestamp < b.timestamp


def handlers(*, gate: bool = True, pre_enqueue: Callable[[core_pb2.Pod], Status | None] | None = None
             ) -> EventHandlers:
    q = SchedulingQueue(less, events={PROFILE: {}}, pre_enqueue={PROFILE: pre_enqueue} if pre_enqueue else {},
                        clock=Clock())
    fw = SimpleNamespace(waiting_pods={})
    return EventHandlers(SimpleNamespace(cache=Cache(), queue=q, frameworks={PROFILE: fw}, resize_preemption=gate))


def deferred(name: str = "a", node_name: str = "n1", scheduler: str = PROFILE) -> core_pb2.Pod:
    """Running with 1 cpu allocated, asking for 3: the kubelet Deferred the resize."""
    return (MakePod().name(name).uid(f"uid-{name}").generation(2).resource_version("1").priority(100)
            .scheduler_name(scheduler).node(node_name).req(cpu="3").phase("Running").allocated(cpu="1")
            .actual(cpu="1").condition("PodResizePending", "True", "Deferred").obj())


def update(h: EventHandlers, old: core_pb2.Pod, change: Callable[[core_pb2.Pod], None]) -> core_pb2.Pod:
    """The informer's update of ``old`` after ``change``; the new pod."""
    new = core_pb2.Pod()
    new.CopyFrom(old)
    new.metadata.resource_version = str(int(old.metadata.resource_version) + 1)
    change(new)
    h.on_pod_update(old, new)
    return new


def drop_condition(kind: str) -> Callable[[core_pb2.Pod], None]:
    def change(p: core_pb2.Pod) -> None:
        kept = [c for c in p.status.conditions if c.type != kind]
        del p.status.conditions[:]
        p.status.conditions.extend(kept)
    return change


def disable(p: core_pb2.Pod) -> None:
    p.status.conditions.add(type=DISABLED, status="True", reason="PreemptionDisabledByNodePolicy")


def skipped(reason: str) -> float:
    return REGISTRY.get_sample_value("scheduler_resize_preemption_skipped_total", {"reason": reason}) or 0.0


def where(h: EventHandlers, pod: core_pb2.Pod) -> str:
    return h.sched.queue.where(pod)


# ---------------------------------------------------------------- in and out of the queue


def test_a_bound_deferred_pod_is_queued_and_counted_as_a_resize_not_a_pending_pod():
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred()
    h.on_pod_add(pod)
    assert where(h, pod) == ACTIVE_Q
    assert h.sched.cache.get_pod(pod) is not None  # in the cache as well
    assert h.sched.queue.resize_counts() == {ACTIVE_Q: 1, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 0}
    assert h.sched.queue.counts() == NOTHING


def test_the_deferred_condition_going_takes_the_pod_out_and_coming_back_puts_it_in():
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred()
    h.on_pod_add(pod)
    actuated = update(h, pod, drop_condition("PodResizePending"))
    assert where(h, actuated) == ""
    again = update(h, actuated, lambda p: p.status.conditions.add(type="PodResizePending", status="True",
                                                                  reason="Deferred"))
    assert where(h, again) == ACTIVE_Q


def test_pod_resize_preemption_disabled_keeps_the_pod_out_counted_once():
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred()
    h.on_pod_add(pod)
    before = skipped(DISABLED)
    disabled = update(h, pod, disable)
    assert where(h, disabled) == ""
    assert skipped(DISABLED) == before + 1
    still = update(h, disabled, lambda p: p.status.conditions.add(type="Ready", status="True"))
    assert where(h, still) == ""
    assert skipped(DISABLED) == before + 1  # the same pod kept out: not counted again
    cleared = update(h, still, drop_condition(DISABLED))
    assert where(h, cleared) == ACTIVE_Q


def test_an_old_kubelets_node_policy_keeps_its_deferred_pod_out_until_cleared():
    """"Version Skew Strategy": a 1.35 kubelet does not set PodResizePreemptionDisabled, so the
    scheduler reads the Node's disableResizePreemption itself."""
    h = handlers()
    old_node = (MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                .kubelet_version("v1.35.0").disable_resize_preemption("example.com/batch").obj())
    h.on_node_add(old_node)
    before = skipped(NODE_POLICY)
    pod = deferred()
    h.on_pod_add(pod)
    assert where(h, pod) == ""
    assert skipped(NODE_POLICY) == before + 1
    cleared = (MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
               .kubelet_version("v1.35.0").obj())
    cleared.metadata.resource_version = "2"
    h.on_node_update(old_node, cleared)
    assert where(h, pod) == ACTIVE_Q
    h.on_node_update(cleared, old_node)  # set again: out again
    assert where(h, pod) == ""


def test_a_1_37_kubelets_node_policy_is_for_the_kubelet_to_report():
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").disable_resize_preemption("example.com/batch").obj())
    pod = deferred()
    h.on_pod_add(pod)
    assert where(h, pod) == ACTIVE_Q


def test_cold_start_a_pod_listed_before_its_old_kubelets_node_is_taken_out_when_the_node_arrives():
    """The pod and node informers list concurrently ("Cold-Start Re-Queueing"): the pod may come
    first, when the scheduler cannot read its node's policy yet."""
    h = handlers()
    pod = deferred()
    h.on_pod_add(pod)
    assert where(h, pod) == ACTIVE_Q  # no node yet: nothing disables it
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.35.0").disable_resize_preemption("example.com/batch").obj())
    assert where(h, pod) == ""


def test_a_deleted_deferred_pod_leaves_the_queue():
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred()
    h.on_pod_add(pod)
    h.on_pod_delete(pod)
    assert where(h, pod) == ""
    assert h.sched.queue.resize_counts() == {ACTIVE_Q: 0, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 0}


def test_another_schedulers_deferred_pod_is_never_queued():
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred(scheduler="other-scheduler")
    h.on_pod_add(pod)
    assert where(h, pod) == ""
    again = update(h, pod, lambda p: p.spec.containers[0].resources.requests.__setitem__("cpu", "4"))
    assert where(h, again) == ""


def test_without_the_gate_a_deferred_pod_is_never_queued():
    h = handlers(gate=False)
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred()
    h.on_pod_add(pod)
    assert where(h, pod) == ""
    again = update(h, pod, lambda p: p.spec.containers[0].resources.requests.__setitem__("cpu", "4"))
    assert where(h, again) == ""
    assert h.sched.cache.get_pod(again) is not None


# ---------------------------------------------------------------- the gauges


def _gauge(name: str, queue: str) -> float:
    return REGISTRY.get_sample_value(name, {"queue": queue}) or 0.0


def test_the_deferred_pod_counts_in_pending_resize_pods_not_pending_pods():
    # The gauges sum every live queue: earlier tests' queues must not be collected mid-test.
    gc.collect()
    h = handlers()
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    resize_before = _gauge("scheduler_pending_resize_pods", ACTIVE_Q)
    pending_before = {q: _gauge("scheduler_pending_pods", q) for q in NOTHING}
    h.on_pod_add(deferred())
    assert _gauge("scheduler_pending_resize_pods", ACTIVE_Q) == resize_before + 1
    assert {q: _gauge("scheduler_pending_pods", q) for q in NOTHING} == pending_before
    pending = MakePod().name("new").req(cpu="1").obj()
    pending.metadata.uid, pending.spec.scheduler_name = "uid-new", PROFILE
    h.on_pod_add(pending)  # a pod to schedule: the other gauge
    assert _gauge("scheduler_pending_pods", ACTIVE_Q) == pending_before[ACTIVE_Q] + 1
    assert _gauge("scheduler_pending_resize_pods", ACTIVE_Q) == resize_before + 1


def test_a_deferred_pod_held_at_pre_enqueue_is_still_only_a_pending_resize():
    """With async preemption DefaultPreemption's PreEnqueue holds a preemptor — a deferred resize
    among them — until its victims' deletions are sent: it waits, gated, in the unschedulable pool."""
    h = handlers(pre_enqueue=lambda pod: Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                "waiting for the preemption for this pod to be finished",
                                                plugin="DefaultPreemption"))
    h.on_node_add(MakeNode().name("n1").resource_version("1").allocatable(cpu="4", memory="8Gi", pods="110")
                  .kubelet_version("v1.37.0").obj())
    pod = deferred()
    h.on_pod_add(pod)
    assert where(h, pod) == GATED
    assert h.sched.queue.resize_counts() == {ACTIVE_Q: 0, BACKOFF_Q: 0, UNSCHEDULABLE_Q: 1}
    assert h.sched.queue.counts() == NOTHING
