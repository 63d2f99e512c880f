"""The Kubernetes protobuf request bodies kubectl's typed clients send, read into JSON documents.

kubectl's built-in clientsets post ``application/vnd.kubernetes.protobuf`` bodies (everything else
it sends is JSON): the access reviews of ``kubectl auth can-i``, the Eviction and DeleteOptions of
``kubectl drain``. Their wire form is Kubernetes' envelope — the magic ``k8s\\0`` and a
runtime.Unknown (typeMeta = 1, raw = 2) whose raw bytes are the object in the field numbers of
Kubernetes' generated.proto — so a small schema per message, below, is all kplane needs to read
them. Responses are JSON: those clients accept it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machinery import errors

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


@dataclass(frozen=True)
class F:
    """One field: its JSON name, its type (string, int, bool, message, map), and for a message its
    schema."""

    name: str
    type: str = "string"
    schema: "dict[int, F] | None" = None
    repeated: bool = False


_OBJECT_META = {1: F("name"), 2: F("generateName"), 3: F("namespace"), 5: F("uid"), 6: F("resourceVersion"),
                11: F("labels", "map"), 12: F("annotations", "map")}
_PRECONDITIONS = {1: F("uid"), 2: F("resourceVersion")}
_DELETE_OPTIONS = {1: F("gracePeriodSeconds", "int"), 2: F("preconditions", "message", _PRECONDITIONS),
                   3: F("orphanDependents", "bool"), 4: F("propagationPolicy"), 5: F("dryRun", repeated=True)}
_RESOURCE_ATTRIBUTES = {1: F("namespace"), 2: F("verb"), 3: F("group"), 4: F("version"), 5: F("resource"),
                        6: F("subresource"), 7: F("name")}
_NON_RESOURCE_ATTRIBUTES = {1: F("path"), 2: F("verb")}
_SSAR_SPEC = {1: F("resourceAttributes", "message", _RESOURCE_ATTRIBUTES),
              2: F("nonResourceAttributes", "message", _NON_RESOURCE_ATTRIBUTES)}
_SAR_SPEC = {**_SSAR_SPEC, 3: F("user"), 4: F("groups", repeated=True), 6: F("uid")}

# (apiVersion, kind) -> the object's schema
SCHEMAS: dict[tuple[str, str], dict[int, F]] = {
    ("policy/v1", "Eviction"): {1: F("metadata", "message", _OBJECT_META),
                                2: F("deleteOptions", "message", _DELETE_OPTIONS)},
    ("meta.k8s.io/v1", "DeleteOptions"): _DELETE_OPTIONS,
    ("v1", "DeleteOptions"): _DELETE_OPTIONS,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): {1: F("metadata", "message", _OBJECT_META),
                                                             2: F("spec", "message", _SSAR_SPEC)},
    ("authorization.k8s.io/v1", "SubjectAccessReview"): {1: F("metadata", "message", _OBJECT_META),
                                                         2: F("spec", "message", _SAR_SPEC)},
    ("authentication.k8s.io/v1", "SelfSubjectReview"): {1: F("metadata", "message", _OBJECT_META)},
}


class _Malformed(ValueError):
    pass


class NotRead(Exception):
    """A protobuf body of a kind kplane has no schema for (the caller answers 415)."""


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if i >= len(data):
            raise _Malformed("truncated varint")
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise _Malformed("varint too long")


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a protobuf message: ints for varints, bytes for the rest."""
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            if i + size > len(data):
                raise _Malformed("truncated field")
            out.append((number, data[i:i + size]))
            i += size
        elif wire == 1:
            out.append((number, data[i:i + 8]))
            i += 8
        elif wire == 5:
            out.append((number, data[i:i + 4]))
            i += 4
        else:
            raise _Malformed(f"wire type {wire}")
    return out


def _text(v: int | bytes) -> str:
    if not isinstance(v, bytes):
        raise _Malformed("a string field holds a number")
    return v.decode("utf-8")


def _int(v: int | bytes) -> int:
    if not isinstance(v, int):
        raise _Malformed("an integer field holds bytes")
    return v - (1 << 64) if v >= 1 << 63 else v


def _message(data: bytes, schema: dict[int, F]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, value in fields(data):
        f = schema.get(number)
        if f is None:
            continue  # a field kplane does not act on
        if f.type == "message":
            if not isinstance(value, bytes) or f.schema is None:
                raise _Malformed(f"{f.name} is not a message")
            item: Any = _message(value, f.schema)
        elif f.type == "map":
            if not isinstance(value, bytes):
                raise _Malformed(f"{f.name} is not a map entry")
            entry = dict(fields(value))
            out.setdefault(f.name, {})[_text(entry.get(1, b""))] = _text(entry.get(2, b""))
            continue
        elif f.type == "int":
            item = _int(value)
        elif f.type == "bool":
            item = bool(_int(value))
        else:
            item = _text(value)
        if f.repeated:
            out.setdefault(f.name, []).append(item)
        else:
            out[f.name] = item
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A Kubernetes protobuf body as the JSON document it stands for (apiVersion and kind first);
    BadRequest when malformed, NotRead for a kind not in ``SCHEMAS``."""
    if not body.startswith(MAGIC):
        raise errors.BadRequest("the protobuf body does not start with Kubernetes' magic number (k8s\\0)")
    try:
        envelope = dict(fields(body[len(MAGIC):]))
        meta_bytes = envelope.get(1, b"")
        type_meta = dict(fields(meta_bytes)) if isinstance(meta_bytes, bytes) else {}
        api_version, kind = _text(type_meta.get(1, b"")), _text(type_meta.get(2, b""))
        schema = SCHEMAS.get((api_version, kind))
        if schema is None:
            raise NotRead(f"kplane reads protobuf bodies only for {', '.join(sorted({k for _, k in SCHEMAS}))}, "
                          f"not {kind or 'this'} ({api_version}); send application/json")
        raw = envelope.get(2, b"")
        if not isinstance(raw, bytes):
            raise _Malformed("the raw object is not bytes")
        return {"apiVersion": api_version, "kind": kind, **_message(raw, schema)}
    except (_Malformed, UnicodeDecodeError) as exc:
        raise errors.BadRequest(f"the protobuf body is malformed: {exc}") from None
