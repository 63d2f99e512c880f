"""Kubernetes' URL layout, for every kind kplane serves at its group and version.

``/api/v1/namespaces/default/pods/web/status`` is (POD, "default", "web", "status");
``/apis/apps/v1/deployments`` lists Deployments of every namespace; ``/api/v1/nodes/node-1`` is a
cluster-scoped Node. ``/api/v1/namespaces/NAME`` is the Namespace itself and
``/api/v1/namespaces/NAME/status|finalize`` its subresources, as in Kubernetes. The deprecated
``/api/v1/watch/...`` paths are the same target with ``watch=true``.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import Message

from machinery import errors
from machinery.kinds import KINDS, NAMESPACE, Kind

# Subresources every kind with status has; beyond them, Kind.subresources.
STATUS = "status"
# Subresources kplane does not emulate (its containers run no process, its nodes serve no
# kubelet API): answered 501, never left hanging.
NOT_EMULATED = {"Pod": ("exec", "attach", "portforward", "proxy", "log", "ephemeralcontainers"), "Node": ("proxy",)}


def group_version(kind: Kind[Message, Message]) -> tuple[str, str]:
    """("", "v1") for core kinds, ("apps", "v1") for apps/v1 ones."""
    group, _, version = kind.api_version.rpartition("/")
    return group, version


def _collect() -> dict[tuple[str, str], dict[str, Kind[Message, Message]]]:
    out: dict[tuple[str, str], dict[str, Kind[Message, Message]]] = {}
    for k in KINDS:
        out.setdefault(group_version(k), {})[k.plural] = k
    return out


# (group, version) -> plural -> kind, in KINDS' order.
RESOURCES = _collect()


def group_versions() -> list[tuple[str, str]]:
    """Every (group, version) served, core ("", "v1") first."""
    return list(RESOURCES)


def subresources(kind: Kind[Message, Message]) -> tuple[str, ...]:
    """The subresources served for ``kind`` (status first when it has one)."""
    return ((STATUS,) if kind.has_status else ()) + kind.subresources


def prefix(group: str, version: str) -> str:
    return f"/api/{version}" if not group else f"/apis/{group}/{version}"


def path_of(kind: Kind[Message, Message], namespace: str = "", name: str = "", subresource: str = "") -> str:
    """The URL of a kind's collection, one object or one subresource."""
    parts = [prefix(*group_version(kind))]
    if kind.namespaced and namespace:
        parts += ["namespaces", namespace]
    parts.append(kind.plural)
    if name:
        parts.append(name)
        if subresource:
            parts.append(subresource)
    return "/".join(parts)


@dataclass(frozen=True)
class Target:
    """What a resource URL names."""

    kind: Kind[Message, Message]
    namespace: str  # "" for cluster-scoped kinds and lists across namespaces
    name: str  # "" for the collection
    subresource: str = ""
    watch_path: bool = False  # the deprecated /watch/ form

    @property
    def all_namespaces(self) -> bool:
        return self.kind.namespaced and not self.namespace


class NotAResource(Exception):
    """The path is not a resource URL (discovery, or nothing)."""


def _not_found() -> errors.NotFound:
    return errors.NotFound("the server could not find the requested resource")


def parse(path: str) -> Target:
    """The target of a resource URL; NotFound for a group, version, kind or subresource not
    served; NotAResource for paths that name no resource (``/api/v1`` itself, ``/version``)."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise NotAResource(path)
    if not rest:
        raise NotAResource(path)
    kinds = RESOURCES.get((group, version))
    if kinds is None:
        raise _not_found()
    watch_path = rest[0] == "watch"
    if watch_path:
        rest = rest[1:]
        if not rest:
            raise _not_found()
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in (STATUS, "finalize")):
        # /namespaces/NS/<resource>[/NAME[/SUB]]; /namespaces/NAME/status|finalize is the Namespace's.
        namespace, rest = rest[1], rest[2:]
        kind = kinds.get(rest[0])
        if kind is None or not kind.namespaced:
            raise _not_found()
    else:
        kind = kinds.get(rest[0])
        if kind is None or (kind.namespaced and len(rest) > 1 and kind is not NAMESPACE):
            # A namespaced kind's object is only ever under /namespaces/NS/.
            raise _not_found()
    if len(rest) > 3:
        raise _not_found()
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in subresources(kind) and sub not in NOT_EMULATED.get(kind.name, ()):
        raise _not_found()
    if watch_path and sub:
        raise _not_found()
    return Target(kind, namespace, name, sub, watch_path)
