"""Nodes: Kubernetes' ValidateNode and ValidateNodeUpdate (also used for the status subresource),
plus KEP-5836's ``spec.podPreemptionPolicy.disableResizePreemption``.

Kubernetes reports taint errors under ``metadata.taints`` and capacity errors under
``status.capacity.<name>`` (not ``[<name>]``); kplane keeps those paths.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from apiserver.validation import placement, quantities
from apiserver.validation._common import GoValue, go_repr, go_strings, ip_family, is_qualified_name, is_valid_cidr
from apiserver.validation.meta import name_is_dns_subdomain, validate_object_meta, validate_object_meta_update
from machinery.api import core_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, too_many

MAX_DISABLE_RESIZE_PREEMPTION: Final = 20
_PREEMPTION_PATH: Final = "spec.podPreemptionPolicy.disableResizePreemption"


def _validate_resources(node: core_pb2.Node) -> list[FieldError]:
    errs = quantities.validate_resource_list(node.status.capacity, "status.capacity", keyed=False)
    errs.extend(quantities.validate_resource_list(node.status.allocatable, "status.allocatable", keyed=False))
    return errs


def _validate_pod_preemption_policy(node: core_pb2.Node) -> list[FieldError]:
    """KEP-5836: owners are label keys, at most 20, each once (a set)."""
    if not node.spec.HasField("pod_preemption_policy"):
        return []
    owners = node.spec.pod_preemption_policy.disable_resize_preemption
    errs: list[FieldError] = []
    if len(owners) > MAX_DISABLE_RESIZE_PREEMPTION:
        errs.append(too_many(_PREEMPTION_PATH, len(owners), MAX_DISABLE_RESIZE_PREEMPTION))
    seen: set[str] = set()
    for i, owner in enumerate(owners):
        p = f"{_PREEMPTION_PATH}[{i}]"
        errs.extend(invalid(p, owner, m) for m in is_qualified_name(owner))
        if owner in seen:
            errs.append(duplicate(p, owner))
        seen.add(owner)
    return errs


def _validate_pod_cidrs(cidrs: Sequence[str]) -> list[FieldError]:
    path = "spec.podCIDRs"
    errs: list[FieldError] = []
    for i, value in enumerate(cidrs):
        if not is_valid_cidr(value):
            errs.append(invalid(f"{path}[{i}]", value,
                                "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"))
    if len(cidrs) > 1 and not errs:
        families = {ip_family(c.split("/")[0]) for c in cidrs}
        if len(cidrs) > 2 or len(families) != 2:
            errs.append(invalid(path, GoValue(go_strings(cidrs)),
                                "may specify no more than one CIDR for each IP family"))
        seen: set[str] = set()
        for i, value in enumerate(cidrs):
            if value in seen:
                errs.append(duplicate(f"{path}[{i}]", value))
            seen.add(value)
    return errs


def validate_node(node: core_pb2.Node) -> list[FieldError]:
    errs = validate_object_meta(node.metadata, False, name_is_dns_subdomain)
    if node.spec.taints:
        errs.extend(placement.validate_taints(node.spec.taints, "metadata.taints"))
    errs.extend(_validate_resources(node))
    if node.spec.pod_cidrs:
        errs.extend(_validate_pod_cidrs(node.spec.pod_cidrs))
    errs.extend(_validate_pod_preemption_policy(node))
    return errs


def validate_node_update(new: core_pb2.Node, old: core_pb2.Node) -> list[FieldError]:
    """Kubernetes' ValidateNodeUpdate: podCIDRs and providerID may only be set once; taints,
    resources and addresses must be valid."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_validate_resources(new))
    seen: set[tuple[str, str]] = set()
    for i, addr in enumerate(new.status.addresses):
        key = (addr.type, addr.address)
        if key in seen:
            errs.append(duplicate(f"status.addresses[{i}]", GoValue(go_repr(addr))))
        seen.add(key)
    if old.spec.pod_cidrs:
        msg = 'node updates may not change podCIDR except from "" to valid'
        if len(old.spec.pod_cidrs) != len(new.spec.pod_cidrs):
            errs.append(forbidden("spec.podCIDRs", msg))
        else:
            errs.extend(forbidden("spec.podCIDRs", msg)
                        for o, n in zip(old.spec.pod_cidrs, new.spec.pod_cidrs, strict=True) if o != n)
    if old.spec.provider_id and old.spec.provider_id != new.spec.provider_id:
        errs.append(forbidden("spec.providerID", 'node updates may not change providerID except from "" to valid'))
    if new.spec.taints:
        errs.extend(placement.validate_taints(new.spec.taints, "metadata.taints"))
    errs.extend(_validate_pod_preemption_policy(new))
    return errs


def validate_node_status_update(new: core_pb2.Node, old: core_pb2.Node) -> list[FieldError]:
    """Kubernetes validates a node status update exactly as an update."""
    return validate_node_update(new, old)
