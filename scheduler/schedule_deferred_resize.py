"""The scheduling cycle of a deferred in-place resize (KEP-5836 "Processing Deferred Resizes in the
Scheduling Cycle", "Failure Handler Adjustments for Deferred Pods").

A pod already running on a node whose resize the kubelet Deferred comes out of the queue like any
other, and goes through a restricted cycle instead of ``schedule_one``'s:

- ``schedule_deferred_resize``: the cycle, fit on the pod's own node only, and its metrics;
- ``_preempt``: DefaultPreemption on the pod's node when the resize does not fit;
- ``handle_deferred_failure``: back to the unschedulable pool.
"""

from __future__ import annotations

import time

from machinery.logging import get_logger
from scheduler import metrics
from scheduler.context import CycleContext
from scheduler.framework.deferred_resize import resize_request
from scheduler.framework.pod_info import QueuedPodInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.types import (
    Code,
    CycleState,
    Diagnosis,
    FitError,
    NominatingMode,
    SchedulingError,
    Status,
    fit_error_message,
)

log = get_logger()

RESIZE_FITS = "pod resize fits, waiting for Kubelet actuation"
NODE_RESOURCES_FIT = "NodeResourcesFit"


def _key(p: QueuedPodInfo) -> str:
    return p.key


async def schedule_deferred_resize(sched: CycleContext, fw: Framework, p: QueuedPodInfo) -> None:
    """The restricted cycle of a pod whose resize its kubelet Deferred:

    1. **Fit, on its own node only.** The framework's PreFilter restricts the nodes (NodeName's
       PreFilterResult: the pod's ``spec.nodeName``) and every plugin but NodeName and NodeResourcesFit
       answers Skip; NodeResourcesFit counts the pod once (cache and queue copies).
    2. **It fits**: the room is there and the kubelet has not actuated the resize yet. The pod is
       *parked* — UnschedulableAndUnresolvable, "pod resize fits, waiting for Kubelet actuation",
       recorded against NodeResourcesFit so that its hints (another pod on the node scaling up takes
       the room; the pod's own request changing) bring it back. No preemption. (Upstream's alpha parks
       it at Permit, in a plugin of its own; here the cycle does, so no plugin needs to tell the main
       cycle from preemption's dry runs.)
    3. **It does not fit**: DefaultPreemption's PostFilter (``_preempt``).
    4. **Failure handler** (``handle_deferred_failure``).

    Metrics: ``scheduler_resize_preemption_attempts_total{result}`` (preempted, parked, unschedulable,
    error), ``scheduler_resize_scheduling_algorithm_duration_seconds``; the victims
    (``scheduler_resize_preemption_victims``) are counted by the evaluator. None of it counts in the
    metrics of pending pods' scheduling.
    """
    pod = p.pod
    start = time.perf_counter()
    state = CycleState()
    try:
        result = sched.algorithm.schedule_pod(fw, state, pod)
    except FitError as exc:
        outcome, status = await _preempt(sched, fw, state, p, exc)
    except SchedulingError as exc:
        outcome, status = (metrics.ERROR if exc.status.code == Code.ERROR else metrics.UNSCHEDULABLE), exc.status
    except Exception as exc:  # a bug in a plugin must not stop the scheduler
        log.exception("resize_cycle_crashed", pod=_key(p))
        outcome, status = metrics.ERROR, Status(Code.ERROR, str(exc), error=exc)
    else:
        # It fits: park it until the kubelet actuates the resize.
        parked = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, RESIZE_FITS, plugin=NODE_RESOURCES_FIT)
        p.unschedulable_plugins, p.pending_plugins = {NODE_RESOURCES_FIT}, set()
        outcome = metrics.PARKED
        status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                        fit_error_message(1, Diagnosis(node_to_status={result.host: parked})))
    metrics.RESIZE_ALGORITHM_DURATION.observe(time.perf_counter() - start)
    metrics.RESIZE_ATTEMPTS.labels(outcome, fw.profile_name).inc()
    handle_deferred_failure(sched, p, status, outcome)


