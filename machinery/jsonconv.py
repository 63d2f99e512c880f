"""Kubernetes JSON <-> kplane protobuf messages.

Protobuf's own JSON mapping already yields Kubernetes' field names (the protos use Kubernetes'
names in snake_case, with ``json_name`` where Kubernetes differs). This module adds what
Kubernetes JSON needs beyond it:

- int64 fields print as JSON numbers (protobuf prints them as strings);
- quantities (``(kplane.v1.quantity)`` fields) accept bare numbers: ``cpu: 2``;
- IntOrString fields (``(kplane.v1.int_or_string)``) accept numbers and print integers as numbers;
- JSON kept as text (``(kplane.v1.raw_json)``: a managedFields entry's ``fieldsV1``) is read and
  printed as the JSON object it holds;
- ``null`` means "not set", as in Kubernetes JSON (``creationTimestamp: null``);
- a field the schema does not have is rejected with its full path (Kubernetes' strict decoding),
  never dropped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar, cast

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.descriptor_pb2 import FieldOptions
from google.protobuf.message import Message

from machinery.api import options_pb2

if TYPE_CHECKING:
    from google._upb import _message as _upb
    from google.protobuf.internal.extension_dict import _ExtensionFieldDescriptor

    # A message's DESCRIPTOR is upb's (the C implementation protobuf runs on) or the pure-Python
    # one: two classes in the stubs, with the same fields.
    AnyDescriptor: TypeAlias = Descriptor | _upb.Descriptor
    AnyFieldDescriptor: TypeAlias = FieldDescriptor | _upb.FieldDescriptor

# protoc's .pyi declares the extensions as plain FieldDescriptors; ``Extensions[...]`` is typed by
# the typed extension handle they are.
_QUANTITY = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.quantity)
_INT_OR_STRING = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.int_or_string)
_RAW_JSON = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.raw_json)

_INT64_TYPES = {
    FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED64, FieldDescriptor.TYPE_SFIXED64,
}
_INT_TYPES = _INT64_TYPES | {
    FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_FIXED32, FieldDescriptor.TYPE_SFIXED32,
}
_M = TypeVar("_M", bound=Message)
_STRUCT = "google.protobuf.Struct"
# Kept as given, whatever their content (a probe, a volume): JSON objects of any shape.
OPAQUE_TYPES = frozenset({_STRUCT, "google.protobuf.Value", "google.protobuf.ListValue", "google.protobuf.Any"})


class DecodeError(ValueError):
    """The JSON document does not fit the kind's schema; the message names the field path."""


@dataclass(frozen=True)
class Field:
    json_name: str
    proto_name: str
    repeated: bool
    is_map: bool
    # For maps: the value field; for others: the field itself.
    value: AnyFieldDescriptor
    message: AnyDescriptor | None  # message type of the (value) field, if any and not opaque
    opaque: bool  # Struct/Value/Any: stored as given
    struct: bool  # a Struct (opaque, and must be a JSON object)
    int64: bool
    integer: bool
    quantity: bool
    int_or_string: bool
    raw_json: bool  # a string holding a JSON object: the object in Kubernetes JSON
    kind_name: str  # human name of the expected type, for errors
    plain: bool  # a string, bool or integer printed as protobuf holds it (no message, no option)


def _describe(fd: AnyFieldDescriptor) -> str:
    if fd.type == FieldDescriptor.TYPE_MESSAGE:
        return "an object"
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return "a boolean"
    if fd.type in _INT_TYPES:
        return "an integer"
    return "a string"


def _message_type(fd: AnyFieldDescriptor) -> AnyDescriptor | None:
    """The message type of a message field; None for any other field."""
    return fd.message_type if fd.type == FieldDescriptor.TYPE_MESSAGE else None


