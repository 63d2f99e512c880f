"""The scheduler's metrics, with kube-scheduler's names, labels and buckets.

Queue gauges (``scheduler_pending_pods``, ``scheduler_unschedulable_pods``) and
``scheduler_queue_incoming_pods_total`` live with the queue; preemption's with the evaluator;
extension-point durations with the framework runtime.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

SCHEDULE_ATTEMPTS = Counter("scheduler_schedule_attempts_total", "Number of attempts to schedule pods, by the result. "
                            "'unschedulable' means a pod could not be scheduled, while 'error' means an internal "
                            "scheduler problem.", ["result", "profile"])
ATTEMPT_DURATION = Histogram("scheduler_scheduling_attempt_duration_seconds", "Scheduling attempt latency in seconds "
                             "(scheduling algorithm + binding)", ["result", "profile"],
                             buckets=tuple(0.001 * 2 ** i for i in range(15)))
ALGORITHM_DURATION = Histogram("scheduler_scheduling_algorithm_duration_seconds", "Scheduling algorithm latency in "
                               "seconds", buckets=tuple(0.001 * 2 ** i for i in range(15)))
POD_SCHEDULING_ATTEMPTS = Histogram("scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule "
                                    "a pod.", buckets=(1, 2, 4, 8, 16))
POD_SCHEDULING_SLI = Histogram("scheduler_pod_scheduling_sli_duration_seconds", "E2e latency for a pod being "
                               "scheduled, from the time the pod enters the scheduling queue and might involve "
                               "multiple scheduling attempts.", ["attempts"],
                               buckets=tuple(0.01 * 2 ** i for i in range(20)))
SCHEDULED_AFTER_FLUSH = Counter("scheduler_pod_scheduled_after_flush_total", "Number of pods that were successfully "
                                "scheduled after being flushed from unschedulablePods due to timeout. This metric "
                                "helps detect potential queueing hint misconfigurations or event handling issues.")
GOROUTINES = Counter("scheduler_binding_cycles_started_total", "Binding cycles started (kplane: asyncio tasks, "
                     "kube-scheduler counts them as goroutines).")


def attempts_label(attempts: int) -> str:
    """kube-scheduler buckets the attempts label of the SLI histogram (1..15, then 16+)."""
    return str(attempts) if attempts < 16 else "16+"


# KEP-5836 deferred resizes: their cycles are not scheduling attempts of pending pods, so they are
# counted apart, under the names the KEP's beta revision gives (kube-scheduler keeps them out of
# scheduler_schedule_attempts_total, scheduler_preemption_attempts_total, scheduler_pending_pods...).
PARKED = "parked"  # the resize fits: waiting for the kubelet to actuate it
PREEMPTED = "preempted"  # victims chosen and asked to go
RESIZE_ATTEMPTS = Counter("scheduler_resize_preemption_attempts_total", "Scheduling cycles of pods whose in-place "
                          "resize is Deferred, by the result: 'preempted' (victims chosen on the pod's node), "
                          "'parked' (the resize fits, waiting for the kubelet), 'unschedulable' (no victims, or not "
                          "eligible to preempt), 'error'.", ["result", "profile"])
RESIZE_VICTIMS = Histogram("scheduler_resize_preemption_victims", "Number of preemption victims chosen for a "
                           "deferred in-place resize.", buckets=(1, 2, 4, 8, 16, 32, 64))
RESIZE_ALGORITHM_DURATION = Histogram("scheduler_resize_scheduling_algorithm_duration_seconds", "Latency of the "
                                      "scheduling algorithm (fit and preemption) for a deferred in-place resize.",
                                      buckets=tuple(0.001 * 2 ** i for i in range(15)))
RESIZE_SKIPPED = Counter("scheduler_resize_preemption_skipped_total", "Deferred in-place resizes the scheduler left "
                         "out of its queue because preemption for them is disabled, by what disabled it: "
                         "'PodResizePreemptionDisabled' (the kubelet's pod condition) or 'NodePodPreemptionPolicy' "
                         "(the node's policy, read by the scheduler for a kubelet too old to set the condition).",
                         ["reason"])
