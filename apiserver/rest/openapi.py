"""The OpenAPI documents of kplane's Kubernetes REST API: /openapi/v2 and /openapi/v3.

kubectl reads them (``openapi_v3`` and ``_field_schema`` say what for), and server-side apply
(``apiserver.fieldmanager``) reads its schema from them, as Kubernetes' does. Everything is
generated from the proto descriptors (``machinery/api``) and the kinds table
(``machinery.kinds.KINDS``), so a field added to a proto appears here with its type.

- ``openapi_v2``, ``openapi_v3_paths``, ``openapi_v3``: the contract the REST server calls. Each
  document is built once and is the same on every build (the server may cache its encoding);
  callers must not mutate what they get.
- ``_definitions``: the definitions, one per message (``_definition_name``, ``_field_schema``).
- ``_paths``: each kind's endpoints, as neutral operations rendered into v2 or v3.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import FieldOptions
from google.protobuf.message import Message

from machinery.api import autoscaling_pb2, core_pb2, options_pb2
from machinery.api.comments import COMMENTS
from machinery.kinds import KINDS, Kind
from machinery.schema import MAP, field_schema, is_kept_as_given, required_fields, struct_type

if TYPE_CHECKING:
    from google._upb import _message as _upb
    from google.protobuf.internal.extension_dict import _ExtensionFieldDescriptor

    AnyDescriptor: TypeAlias = Descriptor | _upb.Descriptor
    AnyFieldDescriptor: TypeAlias = FieldDescriptor | _upb.FieldDescriptor

__all__ = ["openapi_v2", "openapi_v3", "openapi_v3_paths"]

Schema: TypeAlias = dict[str, Any]

# ---------------------------------------------------------------------------------------------
# Kubernetes' names of kplane's messages. A message is the definition Kubernetes names for its Go
# type: _PACKAGE_OF_FILE gives the Kubernetes package of each proto file (core.proto holds core/v1's
# types, meta.proto meta/v1's, ...) and _RENAMED the few messages that sit or are named otherwise.
# ---------------------------------------------------------------------------------------------

_META = "io.k8s.apimachinery.pkg.apis.meta.v1"

#: The Kubernetes Go package whose types each proto file holds, as OpenAPI definition prefixes.
_PACKAGE_OF_FILE = {
    "kplane/v1/core.proto": "io.k8s.api.core.v1",
    "kplane/v1/apps.proto": "io.k8s.api.apps.v1",
    "kplane/v1/autoscaling.proto": "io.k8s.api.autoscaling.v1",
    "kplane/v1/coordination.proto": "io.k8s.api.coordination.v1",
    "kplane/v1/policy.proto": "io.k8s.api.policy.v1",
    "kplane/v1/scheduling.proto": "io.k8s.api.scheduling.v1",
    "kplane/v1/resource.proto": "io.k8s.api.resource.v1",
    "kplane/v1/meta.proto": _META,
}

#: Messages that are not ``<their file's package>.<their name>`` in Kubernetes.
_RENAMED = {
    # core/v1's ResourceClaim (a container's reference to a pod's claim); kplane's name keeps
    # it apart from resource.k8s.io's ResourceClaim.
    "kplane.v1.ResourceClaimRef": "io.k8s.api.core.v1.ResourceClaim",
    # Request bodies core.proto holds for the pods/eviction subresource and Delete.
    "kplane.v1.Eviction": "io.k8s.api.policy.v1.Eviction",
    "kplane.v1.DeleteOptions": f"{_META}.DeleteOptions",
    # References meta.proto holds beside ObjectMeta; they are core/v1 types.
    "kplane.v1.ObjectReference": "io.k8s.api.core.v1.ObjectReference",
    "kplane.v1.LocalObjectReference": "io.k8s.api.core.v1.LocalObjectReference",
}

_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_TIME = f"{_META}.Time"
_MICRO_TIME = f"{_META}.MicroTime"
_FIELDS_V1 = f"{_META}.FieldsV1"
_STATUS = f"{_META}.Status"
_PATCH = f"{_META}.Patch"
_DELETE_OPTIONS = f"{_META}.DeleteOptions"

#: The string fields that are metav1.Time or metav1.MicroTime in Kubernetes (RFC 3339 strings in
#: kplane). A map field's entry is its values' type.
_TIMES = {
    "kplane.v1.ObjectMeta.creation_timestamp": _TIME,
    "kplane.v1.ObjectMeta.deletion_timestamp": _TIME,
    "kplane.v1.ManagedFieldsEntry.time": _TIME,
    "kplane.v1.Condition.last_transition_time": _TIME,
    "kplane.v1.PodCondition.last_probe_time": _TIME,
    "kplane.v1.PodCondition.last_transition_time": _TIME,
    "kplane.v1.PodStatus.start_time": _TIME,
    "kplane.v1.ContainerStateRunning.started_at": _TIME,
    "kplane.v1.ContainerStateTerminated.started_at": _TIME,
    "kplane.v1.ContainerStateTerminated.finished_at": _TIME,
    "kplane.v1.Taint.time_added": _TIME,
    "kplane.v1.NodeCondition.last_heartbeat_time": _TIME,
    "kplane.v1.NodeCondition.last_transition_time": _TIME,
    "kplane.v1.Event.first_timestamp": _TIME,
    "kplane.v1.Event.last_timestamp": _TIME,
    "kplane.v1.Event.event_time": _MICRO_TIME,
    "kplane.v1.NamespaceCondition.last_transition_time": _TIME,
    "kplane.v1.ReplicaSetCondition.last_transition_time": _TIME,
    "kplane.v1.DeploymentCondition.last_update_time": _TIME,
    "kplane.v1.DeploymentCondition.last_transition_time": _TIME,
    "kplane.v1.LeaseSpec.acquire_time": _MICRO_TIME,
    "kplane.v1.LeaseSpec.renew_time": _MICRO_TIME,
    "kplane.v1.PodDisruptionBudgetStatus.disrupted_pods": _TIME,
    "kplane.v1.AllocationResult.allocation_timestamp": _TIME,
}

# ---------------------------------------------------------------------------------------------
# Descriptions the protos do not carry. Descriptions are the protos' comments
# (machinery/api/comments.py, which `make proto` writes from protoc's source info), else the short
# ones of _KIND_DESCRIPTIONS and _standard_field_description for the kinds and their
# TypeMeta/ObjectMeta/spec/status fields.
# ---------------------------------------------------------------------------------------------

_KIND_DESCRIPTIONS = {
    "Pod": "A Pod is a group of containers that run together on one node: created by clients, placed on a node "
           "by the scheduler and run by that node's kubelet.",
    "Node": "A Node is a worker the pods run on; its kubelet registers it and keeps its status and Lease.",
    "Event": "An Event reports something that happened to an object: a scheduling failure, a preemption, a "
             "resize, an eviction.",
    "Namespace": "A Namespace is a scope for the names of the objects in it.",
    "PriorityClass": "A PriorityClass maps a priority class name to the integer priority of the pods that name it.",
    "PodDisruptionBudget": "A PodDisruptionBudget bounds how many of the pods it selects voluntary disruptions "
                           "(evictions, preemptions) may take down at once.",
    "Lease": "A Lease is a lock with a holder and a duration: node heartbeats and leader election.",
    "ResourceClaim": "A ResourceClaim asks for devices (Dynamic Resource Allocation): the scheduler allocates them "
                     "and the pods that use them are reserved in its status.",
    "ResourceClaimTemplate": "A ResourceClaimTemplate is what the ResourceClaim of each pod that names it is made "
                             "from.",
    "ResourceSlice": "A ResourceSlice publishes devices of one pool of a driver.",
    "DeviceClass": "A DeviceClass is a kind of device a claim may ask for, by selectors and configuration.",
    "ResourceQuota": "A ResourceQuota caps the total resources and object counts of one namespace.",
    "LimitRange": "A LimitRange sets defaults and bounds of the resources of each container or pod in a namespace.",
    "ReplicaSet": "A ReplicaSet keeps a number of pods made from its template running.",
    "Deployment": "A Deployment declares the pods of an application and rolls changes of their template out "
                  "through ReplicaSets.",
    "Scale": "Scale is the scale subresource of a ReplicaSet or Deployment: its desired and observed replicas.",
}


def _standard_field_description(owner: str, json_name: str, field_type: str) -> str | None:
    """Kubernetes' TypeMeta, ObjectMeta/ListMeta, spec, status and items fields, which every
    top-level message repeats; ``owner`` is its kind (Pod, PodList), ``field_type`` the field's type
    name."""
    if json_name == "apiVersion":
        return ("APIVersion names the versioned schema of this representation of an object (v1, apps/v1, "
                "scheduling.k8s.io/v1, ...).")
    if json_name == "kind":
        return "Kind is the REST resource this object represents, in CamelCase."
    if json_name == "metadata" and field_type == "ObjectMeta":
        return "Standard object's metadata."
    if json_name == "metadata" and field_type == "ListMeta":
        return "Standard list metadata."
    if json_name == "spec":
        return f"Specification of the desired behavior of the {owner}."
    if json_name == "status":
        return f"Most recently observed status of the {owner}, written by the system; it may lag the spec."
    if json_name == "items" and owner.endswith("List"):
        return f"The {owner[:-len('List')]} objects of the list."
    return None


_STRUCT_DESCRIPTION = "Kept as given: kplane stores this field and returns it, and does not act on it."

# ---------------------------------------------------------------------------------------------
# Definitions written out: the apimachinery types that are no proto message in kplane.
# ---------------------------------------------------------------------------------------------


def _gvk(group: str, version: str, kind: str) -> dict[str, str]:
    return {"group": group, "kind": kind, "version": version}


def _handwritten_definitions(group_versions: tuple[tuple[str, str], ...]) -> dict[str, Schema]:
    """Quantity, IntOrString, Time and MicroTime (strings in JSON), FieldsV1 (an object), Status
    (every error and some deletes), Patch (a PATCH body), WatchEvent and RawExtension (a watch stream's events)."""
    every_group_version = [_gvk(g, v, "") for g, v in group_versions]
    return {
        _QUANTITY: {
            "description": "A quantity is a fixed-point number with a suffix: 500m, 2, 1.5Gi, 128Mi, 1e3. kplane "
                           "canonicalises it as Kubernetes does (1.5 is 1500m); a JSON number is accepted.",
            "type": "string",
        },
        _INT_OR_STRING: {
            "description": "An integer or a string, such as a percentage (\"25%\").",
            "format": "int-or-string",
            "type": "string",
        },
        _TIME: {
            "description": "A time, RFC 3339 to the second (2006-01-02T15:04:05Z).",
            "format": "date-time",
            "type": "string",
        },
        _FIELDS_V1: {
            "description": "FieldsV1 is a set of fields as Kubernetes encodes it: a JSON object whose keys are "
                           "f:<field>, k:<the keys of a list item, as JSON>, v:<a set's value, as JSON>, i:<index> "
                           "and \".\" (the node itself), each holding the set below it.",
            "type": "object",
        },
        _MICRO_TIME: {
            "description": "A time, RFC 3339 to the microsecond (2006-01-02T15:04:05.000000Z).",
            "format": "date-time",
            "type": "string",
        },
        _PATCH: {
            "description": "The body of a PATCH request: a JSON patch, a JSON merge patch, a strategic merge "
                           "patch or an apply configuration, as its Content-Type says.",
            "type": "object",
        },
        _STATUS: {
            "description": "Status is the answer of a request that does not return an object: every error, and "
                           "some deletes.",
            "properties": {
                "apiVersion": {"description": _standard_field_description("Status", "apiVersion", ""),
                               "type": "string"},
                "code": {"description": "The HTTP status code of the answer.", "format": "int32",
                         "type": "integer"},
                "details": {"$ref": _ref(f"{_META}.StatusDetails"),
                            "description": "What the reason leaves out: the object's group, kind and name, and the "
                                           "causes of an invalid request."},
                "kind": {"description": _standard_field_description("Status", "kind", ""), "type": "string"},
                "message": {"description": "A human-readable description of the answer.", "type": "string"},
                "metadata": {"$ref": _ref(f"{_META}.ListMeta"), "description": "Standard list metadata."},
                "reason": {"description": "Why the request failed, in CamelCase (NotFound, AlreadyExists, "
                                          "Conflict, Invalid, Forbidden, TooManyRequests, ...); empty when no "
                                          "reason is known.", "type": "string"},
                "status": {"description": "Success or Failure.", "type": "string"},
            },
            "type": "object",
            "x-kubernetes-group-version-kind": [_gvk("", "v1", "Status")],
        },
        f"{_META}.StatusDetails": {
            "description": "The details of a Status: the object it is about and, for an invalid request, the "
                           "invalid fields.",
            "properties": {
                "causes": {"description": "The causes of the error, one per invalid field.",
                           "items": {"$ref": _ref(f"{_META}.StatusCause")}, "type": "array",
                           "x-kubernetes-list-type": "atomic"},
                "group": {"description": "The group of the object's kind.", "type": "string"},
                "kind": {"description": "The object's kind (its resource for some answers).", "type": "string"},
                "name": {"description": "The object's name.", "type": "string"},
                "retryAfterSeconds": {"description": "How long the client should wait before trying again.",
                                      "format": "int32", "type": "integer"},
                "uid": {"description": "The object's UID.", "type": "string"},
            },
            "type": "object",
        },
        f"{_META}.StatusCause": {
            "description": "One cause of an error: the field it is about and why.",
            "properties": {
                "field": {"description": "The field's path (spec.containers[0].name).", "type": "string"},
                "message": {"description": "A human-readable description of the cause.", "type": "string"},
                "reason": {"description": "The cause, in CamelCase (FieldValueRequired, FieldValueInvalid, ...).",
                           "type": "string"},
            },
            "type": "object",
        },
        f"{_META}.WatchEvent": {
            "description": "One event of a watch stream.",
            "properties": {
                "object": {"$ref": _ref("io.k8s.apimachinery.pkg.runtime.RawExtension"),
                           "description": "The object as it is after the event (ADDED, MODIFIED), as it was last "
                                          "(DELETED), a Status (ERROR) or an object carrying only its "
                                          "resourceVersion (BOOKMARK)."},
                "type": {"description": "ADDED, MODIFIED, DELETED, BOOKMARK or ERROR.", "type": "string"},
            },
            "required": ["type", "object"],
            "type": "object",
            "x-kubernetes-group-version-kind": [{**gvk, "kind": "WatchEvent"} for gvk in every_group_version],
        },
        "io.k8s.apimachinery.pkg.runtime.RawExtension": {
            "description": "An object of any kind, as JSON.",
            "type": "object",
        },
    }


# ---------------------------------------------------------------------------------------------
# Schemas of the messages.
# ---------------------------------------------------------------------------------------------

_V2_REFS = "#/definitions/"
_V3_REFS = "#/components/schemas/"

_OPT_QUANTITY = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.quantity)
_OPT_INT_OR_STRING = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.int_or_string)
_OPT_RAW_JSON = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.raw_json)

