"""Resource names and quantities: Kubernetes' ValidateResourceRequirements and helpers.

Used for container and pod-level ``resources``, ``spec.overhead``, node capacity and allocatable.
A resource name is standard (``cpu``, ``memory``, ``ephemeral-storage``, ``hugepages-<size>``)
or fully qualified (``example.com/gpu``); extended resources (outside ``kubernetes.io/``) must be
integers, may not be overcommitted (request == limit) and need a limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from functools import lru_cache
from typing import Final

from apiserver.validation._common import (
    IS_NEGATIVE,
    IS_NOT_INTEGER,
    is_qualified_name,
    not_found,
    parse_q,
    validate_dns1123_label,
)
from machinery.api import core_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, not_supported, required
from machinery.quantity import Quantity, QuantityError, parse_quantity

CPU: Final = "cpu"
MEMORY: Final = "memory"
HUGEPAGES_PREFIX: Final = "hugepages-"
_REQUESTS_PREFIX: Final = "requests."
_NVIDIA_GPU: Final = "alpha.kubernetes.io/nvidia-gpu"

_STANDARD_CONTAINER_RESOURCES: Final = frozenset({"cpu", "memory", "ephemeral-storage"})
_INTEGER_RESOURCES: Final = frozenset({
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})
_STANDARD_RESOURCES: Final = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "storage", "requests.storage",
}) | _INTEGER_RESOURCES
# sets.List(resourcehelper.SupportedPodLevelResources()): cpu, memory and the hugepages prefix.
_POD_LEVEL_SUPPORTED: Final = ("cpu", "hugepages-", "memory")
_QOS_COMPUTE: Final = (CPU, MEMORY)


# ---------------------------------------------------------------- resource names


def is_native_resource(name: str) -> bool:
    """Unprefixed or in the kubernetes.io/ namespace."""
    return "/" not in name or "kubernetes.io/" in name


def is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_extended_resource(name: str) -> bool:
    if is_native_resource(name) or name.startswith(_REQUESTS_PREFIX):
        return False
    return not is_qualified_name(_REQUESTS_PREFIX + name)


def is_overcommit_allowed(name: str) -> bool:
    return is_native_resource(name) and not is_hugepages(name) and name != _NVIDIA_GPU


def is_integer_resource(name: str) -> bool:
    return name in _INTEGER_RESOURCES or is_extended_resource(name)


def _is_standard_resource_name(name: str) -> bool:
    return name in _STANDARD_RESOURCES or name.startswith(HUGEPAGES_PREFIX) or \
        name.startswith(_REQUESTS_PREFIX + HUGEPAGES_PREFIX)


@lru_cache(maxsize=4096)
def _resource_name_msgs(name: str) -> tuple[str, ...]:
    msgs = is_qualified_name(name)
    if msgs:
        return msgs
    if "/" not in name and not _is_standard_resource_name(name):
        return ("must be a standard resource type or fully qualified",)
    return ()


@lru_cache(maxsize=4096)
def _container_resource_name_msgs(name: str) -> tuple[str, ...]:
    msgs = _resource_name_msgs(name)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
            return (*msgs, "must be a standard resource for containers")
    elif not is_native_resource(name) and not is_extended_resource(name):
        return (*msgs, "doesn't follow extended resource name standard")
    return msgs


def validate_resource_name(name: str, path: str) -> list[FieldError]:
    """Any resource name: a qualified name, standard unless fully qualified."""
    return [invalid(path, name, m) for m in _resource_name_msgs(name)]


def validate_container_resource_name(name: str, path: str) -> list[FieldError]:
    return [invalid(path, name, m) for m in _container_resource_name_msgs(name)]


def validate_pod_resource_name(name: str, path: str) -> list[FieldError]:
    errs = validate_resource_name(name, path)
    if errs:
        return errs
    if name not in (CPU, MEMORY) and not is_hugepages(name):
        errs.append(not_supported(path, name, _POD_LEVEL_SUPPORTED))
    return errs


# ---------------------------------------------------------------- quantities


def validate_quantity_value(name: str, q: Quantity, path: str) -> list[FieldError]:
    """Kubernetes' ValidateResourceQuantityValue: non-negative; whole for integer resources."""
    errs: list[FieldError] = []
    if q.sign() < 0:
        errs.append(invalid(path, str(q), IS_NEGATIVE))
    if is_integer_resource(name) and q.milli_value() % 1000 != 0:
        errs.append(invalid(path, str(q), IS_NOT_INTEGER))
    return errs


