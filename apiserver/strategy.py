"""Per-kind rules for create, update and status update (Kubernetes' REST strategies): a
``Strategy`` holds the generic rules and the kind's validation (its Validate, ValidateUpdate and
status ValidateUpdate), a kind that differs has its own subclass
(``pkg/registry/<group>/<kind>/strategy.go``'s shape), and ``for_kind`` finds it.

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
- finalize (namespaces): the status is kept, so what changes is spec.finalizers;
- create and update drop the fields of a disabled feature gate unless the stored object already
  uses them (Kubernetes' dropDisabledFields), from the apiserver's ``--feature-gates``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, Protocol, cast

from google.protobuf.message import Message

from apiserver import defaults, validation
from apiserver.validation.pod import CONTAINER_RESTART_RULES, uses_container_restart_rules
from machinery import errors, podconditions, resources, timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.featuregates import FeatureGates
from machinery.kinds import (
    DEPLOYMENT,
    DEVICE_CLASS,
    EVENT,
    LEASE,
    LIMIT_RANGE,
    NAMESPACE,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    PRIORITY_CLASS,
    REPLICA_SET,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_QUOTA,
    RESOURCE_SLICE,
    Kind,
    L,
    M,
    accessor,
    lookup,
    object_meta,
    spec_of,
)

#: The gates' defaults, for callers that run no apiserver (unit tests).
DEFAULT_GATES = FeatureGates()

# The namespace controller's finalizer, which every namespace gets on create: its content is
# deleted before the namespace goes.
FINALIZER_KUBERNETES = "kubernetes"


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


Validate = Callable[[Any], list[errors.FieldError]]
ValidateUpdate = Callable[[Any, Any], list[errors.FieldError]]


class Strategy:
    """A kind's rules (Kubernetes' RESTCreateStrategy, RESTUpdateStrategy and the status
    strategy): the generic ones, which a kind with its own subclasses where it differs, and the
    kind's validation: ``validate`` (create), ``validate_update`` and, for a kind with a status
    subresource, ``validate_status_update``."""

    def __init__(self, kind: Kind[Message, Message], validate: Validate, validate_update: ValidateUpdate,
                 validate_status_update: ValidateUpdate | None = None):
        self.kind = kind
        self.validate = validate
        self.validate_update = validate_update
        self._validate_status_update = validate_status_update

    def validate_status_update(self, new: Message, old: Message) -> list[errors.FieldError]:
        """The status subresource's validation; ValueError for a kind without one."""
        if self._validate_status_update is None:
            raise ValueError(f"{self.kind.name} has no status subresource")
        return self._validate_status_update(new, old)

    # ------------------------------------------------------------ create

    def defaulted_request(self, requested: M) -> M:
        """A create's request as Kubernetes' decoder defaults it, before any admission plugin:
        what its field manager is recorded as owning."""
        out = copy(requested)
        defaults.default_object(self.kind.name, out)
        return out

    def prepare_for_create(self, obj: Message, gates: FeatureGates = DEFAULT_GATES) -> None:
        """Fields of disabled gates dropped, defaulting and the kind's create-time resets, then
        validation (raises Invalid)."""
        typed = accessor(obj)
        typed.api_version, typed.kind = self.kind.api_version, self.kind.name
        meta = typed.metadata
        meta.uid = str(uuid.uuid4())
        meta.creation_timestamp = timeutil.rfc3339()
        meta.generation = 1
        meta.resource_version = ""
        meta.ClearField("deletion_timestamp")
        meta.ClearField("deletion_grace_period_seconds")
        self.drop_disabled_fields(obj, None, gates)
        defaults.default_object(self.kind.name, obj)
        self.reset_status(obj)
        _raise_invalid(self.kind, obj, self.validate_create(obj, gates))

    def validate_create(self, obj: Message, gates: FeatureGates) -> list[errors.FieldError]:
        """The kind's create validation; a kind whose validation depends on a gate overrides it."""
        return self.validate(obj)

    def reset_status(self, obj: Message) -> None:
        """A created object's status: as given, unless the kind starts its own."""

    def drop_disabled_fields(self, new: Message, old: Message | None, gates: FeatureGates) -> None:
        """Clear the fields of ``new`` whose feature gate is off, unless ``old`` (None on create)
        already uses them: an object written while the gate was on keeps them through updates
        (Kubernetes' dropDisabledFields)."""

    # ------------------------------------------------------------ update

    def prepare_for_update(self, new: Message, old: Message, gates: FeatureGates = DEFAULT_GATES) -> None:
        """An update of the main resource: status kept, fields of disabled gates dropped unless in
        use, generation bumped on spec change, validated."""
        kind = self.kind
        typed = accessor(new)
        typed.api_version, typed.kind = kind.api_version, kind.name
        _keep_system_metadata(new, old)
        if kind.has_status:
            if old.HasField("status"):
                cast(_WithStatus, new).status.CopyFrom(cast(_WithStatus, old).status)
            else:  # (CopyFrom would make an empty status present: a change, though nothing changed)
                new.ClearField("status")
        self.keep_on_update(new, old)
        self.drop_disabled_fields(new, old, gates)
        defaults.default_object(kind.name, new)
        if self.generation_changes(new, old):
            typed.metadata.generation = object_meta(old).generation + 1
        _raise_invalid(kind, new, self.validate_update(new, old))

    def keep_on_update(self, new: Message, old: Message) -> None:
        """What of the stored object an update may not change, besides status and system metadata."""

    def generation_changes(self, new: Message, old: Message) -> bool:
        """Whether an update makes a new generation: its spec changed."""
        return spec_bytes(self.kind, new) != spec_bytes(self.kind, old)

    # ------------------------------------------------------------ status

    def prepare_for_status_update(self, new: M, old: M) -> M:
        """An update of the status subresource: the stored object with the new status."""
        self.check_status_request(new)
        out = copy(old)
        cast(_WithStatus, out).status.CopyFrom(cast(_WithStatus, new).status)
        object_meta(out).resource_version = object_meta(old).resource_version
        self.status_update_keeps(out, new, old)
        _raise_invalid(self.kind, out, self.validate_status_update(out, old))
        return out

    def check_status_request(self, new: Message) -> None:
        """Refuse a status write the kind does not take at all."""

    def status_update_keeps(self, out: Message, new: Message, old: Message) -> None:
        """What a status write takes from the request (``new``) or keeps from the store (``old``)
        besides the status, in ``out``."""


