"""Kubernetes' API validation for the kinds kplane serves, with Kubernetes' field paths and
messages.

Every function returns a list of ``machinery.errors.FieldError`` (empty = valid); callers raise
``errors.Invalid.of(kind, name, errs)``. One module per concern:

- ``meta``: object metadata (names, labels, annotations, finalizers; update immutability);
- ``pod``: pod create, update and status update; ``resize``: the KEP-1287 resize subresource;
- ``placement``: tolerations, taints, node selectors and affinity, topology spread, gates;
- ``quantities``: resource names and quantities (requests, limits, overhead, capacity);
- ``node``, ``scheduling`` (PriorityClass), ``policy`` (PodDisruptionBudget), ``coordination``
  (Lease), ``events``, ``resource`` (DRA);
- ``apps`` (ReplicaSet, Deployment and their Scale), ``namespace``, ``quota`` (ResourceQuota,
  LimitRange).

``validate_create``/``validate_update``/``validate_status_update`` dispatch on the kind name
(anything ``machinery.kinds.lookup`` accepts).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from apiserver.validation.apps import (
    validate_deployment,
    validate_deployment_status_update,
    validate_deployment_update,
    validate_replica_set,
    validate_replica_set_status_update,
    validate_replica_set_update,
    validate_scale,
)
from apiserver.validation.coordination import validate_lease, validate_lease_update
from apiserver.validation.events import validate_event, validate_event_update
from apiserver.validation.meta import (
    name_is_dns_label,
    name_is_dns_subdomain,
    name_is_path_segment,
    validate_object_meta,
    validate_object_meta_update,
)
from apiserver.validation.namespace import (
    validate_namespace,
    validate_namespace_finalize_update,
    validate_namespace_status_update,
    validate_namespace_update,
)
from apiserver.validation.node import validate_node, validate_node_status_update, validate_node_update
from apiserver.validation.pod import (
    validate_pod_create,
    validate_pod_spec,
    validate_pod_status_update,
    validate_pod_update,
)
from apiserver.validation.policy import validate_pdb, validate_pdb_status_update, validate_pdb_update
from apiserver.validation.quota import (
    validate_limit_range,
    validate_limit_range_update,
    validate_resource_quota,
    validate_resource_quota_status_update,
    validate_resource_quota_update,
)
from apiserver.validation.resize import is_pod_resize_request_supported, validate_pod_resize
from apiserver.validation.resource import (
    validate_device_class,
    validate_device_class_update,
    validate_resource_claim,
    validate_resource_claim_status_update,
    validate_resource_claim_template,
    validate_resource_claim_template_update,
    validate_resource_claim_update,
    validate_resource_slice,
    validate_resource_slice_update,
)
from apiserver.validation.scheduling import validate_priority_class, validate_priority_class_update
from machinery import kinds
from machinery.errors import FieldError

__all__ = [
    "is_pod_resize_request_supported",
    "name_is_dns_label",
    "name_is_dns_subdomain",
    "name_is_path_segment",
    "validate_create",
    "validate_deployment",
    "validate_deployment_status_update",
    "validate_deployment_update",
    "validate_device_class",
    "validate_device_class_update",
    "validate_event",
    "validate_event_update",
    "validate_lease",
    "validate_lease_update",
    "validate_limit_range",
    "validate_limit_range_update",
    "validate_namespace",
    "validate_namespace_finalize_update",
    "validate_namespace_status_update",
    "validate_namespace_update",
    "validate_node",
    "validate_node_status_update",
    "validate_node_update",
    "validate_object_meta",
    "validate_object_meta_update",
    "validate_pdb",
    "validate_pdb_status_update",
    "validate_pdb_update",
    "validate_pod_create",
    "validate_pod_resize",
    "validate_pod_spec",
    "validate_pod_status_update",
    "validate_pod_update",
    "validate_priority_class",
    "validate_priority_class_update",
    "validate_replica_set",
    "validate_replica_set_status_update",
    "validate_replica_set_update",
    "validate_resource_claim",
    "validate_resource_claim_status_update",
    "validate_resource_claim_template",
    "validate_resource_claim_template_update",
    "validate_resource_claim_update",
    "validate_resource_quota",
    "validate_resource_quota_status_update",
    "validate_resource_quota_update",
    "validate_resource_slice",
    "validate_resource_slice_update",
    "validate_scale",
    "validate_status_update",
    "validate_update",
]

_Create = Callable[[Any], list[FieldError]]
_Update = Callable[[Any, Any], list[FieldError]]

_CREATE: dict[str, _Create] = {
    "Pod": validate_pod_create,
    "Node": validate_node,
    "Event": validate_event,
    "PriorityClass": validate_priority_class,
    "PodDisruptionBudget": validate_pdb,
    "Lease": validate_lease,
    "ResourceClaim": validate_resource_claim,
    "ResourceClaimTemplate": validate_resource_claim_template,
    "ResourceSlice": validate_resource_slice,
    "DeviceClass": validate_device_class,
    "Namespace": validate_namespace,
    "ResourceQuota": validate_resource_quota,
    "LimitRange": validate_limit_range,
    "ReplicaSet": validate_replica_set,
    "Deployment": validate_deployment,
}
_UPDATE: dict[str, _Update] = {
    "Pod": validate_pod_update,
    "Node": validate_node_update,
    "Event": validate_event_update,
    "PriorityClass": validate_priority_class_update,
    "PodDisruptionBudget": validate_pdb_update,
    "Lease": validate_lease_update,
    "ResourceClaim": validate_resource_claim_update,
    "ResourceClaimTemplate": validate_resource_claim_template_update,
    "ResourceSlice": validate_resource_slice_update,
    "DeviceClass": validate_device_class_update,
    "Namespace": validate_namespace_update,
    "ResourceQuota": validate_resource_quota_update,
    "LimitRange": validate_limit_range_update,
    "ReplicaSet": validate_replica_set_update,
    "Deployment": validate_deployment_update,
}
_STATUS_UPDATE: dict[str, _Update] = {
    "Pod": validate_pod_status_update,
    "Node": validate_node_status_update,
    "PodDisruptionBudget": validate_pdb_status_update,
    "ResourceClaim": validate_resource_claim_status_update,
    "Namespace": validate_namespace_status_update,
    "ResourceQuota": validate_resource_quota_status_update,
    "ReplicaSet": validate_replica_set_status_update,
    "Deployment": validate_deployment_status_update,
}


def _kind(kind_name: str) -> str:
    return kinds.lookup(kind_name).name


# By canonical kind name, for which kinds.lookup is the identity (no lookup on the hot path).
_CREATE_BY_NAME: dict[str, _Create] = {n: fn for n, fn in _CREATE.items() if _kind(n) == n}
_UPDATE_BY_NAME: dict[str, _Update] = {n: fn for n, fn in _UPDATE.items() if _kind(n) == n}
_STATUS_UPDATE_BY_NAME: dict[str, _Update] = {n: fn for n, fn in _STATUS_UPDATE.items() if _kind(n) == n}


def validate_create(kind_name: str, obj: Message) -> list[FieldError]:
    """The kind's create validation (after defaulting)."""
    fn = _CREATE_BY_NAME.get(kind_name) if type(kind_name) is str else None
    if fn is None:
        fn = _CREATE[_kind(kind_name)]
    return fn(obj)


def validate_update(kind_name: str, new: Message, old: Message) -> list[FieldError]:
    """The kind's update validation of the main resource."""
    fn = _UPDATE_BY_NAME.get(kind_name) if type(kind_name) is str else None
    if fn is None:
        fn = _UPDATE[_kind(kind_name)]
    return fn(new, old)


def validate_status_update(kind_name: str, new: Message, old: Message) -> list[FieldError]:
    """The kind's status-subresource validation; ValueError for kinds without status."""
    fn = _STATUS_UPDATE_BY_NAME.get(kind_name) if type(kind_name) is str else None
    if fn is None:
        name = _kind(kind_name)
        fn = _STATUS_UPDATE.get(name)
        if fn is None:
            raise ValueError(f"{name} has no status subresource")
    return fn(new, old)
