"""meta.k8s.io/v1 Table responses: what ``kubectl get`` prints, computed by the server.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the rows as they
come, so the columns and cells are ``machinery.printers``' — the ones ``kplane get`` prints —
and ``kubectl get pods -o wide`` and ``kplane get pods -o wide`` show the same columns (kubectl
hides the priority-1 columns without ``-o wide`` and adds NAMESPACE itself with ``-A``). Each row
carries the object as ``includeObject`` asks: its metadata (PartialObjectMetadata, the default),
the whole object, or nothing. In a watch, every event's object is a one-row Table with the column
definitions (kubectl prints the header once, as long as the columns do not change); those frames
are encoded once per event and shared by every watcher of the same kind and options.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Iterable

from google.protobuf.message import Message

from apiserver.rest import codec
from apiserver.watchcache import FrameEncoding
from machinery import errors, jsonconv, printers
from machinery.kinds import Kind, object_meta

INCLUDE_OBJECT = ("None", "Metadata", "Object")


def column_definitions(kind: Kind[Message, Message]) -> list[dict[str, Any]]:
    return [{"name": c.name, "type": c.type, "format": c.format, "description": c.description,
             "priority": c.priority} for c in printers.columns(kind)]


def _typed(cell: str, type_: str) -> Any:
    if type_ == "integer" and cell.lstrip("-").isdigit():
        return int(cell)
    if type_ == "boolean" and cell in ("true", "false"):
        return cell == "true"
    return cell


def row(kind: Kind[Message, Message], obj: Message, include_object: str, version: str = "v1") -> dict[str, Any]:
    cols = printers.columns(kind)
    out: dict[str, Any] = {"cells": [_typed(c, col.type) for c, col in zip(printers.cells(kind, obj), cols,
                                                                           strict=True)]}
    if include_object == "Object":
        out["object"] = codec.to_json(obj, kind.api_version, kind.name)
    elif include_object == "Metadata":
        out["object"] = {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{version}",
                         "metadata": jsonconv.to_dict(object_meta(obj))}
    return out


def table(kind: Kind[Message, Message], objs: Iterable[Message], output: codec.Output,
          list_meta: dict[str, Any] | None = None) -> dict[str, Any]:
    include = output.include_object
    if include not in INCLUDE_OBJECT:
        raise errors.BadRequest(f'includeObject must be one of {", ".join(INCLUDE_OBJECT)}, got "{include}"')
    return {"kind": "Table", "apiVersion": f"meta.k8s.io/{output.version}", "metadata": list_meta or {},
            "columnDefinitions": column_definitions(kind),
            "rows": [row(kind, o, include, output.version) for o in objs]}


@lru_cache(maxsize=None)
def watch_encoding(kind: Kind[Message, Message], version: str, include_object: str) -> FrameEncoding:
    """The watch frames of a Table watch of ``kind``: each event's object a one-row Table (a
    BOOKMARK's object stays the plain object, which carries only the resourceVersion)."""
    output = codec.Output("table", codec.JSON, version, include_object)

    def encode(type_: str, obj: Message) -> bytes:
        body = codec.to_json(obj, kind.api_version, kind.name) if type_ == "BOOKMARK" else table(kind, [obj], output)
        return json.dumps({"type": type_, "object": body}, separators=(",", ":")).encode() + b"\n"

    return FrameEncoding(f"table/{kind.name}/{version}/{include_object}", encode)
