"""PodDisruptionBudget arithmetic, as Kubernetes' disruption controller computes it.

Pure functions over a budget and the pods it selects, in the order Kubernetes' trySync takes
them: the expected pod count and how many must stay healthy (``expected_pod_count``: for an
integer ``minAvailable`` the pods selected; for a percentage ``minAvailable`` or any
``maxUnavailable`` the sum of the scale of the pods' controllers, found through their controller
ownerReference by a ``ScaleFinder``), the evictions still in force (``disrupted_pod_map``: two
minutes, DeletionTimeout), the healthy pods (``count_healthy``), and the status with its
``DisruptionAllowed`` condition (``budget_status``). ``controllers/disruption.py`` keeps every
budget's status so; the apiserver's eviction subresource and the scheduler's preemption read it.

``compute_status`` is kplane's on-the-spot computation for a budget whose status the disruption
controller never wrote (``computed_by_controller`` false: a cluster run without one): every
selected pod counts as expected, so budgets over bare pods work too. docs/apiserver.md says where
it is used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta

from machinery import selectors, timeutil
from machinery.api import core_pb2, meta_pb2, policy_pb2

# How long an eviction counts as "disrupted" if its pod is not deleted (Kubernetes' DeletionTimeout).
DELETION_TIMEOUT = timedelta(minutes=2)
# More unconfirmed evictions than this and further ones are refused (Kubernetes' MaxDisruptedPodSize).
MAX_DISRUPTED_PODS = 2000

DISRUPTION_ALLOWED = "DisruptionAllowed"
SUFFICIENT_PODS, INSUFFICIENT_PODS, SYNC_FAILED = "SufficientPods", "InsufficientPods", "SyncFailed"

# (the pod's controller ownerReference, the pod's namespace) -> (the controller's uid, its scale),
# or None when that reference names no controller this finder knows (Kubernetes' podControllerFinder).
ScaleFinder = Callable[[meta_pb2.OwnerReference, str], tuple[str, int] | None]


class IntOrPercentError(ValueError):
    pass


class NoControllerError(Exception):
    """A selected pod's controller ownerReference resolves to no controller (Kubernetes' "found no
    controllers for pod"): the budget's expected count cannot be known."""


def is_pod_ready(pod: core_pb2.Pod) -> bool:
    for c in pod.status.conditions:
        if c.type == "Ready":
            return c.status == "True"
    return False


def selector_of(pdb: policy_pb2.PodDisruptionBudget) -> selectors.LabelSelector:
    """policy/v1: a null selector selects no pods, an empty one ({}) selects every pod of the namespace."""
    return selectors.from_label_selector_message(pdb.spec.selector, pdb.spec.HasField("selector"))


def selects(pdb: policy_pb2.PodDisruptionBudget, pod: core_pb2.Pod) -> bool:
    """The disruption controller's matching (its pod lister with the budget's selector)."""
    return (pod.metadata.namespace == pdb.metadata.namespace
            and selector_of(pdb).matches(pod.metadata.labels))


def covers_for_eviction(pdb: policy_pb2.PodDisruptionBudget, pod: core_pb2.Pod) -> bool:
    """The eviction subresource's and the scheduler's matching: as ``selects``, but "if a PDB with
    a nil or empty selector creeps in, it should match nothing, not everything" (Kubernetes'
    eviction.go getPodDisruptionBudgets and the scheduler's filterPodsWithPDBViolation)."""
    selector = selector_of(pdb)
    return (pod.metadata.namespace == pdb.metadata.namespace and not selector.empty
            and selector.matches(pod.metadata.labels))


def controller_of(meta: meta_pb2.ObjectMeta) -> meta_pb2.OwnerReference | None:
    """metav1.GetControllerOf: the ownerReference with ``controller: true``, if any."""
    return next((r for r in meta.owner_references if r.HasField("controller") and r.controller), None)


def scaled_value(value: str, total: int, round_up: bool) -> int:
    """An IntOrString as an absolute count: ``3`` -> 3, ``"50%"`` of ``total`` rounded as asked."""
    if value.endswith("%"):
        try:
            pct = int(value[:-1])
        except ValueError:
            raise IntOrPercentError(f"invalid value for IntOrString: invalid value {value!r}") from None
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    try:
        return int(value)
    except ValueError:
        raise IntOrPercentError(f"invalid value for IntOrString: invalid value {value!r}") from None


def _is_int(value: str) -> bool:
    return not value.endswith("%")


