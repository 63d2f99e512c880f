"""Leader election over a coordination.k8s.io/v1 Lease: client-go's ``leaderelection.LeaderElector``.

    cfg = LeaderElectionConfig("kube-system", "kube-scheduler", identity="sched-a")
    elector = LeaderElector(client, cfg, on_started_leading=scheduler.run,
                            on_stopped_leading=lambda: sys.exit(1))
    await elector.run()

``LeaderElector`` is one candidate for one Lease; its docstring says how an election goes. Where
this differs from client-go, and why, is said where it happens: ``LeaderElector.run``, ``_stop``,
``is_leader``, ``_lease_valid``, ``_report_transition`` and
``LeaderElectionConfig.lease_duration_seconds``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Coroutine

from prometheus_client import Gauge

from machinery import errors, timeutil
from machinery.api import coordination_pb2
from machinery.client import Client
from machinery.logging import get_logger

log = get_logger()

# client-go's JitterFactor: the acquire loop sleeps retry_period * (1 + rand * JITTER_FACTOR), and
# renew_deadline must exceed retry_period * JITTER_FACTOR.
JITTER_FACTOR = 1.2

_MASTER_STATUS = Gauge("leader_election_master_status",
                       "1 if this process holds the named leader election lease, 0 if it is a standby.",
                       ["name"])


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Where the Lease is, who we are, and the timings (seconds; client-go's defaults)."""

    lease_namespace: str
    lease_name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True

    def __post_init__(self) -> None:
        for field_name in ("lease_namespace", "lease_name", "identity"):
            if not getattr(self, field_name):
                raise ValueError(f"leader election: {field_name} must not be empty")
        for field_name in ("lease_duration", "renew_deadline", "retry_period"):
            if not getattr(self, field_name) > 0:
                raise ValueError(f"leader election: {field_name} must be greater than zero "
                                 f"(got {getattr(self, field_name)})")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(f"leader election: lease_duration ({self.lease_duration}s) must be greater than "
                             f"renew_deadline ({self.renew_deadline}s)")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"leader election: renew_deadline ({self.renew_deadline}s) must be greater than "
                             f"retry_period*{JITTER_FACTOR} ({JITTER_FACTOR * self.retry_period:g}s)")

    @property
    def lease(self) -> str:
        """``namespace/name``, as logs show it."""
        return f"{self.lease_namespace}/{self.lease_name}"

    @property
    def lease_duration_seconds(self) -> int:
        """The duration written to the Lease: whole seconds (the API field), rounded up, at least 1.
        client-go truncates, which turns a sub-second duration into 0, a value the apiserver rejects."""
        return max(1, math.ceil(self.lease_duration))