@lru_cache(maxsize=None)
def _plan(descriptor: AnyDescriptor) -> dict[str, Field]:
    """The fields of a message, by JSON name (and proto name, which protobuf also accepts)."""
    plan: dict[str, Field] = {}
    for fd in descriptor.fields:
        fd_message = _message_type(fd)
        entry = fd_message if fd_message is not None and fd_message.GetOptions().map_entry else None
        is_map = entry is not None
        value = entry.fields_by_name["value"] if entry is not None else fd
        value_message = _message_type(value)
        opaque = value_message is not None and value_message.full_name in OPAQUE_TYPES
        message = value_message if not opaque else None
        opts = fd.GetOptions()
        plan[fd.json_name] = Field(
            json_name=fd.json_name,
            proto_name=fd.name,
            repeated=fd.is_repeated and not is_map,
            is_map=is_map,
            value=value,
            message=message,
            opaque=opaque,
            struct=value_message is not None and value_message.full_name == _STRUCT,
            int64=value.type in _INT64_TYPES,
            integer=value.type in _INT_TYPES,
            quantity=opts.Extensions[_QUANTITY],
            int_or_string=opts.Extensions[_INT_OR_STRING],
            raw_json=opts.Extensions[_RAW_JSON],
            kind_name=_describe(value),
            plain=value_message is None and not (opts.Extensions[_INT_OR_STRING] or opts.Extensions[_RAW_JSON]),
        )
    return plan


# ---------------------------------------------------------------- decoding


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _normalize_scalar(f: Field, value: Any, path: str) -> Any:
    if f.raw_json:
        if not isinstance(value, dict):
            raise DecodeError(f'invalid value for field "{path}": expected an object, got {_json_type(value)}')
        return json.dumps(value, separators=(",", ":"))
    if f.quantity or f.int_or_string:
        if isinstance(value, bool):
            raise DecodeError(f'invalid value for field "{path}": expected a quantity or string, got {value!r}')
        if isinstance(value, (int, float)):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            return str(value)
        if not isinstance(value, str):
            raise DecodeError(f'invalid value for field "{path}": expected a string, got {_json_type(value)}')
        return value
    if f.message is not None:
        if not isinstance(value, dict):
            raise DecodeError(f'invalid value for field "{path}": expected an object, got {_json_type(value)}')
        return _normalize(f.message, value, path)
    if f.opaque:
        if f.struct and not isinstance(value, dict):
            raise DecodeError(f'invalid value for field "{path}": expected an object, got {_json_type(value)}')
        return value
    if f.integer:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (
                isinstance(value, float) and not value.is_integer()):
            raise DecodeError(f'invalid value for field "{path}": expected an integer, got {_json_repr(value)}')
        return int(value)
    if f.value.type == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise DecodeError(f'invalid value for field "{path}": expected a boolean, got {_json_repr(value)}')
        return value
    if f.value.type in (FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_BYTES):
        if not isinstance(value, str):
            raise DecodeError(f'invalid value for field "{path}": expected a string, got {_json_repr(value)}')
        return value
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if value is None:
        return "null"
    return "a string"


def _json_repr(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return _json_type(value)
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value).lower() if isinstance(value, bool) else repr(value)


def _normalize(descriptor: AnyDescriptor, data: dict[str, Any], path: str) -> dict[str, Any]:
    plan = _plan(descriptor)
    out: dict[str, Any] = {}
    for key, value in data.items():
        f = plan.get(key)
        if f is None:
            raise DecodeError(f'strict decoding error: unknown field "{_join(path, str(key))}"')
        if value is None:
            continue
        here = _join(path, key)
        if f.repeated:
            if not isinstance(value, list):
                raise DecodeError(f'invalid value for field "{here}": expected an array, got {_json_type(value)}')
            out[key] = [_normalize_scalar(f, item, f"{here}[{i}]") for i, item in enumerate(value)
                        if item is not None or f.opaque]
        elif f.is_map:
            if not isinstance(value, dict):
                raise DecodeError(f'invalid value for field "{here}": expected an object, got {_json_type(value)}')
            out[key] = {str(k): _normalize_scalar(f, v, f"{here}[{k}]") for k, v in value.items() if v is not None}
        else:
            out[key] = _normalize_scalar(f, value, here)
    return out


def from_dict(message_type: type[_M], data: Any, path: str = "") -> _M:
    """Decode a Kubernetes JSON document (already parsed) into ``message_type``."""
    if not isinstance(data, dict):
        raise DecodeError(f"expected a JSON object, got {_json_type(data)}")
    normalized = _normalize(message_type.DESCRIPTOR, data, path)
    msg = message_type()
    _fill(msg, normalized, path)
    return msg


