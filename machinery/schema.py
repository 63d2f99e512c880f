"""The schema markers of Kubernetes' API types, read from the options on kplane's proto fields
(protos/kplane/v1/options.proto): how each list merges, its list type and map keys, atomic maps
and structs, required fields and key defaults.

It is the one source of that knowledge. Strategic merge patch (``machinery.patch``) takes its
merge lists from :func:`merge_lists`; the OpenAPI documents (``apiserver.rest.openapi``) print
:func:`field_schema` and :func:`required_fields` as Kubernetes' ``x-kubernetes-*`` extensions;
server-side apply (``apiserver.fieldmanager``) reads its list and map types from those documents.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from google.protobuf import descriptor_pool
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from machinery.api import options_pb2

if TYPE_CHECKING:  # typing only: the stubs name the extensions' and upb's descriptor types
    from google._upb import _message as _upb
    from google.protobuf.descriptor_pb2 import FieldOptions, MessageOptions
    from google.protobuf.internal.extension_dict import _ExtensionFieldDescriptor

    AnyDescriptor: TypeAlias = Descriptor | _upb.Descriptor
    AnyFieldDescriptor: TypeAlias = FieldDescriptor | _upb.FieldDescriptor

__all__ = [
    "ATOMIC",
    "MAP",
    "SET",
    "FieldSchema",
    "ListStrategy",
    "SchemaField",
    "SchemaOptionError",
    "field_schema",
    "fields",
    "KEPT_AS_GIVEN",
    "is_kept_as_given",
    "lists_without_a_type",
    "merge_lists",
    "required_fields",
    "struct_type",
]

ATOMIC, SET, MAP = "atomic", "set", "map"
LIST_TYPES = (ATOMIC, SET, MAP)
PATCH_STRATEGIES = ("merge", "merge,retainKeys", "retainKeys", "replace")

_LIST_TYPE = cast("_ExtensionFieldDescriptor[FieldOptions, str]", options_pb2.list_type)
_LIST_MAP_KEYS = cast("_ExtensionFieldDescriptor[FieldOptions, Any]", options_pb2.list_map_keys)
_PATCH_STRATEGY = cast("_ExtensionFieldDescriptor[FieldOptions, str]", options_pb2.patch_strategy)
_PATCH_MERGE_KEY = cast("_ExtensionFieldDescriptor[FieldOptions, str]", options_pb2.patch_merge_key)
_MAP_TYPE = cast("_ExtensionFieldDescriptor[FieldOptions, str]", options_pb2.map_type)
_REQUIRED = cast("_ExtensionFieldDescriptor[FieldOptions, bool]", options_pb2.required)
_DEFAULT_JSON = cast("_ExtensionFieldDescriptor[FieldOptions, str]", options_pb2.default_json)
_MERGE_AS = cast("_ExtensionFieldDescriptor[FieldOptions, str]", options_pb2.merge_as)
_STRUCT_TYPE = cast("_ExtensionFieldDescriptor[MessageOptions, str]", options_pb2.struct_type)


class SchemaOptionError(ValueError):
    """A proto field's schema options contradict each other (a bug in protos/, found at import)."""


@dataclass(frozen=True)
class ListStrategy:
    """The ``patchStrategy``/``patchMergeKey`` struct tags of one list field.

    ``merge_key`` is ``""`` for a list of primitives merged as a set (e.g. ``finalizers``).
    ``retain_keys`` mirrors ``patchStrategy:"merge,retainKeys"``; it only matters to patch
    *generation* in Go, applying a ``$retainKeys`` directive works on any map.
    """

    merge_key: str
    retain_keys: bool = False


@dataclass(frozen=True)
class FieldSchema:
    """The markers of one field. Empty strings mean "no marker": a list with neither a list type
    nor a patch strategy is atomic to both patch kinds."""

    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()
    patch_strategy: str = ""
    patch_merge_key: str = ""
    map_type: str = ""
    required: bool = False
    default: Any = None
    has_default: bool = False
    merge_as: str = ""

    @property
    def merges(self) -> bool:
        """Whether strategic merge patch merges this list element by element."""
        return self.patch_strategy.startswith("merge")


def field_schema(fd: AnyFieldDescriptor) -> FieldSchema:
    """The schema markers on field ``fd``, checked for consistency."""
    options = fd.GetOptions()
    default_json = options.Extensions[_DEFAULT_JSON]
    schema = FieldSchema(
        list_type=options.Extensions[_LIST_TYPE],
        list_map_keys=tuple(options.Extensions[_LIST_MAP_KEYS]),
        patch_strategy=options.Extensions[_PATCH_STRATEGY],
        patch_merge_key=options.Extensions[_PATCH_MERGE_KEY],
        map_type=options.Extensions[_MAP_TYPE],
        required=options.Extensions[_REQUIRED],
        default=json.loads(default_json) if default_json else None,
        has_default=bool(default_json),
        merge_as=options.Extensions[_MERGE_AS],
    )
    _check(fd, schema)
    return schema


