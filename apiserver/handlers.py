"""gRPC method handlers: one service per kind (``kplane.v1.Pods``, ...) plus ``kplane.v1.Cluster``.

Each call is authenticated (bearer token), timed and counted as Kubernetes counts requests
(``apiserver_request_total{verb,resource,subresource,code}`` with HTTP-style codes), and any
``ApiError`` becomes its gRPC status with the Kubernetes message. Watch responses are written
as pre-encoded bytes (see ``watchcache``), so the response serializer is the identity.

Sizes at the boundary, as Kubernetes' apiserver: a request over ``errors.MAX_REQUEST_BYTES``
(3 MiB) is answered ``Request entity too large: limit is 3145728`` (413, INVALID_ARGUMENT: never
retried) before it is even decoded; a status message is cut to fit gRPC's metadata limit
(``errors.fit_status_message``), the whole message going to the log.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, NoReturn

import grpc
from google.protobuf.message import Message
from prometheus_client import Counter, Gauge, Histogram

from apiserver import history
from apiserver.admission import noderestriction
from apiserver.auth import TokenAuthenticator, User
from apiserver.namespaces import NamespaceSubresources
from apiserver.pods import PodSubresources
from apiserver.registry import Registry
from apiserver.scale import ScaleSubresource
from apiserver.watchcache import WATCH_DELIVERY, WatchCache
from machinery import errors, failpoints, selectors
from machinery.api import api_pb2, autoscaling_pb2, core_pb2, meta_pb2
from machinery.kinds import KINDS, NAMESPACE, POD, Kind
from machinery.logging import get_logger

log = get_logger()

_REQUESTS = Counter("apiserver_request_total", "Counter of apiserver requests broken out for each verb, dry run "
                    "value, group, version, resource, scope, component, and HTTP response code.",
                    ["verb", "resource", "subresource", "code"])
_LATENCY = Histogram("apiserver_request_duration_seconds", "Response latency distribution in seconds for each verb, "
                     "dry run value, group, version, resource, subresource, scope and component.",
                     ["verb", "resource", "subresource"],
                     buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2, 5, 10, 30, 60))
_INFLIGHT = Counter("apiserver_watch_streams_total", "Watch streams opened.", ["resource"])
_CURRENT = Gauge("apiserver_current_inflight_requests", "Maximal number of currently used inflight request limit of "
                 "this apiserver per request kind in last second.", ["request_kind"])
_REJECTED = Counter("apiserver_rejected_requests_total", "Requests refused with 429 because too many were in flight.",
                    ["request_kind"])
TOO_MANY_REQUESTS = "Too many requests, please try again later."
MUTATING_VERBS = frozenset({"CREATE", "UPDATE", "PATCH", "DELETE"})

DRY_RUN_HEADER = "x-kplane-dry-run"
WATCH_MAX_PENDING = 50_000


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


class Api:
    """Everything a handler needs."""

    def __init__(self, registry: Registry, pods: PodSubresources, cache: WatchCache, authn: TokenAuthenticator,
                 max_inflight: int = 400, max_mutating_inflight: int = 200,
                 max_request_bytes: int = errors.MAX_REQUEST_BYTES):
        self.registry = registry
        self.pods = pods
        self.scale = ScaleSubresource(registry)
        self.namespaces = NamespaceSubresources(registry)
        self.cache = cache
        self.authn = authn
        self.ready = False
        self.not_ready_reason = "starting"
        # Kubernetes' --max-requests-inflight / --max-mutating-requests-inflight: beyond these,
        # requests are refused at once with 429, so an overloaded apiserver sheds load with an
        # answer clients know to retry (nothing was done) instead of queueing without bound.
        self.limits = {"readOnly": max_inflight, "mutating": max_mutating_inflight}
        self.inflight = {"readOnly": 0, "mutating": 0}
        # Kubernetes' MaxRequestBodyBytes; gRPC's own receive limit (server.py) must be larger,
        # or gRPC refuses first with RESOURCE_EXHAUSTED.
        self.max_request_bytes = max_request_bytes


def _metadata_value(context: grpc.aio.ServicerContext, key: str) -> str | None:
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v
    return None


Handler = Callable[[Api, Kind, Any, User, bool], Awaitable[Message]]


def _unary(api: Api, kind: Kind, fn: Handler, verb: str, subresource: str = ""):
    resource = kind.plural
    request_kind = "mutating" if verb in MUTATING_VERBS else "readOnly"
    limit = api.limits[request_kind]
    gauge = _CURRENT.labels(request_kind=request_kind)
    rejected = _REJECTED.labels(request_kind=request_kind)
    latency = _LATENCY.labels(verb=verb, resource=resource, subresource=subresource)
    counters: dict[int, Any] = {}  # HTTP code -> the labelled counter, looked up once

    def count(code: int) -> None:
        c = counters.get(code)
        if c is None:
            c = counters[code] = _REQUESTS.labels(verb=verb, resource=resource, subresource=subresource,
                                                  code=str(code))
        c.inc()

    async def handle(request: Any, context: grpc.aio.ServicerContext) -> Message:
        start = time.perf_counter()
        code = 200 if verb != "CREATE" else 201
        counted = False
        try:
            if isinstance(request, _Oversized):
                raise errors.RequestEntityTooLarge.of(api.max_request_bytes)
            if not api.ready:
                raise errors.Unavailable(f"the apiserver is not ready: {api.not_ready_reason}")
            if limit and api.inflight[request_kind] >= limit:
                rejected.inc()
                raise errors.TooManyRequests(TOO_MANY_REQUESTS)
            api.inflight[request_kind] += 1
            counted = True
            gauge.set(api.inflight[request_kind])
            user = api.authn.authenticate(context.invocation_metadata())
            dry = (_metadata_value(context, DRY_RUN_HEADER) or "").lower() == "all"
            return await fn(api, kind, request, user, dry)
        except errors.ApiError as exc:
            code = exc.http
            await _abort(context, exc.code, exc.message, verb=verb, resource=resource, subresource=subresource)
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # a bug: report it, keep serving
            code = 500
            log.exception("request_failed", verb=verb, resource=resource, subresource=subresource)
            await _abort(context, grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}",
                         verb=verb, resource=resource, subresource=subresource)
        finally:
            if counted:
                api.inflight[request_kind] -= 1
            count(code)
            latency.observe(time.perf_counter() - start)

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


async def _create(api: Api, kind: Kind, obj: Message, user: User, dry: bool) -> Message:
    return await api.registry.create(kind, obj, user, dry)


@_takes(meta_pb2.GetRequest)
async def _get(api: Api, kind: Kind, req: meta_pb2.GetRequest, user: User, dry: bool) -> Message:
    noderestriction.authorize(user, "get", kind, req.namespace, req.name)
    return await api.registry.get(kind, req.namespace, req.name)


@_takes(meta_pb2.ListRequest)
async def _list(api: Api, kind: Kind, req: meta_pb2.ListRequest, user: User, dry: bool) -> Message:
    return await api.registry.list(kind, req)


async def _update(api: Api, kind: Kind, obj: Message, user: User, dry: bool) -> Message:
    return await api.registry.update(kind, obj, user, dry)


async def _update_status(api: Api, kind: Kind, obj: Message, user: User, dry: bool) -> Message:
    return await api.registry.update(kind, obj, user, dry, subresource="status")


@_takes(meta_pb2.PatchRequest)
async def _patch(api: Api, kind: Kind, req: meta_pb2.PatchRequest, user: User, dry: bool) -> Message:
    if kind is POD and req.subresource == "resize":
        return await api.pods.resize_patch(req, user, dry)
    return await api.registry.patch(kind, req, user, dry)


@_takes(meta_pb2.DeleteRequest)
async def _delete(api: Api, kind: Kind, req: meta_pb2.DeleteRequest, user: User, dry: bool) -> Message:
    return await api.registry.delete(kind, req, user, dry)


@_takes(core_pb2.Binding)
async def _bind(api: Api, kind: Kind, binding: core_pb2.Binding, user: User, dry: bool) -> Message:
    return await api.pods.bind(binding, user, dry)


async def _resize(api: Api, kind: Kind, pod: core_pb2.Pod, user: User, dry: bool) -> Message:
    return await api.pods.resize(pod, user, dry)


@_takes(core_pb2.Eviction)
async def _evict(api: Api, kind: Kind, ev: core_pb2.Eviction, user: User, dry: bool) -> Message:
    return await api.pods.evict(ev, user, dry)


@_takes(meta_pb2.GetRequest)
async def _get_scale(api: Api, kind: Kind, req: meta_pb2.GetRequest, user: User, dry: bool) -> Message:
    noderestriction.authorize(user, "get", kind, req.namespace, req.name)
    return await api.scale.get(kind, req)


@_takes(autoscaling_pb2.Scale)
async def _update_scale(api: Api, kind: Kind, scale: autoscaling_pb2.Scale, user: User, dry: bool) -> Message:
    return await api.scale.update(kind, scale, user, dry)


async def _finalize(api: Api, kind: Kind, ns: core_pb2.Namespace, user: User, dry: bool) -> Message:
    return await api.namespaces.finalize(ns, user, dry)


def _watch(api: Api, kind: Kind):
    cache = api.cache[kind]

    async def handle(req: meta_pb2.WatchRequest | _Oversized, context: grpc.aio.ServicerContext):
        code = 200
        try:
            if isinstance(req, _Oversized):
                raise errors.RequestEntityTooLarge.of(api.max_request_bytes)
            if not api.ready:
                raise errors.Unavailable(f"the apiserver is not ready: {api.not_ready_reason}")
            api.authn.authenticate(context.invocation_metadata())
            try:
                labels = selectors.parse_label_selector(req.label_selector)
                fields = selectors.parse_field_selector(req.field_selector, kind.name, kind.message.DESCRIPTOR)
            except selectors.SelectorError as exc:
                raise errors.BadRequest(str(exc)) from None
            namespace = req.namespace if kind.namespaced else ""
            watcher = cache.watch(namespace, labels, fields, req.resource_version, req.allow_watch_bookmarks,
                                  req.send_initial_events, WATCH_MAX_PENDING)
        except errors.ApiError as exc:
            code = exc.http
            _REQUESTS.labels(verb="WATCH", resource=kind.plural, subresource="", code=str(code)).inc()
            await _abort(context, exc.code, exc.message, verb="WATCH", resource=kind.plural)
            return
        _REQUESTS.labels(verb="WATCH", resource=kind.plural, subresource="", code="200").inc()
        _INFLIGHT.labels(resource=kind.plural).inc()
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
            if not api.ready:
                raise errors.Unavailable(f"the apiserver is not ready: {api.not_ready_reason}")
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
