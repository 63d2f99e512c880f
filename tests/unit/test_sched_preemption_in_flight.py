"""Preemption decides the same whatever order the eviction's replies and the informer's events
arrive in (kube-scheduler DefaultPreemption's PodEligibleToPreemptOthers, KEP-4832's victims in
flight).

In each test the informer lags: the fake API answers the DisruptionTarget patch and the delete,
but the pods the scheduler sees (``Env.pods`` and the snapshot) still show every victim running,
with no deletionTimestamp — as a victim with grace period 0 always looks until its deletion event
arrives. The preemptor's next attempt must not preempt again: "not eligible due to a terminating
pod on the nominated node.", one victim set in ``scheduler_preemption_victims``.
"""

from __future__ import annotations

from prometheus_client import REGISTRY

from machinery import errors
from machinery.api import core_pb2
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import Code
from scheduler.plugins import default_preemption
from tests.harness.builders import MakeNode, MakePod
from tests.unit.test_sched_preemption import STARTED, Env

NOT_ELIGIBLE = "preemption: not eligible due to a terminating pod on the nominated node."


def _victim_sets() -> float:
    """How many victim sets the scheduler chose so far (the histogram's count)."""
    return REGISTRY.get_sample_value("scheduler_preemption_victims_count") or 0.0


def _async_plugin(env: Env) -> default_preemption.DefaultPreemption:
    return default_preemption.DefaultPreemption(default_preemption.DefaultPreemptionArgs(), env.handle,
                                                tie_breaks=TieBreaks("1"))


def _two_full_nodes() -> Env:
    """n1 and n2 of 3 cpu, each full with three 1-cpu pods of priority 0."""
    return Env([MakeNode().name("n1").allocatable(cpu="3", memory="100Gi", pods="110").obj(),
                MakeNode().name("n2").allocatable(cpu="3", memory="100Gi", pods="110").obj()],
               [MakePod().name(f"{n}-{i}").uid(f"uid-{n}-{i}").priority(0).scheduler_name("default-scheduler")
                .req(cpu="1").node(n).start_time(f"2026-01-01T00:00:0{i}Z").phase("Running")
                .condition("Ready").obj() for n in ("n1", "n2") for i in range(3)])


async def _preempt(env: Env, plugin, preemptor: core_pb2.Pod):
    env.pods[preemptor.metadata.name] = preemptor
    state, d = env.diagnosis(preemptor)
    return await plugin.post_filter(state, preemptor, d)


async def test_async_a_second_attempt_while_the_informer_still_shows_the_victims_does_not_preempt():
    env = _two_full_nodes()
    plugin = _async_plugin(env)
    before = _victim_sets()
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="3").obj())
    result, status = await _preempt(env, plugin, preemptor)
    assert status is None
    nominated = result.nominating_info.node_name
    await plugin.close()  # the eviction task is done: every reply is back ...
    assert sorted(env.client.pods.deleted) == [f"{nominated}-{i}" for i in range(3)]
    # ... so PreEnqueue lets the pod in again, as kube-scheduler's IsPodRunningPreemption does,
    assert plugin.pre_enqueue(preemptor) is None
    # ... but the informer has shown none of it: the victims still look running.
    assert all(not env.pods[f"{nominated}-{i}"].metadata.deletion_timestamp for i in range(3))
    preemptor.status.nominated_node_name = nominated  # the nomination, as written
    result, status = await _preempt(env, plugin, preemptor)
    assert result is None and status.code == Code.UNSCHEDULABLE and status.message() == NOT_ELIGIBLE
    assert sorted(env.client.pods.deleted) == [f"{nominated}-{i}" for i in range(3)], "nothing deleted twice"
    assert _victim_sets() - before == 1


async def test_sync_a_second_attempt_while_the_informer_still_shows_the_victims_does_not_preempt():
    env = _two_full_nodes()  # Env's plugin runs without SchedulerAsyncPreemption
    before = _victim_sets()
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="3").obj())
    result, status = await _preempt(env, env.plugin, preemptor)
    assert status is None
    preemptor.status.nominated_node_name = result.nominating_info.node_name
    result, status = await _preempt(env, env.plugin, preemptor)
    assert result is None and status.message() == NOT_ELIGIBLE
    assert len(env.client.pods.deleted) == 3 and _victim_sets() - before == 1


