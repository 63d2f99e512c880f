"""Per-kind rules for create, update and status update (Kubernetes' REST strategies).

- create: system metadata (uid, creationTimestamp, generation 1), the kind's status reset (a pod
  starts Pending with its QoS class), defaulting, validation;
- update: status is kept (only the status subresource changes it), system metadata is kept,
  generation increments when the spec changes, update validation;
- status update: only status changes are kept (spec and metadata come from the stored object).
"""

from __future__ import annotations

import uuid

from google.protobuf.message import Message

from apiserver import defaults, validation
from machinery import errors, resources, timeutil
from machinery.kinds import POD, POD_DISRUPTION_BUDGET, RESOURCE_CLAIM, Kind


def copy(obj: Message) -> Message:
    out = type(obj)()
    out.CopyFrom(obj)
    return out


def _raise_invalid(kind: Kind, obj: Message, errs: list[errors.FieldError]) -> None:
    if errs:
        raise errors.Invalid.of(kind.name, obj.metadata.name, errs)


def spec_bytes(kind: Kind, obj: Message) -> bytes:
    """The bytes whose change bumps metadata.generation: ``spec`` if the kind has one, else
    every field but the type and object metadata."""
    if "spec" in obj.DESCRIPTOR.fields_by_name:
        return obj.spec.SerializeToString(deterministic=True)
    tmp = copy(obj)
    tmp.ClearField("metadata")
    tmp.ClearField("api_version")
    tmp.ClearField("kind")
    return tmp.SerializeToString(deterministic=True)


def prepare_for_create(kind: Kind, obj: Message) -> None:
    """Defaulting and the kind's create-time resets, then validation (raises Invalid)."""
    obj.api_version, obj.kind = kind.api_version, kind.name
    meta = obj.metadata
    meta.uid = str(uuid.uuid4())
    meta.creation_timestamp = timeutil.rfc3339()
    meta.generation = 1
    meta.resource_version = ""
    meta.ClearField("deletion_timestamp")
    meta.ClearField("deletion_grace_period_seconds")
    defaults.default_object(kind.name, obj)
    if kind is POD:
        obj.ClearField("status")
        obj.status.phase = "Pending"
        obj.status.qos_class = resources.compute_qos(obj)
    elif kind in (POD_DISRUPTION_BUDGET, RESOURCE_CLAIM):
        obj.ClearField("status")
    _raise_invalid(kind, obj, validation.validate_create(kind.name, obj))


def _keep_system_metadata(new: Message, old: Message) -> None:
    nm, om = new.metadata, old.metadata
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


def prepare_for_update(kind: Kind, new: Message, old: Message) -> None:
    """An update of the main resource: status kept, generation bumped on spec change, validated."""
    new.api_version, new.kind = kind.api_version, kind.name
    _keep_system_metadata(new, old)
    if kind.has_status:
        new.status.CopyFrom(old.status)
    defaults.default_object(kind.name, new)
    if spec_bytes(kind, new) != spec_bytes(kind, old):
        new.metadata.generation = old.metadata.generation + 1
    _raise_invalid(kind, new, validation.validate_update(kind.name, new, old))


def prepare_for_status_update(kind: Kind, new: Message, old: Message) -> Message:
    """An update of the status subresource: the stored object with the new status."""
    out = copy(old)
    out.status.CopyFrom(new.status)
    out.metadata.resource_version = old.metadata.resource_version
    if kind is POD and not out.status.qos_class:
        out.status.qos_class = old.status.qos_class
    _raise_invalid(kind, out, validation.validate_status_update(kind.name, out, old))
    return out
