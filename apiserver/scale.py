"""The scale subresource of ReplicaSets and Deployments (autoscaling/v1 Scale), as Kubernetes'
apps registry serves it (scaleFromReplicaSet, scaleUpdatedObjectInfo).

- get: the object's name, namespace, uid, resourceVersion and creationTimestamp, ``spec.replicas``,
  ``status.replicas`` and the label selector as a string (``app=web``);
- update: ValidateScale, then only ``spec.replicas`` of the object changes, through the kind's
  update path (so ``metadata.generation`` is bumped as by any spec change, and the update is
  validated). A given ``metadata.resourceVersion`` must be the object's current one (ABORTED
  otherwise); a given ``metadata.uid`` must be its uid.
"""

from __future__ import annotations

from typing import Protocol, cast

from google.protobuf.message import Message

from apiserver import validation
from apiserver.auth import User
from apiserver.fieldmanager import Manager
from apiserver.registry import Registry, strategy_for_update
from machinery import errors, selectors
from machinery.api import autoscaling_pb2, meta_pb2
from machinery.kinds import Kind, object_meta


class _ScalableSpec(Protocol):
    """A ReplicaSetSpec or DeploymentSpec: the parts the scale subresource reads and writes."""

    replicas: int

    @property
    def selector(self) -> meta_pb2.LabelSelector: ...

    def HasField(self, field_name: str) -> bool: ...  # noqa: N802 (protobuf's name)


class _ScalableStatus(Protocol):
    replicas: int


class _Scalable(Protocol):
    @property
    def spec(self) -> _ScalableSpec: ...

    @property
    def status(self) -> _ScalableStatus: ...


def _scalable(obj: Message) -> _Scalable:
    return cast(_Scalable, obj)


def scale_of(kind: Kind, obj: Message) -> autoscaling_pb2.Scale:
    """The Scale of a ReplicaSet or Deployment."""
    meta, typed = object_meta(obj), _scalable(obj)
    spec = typed.spec
    try:
        selector = selectors.label_selector_as_selector(spec.selector, spec.HasField("selector"))
    except selectors.SelectorError as exc:  # validation keeps stored selectors convertible
        raise errors.InternalError(f'{kind.plural} "{meta.name}": {exc}') from None
    out = autoscaling_pb2.Scale(api_version="autoscaling/v1", kind="Scale")
    m = out.metadata
    m.name, m.namespace, m.uid = meta.name, meta.namespace, meta.uid
    m.resource_version, m.creation_timestamp = meta.resource_version, meta.creation_timestamp
    out.spec.replicas = spec.replicas
    out.status.replicas = typed.status.replicas
    out.status.selector = selectors.selector_string(selector)
    return out


class ScaleSubresource:
    def __init__(self, registry: Registry):
        self.registry = registry

    async def get(self, kind: Kind, req: meta_pb2.GetRequest) -> autoscaling_pb2.Scale:
        return scale_of(kind, await self.registry.get(kind, req.namespace, req.name))

    async def update(self, kind: Kind, scale: autoscaling_pb2.Scale, user: User,
                     dry_run: bool = False, field_manager: str | None = None) -> autoscaling_pb2.Scale:
        """Set the object's ``spec.replicas``, recorded under ``field_manager`` with subresource
        "scale" (as Kubernetes records a scale's managedFields on its object)."""
        wanted = autoscaling_pb2.Scale()
        wanted.CopyFrom(scale)
        meta = wanted.metadata
        meta.namespace = meta.namespace or "default"

        def build(old: Message) -> Message:
            errs = validation.validate_scale(wanted)
            if errs:
                raise errors.Invalid.of("Scale", meta.name, errs)
            old_meta = object_meta(old)
            if meta.uid and meta.uid != old_meta.uid:
                raise errors.conflict(f"{kind.plural}/scale", meta.name,
                                      f"Precondition failed: UID in precondition: {meta.uid}, "
                                      f"UID in object meta: {old_meta.uid}")
            new = type(old)()
            new.CopyFrom(old)
            _scalable(new).spec.replicas = wanted.spec.replicas
            return new

        updated = await self.registry.guaranteed_update(
            kind, meta.namespace, meta.name, build, precondition_rv=meta.resource_version, dry_run=dry_run,
            attributes=self.registry.writes(kind, "scale", user, dry_run),
            prepare=strategy_for_update(kind, "", self.registry.gates),
            manager=Manager(field_manager, "scale") if field_manager is not None else None)
        return scale_of(kind, updated)