_SCALARS: dict[int, Schema] = {
    FieldDescriptor.TYPE_STRING: {"type": "string"},
    FieldDescriptor.TYPE_BYTES: {"format": "byte", "type": "string"},
    FieldDescriptor.TYPE_BOOL: {"type": "boolean"},
    FieldDescriptor.TYPE_INT32: {"format": "int32", "type": "integer"},
    FieldDescriptor.TYPE_SINT32: {"format": "int32", "type": "integer"},
    FieldDescriptor.TYPE_SFIXED32: {"format": "int32", "type": "integer"},
    FieldDescriptor.TYPE_UINT32: {"format": "int32", "type": "integer"},
    FieldDescriptor.TYPE_FIXED32: {"format": "int32", "type": "integer"},
    FieldDescriptor.TYPE_INT64: {"format": "int64", "type": "integer"},
    FieldDescriptor.TYPE_SINT64: {"format": "int64", "type": "integer"},
    FieldDescriptor.TYPE_SFIXED64: {"format": "int64", "type": "integer"},
    FieldDescriptor.TYPE_UINT64: {"format": "int64", "type": "integer"},
    FieldDescriptor.TYPE_FIXED64: {"format": "int64", "type": "integer"},
    FieldDescriptor.TYPE_DOUBLE: {"format": "double", "type": "number"},
    FieldDescriptor.TYPE_FLOAT: {"format": "double", "type": "number"},
    FieldDescriptor.TYPE_ENUM: {"type": "string"},
}

