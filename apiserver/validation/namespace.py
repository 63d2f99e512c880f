"""Namespaces (core/v1): Kubernetes' ValidateNamespace, ValidateNamespaceUpdate,
ValidateNamespaceStatusUpdate and ValidateNamespaceFinalizeUpdate, with their field paths
(``status.Phase`` is spelled so by Kubernetes)."""

from __future__ import annotations

from apiserver.validation._common import is_qualified_name
from apiserver.validation.meta import (
    STANDARD_FINALIZERS,
    name_is_dns_label,
    validate_object_meta,
    validate_object_meta_update,
)
from machinery.api import core_pb2
from machinery.errors import FieldError, invalid


def _validate_finalizer_name(name: str, path: str) -> list[FieldError]:
    """validateFinalizerName: a qualified name; unqualified ones must be standard."""
    errs = [invalid(path, name, m) for m in is_qualified_name(name)]
    if "/" not in name and name not in STANDARD_FINALIZERS:
        errs.append(invalid(path, name, "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


def validate_namespace(ns: core_pb2.Namespace) -> list[FieldError]:
    """ValidateNamespace: a DNS-label name, cluster-scoped; spec.finalizers' names (at
    ``spec.finalizers``, unindexed, as Kubernetes reports them on create)."""
    errs = validate_object_meta(ns.metadata, False, name_is_dns_label)
    for f in ns.spec.finalizers:
        errs.extend(_validate_finalizer_name(f, "spec.finalizers"))
    return errs


def validate_namespace_update(new: core_pb2.Namespace, old: core_pb2.Namespace) -> list[FieldError]:
    """ValidateNamespaceUpdate: metadata only (spec.finalizers and status are kept from the
    stored namespace by the strategy)."""
    return validate_object_meta_update(new.metadata, old.metadata)


def validate_namespace_status_update(new: core_pb2.Namespace, old: core_pb2.Namespace) -> list[FieldError]:
    """ValidateNamespaceStatusUpdate: the phase follows deletionTimestamp."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    phase = new.status.phase
    if not new.metadata.deletion_timestamp:
        if phase != "Active":
            errs.append(invalid("status.Phase", phase, "may only be 'Active' if `deletionTimestamp` is empty"))
    elif phase != "Terminating":
        errs.append(invalid("status.Phase", phase, "may only be 'Terminating' if `deletionTimestamp` is not empty"))
    return errs


def validate_namespace_finalize_update(new: core_pb2.Namespace, old: core_pb2.Namespace) -> list[FieldError]:
    """ValidateNamespaceFinalizeUpdate: the finalize subresource's spec.finalizers."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    for i, f in enumerate(new.spec.finalizers):
        errs.extend(_validate_finalizer_name(f, f"spec.finalizers[{i}]"))
    return errs
