"""The REST verbs: each decodes what Kubernetes' URL, query and body say and calls the same
``Registry`` / ``PodSubresources`` / ``ScaleSubresource`` / ``NamespaceSubresources`` function the
gRPC handlers call (handlers.py), so admission, validation, node restriction, dry runs and every
race are one implementation.

Kubernetes' RequestInfo decides the verb from the method and the URL (``verb_of``): GET of an
object is get, of a collection list (watch with ``?watch=1``: watch.py), POST create, PUT update,
PATCH patch, DELETE of an object delete and of a collection deletecollection. Query parameters
are Kubernetes': ``dryRun=All``, ``fieldValidation=Strict|Warn|Ignore`` (Warn, the default, drops
an unknown field with a ``Warning`` header; Strict refuses it), ``fieldManager`` (the manager a
write is recorded under in metadata.managedFields; without it the User-Agent up to its first "/",
as Kubernetes names a client; required for server-side apply) and ``force`` (apply only),
``labelSelector``, ``fieldSelector``, ``limit``/``continue``, ``resourceVersion``/
``resourceVersionMatch``, DeleteOptions' fields. A PATCH of ``application/apply-patch+yaml`` is
server-side apply (the registry's ``apply``): its YAML body goes to the registry as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Mapping, Sequence

import yaml
from google.protobuf.message import Message

from apiserver.admission import noderestriction
from apiserver.auth import User
from apiserver.fieldmanager import manager_from_user_agent, validate_manager
from apiserver.registry import APPLY
from apiserver.requests import Api
from apiserver.rest import codec, tables
from apiserver.rest.paths import NOT_EMULATED, Target
from machinery import errors, jsonconv, patch
from machinery.api import autoscaling_pb2, core_pb2, meta_pb2
from machinery.kinds import NAMESPACE, POD, Kind, list_accessor, object_meta

# Content-Type of a PATCH -> kplane's patch type.
PATCH_TYPES = {
    "application/strategic-merge-patch+json": "strategic",
    "application/merge-patch+json": "merge",
    "application/json-patch+json": "json",
}
APPLY_PATCH = "application/apply-patch+yaml"
_SCALE_RETRIES = 5


class Query:
    """The query string: one value per name (the last), and all of them (``getall``)."""

    def __init__(self, items: Sequence[tuple[str, str]]):
        self._all: dict[str, list[str]] = {}
        for k, v in items:
            self._all.setdefault(k, []).append(v)

    def get(self, name: str, default: str = "") -> str:
        values = self._all.get(name)
        return values[-1] if values else default

    def getall(self, name: str) -> list[str]:
        return list(self._all.get(name, ()))

    def __contains__(self, name: str) -> bool:
        return name in self._all


@dataclass
class Call:
    """One REST request, decoded as far as the URL and headers go."""

    api: Api
    target: Target
    method: str
    query: Query
    body: bytes
    content_type: str
    output: codec.Output
    user: User | None = None
    warnings: list[str] = field(default_factory=list)
    user_agent: str = ""

    @property
    def kind(self) -> Kind[Message, Message]:
        return self.target.kind

    @property
    def namespace(self) -> str:
        return self.target.namespace if self.kind.namespaced else ""

    @property
    def who(self) -> User:
        assert self.user is not None, "the request path authenticates before a verb runs"
        return self.user

    def field_manager(self, options: str) -> str:
        """The write's field manager: ``fieldManager`` (checked as Kubernetes checks it, an
        invalid one refused as ``options`` — CreateOptions, UpdateOptions — is), else the client's
        User-Agent up to its first "/"."""
        given = self.query.get("fieldManager")
        errs = validate_manager(given)
        if errs:
            raise errors.Invalid.of(f"{options}.meta.k8s.io", "", errs)
        return given or manager_from_user_agent(self.user_agent)


@dataclass(frozen=True)
class Reply:
    code: int
    body: Any  # a JSON document
    list_meta: Mapping[str, Any] | None = None


def verb_of(method: str, target: Target, query: Query) -> str:
    """Kubernetes' RequestInfo verb, spelled as kplane's metrics spell verbs (GET, LIST, WATCH, ...)."""
    if method in ("GET", "HEAD"):
        if target.watch_path or query.get("watch").lower() in ("1", "true"):
            return "WATCH"
        return "GET" if target.name else "LIST"
    if method == "POST":
        return "CREATE"
    if method == "PUT":
        return "UPDATE"
    if method == "PATCH":
        return "PATCH"
    if method == "DELETE":
        return "DELETE" if target.name else "DELETECOLLECTION"
    raise errors.MethodNotAllowed(f"the server does not allow this method on the requested resource ({method})")


def dry_run(values: Sequence[str]) -> bool:
    for v in values:
        if v != "All":
            raise errors.BadRequest(f'dryRun: Unsupported value: "{v}": supported values: "All"')
    return bool(values)


def not_emulated(target: Target) -> codec.NotEmulated:
    what = f"{target.kind.plural}/{target.subresource}"
    why = ("its containers are fake and run no process" if target.kind is POD
           else "its nodes serve no kubelet API")
    return codec.NotEmulated(f"{what} is not emulated by kplane: {why}")


def _method_not_allowed() -> errors.MethodNotAllowed:
    return errors.MethodNotAllowed("the server does not allow this method on the requested resource")


def _object(call: Call, obj: Message, code: int = 200) -> Reply:
    if call.output.form == "table":
        return Reply(code, tables.table(call.kind, [obj], call.output, {"resourceVersion": object_meta(obj)
                                                                         .resource_version}))
    return Reply(code, codec.to_json(obj, call.kind.api_version, call.kind.name))


def _decode(call: Call, message: type[Message], api_version: str, kind_name: str) -> Message:
    doc = codec.read_document(call.body, call.content_type)
    return codec.decode(message, api_version, kind_name, doc, call.query.get("fieldValidation", "Warn"),
                        call.warnings)


def _check_namespace(call: Call, meta: meta_pb2.ObjectMeta) -> None:
    if not call.kind.namespaced:
        meta.namespace = ""
        return
    if meta.namespace and meta.namespace != call.namespace:
        raise errors.BadRequest("the namespace of the provided object does not match the namespace sent on the "
                                "request")
    meta.namespace = call.namespace


def _check_name(call: Call, meta: meta_pb2.ObjectMeta) -> None:
    if meta.name != call.target.name:
        raise errors.BadRequest(f"the name of the object ({meta.name}) does not match the name on the URL "
                                f"({call.target.name})")


# ---------------------------------------------------------------- reads


async def get(call: Call) -> Reply:
    t = call.target
    if t.subresource in NOT_EMULATED.get(call.kind.name, ()):
        raise not_emulated(t)
    noderestriction.authorize(call.who, "get", call.kind, call.namespace, t.name)
    if t.subresource == "scale":
        scale = await call.api.scale.get(call.kind, meta_pb2.GetRequest(namespace=call.namespace, name=t.name))
        return Reply(200, codec.to_json(scale, "autoscaling/v1", "Scale"))
    if t.subresource not in ("", "status", "resize"):
        raise _method_not_allowed()
    return _object(call, await call.api.registry.get(call.kind, call.namespace, t.name))


def list_request(call: Call) -> tuple[meta_pb2.ListRequest, bool]:
    """The ListRequest a query asks for, and whether it asks for an exact resourceVersion."""
    q = call.query
    rv, match = q.get("resourceVersion"), q.get("resourceVersionMatch")
    if match and match not in ("NotOlderThan", "Exact"):
        raise errors.BadRequest(f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                                '"Exact", "NotOlderThan"')
    if match and not rv:
        raise errors.BadRequest("resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
                                "resourceVersion is provided")
    if match == "Exact" and rv == "0":
        raise errors.BadRequest('resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
                                'resourceVersion "0"')
    try:
        limit = int(q.get("limit") or 0)
    except ValueError:
        raise errors.BadRequest(f'limit: Invalid value: "{q.get("limit")}": must be an integer') from None
    req = meta_pb2.ListRequest(namespace=call.namespace, label_selector=q.get("labelSelector"),
                               field_selector=q.get("fieldSelector"), resource_version=rv, limit=max(limit, 0),
                               continue_token=q.get("continue"))
    return req, match == "Exact"


async def list_(call: Call) -> Reply:
    if call.target.subresource:
        raise _method_not_allowed()
    req, exact = list_request(call)
    lst = await call.api.registry.list(call.kind, req, exact=exact)
    acc = list_accessor(call.kind, lst)
    meta = jsonconv.to_dict(acc.metadata)
    if call.output.form == "table":
        return Reply(200, tables.table(call.kind, acc.items, call.output, meta))
    doc = codec.to_json(lst, call.kind.api_version, f"{call.kind.name}List")
    doc.setdefault("metadata", meta)
    doc.setdefault("items", [])
    return Reply(200, doc)


# ---------------------------------------------------------------- writes


async def create(call: Call) -> Reply:
    t, api, dry = call.target, call.api, dry_run(call.query.getall("dryRun"))
    if t.all_namespaces or (t.name and not t.subresource):
        raise _method_not_allowed()
    if t.subresource in NOT_EMULATED.get(call.kind.name, ()):
        raise not_emulated(t)
    if t.subresource == "binding":
        binding = _decode(call, core_pb2.Binding, "v1", "Binding")
        assert isinstance(binding, core_pb2.Binding)
        binding.metadata.name = binding.metadata.name or t.name
        _check_name(call, binding.metadata)
        _check_namespace(call, binding.metadata)
        await api.pods.bind(binding, call.who, dry)
        return Reply(201, codec.success(201))
    if t.subresource == "eviction":
        eviction = _decode(call, core_pb2.Eviction, "policy/v1", "Eviction")
        assert isinstance(eviction, core_pb2.Eviction)
        eviction.metadata.name = eviction.metadata.name or t.name
        if eviction.metadata.name != t.name:
            raise errors.BadRequest("name in URL does not match name in Eviction object")
        _check_namespace(call, eviction.metadata)
        await api.pods.evict(eviction, call.who, dry)
        return Reply(201, codec.success(201))
    if t.subresource:
        raise _method_not_allowed()
    obj = _decode(call, call.kind.message, call.kind.api_version, call.kind.name)
    _check_namespace(call, object_meta(obj))
    manager = call.field_manager("CreateOptions")
    return _object(call, await api.registry.create(call.kind, obj, call.who, dry, field_manager=manager), 201)


async def update(call: Call) -> Reply:
    t, api, dry = call.target, call.api, dry_run(call.query.getall("dryRun"))
    if not t.name:
        raise _method_not_allowed()
    manager = call.field_manager("UpdateOptions")
    if t.subresource == "scale":
        scale = _decode(call, autoscaling_pb2.Scale, "autoscaling/v1", "Scale")
        assert isinstance(scale, autoscaling_pb2.Scale)
        _check_name(call, scale.metadata)
        _check_namespace(call, scale.metadata)
        updated = await api.scale.update(call.kind, scale, call.who, dry, field_manager=manager)
        return Reply(200, codec.to_json(updated, "autoscaling/v1", "Scale"))
    obj = _decode(call, call.kind.message, call.kind.api_version, call.kind.name)
    meta = object_meta(obj)
    _check_name(call, meta)
    _check_namespace(call, meta)
    if t.subresource in ("", "status"):
        result = await api.registry.update(call.kind, obj, call.who, dry, subresource=t.subresource,
                                           field_manager=manager)
    elif t.subresource == "resize" and isinstance(obj, core_pb2.Pod):
        result = await api.pods.resize(obj, call.who, dry, field_manager=manager)
    elif t.subresource == "finalize" and isinstance(obj, core_pb2.Namespace):
        result = await api.namespaces.finalize(obj, call.who, dry, field_manager=manager)
    else:
        raise _method_not_allowed()
    return _object(call, result)


def patch_type(content_type: str) -> str:
    media = content_type.split(";")[0].strip().lower()
    if media == APPLY_PATCH:
        return APPLY
    try:
        return PATCH_TYPES[media]
    except KeyError:
        raise codec.UnsupportedMediaType(
            f'the body of the request was in an unknown format - accepted media types include: '
            f'{", ".join(PATCH_TYPES)}, {APPLY_PATCH}') from None


def _force(query: Query) -> bool | None:
    """``force`` as Go's strconv.ParseBool reads it; None when not given."""
    if "force" not in query:
        return None
    text = query.get("force")
    if text in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if text in ("0", "f", "F", "false", "FALSE", "False", ""):
        return False
    raise errors.BadRequest(f'force: invalid value "{text}": must be a boolean')


