"""ResourceQuotas and LimitRanges (core/v1): Kubernetes' ValidateResourceQuota (spec, scopes,
scope selector, status, update and status update) and ValidateLimitRange, with their field paths
and messages.

Map entries are checked in key order (Go's map order is random, so Kubernetes' order varies).
A quantity in a message prints as its string (``"2"``), where Go prints a resource.Quantity's
internals for some of them — as the rest of kplane's validation does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from apiserver.validation._common import (
    FIELD_IMMUTABLE,
    GoValue,
    go_quote,
    go_repr,
    go_strings,
    is_qualified_name,
    parse_q,
)
from apiserver.validation.meta import name_is_dns_subdomain, validate_object_meta, validate_object_meta_update
from apiserver.validation.quantities import (
    HUGEPAGES_PREFIX,
    is_overcommit_allowed,
    validate_container_resource_name,
    validate_quantity_value,
    validate_resource_name,
)
from machinery.api import core_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, required
from machinery.quantity import Quantity

_INVALID_QUOTA_RESOURCE: Final = "must be a standard resource for quota"
_STANDARD_QUOTA_RESOURCES: Final = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
    "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps",
    "services.nodeports", "services.loadbalancers",
})
_STANDARD_SCOPES: Final = frozenset({"Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
                                     "CrossNamespacePodAffinity"})
_POD_COMPUTE_RESOURCES: Final = frozenset({"cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu",
                                           "requests.memory"})
_EXISTS_ONLY_SCOPES: Final = frozenset({"BestEffort", "NotBestEffort", "Terminating", "NotTerminating",
                                        "CrossNamespacePodAffinity"})
_CONFLICTING_SCOPES: Final = (frozenset({"BestEffort", "NotBestEffort"}), frozenset({"Terminating", "NotTerminating"}))
_EXISTS_ONLY: Final = ("must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, "
                       "ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
                       "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity")
_STANDARD_LIMIT_TYPES: Final = frozenset({"Pod", "Container", "PersistentVolumeClaim"})
# resource.MaxMilliValue: above it a quantity's milli-value overflows int64.
_MAX_MILLI_VALUE: Final = (2**63 - 1) // 1000


# ---------------------------------------------------------------- ResourceQuota


def _is_standard_quota_resource(name: str) -> bool:
    """IsStandardQuotaResourceName (hugepages, requested or not, included)."""
    return name in _STANDARD_QUOTA_RESOURCES or name.startswith(HUGEPAGES_PREFIX) or \
        name.startswith("requests." + HUGEPAGES_PREFIX)


def validate_quota_resource_name(name: str, path: str) -> list[FieldError]:
    """ValidateResourceQuotaResourceName: a resource name, standard for quota unless qualified."""
    errs = validate_resource_name(name, path)
    if "/" not in name and not _is_standard_quota_resource(name):
        errs.append(invalid(path, name, _INVALID_QUOTA_RESOURCE))
    return errs


def _validate_quota_list(m: Mapping[str, str], path: str) -> list[FieldError]:
    """Each entry of spec.hard, status.hard or status.used: its name and its quantity."""
    errs: list[FieldError] = []
    for name in sorted(m):
        p = f"{path}[{name}]"
        errs.extend(validate_quota_resource_name(name, p))
        q = parse_q(m[name], p, errs)
        if q is not None:
            errs.extend(validate_quantity_value(name, q, p))
    return errs


def _go_scopes(scopes: Sequence[str]) -> GoValue:
    """Go's %#v of a []core.ResourceQuotaScope."""
    if not scopes:
        return GoValue("[]core.ResourceQuotaScope(nil)")
    return GoValue("[]core.ResourceQuotaScope{" + ", ".join(go_quote(s) for s in scopes) + "}")


def _scope_valid_for(scope: str, resource: str) -> bool:
    """IsResourceQuotaScopeValidForResource."""
    if scope in ("Terminating", "NotTerminating", "NotBestEffort", "PriorityClass", "CrossNamespacePodAffinity"):
        return resource == "pods" or resource in _POD_COMPUTE_RESOURCES
    if scope == "BestEffort":
        return resource == "pods"
    return True


def _scope_errors(scope: str, hard: Iterable[str], path: str, value: GoValue, unsupported_path: str,
                  unsupported_value: object) -> list[FieldError]:
    """A scope must be standard and apply to every standard resource the quota limits."""
    errs: list[FieldError] = []
    if scope not in _STANDARD_SCOPES:
        errs.append(invalid(unsupported_path, unsupported_value, "unsupported scope"))
    for name in sorted(hard):
        if _is_standard_quota_resource(name) and not _scope_valid_for(scope, name):
            errs.append(invalid(path, value, "unsupported scope applied to resource"))
    return errs


