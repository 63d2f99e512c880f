"""PodDisruptionBudget arithmetic, as Kubernetes' disruption controller computes it.

Pure functions over a budget and the pods it selects: how many pods are expected and healthy,
how many must stay healthy, how many disruptions are allowed now. The apiserver's eviction
subresource uses them directly (so evictions are correct even before any controller has written
the budget's status), and a disruption controller can keep ``status`` current with them.

kplane difference: Kubernetes takes the expected pod count for ``maxUnavailable`` and percentage
``minAvailable`` from the pods' controllers' scale; kplane counts the selected pods, so budgets
over bare pods work too.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from machinery import selectors, timeutil
from machinery.api import core_pb2, meta_pb2, policy_pb2

# How long an eviction counts as "disrupted" if its pod is not deleted (Kubernetes' DeletionTimeout).
DELETION_TIMEOUT = timedelta(minutes=2)
# More unconfirmed evictions than this and further ones are refused (Kubernetes' MaxDisruptedPodSize).
MAX_DISRUPTED_PODS = 2000


class IntOrPercentError(ValueError):
    pass


def is_pod_ready(pod: core_pb2.Pod) -> bool:
    for c in pod.status.conditions:
        if c.type == "Ready":
            return c.status == "True"
    return False


def selector_of(pdb: policy_pb2.PodDisruptionBudget) -> selectors.LabelSelector:
    """policy/v1: a null selector selects no pods, an empty one ({}) selects every pod of the namespace."""
    return selectors.from_label_selector_message(pdb.spec.selector, pdb.spec.HasField("selector"))


def selects(pdb: policy_pb2.PodDisruptionBudget, pod: core_pb2.Pod) -> bool:
    return (pod.metadata.namespace == pdb.metadata.namespace
            and selector_of(pdb).matches(pod.metadata.labels))


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


def desired_healthy(pdb: policy_pb2.PodDisruptionBudget, expected: int) -> int:
    spec = pdb.spec
    if spec.HasField("max_unavailable"):
        return max(0, expected - scaled_value(spec.max_unavailable, expected, round_up=True))
    if spec.HasField("min_available"):
        return scaled_value(spec.min_available, expected, round_up=True)
    return expected  # neither set: Kubernetes defaults minAvailable to 1? No: 100% (no disruptions)


def live_disrupted(pdb: policy_pb2.PodDisruptionBudget, pods_by_name: dict[str, core_pb2.Pod],
                   at: datetime) -> dict[str, str]:
    """disruptedPods entries still in force: pod present, not yet deleting, not expired."""
    out = {}
    for name, when in pdb.status.disrupted_pods.items():
        pod = pods_by_name.get(name)
        if pod is None or pod.metadata.deletion_timestamp:
            continue
        t = timeutil.parse(when)
        if t is not None and t + DELETION_TIMEOUT < at:
            continue
        out[name] = when
    return out


def compute_status(pdb: policy_pb2.PodDisruptionBudget, pods: list[core_pb2.Pod],
                   at: datetime | None = None) -> policy_pb2.PodDisruptionBudgetStatus:
    """The budget's status for the pods it selects (``pods`` must be exactly those)."""
    at = at or timeutil.now()
    by_name = {p.metadata.name: p for p in pods}
    disrupted = live_disrupted(pdb, by_name, at)
    expected = len(pods)
    healthy = sum(1 for p in pods
                  if not p.metadata.deletion_timestamp and p.metadata.name not in disrupted and is_pod_ready(p))
    desired = desired_healthy(pdb, expected)
    allowed = max(0, healthy - desired)
    status = policy_pb2.PodDisruptionBudgetStatus(
        observed_generation=pdb.metadata.generation, disruptions_allowed=allowed, current_healthy=healthy,
        desired_healthy=desired, expected_pods=expected)
    status.disrupted_pods.update(disrupted)
    set_disruption_allowed_condition(status, pdb, at)
    return status


def set_disruption_allowed_condition(status: policy_pb2.PodDisruptionBudgetStatus,
                                     pdb: policy_pb2.PodDisruptionBudget, at: datetime) -> None:
    allowed = status.disruptions_allowed > 0
    reason = "SufficientPods" if allowed else "InsufficientPods"
    previous = next((c for c in pdb.status.conditions if c.type == "DisruptionAllowed"), None)
    transition = (previous.last_transition_time
                  if previous is not None and previous.status == ("True" if allowed else "False")
                  else timeutil.rfc3339(at))
    del status.conditions[:]
    status.conditions.append(meta_pb2.Condition(
        type="DisruptionAllowed", status="True" if allowed else "False", reason=reason,
        observed_generation=pdb.metadata.generation, last_transition_time=transition))