class PodStrategy(Strategy):
    def validate_create(self, obj: Message, gates: FeatureGates) -> list[errors.FieldError]:
        """ValidatePodCreate with the options the gates give (KEP-5307's container restart rules)."""
        assert isinstance(obj, core_pb2.Pod)
        return validation.validate_pod_create(obj, container_restart_rules=gates.enabled(CONTAINER_RESTART_RULES))

    def drop_disabled_fields(self, new: Message, old: Message | None, gates: FeatureGates) -> None:
        """KEP-5307 (ContainerRestartRules): with the gate off, a pod that does not use them already
        loses its containers' ``restartPolicyRules`` and the ``restartPolicy`` of its regular
        containers (an init container's ``restartPolicy`` is the sidecars' field: validation says
        what it may be)."""
        assert isinstance(new, core_pb2.Pod) and (old is None or isinstance(old, core_pb2.Pod))
        if gates.enabled(CONTAINER_RESTART_RULES) or (old is not None and uses_container_restart_rules(old.spec)):
            return
        for c in new.spec.containers:
            c.ClearField("restart_policy")
            del c.restart_policy_rules[:]
        for c in new.spec.init_containers:
            del c.restart_policy_rules[:]

    def defaulted_request(self, requested: M) -> M:
        """The DefaultTolerationSeconds tolerations are admission's, so nobody's."""
        out = copy(requested)
        assert isinstance(out, core_pb2.Pod)
        tolerations = list(out.spec.tolerations)
        defaults.default_object(self.kind.name, out)
        del out.spec.tolerations[:]
        out.spec.tolerations.extend(tolerations)
        return out

    def reset_status(self, obj: Message) -> None:
        assert isinstance(obj, core_pb2.Pod)
        obj.ClearField("status")
        obj.status.phase = "Pending"
        obj.status.qos_class = resources.compute_qos(obj)

    def status_update_keeps(self, out: Message, new: Message, old: Message) -> None:
        assert isinstance(out, core_pb2.Pod) and isinstance(old, core_pb2.Pod)
        if not out.status.qos_class:
            out.status.qos_class = old.status.qos_class


    # ------------------------------------------------------------ subresources

    def bound(self, pod: core_pb2.Pod, binding: core_pb2.Binding) -> core_pb2.Pod:
        """The binding subresource (Kubernetes' BindingREST, setPodHostAndAnnotations): the stored
        pod assigned to the binding's node, its annotations added, PodScheduled=True."""
        name = pod.metadata.name
        if binding.metadata.uid and binding.metadata.uid != pod.metadata.uid:
            raise errors.conflict("pods/binding", name,
                                  f"Precondition failed: UID in precondition: {binding.metadata.uid}, "
                                  f"UID in object meta: {pod.metadata.uid}")
        if pod.metadata.deletion_timestamp:
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if pod.spec.node_name:
            raise errors.conflict("pods/binding", name,
                                  f'pod {name} is already assigned to node "{pod.spec.node_name}"')
        if pod.spec.scheduling_gates:
            raise errors.FailedPrecondition(f"pod {name} has non-empty .spec.schedulingGates")
        pod.spec.node_name = binding.target.name
        for k, v in binding.metadata.annotations.items():
            pod.metadata.annotations[k] = v
        podconditions.set_condition(pod, podconditions.POD_SCHEDULED, "True")
        return pod

    @staticmethod
    def resize_request(requested: core_pb2.Pod, old: core_pb2.Pod, *, volumes: bool = False) -> core_pb2.Pod:
        """The resize subresource's request (Kubernetes' podResizeStrategy.PrepareForUpdate): the
        stored pod with the requested containers' resources and resize policies, defaulted; with
        ``volumes`` (KEP-6030's InPlacePodVerticalScalingMemoryBackedVolumes), the requested
        volumes too, which validation then lets change only in a memory-backed emptyDir's
        ``sizeLimit``."""
        name = old.metadata.name
        errs: list[errors.FieldError] = []
        for field in ("containers", "init_containers"):
            path = "spec.containers" if field == "containers" else "spec.initContainers"
            want, have = getattr(requested.spec, field), getattr(old.spec, field)
            for i in range(max(len(want), len(have))):
                if i >= len(want) or i >= len(have) or want[i].name != have[i].name:
                    errs.append(errors.forbidden(f"{path}[{i}].name",
                                                 "containers may not be renamed or reordered on resize"))
        if errs:
            raise errors.Invalid.of("Pod", name, errs)
        new = copy(old)
        for field in ("containers", "init_containers"):
            for target, source in zip(getattr(new.spec, field), getattr(requested.spec, field), strict=True):
                target.resources.CopyFrom(source.resources)
                del target.resize_policy[:]
                target.resize_policy.extend(source.resize_policy)
        if volumes:
            del new.spec.volumes[:]
            new.spec.volumes.extend(requested.spec.volumes)
        defaults.default_pod(new)  # Kubernetes defaults the request body (quantities canonical: 1.5 -> 1500m)
        return new

    def prepare_for_resize(self, new: core_pb2.Pod, old: core_pb2.Pod, *, in_place_enabled: bool,
                           memory_backed_volumes: bool = False) -> core_pb2.Pod:
        """After admission's mutation (LimitRanger's defaults): validated (ValidatePodResize), and
        ``metadata.generation`` bumped when the spec changed."""
        errs = validation.validate_pod_resize(new, old, in_place_enabled=in_place_enabled,
                                              memory_backed_volumes=memory_backed_volumes)
        if errs:
            raise errors.Invalid.of("Pod", old.metadata.name, errs)
        if spec_bytes(POD, new) != spec_bytes(POD, old):
            new.metadata.generation = old.metadata.generation + 1
        return new


