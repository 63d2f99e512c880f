"""Chaos for scheduler leader election: two schedulers, one Lease, the leader killed or stopped.

Both ``scheduler`` and ``scheduler-2`` run (identities are the component names) with short
timings: lease 3 s, renew deadline 2 s, retry 0.5 s. What client-go's leader election promises,
and kube-scheduler relies on:

- the Lease ``kube-system/kube-scheduler`` names one holder; only that one schedules (its
  ``leader_election_master_status`` is 1, the other's 0; every ``Scheduled`` event is its own);
- a leader killed with SIGKILL keeps the Lease until it expires: pods created after the kill are
  scheduled by the other within the lease duration (plus a generous margin), the holder changes
  and ``leaseTransitions`` grows by one;
- a leader stopped with SIGTERM gives the Lease up (``holderIdentity`` cleared), so the other
  takes it at its next try rather than after expiry — but only once the bindings it has in
  flight have landed, or the other could fill the room a late binding then takes;
- through all of it no pod is bound twice, and ``kplane check`` finds nothing.
"""

from __future__ import annotations

import signal

import pytest

from cli import cluster
from machinery import errors, timeutil
from machinery.api import coordination_pb2, core_pb2
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod, make_priority_class
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.failpoints import failpoint
from tests.harness.metrics import metric
from tests.harness.wait import eventually, wait_running

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

SCHEDULERS = ("scheduler", "scheduler-2")
NS, LEASE = "kube-system", "kube-scheduler"
LEASE_DURATION = 3.0
MARGIN = 15.0  # generous: process start, informer sync, a slow machine
TIMINGS = ["--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
           "--leader-elect-retry-period=0.5s"]


le_cluster = cluster_fixture(nodes=1, schedulers=2, node_cpu="4", kubelet_args=FAST_KUBELET, scheduler_args=TIMINGS)


@pytest.fixture
async def api(le_cluster):
    for name in SCHEDULERS:
        start(le_cluster, name)  # a no-op unless an earlier test left it down
    c = le_cluster.client()
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


def _master_status(tc, component: str) -> float:
    """``leader_election_master_status{name="kube-scheduler"}`` of a running scheduler."""
    return metric(tc, component, "leader_election_master_status", f'name="{LEASE}"}}')


async def _leader(tc, api) -> tuple[str, str, coordination_pb2.Lease]:
    """(leader, standby, Lease) once one scheduler holds the Lease and says so in its metrics."""
    got: dict = {}

    async def one_leads():
        lease = await api.leases.get(LEASE, NS)
        holder = lease.spec.holder_identity
        if holder not in SCHEDULERS:
            return False
        other = next(n for n in SCHEDULERS if n != holder)
        got.update(leader=holder, standby=other, lease=lease)
        return _master_status(tc, holder) == 1 and _master_status(tc, other) == 0

    await eventually(one_leads, timeout=LEASE_DURATION + MARGIN, interval=0.1, what="one scheduler leading")
    return got["leader"], got["standby"], got["lease"]


async def _create(api, names: list[str]) -> None:
    for n in names:
        await api.pods.create(MakePod().name(n).req(cpu="100m", memory="32Mi").grace(1).obj())


async def _scheduled_by(api, names: list[str]) -> dict[str, str]:
    """Until every named pod has its ``Scheduled`` event: pod -> the reporting scheduler."""
    out: dict[str, str] = {}

    async def all_there():
        out.clear()
        uids = {(await api.pods.get(n)).metadata.uid for n in names}  # not an earlier pod's of the same name
        for ev in (await api.events.list("default")).items:
            if ev.reason == "Scheduled" and ev.involved_object.uid in uids:
                assert ev.involved_object.name not in out, f"two Scheduled events for {ev.involved_object.name}"
                out[ev.involved_object.name] = ev.reporting_instance
        return len(out) == len(names)

    await eventually(all_there, timeout=MARGIN, interval=0.1, what=f"Scheduled events of {names}")
    return out


def _log(tc, component: str) -> str:
    tc.reload()
    with open(tc.process(component).log) as f:
        return f.read()


async def _history(api, kind: str):
    """(rev, object) of every revision of ``kind`` the cluster's history holds, oldest first."""
    message = {"Pod": core_pb2.Pod, "Lease": coordination_pb2.Lease}[kind]
    out = []
    async for resp in api.history(since=0, follow=False):
        for e in resp.entries:
            if e.kind == kind and e.type != "DELETED":
                obj = message()
                e.object.Unpack(obj)
                out.append((e.rev, obj))
    return out


