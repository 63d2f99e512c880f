"""The types server-side apply merges by, read from the OpenAPI documents the REST API serves
(``apiserver.rest.openapi``: its list types, map types and patch strategies, the Go markers of
Kubernetes' types that ``machinery.schema`` reads from the proto options), converted as Kubernetes
converts its OpenAPI models for structured-merge-diff (kube-openapi's schemaconv):

- an object with properties is a struct: each field merges on its own, unless the type is
  ``x-kubernetes-map-type: atomic`` (a LabelSelector, a NodeSelector, ...), then it is replaced whole;
- an object with ``additionalProperties`` is a map: each key on its own, unless atomic
  (a pod's ``nodeSelector``);
- an array is a list: ``x-kubernetes-list-type: map`` merges its items by their key fields
  (``x-kubernetes-list-map-keys``; a key left out takes its ``default``), ``set`` by value,
  ``atomic`` replaces it whole; a list without a list type merges by
  ``x-kubernetes-patch-merge-key`` when its patch strategy is ``merge`` (a set without a key),
  and is atomic otherwise;
- what kplane keeps as given (``x-kubernetes-preserve-unknown-fields``: probes, volumes, ...) is
  "deduced" from the value: objects merge key by key, lists are atomic;
- everything else (strings, numbers, quantities, times) is a scalar.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from google.protobuf.message import Message

from machinery.kinds import Kind

ATOMIC, SET, MAP = "atomic", "set", "map"


class Scalar:
    """A leaf: a string, number, boolean or null."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SCALAR"


class Untyped:
    """A value kept as given: an object is a map of untyped values, a list is atomic."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNTYPED"


SCALAR = Scalar()
UNTYPED = Untyped()


@dataclass(eq=False)
class MapType:
    """A struct (``fields``) or a map (``element`` the type of every key's value), or both."""

    fields: dict[str, Atom] = field(default_factory=dict)
    element: Atom | None = None
    atomic: bool = False
    required: tuple[str, ...] = ()  # the fields Go always prints (no omitempty)

    def of(self, name: str) -> Atom:
        """The type of the field or key ``name`` (a field not in the schema is kept as given)."""
        t = self.fields.get(name)
        if t is not None:
            return t
        return self.element if self.element is not None else UNTYPED


@dataclass(eq=False)
class ListType:
    element: Atom
    relationship: str = ATOMIC  # atomic, set or map
    keys: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)  # key field -> its default


Atom = Scalar | Untyped | MapType | ListType
_DEDUCED_MAP = MapType(element=UNTYPED)
_DEDUCED_LIST = ListType(element=UNTYPED)


def deduce(atom: Atom, value: Any) -> Atom:
    """The type of ``value`` under ``atom``: an untyped value's type is its JSON type."""
    if atom is UNTYPED:
        if isinstance(value, dict):
            return _DEDUCED_MAP
        if isinstance(value, list):
            return _DEDUCED_LIST
        return SCALAR
    return atom


class SchemaError(ValueError):
    """The OpenAPI documents describe no kind by that name (a bug: every kind is served)."""


