"""One scheduling attempt: the scheduling cycle (serial) and the binding cycle (concurrent).

kube-scheduler's schedule_one.go, given the narrow view of the scheduler it uses
(``scheduler.context.CycleContext``):

- **Scheduling cycle**: pick a node (``scheduler.algorithm``: snapshot, PreFilter, the nominated
  node first, Filter round robin, Score); assume the pod onto it in the cache; Reserve; Permit.
- When no node fits: PostFilter (preemption), then the failure handler: the pod goes back to the
  queue with the plugins that rejected it, gets a ``FailedScheduling`` event and the condition
  ``PodScheduled=False`` (reason Unschedulable, kube-scheduler's message), and the nomination
  preemption chose (``status.nominatedNodeName``) — written by the StatusWriter, off the cycle
  (SchedulerAsyncAPICalls), so the next pod does not wait for the apiserver.
- **Binding cycle** (its own task, so the next pod's cycle starts at once): wait on Permit,
  PreBind, Bind; then the ``Scheduled`` event. A failed bind unreserves, forgets the assumed pod
  (its room is freed: pods rejected for room are requeued) and goes through the failure handler.

Failpoints: ``scheduler/before-nominate`` (preemption done, the nomination not written) and
``scheduler/before-bind`` (the pod is assumed, the binding not sent).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from machinery import errors, failpoints, podconditions, timeutil
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.logging import get_logger
from scheduler import metrics
from scheduler.context import CycleContext
from scheduler.framework.deferred_resize import is_deferred_resize
from scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from scheduler.framework.runtime import Framework
from scheduler.framework.types import (
    EVENT_ASSIGNED_POD_DELETE,
    Code,
    CycleState,
    Diagnosis,
    FitError,
    NominatingInfo,
    NominatingMode,
    SchedulingError,
    Status,
)
from scheduler.schedule_deferred_resize import schedule_deferred_resize

log = get_logger()

FP_BEFORE_NOMINATE = failpoints.declare(
    "scheduler/before-nominate", "preemption chose a node and evicted its victims; the nomination is not written yet")
FP_BEFORE_BIND = failpoints.declare(
    "scheduler/before-bind", "the pod is assumed on its node; the binding is not sent yet")

def assumed_copy(p: QueuedPodInfo, host: str) -> tuple[core_pb2.Pod, PodInfo]:
    pod = core_pb2.Pod()
    pod.CopyFrom(p.pod)
    pod.spec.node_name = host
    pi = PodInfo.__new__(PodInfo)
    for slot in PodInfo.__slots__:
        setattr(pi, slot, getattr(p.pod_info, slot))
    pi.pod = pod
    return pod, pi


async def schedule_one(sched: CycleContext, p: QueuedPodInfo) -> None:
    pod = p.pod
    fw = sched.frameworks.get(pod.spec.scheduler_name)
    if fw is None:
        log.error("no_profile_for_pod", pod=key_of(pod), scheduler_name=pod.spec.scheduler_name)
        sched.queue.done(pod.metadata.uid)
        return
    if pod.metadata.deletion_timestamp or sched.cache.is_assumed(pod):
        sched.queue.done(pod.metadata.uid)
        return
    if pod.spec.node_name:  # bound already: only a deferred resize (KEP-5836) is queued so
        if sched.resize_preemption and is_deferred_resize(pod):
            await schedule_deferred_resize(sched, fw, p)
        else:
            sched.queue.done(pod.metadata.uid)
        return
    start = time.perf_counter()
    state = CycleState()
    try:
        result = fw_result = sched.algorithm.schedule_pod(fw, state, pod)
    except (FitError, SchedulingError) as exc:
        metrics.ALGORITHM_DURATION.observe(time.perf_counter() - start)
        await _handle_unfit(sched, fw, state, p, exc, start)
        return
    except Exception as exc:  # a bug in a plugin must not stop the scheduler
        log.exception("scheduling_cycle_crashed", pod=key_of(pod))
        await handle_failure(sched, fw, p, Status(Code.ERROR, str(exc), error=exc), _clear_nomination(), start)
        return
    metrics.ALGORITHM_DURATION.observe(time.perf_counter() - start)
    host = fw_result.host
    assumed, assumed_pi = assumed_copy(p, host)
    try:
        sched.cache.assume_pod(assumed, assumed_pi)
    except ValueError as exc:
        await handle_failure(sched, fw, p, Status(Code.ERROR, str(exc), error=exc), _clear_nomination(), start)
        return
    sched.queue.delete_nominated_pod_if_exists(assumed)
    s = fw.run_reserve_plugins_reserve(state, assumed, host)
    if s is None:
        s = fw.run_permit_plugins(state, assumed, host)
    if s is not None and s.code != Code.WAIT:
        fw.run_reserve_plugins_unreserve(state, assumed, host)
        sched.cache.forget_pod(assumed)
        await handle_failure(sched, fw, p, rejected_on(p, host, s), _clear_nomination(), start)
        return
    log.debug("pod_assumed", pod=key_of(pod), node=host, evaluated=result.evaluated, feasible=result.feasible)
    sched.start_binding(fw, state, p, assumed, host, start)


def _clear_nomination() -> NominatingInfo:
    return NominatingInfo("", NominatingMode.OVERRIDE)


def rejected_on(p: QueuedPodInfo, host: str, s: Status) -> Status:
    """A rejection once the node was chosen (Reserve, Permit, PreBind), as kube-scheduler reports
    it: a FitError over that one node, the rejecting plugin recorded so its hints requeue the pod.
    Anything else (an error) is returned as it is."""
    if not s.is_rejected():
        return s
    (p.pending_plugins if s.code == Code.PENDING else p.unschedulable_plugins).add(s.plugin)
    fit = FitError(p.pod, 1, Diagnosis(node_to_status={host: s}))
    return Status(s.code, str(fit), plugin=s.plugin, error=fit)


async def _handle_unfit(sched: CycleContext, fw: Framework, state: CycleState, p: QueuedPodInfo,
                        exc: FitError | SchedulingError, start: float) -> None:
    if isinstance(exc, SchedulingError):  # no nodes, or an error: a nomination no longer holds
        await handle_failure(sched, fw, p, exc.status, _clear_nomination(), start)
        return
    nominating: NominatingInfo | None = None
    diagnosis = exc.diagnosis
    if fw.has_post_filter_plugins():
        result, s = await fw.run_post_filter_plugins(state, p.pod, diagnosis)
        if s is not None and s.code == Code.ERROR:
            log.warning("post_filter_failed", pod=key_of(p.pod), error=s.message())
        if s is not None and s.message():
            diagnosis.post_filter_msg = s.message()
        if result is not None and result.nominating_info is not None:
            nominating = result.nominating_info
    status = Status(Code.UNSCHEDULABLE, str(exc))
    status.error = exc
    p.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
    p.pending_plugins = set(diagnosis.pending_plugins)
    await handle_failure(sched, fw, p, status, nominating, start)


async def handle_failure(sched: CycleContext, fw: Framework, p: QueuedPodInfo, status: Status,
                         nominating: NominatingInfo | None, start: float) -> None:
    """The pod back to the queue; its event, condition and nomination written."""
    pod = p.pod
    result = metrics.ERROR if status.code == Code.ERROR else metrics.UNSCHEDULABLE
    metrics.SCHEDULE_ATTEMPTS.labels(result, fw.profile_name).inc()
    metrics.ATTEMPT_DURATION.labels(result, fw.profile_name).observe(time.perf_counter() - start)
    reason = "SchedulerError" if status.code == Code.ERROR else "Unschedulable"
    message = status.message()
    if status.code == Code.ERROR:
        log.warning("scheduling_error", pod=key_of(pod), error=message)
    else:
        log.info("pod_unschedulable", pod=key_of(pod), message=message, plugins=sorted(p.unschedulable_plugins),
                 reasons=_reason_plugins(status))
    cached = sched.get_pod(pod.metadata.namespace, pod.metadata.name)
    if cached is None or cached.metadata.uid != pod.metadata.uid:
        sched.queue.done(pod.metadata.uid)
    elif cached.spec.node_name:
        log.info("pod_already_assigned", pod=key_of(pod), node=cached.spec.node_name)
        sched.queue.done(pod.metadata.uid)
    else:
        p.pod_info.update(cached)
        sched.queue.add_unschedulable_if_not_present(p)
    if nominating is not None:
        sched.queue.add_nominated_pod(PodInfo(pod), nominating)
    if cached is None or cached.metadata.uid != pod.metadata.uid:
        return
    if sched.recorder is not None:
        sched.recorder.event(pod, "Warning", "FailedScheduling", _truncate(message), action="Scheduling")
    if nominating is not None and nominating.mode == NominatingMode.OVERRIDE and nominating.node_name:
        await failpoints.hit(FP_BEFORE_NOMINATE)
    if sched.status_writer is not None:
        sched.status_writer.submit(cached.metadata.uid,
                                   lambda: update_pod_status(sched, cached, reason, message, nominating))
    else:
        await update_pod_status(sched, cached, reason, message, nominating)


def _reason_plugins(status: Status) -> dict[str, str]:
    """The plugin behind each reason of a FitError's message ({} for another failure, or when the
    record would not be written)."""
    if not isinstance(status.error, FitError) or not log.is_enabled_for(logging.INFO):
        return {}
    return status.error.diagnosis.reason_plugins()


def _truncate(message: str, limit: int = 1024) -> str:
    return message if len(message) <= limit else message[:limit - 3] + "..."


async def update_pod_status(sched: CycleContext, pod: core_pb2.Pod, reason: str, message: str,
                            nominating: NominatingInfo | None) -> None:
    """PodScheduled=False with the reason, and the nomination — only what changed is written."""
    current = podconditions.get_condition(pod.status, podconditions.POD_SCHEDULED)
    same_condition = current is not None and (current.status, current.reason, current.message) == \
        ("False", reason, message)
    nominated_node = nominating.node_name if nominating is not None and \
        nominating.mode == NominatingMode.OVERRIDE else None
    same_nomination = nominated_node is None or pod.status.nominated_node_name == nominated_node
    if same_condition and same_nomination:
        return
    status: dict[str, Any] = {}
    if not same_condition:
        transition = current.last_transition_time if current is not None and current.status == "False" else \
            timeutil.rfc3339()
        status["conditions"] = [{"type": podconditions.POD_SCHEDULED, "status": "False", "reason": reason,
                                 "message": message, "lastTransitionTime": transition}]
    if nominated_node is not None:
        status["nominatedNodeName"] = nominated_node
    try:
        await sched.client.pods.patch(pod.metadata.name, {"status": status}, namespace=pod.metadata.namespace,
                                      subresource="status")
    except errors.NotFound:
        pass
    except errors.ApiError as exc:
        log.warning("pod_status_update_failed", pod=key_of(pod), error=exc.message)


async def binding_cycle(sched: CycleContext, fw: Framework, state: CycleState, p: QueuedPodInfo,
                        assumed: core_pb2.Pod, host: str, start: float) -> None:
    try:
        s = await fw.wait_on_permit(assumed)
        if s is None:
            s = await fw.run_pre_bind_plugins(state, assumed, host)
        if s is not None:
            s = rejected_on(p, host, s)
        else:
            await failpoints.hit(FP_BEFORE_BIND)
            if sched.status_writer is not None:
                await sched.status_writer.flush(assumed.metadata.uid)  # an old "Unschedulable" lands first
            s = await fw.run_bind_plugins(state, assumed, host)
    except failpoints.FailpointError as exc:
        s = Status(Code.ERROR, str(exc), error=exc)
    except Exception as exc:
        log.exception("binding_cycle_crashed", pod=key_of(assumed))
        s = Status(Code.ERROR, str(exc), error=exc)
    if s is not None:
        await _binding_failed(sched, fw, state, p, assumed, host, s, start)
        return
    sched.cache.finish_binding(assumed)
    now = time.perf_counter()
    metrics.SCHEDULE_ATTEMPTS.labels(metrics.SCHEDULED, fw.profile_name).inc()
    metrics.ATTEMPT_DURATION.labels(metrics.SCHEDULED, fw.profile_name).observe(now - start)
    metrics.POD_SCHEDULING_ATTEMPTS.observe(p.attempts)
    if p.initial_attempt_timestamp is not None:
        metrics.POD_SCHEDULING_SLI.labels(metrics.attempts_label(p.attempts)).observe(
            max(0.0, sched.queue_clock() - p.initial_attempt_timestamp))
    if p.flushed:
        metrics.SCHEDULED_AFTER_FLUSH.inc()
    log.info("pod_bound", pod=key_of(assumed), node=host, attempts=p.attempts)
    if sched.recorder is not None:
        sched.recorder.event(assumed, "Normal", "Scheduled",
                             f"Successfully assigned {assumed.metadata.namespace}/{assumed.metadata.name} to {host}",
                             action="Binding")
    fw.run_post_bind_plugins(state, assumed, host)
    sched.queue.done(assumed.metadata.uid)


async def _binding_failed(sched: CycleContext, fw: Framework, state: CycleState, p: QueuedPodInfo,
                          assumed: core_pb2.Pod, host: str, s: Status, start: float) -> None:
    log.warning("binding_failed", pod=key_of(assumed), node=host, error=s.message())
    fw.run_reserve_plugins_unreserve(state, assumed, host)
    sched.cache.forget_pod(assumed)
    # Forgetting the assumed pod frees its room, as a deleted pod's would. After a rejection this
    # waits until the pod is back in the queue: were it still in flight, the event would be
    # replayed to the pod itself and requeue it (kube-scheduler defers the move the same way).
    if not s.is_rejected():
        sched.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, assumed, None)
    await handle_failure(sched, fw, p, s, _clear_nomination(), start)
    if s.is_rejected():
        uid = assumed.metadata.uid
        sched.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, assumed, None,
                                                  lambda pod: pod.metadata.uid != uid)
