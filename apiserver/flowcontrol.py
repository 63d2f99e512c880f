"""API Priority and Fairness, with its bootstrap configuration: which seats a request takes.

Kubernetes' apiserver limits the requests it serves at once (the two inflight flags' sum, the
server's concurrency limit) and, by default (``--enable-priority-and-fairness``), shares that limit
between priority levels: a request is matched to the first FlowSchema (by precedence) whose rules
fit its user, verb and resource; the schema names its priority level and how its flows are told
apart (here: by user). A level's seats are its nominal concurrency shares of the limit
(``ceil(limit × shares / Σ shares)``); a request beyond them waits in the level's queues, up to
the request wait limit, and is refused with 429 only when its queue is full or the wait ran out.
So a node's heartbeats (``node-high``), the controllers' leader Leases (``leader-election``), the
scheduler's and controller-manager's work (``workload-high``) and everybody else
(``global-default``) cannot starve one another; ``system:masters`` is exempt.

kplane has the bootstrap objects (k8s.io/apiserver's ``bootstrap/default.go``) as fixed data, not
as API objects, and each level's queuing in a simpler shape: each flow has its own FIFO queue of
at most ``hand_size × queue_length_limit`` requests (the most shuffle sharding lets one flow
hold), the level at most ``queues × queue_length_limit``, and a seat given back goes to the flows
with waiters in turn (round robin) — APF's fair queuing when requests cost alike. Not built:
borrowing between levels, work estimates (every request is one seat), watches' seats (a watch
takes none), FlowSchema and PriorityLevelConfiguration objects.

With ``--enable-priority-and-fairness=false``, the legacy filter: two pools, ``readOnly`` and
``mutating`` (the two flags), refusing at once beyond their seats; ``system:masters`` exempt.
"""

from __future__ import annotations

import asyncio
import collections
import math
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from apiserver.auth import MASTERS_GROUP, NODES_GROUP, User
from machinery import errors

TOO_MANY_REQUESTS = "Too many requests, please try again later."
MUTATING_VERBS = frozenset({"CREATE", "UPDATE", "PATCH", "DELETE", "DELETECOLLECTION"})
REQUEST_WAIT_LIMIT = 15.0  # APF's: a quarter of the apiserver's request timeout (60 s)

_CURRENT = Gauge("apiserver_current_inflight_requests", "Maximal number of currently used inflight request limit of "
                 "this apiserver per request kind in last second.", ["request_kind"])
_REJECTED = Counter("apiserver_rejected_requests_total", "Requests refused with 429 because too many were in flight.",
                    ["request_kind"])
_EXECUTING = Gauge("apiserver_flowcontrol_current_executing_requests",
                   "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution stage in the API "
                   "Priority and Fairness subsystem", ["priority_level", "flow_schema"])
_INQUEUE = Gauge("apiserver_flowcontrol_current_inqueue_requests",
                 "Number of requests currently pending in queues of the API Priority and Fairness subsystem",
                 ["priority_level", "flow_schema"])
_FC_REJECTED = Counter("apiserver_flowcontrol_rejected_requests_total",
                       "Number of requests rejected by API Priority and Fairness subsystem",
                       ["priority_level", "flow_schema", "reason"])
_DISPATCHED = Counter("apiserver_flowcontrol_dispatched_requests_total",
                      "Number of requests executed by API Priority and Fairness subsystem",
                      ["priority_level", "flow_schema"])
_WAIT = Histogram("apiserver_flowcontrol_request_wait_duration_seconds",
                  "Length of time a request spent waiting in its queue", ["priority_level", "flow_schema", "execute"],
                  buckets=(0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30))
_NOMINAL = Gauge("apiserver_flowcontrol_nominal_limit_seats",
                 "Nominal number of execution seats configured for each priority level", ["priority_level"])


@dataclass(frozen=True)
class PriorityLevel:
    """A PriorityLevelConfiguration of type Limited: its shares; queues 0 means Reject."""
    name: str
    shares: int
    queues: int = 0
    hand_size: int = 0
    queue_length_limit: int = 0