class NodeStrategy(Strategy):
    def drop_disabled_fields(self, new: Message, old: Message | None, gates: FeatureGates) -> None:
        """KEP-5836: ``spec.podPreemptionPolicy`` needs SchedulerPreemptionForPodResize."""
        assert isinstance(new, core_pb2.Node) and (old is None or isinstance(old, core_pb2.Node))
        in_use = old is not None and old.spec.HasField("pod_preemption_policy")
        if not gates.enabled("SchedulerPreemptionForPodResize") and not in_use:
            new.spec.ClearField("pod_preemption_policy")


class NamespaceStrategy(Strategy):
    def reset_status(self, obj: Message) -> None:
        assert isinstance(obj, core_pb2.Namespace)
        obj.ClearField("status")
        obj.status.phase = "Active"
        if FINALIZER_KUBERNETES not in obj.spec.finalizers:
            obj.spec.finalizers.append(FINALIZER_KUBERNETES)

    def keep_on_update(self, new: Message, old: Message) -> None:
        """spec.finalizers change only through the finalize subresource."""
        assert isinstance(new, core_pb2.Namespace) and isinstance(old, core_pb2.Namespace)
        new.spec.ClearField("finalizers")
        new.spec.finalizers.extend(old.spec.finalizers)

    def prepare_for_finalize(self, new: core_pb2.Namespace, old: core_pb2.Namespace) -> core_pb2.Namespace:
        """The finalize subresource: the new namespace with the stored status (Kubernetes'
        namespace FinalizeStrategy), so spec.finalizers is what changes."""
        out = copy(new)
        out.api_version, out.kind = NAMESPACE.api_version, NAMESPACE.name
        _keep_system_metadata(out, old)
        out.status.CopyFrom(old.status)
        defaults.default_object(NAMESPACE.name, out)
        _raise_invalid(NAMESPACE, out, validation.validate_namespace_finalize_update(out, old))
        return out


