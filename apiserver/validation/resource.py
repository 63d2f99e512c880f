"""Dynamic Resource Allocation (resource.k8s.io/v1): the structural part of Kubernetes'
validation of ResourceClaim, ResourceClaimTemplate, ResourceSlice and DeviceClass.

Names, required fields, exactly-one-of rules, counts and list sizes are checked as Kubernetes
does; CEL expressions are not compiled (only their presence and length are checked), and the
opaque ``config``/``constraints``/``tolerations`` entries kplane stores as Structs are not
inspected.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from typing import Final, TypeVar

from apiserver.validation import placement, quantities
from apiserver.validation._common import (
    FIELD_IMMUTABLE,
    GoValue,
    go_list,
    go_repr,
    is_dns1123_subdomain,
    parse_q,
    too_long,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_labels,
)
from apiserver.validation.meta import (
    name_is_dns_subdomain,
    validate_annotations,
    validate_object_meta,
    validate_object_meta_update,
)
from machinery.api import core_pb2, meta_pb2, resource_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, not_supported, required, too_many

DEVICE_REQUESTS_MAX_SIZE: Final = 32
FIRST_AVAILABLE_MAX_SIZE: Final = 8
DEVICE_SELECTORS_MAX_SIZE: Final = 32
CEL_EXPRESSION_MAX_LENGTH: Final = 10 * 1024
RESOURCE_SLICE_MAX_DEVICES: Final = 128
POOL_NAME_MAX_LENGTH: Final = 253
DRIVER_NAME_MAX_LENGTH: Final = 63
RESERVED_FOR_MAX_SIZE: Final = 256
ALLOCATION_RESULTS_MAX_SIZE: Final = 32
DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH: Final = 64

_ALLOCATION_MODES: Final = ("All", "ExactCount")
_SEMVER_RE: Final = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?")
_REQUEST_REF_ERR: Final = ("must be the name of a request in the claim or the name of a request and a subrequest "
                           "separated by '/'")

T = TypeVar("T")


def _validate_set(items: Sequence[T], max_items: int, validate_item: Callable[[T, str], list[FieldError]],
                  key: Callable[[T], Hashable], path: str) -> list[FieldError]:
    """Go's validateSet: each item valid, at most ``max_items`` (negative: no limit), unique keys."""
    errs: list[FieldError] = []
    for i, item in enumerate(items):
        errs.extend(validate_item(item, f"{path}[{i}]"))
    if 0 <= max_items < len(items):
        errs.append(too_many(path, len(items), max_items))
    seen: set[Hashable] = set()
    for i, item in enumerate(items):
        k = key(item)
        if k in seen:
            errs.append(duplicate(f"{path}[{i}]", k))
        seen.add(k)
    return errs


def _validate_driver_name(name: str, path: str) -> list[FieldError]:
    """Kubernetes' ValidateCSIDriverName (DRA drivers follow the same rules)."""
    errs: list[FieldError] = []
    if not name:
        errs.append(required(path))
    if len(name) > DRIVER_NAME_MAX_LENGTH:
        errs.append(too_long(path, DRIVER_NAME_MAX_LENGTH))
    errs.extend(invalid(path, name, m) for m in is_dns1123_subdomain(name.lower()))
    return errs


def _validate_pool_name(name: str, path: str) -> list[FieldError]:
    if not name:
        return [required(path)]
    errs: list[FieldError] = []
    if len(name) > POOL_NAME_MAX_LENGTH:
        errs.append(too_long(path, POOL_NAME_MAX_LENGTH))
    for part in name.split("/"):
        errs.extend(validate_dns1123_subdomain(part, path))
    return errs


def _validate_device_class_name(name: str, path: str) -> list[FieldError]:
    if not name:
        return [required(path)]
    return validate_dns1123_subdomain(name, path)


def _validate_selectors(selectors: Sequence[resource_pb2.DeviceSelector], path: str) -> list[FieldError]:
    def one(selector: resource_pb2.DeviceSelector, p: str) -> list[FieldError]:
        if not selector.HasField("cel"):
            return [required(f"{p}.cel")]
        expr = selector.cel.expression
        if len(expr) > CEL_EXPRESSION_MAX_LENGTH:
            return [too_long(f"{p}.cel.expression", CEL_EXPRESSION_MAX_LENGTH)]
        if not expr.strip():
            return [required(f"{p}.cel.expression", "expression must not be empty")]
        return []

    errs: list[FieldError] = []
    for i, selector in enumerate(selectors):
        errs.extend(one(selector, f"{path}[{i}]"))
    if len(selectors) > DEVICE_SELECTORS_MAX_SIZE:
        errs.append(too_many(path, len(selectors), DEVICE_SELECTORS_MAX_SIZE))
    return errs