def _validate_scopes(spec: core_pb2.ResourceQuotaSpec) -> list[FieldError]:
    """validateResourceQuotaScopes."""
    scopes = list(spec.scopes)
    if not scopes:
        return []
    path, value = "spec.scopes", _go_scopes(scopes)
    errs: list[FieldError] = []
    for scope in scopes:
        errs.extend(_scope_errors(scope, spec.hard, path, value, path, value))
    for pair in _CONFLICTING_SCOPES:
        if pair <= set(scopes):
            errs.append(invalid(path, value, "conflicting scopes"))
    return errs


def _validate_scope_selector(spec: core_pb2.ResourceQuotaSpec) -> list[FieldError]:
    """validateScopeSelector / validateScopedResourceSelectorRequirement (paths unindexed, as
    Kubernetes reports them)."""
    if not spec.HasField("scope_selector"):
        return []
    path = "spec.scopeSelector.matchExpressions"
    selector_value = GoValue(go_repr(spec.scope_selector))
    errs: list[FieldError] = []
    seen: set[str] = set()
    for req in spec.scope_selector.match_expressions:
        errs.extend(_scope_errors(req.scope_name, spec.hard, path, selector_value, f"{path}.scopeName",
                                  req.scope_name))
        if req.scope_name in _EXISTS_ONLY_SCOPES and req.operator != "Exists":
            errs.append(invalid(f"{path}.operator", req.operator, _EXISTS_ONLY))
        if req.operator in ("In", "NotIn"):
            if not req.values:
                errs.append(required(f"{path}.values", "must be at least one value when `operator` is 'In' or "
                                                       "'NotIn' for scope selector"))
        elif req.operator in ("Exists", "DoesNotExist"):
            if req.values:
                errs.append(invalid(f"{path}.values", GoValue(go_strings(req.values)),
                                    "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
        else:
            errs.append(invalid(f"{path}.operator", req.operator, "not a valid selector operator"))
        seen.add(req.scope_name)
    for pair in _CONFLICTING_SCOPES:
        if pair <= seen:
            errs.append(invalid(path, _go_scopes(spec.scopes), "conflicting scopes"))
    return errs


def _validate_quota_spec(spec: core_pb2.ResourceQuotaSpec) -> list[FieldError]:
    """ValidateResourceQuotaSpec."""
    errs = _validate_quota_list(spec.hard, "spec.hard")
    errs.extend(_validate_scopes(spec))
    errs.extend(_validate_scope_selector(spec))
    return errs


def _validate_quota_status(status: core_pb2.ResourceQuotaStatus) -> list[FieldError]:
    """ValidateResourceQuotaStatus."""
    return _validate_quota_list(status.hard, "status.hard") + _validate_quota_list(status.used, "status.used")


def validate_resource_quota(quota: core_pb2.ResourceQuota) -> list[FieldError]:
    """ValidateResourceQuota."""
    errs = validate_object_meta(quota.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_quota_spec(quota.spec))
    errs.extend(_validate_quota_status(quota.status))
    return errs


def validate_resource_quota_update(new: core_pb2.ResourceQuota, old: core_pb2.ResourceQuota) -> list[FieldError]:
    """ValidateResourceQuotaUpdate: a valid spec whose scopes do not change."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_quota_spec(new.spec))
    if set(new.spec.scopes) != set(old.spec.scopes):
        errs.append(invalid("spec.scopes", _go_scopes(new.spec.scopes), FIELD_IMMUTABLE))
    return errs


def validate_resource_quota_status_update(new: core_pb2.ResourceQuota,
                                          old: core_pb2.ResourceQuota) -> list[FieldError]:
    """ValidateResourceQuotaStatusUpdate (the strategy checks the request's resourceVersion)."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_quota_status(new.status))
    return errs


# ---------------------------------------------------------------- LimitRange


def _validate_limit_type(value: str, path: str) -> list[FieldError]:
    """validateLimitRangeTypeName."""
    errs = [invalid(path, value, m) for m in is_qualified_name(value)]
    if not errs and "/" not in value and value not in _STANDARD_LIMIT_TYPES:
        errs.append(invalid(path, value, "must be a standard limit type or fully qualified"))
    return errs


def _validate_limit_resource_name(limit_type: str, name: str, path: str) -> list[FieldError]:
    """validateLimitRangeResourceName: container resources for Pod and Container items."""
    if limit_type in ("Pod", "Container"):
        return validate_container_resource_name(name, path)
    return validate_resource_name(name, path)


def _quantities(limit_type: str, m: Mapping[str, str], path: str, keys: set[str],
                errs: list[FieldError]) -> dict[str, Quantity]:
    """The parsed quantities of one of an item's maps, their names checked and added to ``keys``."""
    out: dict[str, Quantity] = {}
    for name in sorted(m):
        p = f"{path}[{name}]"
        errs.extend(_validate_limit_resource_name(limit_type, name, p))
        keys.add(name)
        q = parse_q(m[name], p, errs)
        if q is not None:
            out[name] = q
    return out


def _validate_limit_item(item: core_pb2.LimitRangeItem, path: str) -> list[FieldError]:
    """One item of ValidateLimitRange: names, then min <= defaultRequest <= default <= max and the
    ratio's bounds, per resource."""
    errs: list[FieldError] = []
    keys: set[str] = set()
    t = item.type
    maxes = _quantities(t, item.max, f"{path}.max", keys, errs)
    mins = _quantities(t, item.min, f"{path}.min", keys, errs)
    defaults: dict[str, Quantity] = {}
    default_requests: dict[str, Quantity] = {}
    if t == "Pod":
        if item.default:
            errs.append(forbidden(f"{path}.default", "may not be specified when `type` is 'Pod'"))
        if item.default_request:
            errs.append(forbidden(f"{path}.defaultRequest", "may not be specified when `type` is 'Pod'"))
    else:
        defaults = _quantities(t, item.default, f"{path}.default", keys, errs)
        default_requests = _quantities(t, item.default_request, f"{path}.defaultRequest", keys, errs)
    if t == "PersistentVolumeClaim" and "storage" not in item.min and "storage" not in item.max:
        errs.append(required(f"{path}.limits",
                             "either minimum or maximum storage value is required, but neither was provided"))
    ratios = _quantities(t, item.max_limit_request_ratio, f"{path}.maxLimitRequestRatio", keys, errs)
    for k in sorted(keys):
        lo, hi, dflt, req, ratio = mins.get(k), maxes.get(k), defaults.get(k), default_requests.get(k), ratios.get(k)
        if lo is not None and hi is not None and lo > hi:
            errs.append(invalid(f"{path}.min[{k}]", str(lo), f"min value {lo} is greater than max value {hi}"))
        if req is not None and lo is not None and lo > req:
            errs.append(invalid(f"{path}.defaultRequest[{k}]", str(req),
                                f"min value {lo} is greater than default request value {req}"))
        if req is not None and hi is not None and req > hi:
            errs.append(invalid(f"{path}.defaultRequest[{k}]", str(req),
                                f"default request value {req} is greater than max value {hi}"))
        if req is not None and dflt is not None and req > dflt:
            errs.append(invalid(f"{path}.defaultRequest[{k}]", str(req),
                                f"default request value {req} is greater than default limit value {dflt}"))
        if dflt is not None and lo is not None and lo > dflt:
            errs.append(invalid(f"{path}.default[{k}]", str(lo),
                                f"min value {lo} is greater than default value {dflt}"))
        if dflt is not None and hi is not None and dflt > hi:
            errs.append(invalid(f"{path}.default[{k}]", str(hi),
                                f"default value {dflt} is greater than max value {hi}"))
        if ratio is not None and ratio < Quantity(1):
            errs.append(invalid(f"{path}.maxLimitRequestRatio[{k}]", str(ratio), f"ratio {ratio} is less than 1"))
        if ratio is not None and lo is not None and hi is not None:
            errs.extend(_ratio_error(ratio, lo, hi, f"{path}.maxLimitRequestRatio[{k}]"))
        if not is_overcommit_allowed(k) and dflt is not None and req is not None and dflt != req:
            errs.append(invalid(f"{path}.defaultRequest[{k}]", str(req),
                                f"default value {dflt} must equal to defaultRequest value {req} in {k}"))
    return errs


def _ratio_error(ratio: Quantity, lo: Quantity, hi: Quantity, path: str) -> list[FieldError]:
    """maxLimitRequestRatio may not exceed max/min (in milli-units unless they overflow)."""
    ratio_value, lo_value, hi_value = float(ratio.value()), lo.value(), hi.value()
    if ratio.value() < _MAX_MILLI_VALUE and lo_value < _MAX_MILLI_VALUE and hi_value < _MAX_MILLI_VALUE:
        ratio_value = ratio.milli_value() / 1000
        lo_value, hi_value = lo.milli_value(), hi.milli_value()
    limit = hi_value / lo_value if lo_value else float("inf")
    if ratio_value > limit:
        return [invalid(path, str(ratio), f"ratio {ratio} is greater than max/min = {limit:f}")]
    return []


def validate_limit_range(lr: core_pb2.LimitRange) -> list[FieldError]:
    """ValidateLimitRange."""
    errs = validate_object_meta(lr.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_limit_items(lr))
    return errs


def _validate_limit_items(lr: core_pb2.LimitRange) -> list[FieldError]:
    errs: list[FieldError] = []
    types: set[str] = set()
    for i, item in enumerate(lr.spec.limits):
        path = f"spec.limits[{i}]"
        errs.extend(_validate_limit_type(item.type, f"{path}.type"))
        if item.type in types:
            errs.append(duplicate(f"{path}.type", item.type))
        types.add(item.type)
        errs.extend(_validate_limit_item(item, path))
    return errs


def validate_limit_range_update(new: core_pb2.LimitRange, old: core_pb2.LimitRange) -> list[FieldError]:
    """The limit range strategy's update: the metadata update rules, then ValidateLimitRange's
    checks of the new items."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_limit_items(new))
    return errs
