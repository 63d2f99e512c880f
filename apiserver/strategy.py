"""Per-kind rules for create, update and status update (Kubernetes' REST strategies).

- create: system metadata (uid, creationTimestamp, generation 1), the kind's status reset (a pod
  starts Pending with its QoS class, a namespace Active with the "kubernetes" finalizer),
  defaulting, validation;
- update: status is kept (only the status subresource changes it), system metadata is kept,
  generation increments when the spec changes (for a Deployment, its annotations too: they are
  copied to its ReplicaSets), update validation; a namespace's spec.finalizers are kept (only the
  finalize subresource changes them);
- status update: only status changes are kept (spec and metadata come from the stored object), but
  a Deployment's annotations come from the request (Kubernetes' deploymentStatusStrategy: the
  deployment controller writes its revision annotation with the status);
- finalize (namespaces): the status is kept, so what changes is spec.finalizers.
"""

from __future__ import annotations

import uuid
from typing import Protocol, cast

from google.protobuf.message import Message

from apiserver import defaults, validation
from machinery import errors, resources, timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.kinds import (
    DEPLOYMENT,
    NAMESPACE,
    POD_DISRUPTION_BUDGET,
    REPLICA_SET,
    RESOURCE_CLAIM,
    RESOURCE_QUOTA,
    Kind,
    L,
    M,
    accessor,
    object_meta,
    spec_of,
)

# The namespace controller's finalizer, which every namespace gets on create: its content is
# deleted before the namespace goes.
FINALIZER_KUBERNETES = "kubernetes"
_RESET_STATUS_ON_CREATE = (POD_DISRUPTION_BUDGET, RESOURCE_CLAIM, RESOURCE_QUOTA, REPLICA_SET, DEPLOYMENT)


class _WithStatus(Protocol):
    """A kind whose message has a ``status`` (``Kind.has_status``)."""

    @property
    def status(self) -> Message: ...


def copy(obj: M) -> M:
    out = type(obj)()
    out.CopyFrom(obj)
    return out


def _raise_invalid(kind: Kind[Message, Message], obj: Message, errs: list[errors.FieldError]) -> None:
    if errs:
        raise errors.Invalid.of(kind.name, object_meta(obj).name, errs)


def spec_bytes(kind: Kind[Message, Message], obj: Message) -> bytes:
    """The bytes whose change bumps metadata.generation: ``spec`` if the kind has one, else
    every field but the type and object metadata."""
    spec = spec_of(obj)
    if spec is not None:
        return spec.SerializeToString(deterministic=True)
    tmp = copy(obj)
    tmp.ClearField("metadata")
    tmp.ClearField("api_version")
    tmp.ClearField("kind")
    return tmp.SerializeToString(deterministic=True)


def defaulted_request(kind: Kind[M, L], requested: M) -> M:
    """A create's request as Kubernetes' decoder defaults it, before any admission plugin: what its
    field manager is recorded as owning (the DefaultTolerationSeconds tolerations, the priority,
    LimitRanger's resources are admission's, so nobody's)."""
    out = copy(requested)
    tolerations = list(out.spec.tolerations) if isinstance(out, core_pb2.Pod) else None
    defaults.default_object(kind.name, out)
    if isinstance(out, core_pb2.Pod) and tolerations is not None:
        del out.spec.tolerations[:]
        out.spec.tolerations.extend(tolerations)
    return out


def prepare_for_create(kind: Kind[M, L], obj: M) -> None:
    """Defaulting and the kind's create-time resets, then validation (raises Invalid)."""
    typed = accessor(obj)
    typed.api_version, typed.kind = kind.api_version, kind.name
    meta = typed.metadata
    meta.uid = str(uuid.uuid4())
    meta.creation_timestamp = timeutil.rfc3339()
    meta.generation = 1
    meta.resource_version = ""
    meta.ClearField("deletion_timestamp")
    meta.ClearField("deletion_grace_period_seconds")
    defaults.default_object(kind.name, obj)
    if isinstance(obj, core_pb2.Pod):  # kind is POD
        obj.ClearField("status")
        obj.status.phase = "Pending"
        obj.status.qos_class = resources.compute_qos(obj)
    elif isinstance(obj, core_pb2.Namespace):  # kind is NAMESPACE
        obj.ClearField("status")
        obj.status.phase = "Active"
        if FINALIZER_KUBERNETES not in obj.spec.finalizers:
            obj.spec.finalizers.append(FINALIZER_KUBERNETES)
    elif kind in _RESET_STATUS_ON_CREATE:
        obj.ClearField("status")
    _raise_invalid(kind, obj, validation.validate_create(kind.name, obj))