def expected_scale(pods: Iterable[core_pb2.Pod], finder: ScaleFinder) -> tuple[int, list[str]]:
    """Kubernetes' getExpectedScale: the sum of the scale of the controllers of ``pods`` (each
    counted once), and the names of the pods without a controller (not counted). Raises
    NoControllerError for a pod whose controller reference resolves to nothing."""
    scales: dict[str, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        ref = controller_of(pod.metadata)
        if ref is None:
            unmanaged.append(pod.metadata.name)
            continue
        if ref.uid in scales:
            continue
        found = finder(ref, pod.metadata.namespace)
        if found is None:
            raise NoControllerError(f'found no controllers for pod "{pod.metadata.name}"')
        uid, scale = found
        scales[uid] = scale
    return sum(scales.values()), unmanaged


def expected_pod_count(pdb: policy_pb2.PodDisruptionBudget, pods: list[core_pb2.Pod],
                       finder: ScaleFinder | None) -> tuple[int, int, list[str]]:
    """Kubernetes' getExpectedPodCount: (expected pods, desired healthy, unmanaged pod names).

    ``maxUnavailable`` (an integer or a percentage, rounded up) and a percentage ``minAvailable``
    (rounded up) are taken of the controllers' scale; an integer ``minAvailable`` is the desired
    count itself, and the pods selected are the expected ones. Neither set: 0 and 0. With no
    ``finder`` every selected pod counts as expected (kplane's ``compute_status``)."""
    spec = pdb.spec

    def scale() -> tuple[int, list[str]]:
        if finder is None:
            return len(pods), []
        return expected_scale(pods, finder)

    if spec.HasField("max_unavailable"):
        expected, unmanaged = scale()
        max_unavailable = scaled_value(spec.max_unavailable, expected, round_up=True)
        return expected, max(0, expected - max_unavailable), unmanaged
    if spec.HasField("min_available"):
        if _is_int(spec.min_available):
            return len(pods), scaled_value(spec.min_available, len(pods), round_up=True), []
        expected, unmanaged = scale()
        return expected, scaled_value(spec.min_available, expected, round_up=True), unmanaged
    return 0, 0, []


def disrupted_pod_map(pdb: policy_pb2.PodDisruptionBudget, pods: Iterable[core_pb2.Pod],
                      at: datetime) -> tuple[dict[str, str], datetime | None, list[core_pb2.Pod]]:
    """Kubernetes' buildDisruptedPodMap: the ``disruptedPods`` entries still in force (the pod is
    selected, not yet being deleted, evicted less than DeletionTimeout ago), when the earliest of
    them expires (the budget is looked at again then), and the pods whose entry expired without
    their deletion (Kubernetes records ``NotDeleted`` for each)."""
    kept: dict[str, str] = {}
    recheck: datetime | None = None
    expired: list[core_pb2.Pod] = []
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue
        when = pdb.status.disrupted_pods.get(pod.metadata.name)
        if when is None:
            continue
        t = timeutil.parse(when)
        if t is None:
            continue
        due = t + DELETION_TIMEOUT
        if due < at:
            expired.append(pod)
            continue
        if recheck is None or due < recheck:
            recheck = due
        kept[pod.metadata.name] = when
    return kept, recheck, expired


def count_healthy(pods: Iterable[core_pb2.Pod], disrupted: dict[str, str], at: datetime) -> int:
    """Kubernetes' countHealthyPods: Ready pods neither being deleted nor evicted a moment ago."""
    healthy = 0
    for pod in pods:
        if pod.metadata.deletion_timestamp:
            continue
        when = disrupted.get(pod.metadata.name)
        t = timeutil.parse(when) if when is not None else None
        if t is not None and t + DELETION_TIMEOUT > at:
            continue
        if is_pod_ready(pod):
            healthy += 1
    return healthy


def set_condition(status: policy_pb2.PodDisruptionBudgetStatus, type_: str, value: str, reason: str,
                  message: str, observed_generation: int, at: datetime) -> None:
    """apimachinery's meta.SetStatusCondition: the condition added, or updated in place with a new
    lastTransitionTime only when its status changes; other conditions kept."""
    for c in status.conditions:
        if c.type == type_:
            if c.status != value:
                c.status, c.last_transition_time = value, timeutil.rfc3339(at)
            c.reason, c.message, c.observed_generation = reason, message, observed_generation
            return
    status.conditions.append(meta_pb2.Condition(type=type_, status=value, reason=reason, message=message,
                                                observed_generation=observed_generation,
                                                last_transition_time=timeutil.rfc3339(at)))


def update_disruption_allowed_condition(status: policy_pb2.PodDisruptionBudgetStatus, at: datetime) -> None:
    """component-helpers' UpdateDisruptionAllowedCondition: True/SufficientPods when a disruption is
    allowed, False/InsufficientPods otherwise, at the status' observedGeneration."""
    if status.disruptions_allowed > 0:
        set_condition(status, DISRUPTION_ALLOWED, "True", SUFFICIENT_PODS, "", status.observed_generation, at)
    else:
        set_condition(status, DISRUPTION_ALLOWED, "False", INSUFFICIENT_PODS, "", status.observed_generation, at)


def conditions_up_to_date(pdb: policy_pb2.PodDisruptionBudget) -> bool:
    """component-helpers' ConditionsAreUpToDate."""
    cond = next((c for c in pdb.status.conditions if c.type == DISRUPTION_ALLOWED), None)
    if cond is None or pdb.status.observed_generation != pdb.metadata.generation:
        return False
    if pdb.status.disruptions_allowed > 0:
        return cond.status == "True" and cond.reason == SUFFICIENT_PODS
    return cond.status == "False" and cond.reason == INSUFFICIENT_PODS


def budget_status(pdb: policy_pb2.PodDisruptionBudget, current_healthy: int, desired_healthy: int, expected: int,
                  disrupted: dict[str, str], at: datetime) -> policy_pb2.PodDisruptionBudgetStatus | None:
    """Kubernetes' updatePdbStatus: the status to write, or None when the stored one already says
    all this. No disruption is allowed while no pod is expected, "so that PDBs which currently
    match no pods are in a safe state when their first pods appear"."""
    allowed = current_healthy - desired_healthy
    if expected <= 0 or allowed <= 0:
        allowed = 0
    st = pdb.status
    if (st.current_healthy == current_healthy and st.desired_healthy == desired_healthy
            and st.expected_pods == expected and st.disruptions_allowed == allowed
            and dict(st.disrupted_pods) == disrupted and st.observed_generation == pdb.metadata.generation
            and conditions_up_to_date(pdb)):
        return None
    status = policy_pb2.PodDisruptionBudgetStatus(
        current_healthy=current_healthy, desired_healthy=desired_healthy, expected_pods=expected,
        disruptions_allowed=allowed, observed_generation=pdb.metadata.generation)
    status.disrupted_pods.update(disrupted)
    status.conditions.extend(st.conditions)
    update_disruption_allowed_condition(status, at)
    return status


def sync_failed_status(pdb: policy_pb2.PodDisruptionBudget, error: str,
                       at: datetime) -> policy_pb2.PodDisruptionBudgetStatus:
    """Kubernetes' failSafe: whatever went wrong, no disruption is allowed — DisruptionAllowed False,
    reason SyncFailed, the error as message; observedGeneration stays what it was."""
    status = policy_pb2.PodDisruptionBudgetStatus()
    status.CopyFrom(pdb.status)
    status.disruptions_allowed = 0
    set_condition(status, DISRUPTION_ALLOWED, "False", SYNC_FAILED, error, status.observed_generation, at)
    return status


def computed_by_controller(pdb: policy_pb2.PodDisruptionBudget) -> bool:
    """Whether a disruption controller ever wrote the budget's status: it always sets the
    DisruptionAllowed condition, and an observedGeneration once it computed one."""
    return pdb.status.observed_generation > 0 or any(c.type == DISRUPTION_ALLOWED for c in pdb.status.conditions)


def compute_status(pdb: policy_pb2.PodDisruptionBudget, pods: list[core_pb2.Pod],
                   at: datetime | None = None) -> policy_pb2.PodDisruptionBudgetStatus:
    """kplane's on-the-spot status of a budget (``pods`` must be exactly those it selects): the
    controller's arithmetic with every selected pod counted as expected, as if each were its own
    controller of scale 1."""
    at = at or timeutil.now()
    expected, desired, _ = expected_pod_count(pdb, pods, None)
    disrupted, _, _ = disrupted_pod_map(pdb, pods, at)
    healthy = count_healthy(pods, disrupted, at)
    fresh = policy_pb2.PodDisruptionBudget()
    fresh.CopyFrom(pdb)
    fresh.status.observed_generation = -1  # never "up to date": always build the status
    status = budget_status(fresh, healthy, desired, expected, disrupted, at)
    assert status is not None
    return status
