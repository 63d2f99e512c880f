"""Leases (coordination.k8s.io/v1): Kubernetes' ValidateLease and ValidateLeaseUpdate."""

from __future__ import annotations

from typing import Final

from apiserver.validation._common import is_qualified_name
from apiserver.validation.meta import name_is_dns_subdomain, validate_object_meta, validate_object_meta_update
from machinery.api import coordination_pb2
from machinery.errors import FieldError, forbidden, invalid, not_supported

_LEASE_STRATEGIES: Final = ("OldestEmulationVersion",)


def _validate_strategy(strategy: str, path: str) -> list[FieldError]:
    # Kubernetes reports these one level deeper than the field ("spec.strategy.strategy").
    if "/" not in strategy:
        if strategy not in _LEASE_STRATEGIES:
            return [not_supported(f"{path}.strategy", strategy, _LEASE_STRATEGIES)]
        return []
    return [invalid(f"{path}.strategy", strategy, m) for m in is_qualified_name(strategy)]


def _validate_spec(spec: coordination_pb2.LeaseSpec, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if spec.HasField("lease_duration_seconds") and spec.lease_duration_seconds <= 0:
        errs.append(invalid(f"{path}.leaseDurationSeconds", spec.lease_duration_seconds, "must be greater than 0"))
    if spec.HasField("lease_transitions") and spec.lease_transitions < 0:
        errs.append(invalid(f"{path}.leaseTransitions", spec.lease_transitions, "must be greater than or equal to 0"))
    if spec.HasField("strategy"):
        errs.extend(_validate_strategy(spec.strategy, f"{path}.strategy"))
    if spec.preferred_holder and not spec.strategy:
        errs.append(forbidden(f"{path}.preferredHolder", "may only be specified if `strategy` is defined"))
    return errs


def validate_lease(lease: coordination_pb2.Lease) -> list[FieldError]:
    errs = validate_object_meta(lease.metadata, True, name_is_dns_subdomain, kube_finalizers=False)
    errs.extend(_validate_spec(lease.spec, "spec"))
    return errs


def validate_lease_update(new: coordination_pb2.Lease, old: coordination_pb2.Lease) -> list[FieldError]:
    errs = validate_object_meta_update(new.metadata, old.metadata, kube_finalizers=False)
    errs.extend(_validate_spec(new.spec, "spec"))
    return errs