def _patch_body(call: Call, kind_of_patch: str) -> str:
    """The patch as the registry takes it: JSON (an apply configuration is YAML, or JSON)."""
    if kind_of_patch != APPLY:
        return call.body.decode("utf-8", errors="replace")
    try:
        doc = json.loads(call.body) if call.body.lstrip().startswith(b"{") else None
    except ValueError:
        doc = None
    try:
        if doc is None:
            doc = yaml.safe_load(call.body) if call.body.strip() else None
    except yaml.YAMLError as exc:
        raise errors.BadRequest(f"error decoding YAML: {' '.join(str(exc).split())}") from None
    return json.dumps(doc, separators=(",", ":"), default=str)


async def patch_(call: Call) -> Reply:
    t, api, dry = call.target, call.api, dry_run(call.query.getall("dryRun"))
    if not t.name:
        raise _method_not_allowed()
    kind_of_patch = patch_type(call.content_type)
    validation = call.query.get("fieldValidation", "Warn")
    if validation not in codec.FIELD_VALIDATIONS:
        raise errors.BadRequest(f"fieldValidation must be one of {', '.join(codec.FIELD_VALIDATIONS)}, got "
                                f'"{validation}"')
    unknown: list[str] | None = None if validation == "Strict" else []
    req = meta_pb2.PatchRequest(namespace=call.namespace, name=t.name, patch_type=kind_of_patch,
                                patch=_patch_body(call, kind_of_patch), subresource=t.subresource,
                                field_manager=call.query.get("fieldManager"))
    force = _force(call.query)
    if force is not None:
        req.force = force
    manager = call.field_manager("PatchOptions")
    if t.subresource == "scale":
        if kind_of_patch == APPLY:
            raise codec.UnsupportedMediaType(f"server-side apply is not served on {call.kind.plural}/scale by kplane: "
                                             "apply to the object, or use kubectl scale")
        scale = await _patch_scale(call, req, dry, manager)
        return Reply(200, codec.to_json(scale, "autoscaling/v1", "Scale"))
    if t.subresource in ("", "status"):
        result = await api.registry.patch(call.kind, req, call.who, dry, unknown=unknown, field_manager=manager)
    elif t.subresource == "resize" and call.kind is POD:
        result = await api.pods.resize_patch(req, call.who, dry, unknown=unknown, field_manager=manager)
    else:
        raise _method_not_allowed()
    if unknown and validation == "Warn":
        call.warnings.extend(f'unknown field "{u}"' for u in unknown)
    return _object(call, result)