@dataclass(frozen=True)
class LeaderElectionRecord:
    """What the Lease spec says about the election (client-go's LeaderElectionRecord)."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: coordination_pb2.LeaseSpec) -> "LeaderElectionRecord":
        return cls(holder_identity=spec.holder_identity, lease_duration_seconds=spec.lease_duration_seconds,
                   acquire_time=spec.acquire_time, renew_time=spec.renew_time,
                   leader_transitions=spec.lease_transitions)

    def fill(self, spec: coordination_pb2.LeaseSpec) -> None:
        """Replace ``spec`` with this record (the whole spec, as client-go's lease lock does)."""
        spec.Clear()
        spec.holder_identity = self.holder_identity
        spec.lease_duration_seconds = self.lease_duration_seconds
        spec.acquire_time = self.acquire_time
        spec.renew_time = self.renew_time
        spec.lease_transitions = self.leader_transitions


class _LeaseLock:
    """The Lease as a lock: get/create/update the record, remembering the last Lease read or
    written so an update carries its resourceVersion (client-go's resourcelock.LeaseLock)."""

    def __init__(self, client: Client, namespace: str, name: str):
        self._client = client
        self._namespace = namespace
        self._name = name
        self._lease: coordination_pb2.Lease | None = None

    async def get(self, timeout: float) -> LeaderElectionRecord:
        self._lease = await self._client.leases.get(self._name, self._namespace, timeout=timeout)
        return LeaderElectionRecord.from_spec(self._lease.spec)

    async def create(self, record: LeaderElectionRecord, timeout: float) -> None:
        lease = coordination_pb2.Lease(api_version="coordination.k8s.io/v1", kind="Lease")
        lease.metadata.name, lease.metadata.namespace = self._name, self._namespace
        record.fill(lease.spec)
        self._lease = await self._client.leases.create(lease, timeout=timeout)

    async def update(self, record: LeaderElectionRecord, timeout: float) -> None:
        if self._lease is None:
            raise errors.FailedPrecondition("lease not read yet")
        fresh = coordination_pb2.Lease()
        fresh.CopyFrom(self._lease)
        record.fill(fresh.spec)
        self._lease = await self._client.leases.update(fresh, timeout=timeout)


class LeaderElector:
    """One candidate for one Lease. ``run()`` once.

    ``run()`` tries to take the Lease every ``retry_period`` (with jitter). A Lease held by another
    identity is taken only when ``leaseDurationSeconds`` have passed since this elector last *saw the
    record change* — its own observation time on its own monotonic clock, never the timestamps in the
    record, so clock skew between candidates does not matter (client-go's rule). An empty
    ``holderIdentity`` (a released Lease) is taken at once. Once leading, ``on_started_leading()``
    runs as a task and the Lease is renewed every ``retry_period``; when no renewal has succeeded for
    ``renew_deadline`` the elector stops leading: the leading task is cancelled and awaited,
    ``on_stopped_leading()`` is called and ``run()`` returns. Cancelling ``run()`` does the same and,
    with ``release_on_cancel``, first gives the Lease up (``holderIdentity`` cleared,
    ``leaseDurationSeconds`` 1) so another candidate takes over without waiting. Every write carries
    the resourceVersion it was read at; a conflict is a failed attempt. ``leaseTransitions`` grows by
    one each time the holder changes.

    Like client-go this does not fence: for up to ``lease_duration - renew_deadline`` after a leader
    lost contact two processes may believe they lead. Metric:
    ``leader_election_master_status{name=<lease name>}`` — 1 while leading, 0 otherwise.
    """

    def __init__(self, client: Client, cfg: LeaderElectionConfig,
                 on_started_leading: Callable[[], Coroutine[Any, Any, None]],
                 on_stopped_leading: Callable[[], None], on_new_leader: Callable[[str], None] | None = None,
                 may_release: Callable[[], bool] | None = None):
        self._cfg = cfg
        self._may_release = may_release
        self._lock = _LeaseLock(client, cfg.lease_namespace, cfg.lease_name)
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._observed = LeaderElectionRecord()
        self._observed_time = 0.0  # time.monotonic() when the observed record last changed
        self._reported_leader = ""
        self._leading = False
        self._started = False
        _MASTER_STATUS.labels(cfg.lease_name).set(0)

    @property
    def config(self) -> LeaderElectionConfig:
        return self._cfg

    def is_leader(self) -> bool:
        """True while this elector leads: it acquired the Lease, has not stopped, and the last
        record it saw names it: only between acquisition and stop, not merely whenever the last
        record seen names this identity (as client-go's ``IsLeader`` is)."""
        return self._leading and self._observed_holds()

    def leader(self) -> str:
        """The holder of the last record this elector saw ("" before the first read or when released)."""
        return self._observed.holder_identity

    # ------------------------------------------------------------------------------ run

    async def run(self) -> None:
        """Acquire, lead, and return once leadership is lost. Cancel it to stop (releasing the
        Lease if configured). If ``on_started_leading`` fails, leadership ends the same way and
        its exception is raised here (in Go a panic in the goroutine ends the process, and with it
        the lease); one that returns leaves the elector leading."""
        if self._started:
            raise RuntimeError("LeaderElector.run() may be called only once")
        self._started = True
        leading_task: asyncio.Task[None] | None = None
        failure: BaseException | None = None
        lost = False
        try:
            await self._acquire()
            self._leading = True
            _MASTER_STATUS.labels(self._cfg.lease_name).set(1)
            log.info("leader_elected", lease=self._cfg.lease, identity=self._cfg.identity)
            leading_task = asyncio.create_task(self._on_started_leading(), name=f"leading:{self._cfg.lease}")
            failure = await self._renew(leading_task)
            lost = failure is None
        finally:
            await self._stop(leading_task, lost)
        if failure is not None:
            raise failure

    async def _acquire(self) -> None:
        log.info("leader_election_acquiring", lease=self._cfg.lease, identity=self._cfg.identity)
        while True:
            succeeded = await self._attempt(self._cfg.renew_deadline)
            self._report_transition()
            if succeeded:
                return
            log.debug("lease_not_acquired", lease=self._cfg.lease, identity=self._cfg.identity,
                      holder=self._observed.holder_identity)
            await asyncio.sleep(self._cfg.retry_period * (1 + random.random() * JITTER_FACTOR))

    async def _renew(self, leading_task: asyncio.Task[None]) -> BaseException | None:
        """Renew every retry_period until a round finds no success within renew_deadline (returns
        None) or the leading task fails (returns its exception)."""
        while True:
            deadline = time.monotonic() + self._cfg.renew_deadline
            renewed = False
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if await self._attempt(remaining):
                    renewed = True
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                exc = await self._wait_leading(leading_task, min(self._cfg.retry_period, remaining))
                if exc is not None:
                    return exc
            self._report_transition()
            if not renewed:
                log.warning("leader_lost", lease=self._cfg.lease, identity=self._cfg.identity,
                            reason="renew_deadline_exceeded", renew_deadline=self._cfg.renew_deadline,
                            holder=self._observed.holder_identity)
                return None
            exc = await self._wait_leading(leading_task, self._cfg.retry_period)
            if exc is not None:
                return exc

    @staticmethod
    async def _wait_leading(task: asyncio.Task[None], seconds: float) -> BaseException | None:
        """Sleep ``seconds``, waking early with the leading task's exception if it fails. A task
        that returns (or is cancelled by someone else) leaves the elector leading, as client-go."""
        if task.done():
            await asyncio.sleep(seconds)
        else:
            await asyncio.wait({task}, timeout=seconds)
        if task.done() and not task.cancelled():
            return task.exception()
        return None

    async def _stop(self, leading_task: asyncio.Task[None] | None, lost: bool) -> None:
        """Leave leadership: cancel and await the leading work, release the Lease if configured,
        then tell the caller. Runs on loss, on the leading task's failure and on cancellation.

        ``on_stopped_leading`` runs only if this elector led (client-go calls it whenever ``Run``
        returns); ``run()`` returning already says the election ended. The leading task is cancelled
        *and awaited* before the Lease is released, so the work the Lease guards has stopped before
        another candidate can take it at once. And the leading work may say it has not
        (``may_release``: a scheduler whose stop cut a binding short, which may still land): the
        Lease is then kept, to expire, rather than handed to a standby that could act against that
        late write."""
        led = self._leading
        self._leading = False
        if led:
            _MASTER_STATUS.labels(self._cfg.lease_name).set(0)
        if leading_task is not None:
            # The leading work may take a while to end (a scheduler lets its bindings in flight
            # land): the Lease it guards is renewed meanwhile, or it could expire and a standby
            # take over while that work still writes. Lost, there is nothing to renew.
            keep = asyncio.create_task(self._keep_renewing(), name=f"renew-while-stopping:{self._cfg.lease}") \
                if led and not lost else None
            leading_task.cancel()
            try:
                await asyncio.wait({leading_task})
            finally:
                if keep is not None:
                    keep.cancel()
                    await asyncio.wait({keep})
            if not leading_task.cancelled() and leading_task.exception() is not None:
                exc = leading_task.exception()
                log.error("leading_task_failed", lease=self._cfg.lease, identity=self._cfg.identity,
                          error=repr(exc), exc_info=exc)
        if not led:
            return  # never acquired: nothing to release or report (client-go releases only after leading)
        released = False
        if self._cfg.release_on_cancel:
            if self._may_release is None or self._may_release():
                released = await self._release()
            else:
                log.warning("lease_kept_to_expire", lease=self._cfg.lease, identity=self._cfg.identity,
                            reason="the leading work ended with writes that may still land")
        if not lost:
            log.info("leader_stopped", lease=self._cfg.lease, identity=self._cfg.identity, released=released)
        try:
            self._on_stopped_leading()
        except Exception as exc:  # a callback's bug must not hide why we stopped
            log.error("on_stopped_leading_failed", lease=self._cfg.lease, error=repr(exc), exc_info=exc)

    async def _keep_renewing(self) -> None:
        """Renew every retry_period until cancelled (while the leading work ends)."""
        while True:
            await self._attempt(self._cfg.renew_deadline)
            await asyncio.sleep(self._cfg.retry_period)

    async def _release(self) -> bool:
        """Give the Lease up if the last record we saw names us: holder cleared, duration 1 s."""
        if not self._observed_holds():
            return False
        timeout = self._cfg.renew_deadline
        try:
            async with asyncio.timeout(timeout):
                # Read the Lease first, as client-go's release does: a renewal cut short by the stop
                # may have landed after all, and an update carrying the older resourceVersion
                # would fail with a conflict and leave the Lease held until it expires.
                current = await self._lock.get(timeout)
                if current.holder_identity != self._cfg.identity:
                    self._set_observed(current)
                    return False
                now = timeutil.rfc3339_micro()
                record = LeaderElectionRecord(holder_identity="", lease_duration_seconds=1, acquire_time=now,
                                              renew_time=now, leader_transitions=current.leader_transitions)
                await self._lock.update(record, timeout)
        except (errors.ApiError, TimeoutError) as exc:
            log.error("lease_release_failed", lease=self._cfg.lease, identity=self._cfg.identity,
                      error=_describe(exc))
            return False
        self._set_observed(record)
        log.info("lease_released", lease=self._cfg.lease, identity=self._cfg.identity)
        return True

    # ------------------------------------------------------------------- one attempt

    async def _attempt(self, timeout: float) -> bool:
        """One try to acquire or renew, bounded by ``timeout``; any API failure is a failed try."""
        try:
            async with asyncio.timeout(timeout):
                return await self._try_acquire_or_renew(timeout)
        except TimeoutError:
            log.warning("lease_attempt_timed_out", lease=self._cfg.lease, identity=self._cfg.identity,
                        timeout=timeout)
            return False

    async def _try_acquire_or_renew(self, timeout: float) -> bool:
        cfg = self._cfg
        now = time.monotonic()
        stamp = timeutil.rfc3339_micro()
        record = LeaderElectionRecord(holder_identity=cfg.identity, lease_duration_seconds=cfg.lease_duration_seconds,
                                      acquire_time=stamp, renew_time=stamp)

        # Fast path: the leader writes over the Lease it last saw, assuming nobody else wrote.
        if self._observed_holds() and self._lease_valid(now):
            renewal = replace(record, acquire_time=self._observed.acquire_time,
                              leader_transitions=self._observed.leader_transitions)
            try:
                await self._lock.update(renewal, timeout)
                self._set_observed(renewal)
                return True
            except errors.ApiError as exc:
                log.warning("lease_renew_fast_path_failed", lease=cfg.lease, identity=cfg.identity,
                         error=_describe(exc))

        # Slow path: read the Lease (create it if there is none), then decide.
        try:
            current = await self._lock.get(timeout)
        except errors.NotFound:
            try:
                await self._lock.create(record, timeout)
            except errors.ApiError as exc:
                log.warning("lease_create_failed", lease=cfg.lease, identity=cfg.identity, error=_describe(exc))
                return False
            self._set_observed(record)
            return True
        except errors.ApiError as exc:
            log.warning("lease_get_failed", lease=cfg.lease, identity=cfg.identity, error=_describe(exc))
            return False

        if current != self._observed:
            self._set_observed(current)
        if current.holder_identity and self._lease_valid(now) and not self._observed_holds():
            return False  # held by another and, by our own clock, not yet expired

        if self._observed_holds():
            record = replace(record, acquire_time=current.acquire_time, leader_transitions=current.leader_transitions)
        else:
            record = replace(record, leader_transitions=current.leader_transitions + 1)
        try:
            await self._lock.update(record, timeout)
        except errors.ApiError as exc:
            log.warning("lease_update_failed", lease=cfg.lease, identity=cfg.identity, error=_describe(exc))
            return False
        self._set_observed(record)
        return True

    # ------------------------------------------------------------------- observation

    def _observed_holds(self) -> bool:
        return self._observed.holder_identity == self._cfg.identity

    def _lease_valid(self, now: float) -> bool:
        """Not yet expired, judged from the record's whole seconds (as client-go does) and the time this
        elector observed it on ``time.monotonic()`` (Go's ``time.Now()`` carries a monotonic reading
        too)."""
        return self._observed_time + self._observed.lease_duration_seconds > now

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = time.monotonic()

    def _report_transition(self) -> None:
        """Tell ``on_new_leader``, synchronously (a difference from client-go), when the observed holder
        changes (an empty holder is no leader: it is remembered but not reported)."""
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if not holder:
            return
        log.info("new_leader", lease=self._cfg.lease, leader=holder, identity=self._cfg.identity)
        if self._on_new_leader is not None:
            try:
                self._on_new_leader(holder)
            except Exception as exc:
                log.error("on_new_leader_failed", lease=self._cfg.lease, error=repr(exc), exc_info=exc)


def _describe(exc: BaseException) -> str:
    return exc.message if isinstance(exc, errors.ApiError) else (str(exc) or type(exc).__name__)
