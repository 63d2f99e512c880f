"""gRPC method handlers: one service per kind (``kplane.v1.Pods``, ...) plus ``kplane.v1.Cluster``.

Each call goes through the request path both transports share (``requests.py``: readiness, the
inflight limits, bearer-token authentication, ``apiserver_request_total{verb,resource,subresource,
code}`` with HTTP-style codes, latency) to the same registry and subresource functions the REST
API calls (``rest/verbs.py``), and any ``ApiError`` becomes its gRPC status with the Kubernetes
message. Watch responses are written
as pre-encoded bytes (see ``watchcache``), so the response serializer is the identity.

Every write is recorded in metadata.managedFields under the client's field manager: a
PatchRequest's ``field_manager``, else the ``x-kplane-field-manager`` metadata, else the user's
name (``system:kube-scheduler``, ``system:node:node-1``, ``admin``), as Kubernetes names a client
by its User-Agent when it gives no fieldManager.

Sizes at the boundary, as Kubernetes' apiserver: a request over ``errors.MAX_REQUEST_BYTES``
(3 MiB) is answered ``Request entity too large: limit is 3145728`` (413, INVALID_ARGUMENT: never
retried) before it is even decoded; a status message is cut to fit gRPC's metadata limit
(``errors.fit_status_message``), the whole message going to the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable, NoReturn

import grpc
from google.protobuf.message import Message

from apiserver import history
from apiserver.admission import noderestriction
from apiserver.auth import User
from apiserver.fieldmanager import validate_manager
from apiserver.requests import WATCH_MAX_PENDING, Api, open_watch
from apiserver.watchcache import WATCH_DELIVERY
from machinery import errors, failpoints
from machinery.api import api_pb2, autoscaling_pb2, core_pb2, meta_pb2
from machinery.kinds import KINDS, NAMESPACE, POD, Kind
from machinery.logging import get_logger

log = get_logger()

__all__ = ["Api", "DRY_RUN_HEADER", "WATCH_MAX_PENDING", "build"]

DRY_RUN_HEADER = "x-kplane-dry-run"
FIELD_MANAGER_HEADER = "x-kplane-field-manager"


def _identity(b: bytes) -> bytes:
    return b


class _Oversized:
    """What the deserializer hands a handler instead of a request over the size limit."""

    __slots__ = ("size",)

    def __init__(self, size: int):
        self.size = size


def _deserializer(message: type[Message], limit: int) -> Callable[[bytes], Message | _Oversized]:
    """``message.FromString`` for requests up to ``limit`` bytes; bigger ones are not decoded.

    Raising here would make gRPC answer a bare UNKNOWN; the handler answers the marker with
    Kubernetes' 413 instead."""
    parse = message.FromString

    def deserialize(data: bytes) -> Message | _Oversized:
        return _Oversized(len(data)) if len(data) > limit else parse(data)

    return deserialize


async def _abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str, **where: str) -> NoReturn:
    """End the call with ``code`` and ``message``, cut to what gRPC metadata carries (the whole
    message is logged when it is cut)."""
    fitted = errors.fit_status_message(message)
    if fitted is not message:
        log.warning("status_message_truncated", code=code.name, size=len(message), message=message, **where)
    await context.abort(code, fitted)
    raise AssertionError("context.abort() returned")  # it raises AbortError: the call is over