async def _patch_scale(call: Call, req: meta_pb2.PatchRequest, dry: bool, manager: str) -> autoscaling_pb2.Scale:
    """A patch of the scale subresource (``kubectl scale``): applied to the current Scale, then an
    update of it with the Scale's resourceVersion as precondition, read again on a race."""
    try:
        document = json.loads(req.patch or "null")
    except ValueError as exc:
        raise errors.BadRequest(f"the patch is not valid JSON: {exc}") from None
    for _ in range(_SCALE_RETRIES):
        current = await call.api.scale.get(call.kind, meta_pb2.GetRequest(namespace=req.namespace, name=req.name))
        try:
            result = patch.apply_patch(codec.to_json(current, "autoscaling/v1", "Scale"), document, req.patch_type,
                                       "Scale")
            wanted = codec.decode(autoscaling_pb2.Scale, "autoscaling/v1", "Scale", result, "Strict")
        except patch.PatchError as exc:
            raise errors.BadRequest(str(exc)) from None
        assert isinstance(wanted, autoscaling_pb2.Scale)
        wanted.metadata.name, wanted.metadata.namespace = req.name, req.namespace
        if not wanted.metadata.resource_version:
            wanted.metadata.resource_version = current.metadata.resource_version
        try:
            return await call.api.scale.update(call.kind, wanted, call.who, dry, field_manager=manager)
        except errors.Conflict:
            if isinstance(document, dict) and (document.get("metadata") or {}).get("resourceVersion"):
                raise
    raise errors.conflict(f"{call.kind.plural}/scale", req.name, "too many concurrent writers; try again")