async def _preempt(sched: CycleContext, fw: Framework, state: CycleState, p: QueuedPodInfo,
                   exc: FitError) -> tuple[str, Status]:
    """DefaultPreemption on the pod's node; (outcome, the status the failure handler reports).

    DefaultPreemption's PostFilter finds candidates only where the filters said Unschedulable — the
    pod's node — and dry-runs the filters that did run: resource fit only. Victims are lower-priority
    pods on that node; they are evicted (asynchronously, with SchedulerAsyncPreemption) as for a new
    pod."""
    diagnosis = exc.diagnosis
    p.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
    p.pending_plugins = set(diagnosis.pending_plugins)
    outcome = metrics.UNSCHEDULABLE
    if fw.has_post_filter_plugins():
        result, s = await fw.run_post_filter_plugins(state, p.pod, diagnosis)
        if s is not None and s.code == Code.ERROR:
            log.warning("resize_post_filter_failed", pod=_key(p), error=s.message())
            outcome = metrics.ERROR
        if s is not None and s.message():
            diagnosis.post_filter_msg = s.message()
        nominating = result.nominating_info if result is not None else None
        if s is None and nominating is not None and nominating.mode == NominatingMode.OVERRIDE and \
                nominating.node_name:
            outcome = metrics.PREEMPTED  # the nomination itself is dropped: the pod runs there already
            log.info("resize_preemption_started", pod=_key(p), node=nominating.node_name,
                     request=resize_request(p.pod))
    # The message speaks of the pod's node only ("0/1 nodes are available: 1 Insufficient cpu."),
    # the other nodes were never candidates.
    node = p.pod.spec.node_name
    own = Diagnosis(node_to_status={node: st} if (st := diagnosis.status_of(node)) is not None else {},
                    pre_filter_msg=diagnosis.pre_filter_msg, post_filter_msg=diagnosis.post_filter_msg)
    return outcome, Status(Code.UNSCHEDULABLE, fit_error_message(1, own), error=FitError(p.pod, 1, own))


def handle_deferred_failure(sched: CycleContext, p: QueuedPodInfo, status: Status, outcome: str) -> None:
    """Back to the unschedulable pool while the resize is still Deferred and may preempt; no
    PodScheduled change, no nomination; a FailedScheduling event.

    The pod goes back to the unschedulable pool (backoff as usual) — the usual "already bound:
    abort" check does not apply to it — unless, in the meantime, its resize stopped being Deferred
    (actuated, reverted) or preemption for it was disabled, or it was deleted. Its ``PodScheduled``
    condition is left alone and it is never nominated (it runs on its node already). A
    ``FailedScheduling`` event tells why (as the KEP's beta revision has it) — not for a parked pod,
    which is waiting for its kubelet rather than failing."""
    pod = p.pod
    cached = sched.get_pod(pod.metadata.namespace, pod.metadata.name)
    if cached is None or cached.metadata.uid != pod.metadata.uid or not sched.handlers.wants_queue(cached):
        log.info("resize_no_longer_queued", pod=_key(p), outcome=outcome)
        sched.queue.done(pod.metadata.uid)
        return
    p.pod_info.update(cached)
    sched.queue.add_unschedulable_if_not_present(p)
    message = status.message()
    log.info("resize_unschedulable", pod=_key(p), outcome=outcome, message=message,
             plugins=sorted(p.unschedulable_plugins),
             reasons=status.error.diagnosis.reason_plugins() if isinstance(status.error, FitError) else {})
    if sched.recorder is not None and outcome != metrics.PARKED:
        # A parked resize waits on its kubelet, nothing failed (as a pod waiting at Permit gets no
        # event): its metric and log line say so, and a write per resize is spared.
        sched.recorder.event(cached, "Warning", "FailedScheduling", message[:1024], action="Scheduling")
