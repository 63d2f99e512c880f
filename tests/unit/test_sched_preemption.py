"""Preemption's decisions, as the Kubernetes preemption design ("Pod Preemption in Kubernetes") and
Kubernetes docs: Pod Priority and Preemption state them: which pods are victims on a node, which
node is chosen, who may preempt at all, and what is done to the victims."""

from __future__ import annotations

import asyncio

from machinery import timeutil
from machinery.api import core_pb2, policy_pb2
from scheduler.cache.snapshot import Snapshot
from scheduler.framework.features import Features
from scheduler.framework.interfaces import Services
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.runtime import Framework, PluginSets, new_handle
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import Code, CycleState, Diagnosis, NominatingInfo, NominatingMode, Status
from scheduler.plugins import default_binder, default_preemption, node_resources_fit
from scheduler.preemption.evaluator import Candidate, pick_one_node
from scheduler.queue.nominator import Nominator
from scheduler.status_writer import StatusWriter
from tests.harness.builders import MakeNode, MakePod, make_pdb


class _Sort:
    name = "PrioritySort"

    def less(self, a, b):
        return a.pod.spec.priority > b.pod.spec.priority


REGISTRY = {"PrioritySort": lambda args, h: _Sort(), "NodeResourcesFit": node_resources_fit.new,
            "DefaultPreemption": lambda args, h: default_preemption.DefaultPreemption(
                args or default_preemption.DefaultPreemptionArgs(), h, Features(enable_async_preemption=False),
                tie_breaks=TieBreaks("1")),
            "DefaultBinder": default_binder.new}
# When the running pods of these tests started (their status.startTime), unless a test says otherwise.
STARTED = "2026-01-01T00:00:00Z"


class FakePods:
    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.patched: list[tuple[str, dict]] = []

    async def delete(self, name, namespace="", **kw):
        self.deleted.append(name)

    async def patch(self, name, patch, namespace="", subresource="", **kw):
        self.patched.append((name, patch))


class FakeClient:
    def __init__(self) -> None:
        self.pods = FakePods()


class Env:
    """A framework over some nodes and pods, as the scheduler would build it."""

    def __init__(self, nodes: list[core_pb2.Node], pods: list[core_pb2.Pod],
                 pdbs: list[policy_pb2.PodDisruptionBudget] = ()):
        self.pods = {p.metadata.name: p for p in pods}
        self.client = FakeClient()
        self.services = Services(client=self.client, pods=lambda: self.pods.values(),
                                 get_pod=lambda ns, n: self.pods.get(n), pdbs=lambda: pdbs)
        infos = []
        for n in nodes:
            ni = NodeInfo(n)
            for p in pods:
                if p.spec.node_name == n.metadata.name:
                    ni.add_pod(p)
            infos.append(ni)
        self.services.snapshot = Snapshot.of(infos)
        self.fw = Framework("default-scheduler", PluginSets(multi_point=list(REGISTRY)), REGISTRY, self.services)
        self.handle = self.fw
        self.plugin = self.fw.plugins["DefaultPreemption"]

    def diagnosis(self, preemptor: core_pb2.Pod) -> tuple[CycleState, Diagnosis]:
        state = CycleState()
        self.fw.run_pre_filter_plugins(state, preemptor, self.handle.snapshot.node_infos())
        d = Diagnosis()
        for ni in self.handle.snapshot.node_infos():
            s = self.fw.run_filter_plugins(state, preemptor, ni)
            if s is not None:
                d.node_to_status[ni.name] = s
        return state, d

    def victims(self, preemptor: core_pb2.Pod, node_name: str) -> list[str]:
        state, _ = self.diagnosis(preemptor)
        ni = self.handle.snapshot.get(node_name).clone()
        victims, _, status = self.plugin.select_victims_on_node(state, preemptor, ni, [])
        assert status is None, status
        return [v.metadata.name for v in victims]

    async def preempt(self, preemptor: core_pb2.Pod):
        self.pods[preemptor.metadata.name] = preemptor
        state, d = self.diagnosis(preemptor)
        return await self.plugin.post_filter(state, preemptor, d)