def _keep_system_metadata(new: Message, old: Message) -> None:
    nm, om = object_meta(new), object_meta(old)
    nm.generation = om.generation
    if om.deletion_timestamp:
        nm.deletion_timestamp = om.deletion_timestamp
    else:
        nm.ClearField("deletion_timestamp")
    if om.HasField("deletion_grace_period_seconds"):
        nm.deletion_grace_period_seconds = om.deletion_grace_period_seconds
    else:
        nm.ClearField("deletion_grace_period_seconds")
    if not nm.uid:
        nm.uid = om.uid
    if om.creation_timestamp:
        nm.creation_timestamp = om.creation_timestamp


def prepare_for_update(kind: Kind[M, L], new: M, old: M) -> None:
    """An update of the main resource: status kept, generation bumped on spec change, validated."""
    typed = accessor(new)
    typed.api_version, typed.kind = kind.api_version, kind.name
    _keep_system_metadata(new, old)
    if kind.has_status:
        if old.HasField("status"):
            cast(_WithStatus, new).status.CopyFrom(cast(_WithStatus, old).status)
        else:  # (CopyFrom would make an empty status present: a change, though nothing changed)
            new.ClearField("status")
    if isinstance(new, core_pb2.Namespace) and isinstance(old, core_pb2.Namespace):  # kind is NAMESPACE
        new.spec.ClearField("finalizers")
        new.spec.finalizers.extend(old.spec.finalizers)
    defaults.default_object(kind.name, new)
    if spec_bytes(kind, new) != spec_bytes(kind, old) or (
            isinstance(new, apps_pb2.Deployment) and isinstance(old, apps_pb2.Deployment)
            and new.metadata.annotations != old.metadata.annotations):
        typed.metadata.generation = object_meta(old).generation + 1
    _raise_invalid(kind, new, validation.validate_update(kind.name, new, old))


def prepare_for_status_update(kind: Kind[M, L], new: M, old: M) -> M:
    """An update of the status subresource: the stored object with the new status."""
    if isinstance(new, core_pb2.ResourceQuota) and not new.metadata.resource_version:  # kind is RESOURCE_QUOTA
        # ValidateResourceQuotaStatusUpdate: quota usage is written against a known version.
        _raise_invalid(kind, new, [errors.required("resourceVersion")])
    out = copy(old)
    cast(_WithStatus, out).status.CopyFrom(cast(_WithStatus, new).status)
    object_meta(out).resource_version = object_meta(old).resource_version
    if isinstance(out, apps_pb2.Deployment) and isinstance(new, apps_pb2.Deployment):  # kind is DEPLOYMENT
        # Kubernetes' deploymentStatusStrategy keeps only spec and labels from the stored object: the
        # deployment controller writes its revision annotation with the status, and that write must
        # not bump the generation as an annotation change through an update does.
        out.metadata.annotations.clear()
        out.metadata.annotations.update(new.metadata.annotations)
    if isinstance(out, core_pb2.Pod) and isinstance(old, core_pb2.Pod) and not out.status.qos_class:  # kind is POD
        out.status.qos_class = old.status.qos_class
    _raise_invalid(kind, out, validation.validate_status_update(kind.name, out, old))
    return out


def prepare_for_finalize(new: core_pb2.Namespace, old: core_pb2.Namespace) -> core_pb2.Namespace:
    """An update of a namespace's finalize subresource: the new namespace with the stored status
    (Kubernetes' namespace FinalizeStrategy), so spec.finalizers is what changes."""
    out = copy(new)
    out.api_version, out.kind = NAMESPACE.api_version, NAMESPACE.name
    _keep_system_metadata(out, old)
    out.status.CopyFrom(old.status)
    defaults.default_object(NAMESPACE.name, out)
    _raise_invalid(NAMESPACE, out, validation.validate_namespace_finalize_update(out, old))
    return out
