"""PodDisruptionBudgets (policy/v1): Kubernetes' ValidatePodDisruptionBudget and status rules.

``minAvailable``/``maxUnavailable`` are int-or-string: kplane stores them as strings, an
integer as its decimal digits ("3") and a percentage as "50%".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from apiserver.validation._common import GoValue, go_quote, is_qualified_name, too_long, validate_nonnegative
from apiserver.validation.apps import go_int_or_string, is_not_more_than_100_percent, validate_positive_int_or_percent
from apiserver.validation.meta import name_is_path_segment, validate_object_meta, validate_object_meta_update
from apiserver.validation.placement import validate_label_selector
from machinery.api import meta_pb2, policy_pb2
from machinery.errors import FieldError, duplicate, invalid, not_supported, required

_UNHEALTHY_POD_EVICTION_POLICIES: Final = ("AlwaysAllow", "IfHealthyBudget")
_CONDITION_STATUSES: Final = ("False", "True", "Unknown")
_REASON_FMT: Final = "[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?"
_REASON_RE: Final = re.compile(_REASON_FMT)
_REASON_ERR: Final = (
    "a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric "
    "characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or "
    "'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '" + _REASON_FMT + "')")


def _validate_int_or_percent(value: str, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent and IsNotMoreThan100Percent, borrowed from apps as Kubernetes does."""
    return validate_positive_int_or_percent(value, path) or is_not_more_than_100_percent(value, path)


def _spec_repr(spec: policy_pb2.PodDisruptionBudgetSpec) -> GoValue:
    def opt(field: str) -> str:
        return f"&{go_int_or_string(getattr(spec, field))}" if spec.HasField(field) else "(*intstr.IntOrString)(nil)"
    selector = "&v1.LabelSelector{...}" if spec.HasField("selector") else "(*v1.LabelSelector)(nil)"
    policy = f"&{go_quote(spec.unhealthy_pod_eviction_policy)}" if spec.HasField("unhealthy_pod_eviction_policy") \
        else "(*policy.UnhealthyPodEvictionPolicyType)(nil)"
    return GoValue(f"policy.PodDisruptionBudgetSpec{{MinAvailable:{opt('min_available')}, Selector:{selector}, "
                   f"MaxUnavailable:{opt('max_unavailable')}, UnhealthyPodEvictionPolicy:{policy}}}")


def _validate_spec(spec: policy_pb2.PodDisruptionBudgetSpec, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if spec.HasField("min_available") and spec.HasField("max_unavailable"):
        errs.append(invalid(path, _spec_repr(spec), "minAvailable and maxUnavailable cannot be both set"))
    if spec.HasField("min_available"):
        errs.extend(_validate_int_or_percent(spec.min_available, f"{path}.minAvailable"))
    if spec.HasField("max_unavailable"):
        errs.extend(_validate_int_or_percent(spec.max_unavailable, f"{path}.maxUnavailable"))
    if spec.HasField("selector"):
        errs.extend(validate_label_selector(spec.selector, f"{path}.selector"))
    if spec.HasField("unhealthy_pod_eviction_policy") and \
            spec.unhealthy_pod_eviction_policy not in _UNHEALTHY_POD_EVICTION_POLICIES:
        errs.append(not_supported(f"{path}.unhealthyPodEvictionPolicy", spec.unhealthy_pod_eviction_policy,
                                  _UNHEALTHY_POD_EVICTION_POLICIES))
    return errs


def validate_pdb(pdb: policy_pb2.PodDisruptionBudget) -> list[FieldError]:
    errs = _validate_spec(pdb.spec, "spec")
    if not errs:
        # The generic metadata checks run only after the kind's own validation passed.
        errs = validate_object_meta(pdb.metadata, True, name_is_path_segment, kube_finalizers=False)
    return errs


def validate_pdb_update(new: policy_pb2.PodDisruptionBudget, old: policy_pb2.PodDisruptionBudget) -> list[FieldError]:
    """policy/v1 lets the whole spec change; the new spec must be valid."""
    errs = validate_object_meta_update(new.metadata, old.metadata, kube_finalizers=False)
    errs.extend(_validate_spec(new.spec, "spec"))
    return errs


def validate_conditions(conditions: Sequence[meta_pb2.Condition], path: str) -> list[FieldError]:
    """metav1 ValidateConditions: unique types, each a valid Condition."""
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, c in enumerate(conditions):
        p = f"{path}[{i}]"
        if c.type in seen:
            errs.append(duplicate(f"{p}.type", c.type))
        seen.add(c.type)
        errs.extend(invalid(f"{p}.type", c.type, m) for m in is_qualified_name(c.type))
        if c.status not in _CONDITION_STATUSES:
            errs.append(not_supported(f"{p}.status", c.status, _CONDITION_STATUSES))
        if c.observed_generation < 0:
            errs.append(invalid(f"{p}.observedGeneration", c.observed_generation,
                                "must be greater than or equal to zero"))
        if not c.last_transition_time:
            errs.append(required(f"{p}.lastTransitionTime", "must be set"))
        if not c.reason:
            errs.append(required(f"{p}.reason", "must be set"))
        else:
            if not _REASON_RE.fullmatch(c.reason):
                errs.append(invalid(f"{p}.reason", c.reason, _REASON_ERR))
            if len(c.reason) > 1024:
                errs.append(too_long(f"{p}.reason", 1024))
        if len(c.message) > 32 * 1024:
            errs.append(too_long(f"{p}.message", 32 * 1024))
    return errs


def validate_pdb_status_update(new: policy_pb2.PodDisruptionBudget,
                               old: policy_pb2.PodDisruptionBudget) -> list[FieldError]:
    errs = validate_object_meta_update(new.metadata, old.metadata, kube_finalizers=False)
    status = new.status
    errs.extend(validate_conditions(status.conditions, "status.conditions"))
    errs.extend(validate_nonnegative(status.disruptions_allowed, "status.disruptionsAllowed"))
    errs.extend(validate_nonnegative(status.current_healthy, "status.currentHealthy"))
    errs.extend(validate_nonnegative(status.desired_healthy, "status.desiredHealthy"))
    errs.extend(validate_nonnegative(status.expected_pods, "status.expectedPods"))
    return errs