def _check(fd: AnyFieldDescriptor, schema: FieldSchema) -> None:
    problem = ""
    if schema.list_type not in ("", *LIST_TYPES):
        problem = f"list_type {schema.list_type!r} is none of {', '.join(LIST_TYPES)}"
    elif schema.patch_strategy not in ("", *PATCH_STRATEGIES):
        problem = f"patch_strategy {schema.patch_strategy!r} is none of {', '.join(PATCH_STRATEGIES)}"
    elif bool(schema.list_map_keys) != (schema.list_type == MAP):
        problem = "list_map_keys are given exactly when list_type is map"
    elif (schema.list_type or schema.merges) and not _is_list(fd):
        problem = "list_type and a merge patch strategy are for lists"
    elif schema.patch_merge_key and not schema.merges:
        problem = "patch_merge_key needs a merge patch strategy"
    elif schema.map_type not in ("", ATOMIC):
        problem = f"map_type {schema.map_type!r} is not atomic"
    elif schema.merge_as and not is_kept_as_given(fd.message_type):
        problem = "merge_as is for fields kept as given (google.protobuf.Struct)"
    elif schema.list_type == MAP and schema.merges and schema.patch_merge_key not in schema.list_map_keys:
        problem = f"the patch merge key {schema.patch_merge_key!r} is not one of the list map keys"
    if problem:
        raise SchemaOptionError(f"{fd.full_name}: {problem}")


def _is_list(fd: AnyFieldDescriptor) -> bool:
    return fd.is_repeated and not _is_map(fd)


def _is_map(fd: AnyFieldDescriptor) -> bool:
    message = fd.message_type
    return message is not None and message.GetOptions().map_entry


#: The well-known types kplane stores and returns as given: their content has no schema of kplane's.
KEPT_AS_GIVEN = frozenset({"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
                           "google.protobuf.Any"})


def is_kept_as_given(message: AnyDescriptor | None) -> bool:
    """Whether a message type is one kplane stores as given (:data:`KEPT_AS_GIVEN`)."""
    return message is not None and message.full_name in KEPT_AS_GIVEN


def struct_type(descriptor: AnyDescriptor) -> str:
    """``atomic`` if the message is ``+structType=atomic`` (replaced whole), else ``""``."""
    return descriptor.GetOptions().Extensions[_STRUCT_TYPE]


def required_fields(descriptor: AnyDescriptor) -> tuple[str, ...]:
    """The proto names of the message's required fields, in field order."""
    return tuple(fd.name for fd in descriptor.fields if field_schema(fd).required)


def _schema_message(fd: AnyFieldDescriptor) -> AnyDescriptor | None:
    """The message the content of ``fd`` is described by: its own type, or its ``merge_as``
    message when kplane keeps the field as given; ``None`` for scalars, maps and untyped fields."""
    if _is_map(fd):
        return None
    merge_as = field_schema(fd).merge_as
    if merge_as:
        found: AnyDescriptor = descriptor_pool.Default().FindMessageTypeByName(merge_as)
        return found
    message = fd.message_type
    return None if message is None or is_kept_as_given(message) else message


@dataclass(frozen=True)
class SchemaField:
    """A field below a kind: its dotted JSON path (``spec.containers[].env``), its descriptor, and
    whether it lies within a field kplane keeps as given (described by ``merge_as`` only)."""

    path: str
    fd: AnyFieldDescriptor
    within_kept_as_given: bool = False

    @property
    def is_list(self) -> bool:
        return _is_list(self.fd)


def fields(descriptor: AnyDescriptor) -> Iterator[SchemaField]:
    """Every field below message ``descriptor``, depth first (a message that holds itself is
    walked once per path)."""
    return _fields(descriptor, "", frozenset({descriptor.full_name}), False)


def _fields(descriptor: AnyDescriptor, prefix: str, visiting: frozenset[str],
            untyped: bool) -> Iterator[SchemaField]:
    for fd in descriptor.fields:
        path = f"{prefix}{fd.json_name}"
        yield SchemaField(path, fd, untyped)
        message = _schema_message(fd)
        if message is not None and message.full_name not in visiting:
            suffix = "[]." if _is_list(fd) else "."
            yield from _fields(message, path + suffix, visiting | {message.full_name},
                               untyped or bool(field_schema(fd).merge_as))


def merge_lists(descriptor: AnyDescriptor) -> dict[str, ListStrategy]:
    """JSON path -> merge strategy of every list strategic merge patch merges in a kind. A list
    not listed is replaced whole, as Go replaces a list without ``patchStrategy:"merge"``."""
    table: dict[str, ListStrategy] = {}
    for f in fields(descriptor):
        schema = field_schema(f.fd)
        if schema.merges:
            table[f.path] = ListStrategy(schema.patch_merge_key, retain_keys="retainKeys" in schema.patch_strategy)
    return table


def lists_without_a_type(descriptor: AnyDescriptor) -> list[str]:
    """The JSON paths of the lists below ``descriptor`` that say neither a list type nor a patch
    strategy (every list of a kind must say how it merges)."""
    return [f.path for f in fields(descriptor)
            if f.is_list and not (field_schema(f.fd).list_type or field_schema(f.fd).patch_strategy)]
