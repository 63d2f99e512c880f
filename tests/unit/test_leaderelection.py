"""Leader election (machinery/leaderelection.py) against an in-memory Lease store.

The store does what the apiserver does for a Lease that matters here: get/create/update with
resourceVersion checks (a stale version is a Conflict). Durations are short — lease 0.6 s (written
as 1 s, the API's whole seconds), renew deadline 0.4 s, retry 0.1 s — and every wait is an
eventual one; the only "must not happen" checks use a lease far longer than the check.
"""

from __future__ import annotations

import asyncio
import itertools
import time

import pytest
from prometheus_client import REGISTRY

from machinery import errors
from machinery.api import coordination_pb2
from machinery.leaderelection import LeaderElectionConfig, LeaderElector
from tests.harness.wait import eventually

NS = "kube-system"
_names = itertools.count()


class LeaseStore:
    """The Leases of one fake apiserver."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], coordination_pb2.Lease] = {}
        self._rv = itertools.count(1)
        self.writes: list[coordination_pb2.Lease] = []

    def lease(self, name: str) -> coordination_pb2.Lease:
        return self.objects[(NS, name)]

    def _store(self, lease: coordination_pb2.Lease) -> coordination_pb2.Lease:
        stored = coordination_pb2.Lease()
        stored.CopyFrom(lease)
        stored.metadata.resource_version = str(next(self._rv))
        self.objects[(lease.metadata.namespace, lease.metadata.name)] = stored
        self.writes.append(stored)
        out = coordination_pb2.Lease()
        out.CopyFrom(stored)
        return out

    def touch(self, name: str) -> None:
        """Someone else writes the Lease (a label): its resourceVersion moves on, the spec stays."""
        lease = coordination_pb2.Lease()
        lease.CopyFrom(self.lease(name))
        lease.metadata.labels["touched"] = "yes"
        self._store(lease)


class FakeLeases:
    """``client.leases`` for one candidate; ``broken`` makes every call fail as an unreachable apiserver."""

    def __init__(self, store: LeaseStore):
        self.store = store
        self.broken = False

    def _check(self) -> None:
        if self.broken:
            raise errors.Unavailable("connection refused")

    async def get(self, name: str, namespace: str = "", *, timeout: float | None = None):
        await asyncio.sleep(0)
        self._check()
        lease = self.store.objects.get((namespace, name))
        if lease is None:
            raise errors.not_found("leases.coordination.k8s.io", name)
        out = coordination_pb2.Lease()
        out.CopyFrom(lease)
        return out

    async def create(self, obj, *, timeout: float | None = None):
        await asyncio.sleep(0)
        self._check()
        if (obj.metadata.namespace, obj.metadata.name) in self.store.objects:
            raise errors.already_exists("leases.coordination.k8s.io", obj.metadata.name)
        return self.store._store(obj)

    async def update(self, obj, *, timeout: float | None = None):
        await asyncio.sleep(0)
        self._check()
        current = self.store.objects.get((obj.metadata.namespace, obj.metadata.name))
        if current is None:
            raise errors.not_found("leases.coordination.k8s.io", obj.metadata.name)
        if obj.metadata.resource_version != current.metadata.resource_version:
            raise errors.conflict("leases.coordination.k8s.io", obj.metadata.name)
        return self.store._store(obj)


class FakeClient:
    def __init__(self, store: LeaseStore):
        self.leases = FakeLeases(store)


class Candidate:
    """One elector with its callbacks recorded, run as a task."""

    def __init__(self, store: LeaseStore, lease: str, identity: str, *, lease_duration: float = 0.6,
                 renew_deadline: float = 0.4, retry_period: float = 0.1, release_on_cancel: bool = False,
                 leading_work=None, may_release=None):
        self.client = FakeClient(store)
        self.started = 0
        self.stopped = 0
        self.leading_cancelled = False
        self.new_leaders: list[str] = []
        self._leading_work = leading_work
        cfg = LeaderElectionConfig(NS, lease, identity, lease_duration=lease_duration, renew_deadline=renew_deadline,
                                   retry_period=retry_period, release_on_cancel=release_on_cancel)
        self.elector = LeaderElector(self.client, cfg, self._lead, self._stop, self.new_leaders.append,
                                     may_release=may_release)
        self.task: asyncio.Task | None = None

    async def _lead(self) -> None:
        self.started += 1
        if self._leading_work is not None:
            await self._leading_work()
            return
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.leading_cancelled = True
            raise

    def _stop(self) -> None:
        self.stopped += 1

    def start(self) -> "Candidate":
        self.task = asyncio.create_task(self.elector.run())
        return self

    async def cancel(self) -> None:
        self.task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await self.task

    def is_leader(self) -> bool:
        return self.elector.is_leader()


@pytest.fixture
def store():
    return LeaseStore()


@pytest.fixture
def lease_name():
    return f"sched-{next(_names)}"


@pytest.fixture
async def candidates():
    started: list[Candidate] = []
    yield started
    for c in started:
        if c.task is not None and not c.task.done():
            c.task.cancel()
            try:
                await c.task
            except (asyncio.CancelledError, Exception):
                pass


async def _a_leads_b_follows(store, lease_name, candidates, a_kw: dict | None = None,
                             b_kw: dict | None = None) -> tuple["Candidate", "Candidate"]:
    """Candidate a started and leading, then b started and seeing a as the leader."""
    a = Candidate(store, lease_name, "a", **(a_kw or {}))
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    b = Candidate(store, lease_name, "b", **(b_kw or {}))
    candidates.append(b.start())
    await eventually(lambda: b.elector.leader() == "a", what="b sees a")
    return a, b


def master_status(lease: str) -> float | None:
    return REGISTRY.get_sample_value("leader_election_master_status", {"name": lease})


# ---------------------------------------------------------------------------------- config


def test_config_defaults_are_client_gos():
    cfg = LeaderElectionConfig(NS, "kube-scheduler", "a")
    assert (cfg.lease_duration, cfg.renew_deadline, cfg.retry_period) == (15.0, 10.0, 2.0)
    assert cfg.release_on_cancel and cfg.lease_duration_seconds == 15 and cfg.lease == "kube-system/kube-scheduler"


@pytest.mark.parametrize("kw, message", [
    ({"lease_duration": 10.0, "renew_deadline": 10.0},
     r"lease_duration \(10.0s\) must be greater than renew_deadline \(10.0s\)"),
    ({"lease_duration": 5.0, "renew_deadline": 10.0},
     r"lease_duration \(5.0s\) must be greater than renew_deadline \(10.0s\)"),
    ({"renew_deadline": 2.4, "retry_period": 2.0}, r"renew_deadline \(2.4s\) must be greater than retry_period\*1.2"),
    ({"lease_duration": 0}, "lease_duration must be greater than zero"),
    ({"renew_deadline": -1.0}, "renew_deadline must be greater than zero"),
    ({"retry_period": 0}, "retry_period must be greater than zero"),
])
def test_config_validation_follows_client_go(kw, message):
    with pytest.raises(ValueError, match=message):
        LeaderElectionConfig(NS, "kube-scheduler", "a", **kw)


@pytest.mark.parametrize("field", ["lease_namespace", "lease_name", "identity"])
def test_config_needs_a_lease_and_an_identity(field):
    args = {"lease_namespace": NS, "lease_name": "kube-scheduler", "identity": "a", field: ""}
    with pytest.raises(ValueError, match=f"{field} must not be empty"):
        LeaderElectionConfig(**args)


def test_sub_second_lease_duration_is_written_as_whole_seconds():
    assert LeaderElectionConfig(NS, "l", "a", lease_duration=0.6, renew_deadline=0.4,
                                retry_period=0.1).lease_duration_seconds == 1


# ---------------------------------------------------------------------------------- election


async def test_one_of_two_leads_and_the_other_waits_while_the_leader_renews(store, lease_name, candidates):
    a, b = Candidate(store, lease_name, "a"), Candidate(store, lease_name, "b")
    candidates += [a.start(), b.start()]
    await eventually(lambda: a.is_leader() or b.is_leader(), what="a leader")
    leader, follower = (a, b) if a.is_leader() else (b, a)
    await eventually(lambda: follower.elector.leader() == leader.elector.config.identity, what="follower sees it")

    # Several lease durations later the leader still leads and the follower never started.
    await asyncio.sleep(2.5)
    assert leader.is_leader() and not follower.is_leader()
    assert (leader.started, follower.started, leader.stopped, follower.stopped) == (1, 0, 0, 0)
    assert follower.new_leaders == [leader.elector.config.identity]
    assert leader.new_leaders == [leader.elector.config.identity]
    spec = store.lease(lease_name).spec
    assert spec.holder_identity == leader.elector.config.identity
    assert spec.lease_duration_seconds == 1 and spec.lease_transitions == 0
    assert spec.acquire_time and spec.renew_time > spec.acquire_time  # renewals keep the acquire time
    assert master_status(lease_name) == 1.0


async def test_a_stopped_leader_without_release_is_replaced_after_the_lease_duration(store, lease_name, candidates):
    a, b = await _a_leads_b_follows(store, lease_name, candidates)

    await a.cancel()
    assert a.leading_cancelled and a.stopped == 1 and not a.is_leader()
    assert store.lease(lease_name).spec.holder_identity == "a"  # not released

    await eventually(b.is_leader, timeout=10, what="b takes over once a's lease expired")
    spec = store.lease(lease_name).spec
    assert (spec.holder_identity, spec.lease_transitions) == ("b", 1)
    assert b.new_leaders == ["a", "b"] and b.started == 1


async def test_a_held_lease_is_not_taken_before_it_expires(store, lease_name, candidates):
    # A 30 s lease: the follower must not take it in the 1.5 s after the leader stops.
    slow = dict(lease_duration=30.0, renew_deadline=20.0, retry_period=0.1)
    a, b = await _a_leads_b_follows(store, lease_name, candidates, slow, slow)
    await a.cancel()
    await asyncio.sleep(1.5)
    assert not b.is_leader() and b.started == 0
    assert store.lease(lease_name).spec.holder_identity == "a"


async def test_a_released_lease_is_taken_at_once(store, lease_name, candidates):
    # The same 30 s lease, released on cancel: the follower does not wait for it to expire.
    slow = dict(lease_duration=30.0, renew_deadline=20.0, retry_period=0.1)
    a, b = await _a_leads_b_follows(store, lease_name, candidates, {**slow, "release_on_cancel": True}, slow)

    await a.cancel()
    released = [w for w in store.writes if not w.spec.holder_identity]
    assert released and released[0].spec.lease_duration_seconds == 1
    assert a.stopped == 1 and a.leading_cancelled
    await eventually(b.is_leader, timeout=5, what="b takes the released lease")
    spec = store.lease(lease_name).spec
    assert (spec.holder_identity, spec.lease_transitions, spec.lease_duration_seconds) == ("b", 1, 30)


async def test_a_leader_whose_renewals_fail_for_the_renew_deadline_steps_down(store, lease_name, candidates):
    a = Candidate(store, lease_name, "a")
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    assert master_status(lease_name) == 1.0
    b = Candidate(store, lease_name, "b")
    candidates.append(b.start())

    a.client.leases.broken = True  # a can no longer reach the apiserver
    await eventually(lambda: a.task.done(), timeout=10, what="a's run() ends")
    assert a.task.result() is None
    assert a.stopped == 1 and a.leading_cancelled and not a.is_leader()
    await eventually(b.is_leader, timeout=10, what="b takes over")
    assert store.lease(lease_name).spec.lease_transitions == 1


async def test_lease_transitions_count_holder_changes_not_renewals(store, lease_name, candidates):
    a = Candidate(store, lease_name, "a", release_on_cancel=True)
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    await eventually(lambda: len(store.writes) >= 5, what="a few renewals")
    assert store.lease(lease_name).spec.lease_transitions == 0

    b = Candidate(store, lease_name, "b", release_on_cancel=True)
    candidates.append(b.start())
    await a.cancel()
    await eventually(b.is_leader, what="b leads")
    assert store.lease(lease_name).spec.lease_transitions == 1

    a2 = Candidate(store, lease_name, "a", release_on_cancel=True)
    candidates.append(a2.start())
    await b.cancel()
    await eventually(a2.is_leader, what="a leads again")
    assert store.lease(lease_name).spec.lease_transitions == 2
    holders = [w.spec.holder_identity for w in store.writes]
    changes = [h for prev, h in itertools.pairwise(holders) if h != prev and h]
    assert changes == ["b", "a"]


async def test_a_restarted_candidate_with_the_same_identity_takes_its_lease_back_at_once(store, lease_name, candidates):
    slow = dict(lease_duration=30.0, renew_deadline=20.0, retry_period=0.1)
    a = Candidate(store, lease_name, "a", **slow)
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    first = store.lease(lease_name).spec.acquire_time
    await a.cancel()
    again = Candidate(store, lease_name, "a", **slow)
    candidates.append(again.start())
    await eventually(again.is_leader, timeout=5, what="a leads again without waiting 30 s")
    spec = store.lease(lease_name).spec
    assert (spec.lease_transitions, spec.acquire_time) == (0, first)


async def test_someone_elses_write_is_a_conflict_and_the_leader_renews_from_a_fresh_read(store, lease_name,
                                                                                         candidates):
    a = Candidate(store, lease_name, "a")
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    store.touch(lease_name)  # the cached resourceVersion is stale now
    touched = len(store.writes)
    await eventually(lambda: len(store.writes) > touched + 2, what="renewals after the conflict")
    lease = store.lease(lease_name)
    assert a.is_leader() and a.stopped == 0
    assert lease.metadata.labels["touched"] == "yes" and lease.spec.holder_identity == "a"


async def test_a_failing_leading_task_ends_leadership_and_run_raises(store, lease_name, candidates):
    async def crash():
        await asyncio.sleep(0.2)
        raise RuntimeError("scheduler crashed")

    a = Candidate(store, lease_name, "a", release_on_cancel=True, leading_work=crash)
    candidates.append(a.start())
    await eventually(lambda: a.task.done(), timeout=10, what="run() ends")
    with pytest.raises(RuntimeError, match="scheduler crashed"):
        a.task.result()
    assert a.stopped == 1 and not a.is_leader()
    assert store.lease(lease_name).spec.holder_identity == ""  # released
    assert master_status(lease_name) == 0.0


async def test_the_master_status_metric_follows_leadership(store, lease_name, candidates):
    a = Candidate(store, lease_name, "a")
    assert master_status(lease_name) == 0.0
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    assert master_status(lease_name) == 1.0
    await a.cancel()
    assert master_status(lease_name) == 0.0


async def test_cancel_before_acquiring_calls_nothing(store, lease_name, candidates):
    a, b = await _a_leads_b_follows(store, lease_name, candidates, dict(lease_duration=30.0, renew_deadline=20.0),
                                    dict(lease_duration=30.0, renew_deadline=20.0, release_on_cancel=True))
    await b.cancel()
    assert (b.started, b.stopped) == (0, 0)
    assert store.lease(lease_name).spec.holder_identity == "a"


async def test_run_may_be_called_only_once(store, lease_name, candidates):
    a = Candidate(store, lease_name, "a")
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    with pytest.raises(RuntimeError, match="only once"):
        await a.elector.run()


async def test_a_renewal_that_landed_unseen_does_not_stop_the_release(store, lease_name, candidates):
    # A stop cuts a renewal short after the apiserver applied it: the leader's last-seen
    # resourceVersion is stale. client-go's release reads the Lease first; an update with the
    # stale version would be refused as a conflict and the Lease held until it expires.
    slow = dict(lease_duration=30.0, renew_deadline=20.0, retry_period=10.0)
    a = Candidate(store, lease_name, "a", release_on_cancel=True, **slow)
    candidates.append(a.start())
    await eventually(a.is_leader, what="a leads")
    store.touch(lease_name)  # the renewal whose reply never came back
    await a.cancel()
    spec = store.lease(lease_name).spec
    assert (spec.holder_identity, spec.lease_duration_seconds) == ("", 1)


async def test_the_lease_is_renewed_while_the_leading_work_drains_after_a_stop(store, lease_name, candidates):
    # A scheduler stopping lets its bindings in flight land before it releases the Lease. The
    # drain outlasts the lease (0.6 s): renewals go on meanwhile, so no standby takes over while
    # the old leader still writes; the release comes once the work has ended.
    drained = asyncio.Event()

    async def drains_slowly():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(1.5)  # 2.5 lease durations
            drained.set()
            raise

    a, b = await _a_leads_b_follows(store, lease_name, candidates,
                                    dict(release_on_cancel=True, leading_work=drains_slowly))
    await a.cancel()
    assert drained.is_set()
    holders = [w.spec.holder_identity for w in store.writes]
    assert "b" not in holders[:holders.index("")], holders  # b took nothing before a released
    await eventually(b.is_leader, timeout=5, what="b takes the released lease")


async def test_leading_work_cut_short_keeps_the_lease_to_expire_instead_of_releasing_it(store, lease_name,
                                                                                    candidates):
    # A scheduler whose stop cancelled a binding in flight (its request may still land) says so
    # through may_release: the Lease is not released, so the standby waits for it to expire
    # rather than take it at once and act against that late write.
    slow = dict(lease_duration=2.0, renew_deadline=1.5, retry_period=0.1)
    a, b = await _a_leads_b_follows(store, lease_name, candidates,
                                    {**slow, "release_on_cancel": True, "may_release": lambda: False}, slow)
    await a.cancel()
    stopped = time.monotonic()
    assert a.stopped == 1 and a.leading_cancelled
    assert all(w.spec.holder_identity for w in store.writes), "a released the Lease"
    await eventually(b.is_leader, timeout=10, what="b takes the lease once it expired")
    assert time.monotonic() - stopped >= 2.0 - 0.5  # the lease's duration, less a's last renewal's age
