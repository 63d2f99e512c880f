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

Each kind's strategy (``apiserver.strategy``) names the functions that validate it.
"""

from __future__ import annotations

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

__all__ = [
    "is_pod_resize_request_supported",
    "name_is_dns_label",
    "name_is_dns_subdomain",
    "name_is_path_segment",
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
]