def delete_request(call: Call, name: str) -> tuple[meta_pb2.DeleteRequest, bool]:
    """DeleteOptions from the body (kubectl sends them there) or the query (the Python client
    may), and whether they ask for a dry run."""
    opts: dict[str, Any] = {}
    if call.body.strip():
        doc = codec.read_document(call.body, call.content_type)
        if not isinstance(doc, dict):
            raise errors.BadRequest("the request body must be a DeleteOptions object")
        opts = doc
    q = call.query
    req = meta_pb2.DeleteRequest(namespace=call.namespace, name=name)
    grace = opts.get("gracePeriodSeconds", q.get("gracePeriodSeconds") or None)
    if grace is not None:
        try:
            req.grace_period_seconds = int(grace)
        except (TypeError, ValueError):
            raise errors.BadRequest(f'gracePeriodSeconds: Invalid value: "{grace}": must be an integer') from None
    policy = opts.get("propagationPolicy") or q.get("propagationPolicy")
    orphan = opts.get("orphanDependents", q.get("orphanDependents") or None)
    if orphan is not None and not policy:
        policy = "Orphan" if str(orphan).lower() == "true" else "Background"
    if policy:
        req.propagation_policy = str(policy)
    pre = opts.get("preconditions") or {}
    if not isinstance(pre, dict):
        raise errors.BadRequest("preconditions must be an object")
    if pre.get("uid"):
        req.preconditions.uid = str(pre["uid"])
    if pre.get("resourceVersion"):
        req.preconditions.resource_version = str(pre["resourceVersion"])
    dry_values = opts.get("dryRun") or q.getall("dryRun")
    if not isinstance(dry_values, list):
        raise errors.BadRequest("dryRun must be a list")
    return req, dry_run([str(v) for v in dry_values])