# Of the types kept as given (machinery.schema.KEPT_AS_GIVEN), Struct is a JSON object; the others any JSON value.
_STRUCT = "google.protobuf.Struct"


def _ref(name: str) -> str:
    return _V2_REFS + name


class SchemaTableError(ValueError):
    """A table of this module disagrees with the protos or with ``machinery.patch``: a message
    reachable from a served kind has no Kubernetes name (a proto file or message was added without
    one), or a table names a field the message does not have. The unit tests build every document,
    so this shows there, never in a running apiserver."""


def _definition_name(descriptor: AnyDescriptor) -> str:
    """The OpenAPI definition name of a message: Kubernetes' ``<Go package>.<Go type>``."""
    renamed = _RENAMED.get(descriptor.full_name)
    if renamed is not None:
        return renamed
    package = _PACKAGE_OF_FILE.get(descriptor.file.name)
    if package is None:
        raise SchemaTableError(
            f"{descriptor.full_name} ({descriptor.file.name}) has no Kubernetes name: add its file to "
            "_PACKAGE_OF_FILE or the message to _RENAMED in apiserver/rest/openapi.py")
    return f"{package}.{descriptor.name}"


def _short_name(definition: str) -> str:
    return definition.rpartition(".")[2]


def _message_type(fd: AnyFieldDescriptor) -> AnyDescriptor | None:
    return fd.message_type if fd.type == FieldDescriptor.TYPE_MESSAGE else None