class StatusResetStrategy(Strategy):
    """A kind whose status its controller writes: a create starts without one."""

    def reset_status(self, obj: Message) -> None:
        obj.ClearField("status")


class DeploymentStrategy(StatusResetStrategy):
    def generation_changes(self, new: Message, old: Message) -> bool:
        """Its annotations too: they are copied to its ReplicaSets."""
        assert isinstance(new, apps_pb2.Deployment) and isinstance(old, apps_pb2.Deployment)
        return super().generation_changes(new, old) or new.metadata.annotations != old.metadata.annotations

    def status_update_keeps(self, out: Message, new: Message, old: Message) -> None:
        """Kubernetes' deploymentStatusStrategy keeps only spec and labels from the stored object:
        the deployment controller writes its revision annotation with the status, and that write
        must not bump the generation as an annotation change through an update does."""
        assert isinstance(out, apps_pb2.Deployment) and isinstance(new, apps_pb2.Deployment)
        out.metadata.annotations.clear()
        out.metadata.annotations.update(new.metadata.annotations)


class ResourceQuotaStrategy(StatusResetStrategy):
    def check_status_request(self, new: Message) -> None:
        """ValidateResourceQuotaStatusUpdate: quota usage is written against a known version."""
        if not object_meta(new).resource_version:
            _raise_invalid(self.kind, new, [errors.required("resourceVersion")])