def _metadata_value(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v
    return None


@dataclass(frozen=True)
class Caller:
    """Who calls and how: the authenticated user, a dry run, the field manager its writes go under."""

    user: User
    dry_run: bool
    field_manager: str


Handler = Callable[[Api, Kind, Any, Caller], Awaitable[Message]]


def _field_manager(context: grpc.aio.ServicerContext, user: User) -> str:
    """The ``x-kplane-field-manager`` metadata, else the user's name; Invalid as Kubernetes'
    ValidateFieldManager refuses a name over 128 bytes or with unprintable characters."""
    given = _metadata_value(context, FIELD_MANAGER_HEADER)
    if given is None:
        return user.name
    errs = validate_manager(given, FIELD_MANAGER_HEADER)
    if errs:
        raise errors.Invalid.of("UpdateOptions.meta.k8s.io", "", errs)
    return given


def _unary(api: Api, kind: Kind, fn: Handler, verb: str, subresource: str = ""):
    endpoint = api.endpoint(verb, kind.plural, subresource)
    where = {"verb": verb, "resource": kind.plural, "subresource": subresource}

    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Message:
        refuse = errors.RequestEntityTooLarge.of(api.max_request_bytes) if isinstance(request, _Oversized) else None
        dry = (_metadata_value(context, DRY_RUN_HEADER) or "").lower() == "all"
        try:
            def run(user: User) -> Awaitable[Message]:
                return fn(api, kind, request, Caller(user, dry, _field_manager(context, user)))

            return await endpoint.call(lambda: api.authn.authenticate(context.invocation_metadata()), run, refuse)
        except errors.ApiError as exc:
            await _abort(context, exc.code, exc.message, **where)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # a bug: report it, keep serving
            log.exception("request_failed", **where)
            await _abort(context, grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}", **where)

    return grpc.unary_unary_rpc_method_handler(
        handle, request_deserializer=_deserializer(_request_type(fn, kind), api.max_request_bytes),
        response_serializer=lambda m: m.SerializeToString())


def _request_type(fn: Handler, kind: Kind) -> type[Message]:
    return getattr(fn, "request_type", None) or kind.message


def _takes(request_type: type[Message]):
    def mark(fn):
        fn.request_type = request_type
        return fn
    return mark


# ---------------------------------------------------------------- verbs


async def _create(api: Api, kind: Kind, obj: Message, c: Caller) -> Message:
    return await api.registry.create(kind, obj, c.user, c.dry_run, field_manager=c.field_manager)


@_takes(meta_pb2.GetRequest)
async def _get(api: Api, kind: Kind, req: meta_pb2.GetRequest, c: Caller) -> Message:
    noderestriction.authorize(c.user, "get", kind, req.namespace, req.name)
    return await api.registry.get(kind, req.namespace, req.name)


@_takes(meta_pb2.ListRequest)
async def _list(api: Api, kind: Kind, req: meta_pb2.ListRequest, c: Caller) -> Message:
    return await api.registry.list(kind, req)


async def _update(api: Api, kind: Kind, obj: Message, c: Caller) -> Message:
    return await api.registry.update(kind, obj, c.user, c.dry_run, field_manager=c.field_manager)


async def _update_status(api: Api, kind: Kind, obj: Message, c: Caller) -> Message:
    return await api.registry.update(kind, obj, c.user, c.dry_run, subresource="status", field_manager=c.field_manager)


@_takes(meta_pb2.PatchRequest)
async def _patch(api: Api, kind: Kind, req: meta_pb2.PatchRequest, c: Caller) -> Message:
    if kind is POD and req.subresource == "resize":
        return await api.pods.resize_patch(req, c.user, c.dry_run, field_manager=c.field_manager)
    return await api.registry.patch(kind, req, c.user, c.dry_run, field_manager=c.field_manager)


@_takes(meta_pb2.DeleteRequest)
async def _delete(api: Api, kind: Kind, req: meta_pb2.DeleteRequest, c: Caller) -> Message:
    return await api.registry.delete(kind, req, c.user, c.dry_run)


@_takes(core_pb2.Binding)
async def _bind(api: Api, kind: Kind, binding: core_pb2.Binding, c: Caller) -> Message:
    return await api.pods.bind(binding, c.user, c.dry_run)


async def _resize(api: Api, kind: Kind, pod: core_pb2.Pod, c: Caller) -> Message:
    return await api.pods.resize(pod, c.user, c.dry_run, field_manager=c.field_manager)


@_takes(core_pb2.Eviction)
async def _evict(api: Api, kind: Kind, ev: core_pb2.Eviction, c: Caller) -> Message:
    return await api.pods.evict(ev, c.user, c.dry_run)


@_takes(meta_pb2.GetRequest)
async def _get_scale(api: Api, kind: Kind, req: meta_pb2.GetRequest, c: Caller) -> Message:
    noderestriction.authorize(c.user, "get", kind, req.namespace, req.name)
    return await api.scale.get(kind, req)


@_takes(autoscaling_pb2.Scale)
async def _update_scale(api: Api, kind: Kind, scale: autoscaling_pb2.Scale, c: Caller) -> Message:
    return await api.scale.update(kind, scale, c.user, c.dry_run, field_manager=c.field_manager)


async def _finalize(api: Api, kind: Kind, ns: core_pb2.Namespace, c: Caller) -> Message:
    return await api.namespaces.finalize(ns, c.user, c.dry_run, field_manager=c.field_manager)


def _watch(api: Api, kind: Kind):
    cache = api.cache[kind]

    async def handle(req: meta_pb2.WatchRequest | _Oversized, context: grpc.aio.ServicerContext):
        try:
            if isinstance(req, _Oversized):
                watcher = open_watch(api, kind, lambda: api.authn.authenticate(context.invocation_metadata()),
                                     "", "", "", "", False, False,
                                     refuse=errors.RequestEntityTooLarge.of(api.max_request_bytes))
            else:
                watcher = open_watch(api, kind, lambda: api.authn.authenticate(context.invocation_metadata()),
                                     req.namespace, req.label_selector, req.field_selector, req.resource_version,
                                     req.allow_watch_bookmarks, req.send_initial_events)
        except errors.ApiError as exc:
            await _abort(context, exc.code, exc.message, verb="WATCH", resource=kind.plural)
            return
        try:
            while True:
                batch = await watcher.next_batch()
                if batch is None:
                    break
                await failpoints.hit(WATCH_DELIVERY)
                yield batch
        finally:
            cache.remove(watcher)

    return grpc.unary_stream_rpc_method_handler(
        handle, request_deserializer=_deserializer(meta_pb2.WatchRequest, api.max_request_bytes),
        response_serializer=_identity)


def _history(api: Api):
    async def handle(req: api_pb2.HistoryRequest | _Oversized, context: grpc.aio.ServicerContext):
        try:
            if isinstance(req, _Oversized):
                raise errors.RequestEntityTooLarge.of(api.max_request_bytes)
            api.check_ready()
            api.authn.authenticate(context.invocation_metadata())
            async for resp in history.stream(api.registry.etcd, req.since, req.follow):
                yield resp
        except errors.ApiError as exc:
            await _abort(context, exc.code, exc.message, verb="HISTORY", resource="")

    return grpc.unary_stream_rpc_method_handler(
        handle, request_deserializer=_deserializer(api_pb2.HistoryRequest, api.max_request_bytes),
        response_serializer=lambda m: m.SerializeToString())


def build(api: Api) -> list[grpc.GenericRpcHandler]:
    """The generic handlers for every service of protos/kplane/v1/api.proto."""
    handlers = []
    for kind in KINDS:
        methods = {
            "Create": _unary(api, kind, _create, "CREATE"),
            "Get": _unary(api, kind, _get, "GET"),
            "List": _unary(api, kind, _list, "LIST"),
            "Update": _unary(api, kind, _update, "UPDATE"),
            "Patch": _unary(api, kind, _patch, "PATCH"),
            "Delete": _unary(api, kind, _delete, "DELETE"),
            "Watch": _watch(api, kind),
        }
        if kind.has_status:
            methods["UpdateStatus"] = _unary(api, kind, _update_status, "UPDATE", "status")
        if kind is POD:
            methods["Bind"] = _unary(api, kind, _bind, "CREATE", "binding")
            methods["Resize"] = _unary(api, kind, _resize, "UPDATE", "resize")
            methods["Evict"] = _unary(api, kind, _evict, "CREATE", "eviction")
        if "scale" in kind.subresources:
            methods["GetScale"] = _unary(api, kind, _get_scale, "GET", "scale")
            methods["UpdateScale"] = _unary(api, kind, _update_scale, "UPDATE", "scale")
        if kind is NAMESPACE:
            methods["Finalize"] = _unary(api, kind, _finalize, "UPDATE", "finalize")
        handlers.append(grpc.method_handlers_generic_handler(kind.service, methods))
    handlers.append(grpc.method_handlers_generic_handler("kplane.v1.Cluster", {"History": _history(api)}))
    return handlers