async def test_a_victim_whose_eviction_failed_is_not_in_flight():
    """Its delete was refused: it is not going, so it does not hold the preemptor back."""
    env = Env([MakeNode().name("n1").allocatable(cpu="1", memory="100Gi", pods="110").obj()],
              [MakePod().name("low").uid("uid-low").priority(0).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])

    async def refuse(name, namespace="", **kw):
        raise errors.InternalError("etcd is down")

    env.client.pods.delete = refuse
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="1").obj())
    result, status = await _preempt(env, env.plugin, preemptor)
    assert status.code == Code.ERROR and "etcd is down" in status.message()
    assert not env.plugin.evaluator.is_victim_in_flight(env.pods["low"])
    preemptor.status.nominated_node_name = "n1"
    del env.client.pods.delete  # the API takes deletes again
    result, status = await _preempt(env, env.plugin, preemptor)
    assert status is None and env.client.pods.deleted == ["low"]


async def test_once_the_informer_shows_the_victims_deleted_the_pod_may_preempt_again():
    """The victims went; new pods filled the node meanwhile: the pod may preempt them."""
    env = Env([MakeNode().name("n1").allocatable(cpu="2", memory="100Gi", pods="110").obj()],
              [MakePod().name("a").uid("uid-a").priority(0).scheduler_name("default-scheduler").req(cpu="1").node("n1")
               .start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("b").uid("uid-b").priority(0).scheduler_name("default-scheduler").req(cpu="1").node("n1")
               .start_time(STARTED).phase("Running").condition("Ready").obj()])
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="2").obj())
    result, status = await _preempt(env, env.plugin, preemptor)
    assert status is None and sorted(env.client.pods.deleted) == ["a", "b"]
    # The informer shows a and b deleted; c and d took their room.
    for name in ("a", "b"):
        del env.pods[name]
    ni = NodeInfo(MakeNode().name("n1").allocatable(cpu="2", memory="100Gi", pods="110").obj())
    for name in ("c", "d"):
        env.pods[name] = p = (MakePod().name(name).uid(f"uid-{name}").priority(0).scheduler_name("default-scheduler")
                              .req(cpu="1").node("n1").start_time(STARTED).phase("Running").condition("Ready").obj())
        ni.add_pod(p)
    env.services.snapshot = Snapshot.of([ni])
    preemptor.status.nominated_node_name = "n1"
    result, status = await _preempt(env, env.plugin, preemptor)
    assert status is None and sorted(env.client.pods.deleted) == ["a", "b", "c", "d"]


class _Recorder:
    def __init__(self, log: list[str]) -> None:
        self.log = log

    def event(self, obj, type_, reason, message, related=None, action=""):
        self.log.append(f"event {obj.metadata.name}")


async def test_the_preempted_events_come_after_every_victim_was_asked_to_go():
    """So that in the history all marks of one preemption precede its events (kplane check's
    no-preemption-while-victims-going tells one preemption from the next by that)."""
    env = Env([MakeNode().name("n1").allocatable(cpu="3", memory="100Gi", pods="110").obj()],
              [MakePod().name(f"v{i}").uid(f"uid-v{i}").priority(0).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(f"2026-01-01T00:00:0{i}Z").phase("Running").condition("Ready").obj()
                                      for i in range(3)])
    log: list[str] = []
    env.services.recorder = _Recorder(log)

    async def patch(name, patch, namespace="", subresource="", **kw):
        log.append(f"mark {name}")

    async def delete(name, namespace="", **kw):
        log.append(f"delete {name}")

    env.client.pods.patch, env.client.pods.delete = patch, delete
    plugin = _async_plugin(env)
    _, status = await _preempt(env, plugin, MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                            .scheduler_name("default-scheduler").req(cpu="3").obj())
    assert status is None
    await plugin.close()
    events = [i for i, entry in enumerate(log) if entry.startswith("event")]
    writes = [i for i, entry in enumerate(log) if not entry.startswith("event")]
    assert len(events) == 3 and len(writes) == 6
    assert min(events) > max(writes), log