async def _assert_no_pod_bound_twice_and_check(tc, api) -> None:
    nodes: dict[str, list[str]] = {}
    for _, pod in await _history(api, "Pod"):
        seen = nodes.setdefault(pod.metadata.uid, [])
        if pod.spec.node_name and (not seen or seen[-1] != pod.spec.node_name):
            seen.append(pod.spec.node_name)
    assert all(len(v) <= 1 for v in nodes.values()), {k: v for k, v in nodes.items() if len(v) > 1}
    out = tc.kplane("check")
    assert out.returncode == 0, out.stdout + out.stderr


async def test_killed_leader_is_replaced_by_the_standby_within_the_lease_duration(le_cluster, api):
    leader, standby, lease = await _leader(le_cluster, api)
    assert lease.spec.lease_duration_seconds == 3

    # Only the leader schedules.
    before = [f"before-{i}" for i in range(4)]
    await _create(api, before)
    await wait_running(api, *before, timeout=30)
    assert set((await _scheduled_by(api, before)).values()) == {leader}
    assert '"pod_bound"' not in _log(le_cluster, standby)
    assert '"scheduler_running"' not in _log(le_cluster, standby), "the standby must not run its scheduling loop"

    kill(le_cluster, leader)
    after = [f"after-{i}" for i in range(4)]
    await _create(api, after)
    # The Lease still names the dead leader until it expires; then the standby takes it.
    await wait_running(api, *after, timeout=LEASE_DURATION + MARGIN)
    assert set((await _scheduled_by(api, after)).values()) == {standby}
    now = await api.leases.get(LEASE, NS)
    assert now.spec.holder_identity == standby
    assert now.spec.lease_transitions == lease.spec.lease_transitions + 1
    assert _master_status(le_cluster, standby) == 1
    await _assert_no_pod_bound_twice_and_check(le_cluster, api)

    # The killed one comes back as the standby: the Lease stays where it is.
    start(le_cluster, leader)
    again, _, _ = await _leader(le_cluster, api)
    assert again == standby and _master_status(le_cluster, leader) == 0


async def test_stopped_leader_releases_the_lease_and_the_standby_takes_it_at_once(le_cluster, api):
    leader, standby, lease = await _leader(le_cluster, api)
    le_cluster.reload()
    cluster.stop(le_cluster.process(leader))  # SIGTERM: a clean shutdown
    le_cluster.state.save()
    assert '"lease_released"' in _log(le_cluster, leader)

    pods = [f"handover-{i}" for i in range(4)]
    await _create(api, pods)
    await wait_running(api, *pods, timeout=LEASE_DURATION + MARGIN)
    assert set((await _scheduled_by(api, pods)).values()) == {standby}

    # The Lease's record: the leader cleared its own name, and the standby's next write took it.
    records = [obj for rev, obj in await _history(api, "Lease") if obj.metadata.name == LEASE
               and int(obj.metadata.resource_version) >= int(lease.metadata.resource_version)]
    holders = [(obj.spec.holder_identity, obj.spec.lease_transitions, obj) for obj in records]
    changes = [h for i, h in enumerate(holders) if i == 0 or h[0] != holders[i - 1][0]]
    assert [h[0] for h in changes][:3] == [leader, "", standby], [h[:2] for h in changes]
    assert changes[2][1] == lease.spec.lease_transitions + 1
    # "At once": the standby acquired it on its next retry (0.5 s), not once the lease it had
    # last seen expired (3 s after the leader's last renewal, at most 0.5 s before the release).
    released, taken = changes[1][2], changes[2][2]
    waited = (timeutil.parse(taken.spec.acquire_time) - timeutil.parse(released.spec.renew_time)).total_seconds()
    assert waited < LEASE_DURATION - 1.0, waited
    now = await api.leases.get(LEASE, NS)
    assert now.spec.holder_identity == standby
    await _assert_no_pod_bound_twice_and_check(le_cluster, api)


def _failpoint_hits(tc, component: str, name: str) -> float:
    """``kplane_failpoint_hits_total`` of one failpoint in ``component``."""
    return metric(tc, component, "kplane_failpoint_hits_total", f'name="{name}"')