def test_001_preemption_order_example_only_the_priority_2_pod_is_preempted():
    """The preemption design: "if node capacity is 10, and pending pod is priority 10 and requires 5
    units of resource, and the running pods are {priority 0 request 3, priority 1 request 1,
    priority 2 request 5, priority 3 request 1}, scheduler will preempt the priority 2 pod only"."""
    env = Env([MakeNode().name("n1").allocatable(cpu="10", memory="100Gi", pods="110").obj()],
              [MakePod().name("p0").uid("uid-p0").priority(0).scheduler_name("default-scheduler").req(cpu="3")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("p1").uid("uid-p1").priority(1).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("p2").uid("uid-p2").priority(2).scheduler_name("default-scheduler").req(cpu="5")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("p3").uid("uid-p3").priority(3).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    assert env.victims(MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                       .req(cpu="5").obj(), "n1") == ["p2"]


def test_a_best_effort_pod_is_never_a_victim_for_resources():
    """The preemption design: "scheduler will never preempt a Best Effort pod to make more resources
    available"."""
    env = Env([MakeNode().name("n1").allocatable(cpu="2", memory="100Gi", pods="110").obj()],
              [MakePod().name("burstable").uid("uid-burstable").priority(0).scheduler_name("default-scheduler")
               .req(cpu="2").node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("besteffort").uid("uid-besteffort").priority(0).scheduler_name("default-scheduler")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    assert env.victims(MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                       .req(cpu="1").obj(), "n1") == ["burstable"]


async def test_a_node_with_no_lower_priority_pods_cannot_help():
    env = Env([MakeNode().name("n1").allocatable(cpu="2", memory="100Gi", pods="110").obj()],
              [MakePod().name("same").uid("uid-same").priority(10).scheduler_name("default-scheduler").req(cpu="2")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    result, status = await env.preempt(MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="1").obj())
    assert status.code == Code.UNSCHEDULABLE
    assert status.message() == ("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming "
                                "pod.")
    assert result.nominating_info.mode == NominatingMode.OVERRIDE and result.nominating_info.node_name == ""


async def test_preemption_picks_the_node_evicts_the_victims_and_nominates():
    env = Env([MakeNode().name("n1").allocatable(cpu="4", memory="100Gi", pods="110").obj(),
               MakeNode().name("n2").allocatable(cpu="4", memory="100Gi", pods="110").obj()],
              [MakePod().name("low").uid("uid-low").priority(1).scheduler_name("default-scheduler").req(cpu="4")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("lower").uid("uid-lower").priority(0).scheduler_name("default-scheduler").req(cpu="4")
               .node("n2").start_time(STARTED).phase("Running").condition("Ready").obj()])
    result, status = await env.preempt(MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="2").obj())
    assert status is None
    # The lowest highest-victim priority wins: n2's victim has priority 0.
    assert result.nominating_info.node_name == "n2"
    assert env.client.pods.deleted == ["lower"]
    name, patch = env.client.pods.patched[0]
    cond = patch["status"]["conditions"][0]
    assert name == "lower" and (cond["type"], cond["reason"]) == ("DisruptionTarget", "PreemptionByScheduler")
    assert cond["message"] == "default-scheduler: preempting to accommodate a higher priority pod"


async def test_preemption_policy_never_is_not_eligible():
    """Pods with preemptionPolicy Never "cannot preempt other pods" (Kubernetes docs: Pod Priority
    and Preemption)."""
    env = Env([MakeNode().name("n1").allocatable(cpu="1", memory="100Gi", pods="110").obj()],
              [MakePod().name("low").uid("uid-low").priority(0).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    result, status = await env.preempt(MakePod().name("polite").uid("uid-polite").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="1")
                                       .preemption_policy("Never").obj())
    assert result is None and status.message() == "preemption: not eligible due to preemptionPolicy=Never."
    assert env.client.pods.deleted == []


def _victim_terminating_on_the_nomination() -> tuple[Env, core_pb2.Pod]:
    """n1 holds a victim of the preemptor's earlier preemption, still terminating; n2 a pod of the
    same low priority; the preemptor is nominated to n1."""
    victim = (MakePod().name("victim").uid("uid-victim").priority(0).scheduler_name("default-scheduler").req(cpu="1")
              .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj())
    victim.metadata.deletion_timestamp = timeutil.rfc3339()
    victim.status.conditions.add(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")
    env = Env([MakeNode().name("n1").allocatable(cpu="1", memory="100Gi", pods="110").obj(),
               MakeNode().name("n2").allocatable(cpu="1", memory="100Gi", pods="110").obj()],
              [victim, MakePod().name("other").uid("uid-other").priority(0).scheduler_name("default-scheduler")
                       .req(cpu="1").node("n2").start_time(STARTED).phase("Running").condition("Ready").obj()])
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="1").obj())
    preemptor.status.nominated_node_name = "n1"
    return env, preemptor


async def test_no_new_preemption_while_the_victims_on_the_nominated_node_terminate():
    env, preemptor = _victim_terminating_on_the_nomination()
    result, status = await env.preempt(preemptor)
    assert status.message() == "preemption: not eligible due to a terminating pod on the nominated node."
    assert env.client.pods.deleted == []


async def test_pdb_best_effort_a_protected_victim_is_avoided_when_another_node_works():
    """The preemption design, "Supporting PodDisruptionBudget": fewest PDB violations is the first
    criterion."""
    protected = (MakePod().name("protected").uid("uid-protected").priority(0).scheduler_name("default-scheduler")
                 .labels({"app": "db"}).req(cpu="2").node("n1").start_time(STARTED).phase("Running")
                 .condition("Ready").obj())
    plain = (MakePod().name("plain").uid("uid-plain").priority(1).scheduler_name("default-scheduler").req(cpu="2")
             .node("n2").start_time(STARTED).phase("Running").condition("Ready").obj())
    env = Env([MakeNode().name("n1").allocatable(cpu="2", memory="100Gi", pods="110").obj(),
               MakeNode().name("n2")
               .allocatable(cpu="2", memory="100Gi", pods="110")
               .obj()], [protected, plain], [make_pdb("db", {"app": "db"}, min_available="1")])
    result, status = await env.preempt(MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="2").obj())
    assert status is None and result.nominating_info.node_name == "n2"
    assert env.client.pods.deleted == ["plain"]


async def test_pdb_best_effort_a_protected_victim_is_preempted_when_nothing_else_works():
    """The preemption design: "if it doesn't find any lower priority pod to preempt without violating
    PDB, it goes ahead and preempts victims despite violating PDB"."""
    protected = (MakePod().name("protected").uid("uid-protected").priority(0).scheduler_name("default-scheduler")
                 .labels({"app": "db"}).req(cpu="2").node("n1").start_time(STARTED).phase("Running")
                 .condition("Ready").obj())
    env = Env([MakeNode().name("n1")
               .allocatable(cpu="2", memory="100Gi", pods="110")
               .obj()], [protected], [make_pdb("db", {"app": "db"}, min_available="1")])
    result, status = await env.preempt(MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="2").obj())
    assert status is None and result.nominating_info.node_name == "n1"
    assert env.client.pods.deleted == ["protected"]


def test_node_choice_criteria_in_kubernetes_order():
    def c(node_name, priorities, violations=0, started="2026-01-01T00:00:00Z"):
        return Candidate(node_name, [MakePod().name(f"{node_name}-{i}").uid(f"uid-{node_name}-{i}").priority(pr)
                                     .scheduler_name("default-scheduler").req(cpu="1").node(node_name)
                                     .start_time(started).phase("Running").condition("Ready").obj()
                                     for i, pr in enumerate(priorities)], violations)

    assert pick_one_node([c("a", [5], 1), c("b", [9], 0)]).node == "b"  # fewest PDB violations
    assert pick_one_node([c("a", [9]), c("b", [5, 5])]).node == "b"  # lowest highest priority
    assert pick_one_node([c("a", [5, 4]), c("b", [5, 1])]).node == "b"  # smallest priority sum
    # Each victim adds 2^31 to the sum, so fewer victims of equal priority already win there.
    assert pick_one_node([c("a", [5, 0, 0]), c("b", [5, 0])]).node == "b"
    assert pick_one_node([c("a", [5], started="2026-01-01T00:00:00Z"),
                          c("b", [5], started="2026-06-01T00:00:00Z")]).node == "b"  # latest start
    assert pick_one_node([c("a", [5]), c("b", [5])]).node == "a"  # then the first


def test_bad_args_are_refused():
    import pytest
    with pytest.raises(default_preemption.ArgsError, match="minCandidateNodesPercentage"):
        default_preemption.new({"minCandidateNodesPercentage": 101}, new_handle())
    with pytest.raises(default_preemption.ArgsError, match="cannot be zero"):
        default_preemption.new({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, new_handle())


def test_status_types_carry_unresolvable_for_nodes_preemption_cannot_help():
    env = Env([MakeNode().name("n1").allocatable(cpu="1", memory="100Gi", pods="110").obj()], [])
    state, d = env.diagnosis(MakePod().name("huge").uid("uid-huge").priority(10).scheduler_name("default-scheduler")
                             .req(cpu="5").obj())
    assert d.node_to_status["n1"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert isinstance(d.node_to_status["n1"], Status)


async def test_async_preemption_nominates_at_once_and_gates_the_pod_until_the_victims_were_asked_to_go():
    """KEP-4832: the victims go in the background; meanwhile PreEnqueue keeps the preemptor out."""
    env = Env([MakeNode().name("n1").allocatable(cpu="3", memory="100Gi", pods="110").obj()],
              [MakePod().name("v1").uid("uid-v1").priority(0).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("v2").uid("uid-v2").priority(1).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj(),
               MakePod().name("v3").uid("uid-v3").priority(2).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    plugin = default_preemption.DefaultPreemption(default_preemption.DefaultPreemptionArgs(), env.handle,
                                                  tie_breaks=TieBreaks("1"))
    gate = asyncio.Event()
    deleted: list[str] = []

    async def slow_delete(name, namespace="", **kw):
        await gate.wait()
        deleted.append(name)
        env.pods[name].metadata.deletion_timestamp = timeutil.rfc3339()

    env.client.pods.delete = slow_delete
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="3").obj())
    env.pods["preemptor"] = preemptor
    state, d = env.diagnosis(preemptor)
    result, status = await plugin.post_filter(state, preemptor, d)
    assert status is None and result.nominating_info.node_name == "n1"
    assert deleted == [] and plugin.pre_enqueue(preemptor).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    gate.set()
    for _ in range(100):
        if plugin.pre_enqueue(preemptor) is None:
            break
        await asyncio.sleep(0.01)
    assert plugin.pre_enqueue(preemptor) is None
    assert sorted(deleted) == ["v1", "v2", "v3"] and deleted[0] == "v3", "the most important victim goes first"
    assert deleted[-1] == "v1", "the last victim goes once the others went"


async def test_async_preemption_with_one_victim_is_done_once_that_victim_is_being_deleted():
    """kube-scheduler records the last victim even when it is the only one: once its deletion is
    sent the preemptor may be scheduled, even if the eviction task has not returned yet (else
    the victim's delete event would find the pod still gated and leave it in the pool)."""
    import asyncio

    env = Env([MakeNode().name("n1").allocatable(cpu="1", memory="100Gi", pods="110").obj()],
              [MakePod().name("only").uid("uid-only").priority(0).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    plugin = default_preemption.DefaultPreemption(default_preemption.DefaultPreemptionArgs(), env.handle,
                                                  tie_breaks=TieBreaks("1"))
    hold = asyncio.Event()

    async def delete_then_hang(name, namespace="", **kw):
        env.pods[name].metadata.deletion_timestamp = timeutil.rfc3339()  # the apiserver took it
        await hold.wait()  # ... but the answer is slow to come back

    env.client.pods.delete = delete_then_hang
    preemptor = (MakePod().name("preemptor").uid("uid-preemptor").priority(10).scheduler_name("default-scheduler")
                 .req(cpu="1").obj())
    env.pods["preemptor"] = preemptor
    state, d = env.diagnosis(preemptor)
    _, status = await plugin.post_filter(state, preemptor, d)
    assert status is None
    for _ in range(100):
        if env.pods["only"].metadata.deletion_timestamp:
            break
        await asyncio.sleep(0.01)
    assert plugin.evaluator.is_pod_running_preemption(preemptor.metadata.uid) is False
    assert plugin.pre_enqueue(preemptor) is None
    hold.set()
    await plugin.close()


async def test_a_failing_dry_run_is_an_error_that_keeps_the_nomination_not_a_not_helpful():
    env = Env([MakeNode().name("n1").allocatable(cpu="1", memory="100Gi", pods="110").obj()],
              [MakePod().name("low").uid("uid-low").priority(0).scheduler_name("default-scheduler").req(cpu="1")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    plugin = env.plugin

    def broken(state, p, ni, pdbs):
        return [], 0, Status(Code.ERROR, "simulation broke")

    plugin.select_victims_on_node = broken
    result, status = await env.preempt(MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="1").obj())
    assert result is None  # no Override to "": a nomination the pod has stays
    assert status.code == Code.ERROR and "simulation broke" in status.message()


async def test_lower_priority_nominations_on_the_chosen_node_are_cleared_written_or_not():
    """The preemption design: the preemptor's node no longer has room for lower-priority pods
    nominated there; the scheduler clears their nominations — its own decisions too, even if not
    written yet."""
    env = Env([MakeNode().name("n1").allocatable(cpu="2", memory="100Gi", pods="110").obj()],
              [MakePod().name("low").uid("uid-low").priority(0).scheduler_name("default-scheduler").req(cpu="2")
               .node("n1").start_time(STARTED).phase("Running").condition("Ready").obj()])
    nominator = Nominator()
    # nominated by an earlier cycle; the write has not landed
    lower = MakePod().name("lower").uid("uid-lower").priority(5).scheduler_name("default-scheduler").req(cpu="2").obj()
    nominator.add(PodInfo(lower), NominatingInfo("n1", NominatingMode.OVERRIDE))
    env.fw.set_pod_nominator(nominator)
    env.services.status_writer = StatusWriter()
    result, status = await env.preempt(MakePod().name("preemptor").uid("uid-preemptor").priority(10)
                                       .scheduler_name("default-scheduler").req(cpu="2").obj())
    assert status is None and result.nominating_info.node_name == "n1"
    await env.handle.status_writer.flush(lower.metadata.uid)
    assert ("lower", {"status": {"nominatedNodeName": ""}}) in env.client.pods.patched


async def test_the_victims_guard_switched_off_by_its_failpoint_lets_the_pod_preempt_again():
    """scheduler/skip-victims-in-flight-guard=return (docs/chaos.md, "Proof that it finds races"):
    the same cluster as above, and the pod preempts the other node's pod while its victim is still
    terminating — what no-preemption-while-victims-going catches."""
    from machinery import failpoints
    from scheduler.plugins.default_preemption import FP_SKIP_VICTIMS_GUARD
    env, preemptor = _victim_terminating_on_the_nomination()
    failpoints.arm(FP_SKIP_VICTIMS_GUARD, "return")
    try:
        result, status = await env.preempt(preemptor)
    finally:
        failpoints.reset()
    assert "not eligible" not in (status.message() if status is not None else "")
    assert result is not None and result.nominating_info is not None
    assert result.nominating_info.node_name in ("n1", "n2")