def _map_entry(fd: AnyFieldDescriptor) -> AnyDescriptor | None:
    message = _message_type(fd)
    return message if message is not None and message.GetOptions().map_entry else None


def _value_schema(fd: AnyFieldDescriptor, value: AnyFieldDescriptor) -> Schema:
    """The schema of one value of field ``fd`` (``value`` is ``fd`` itself, or a map's value field)."""
    time = _TIMES.get(fd.full_name)
    if time is not None:
        return {"$ref": _ref(time)}
    options = fd.GetOptions()
    if options.Extensions[_OPT_QUANTITY]:
        return {"$ref": _ref(_QUANTITY)}
    if options.Extensions[_OPT_INT_OR_STRING]:
        return {"$ref": _ref(_INT_OR_STRING)}
    if options.Extensions[_OPT_RAW_JSON]:
        return {"$ref": _ref(_FIELDS_V1)}
    message = _message_type(value)
    if message is None:
        return dict(_SCALARS[value.type])
    if message.full_name == _STRUCT:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    if is_kept_as_given(message):
        return {"x-kubernetes-preserve-unknown-fields": True}
    return {"$ref": _ref(_definition_name(message))}


def _field_schema(fd: AnyFieldDescriptor, kind: str | None) -> Schema:
    """The schema of field ``fd``; ``kind`` is the kind of the message holding it if that is a
    top-level one.

    Properties carry Kubernetes' JSON names (the protos' json names) and types: int64 is
    ``integer``/``int64``, repeated is ``array``, a map is ``object`` with ``additionalProperties``,
    ``(kplane.v1.quantity)`` fields are ``Quantity``, ``(kplane.v1.int_or_string)`` ones
    ``IntOrString``, times (``_TIMES``) ``Time`` or ``MicroTime``, the passive
    ``google.protobuf.Struct`` fields objects whose content is kept as given.

    ``x-kubernetes-patch-merge-key``/``-strategy``, ``required``, ``x-kubernetes-list-type``,
    ``-list-map-keys``, ``-map-type`` and ``default`` (of list-map keys only) are Kubernetes'
    markers of the Go types, read from the options on the proto fields by ``machinery.schema``, the
    one source strategic merge patch reads too (``required`` and a message's ``-map-type`` are set
    by ``_message_schema``). kubectl's client-side apply reads the ``x-kubernetes-patch-*``
    extensions to build strategic merge patches."""
    markers = field_schema(fd)
    entry = _map_entry(fd)
    if entry is not None:
        schema: Schema = {"additionalProperties": _value_schema(fd, entry.fields_by_name["value"]),
                          "type": "object"}
        if markers.map_type:
            schema["x-kubernetes-map-type"] = markers.map_type
    elif fd.is_repeated:
        schema = {"items": _value_schema(fd, fd), "type": "array"}
        if markers.list_type == MAP:
            _check_map_keys(fd, markers.list_map_keys)
            schema["x-kubernetes-list-map-keys"] = list(markers.list_map_keys)
        if markers.list_type:
            schema["x-kubernetes-list-type"] = markers.list_type
    else:
        schema = _value_schema(fd, fd)
    if markers.has_default:
        schema["default"] = markers.default
    if markers.patch_strategy:
        if markers.patch_merge_key:
            schema["x-kubernetes-patch-merge-key"] = markers.patch_merge_key
        schema["x-kubernetes-patch-strategy"] = markers.patch_strategy
    description = COMMENTS.get(fd.full_name)
    if description is None and kind is not None:
        field_type = _short_name(schema["$ref"]) if "$ref" in schema else ""
        description = _standard_field_description(kind, fd.json_name, field_type)
    if description is None and is_kept_as_given(_message_type(fd)):
        description = _STRUCT_DESCRIPTION
    if description is not None:
        schema["description"] = description
    return schema


def _check_map_keys(fd: AnyFieldDescriptor, keys: tuple[str, ...]) -> None:
    """Fail unless the items of list ``fd`` have its ``list_map_keys`` (items kept
    as given, Structs, have whatever fields they are given)."""
    item = _message_type(fd)
    if item is None or is_kept_as_given(item):
        return
    missing = [key for key in keys if key not in {f.json_name for f in item.fields}]
    if missing:
        raise SchemaTableError(f"{fd.full_name} has list map keys its items do not have: {missing}")


def _message_schema(descriptor: AnyDescriptor, gvk: dict[str, str] | None) -> Schema:
    name = _short_name(_definition_name(descriptor))
    kind = gvk["kind"] if gvk is not None else None
    properties = {fd.json_name: _field_schema(fd, kind) for fd in descriptor.fields}
    schema: Schema = {"properties": properties, "type": "object"}
    description = COMMENTS.get(descriptor.full_name) or _KIND_DESCRIPTIONS.get(descriptor.name)
    if description is None and name.endswith("List") and name[:-len("List")] in _KIND_DESCRIPTIONS:
        description = f"{name} is a list of {name[:-len('List')]} objects."
    if description is not None:
        schema["description"] = description
    required = list(required_fields(descriptor))
    if gvk is not None and gvk["kind"].endswith("List") and "items" in descriptor.fields_by_name:
        required.append("items")
    if required:
        schema["required"] = [descriptor.fields_by_name[field].json_name for field in required]
    if gvk is not None:
        schema["x-kubernetes-group-version-kind"] = [gvk]
    if struct_type(descriptor):
        schema["x-kubernetes-map-type"] = struct_type(descriptor)
    return schema