async def _sigterm_leader_mid_binding(tc, api, pod: str, hold_ms: int):
    """The leader holds its binding of ``pod`` (3 of the node's 4 CPUs) ``hold_ms`` at
    scheduler/before-bind and gets SIGTERM meanwhile; an ``urgent`` pod (2 CPUs), which the
    standby once leading would put on the room ``pod`` is being bound to, comes once the leader
    has stopped taking pods.
    Returns once the leader's process is gone: (leader, standby, the Lease before)."""
    try:
        await api.priority_classes.create(make_priority_class("urgent", 1000))
    except errors.AlreadyExists:
        pass
    leader, standby, lease = await _leader(tc, api)
    failpoint(tc, leader, "scheduler/before-bind", f"1*sleep({hold_ms})")
    await api.pods.create(MakePod().name(pod).req(cpu="3", memory="32Mi").grace(1).obj())
    await eventually(lambda: _failpoint_hits(tc, leader, "scheduler/before-bind") == 1, timeout=MARGIN,
                     what=f"the leader holding its binding of {pod}")
    tc.reload()
    proc = tc.process(leader)
    assert cluster.signal_process(proc, signal.SIGTERM)
    # A stopping leader starts no new cycle; until it has shut its queue, urgent could still be its
    # own (CI once saw it preempt the very pod it was binding, 1 ms after its stop began).
    await eventually(lambda: '"scheduling_stopped"' in _log(tc, leader).rpartition('"kplane_start"')[2], timeout=MARGIN,
                     what=f"{leader} taking no more pods")
    await api.pods.create(MakePod().name("urgent").req(cpu="2", memory="32Mi").priority_class("urgent").grace(1).obj())
    await eventually(lambda: not cluster.alive(proc.pid), timeout=MARGIN, what=f"{leader} stopped")
    proc.pid = None
    tc.state.save()
    return leader, standby, lease


async def test_stopped_leader_finishes_its_bindings_before_it_releases_the_lease(le_cluster, api):
    """client-go's rule for releasing on cancel: the work the Lease guards is done before the Lease
    is given up. A binding in flight at SIGTERM is such work: released first, the standby would
    place another pod on the room that binding is about to take (no fencing stops the late bind).
    Held 1 s before its request, the binding is in flight at SIGTERM and well inside the stop's
    drain (2.5 s)."""
    _, standby, lease = await _sigterm_leader_mid_binding(le_cluster, api, "in-flight", 1000)

    # in-flight's binding landed before the Lease was released; then the new leader preempted it.
    await wait_running(api, "urgent", timeout=LEASE_DURATION + MARGIN)
    assert (await _scheduled_by(api, ["urgent"]))["urgent"] == standby
    bound = [rev for rev, pod in await _history(api, "Pod") if pod.metadata.name == "in-flight" and pod.spec.node_name]
    released = [rev for rev, obj in await _history(api, "Lease") if obj.metadata.name == LEASE
                and int(obj.metadata.resource_version) > int(lease.metadata.resource_version)
                and not obj.spec.holder_identity]
    assert bound and released and bound[0] < released[0], \
        f"in-flight bound at {bound[:1]}, Lease released at {released[:1]}"
    await _assert_no_pod_bound_twice_and_check(le_cluster, api)


async def test_a_binding_the_stop_cannot_wait_for_keeps_the_lease_until_it_expires(le_cluster, api):
    """The other way a stop hands over cleanly: a binding held longer than the stop may wait (the
    process must be gone within 5 s of SIGTERM) is cancelled, and as its request could still have
    been landing, the Lease is not released but left to expire. The standby takes over after the
    lease duration, as after a kill; nothing is bound twice."""
    leader, standby, lease = await _sigterm_leader_mid_binding(le_cluster, api, "held", 10000)

    await wait_running(api, "urgent", timeout=LEASE_DURATION + MARGIN)
    assert (await _scheduled_by(api, ["urgent"]))["urgent"] == standby
    log = _log(le_cluster, leader)
    assert '"bindings_abandoned"' in log and '"lease_kept_to_expire"' in log, log[-3000:]
    later = [obj for rev, obj in await _history(api, "Lease") if obj.metadata.name == LEASE
             and int(obj.metadata.resource_version) > int(lease.metadata.resource_version)]
    assert all(obj.spec.holder_identity for obj in later), "the Lease was released"
    assert later[-1].spec.holder_identity == standby
    assert later[-1].spec.lease_transitions == lease.spec.lease_transitions + 1
    assert not [pod for _, pod in await _history(api, "Pod") if pod.metadata.name == "held" and pod.spec.node_name]
    await _assert_no_pod_bound_twice_and_check(le_cluster, api)