# The bootstrap priority levels (suggested and mandatory), in Kubernetes' shares and queuing.
LEVELS = (
    PriorityLevel("system", 30, 64, 6, 50),
    PriorityLevel("node-high", 40, 64, 6, 50),
    PriorityLevel("leader-election", 10, 16, 4, 50),
    PriorityLevel("workload-high", 40, 128, 6, 50),
    PriorityLevel("workload-low", 100, 128, 6, 50),
    PriorityLevel("global-default", 20, 128, 6, 50),
    PriorityLevel("catch-all", 5),
)
KUBE_SCHEDULER = "system:kube-scheduler"
KUBE_CONTROLLER_MANAGER = "system:kube-controller-manager"
SERVICE_ACCOUNTS_GROUP = "system:serviceaccounts"
_LEADER_ELECTION_VERBS = frozenset({"GET", "CREATE", "UPDATE"})


def flow_schema(user: User, verb: str, resource: str, subresource: str) -> tuple[str, str] | None:
    """(FlowSchema, priority level) of a request, by the bootstrap FlowSchemas in their matching
    precedence; None for ``exempt`` (system:masters)."""
    groups = user.groups
    if MASTERS_GROUP in groups:
        return None  # exempt, 1
    if user.name in (KUBE_SCHEDULER, KUBE_CONTROLLER_MANAGER) and resource == "leases" and \
            verb in _LEADER_ELECTION_VERBS:
        return "system-leader-election", "leader-election"  # 100 (its endpoints/configmaps locks: none here)
    if NODES_GROUP in groups:
        if resource == "leases" or (resource == "nodes" and subresource in ("", "status")):
            return "system-node-high", "node-high"  # 400
        return "system-nodes", "system"  # 500
    if user.name == KUBE_CONTROLLER_MANAGER:
        return "kube-controller-manager", "workload-high"  # 800
    if user.name == KUBE_SCHEDULER:
        return "kube-scheduler", "workload-high"  # 800
    if SERVICE_ACCOUNTS_GROUP in groups:
        return "service-accounts", "workload-low"  # 9000 (kube-system's: 900, workload-high; none here)
    return "global-default", "global-default"  # 9900


class Refused(Exception):
    def __init__(self, reason: str):
        self.reason = reason


class Seats:
    """One pool of seats: ``limit`` requests executing at once (0: no limit), then a queue per
    flow (``flow_limit`` each, ``queue_limit`` in all; 0: refuse at once) served in turn."""

    def __init__(self, limit: int, queue_limit: int = 0, flow_limit: int = 0,
                 wait_limit: float = REQUEST_WAIT_LIMIT):
        self.limit, self.inflight = limit, 0
        self.queue_limit, self.flow_limit, self.wait_limit = queue_limit, flow_limit, wait_limit
        self.waiting = 0
        self._flows: dict[str, collections.deque[asyncio.Future[None]]] = {}
        self._turns: collections.deque[str] = collections.deque()  # flows with waiters, in turn

    def try_take(self) -> bool:
        """Take a free seat; False when the seats are taken (every waiter holds them full)."""
        if self.limit and self.inflight >= self.limit:
            return False
        self.inflight += 1
        return True

    async def wait(self, flow: str) -> float:
        """Queue in ``flow``'s queue for a seat; on return (the seconds waited) the caller holds
        one. Raises ``Refused`` (queue-full, time-out); a cancelled waiter leaves its queue."""
        if not self.queue_limit:
            raise Refused("concurrency-limit")
        queue = self._flows.get(flow)
        if self.waiting >= self.queue_limit or (queue is not None and len(queue) >= self.flow_limit):
            raise Refused("queue-full")
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if queue is None:
            queue = self._flows[flow] = collections.deque()
            self._turns.append(flow)
        queue.append(fut)
        self.waiting += 1
        start = time.perf_counter()
        try:
            async with asyncio.timeout(self.wait_limit):
                await fut
        except BaseException as exc:
            if fut.done() and not fut.cancelled():
                self.give_back()  # a seat handed over as the wait ended: pass it on
            else:
                fut.cancel()
                self._leave(flow, queue, fut)
            if isinstance(exc, TimeoutError):
                raise Refused("time-out") from None
            raise
        return time.perf_counter() - start

    def give_back(self) -> None:
        """Give a seat back: to the next flow's first waiter, in turn, else free it."""
        turns = self._turns
        if turns:
            flow = turns.popleft()
            queue = self._flows[flow]
            fut = queue.popleft()
            if queue:
                turns.append(flow)
            else:
                del self._flows[flow]
            self.waiting -= 1
            fut.set_result(None)  # the seat changes hands: inflight stays
            return
        self.inflight -= 1

    def _leave(self, flow: str, queue: collections.deque[asyncio.Future[None]], fut: asyncio.Future[None]) -> None:
        queue.remove(fut)
        self.waiting -= 1
        if not queue:
            del self._flows[flow]
            self._turns.remove(flow)