class _Converter:
    def __init__(self, definitions: dict[str, Any]):
        self.definitions = definitions
        self.named: dict[str, Atom] = {}

    def of_definition(self, name: str) -> Atom:
        atom = self.named.get(name)
        if atom is not None:
            return atom
        schema = self.definitions.get(name)
        if schema is None:
            return UNTYPED
        if schema.get("type") == "object" and "properties" in schema:
            placeholder = MapType()  # registered first: a type may refer to itself
            self.named[name] = placeholder
            built = self.convert(schema)
            assert isinstance(built, MapType)
            placeholder.fields, placeholder.element, placeholder.atomic = built.fields, built.element, built.atomic
            placeholder.required = built.required
            return placeholder
        atom = self.named[name] = self.convert(schema)
        return atom

    @staticmethod
    def _ref_name(schema: dict[str, Any]) -> str:
        ref = schema.get("$ref", "")
        if not ref and len(schema.get("allOf", ())) == 1:
            ref = schema["allOf"][0].get("$ref", "")
        return ref.rpartition("/")[2]

    def convert(self, schema: dict[str, Any]) -> Atom:
        ref = self._ref_name(schema)
        if ref:
            atom = self.of_definition(ref)
            if schema.get("x-kubernetes-map-type") == ATOMIC and isinstance(atom, MapType) and not atom.atomic:
                return MapType(atom.fields, atom.element, True, atom.required)
            return atom
        kind = schema.get("type", "")
        if kind == "array":
            return self._list(schema)
        if kind == "object" or (not kind and schema.get("x-kubernetes-preserve-unknown-fields")):
            properties = schema.get("properties")
            additional = schema.get("additionalProperties")
            if not properties and not isinstance(additional, dict):
                return UNTYPED  # an object of any content
            return MapType(
                fields={name: self.convert(sub) for name, sub in (properties or {}).items()},
                element=self.convert(additional) if isinstance(additional, dict) else (
                    UNTYPED if schema.get("x-kubernetes-preserve-unknown-fields") else None),
                atomic=schema.get("x-kubernetes-map-type") == ATOMIC,
                required=tuple(schema.get("required") or ()))
        if kind in ("string", "integer", "number", "boolean"):
            return SCALAR
        return UNTYPED

    def _list(self, schema: dict[str, Any]) -> ListType:
        items = schema.get("items") or {}
        element = self.convert(items)
        list_type = schema.get("x-kubernetes-list-type")
        keys: tuple[str, ...] = ()
        if list_type == MAP:
            keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
        elif list_type is None and schema.get("x-kubernetes-patch-strategy") in ("merge", "merge,retainKeys"):
            merge_key = schema.get("x-kubernetes-patch-merge-key")
            list_type = MAP if merge_key else SET
            keys = (merge_key,) if merge_key else ()
        if list_type not in (SET, MAP):
            return ListType(element, ATOMIC)
        return ListType(element, list_type, keys, self._key_defaults(items, keys))

    def _key_defaults(self, items: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        item = self.definitions.get(self._ref_name(items), items)
        properties = item.get("properties") or {}
        return {k: properties[k]["default"] for k in keys if "default" in properties.get(k, {})}


@lru_cache(maxsize=1)
def _converter() -> _Converter:
    from apiserver.rest import openapi  # the served documents are the schema's one source

    return _Converter(openapi.openapi_v2()["definitions"])


@lru_cache(maxsize=None)
def _kind_type(group: str, version: str, kind_name: str) -> MapType:
    c = _converter()
    for name, schema in c.definitions.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", ()):
            if (gvk.get("group", ""), gvk.get("version"), gvk.get("kind")) == (group, version, kind_name):
                atom = c.of_definition(name)
                if isinstance(atom, MapType):
                    return atom
    raise SchemaError(f"the OpenAPI documents describe no {group}/{version} {kind_name}")


def zero(atom: MapType, depth: int = 4) -> dict[str, Any]:
    """An empty struct as Go prints it: its required structs empty, its required lists and maps
    null (a Pod's ``spec: {containers: null}``). What a create is compared with, so an Update
    that creates an object owns the containers it adds but not the list (``"."``) Go had."""
    out: dict[str, Any] = {}
    for name in atom.required:
        t = atom.fields.get(name)
        if isinstance(t, ListType) or (isinstance(t, MapType) and t.element is not None):
            out[name] = None
        elif isinstance(t, MapType) and not t.atomic and depth > 0:
            out[name] = zero(t, depth - 1)
    return out


def of_kind(kind: Kind[Message, Message]) -> MapType:
    """The type of ``kind``'s objects."""
    group, _, version = kind.api_version.rpartition("/")
    return _kind_type(group, version, kind.name)
