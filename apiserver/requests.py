"""The request path both transports share: readiness, the inflight limits, authentication,
metrics and latency, for the gRPC API (``handlers.py``) and the REST API (``rest/``).

A transport decodes its request, then runs the verb through ``Endpoint.call`` (one per verb,
resource and subresource): the apiserver must be ready, the caller is authenticated, a request
takes a seat of its priority level, queueing for one or refused with 429 beyond them
(``flowcontrol.py``), and the verb runs — the same
``Registry`` / ``PodSubresources`` / ``ScaleSubresource`` / ``NamespaceSubresources`` call
whichever transport asked, so admission (node restriction included: it is called inside those
functions), validation and dry runs are one implementation. Each call is counted in
``apiserver_request_total{verb,resource,subresource,code}`` with the HTTP code Kubernetes would
answer, and timed. The transport then encodes the answer or the ``ApiError`` its own way (a gRPC
status, a metav1.Status). ``open_watch`` does the same for watches.
"""

from __future__ import annotations

import time
from typing import Any, Awaitable, Callable, TypeVar

from prometheus_client import Counter, Histogram

from apiserver.auth import TokenAuthenticator, User
from apiserver.flowcontrol import Admission, FlowControl
from apiserver.namespaces import NamespaceSubresources
from apiserver.pods import PodSubresources
from apiserver.registry import Registry
from apiserver.scale import ScaleSubresource
from apiserver.watchcache import PROTOBUF, FrameEncoding, WatchCache, Watcher
from machinery import errors, selectors
from machinery.kinds import Kind

_REQUESTS = Counter("apiserver_request_total", "Counter of apiserver requests broken out for each verb, dry run "
                    "value, group, version, resource, scope, component, and HTTP response code.",
                    ["verb", "resource", "subresource", "code"])
_LATENCY = Histogram("apiserver_request_duration_seconds", "Response latency distribution in seconds for each verb, "
                     "dry run value, group, version, resource, subresource, scope and component.",
                     ["verb", "resource", "subresource"],
                     buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2, 5, 10, 30, 60))
_WATCH_STREAMS = Counter("apiserver_watch_streams_total", "Watch streams opened.", ["resource"])
WATCH_MAX_PENDING = 50_000

T = TypeVar("T")
Authenticate = Callable[[], User]

class Api:
    """Everything a request needs, whichever transport it came by."""

    def __init__(self, registry: Registry, pods: PodSubresources, cache: WatchCache, authn: TokenAuthenticator,
                 max_inflight: int = 400, max_mutating_inflight: int = 200,
                 max_request_bytes: int = errors.MAX_REQUEST_BYTES, priority_and_fairness: bool = True):
        self.registry = registry
        self.pods = pods
        self.scale = ScaleSubresource(registry)
        self.namespaces = NamespaceSubresources(registry)
        self.cache = cache
        self.authn = authn
        self.ready = False
        self.not_ready_reason = "starting"
        # Kubernetes' --max-requests-inflight / --max-mutating-requests-inflight: the seats, shared
        # by API Priority and Fairness' levels (or the legacy filter's two pools), so an overloaded
        # apiserver queues and then sheds load with an answer clients retry (nothing was done)
        # instead of serving without bound.
        self.flow_control = FlowControl(max_inflight, max_mutating_inflight, priority_and_fairness)
        # Kubernetes' MaxRequestBodyBytes; gRPC's own receive limit (server.py) must be larger,
        # or gRPC refuses first with RESOURCE_EXHAUSTED.
        self.max_request_bytes = max_request_bytes
        self._endpoints: dict[tuple[str, str, str], Endpoint] = {}

    def endpoint(self, verb: str, resource: str, subresource: str = "") -> "Endpoint":
        """The accounting of ``verb`` on ``resource``/``subresource`` (made once, then reused)."""
        key = (verb, resource, subresource)
        ep = self._endpoints.get(key)
        if ep is None:
            ep = self._endpoints[key] = Endpoint(self, verb, resource, subresource)
        return ep

    def check_ready(self) -> None:
        if not self.ready:
            raise errors.Unavailable(f"the apiserver is not ready: {self.not_ready_reason}")


class Endpoint:
    """One verb on one resource and subresource: its limit, metrics and latency, looked up once."""

    def __init__(self, api: Api, verb: str, resource: str, subresource: str = ""):
        self.api = api
        self.verb, self.resource, self.subresource = verb, resource, subresource
        self._latency = _LATENCY.labels(verb=verb, resource=resource, subresource=subresource)
        self._counters: dict[int, Any] = {}  # HTTP code -> the labelled counter, looked up once

    def count(self, code: int) -> None:
        c = self._counters.get(code)
        if c is None:
            c = self._counters[code] = _REQUESTS.labels(verb=self.verb, resource=self.resource,
                                                        subresource=self.subresource, code=str(code))
        c.inc()

    async def call(self, authenticate: Authenticate, fn: Callable[[User], Awaitable[T]],
                   refuse: errors.ApiError | None = None) -> T:
        """Run ``fn(user)`` as this endpoint's request; its ApiError (or any other exception, a
        bug: counted 500) goes to the caller, who encodes it. ``refuse``: an error the transport
        found before decoding (a request over the size limit), answered and counted as any."""
        api = self.api
        start = time.perf_counter()
        code = 201 if self.verb == "CREATE" else 200
        admitted: Admission | None = None
        try:
            if refuse is not None:
                raise refuse
            api.check_ready()
            user = authenticate()
            # The seat, once authenticated (Kubernetes' filter order): APF's level or a legacy pool.
            admission = api.flow_control.admission(user, self.verb, self.resource, self.subresource)
            if admission is not None:
                await admission.enter(user.name)
                admitted = admission
            return await fn(user)
        except errors.ApiError as exc:
            code = exc.http
            raise
        except Exception:
            code = 500
            raise
        finally:
            if admitted is not None:
                admitted.leave()
            self.count(code)
            self._latency.observe(time.perf_counter() - start)


def open_watch(api: Api, kind: Kind, authenticate: Authenticate, namespace: str, label_selector: str,
               field_selector: str, resource_version: str, bookmarks: bool, send_initial_events: bool,
               encoding: FrameEncoding = PROTOBUF, refuse: errors.ApiError | None = None) -> Watcher:
    """Register a watch on ``kind``'s cache, counted as a WATCH request; the caller streams
    ``next_batch()`` and removes the watcher from ``api.cache[kind]`` when done."""
    endpoint = api.endpoint("WATCH", kind.plural)
    try:
        if refuse is not None:
            raise refuse
        api.check_ready()
        authenticate()
        try:
            labels = selectors.parse_label_selector(label_selector)
            fields = selectors.parse_field_selector(field_selector, kind.name, kind.message.DESCRIPTOR)
        except selectors.SelectorError as exc:
            raise errors.BadRequest(str(exc)) from None
        watcher = api.cache[kind].watch(namespace if kind.namespaced else "", labels, fields, resource_version,
                                        bookmarks, send_initial_events, WATCH_MAX_PENDING, encoding)
    except errors.ApiError as exc:
        endpoint.count(exc.http)
        raise
    endpoint.count(200)
    _WATCH_STREAMS.labels(resource=kind.plural).inc()
    return watcher
