"""PodInfo: a pod with what the scheduler computes from it once (kube-scheduler's framework.PodInfo).

Built once per pod version, so the per-node loops never re-read protobuf maps:

- ``requests``: the resources the pod holds on its node — the KEP-1287 rule for a pod the
  kubelet reports on (max of desired unless Infeasible, allocated, actual), its spec otherwise;
- ``non_zero_requests``: cpu and memory with kube-scheduler's defaults for containers that ask for
  none (100m, 200Mi), used for spreading scores;
- parsed inter-pod (anti-)affinity terms, required and preferred;
- priority, start time and QoS-independent facts preemption sorts by.

Namespaces have no objects in kplane: a term's ``namespaceSelector`` is matched against the
labels every Kubernetes namespace carries, ``kubernetes.io/metadata.name=<namespace>``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from machinery import resources, timeutil
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.selectors import NOTHING, LabelSelector, Requirement, from_match

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def namespace_labels(namespace: str) -> dict[str, str]:
    return {NAMESPACE_NAME_LABEL: namespace}


def pod_priority(pod: core_pb2.Pod) -> int:
    return pod.spec.priority  # an unset optional int32 reads 0, Kubernetes' default priority


@dataclass(frozen=True)
class AffinityTerm:
    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector

    def matches(self, pod: core_pb2.Pod) -> bool:
        """Kubernetes' AffinityTerm.Matches: the pod's namespace is named or selected, and its labels match."""
        ns = pod.metadata.namespace
        if ns in self.namespaces or self.namespace_selector.matches(namespace_labels(ns)):
            return self.selector.matches(pod.metadata.labels)
        return False


@dataclass(frozen=True)
class WeightedAffinityTerm:
    term: AffinityTerm
    weight: int


def _selector(pod: core_pb2.Pod, term: core_pb2.PodAffinityTerm) -> LabelSelector:
    """The term's labelSelector, plus matchLabelKeys (key in pod's value) and mismatchLabelKeys
    (key notin pod's value), as the apiserver merges them (KEP-3633)."""
    if not term.HasField("label_selector"):
        return NOTHING
    base = from_match(term.label_selector.match_labels, term.label_selector.match_expressions)
    extra = []
    labels = pod.metadata.labels
    for key in term.match_label_keys:
        if key in labels:
            extra.append(Requirement(key, "in", frozenset({labels[key]})))
    for key in term.mismatch_label_keys:
        if key in labels:
            extra.append(Requirement(key, "notin", frozenset({labels[key]})))
    return LabelSelector(base.requirements + tuple(extra)) if extra else base


def _term(pod: core_pb2.Pod, term: core_pb2.PodAffinityTerm) -> AffinityTerm:
    if not term.namespaces and not term.HasField("namespace_selector"):
        namespaces = frozenset({pod.metadata.namespace})
    else:
        namespaces = frozenset(term.namespaces)
    if term.HasField("namespace_selector"):
        ns_selector = from_match(term.namespace_selector.match_labels, term.namespace_selector.match_expressions)
    else:
        ns_selector = NOTHING
    return AffinityTerm(namespaces, _selector(pod, term), term.topology_key, ns_selector)


class PodInfo:
    __slots__ = ("pod", "requests", "cpu", "memory", "ephemeral_storage", "scalar", "non_zero_cpu",
                 "non_zero_memory", "required_affinity_terms",
                 "required_anti_affinity_terms", "preferred_affinity_terms", "preferred_anti_affinity_terms",
                 "parse_error", "priority", "start")

    def __init__(self, pod: core_pb2.Pod):
        self.parse_error: str = ""
        self.update(pod)

    def update(self, pod: core_pb2.Pod) -> None:
        self.pod = pod
        self.priority: int = pod_priority(pod)
        self.start: float = start_time(pod)  # preemption's tie-break; a pod not started counts as newest
        self.requests: dict[str, int] = resources.pod_requests(pod)
        # The same, as a NodeInfo adds it up (its hot path: every pod added or removed, simulations too).
        self.cpu = self.requests.get(resources.CPU, 0)
        self.memory = self.requests.get(resources.MEMORY, 0)
        self.ephemeral_storage = self.requests.get(resources.EPHEMERAL_STORAGE, 0)
        self.scalar = {n: v for n, v in self.requests.items() if resources.is_scalar_resource(n)}
        non_zero = resources.pod_requests(pod, non_missing=resources.NON_ZERO_DEFAULTS)
        self.non_zero_cpu = non_zero.get(resources.CPU, 0)
        self.non_zero_memory = non_zero.get(resources.MEMORY, 0)
        self.required_affinity_terms: tuple[AffinityTerm, ...] = ()
        self.required_anti_affinity_terms: tuple[AffinityTerm, ...] = ()
        self.preferred_affinity_terms: tuple[WeightedAffinityTerm, ...] = ()
        self.preferred_anti_affinity_terms: tuple[WeightedAffinityTerm, ...] = ()
        aff = pod.spec.affinity
        if not pod.spec.HasField("affinity"):
            return
        try:
            if aff.HasField("pod_affinity"):
                pa = aff.pod_affinity
                self.required_affinity_terms = tuple(
                    _term(pod, t) for t in pa.required_during_scheduling_ignored_during_execution)
                self.preferred_affinity_terms = tuple(
                    WeightedAffinityTerm(_term(pod, w.pod_affinity_term), w.weight)
                    for w in pa.preferred_during_scheduling_ignored_during_execution)
            if aff.HasField("pod_anti_affinity"):
                anti = aff.pod_anti_affinity
                self.required_anti_affinity_terms = tuple(
                    _term(pod, t) for t in anti.required_during_scheduling_ignored_during_execution)
                self.preferred_anti_affinity_terms = tuple(
                    WeightedAffinityTerm(_term(pod, w.pod_affinity_term), w.weight)
                    for w in anti.preferred_during_scheduling_ignored_during_execution)
        except ValueError as exc:  # a selector the apiserver let through but cannot be parsed
            self.parse_error = str(exc)

    @property
    def has_affinity(self) -> bool:
        return bool(self.required_affinity_terms or self.required_anti_affinity_terms
                    or self.preferred_affinity_terms or self.preferred_anti_affinity_terms)

    @property
    def has_required_anti_affinity(self) -> bool:
        return bool(self.required_anti_affinity_terms)

    @property
    def key(self) -> str:
        return key_of(self.pod)

    @property
    def uid(self) -> str:
        return self.pod.metadata.uid



NOT_STARTED = float("inf")


def start_time(pod: core_pb2.Pod) -> float:
    """Kubernetes' GetPodStartTime: status.startTime; a pod not started yet (assumed) counts as
    starting now, i.e. after every pod that has started."""
    text = pod.status.start_time
    return _started_at(text) if text else NOT_STARTED


@functools.lru_cache(maxsize=4096)
def _started_at(text: str) -> float:
    """A startTime as seconds, parsed once: preemption reads the victims' of every candidate node
    (``pick_one_node``), and pods started in the same second share the text."""
    t = timeutil.parse(text)
    return t.timestamp() if t is not None else NOT_STARTED


def importance_key(pi: "PodInfo") -> tuple[int, float]:
    """Sorts pod infos most important first (MoreImportantPod as a key)."""
    return -pi.priority, pi.start


class QueuedPodInfo:
    """A pod in the scheduling queue, with its attempt history (kube-scheduler's QueuedPodInfo)."""

    __slots__ = ("pod_info", "timestamp", "initial_attempt_timestamp", "attempts", "unschedulable_count",
                 "consecutive_errors_count", "unschedulable_plugins", "pending_plugins", "gating_plugin",
                 "backoff_expiration", "flushed")

    def __init__(self, pod_info: PodInfo, timestamp: float):
        self.pod_info = pod_info
        self.timestamp = timestamp  # when it was last added (or re-added) to the queue
        self.initial_attempt_timestamp: float | None = None
        self.attempts = 0
        self.unschedulable_count = 0
        self.consecutive_errors_count = 0
        # The plugins that rejected it in its last attempt (their hints decide when it comes back).
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.gating_plugin = ""  # the PreEnqueue plugin keeping it out of activeQ
        self.backoff_expiration: float | None = None
        self.flushed = False  # moved out of the unschedulable pool by the periodic flush

    @property
    def pod(self) -> core_pb2.Pod:
        return self.pod_info.pod

    @property
    def key(self) -> str:
        return self.pod_info.key

    @property
    def gated(self) -> bool:
        return bool(self.gating_plugin)

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.key}, attempts={self.attempts}, rejected_by={sorted(self.unschedulable_plugins)})"