def _deleted(call: Call, obj: Message) -> Reply:
    """What a delete answers: the object while it is still there (marked for deletion, or a pod
    or namespace, which Kubernetes always returns), else Status Success (the generic store's
    finalizeDelete)."""
    meta = object_meta(obj)
    if call.kind in (POD, NAMESPACE) or meta.deletion_timestamp:
        return _object(call, obj)
    return Reply(200, codec.success(200, meta.name, call.kind, meta.uid))


async def delete(call: Call) -> Reply:
    t = call.target
    if t.subresource:
        raise _method_not_allowed()
    req, dry = delete_request(call, t.name)
    return _deleted(call, await call.api.registry.delete(call.kind, req, call.who, dry))


async def delete_collection(call: Call) -> Reply:
    """Every object the selectors pick, deleted with the same options; the answer lists them."""
    t = call.target
    if t.subresource:
        raise _method_not_allowed()
    template, dry = delete_request(call, "")
    lst = await call.api.registry.list(call.kind, list_request(call)[0])
    out = []
    for obj in list(list_accessor(call.kind, lst).items):
        req = meta_pb2.DeleteRequest()
        req.CopyFrom(template)
        req.namespace, req.name = object_meta(obj).namespace, object_meta(obj).name
        try:
            out.append(codec.to_json(await call.api.registry.delete(call.kind, req, call.who, dry)))
        except errors.NotFound:
            continue
    return Reply(200, {"kind": f"{call.kind.name}List", "apiVersion": call.kind.api_version,
                       "metadata": {"resourceVersion": str(call.api.cache.rev)}, "items": out})


HANDLERS: dict[str, Callable[[Call], Awaitable[Reply]]] = {
    "GET": get, "LIST": list_, "CREATE": create, "UPDATE": update, "PATCH": patch_, "DELETE": delete,
    "DELETECOLLECTION": delete_collection,
}
