"""ReplicaSets and Deployments (apps/v1) and their autoscaling/v1 Scale: Kubernetes'
ValidateReplicaSet, ValidateDeployment, their update and status rules, the apps/v1 strategies'
selector immutability, and ValidateScale (pkg/apis/apps/validation, pkg/registry/apps).

Int-or-string fields (maxSurge, maxUnavailable) are stored as strings: an integer as its digits
("3"), a percentage as "25%". A bad value prints as Go's ``%#v`` of an intstr.IntOrString, as
Kubernetes prints it. ``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent`` live here,
as in Kubernetes, where policy/v1 validation borrows them too.
"""

from __future__ import annotations

import re
from typing import Final

from apiserver.validation._common import (
    FIELD_IMMUTABLE,
    GoValue,
    go_quote,
    go_repr,
    go_string_map,
    is_valid_percent,
    validate_nonnegative,
)
from apiserver.validation.meta import name_is_dns_subdomain, validate_object_meta, validate_object_meta_update
from apiserver.validation.placement import validate_label_selector
from apiserver.validation.pod import (
    PodValidationOptions,
    template_options_for_update,
    validate_pod_template_spec,
)
from machinery import selectors
from machinery.api import apps_pb2, autoscaling_pb2, core_pb2
from machinery.errors import FieldError, forbidden, invalid, not_supported, required

_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_STRATEGY_TYPES: Final = ("Recreate", "RollingUpdate")
_STATUS_REPLICAS: Final = "cannot be greater than status.replicas"


# ---------------------------------------------------------------- int or percent


def go_int_or_string(value: str) -> GoValue:
    """Go's %#v of an intstr.IntOrString."""
    if _INT_RE.fullmatch(value):
        return GoValue(f"intstr.IntOrString{{Type:0, IntVal:{int(value)}, StrVal:\"\"}}")
    return GoValue(f"intstr.IntOrString{{Type:1, IntVal:0, StrVal:{go_quote(value)}}}")


def validate_positive_int_or_percent(value: str, path: str) -> list[FieldError]:
    """ValidatePositiveIntOrPercent: an integer >= 0, or a valid percent string."""
    if _INT_RE.fullmatch(value):
        return validate_nonnegative(int(value), path)
    return [invalid(path, go_int_or_string(value), m) for m in is_valid_percent(value)]


def _percent(value: str) -> int | None:
    """getPercentValue: the number of a valid percent string, else None."""
    if _INT_RE.fullmatch(value) or is_valid_percent(value):
        return None
    return int(value[:-1])


def int_or_percent_value(value: str) -> int:
    """getIntOrPercentValue: the percentage's number, or the integer (0 for anything else)."""
    pct = _percent(value)
    if pct is not None:
        return pct
    return int(value) if _INT_RE.fullmatch(value) else 0


def is_not_more_than_100_percent(value: str, path: str) -> list[FieldError]:
    """IsNotMoreThan100Percent: a percentage may not exceed 100%."""
    pct = _percent(value)
    if pct is None or pct <= 100:
        return []
    return [invalid(path, go_int_or_string(value), "must not be greater than 100%")]


# ---------------------------------------------------------------- selector and template


def _validate_selector(spec: apps_pb2.ReplicaSetSpec | apps_pb2.DeploymentSpec, path: str,
                       opts: PodValidationOptions) -> list[FieldError]:
    """The selector (required, valid, not empty) and the template it must match."""
    errs: list[FieldError] = []
    present = spec.HasField("selector")
    if not present:
        errs.append(required(f"{path}.selector"))
    else:
        errs.extend(validate_label_selector(spec.selector, f"{path}.selector"))
        if not spec.selector.match_labels and not spec.selector.match_expressions:
            errs.append(invalid(f"{path}.selector", GoValue(go_repr(spec.selector)),
                                "empty selector is invalid for deployment"))
    try:
        selector = selectors.label_selector_as_selector(spec.selector, present)
    except selectors.SelectorError:
        errs.append(invalid(f"{path}.selector", GoValue(go_repr(spec.selector)), "invalid label selector"))
    else:
        errs.extend(_validate_template(spec.template, selector, f"{path}.template", opts))
    return errs


