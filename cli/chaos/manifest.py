"""What a user wrote of an object: its manifest as it would be applied again, read through
metadata.managedFields (the fields each manager owns) — the user's fields, not what the apiserver
defaulted at admission, the scheduler bound or the kubelet reported.

A manager is a component when it is one of ``COMPONENT_MANAGERS`` (the names kplane's components
write under, as Kubernetes' components write under their User-Agent: machinery/client.py); any
other (``kplane``, ``kubectl-client-side-apply``, a user's name) is a user.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from google.protobuf.message import Message

from machinery import jsonconv
from machinery.kinds import Kind, object_meta

COMPONENT_MANAGERS: Final = frozenset({"kubelet", "kube-scheduler", "kube-controller-manager"})
# Server-set metadata, left out when an object has no managedFields to go by.
_SERVER_METADATA: Final = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation",
                           "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generateName")

Fields = dict[str, Any]  # a fieldsV1 tree: {"f:spec": {"f:containers": {'k:{"name":"c"}': {...}}}}


def is_user(manager: str) -> bool:
    return manager not in COMPONENT_MANAGERS


def user_entries(obj: Message) -> list[Any]:
    """The managedFields entries of users, on the object and its subresources but its status."""
    return [e for e in object_meta(obj).managed_fields if is_user(e.manager) and e.subresource != "status"]


def user_fields(obj: Message) -> Fields | None:
    """The union of the users' field sets; None when the object has no managedFields at all (the
    apiserver drops them for a value it cannot key), so the caller falls back on cleaning."""
    if not object_meta(obj).managed_fields:
        return None
    out: Fields = {}
    for e in user_entries(obj):
        try:
            _union(out, json.loads(e.fields_v1) if e.fields_v1 else {})
        except ValueError:
            continue
    return out


def latest_user_time(obj: Message, subresources: Iterable[str] = ("", "resize", "scale")) -> str:
    """The latest time a user wrote the object (or one of ``subresources``), "" if none did."""
    wanted = set(subresources)
    return max((e.time for e in user_entries(obj) if e.subresource in wanted and e.time), default="")


def manifest(kind: Kind[Message, Message], obj: Message, fields: Fields | None = None) -> dict[str, Any]:
    """``obj`` as its users would apply it: apiVersion, kind, name (and namespace) and the fields
    users own (``fields``, default the object's own ``user_fields``). An object without
    managedFields is cleaned instead: no status, no server-set metadata, no pod spec.nodeName."""
    doc = jsonconv.to_dict(obj)
    meta = doc.get("metadata", {})
    head: dict[str, Any] = {"apiVersion": kind.api_version, "kind": kind.name,
                            "metadata": {"name": meta.get("name", "")}}
    if kind.namespaced:
        head["metadata"]["namespace"] = meta.get("namespace") or "default"
    if fields is None:
        fields = user_fields(obj)
    if fields is None:
        body = {k: v for k, v in doc.items() if k not in ("metadata", "status", "apiVersion", "kind")}
        if kind.name == "Pod":
            body.get("spec", {}).pop("nodeName", None)
        rest = {k: v for k, v in meta.items() if k not in _SERVER_METADATA and k not in ("name", "namespace")}
    else:
        projected = project(doc, fields)
        body = {k: v for k, v in projected.items() if k not in ("metadata", "status", "apiVersion", "kind")}
        rest = {k: v for k, v in projected.get("metadata", {}).items()
                if k not in _SERVER_METADATA and k not in ("name", "namespace")}
    head["metadata"].update(rest)
    head.update(body)
    return head


def project(value: Any, fields: Fields) -> Any:
    """The part of JSON ``value`` that the fieldsV1 tree ``fields`` names (structured-merge-diff's
    field paths: ``f:`` a field, ``k:`` a list item by its keys, ``v:`` a set's value, ``i:`` an
    index, ``.`` the item itself). A leaf (``{}``) keeps the whole value under it."""
    children = {k: v for k, v in fields.items() if k != "."}
    if not children:
        return value
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, sub in children.items():
            if key.startswith("f:") and key[2:] in value:
                out[key[2:]] = project(value[key[2:]], sub)
        return out
    if isinstance(value, list):
        items = []
        for i, item in enumerate(value):
            sub = _item_fields(children, item, i)
            if sub is None:
                continue
            kept = project(item, sub)
            if isinstance(item, dict) and isinstance(kept, dict):
                keys = _keys_of(children, item)
                kept = {**{k: item[k] for k in keys if k in item}, **kept}
            items.append(kept)
        return items
    return value


def _item_fields(children: Fields, item: Any, index: int) -> Fields | None:
    """The field tree for list item ``item`` (at ``index``), None when no path names it."""
    for key, sub in children.items():
        kind, text = key[:2], key[2:]
        try:
            if kind == "k:" and isinstance(item, dict):
                wanted = json.loads(text)
                if isinstance(wanted, dict) and all(item.get(k) == v for k, v in wanted.items()):
                    return dict(sub)
            elif kind == "v:" and json.loads(text) == item:
                return dict(sub)
            elif kind == "i:" and int(text) == index:
                return dict(sub)
        except ValueError:
            continue
    return None


def _keys_of(children: Fields, item: dict[str, Any]) -> list[str]:
    """The key fields of a keyed list item, so a projected item still names itself."""
    for key in children:
        if key.startswith("k:"):
            try:
                wanted = json.loads(key[2:])
            except ValueError:
                continue
            if isinstance(wanted, dict) and all(item.get(k) == v for k, v in wanted.items()):
                return list(wanted)
    return []


def _union(into: Fields, other: Fields) -> None:
    for key, sub in other.items():
        if not isinstance(sub, dict):
            continue
        _union(into.setdefault(key, {}), sub)