class Admission:
    """What one kind of request (its endpoint and its user's FlowSchema) takes and counts."""

    __slots__ = ("seats", "kind_gauge", "executing", "inqueue", "dispatched", "waited", "rejected")

    def __init__(self, seats: Seats, kind_gauge: Any, executing: Any = None, inqueue: Any = None,
                 dispatched: Any = None, waited: Any = None, rejected: Any = None):
        self.seats, self.kind_gauge = seats, kind_gauge
        self.executing, self.inqueue, self.dispatched, self.waited = executing, inqueue, dispatched, waited
        self.rejected = rejected  # reason -> counter

    async def enter(self, flow: str) -> None:
        """Take a seat, waiting for one if the level queues; raises TooManyRequests if refused."""
        if not self.seats.try_take():
            if self.inqueue is not None:
                self.inqueue.inc()
            try:
                waited = await self.seats.wait(flow)
            except Refused as exc:
                self.rejected(exc.reason).inc()
                if self.waited is not None and exc.reason == "time-out":
                    self.waited("false").observe(self.seats.wait_limit)
                raise errors.TooManyRequests(TOO_MANY_REQUESTS) from None
            finally:
                if self.inqueue is not None:
                    self.inqueue.dec()
            if self.waited is not None:
                self.waited("true").observe(waited)
        self.kind_gauge.inc()
        if self.executing is not None:
            self.executing.inc()
            self.dispatched.inc()

    def leave(self) -> None:
        self.seats.give_back()
        self.kind_gauge.dec()
        if self.executing is not None:
            self.executing.dec()


class FlowControl:
    """The server's seats, APF's (``enabled``) or the legacy filter's, and which a request takes."""

    def __init__(self, max_inflight: int, max_mutating_inflight: int, enabled: bool = True,
                 wait_limit: float = REQUEST_WAIT_LIMIT):
        self.enabled = enabled
        self.levels: dict[str, Seats] = {}
        self.legacy: dict[str, Seats] = {}
        self._admissions: dict[tuple[str, str, str, str, tuple[str, ...]], Admission | None] = {}
        if enabled:
            limit = max_inflight + max_mutating_inflight
            total = sum(level.shares for level in LEVELS)
            for level in LEVELS:
                seats = math.ceil(limit * level.shares / total) if limit else 0
                self.levels[level.name] = Seats(seats, level.queues * level.queue_length_limit,
                                                level.hand_size * level.queue_length_limit, wait_limit)
                _NOMINAL.labels(priority_level=level.name).set(seats)
        else:
            self.legacy = {"readOnly": Seats(max_inflight), "mutating": Seats(max_mutating_inflight)}

    def admission(self, user: User, verb: str, resource: str, subresource: str) -> Admission | None:
        """What a request of ``user`` takes (None: exempt), worked out once per user and endpoint."""
        # Every node's requests match alike (by its group): one entry for them all.
        key = (verb, resource, subresource, "" if NODES_GROUP in user.groups else user.name, user.groups)
        try:
            return self._admissions[key]
        except KeyError:
            pass
        kind = "mutating" if verb in MUTATING_VERBS else "readOnly"
        adm: Admission | None
        if MASTERS_GROUP in user.groups:
            adm = None
        elif not self.enabled:
            adm = Admission(self.legacy[kind], _CURRENT.labels(request_kind=kind),
                            rejected=_legacy_rejected(kind))
        else:
            match = flow_schema(user, verb, resource, subresource)
            assert match is not None  # masters are handled above
            schema, level = match
            labels = {"priority_level": level, "flow_schema": schema}
            adm = Admission(self.levels[level], _CURRENT.labels(request_kind=kind),
                            executing=_EXECUTING.labels(**labels), inqueue=_INQUEUE.labels(**labels),
                            dispatched=_DISPATCHED.labels(**labels),
                            waited=lambda execute: _WAIT.labels(**labels, execute=execute),
                            rejected=lambda reason: _FC_REJECTED.labels(**labels, reason=reason))
        self._admissions[key] = adm
        return adm


def _legacy_rejected(kind: str) -> Any:
    counter = _REJECTED.labels(request_kind=kind)
    return lambda _reason: counter
