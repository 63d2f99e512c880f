"""The request path both transports share: readiness, the inflight limits, authentication,
metrics and latency, for the gRPC API (``handlers.py``) and the REST API (``rest/``).

A transport decodes its request, then runs the verb through ``Endpoint.call`` (one per verb,
resource and subresource): the apiserver must be ready, the caller is authenticated, a request
beyond its seats is refused with 429 or queued for one (``Seats``), and the verb runs — the same
``Registry`` / ``PodSubresources`` / ``ScaleSubresource`` / ``NamespaceSubresources`` call
whichever transport asked, so admission (node restriction included: it is called inside those
functions), validation and dry runs are one implementation. Each call is counted in
``apiserver_request_total{verb,resource,subresource,code}`` with the HTTP code Kubernetes would
answer, and timed. The transport then encodes the answer or the ``ApiError`` its own way (a gRPC
status, a metav1.Status). ``open_watch`` does the same for watches.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from typing import Any, Awaitable, Callable, NoReturn, TypeVar

from prometheus_client import Counter, Gauge, Histogram

from apiserver.auth import MASTERS_GROUP, NODES_GROUP, TokenAuthenticator, User
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
_CURRENT = Gauge("apiserver_current_inflight_requests", "Maximal number of currently used inflight request limit of "
                 "this apiserver per request kind in last second.", ["request_kind"])
_REJECTED = Counter("apiserver_rejected_requests_total", "Requests refused with 429 because too many were in flight.",
                    ["request_kind"])
_FC_EXECUTING = Gauge("apiserver_flowcontrol_current_executing_requests",
                      "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API "
                      "Priority and Fairness subsystem", ["priority_level", "flow_schema"])
_FC_REJECTED = Counter("apiserver_flowcontrol_rejected_requests_total",
                       "Number of requests rejected by API Priority and Fairness subsystem",
                       ["priority_level", "flow_schema", "reason"])
_FC_INQUEUE = Gauge("apiserver_flowcontrol_current_inqueue_requests",
                    "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
                    ["priority_level", "flow_schema"])
_FC_WAIT = Histogram("apiserver_flowcontrol_request_wait_duration_seconds",
                     "Length of time a request spent waiting in its queue",
                     ["priority_level", "flow_schema", "execute"],
                     buckets=(0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30))
TOO_MANY_REQUESTS = "Too many requests, please try again later."
MUTATING_VERBS = frozenset({"CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION"})
WATCH_MAX_PENDING = 50_000

T = TypeVar("T")
Authenticate = Callable[[], User]

# API Priority and Fairness' default nominal concurrency shares (its bootstrap configuration):
# node-high's share of the server's concurrency limit (the two inflight flags' sum) is its seats.
NODE_HIGH_SHARES = 40
ALL_SHARES = 245  # system 30, node-high 40, leader-election 10, workload-high 40, workload-low 100,
#                   global-default 20, catch-all 5
NODE_HIGH_QUEUE = 64 * 50  # node-high's queues × its queueLengthLimit
REQUEST_WAIT_LIMIT = 15.0  # APF's: a quarter of the apiserver's request timeout (60 s)


class Seats:
    """A pool of requests executing at once (``limit``; 0: no limit).

    kplane has the legacy filter's two pools (Kubernetes' ``--enable-priority-and-fairness=false``:
    ``readOnly`` and ``mutating``, from the two inflight flags), where a request beyond the seats
    is refused at once with 429, and one priority level of API Priority and Fairness,
    ``node-high``: a node's heartbeats — its Lease and its Node and Node/status, asked by the
    ``system:nodes`` group (the FlowSchema ``system-node-high``) — run in seats of their own, so
    that a workload flooding the mutating pool does not starve the Leases and turn nodes Unknown.
    ``system:masters`` is exempt from every pool, as in both of Kubernetes' filters.

    A pool with a ``queue_limit`` queues as APF does: a request beyond the seats waits for one,
    first come first served, up to ``wait_limit`` seconds (APF's request wait limit, a quarter of
    the request timeout: 15 s), and is refused with 429 only when the queue is full
    (``queue-full``) or the wait ran out (``time-out``). A seat given back goes straight to the
    first waiter. APF shuffle-shards each flow over its level's queues; every flow of node-high is
    one node, which has one heartbeat in flight at a time, so one queue of the level's whole length
    (64 queues × 50) serves them in the same order."""

    def __init__(self, limit: int, gauge: Any, rejected: Callable[[str], Any], queue_limit: int = 0,
                 wait_limit: float = 0.0, inqueue: Any = None, waited: Callable[[str], Any] | None = None):
        self.limit, self.inflight = limit, 0
        self.queue_limit, self.wait_limit = queue_limit, wait_limit
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self.waiting = 0  # live waiters (a waiter that gave up stays in the deque, cancelled)
        self._gauge, self._rejected, self._inqueue, self._waited = gauge, rejected, inqueue, waited

    def try_take(self) -> bool:
        """Take a free seat if there is one and nobody waits for it before this request."""
        if self.limit and self.inflight >= self.limit:
            if not self.queue_limit:
                self._reject("concurrency-limit")
            return False
        self.inflight += 1
        self._gauge.set(self.inflight)
        return True

    async def wait(self) -> None:
        """Queue for a seat (``try_take`` found none); on return the caller holds one."""
        if self.waiting >= self.queue_limit:
            self._reject("queue-full")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        self._queued(+1)
        start = time.perf_counter()
        try:
            async with asyncio.timeout(self.wait_limit):
                await fut
        except BaseException as exc:
            if fut.done() and not fut.cancelled():
                self.give_back()  # a seat handed over as the wait ended: pass it on
            else:
                fut.cancel()
                self._queued(-1)
            if self._waited is not None:
                self._waited("false").observe(time.perf_counter() - start)
            if isinstance(exc, TimeoutError):
                self._reject("time-out")
            raise
        if self._waited is not None:
            self._waited("true").observe(time.perf_counter() - start)

    def give_back(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                self._queued(-1)
                fut.set_result(None)  # the seat changes hands: inflight stays
                return
        self.inflight -= 1
        self._gauge.set(self.inflight)

    def _queued(self, delta: int) -> None:
        self.waiting += delta
        if self._inqueue is not None:
            self._inqueue.set(self.waiting)

    def _reject(self, reason: str) -> NoReturn:
        self._rejected(reason).inc()
        raise errors.TooManyRequests(TOO_MANY_REQUESTS)


def _legacy_rejected(kind: str) -> Callable[[str], Any]:
    counter = _REJECTED.labels(request_kind=kind)
    return lambda _reason: counter


class Api:
    """Everything a request needs, whichever transport it came by."""

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
        node_high = (math.ceil((max_inflight + max_mutating_inflight) * NODE_HIGH_SHARES / ALL_SHARES)
                     if max_inflight and max_mutating_inflight else 0)
        self.seats = {
            kind: Seats(limit, _CURRENT.labels(request_kind=kind), _legacy_rejected(kind))
            for kind, limit in (("readOnly", max_inflight), ("mutating", max_mutating_inflight))}
        level = {"priority_level": "node-high", "flow_schema": "system-node-high"}
        self.seats["node-high"] = Seats(
            node_high, _FC_EXECUTING.labels(**level), lambda reason: _FC_REJECTED.labels(**level, reason=reason),
            queue_limit=NODE_HIGH_QUEUE, wait_limit=REQUEST_WAIT_LIMIT, inqueue=_FC_INQUEUE.labels(**level),
            waited=lambda execute: _FC_WAIT.labels(**level, execute=execute))
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
        self.request_kind = "mutating" if verb in MUTATING_VERBS else "readOnly"
        # A node's heartbeat when a node asks (``Seats``): its Lease, its Node or Node/status.
        self.heartbeat = resource == "leases" or (resource == "nodes" and subresource in ("", "status"))
        self._latency = _LATENCY.labels(verb=verb, resource=resource, subresource=subresource)
        self._counters: dict[int, Any] = {}  # HTTP code -> the labelled counter, looked up once

    def _pool(self, user: User) -> Seats | None:
        """The seats this request takes (None: exempt), as Kubernetes' filter decides after
        authentication."""
        groups = user.groups
        if MASTERS_GROUP in groups:
            return None
        if self.heartbeat and NODES_GROUP in groups:
            return self.api.seats["node-high"]
        return self.api.seats[self.request_kind]

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
        seats: Seats | None = None
        try:
            if refuse is not None:
                raise refuse
            api.check_ready()
            user = authenticate()
            pool = self._pool(user)
            if pool is not None:
                if not pool.try_take():
                    await pool.wait()
                seats = pool
            return await fn(user)
        except errors.ApiError as exc:
            code = exc.http
            raise
        except Exception:
            code = 500
            raise
        finally:
            if seats is not None:
                seats.give_back()
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
