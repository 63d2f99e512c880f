"""The access reviews ``kubectl auth can-i`` and ``kubectl auth whoami`` post, answered from the
rules the apiserver enforces: authorization.k8s.io/v1 SelfSubjectAccessReview and
SubjectAccessReview, authentication.k8s.io/v1 SelfSubjectReview.

kplane has no RBAC: every authenticated user may do everything, except what node restriction
(``admission/noderestriction.py``, Kubernetes' Node authorizer and NodeRestriction in one)
forbids a kubelet's ``system:node:N`` identity. A review asks ``noderestriction.authorize`` the
same question a request would: a named pod is judged by the pod as stored (is it bound to N?);
without a name, a write node restriction allows on some objects (the status of pods bound to
N) is allowed, as Kubernetes' RBAC allows it and admission then narrows it per object.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from apiserver.admission import noderestriction
from apiserver.auth import User
from apiserver.rest import paths
from apiserver.watchcache import WatchCache
from machinery import errors
from machinery.api import core_pb2
from machinery.kinds import POD, Kind

# (Kubernetes verb, subresource) -> the verb noderestriction.authorize knows.
_SUBRESOURCE_VERBS = {"status": "status", "binding": "binding", "eviction": "eviction", "resize": "resize",
                      "scale": "scale", "finalize": "finalize"}
_VERBS = {"get": "get", "list": "list", "watch": "watch", "create": "create", "update": "update",
          "patch": "update", "delete": "delete", "deletecollection": "delete"}


def _kind(group: str, resource: str) -> Kind[Message, Message] | None:
    for (g, _), kinds in paths.RESOURCES.items():
        if g == group and resource in kinds:
            return kinds[resource]
    return None


def decide(user: User, attrs: dict[str, Any], cache: WatchCache) -> tuple[bool, str]:
    """(allowed, reason) for ``user`` and a review's ``resourceAttributes``."""
    verb = str(attrs.get("verb") or "")
    resource = str(attrs.get("resource") or "")
    group = str(attrs.get("group") or "")
    sub = str(attrs.get("subresource") or "")
    namespace = str(attrs.get("namespace") or "")
    name = str(attrs.get("name") or "")
    node = user.node_name
    if node is None:
        return True, "kplane authorizes every authenticated user but nodes for everything"
    kind = _kind(group, resource)
    if kind is None:
        if verb in ("get", "list", "watch"):
            return True, ""
        return False, f'node "{node}" is not allowed to {verb} {resource}'
    if sub and verb not in noderestriction.READ_VERBS:
        action = _SUBRESOURCE_VERBS.get(sub, sub)
    else:
        action = _VERBS.get(verb, verb)
    stored: Message | None = None
    if name:
        stored = cache[kind].get(namespace if kind.namespaced else "", name)
    if kind is POD and stored is None:
        # No such pod (or no name): judge a pod bound to the node, as RBAC allows and admission narrows.
        stored = core_pb2.Pod(spec=core_pb2.PodSpec(node_name=node))
    try:
        noderestriction.authorize(user, action, kind, namespace, name, obj=stored, old=stored)
    except errors.Forbidden as exc:
        return False, exc.message.split("cannot do this: ", 1)[-1]
    return True, ""


def review(kind: str, body: Any, user: User, cache: WatchCache) -> dict[str, Any]:
    """The answered review: the request's ``spec`` and a ``status``."""
    if not isinstance(body, dict):
        raise errors.BadRequest(f"the request body must be a {kind}")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise errors.BadRequest(f"{kind}.spec must be an object")
    if kind == "SubjectAccessReview":
        if user.is_node:
            raise errors.Forbidden(f'subjectaccessreviews.authorization.k8s.io is forbidden: User "{user.name}" '
                                   f"cannot create resource \"subjectaccessreviews\" in API group "
                                   f'"authorization.k8s.io" at the cluster scope')
        subject = User(str(spec.get("user") or ""), str(spec.get("uid") or ""),
                       tuple(str(g) for g in spec.get("groups") or ()))
        if not subject.name:
            raise errors.Invalid.of(kind, "", [errors.invalid("spec.user", "", "at least one of user or group must "
                                                              "be specified")])
    else:
        subject = user
    attrs = spec.get("resourceAttributes")
    if isinstance(attrs, dict):
        allowed, reason = decide(subject, attrs, cache)
    elif isinstance(spec.get("nonResourceAttributes"), dict):
        allowed, reason = True, "kplane serves non-resource URLs (discovery, health, version) to every user"
    else:
        raise errors.Invalid.of(kind, "", [errors.invalid("spec.resourceAttributes", "", "exactly one of "
                                                          "nonResourceAttributes or resourceAttributes must be "
                                                          "specified")])
    status: dict[str, Any] = {"allowed": allowed}
    if not allowed:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    return {"kind": kind, "apiVersion": "authorization.k8s.io/v1", "metadata": {"creationTimestamp": None},
            "spec": spec, "status": status}


def whoami(user: User) -> dict[str, Any]:
    """authentication.k8s.io/v1 SelfSubjectReview: who the token is."""
    info: dict[str, Any] = {"username": user.name}
    if user.uid:
        info["uid"] = user.uid
    info["groups"] = [*user.groups, "system:authenticated"]
    return {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}}