@lru_cache(maxsize=4096)
def _quantity_value_ok(name: str, text: str) -> Quantity | None:
    """The parsed quantity if it parses and ``validate_quantity_value`` accepts it, else None."""
    try:
        q = parse_quantity(text)
    except QuantityError:
        return None
    if q.sign() < 0 or (is_integer_resource(name) and q.milli_value() % 1000 != 0):
        return None
    return q


@lru_cache(maxsize=4096)
def _requirement_ok(name: str, text: str, pod_level: bool) -> Quantity | None:
    """The parsed quantity of one limit or request that ``validate_requirements`` finds nothing
    wrong with on its own (valid name and quantity, not hugepages), else None."""
    if is_hugepages(name):
        return None
    if pod_level:
        if _resource_name_msgs(name) or name not in (CPU, MEMORY):
            return None
    elif _container_resource_name_msgs(name):
        return None
    return _quantity_value_ok(name, text)


def resource_list_ok(m: Mapping[str, str]) -> bool:
    """Whether ``validate_resource_list`` finds nothing wrong (a fast pre-check)."""
    for name in m:
        if _quantity_value_ok(name, m[name]) is None:
            return False
    return True


@lru_cache(maxsize=4096)
def _request_ok(name: str, text: str, limit_text: str | None, pod_level: bool) -> bool:
    """Whether ``validate_requirements`` finds nothing wrong with a request (and its limit,
    ``None`` when the resource has none)."""
    q = _requirement_ok(name, text, pod_level)
    if q is None:
        return False
    if limit_text is None:
        return is_overcommit_allowed(name)
    limit = _requirement_ok(name, limit_text, pod_level)
    if limit is None:
        return False
    if q != limit and not is_overcommit_allowed(name):
        return False
    return not q > limit


def _requirements_ok(limits: Mapping[str, str], requests: Mapping[str, str], pod_level: bool) -> bool:
    """Whether ``validate_requirements`` finds nothing wrong with the limits and requests (a fast
    pre-check on memoised per-resource verdicts; hugepages always take the full path)."""
    for name in limits:
        if _requirement_ok(name, limits[name], pod_level) is None:
            return False
    for name in requests:
        if not _request_ok(name, requests[name], limits[name] if name in limits else None, pod_level):
            return False
    return True


def validate_resource_list(m: Mapping[str, str], path: str, *, keyed: bool = True) -> list[FieldError]:
    """Quantities of a plain ResourceList (node capacity, allocatable, status resources):
    parseable, non-negative, whole where required. ``keyed`` builds ``path[name]``, otherwise
    ``path.name`` (Kubernetes' node capacity paths)."""
    if not m or resource_list_ok(m):
        return []
    errs: list[FieldError] = []
    for name in sorted(m):
        p = f"{path}[{name}]" if keyed else f"{path}.{name}"
        q = parse_q(m[name], p, errs)
        if q is not None:
            errs.extend(validate_quantity_value(name, q, p))
    return errs


def _hugepage_error(name: str, q: Quantity) -> str | None:
    """Go's validateResourceQuantityHugePageValue: a positive whole multiple of the page size."""
    try:
        page = parse_quantity(name[len(HUGEPAGES_PREFIX):])
    except QuantityError:
        page = None
    if page is not None and page.sign() > 0 and page.milli_value() % 1000 == 0 and q.value() % page.value() == 0:
        return None
    return f"{q} is not positive integer multiple of {name}"