_STRATEGIES: dict[str, Strategy] = {s.kind.name: s for s in (
    PodStrategy(POD, validation.validate_pod_create, validation.validate_pod_update,
                validation.validate_pod_status_update),
    NodeStrategy(NODE, validation.validate_node, validation.validate_node_update,
                 validation.validate_node_status_update),
    Strategy(EVENT, validation.validate_event, validation.validate_event_update),
    Strategy(PRIORITY_CLASS, validation.validate_priority_class, validation.validate_priority_class_update),
    StatusResetStrategy(POD_DISRUPTION_BUDGET, validation.validate_pdb, validation.validate_pdb_update,
                        validation.validate_pdb_status_update),
    Strategy(LEASE, validation.validate_lease, validation.validate_lease_update),
    StatusResetStrategy(RESOURCE_CLAIM, validation.validate_resource_claim, validation.validate_resource_claim_update,
                        validation.validate_resource_claim_status_update),
    Strategy(RESOURCE_CLAIM_TEMPLATE, validation.validate_resource_claim_template,
             validation.validate_resource_claim_template_update),
    Strategy(RESOURCE_SLICE, validation.validate_resource_slice, validation.validate_resource_slice_update),
    Strategy(DEVICE_CLASS, validation.validate_device_class, validation.validate_device_class_update),
    NamespaceStrategy(NAMESPACE, validation.validate_namespace, validation.validate_namespace_update,
                      validation.validate_namespace_status_update),
    ResourceQuotaStrategy(RESOURCE_QUOTA, validation.validate_resource_quota,
                          validation.validate_resource_quota_update, validation.validate_resource_quota_status_update),
    Strategy(LIMIT_RANGE, validation.validate_limit_range, validation.validate_limit_range_update),
    StatusResetStrategy(REPLICA_SET, validation.validate_replica_set, validation.validate_replica_set_update,
                        validation.validate_replica_set_status_update),
    DeploymentStrategy(DEPLOYMENT, validation.validate_deployment, validation.validate_deployment_update,
                       validation.validate_deployment_status_update),
)}


def for_kind(kind: Kind[M, L]) -> Strategy:
    """The kind's strategy."""
    return _STRATEGIES[kind.name]


def validate_create(kind_name: str, obj: Message) -> list[errors.FieldError]:
    """The create validation of the kind ``kind_name`` names (anything ``machinery.kinds.lookup``
    takes: ``deploy``, ``pods``, ``Node``)."""
    return _STRATEGIES[lookup(kind_name).name].validate(obj)


def validate_update(kind_name: str, new: Message, old: Message) -> list[errors.FieldError]:
    return _STRATEGIES[lookup(kind_name).name].validate_update(new, old)


def validate_status_update(kind_name: str, new: Message, old: Message) -> list[errors.FieldError]:
    """The status-subresource validation; ValueError for a kind without one."""
    return _STRATEGIES[lookup(kind_name).name].validate_status_update(new, old)


# The registry's entry points.

def defaulted_request(kind: Kind[M, L], requested: M) -> M:
    return for_kind(kind).defaulted_request(requested)


def prepare_for_create(kind: Kind[M, L], obj: M, gates: FeatureGates = DEFAULT_GATES) -> None:
    for_kind(kind).prepare_for_create(obj, gates)


def prepare_for_update(kind: Kind[M, L], new: M, old: M, gates: FeatureGates = DEFAULT_GATES) -> None:
    for_kind(kind).prepare_for_update(new, old, gates)


def prepare_for_status_update(kind: Kind[M, L], new: M, old: M) -> M:
    return for_kind(kind).prepare_for_status_update(new, old)


def pod_strategy() -> PodStrategy:
    strategy = for_kind(POD)
    assert isinstance(strategy, PodStrategy)
    return strategy


def prepare_for_finalize(new: core_pb2.Namespace, old: core_pb2.Namespace) -> core_pb2.Namespace:
    strategy = for_kind(NAMESPACE)
    assert isinstance(strategy, NamespaceStrategy)
    return strategy.prepare_for_finalize(new, old)


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