# ---------------------------------------------------------------------------------------------
# The kinds, their group/versions and their top-level messages.
# ---------------------------------------------------------------------------------------------


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _group_versions() -> tuple[tuple[str, str], ...]:
    """Every group/version kplane serves, in the order of ``KINDS``."""
    return tuple(dict.fromkeys(_group_version(kind.api_version) for kind in KINDS))


def _gv_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the REST prefix and the /openapi/v3 key."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


#: Top-level messages that are no kind of KINDS: subresource bodies, with their GVK.
_SUBRESOURCE_BODIES: dict[str, tuple[type[Message], tuple[str, str, str]]] = {
    "scale": (autoscaling_pb2.Scale, ("autoscaling", "v1", "Scale")),
    "binding": (core_pb2.Binding, ("", "v1", "Binding")),
    "eviction": (core_pb2.Eviction, ("policy", "v1", "Eviction")),
}


def _roots() -> Iterator[tuple[AnyDescriptor, dict[str, str] | None]]:
    """The messages the definitions start from, with the GVK of those that are top-level."""
    for kind in KINDS:
        group, version = _group_version(kind.api_version)
        yield kind.message.DESCRIPTOR, _gvk(group, version, kind.name)
        yield kind.list_message.DESCRIPTOR, _gvk(group, version, kind.list_message.DESCRIPTOR.name)
    for message, gvk in _SUBRESOURCE_BODIES.values():
        yield message.DESCRIPTOR, _gvk(*gvk)
    yield core_pb2.DeleteOptions.DESCRIPTOR, None


@lru_cache(maxsize=1)
def _definitions() -> dict[str, Schema]:
    """Every definition: the messages reachable from ``_roots`` and the handwritten ones."""
    gvks = {descriptor.full_name: gvk for descriptor, gvk in _roots()}
    definitions: dict[str, Schema] = {}
    seen: set[str] = set()
    pending = [descriptor for descriptor, _ in _roots()]
    while pending:
        descriptor = pending.pop()
        if descriptor.full_name in seen:
            continue
        seen.add(descriptor.full_name)
        name = _definition_name(descriptor)
        if name in definitions:
            raise SchemaTableError(f"two messages are named {name}")
        definitions[name] = _message_schema(descriptor, gvks.get(descriptor.full_name))
        for fd in descriptor.fields:
            entry = _map_entry(fd)
            message = _message_type(entry.fields_by_name["value"] if entry is not None else fd)
            if message is not None and not is_kept_as_given(message):
                pending.append(message)
    group_versions = _group_versions()
    delete_options = definitions[_DELETE_OPTIONS]
    delete_options["x-kubernetes-group-version-kind"] = [_gvk(g, v, "DeleteOptions") for g, v in group_versions]
    delete_options.setdefault("description", "DeleteOptions may be given when deleting an object.")
    definitions.update(_handwritten_definitions(group_versions))
    return definitions


# ---------------------------------------------------------------------------------------------
# Paths: each kind's endpoints, as neutral operations rendered into v2 or v3.
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Param:
    name: str
    location: str  # "query" or "path"
    type: str  # "string", "boolean" or "integer"
    description: str
    required: bool = False


@dataclass(frozen=True)
class _Response:
    code: str
    description: str
    definition: str | None  # None: no body


@dataclass(frozen=True)
class _Operation:
    method: str  # "get", "post", "put", "patch", "delete"
    operation_id: str
    description: str
    action: str  # x-kubernetes-action
    gvk: tuple[str, str, str]
    tag: str
    params: tuple[_Param, ...]
    body: str | None  # the request body's definition
    body_required: bool
    consumes: tuple[str, ...]
    produces: tuple[str, ...]
    responses: tuple[_Response, ...]


@dataclass(frozen=True)
class _Path:
    url: str
    params: tuple[_Param, ...]
    operations: tuple[_Operation, ...]


_JSON = ("application/json",)
_LIST_PRODUCES = ("application/json", "application/json;stream=watch")
_PATCH_TYPES = ("application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
                "application/strategic-merge-patch+json")

_PRETTY = _Param("pretty", "query", "string", "If 'true', then the output is pretty printed.")
_DRY_RUN = _Param("dryRun", "query", "string",
                  "When present, indicates that modifications should not be persisted. Valid values are: "
                  "- All: all dry run stages will be processed (admission and validation run; nothing is stored).")
_FIELD_MANAGER = _Param("fieldManager", "query", "string",
                        "fieldManager is a name associated with the actor or entity that is making these changes. "
                        "It is required for apply requests (application/apply-patch+yaml).")
_FIELD_VALIDATION = _Param("fieldValidation", "query", "string",
                           "fieldValidation determines how the server should respond to unknown or duplicate fields "
                           "in the object in the request. Valid values are: - Ignore: drops them. - Warn: answers a "
                           "warning for each. - Strict: fails the request.")
_FORCE = _Param("force", "query", "boolean",
                "Force re-acquires the fields of an apply request other field managers own (a conflict otherwise). "
                "Must be unset for non-apply patch requests.")
_GRACE_PERIOD = _Param("gracePeriodSeconds", "query", "integer",
                       "The duration in seconds before the object should be deleted; 0 deletes at once. Unset: the "
                       "object's own grace period.")
_PROPAGATION_POLICY = _Param("propagationPolicy", "query", "string",
                             "Whether and how the garbage collector deletes the object's dependents: 'Orphan', "
                             "'Background' or 'Foreground'.")