def validate_requirements(limits: Mapping[str, str], requests: Mapping[str, str],
                          claims: Iterable[core_pb2.ResourceClaimRef], pod_claim_names: Set[str] | None,
                          path: str, *, pod_level: bool = False,
                          allow_indivisible_hugepages: bool = False) -> list[FieldError]:
    """Kubernetes' validateResourceRequirements for container (or, with ``pod_level``, pod-level)
    resources: names, quantities, request <= limit (== for resources that cannot be
    overcommitted), hugepages rules, and claim references."""
    if (pod_claim_names is None or not claims) and _requirements_ok(limits, requests, pod_level):
        return []
    name_fn = validate_pod_resource_name if pod_level else validate_container_resource_name
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    errs: list[FieldError] = []
    lim_cpu_mem = req_cpu_mem = lim_huge = req_huge = False
    parsed_limits: dict[str, Quantity] = {}
    for name in sorted(limits):
        p = f"{lim_path}[{name}]"
        errs.extend(name_fn(name, p))
        q = parse_q(limits[name], p, errs)
        if q is None:
            continue
        parsed_limits[name] = q
        errs.extend(validate_quantity_value(name, q, p))
        if is_hugepages(name):
            lim_huge = True
            msg = None if allow_indivisible_hugepages else _hugepage_error(name, q)
            if msg:
                errs.append(invalid(p, str(q), msg))
        if name in _QOS_COMPUTE:
            lim_cpu_mem = True
    for name in sorted(requests):
        p = f"{req_path}[{name}]"
        errs.extend(name_fn(name, p))
        q = parse_q(requests[name], p, errs)
        if q is None:
            continue
        errs.extend(validate_quantity_value(name, q, p))
        if name in limits:
            limit = parsed_limits.get(name)
            if limit is not None:
                if q != limit and not is_overcommit_allowed(name):
                    errs.append(invalid(req_path, str(q), f"must be equal to {name} limit of {limit}"))
                elif q > limit:
                    errs.append(invalid(req_path, str(q), f"must be less than or equal to {name} limit of {limit}"))
        elif not is_overcommit_allowed(name):
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
        if is_hugepages(name):
            req_huge = True
            msg = None if allow_indivisible_hugepages else _hugepage_error(name, q)
            if msg:
                errs.append(invalid(p, str(q), msg))
        if name in _QOS_COMPUTE:
            req_cpu_mem = True
    if not lim_cpu_mem and not req_cpu_mem and (req_huge or lim_huge):
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    if pod_claim_names is not None:
        errs.extend(_validate_claim_names(claims, pod_claim_names, f"{path}.claims"))
    return errs


def _validate_claim_names(claims: Iterable[core_pb2.ResourceClaimRef], pod_claim_names: Set[str],
                          path: str) -> list[FieldError]:
    """A container's ``resources.claims`` must name entries of ``spec.resourceClaims``, once."""
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, claim in enumerate(claims):
        p = f"{path}[{i}]"
        name = claim.name
        if not name:
            errs.append(required(p))
            continue
        if name in names:
            errs.append(duplicate(p, name))
        else:
            key = name
            if claim.request:
                errs.extend(validate_dns1123_label(claim.request, f"{p}.request"))
                key = f"{name}/{claim.request}"
            if key in names:
                errs.append(duplicate(p, key))
            elif not claim.request:
                for seen in sorted(names):
                    if "/" in seen and seen.split("/", 1)[0] == name:
                        errs.append(duplicate(p, name))
            names.add(key)
        if name not in pod_claim_names:
            detail = "must be one of the names in pod.spec.resourceClaims"
            detail += (": " + ", ".join(sorted(pod_claim_names))) if pod_claim_names else " which is empty"
            errs.append(not_found(p, name, detail))
    return errs
