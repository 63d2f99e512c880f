"""Pods and their ResourceClaims (Kubernetes' k8s.io/dynamic-resource-allocation/resourceclaim).

A pod's ``spec.resourceClaims[i]`` names a claim directly (``resourceClaimName``: every pod naming
it shares it) or a ResourceClaimTemplate (``resourceClaimTemplateName``: the resourceclaim
controller makes one claim per pod from it and records its generated name in
``status.resourceClaimStatuses``). ``claim_name`` resolves either; a generated claim must be
controlled by its pod (``is_for_pod``), which the caller checks when told to.

Kubernetes docs: Dynamic Resource Allocation, "API": "When referencing a ResourceClaim, all Pods
using this PodSpec ... share the same ResourceClaim instance. When referencing a
ResourceClaimTemplate, each Pod gets its own instance."
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from machinery.api import core_pb2, resource_pb2

# The annotation a generated claim carries: the pod.spec.resourceClaims[].name it was made for.
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
# The finalizer the scheduler puts on a claim it allocates; the resourceclaim controller takes it
# off once the claim is deallocated, so an allocated claim is never removed under its pods.
FINALIZER: Final = "resource.kubernetes.io/delete-protection"
# status.reservedFor holds at most this many consumers (resourceapi.ResourceClaimReservedForMaxSize).
RESERVED_FOR_MAX_SIZE: Final = 256
# The longest generateName base that leaves room for the 5 random characters in 63.
_MAX_GENERATE_NAME_BASE: Final = 57


class ClaimNameError(Exception):
    """A pod's claim cannot be resolved to a ResourceClaim name (yet)."""


class ClaimNotCreated(ClaimNameError):
    """The claim comes from a template and the resourceclaim controller has not recorded it yet."""


@dataclass(frozen=True)
class ResolvedClaim:
    """A pod claim resolved: the ResourceClaim's name and whether it must be the pod's own."""

    name: str
    must_check_owner: bool


def claim_name(pod: core_pb2.Pod, pod_claim: core_pb2.PodResourceClaim) -> ResolvedClaim | None:
    """The ResourceClaim ``pod_claim`` names (Kubernetes' resourceclaim.Name); None when the
    controller decided no claim is needed (a status entry without a claim name).

    Raises ClaimNotCreated for a template claim not yet in ``status.resourceClaimStatuses``,
    ClaimNameError for an entry that names neither a claim nor a template."""
    if pod_claim.HasField("resource_claim_name"):
        return ResolvedClaim(pod_claim.resource_claim_name, False)
    if pod_claim.HasField("resource_claim_template_name"):
        for status in pod.status.resource_claim_statuses:
            if status.name == pod_claim.name:
                if not status.HasField("resource_claim_name"):
                    return None
                return ResolvedClaim(status.resource_claim_name, True)
        raise ClaimNotCreated(f'pod "{pod.metadata.namespace}/{pod.metadata.name}": ResourceClaim not created yet')
    raise ClaimNameError(f'pod "{pod.metadata.namespace}/{pod.metadata.name}", spec.resourceClaim '
                         f'"{pod_claim.name}": none of the supported fields are set')


def claim_keys(pod: core_pb2.Pod) -> list[str]:
    """``namespace/name`` of every claim the pod's ``spec.resourceClaims`` resolve to (the names
    given directly and the generated names in ``status.resourceClaimStatuses``); unresolved ones
    are left out. Kubernetes' podResourceClaimIndexFunc: the claim -> pods index by spec, so a
    claim several pods name — a generated one too — maps to all of them."""
    keys: list[str] = []
    for pod_claim in pod.spec.resource_claims:
        try:
            resolved = claim_name(pod, pod_claim)
        except ClaimNameError:
            continue
        if resolved is not None:
            keys.append(f"{pod.metadata.namespace}/{resolved.name}")
    return keys


def controller_of(claim: resource_pb2.ResourceClaim) -> tuple[str, str] | None:
    """The (name, uid) of the pod that controls the claim (v1 Pod, controller=true), if any."""
    for ref in claim.metadata.owner_references:
        if ref.controller and ref.api_version == "v1" and ref.kind == "Pod":
            return ref.name, ref.uid
    return None


def is_for_pod(pod: core_pb2.Pod, claim: resource_pb2.ResourceClaim) -> str | None:
    """Why the claim is not the pod's own (None when it is): Kubernetes' IsForPod."""
    owner = controller_of(claim)
    if claim.metadata.namespace != pod.metadata.namespace or owner is None or owner[1] != pod.metadata.uid:
        return (f"ResourceClaim {claim.metadata.namespace}/{claim.metadata.name} was not created for pod "
                f"{pod.metadata.namespace}/{pod.metadata.name} (pod is not owner)")
    return None


def is_reserved_for_pod(pod: core_pb2.Pod, claim: resource_pb2.ResourceClaim) -> bool:
    return any(r.uid == pod.metadata.uid for r in claim.status.reserved_for)


def can_be_reserved(claim: resource_pb2.ResourceClaim) -> bool:
    """Whether one more consumer fits in ``status.reservedFor``."""
    return len(claim.status.reserved_for) < RESERVED_FOR_MAX_SIZE


def is_pod_done(pod: core_pb2.Pod) -> bool:
    """None of the pod's containers runs or ever will: it ended, or was deleted before being scheduled."""
    return pod.status.phase in ("Succeeded", "Failed") or (
        bool(pod.metadata.deletion_timestamp) and not pod.spec.node_name)


def generate_name(pod_name: str, pod_claim_name: str) -> str:
    """``<pod>-<claim>-``, both cut in proportion to their lengths when longer than 57 characters
    (the apiserver would cut the claim's name off the end)."""
    base = f"{pod_name}-{pod_claim_name}-"
    if len(base) <= _MAX_GENERATE_NAME_BASE:
        return base
    total = len(base)
    return (pod_name[:len(pod_name) * _MAX_GENERATE_NAME_BASE // total] + "-"
            + pod_claim_name[:len(pod_claim_name) * _MAX_GENERATE_NAME_BASE // total])