def _validate_template(template: core_pb2.PodTemplateSpec, selector: selectors.LabelSelector, path: str,
                       opts: PodValidationOptions) -> list[FieldError]:
    """ValidatePodTemplateSpecForReplicaSet (Deployments' too, hence its messages): labels the
    selector matches, a valid pod template, restartPolicy Always, no activeDeadlineSeconds."""
    errs: list[FieldError] = []
    labels = template.metadata.labels
    if not selector.empty and not selector.matches(labels):
        errs.append(invalid(f"{path}.metadata.labels", GoValue(go_string_map(labels)),
                            "`selector` does not match template `labels`"))
    errs.extend(validate_pod_template_spec(template, path, opts))
    spec = template.spec
    if spec.restart_policy != "Always":
        errs.append(not_supported(f"{path}.spec.restartPolicy", spec.restart_policy, ("Always",)))
    if spec.HasField("active_deadline_seconds"):
        errs.append(forbidden(f"{path}.spec.activeDeadlineSeconds",
                              "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return errs


def _selector_immutable(new: apps_pb2.ReplicaSetSpec | apps_pb2.DeploymentSpec,
                        old: apps_pb2.ReplicaSetSpec | apps_pb2.DeploymentSpec) -> list[FieldError]:
    """apps/v1's strategies: spec.selector may not change (nil and empty maps compare equal)."""
    if new.HasField("selector") == old.HasField("selector") and new.selector == old.selector:
        return []
    value = GoValue(go_repr(new.selector)) if new.HasField("selector") else None
    return [invalid("spec.selector", value, FIELD_IMMUTABLE)]


# ---------------------------------------------------------------- ReplicaSet


def _validate_replica_set_spec(spec: apps_pb2.ReplicaSetSpec, opts: PodValidationOptions) -> list[FieldError]:
    errs = validate_nonnegative(spec.replicas, "spec.replicas")
    errs.extend(validate_nonnegative(spec.min_ready_seconds, "spec.minReadySeconds"))
    errs.extend(_validate_selector(spec, "spec", opts))
    return errs


def validate_replica_set(rs: apps_pb2.ReplicaSet) -> list[FieldError]:
    """ValidateReplicaSet (after defaulting)."""
    errs = validate_object_meta(rs.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_replica_set_spec(rs.spec, PodValidationOptions()))
    return errs


def validate_replica_set_update(new: apps_pb2.ReplicaSet, old: apps_pb2.ReplicaSet) -> list[FieldError]:
    """ValidateReplicaSetUpdate and apps/v1's immutable selector."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_replica_set_spec(new.spec, template_options_for_update(old.spec.template)))
    errs.extend(_selector_immutable(new.spec, old.spec))
    return errs


def _validate_counts(status: apps_pb2.ReplicaSetStatus | apps_pb2.DeploymentStatus, nonnegative: tuple[str, ...],
                    at_most_replicas: tuple[str, ...]) -> list[FieldError]:
    """The status counts Kubernetes checks, in its order: ``nonnegative`` ones (then the optional
    ones, when set) at least 0; ``at_most_replicas`` ones not above status.replicas; available
    not above ready."""
    fields = status.DESCRIPTOR.fields_by_name
    errs: list[FieldError] = []
    for name in nonnegative:
        errs.extend(validate_nonnegative(getattr(status, name), f"status.{fields[name].json_name}"))
    for name in ("terminating_replicas", "collision_count"):
        if name in fields and status.HasField(name):
            errs.extend(validate_nonnegative(getattr(status, name), f"status.{fields[name].json_name}"))
    for name in at_most_replicas:
        value = getattr(status, name)
        if value > status.replicas:
            errs.append(invalid(f"status.{fields[name].json_name}", value, _STATUS_REPLICAS))
    if status.available_replicas > status.ready_replicas:
        errs.append(invalid("status.availableReplicas", status.available_replicas,
                            "cannot be greater than readyReplicas"))
    return errs


def validate_replica_set_status_update(new: apps_pb2.ReplicaSet, old: apps_pb2.ReplicaSet) -> list[FieldError]:
    """ValidateReplicaSetStatusUpdate."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_counts(
        new.status,
        ("replicas", "fully_labeled_replicas", "ready_replicas", "available_replicas", "observed_generation"),
        ("fully_labeled_replicas", "ready_replicas", "available_replicas")))
    return errs


# ---------------------------------------------------------------- Deployment


def _validate_rolling_update(ru: apps_pb2.RollingUpdateDeployment, path: str) -> list[FieldError]:
    """ValidateRollingUpdateDeployment (both fields are defaulted to 25%)."""
    max_unavailable, max_surge = ru.max_unavailable, ru.max_surge
    errs = validate_positive_int_or_percent(max_unavailable, f"{path}.maxUnavailable")
    errs.extend(validate_positive_int_or_percent(max_surge, f"{path}.maxSurge"))
    if int_or_percent_value(max_unavailable) == 0 and int_or_percent_value(max_surge) == 0:
        errs.append(invalid(f"{path}.maxUnavailable", go_int_or_string(max_unavailable),
                            "may not be 0 when `maxSurge` is 0"))
    errs.extend(is_not_more_than_100_percent(max_unavailable, f"{path}.maxUnavailable"))
    return errs