_LIST_PARAMS = (
    _Param("allowWatchBookmarks", "query", "boolean",
           "allowWatchBookmarks requests watch events with type \"BOOKMARK\". Ignored if this is not a watch."),
    _Param("continue", "query", "string",
           "The continue token of the previous page of a paginated list (its metadata.continue)."),
    _Param("fieldSelector", "query", "string",
           "A selector to restrict the list of returned objects by their fields. Defaults to everything."),
    _Param("labelSelector", "query", "string",
           "A selector to restrict the list of returned objects by their labels. Defaults to everything."),
    _Param("limit", "query", "integer", "The most objects to return; the list then carries a continue token."),
    _Param("resourceVersion", "query", "string",
           "What resource versions the request may be served from: unset (the most recent), \"0\" (any) or a "
           "version (not older than it)."),
    _Param("resourceVersionMatch", "query", "string",
           "How resourceVersion applies to a list: NotOlderThan or Exact."),
    _Param("sendInitialEvents", "query", "boolean",
           "With watch: start with the current objects as ADDED events, ended by a BOOKMARK annotated "
           "\"k8s.io/initial-events-end\"."),
    _Param("timeoutSeconds", "query", "integer", "Timeout for the list or watch call."),
    _Param("watch", "query", "boolean",
           "Watch for changes to the described resources and return them as a stream of add, update, and remove "
           "notifications. Specify resourceVersion."),
)
_WRITE_PARAMS = (_DRY_RUN, _FIELD_MANAGER, _FIELD_VALIDATION)
# deletecollection: the objects a list would answer (no watch), deleted as a delete would.
_DELETE_COLLECTION_PARAMS = (
    *(p for p in _LIST_PARAMS if p.name not in ("allowWatchBookmarks", "sendInitialEvents", "watch")),
    _DRY_RUN, _GRACE_PERIOD, _PROPAGATION_POLICY,
)

_OK = "OK"
_CREATED = "Created"
_ACCEPTED = "Accepted"
_UNAUTHORIZED = _Response("401", "Unauthorized", None)

#: Kinds whose delete answers the object (its graceful deletion may leave it in place for a
#: while), as Kubernetes' pods; every other kind's delete answers a Status.
_DELETE_RETURNS_OBJECT = frozenset({"Pod"})


def _camel(group: str, version: str) -> str:
    """Kubernetes' operation id infix: CoreV1, AppsV1, SchedulingV1, ResourceV1, ..."""
    words = group.removesuffix(".k8s.io").split(".") if group else ["core"]
    return "".join(word[:1].upper() + word[1:] for word in words) + version[:1].upper() + version[1:]


def _tag(group: str, version: str) -> str:
    return f"{group.removesuffix('.k8s.io').replace('.', '_') if group else 'core'}_{version}"


def _responses(definition: str, *codes: tuple[str, str]) -> tuple[_Response, ...]:
    return (*(_Response(code, text, definition) for code, text in codes), _UNAUTHORIZED)