def _fill(msg: Message, data: dict[str, Any], path: str) -> None:
    """Set ``msg``'s fields from a document ``_normalize`` checked and converted: straight onto
    the message, field by field (protobuf's ParseDict would check every value again)."""
    plan = _plan(msg.DESCRIPTOR)
    for key, value in data.items():
        f = plan[key]
        here = _join(path, key)
        target = getattr(msg, f.proto_name)
        try:
            if f.is_map:
                for k, v in value.items():
                    if f.message is not None:
                        _fill(target[k], v, f"{here}[{k}]")
                    elif f.opaque:
                        _parse_opaque(v, target[k], f"{here}[{k}]")
                    else:
                        target[k] = v
            elif f.repeated:
                if f.message is not None:
                    for i, v in enumerate(value):
                        _fill(target.add(), v, f"{here}[{i}]")
                elif f.opaque:
                    for i, v in enumerate(value):
                        _parse_opaque(v, target.add(), f"{here}[{i}]")
                else:
                    target.extend(value)
            elif f.message is not None:
                target.SetInParent()
                _fill(target, value, here)
            elif f.opaque:
                _parse_opaque(value, target, here)
            else:
                setattr(msg, f.proto_name, value)
        except (ValueError, TypeError) as exc:  # an integer out of the field's range
            if isinstance(exc, DecodeError):
                raise
            raise DecodeError(f'invalid value for field "{here}": {exc}') from None


def _parse_opaque(value: Any, target: Message, path: str) -> None:
    """A Struct, Value, ListValue or Any, from its JSON as protobuf reads it."""
    try:
        json_format.ParseDict(value, target)
    except json_format.ParseError as exc:
        raise DecodeError(f'invalid value for field "{path}": ' + str(exc).replace("\n", " ")) from None


def _prune(descriptor: AnyDescriptor, data: dict[str, Any], path: str, unknown: list[str]) -> dict[str, Any]:
    plan = _plan(descriptor)
    out: dict[str, Any] = {}
    for key, value in data.items():
        f = plan.get(key)
        here = _join(path, str(key))
        if f is None:
            unknown.append(here)
            continue
        if f.message is not None and f.repeated and isinstance(value, list):
            value = [_prune(f.message, v, f"{here}[{i}]", unknown) if isinstance(v, dict) else v
                     for i, v in enumerate(value)]
        elif f.message is not None and f.is_map and isinstance(value, dict):
            value = {k: _prune(f.message, v, f"{here}[{k}]", unknown) if isinstance(v, dict) else v
                     for k, v in value.items()}
        elif f.message is not None and not f.repeated and not f.is_map and isinstance(value, dict):
            value = _prune(f.message, value, here, unknown)
        out[key] = value
    return out