def _validate_allocation_mode(mode: str, count: int, path: str) -> list[FieldError]:
    if mode == "All":
        if count != 0:
            return [invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")]
    elif mode == "ExactCount":
        if count <= 0:
            return [invalid(f"{path}.count", count, "must be greater than zero")]
    else:
        return [not_supported(f"{path}.allocationMode", mode, _ALLOCATION_MODES)]
    return []


def _validate_device_request(request: resource_pb2.DeviceRequest, path: str) -> list[FieldError]:
    errs = validate_dns1123_label(request.name, f"{path}.name")
    has_first, has_exactly = len(request.first_available) > 0, request.HasField("exactly")
    if not has_first and not has_exactly:
        errs.append(required(path, "exactly one of `exactly` or `firstAvailable` is required"))
    elif has_first and has_exactly:
        errs.append(invalid(path, None, "exactly one of `exactly` or `firstAvailable` is required, "
                                        "but multiple fields are set"))
    elif has_first:
        def sub(subrequest: resource_pb2.DeviceSubRequest, p: str) -> list[FieldError]:
            out = validate_dns1123_label(subrequest.name, f"{p}.name")
            out.extend(_validate_device_class_name(subrequest.device_class_name, f"{p}.deviceClassName"))
            out.extend(_validate_selectors(subrequest.selectors, f"{p}.selectors"))
            out.extend(_validate_allocation_mode(subrequest.allocation_mode, subrequest.count, p))
            return out

        errs.extend(_validate_set(request.first_available, FIRST_AVAILABLE_MAX_SIZE, sub, lambda s: s.name,
                                  f"{path}.firstAvailable"))
    else:
        exactly = request.exactly
        p = f"{path}.exactly"
        errs.extend(_validate_device_class_name(exactly.device_class_name, f"{p}.deviceClassName"))
        errs.extend(_validate_selectors(exactly.selectors, f"{p}.selectors"))
        errs.extend(_validate_allocation_mode(exactly.allocation_mode, exactly.count, p))
    return errs


def _validate_claim_spec(spec: resource_pb2.ResourceClaimSpec, path: str) -> list[FieldError]:
    return _validate_set(spec.devices.requests, DEVICE_REQUESTS_MAX_SIZE, _validate_device_request,
                         lambda r: r.name, f"{path}.devices.requests")


def _request_names(spec: resource_pb2.ResourceClaimSpec) -> dict[str, set[str]]:
    return {r.name: {s.name for s in r.first_available} for r in spec.devices.requests}


def _validate_request_ref(name: str, path: str, names: dict[str, set[str]]) -> list[FieldError]:
    segments = name.split("/")
    if len(segments) > 2:
        return [invalid(path, name, _REQUEST_REF_ERR)]
    errs: list[FieldError] = []
    for segment in segments:
        errs.extend(validate_dns1123_label(segment, path))
    known = segments[0] in names and (len(segments) == 1 or segments[1] in names[segments[0]])
    if not known:
        errs.append(invalid(path, name, _REQUEST_REF_ERR))
    return errs


# ---------------------------------------------------------------- ResourceClaim


def validate_resource_claim(claim: resource_pb2.ResourceClaim) -> list[FieldError]:
    errs = validate_object_meta(claim.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_claim_spec(claim.spec, "spec"))
    return errs


def validate_resource_claim_update(new: resource_pb2.ResourceClaim,
                                   old: resource_pb2.ResourceClaim) -> list[FieldError]:
    """The spec of a claim is immutable."""
    errs = validate_object_meta(new.metadata, True, name_is_dns_subdomain)
    errs.extend(validate_object_meta_update(new.metadata, old.metadata))
    if new.spec != old.spec:
        errs.append(invalid("spec", GoValue(go_repr(new.spec)), FIELD_IMMUTABLE))
    return errs


def validate_resource_claim_status_update(new: resource_pb2.ResourceClaim,
                                          old: resource_pb2.ResourceClaim) -> list[FieldError]:
    errs = validate_object_meta_update(new.metadata, old.metadata)
    status, old_status = new.status, old.status
    path = "status"

    def consumer(ref: resource_pb2.ResourceClaimConsumerReference, p: str) -> list[FieldError]:
        return [required(f"{p}.{f}") for f in ("resource", "name", "uid") if not getattr(ref, f)]

    errs.extend(_validate_set(status.reserved_for, RESERVED_FOR_MAX_SIZE, consumer, lambda r: r.uid,
                              f"{path}.reservedFor"))
    if status.reserved_for:
        if not status.HasField("allocation"):
            errs.append(forbidden(f"{path}.reservedFor", "may not be specified when `allocated` is not set"))
        elif new.metadata.deletion_timestamp:
            old_uids = {r.uid for r in old_status.reserved_for}
            if any(r.uid not in old_uids for r in status.reserved_for):
                errs.append(forbidden(f"{path}.reservedFor", "new entries may not be added while "
                                                             "`deallocationRequested` or `deletionTimestamp` are set"))
    if old_status.HasField("allocation") and status.HasField("allocation"):
        if status.allocation != old_status.allocation:
            errs.append(invalid(f"{path}.allocation", GoValue(go_repr(status.allocation)), FIELD_IMMUTABLE))
    elif status.HasField("allocation"):
        names = _request_names(new.spec)
        ap = f"{path}.allocation"

        def result(r: resource_pb2.DeviceRequestAllocationResult, p: str) -> list[FieldError]:
            out = _validate_request_ref(r.request, f"{p}.request", names)
            out.extend(_validate_driver_name(r.driver, f"{p}.driver"))
            out.extend(_validate_pool_name(r.pool, f"{p}.pool"))
            out.extend(validate_dns1123_label(r.device, f"{p}.device"))
            return out

        results = status.allocation.devices.results
        for i, r in enumerate(results):
            errs.extend(result(r, f"{ap}.devices.results[{i}]"))
        if len(results) > ALLOCATION_RESULTS_MAX_SIZE:
            errs.append(too_many(f"{ap}.devices.results", len(results), ALLOCATION_RESULTS_MAX_SIZE))
        if status.allocation.HasField("node_selector"):
            errs.extend(placement.validate_node_selector(status.allocation.node_selector, False, f"{ap}.nodeSelector"))
    return errs


# ---------------------------------------------------------------- ResourceClaimTemplate


_TEMPLATE_META_ALLOWED: Final = frozenset({"labels", "annotations"})


def _validate_template_object_meta(meta: meta_pb2.ObjectMeta, path: str) -> list[FieldError]:
    """Only labels and annotations may be set in a template's metadata."""
    errs = validate_annotations(meta.annotations, f"{path}.annotations")
    errs.extend(validate_labels(meta.labels, f"{path}.labels"))
    for fd, _ in meta.ListFields():
        if fd.name not in _TEMPLATE_META_ALLOWED:
            go_name = "".join("UID" if p == "uid" else p[:1].upper() + p[1:] for p in fd.name.split("_"))
            errs.append(forbidden(f"{path}.{go_name[:1].lower()}{go_name[1:]}", "cannot be set"))
    return errs


def validate_resource_claim_template(template: resource_pb2.ResourceClaimTemplate) -> list[FieldError]:
    errs = validate_object_meta(template.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_template_object_meta(template.spec.metadata, "spec.metadata"))
    errs.extend(_validate_claim_spec(template.spec.spec, "spec.spec"))
    return errs


def validate_resource_claim_template_update(new: resource_pb2.ResourceClaimTemplate,
                                            old: resource_pb2.ResourceClaimTemplate) -> list[FieldError]:
    errs = validate_object_meta_update(new.metadata, old.metadata)
    if new.spec != old.spec:
        errs.append(invalid("spec", GoValue(go_repr(new.spec)), FIELD_IMMUTABLE))
    return errs


# ---------------------------------------------------------------- ResourceSlice


def _validate_device(device: resource_pb2.Device, path: str) -> list[FieldError]:
    errs = validate_dns1123_label(device.name, f"{path}.name")
    for key in sorted(device.attributes):
        attr = device.attributes[key]
        p = f"{path}.attributes[{key}]"
        set_fields = [fd.name for fd, _ in attr.ListFields()]
        if attr.HasField("string_value") and len(attr.string_value) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
            errs.append(too_long(f"{p}.string", DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
        if attr.HasField("version_value"):
            if not _SEMVER_RE.fullmatch(attr.version_value):
                errs.append(invalid(f"{p}.version", attr.version_value,
                                    "must be a string compatible with semver.org spec 2.0.0"))
            if len(attr.version_value) > DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH:
                errs.append(too_long(f"{p}.version", DEVICE_ATTRIBUTE_MAX_VALUE_LENGTH))
        if not set_fields:
            errs.append(invalid(p, "", "exactly one value must be specified"))
        elif len(set_fields) > 1:
            errs.append(invalid(p, GoValue(go_repr(attr)), "exactly one value must be specified"))
    for key in sorted(device.capacity):
        p = f"{path}.capacity[{key}]"
        parse_q(device.capacity[key].value, f"{p}.value", errs)
    return errs


def _validate_slice_spec(spec: resource_pb2.ResourceSliceSpec, old: resource_pb2.ResourceSliceSpec | None,
                         path: str) -> list[FieldError]:
    errs = _validate_driver_name(spec.driver, f"{path}.driver")
    pool = spec.pool
    errs.extend(_validate_pool_name(pool.name, f"{path}.pool.name"))
    if pool.resource_slice_count <= 0:
        errs.append(invalid(f"{path}.pool.resourceSliceCount", pool.resource_slice_count, "must be greater than zero"))
    if pool.generation < 0:
        errs.append(invalid(f"{path}.pool.generation", pool.generation, "must be greater than or equal to zero"))
    if old is not None:
        if spec.pool.name != old.pool.name:
            errs.append(invalid(f"{path}.pool.name", spec.pool.name, FIELD_IMMUTABLE))
        if spec.driver != old.driver:
            errs.append(invalid(f"{path}.driver", spec.driver, FIELD_IMMUTABLE))
        new_node = spec.node_name if spec.HasField("node_name") else None
        old_node = old.node_name if old.HasField("node_name") else None
        if new_node != old_node:
            errs.append(invalid(f"{path}.nodeName", new_node, FIELD_IMMUTABLE))
    set_fields: list[str] = []
    if spec.HasField("node_name"):
        if spec.node_name:
            set_fields.append("`nodeName`")
            errs.extend(invalid(f"{path}.nodeName", spec.node_name, m) for m in is_dns1123_subdomain(spec.node_name))
        else:
            errs.append(invalid(f"{path}.nodeName", "", "must be either unset or set to a non-empty string"))
    if spec.HasField("node_selector"):
        set_fields.append("`nodeSelector`")
        errs.extend(placement.validate_node_selector(spec.node_selector, False, f"{path}.nodeSelector"))
        if len(spec.node_selector.node_selector_terms) != 1:
            errs.append(invalid(f"{path}.nodeSelector.nodeSelectorTerms",
                                GoValue(go_list(spec.node_selector.node_selector_terms,
                                                core_pb2.NodeSelectorTerm.DESCRIPTOR)),
                                "must have exactly one node selector term"))
    if spec.HasField("all_nodes"):
        if spec.all_nodes:
            set_fields.append("`allNodes`")
        else:
            errs.append(invalid(f"{path}.allNodes", False, "must be either unset or set to true"))
    exactly_one = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not set_fields:
        errs.append(required(path, exactly_one))
    elif len(set_fields) > 1:
        errs.append(invalid(path, f"{{{', '.join(set_fields)}}}", f"{exactly_one}, but multiple fields are set"))
    errs.extend(_validate_set(spec.devices, RESOURCE_SLICE_MAX_DEVICES, _validate_device, lambda d: d.name,
                              f"{path}.devices"))
    return errs


def validate_resource_slice(slice_: resource_pb2.ResourceSlice) -> list[FieldError]:
    errs = validate_object_meta(slice_.metadata, False, name_is_dns_subdomain)
    errs.extend(_validate_slice_spec(slice_.spec, None, "spec"))
    return errs


def validate_resource_slice_update(new: resource_pb2.ResourceSlice,
                                   old: resource_pb2.ResourceSlice) -> list[FieldError]:
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_slice_spec(new.spec, old.spec, "spec"))
    return errs


# ---------------------------------------------------------------- DeviceClass


def _validate_device_class_spec(spec: resource_pb2.DeviceClassSpec, path: str) -> list[FieldError]:
    errs = _validate_selectors(spec.selectors, f"{path}.selectors")
    if spec.HasField("extended_resource_name") and not quantities.is_extended_resource(spec.extended_resource_name):
        errs.append(invalid(f"{path}.extendedResourceName", spec.extended_resource_name,
                            "must be a valid extended resource name"))
    return errs


def validate_device_class(device_class: resource_pb2.DeviceClass) -> list[FieldError]:
    errs = validate_object_meta(device_class.metadata, False, name_is_dns_subdomain)
    errs.extend(_validate_device_class_spec(device_class.spec, "spec"))
    return errs


def validate_device_class_update(new: resource_pb2.DeviceClass, old: resource_pb2.DeviceClass) -> list[FieldError]:
    errs = validate_object_meta(new.metadata, False, name_is_dns_subdomain)
    errs.extend(validate_object_meta_update(new.metadata, old.metadata))
    errs.extend(_validate_device_class_spec(new.spec, "spec"))
    return errs