def _kind_paths(kind: Kind[Message, Message]) -> Iterator[_Path]:
    group, version = _group_version(kind.api_version)
    prefix = "/" + _gv_path(group, version)
    gvk = (group, version, kind.name)
    object_def = _definition_name(kind.message.DESCRIPTOR)
    list_def = _definition_name(kind.list_message.DESCRIPTOR)
    camel, tag = _camel(group, version), _tag(group, version)
    scope = "Namespaced" if kind.namespaced else ""
    name_param = _Param("name", "path", "string", f"name of the {kind.name}", required=True)
    namespace_param = _Param("namespace", "path", "string", "object name and auth scope, such as for teams and "
                                                            "projects", required=True)
    collection_params = (namespace_param, _PRETTY) if kind.namespaced else (_PRETTY,)
    item_params = (name_param, *collection_params)
    collection = f"{prefix}/namespaces/{{namespace}}/{kind.plural}" if kind.namespaced else f"{prefix}/{kind.plural}"
    item = f"{collection}/{{name}}"

    def operation(method: str, verb: str, action: str, description: str, *, suffix: str = "",
                  params: tuple[_Param, ...] = (), body: str | None = None, body_required: bool = True,
                  consumes: tuple[str, ...] = (), produces: tuple[str, ...] = _JSON,
                  responses: tuple[_Response, ...], op_gvk: tuple[str, str, str] = gvk) -> _Operation:
        return _Operation(method, f"{verb}{camel}{scope}{kind.name}{suffix}", description, action, op_gvk, tag,
                          params, body, body_required, consumes, produces, responses)

    yield _Path(collection, collection_params, (
        operation("get", "list", "list", f"list or watch objects of kind {kind.name}", params=_LIST_PARAMS,
                  produces=_LIST_PRODUCES, responses=_responses(list_def, ("200", _OK))),
        operation("post", "create", "post", f"create a {kind.name}", params=_WRITE_PARAMS, body=object_def,
                  consumes=("*/*",),
                  responses=_responses(object_def, ("200", _OK), ("201", _CREATED), ("202", _ACCEPTED))),
        _Operation("delete", f"delete{camel}Collection{scope}{kind.name}", f"delete collection of {kind.name}",
                   "deletecollection", gvk, tag, _DELETE_COLLECTION_PARAMS, _DELETE_OPTIONS, False, ("*/*",),
                   _JSON, _responses(_STATUS, ("200", _OK))),
    ))
    if kind.namespaced:
        yield _Path(f"{prefix}/{kind.plural}", (_PRETTY,), (
            _Operation("get", f"list{camel}{kind.name}ForAllNamespaces",
                       f"list or watch objects of kind {kind.name}", "list", gvk, tag, _LIST_PARAMS, None, False,
                       (), _LIST_PRODUCES, _responses(list_def, ("200", _OK))),
        ))
    deleted = object_def if kind.name in _DELETE_RETURNS_OBJECT else _STATUS
    yield _Path(item, item_params, (
        operation("get", "read", "get", f"read the specified {kind.name}",
                  responses=_responses(object_def, ("200", _OK))),
        operation("put", "replace", "put", f"replace the specified {kind.name}", params=_WRITE_PARAMS,
                  body=object_def, consumes=("*/*",),
                  responses=_responses(object_def, ("200", _OK), ("201", _CREATED))),
        operation("patch", "patch", "patch", f"partially update the specified {kind.name}",
                  params=(*_WRITE_PARAMS, _FORCE), body=_PATCH, consumes=_PATCH_TYPES,
                  responses=_responses(object_def, ("200", _OK), ("201", _CREATED))),
        operation("delete", "delete", "delete", f"delete a {kind.name}",
                  params=(_DRY_RUN, _GRACE_PERIOD, _PROPAGATION_POLICY), body=_DELETE_OPTIONS,
                  body_required=False, consumes=("*/*",),
                  responses=_responses(deleted, ("200", _OK), ("202", _ACCEPTED))),
    ))
    subresources = (("status",) if kind.has_status else ()) + kind.subresources
    for sub in subresources:
        suffix = sub[:1].upper() + sub[1:]
        url = f"{item}/{sub}"
        if sub in ("binding", "eviction"):
            message, sub_gvk = _SUBRESOURCE_BODIES[sub]
            body_def = _definition_name(message.DESCRIPTOR)
            yield _Path(url, item_params, (
                operation("post", "create", "post", f"create {sub} of a {kind.name}", suffix=suffix,
                          params=_WRITE_PARAMS, body=body_def, consumes=("*/*",), op_gvk=sub_gvk,
                          responses=_responses(body_def, ("200", _OK), ("201", _CREATED), ("202", _ACCEPTED))),
            ))
        elif sub == "finalize":
            yield _Path(url, item_params, (
                operation("put", "replace", "put", f"replace finalize of the specified {kind.name}",
                          suffix=suffix, params=_WRITE_PARAMS, body=object_def, consumes=("*/*",),
                          responses=_responses(object_def, ("200", _OK), ("201", _CREATED))),
            ))
        else:  # status, resize, scale: get, put and patch of the subresource's object
            sub_def, sub_gvk = object_def, gvk
            if sub in _SUBRESOURCE_BODIES:
                message, sub_gvk = _SUBRESOURCE_BODIES[sub]
                sub_def = _definition_name(message.DESCRIPTOR)
            yield _Path(url, item_params, (
                operation("get", "read", "get", f"read {sub} of the specified {kind.name}", suffix=suffix,
                          op_gvk=sub_gvk, responses=_responses(sub_def, ("200", _OK))),
                operation("put", "replace", "put", f"replace {sub} of the specified {kind.name}", suffix=suffix,
                          params=_WRITE_PARAMS, body=sub_def, consumes=("*/*",), op_gvk=sub_gvk,
                          responses=_responses(sub_def, ("200", _OK), ("201", _CREATED))),
                operation("patch", "patch", "patch", f"partially update {sub} of the specified {kind.name}",
                          suffix=suffix, params=(*_WRITE_PARAMS, _FORCE), body=_PATCH, consumes=_PATCH_TYPES,
                          op_gvk=sub_gvk, responses=_responses(sub_def, ("200", _OK), ("201", _CREATED))),
            ))


def _paths() -> tuple[_Path, ...]:
    return tuple(path for kind in KINDS for path in _kind_paths(kind))


def _extensions(op: _Operation) -> Schema:
    group, version, kind = op.gvk
    return {"x-kubernetes-action": op.action, "x-kubernetes-group-version-kind": _gvk(group, version, kind)}


# ---- v2 ----


def _v2_param(param: _Param) -> Schema:
    out: Schema = {"description": param.description, "in": param.location, "name": param.name,
                   "type": param.type, "uniqueItems": True}
    if param.required:
        out["required"] = True
    return out


def _v2_operation(op: _Operation) -> Schema:
    params = [_v2_param(p) for p in op.params]
    if op.body is not None:
        body: Schema = {"in": "body", "name": "body", "schema": {"$ref": _ref(op.body)}}
        if op.body_required:
            body["required"] = True
        params.insert(0, body)
    responses: Schema = {}
    for response in op.responses:
        responses[response.code] = {"description": response.description}
        if response.definition is not None:
            responses[response.code]["schema"] = {"$ref": _ref(response.definition)}
    out: Schema = {
        "description": op.description,
        "operationId": op.operation_id,
        "produces": list(op.produces),
        "responses": responses,
        "tags": [op.tag],
        **_extensions(op),
    }
    if op.consumes:
        out["consumes"] = list(op.consumes)
    if params:
        out["parameters"] = params
    return out


_SECURITY_SCHEME = {"description": "Bearer Token authentication", "in": "header", "name": "authorization",
                    "type": "apiKey"}
_INFO = {"title": "Kubernetes", "version": "unversioned"}


def _sorted_keys(value: Any) -> Any:
    """A copy of a document with the keys of every object sorted, as Kubernetes prints them: any
    encoder that keeps key order then sends the bytes ``_etag`` hashed."""
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(item) for item in value]
    return value


@lru_cache(maxsize=1)
def openapi_v2() -> dict[str, Any]:
    """The Swagger 2.0 document Kubernetes serves at /openapi/v2: every definition and every path.
    kubectl validates fields against its schema itself when the v3 document does not show that the
    server validates them (``openapi_v3``)."""
    paths: Schema = {}
    for path in _paths():
        entry: Schema = {op.method: _v2_operation(op) for op in path.operations}
        entry["parameters"] = [_v2_param(p) for p in path.params]
        paths[path.url] = entry
    return cast(dict[str, Any], _sorted_keys({
        "definitions": _definitions(),
        "info": _INFO,
        "paths": paths,
        "security": [{"BearerToken": []}],
        "securityDefinitions": {"BearerToken": _SECURITY_SCHEME},
        "swagger": "2.0",
    }))