def _validate_strategy(strategy: apps_pb2.DeploymentStrategy, path: str) -> list[FieldError]:
    """ValidateDeploymentStrategy."""
    if strategy.type == "Recreate":
        if strategy.HasField("rolling_update"):
            return [forbidden(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if strategy.type == "RollingUpdate":
        if not strategy.HasField("rolling_update"):
            return [required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
        return _validate_rolling_update(strategy.rolling_update, f"{path}.rollingUpdate")
    return [not_supported(path, _go_strategy(strategy), _STRATEGY_TYPES)]


def _go_strategy(strategy: apps_pb2.DeploymentStrategy) -> GoValue:
    """Go's %#v of an apps.DeploymentStrategy (its rollingUpdate pointer as ``&value``, as kplane
    prints pointers; an unset int-or-string is the zero IntOrString)."""
    rolling = "(*apps.RollingUpdateDeployment)(nil)"
    if strategy.HasField("rolling_update"):
        ru = strategy.rolling_update
        rolling = (f"&apps.RollingUpdateDeployment{{MaxUnavailable:{go_int_or_string(ru.max_unavailable or '0')}, "
                   f"MaxSurge:{go_int_or_string(ru.max_surge or '0')}}}")
    return GoValue(f"apps.DeploymentStrategy{{Type:{go_quote(strategy.type)}, RollingUpdate:{rolling}}}")


def _validate_deployment_spec(spec: apps_pb2.DeploymentSpec, opts: PodValidationOptions) -> list[FieldError]:
    """ValidateDeploymentSpec."""
    errs = validate_nonnegative(spec.replicas, "spec.replicas")
    errs.extend(_validate_selector(spec, "spec", opts))
    errs.extend(_validate_strategy(spec.strategy, "spec.strategy"))
    errs.extend(validate_nonnegative(spec.min_ready_seconds, "spec.minReadySeconds"))
    if spec.HasField("revision_history_limit"):
        errs.extend(validate_nonnegative(spec.revision_history_limit, "spec.revisionHistoryLimit"))
    if spec.HasField("progress_deadline_seconds"):
        deadline = spec.progress_deadline_seconds
        errs.extend(validate_nonnegative(deadline, "spec.progressDeadlineSeconds"))
        if deadline <= spec.min_ready_seconds:
            errs.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    return errs


def validate_deployment(d: apps_pb2.Deployment) -> list[FieldError]:
    """ValidateDeployment (after defaulting)."""
    errs = validate_object_meta(d.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_deployment_spec(d.spec, PodValidationOptions()))
    return errs


def validate_deployment_update(new: apps_pb2.Deployment, old: apps_pb2.Deployment) -> list[FieldError]:
    """ValidateDeploymentUpdate and apps/v1's immutable selector."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_deployment_spec(new.spec, template_options_for_update(old.spec.template)))
    errs.extend(_selector_immutable(new.spec, old.spec))
    return errs


def validate_deployment_status_update(new: apps_pb2.Deployment, old: apps_pb2.Deployment) -> list[FieldError]:
    """ValidateDeploymentStatusUpdate: the counts, and collisionCount never decremented."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    s = new.status
    errs.extend(_validate_counts(
        s, ("observed_generation", "replicas", "updated_replicas", "ready_replicas", "available_replicas",
            "unavailable_replicas"),
        ("updated_replicas", "ready_replicas", "available_replicas")))
    old_count = old.status.collision_count if old.status.HasField("collision_count") else None
    if old_count is not None and (not s.HasField("collision_count") or s.collision_count < old_count):
        errs.append(invalid("status.collisionCount", s.collision_count, "cannot be decremented"))
    return errs


# ---------------------------------------------------------------- Scale


def validate_scale(scale: autoscaling_pb2.Scale) -> list[FieldError]:
    """ValidateScale (autoscaling): valid metadata, replicas >= 0."""
    errs = validate_object_meta(scale.metadata, True, name_is_dns_subdomain)
    if scale.spec.replicas < 0:
        errs.append(invalid("spec.replicas", scale.spec.replicas, "must be greater than or equal to 0"))
    return errs
