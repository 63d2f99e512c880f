"""Kubelet-side preemption for critical pods, as Kubernetes' pkg/kubelet/preemption.

A critical pod (``is_critical``) is not refused for lack of resources. When it does not fit — a
new pod at admission, or (KEP-1287 "Priority of Resize Requests") a resize of a running one — the
kubelet evicts pods it may preempt to free what is missing. KEP-5836: a node whose
``spec.podPreemptionPolicy.disableResizePreemption`` is non-empty does not preempt for resizes
(the resize is Deferred with PodResizePreemptionDisabled); new critical pods are still admitted
by preemption.

- ``pods_to_preempt``: the victims, chosen to do the least harm.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from prometheus_client import Counter

from machinery import resources
from machinery.api import core_pb2

# A critical pod: priority >= 2000000000 (system-cluster-critical, system-node-critical).
SYSTEM_CRITICAL_PRIORITY = 2_000_000_000
PREEMPTED_REASON = "Preempted"
PREEMPTED_MESSAGE = "Preempted in order to admit critical pod"
PREEMPTING_EVENT = "Preempting"
DISRUPTION_MESSAGE = "Pod was preempted by Kubelet to accommodate a critical pod."

PREEMPTIONS = Counter("kubelet_preemptions", "Cumulative number of pod preemptions by preemption resource.",
                      ["preemption_signal"])

Requests = Callable[[core_pb2.Pod], Mapping[str, int]]


class NoVictims(Exception):
    """No set of pods the critical pod may preempt frees what is missing."""


def priority(pod: core_pb2.Pod) -> int | None:
    return pod.spec.priority if pod.spec.HasField("priority") else None


def is_critical(pod: core_pb2.Pod) -> bool:
    p = priority(pod)
    return p is not None and p >= SYSTEM_CRITICAL_PRIORITY


def preemptable(preemptor: core_pb2.Pod, preemptee: core_pb2.Pod) -> bool:
    """Whether ``preemptor`` (the critical pod) may preempt ``preemptee``: a non-critical one, or
    one of lower priority."""
    if is_critical(preemptor) and not is_critical(preemptee):
        return True
    a, b = priority(preemptor), priority(preemptee)
    return a is not None and b is not None and a > b


def _format(missing: Mapping[str, int]) -> str:
    return "[" + "".join(f"(res: {name}, q: {q}), " for name, q in missing.items()) + "]"


def _subtract(missing: Mapping[str, int], pods: Sequence[core_pb2.Pod], requests: Requests) -> dict[str, int]:
    """What would still be missing with ``pods`` gone."""
    left = {}
    for name, q in missing.items():
        for p in pods:
            q -= requests(p).get(name, 0)
            if q <= 0:
                break
        if q > 0:
            left[name] = q
    return left


def _distance(missing: Mapping[str, int], pod: core_pb2.Pod, requests: Requests) -> float:
    got = requests(pod)
    return sum(((q - got.get(name, 0)) / q) ** 2 for name, q in missing.items() if q - got.get(name, 0) > 0)


def _smaller(a: core_pb2.Pod, b: core_pb2.Pod, requests: Requests) -> bool:
    ra, rb = requests(a), requests(b)
    for name in ("memory", "cpu"):
        if ra.get(name, 0) != rb.get(name, 0):
            return ra.get(name, 0) < rb.get(name, 0)
    return True


def _by_distance(pods: list[core_pb2.Pod], missing: dict[str, int], requests: Requests) -> list[core_pb2.Pod]:
    """Within a class, repeatedly the pod closest to covering what is still missing (each missing
    resource weighs the same: the squared fraction it leaves uncovered), the smaller pod on ties."""
    pods = list(pods)
    chosen: list[core_pb2.Pod] = []
    while missing:
        if not pods:
            raise NoVictims(f"no set of running pods found to reclaim resources: {_format(missing)}")
        best = 0
        best_distance = float(len(missing) + 1)
        for i, p in enumerate(pods):
            d = _distance(missing, p, requests)
            if d < best_distance or (d == best_distance and _smaller(p, pods[best], requests)):
                best, best_distance = i, d
        victim = pods.pop(best)
        chosen.append(victim)
        missing = _subtract(missing, [victim], requests)
    return chosen


def pods_to_preempt(preemptor: core_pb2.Pod, pods: Sequence[core_pb2.Pod], missing: Mapping[str, int],
                    requests: Requests) -> list[core_pb2.Pod]:
    """The pods to evict so that ``missing`` (resource -> amount) is freed; NoVictims if none do.

    ``requests`` gives what a pod holds on the node (the kubelet's allocation view, incl. ``pods``: 1).

    The victims are chosen to do the least harm:

    - only pods the critical pod may preempt (``preemptable``): non-critical ones, or ones of lower
      priority;
    - by QoS class: as few Guaranteed pods as possible, then as few Burstable, then BestEffort
      (the Guaranteed pods it would need if every Burstable and BestEffort pod went, the Burstable
      ones it would need if every BestEffort one went, then the BestEffort ones still needed);
    - within a class, repeatedly the pod closest to covering what is still missing (``_by_distance``).

    The choice is pure; the kubelet kills the victims, each through its own pod worker with its
    grace period, as it kills an evicted pod.
    """
    classes: dict[str, list[core_pb2.Pod]] = {"BestEffort": [], "Burstable": [], "Guaranteed": []}
    for p in pods:
        if preemptable(preemptor, p):
            classes[resources.qos_class(p)].append(p)
    best_effort, burstable, guaranteed = classes["BestEffort"], classes["Burstable"], classes["Guaranteed"]
    missing = dict(missing)
    unable = _subtract(missing, best_effort + burstable + guaranteed, requests)
    if unable:
        raise NoVictims(f"no set of running pods found to reclaim resources: {_format(unable)}")
    guaranteed_out = _by_distance(guaranteed, _subtract(missing, best_effort + burstable, requests), requests)
    burstable_out = _by_distance(burstable, _subtract(missing, best_effort + guaranteed_out, requests), requests)
    best_effort_out = _by_distance(best_effort, _subtract(missing, burstable_out + guaranteed_out, requests), requests)
    return best_effort_out + burstable_out + guaranteed_out