def prune_unknown(message_type: type[Message], data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``data`` without the fields ``message_type``'s schema does not have, and their paths
    (``spec.containers[0].colour``): Kubernetes' ``fieldValidation=Ignore`` and ``Warn`` drop
    them, where ``from_dict`` (``Strict``) refuses them."""
    unknown: list[str] = []
    return _prune(message_type.DESCRIPTOR, data, "", unknown), unknown


# ---------------------------------------------------------------- encoding


def _integral_numbers(value: Any) -> Any:
    """Struct numbers are doubles; print 8080.0 as 8080 as the user wrote it."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral_numbers(v) for v in value]
    return value


def to_dict(msg: Message, always: Mapping[str, tuple[str, ...]] | None = None) -> dict[str, Any]:
    """The message as a Kubernetes JSON document (a dict ready for json.dumps / yaml.dump).

    ``always`` (message full name -> JSON names of scalar fields) names the fields Go prints even
    when zero (no ``omitempty``: a ContainerStatus' ``restartCount: 0``), which proto3 leaves out;
    they are added with their zero value, as Kubernetes' JSON has them."""
    return _encode(msg, always or {})


@lru_cache(maxsize=None)
def _fields_by_proto_name(descriptor: AnyDescriptor) -> dict[str, Field]:
    return {f.proto_name: f for f in _plan(descriptor).values()}


def _encode(msg: Message, always: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    """One pass over the fields set (protobuf's MessageToDict, then a pass to print them as
    Kubernetes does, cost twice as much): JSON names in field order, int64 and integral
    IntOrStrings as numbers, maps sorted by key, raw JSON as its object, Structs as their JSON."""
    descriptor = msg.DESCRIPTOR
    plan = _fields_by_proto_name(descriptor)
    out: dict[str, Any] = {}
    for fd, value in msg.ListFields():
        f = plan[fd.name]
        out[f.json_name] = encode_field(f, value, always)
    zeros = always.get(descriptor.full_name) if always else None
    if zeros:
        named = _plan(descriptor)
        for json_name in zeros:
            z = named.get(json_name)
            if z is not None and json_name not in out and z.message is None and not z.repeated and not z.is_map:
                out[json_name] = zero_value(z)
    return out


def fields_of(descriptor: AnyDescriptor) -> dict[str, Field]:
    """A message's fields by proto name, as this module prints and reads them."""
    return _fields_by_proto_name(descriptor)


MISSING: Any = object()  # field_json's "not printed"


def field_json(msg: Message, fd: AnyFieldDescriptor, always: Mapping[str, tuple[str, ...]]) -> Any:
    """One field of ``msg`` as ``to_dict(msg, always)`` prints it, or ``MISSING`` where it leaves the
    field out: proto3's unset (a zero scalar without presence, an empty list or map, an unset
    message) unless ``always`` names the scalar, which then prints its zero value."""
    f = _fields_by_proto_name(msg.DESCRIPTOR)[fd.name]
    value = getattr(msg, fd.name)
    if fd.is_repeated:  # lists and maps
        present = len(value) > 0
    elif fd.has_presence:
        present = msg.HasField(fd.name)
    else:
        present = bool(value)
    if present:
        return encode_field(f, value, always)
    if f.message is None and not fd.is_repeated and f.json_name in always.get(msg.DESCRIPTOR.full_name, ()):
        return zero_value(f)
    return MISSING


def encode_field(f: Field, value: Any, always: Mapping[str, tuple[str, ...]]) -> Any:
    """One set field's value (a scalar, a message, a repeated field or a map) in Kubernetes JSON."""
    if f.is_map:
        keys = sorted(value)
        return {k: value[k] for k in keys} if f.plain else {k: _encode_value(f, value[k], always) for k in keys}
    if f.repeated:
        return list(value) if f.plain else [_encode_value(f, v, always) for v in value]
    return value if f.plain else _encode_value(f, value, always)


def _encode_value(f: Field, value: Any, always: Mapping[str, tuple[str, ...]]) -> Any:
    if f.message is not None:
        return _encode(value, always)
    if f.opaque:
        return _integral_numbers(json_format.MessageToDict(value))
    if f.raw_json:
        return json.loads(value)
    if f.int_or_string and value.lstrip("-").isdigit():
        return int(value)
    return value


# Scalar fields Kubernetes' Go types print even when zero (no ``omitempty``; the OpenAPI documents
# list them as required, and the official clients' models refuse an object without them), by
# message: ``to_dict(msg, always=KUBERNETES_ALWAYS)`` prints them as Kubernetes does. The REST API
# serves its JSON so; ``kplane get -o json`` keeps protobuf's shorter form.
KUBERNETES_ALWAYS: dict[str, tuple[str, ...]] = {
    "kplane.v1.ContainerStatus": ("name", "ready", "restartCount", "image", "imageID"),
    "kplane.v1.ContainerStateTerminated": ("exitCode",),
    "kplane.v1.PodCondition": ("type", "status"),
    "kplane.v1.NodeCondition": ("type", "status"),
    "kplane.v1.NamespaceCondition": ("type", "status"),
    "kplane.v1.Condition": ("type", "status", "reason", "message", "lastTransitionTime"),
    "kplane.v1.NodeSystemInfo": ("machineID", "systemUUID", "bootID", "kernelVersion", "osImage",
                                 "containerRuntimeVersion", "kubeletVersion", "kubeProxyVersion", "operatingSystem",
                                 "architecture"),
    "kplane.v1.NodeAddress": ("type", "address"),
    "kplane.v1.Taint": ("key", "effect"),
    "kplane.v1.OwnerReference": ("apiVersion", "kind", "name", "uid"),
    "kplane.v1.ReplicaSetStatus": ("replicas",),
    "kplane.v1.ScaleStatus": ("replicas",),
    "kplane.v1.ContainerPort": ("containerPort",),
    "kplane.v1.PodDisruptionBudgetStatus": ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"),
    "kplane.v1.PriorityClass": ("value",),
}


def zero_value(f: Field) -> Any:
    if f.integer:
        return 0
    if f.value.type == FieldDescriptor.TYPE_BOOL:
        return False
    return ""
