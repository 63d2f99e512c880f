"""Discovery: /version, /api, /api/v1, /apis, /apis/{group}, /apis/{group}/{version}, and the
aggregated discovery documents (apidiscovery.k8s.io/v2 APIGroupDiscoveryList) that kubectl 1.30+
asks /api and /apis for first, falling back to the legacy documents when a client does not ask.

The resources are the kinds of ``machinery.kinds.KINDS`` at their group and version, with their
subresources (``paths.subresources``) and kubectl's short names, plus the access reviews
``kubectl auth can-i`` and ``kubectl auth whoami`` post (``access.py``). Subresources kplane does
not emulate (exec, logs, ...) are not listed: discovery says what is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.protobuf.message import Message

from apiserver.rest import paths
from machinery.kinds import Kind
from machinery.version import Version

OBJECT_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
# kubectl get all: the kinds Kubernetes puts in the "all" category.
_ALL = {"Pod", "ReplicaSet", "Deployment"}


@dataclass(frozen=True)
class _Sub:
    group: str
    version: str
    kind: str
    verbs: tuple[str, ...]


def _subresource(kind: Kind[Message, Message], sub: str) -> _Sub:
    group, version = paths.group_version(kind)
    if sub in ("status", "resize"):
        return _Sub(group, version, kind.name, ("get", "patch", "update"))
    if sub == "scale":
        return _Sub("autoscaling", "v1", "Scale", ("get", "patch", "update"))
    if sub == "binding":
        return _Sub("", "v1", "Binding", ("create",))
    if sub == "eviction":
        return _Sub("policy", "v1", "Eviction", ("create",))
    if sub == "finalize":
        return _Sub(group, version, kind.name, ("update",))
    raise KeyError(sub)


@dataclass(frozen=True)
class Extra:
    """A resource served beside the kinds (the access reviews): create only, no storage."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = False
    verbs: tuple[str, ...] = ("create",)


EXTRAS = (
    Extra("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    Extra("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview"),
    Extra("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview"),
)


def version(release: Version) -> dict[str, Any]:
    """/version of an apiserver at ``release`` (its --emulated-version). kplane's emulated release
    stands in for that release's binary, so gitVersion is the release's; emulationMajor/Minor say
    the same, as KEP-4330's apiserver reports its emulated version."""
    major, minor = str(release.major), str(release.minor)
    return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
            "gitVersion": release.git_version, "gitCommit": "kplane",
            "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z", "goVersion": "go1.24 (kplane: Python)",
            "compiler": "gc", "platform": "linux/amd64"}


def _group_versions() -> list[tuple[str, str]]:
    out = paths.group_versions()
    for e in EXTRAS:
        if (e.group, e.version) not in out:
            out.append((e.group, e.version))
    return out


def groups() -> list[str]:
    """The named groups served (not the core group), in the order /apis lists them."""
    seen: list[str] = []
    for g, _ in _group_versions():
        if g and g not in seen:
            seen.append(g)
    return seen


def served(group: str, version: str) -> bool:
    return (group, version) in _group_versions()


def api_versions(server_address: str) -> dict[str, Any]:
    """GET /api: APIVersions."""
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _versions_of(group: str) -> list[str]:
    return [v for g, v in _group_versions() if g == group]


def api_group(group: str) -> dict[str, Any]:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in _versions_of(group)]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
            "preferredVersion": versions[0]}


def api_group_list() -> dict[str, Any]:
    """GET /apis: APIGroupList."""
    out = []
    for g in groups():
        doc = api_group(g)
        del doc["kind"], doc["apiVersion"]
        out.append(doc)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}


def resource_list(group: str, version: str) -> dict[str, Any]:
    """GET /api/v1, /apis/{group}/{version}: APIResourceList."""
    resources: list[dict[str, Any]] = []
    for kind in paths.RESOURCES.get((group, version), {}).values():
        r: dict[str, Any] = {"name": kind.plural, "singularName": kind.name.lower(), "namespaced": kind.namespaced,
                             "kind": kind.name, "verbs": OBJECT_VERBS}
        if kind.short_names:
            r["shortNames"] = list(kind.short_names)
        if kind.name in _ALL:
            r["categories"] = ["all"]
        resources.append(r)
        for sub in paths.subresources(kind):
            s = _subresource(kind, sub)
            entry: dict[str, Any] = {"name": f"{kind.plural}/{sub}", "singularName": "", "namespaced": kind.namespaced,
                                     "kind": s.kind, "verbs": list(s.verbs)}
            if (s.group, s.version) != (group, version):
                entry["group"], entry["version"] = s.group, s.version
            resources.append(entry)
    for e in EXTRAS:
        if (e.group, e.version) == (group, version):
            resources.append({"name": e.plural, "singularName": e.kind.lower(), "namespaced": e.namespaced,
                              "kind": e.kind, "verbs": list(e.verbs)})
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def _aggregated_resources(group: str, version: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kind in paths.RESOURCES.get((group, version), {}).values():
        r: dict[str, Any] = {"resource": kind.plural,
                             "responseKind": {"group": group, "version": version, "kind": kind.name},
                             "scope": "Namespaced" if kind.namespaced else "Cluster",
                             "singularResource": kind.name.lower(), "verbs": OBJECT_VERBS}
        if kind.short_names:
            r["shortNames"] = list(kind.short_names)
        if kind.name in _ALL:
            r["categories"] = ["all"]
        subs = []
        for sub in paths.subresources(kind):
            s = _subresource(kind, sub)
            subs.append({"subresource": sub, "responseKind": {"group": s.group, "version": s.version, "kind": s.kind},
                         "verbs": list(s.verbs)})
        if subs:
            r["subresources"] = subs
        out.append(r)
    for e in EXTRAS:
        if (e.group, e.version) == (group, version):
            out.append({"resource": e.plural, "responseKind": {"group": group, "version": version, "kind": e.kind},
                        "scope": "Namespaced" if e.namespaced else "Cluster", "singularResource": e.kind.lower(),
                        "verbs": list(e.verbs)})
    return out


def aggregated(legacy: bool, version: str) -> dict[str, Any]:
    """The APIGroupDiscoveryList of /api (``legacy``: the core group) or /apis (every named group)."""
    names = [""] if legacy else groups()
    items = []
    for g in names:
        versions = [{"version": v, "resources": _aggregated_resources(g, v), "freshness": "Current"}
                    for v in (["v1"] if legacy else _versions_of(g))]
        meta: dict[str, Any] = {"creationTimestamp": None}
        if g:
            meta["name"] = g
        items.append({"metadata": meta, "versions": versions})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}", "metadata": {},
            "items": items}