# ---- v3 ----


def _v3_schema(value: Any) -> Any:
    """A v2 schema as OpenAPI 3.0 has it, as Kubernetes serves it: ``$ref``s point at
    ``#/components/schemas/``, and a reference with a description of its own is wrapped in
    ``allOf`` (3.0 ignores a ``$ref``'s siblings; kubectl explain prints both descriptions)."""
    if isinstance(value, list):
        return [_v3_schema(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {key: _v3_schema(item) for key, item in value.items() if key != "$ref"}
    if "$ref" in value:
        ref = {"$ref": _V3_REFS + value["$ref"].removeprefix(_V2_REFS)}
        if not out:
            return ref
        out["allOf"] = [ref]
    return out


#: Quantity and IntOrString in v3, where Kubernetes gives the JSON types a value may have.
_V3_ONE_OF = {
    _QUANTITY: {"oneOf": [{"type": "string"}, {"type": "number"}]},
    _INT_OR_STRING: {"oneOf": [{"type": "integer"}, {"type": "string"}]},
}


def _v3_definition(name: str, definition: Schema) -> Schema:
    one_of = _V3_ONE_OF.get(name)
    if one_of is not None:
        definition = {**{k: v for k, v in definition.items() if k != "type"}, **one_of}
    return cast(Schema, _v3_schema(definition))


def _v3_param(param: _Param) -> Schema:
    out: Schema = {"description": param.description, "in": param.location, "name": param.name,
                   "schema": {"type": param.type, "uniqueItems": True}}
    if param.required:
        out["required"] = True
    return out


def _v3_operation(op: _Operation) -> Schema:
    responses: Schema = {}
    for response in op.responses:
        responses[response.code] = {"description": response.description}
        if response.definition is not None:
            ref = {"$ref": _V3_REFS + response.definition}
            responses[response.code]["content"] = {media: {"schema": dict(ref)} for media in op.produces}
    out: Schema = {
        "description": op.description,
        "operationId": op.operation_id,
        "responses": responses,
        "tags": [op.tag],
        **_extensions(op),
    }
    if op.params:
        out["parameters"] = [_v3_param(p) for p in op.params]
    if op.body is not None:
        out["requestBody"] = {
            "content": {media: {"schema": {"$ref": _V3_REFS + op.body}} for media in op.consumes},
            "required": op.body_required,
        }
    return out


def _references(value: Any) -> Iterator[str]:
    """The definition names a (v2) schema or operation refers to."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref" and isinstance(item, str):
                yield item.removeprefix(_V2_REFS)
            else:
                yield from _references(item)
    elif isinstance(value, list):
        for item in value:
            yield from _references(item)


def _closure(names: set[str], definitions: dict[str, Schema]) -> list[str]:
    """``names`` and every definition they refer to, transitively, sorted."""
    seen: set[str] = set()
    pending = sorted(names)
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(_references(definitions[name]))
    return sorted(seen)


def _v3_document(group: str, version: str) -> dict[str, Any]:
    definitions = _definitions()
    prefix = "/" + _gv_path(group, version) + "/"
    paths: Schema = {}
    used: set[str] = set()
    for path in _paths():
        if not path.url.startswith(prefix):
            continue
        entry: Schema = {op.method: _v3_operation(op) for op in path.operations}
        entry["parameters"] = [_v3_param(p) for p in path.params]
        paths[path.url] = entry
        for op in path.operations:
            used.update(r.definition for r in op.responses if r.definition is not None)
            if op.body is not None:
                used.add(op.body)
    schemas = {name: _v3_definition(name, definitions[name]) for name in _closure(used, definitions)}
    return cast(dict[str, Any], _sorted_keys({
        "components": {"schemas": schemas, "securitySchemes": {"BearerToken": _SECURITY_SCHEME}},
        "info": _INFO,
        "openapi": "3.0.0",
        "paths": paths,
        "security": [{"BearerToken": []}],
    }))


def _etag(document: dict[str, Any]) -> str:
    """Kubernetes' ETag of a document, the v3 index's ``hash``: the upper-case hex SHA-512 of its
    compact JSON, ``json.dumps(doc, separators=(",", ":"))`` (the same bytes with ``sort_keys=True``:
    every object's keys are sorted, ``_sorted_keys``), which is what the server sends."""
    encoded = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha512(encoded).hexdigest().upper()


@lru_cache(maxsize=1)
def _v3_documents() -> dict[str, tuple[dict[str, Any], str]]:
    """Each served group/version's v3 document and its hash, by ``api/v1`` / ``apis/<g>/<v>``."""
    documents = {}
    for group, version in _group_versions():
        document = _v3_document(group, version)
        documents[_gv_path(group, version)] = (document, _etag(document))
    return documents


def openapi_v3_paths() -> dict[str, Any]:
    """The /openapi/v3 discovery index: each group/version's document URL, with its hash."""
    return {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={etag}"}
                      for gv, (_, etag) in _v3_documents().items()}}


def openapi_v3(group_version_path: str) -> dict[str, Any] | None:
    """The OpenAPI 3.0 document of one group/version (``api/v1``, ``apis/apps/v1``); None for a
    group/version kplane does not serve.

    ``kubectl explain`` walks the v3 schema of a kind; ``kubectl apply`` and ``create`` look for the
    ``fieldValidation`` query parameter on a kind's PATCH operation in the v3 document to decide
    whether the server validates fields (else kubectl validates against the v2 schema itself)."""
    found = _v3_documents().get(group_version_path.strip("/"))
    return found[0] if found is not None else None
