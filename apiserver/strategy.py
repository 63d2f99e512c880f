"""Per-kind rules for create, update and status update (Kubernetes' REST strategies).

- create: system metadata (uid, creationTimestamp, generation 1), the kind's status reset (a pod
  starts Pending with its QoS class), defaulting, validation;
- update: status is kept (only the status subresource changes it), system metadata is kept,
  generation increments when the spec changes, update validation;
- status update: only status changes are kept (spec and metadata come from the stored object).
"""

from __future__ import annotations

import uuid
from typing import Protocol, cast

from google.protobuf.message import Message

from apiserver import defaults, validation
from machinery import errors, resources, timeutil
from machinery.api import core_pb2
from machinery.kinds import POD_DISRUPTION_BUDGET, RESOURCE_CLAIM, Kind, L, M, accessor, object_meta, spec_of


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
    elif kind in (POD_DISRUPTION_BUDGET, RESOURCE_CLAIM):
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
        cast(_WithStatus, new).status.CopyFrom(cast(_WithStatus, old).status)
    defaults.default_object(kind.name, new)
    if spec_bytes(kind, new) != spec_bytes(kind, old):
        typed.metadata.generation = object_meta(old).generation + 1
    _raise_invalid(kind, new, validation.validate_update(kind.name, new, old))


def prepare_for_status_update(kind: Kind[M, L], new: M, old: M) -> M:
    """An update of the status subresource: the stored object with the new status."""
    out = copy(old)
    cast(_WithStatus, out).status.CopyFrom(cast(_WithStatus, new).status)
    object_meta(out).resource_version = object_meta(old).resource_version
    if isinstance(out, core_pb2.Pod) and isinstance(old, core_pb2.Pod) and not out.status.qos_class:  # kind is POD
        out.status.qos_class = old.status.qos_class
    _raise_invalid(kind, out, validation.validate_status_update(kind.name, out, old))
    return out
