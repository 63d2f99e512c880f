"""The framework runtime at the extension points kube-scheduler's framework.go defines (Kubernetes
docs: Scheduling Framework):

- PreFilter: an Unschedulable does not stop the others (preemption needs their state); the
  plugins that narrowed the nodes count as rejectors when the pod fits none of them;
- Permit: a plugin allows, rejects, or makes the pod wait — at most 15 minutes, each waiting
  plugin with its own timeout, stopped when that plugin allows the pod;
- a rejection after the node was chosen (Reserve, Permit, PreBind) is reported as a FitError over
  that node, its plugin recorded so its hints requeue the pod."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from scheduler.framework.interfaces import Services
from scheduler.framework.runtime import Framework, FrameworkError, PluginSets, new_handle
from scheduler.framework.types import Code, CycleState, PreFilterResult, Status
from scheduler.schedule_one import rejected_on
from tests.harness.builders import MakePod


class _Fifo:
    def less(self, a, b) -> bool:
        return False

    async def bind(self, state, pod, node_name):
        return None


class _Waits:
    """A Permit plugin that asks to wait ``timeout`` seconds."""

    def __init__(self, timeout: float):
        self.timeout = timeout

    def permit(self, state, pod, node):
        return Status(Code.WAIT), self.timeout


def _framework(**plugins) -> Framework:
    """A profile of these plugins (name -> instance, or a number: a Permit plugin waiting that long)."""
    made = {n: (_Waits(p) if isinstance(p, (int, float)) else p) for n, p in plugins.items()}
    registry = {"Fifo": lambda args, h: _Fifo(), **{n: (lambda args, h, p=p: p) for n, p in made.items()}}
    return Framework("default-scheduler", PluginSets(multi_point=list(registry)), registry, Services())


class _PreFilter:
    def __init__(self, status: Status | None = None, nodes: set[str] | None = None):
        self.status, self.nodes, self.ran = status, nodes, False

    def pre_filter(self, state, pod, nodes):
        self.ran = True
        return (PreFilterResult(frozenset(self.nodes)) if self.nodes is not None else None), self.status

    def filter(self, state, pod, ni):
        return None


def test_prefilter_goes_on_after_unschedulable_and_stops_at_unresolvable():
    after = _PreFilter()
    fw = _framework(A=_PreFilter(Status(Code.UNSCHEDULABLE, "not yet")), B=after)
    _, s, _ = fw.run_pre_filter_plugins(CycleState(), MakePod().name("p").obj(), [])
    assert (s.code, s.plugin, s.message()) == (Code.UNSCHEDULABLE, "A", "not yet") and after.ran
    after = _PreFilter()
    fw = _framework(A=_PreFilter(Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "never")), B=after)
    _, s, _ = fw.run_pre_filter_plugins(CycleState(), MakePod().name("p").obj(), [])
    assert (s.code, s.plugin) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "A") and not after.ran


def test_prefilter_results_narrowing_to_nothing_name_the_plugins_that_narrowed():
    fw = _framework(A=_PreFilter(nodes={"n1"}), B=_PreFilter(nodes={"n2"}), C=_PreFilter())
    result, s, narrowing = fw.run_pre_filter_plugins(CycleState(), MakePod().name("p").obj(), [])
    assert result.node_names == frozenset() and narrowing == {"A", "B"}
    assert s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert s.message() == "node(s) didn't satisfy plugin(s) [A B] simultaneously"
    fw = _framework(A=_PreFilter(nodes=set()))
    _, s, narrowing = fw.run_pre_filter_plugins(CycleState(), MakePod().name("p").obj(), [])
    assert s.message() == "node(s) didn't satisfy plugin A" and narrowing == {"A"}


def test_a_rejection_once_the_node_was_chosen_is_a_fit_error_over_that_node_with_its_plugin():
    pod = MakePod().name("late").obj()
    q = SimpleNamespace(pod=pod, unschedulable_plugins=set(), pending_plugins=set())
    s = rejected_on(q, "n1", Status(Code.UNSCHEDULABLE, "gang incomplete", plugin="Coscheduling"))
    assert s.code == Code.UNSCHEDULABLE and s.plugin == "Coscheduling"
    assert s.message() == "0/1 nodes are available: 1 gang incomplete."
    assert q.unschedulable_plugins == {"Coscheduling"} and q.pending_plugins == set()
    s = rejected_on(q, "n1", Status(Code.PENDING, "waiting for a claim", plugin="DRA"))
    assert q.pending_plugins == {"DRA"}
    error = Status(Code.ERROR, "bind broke", plugin="DefaultBinder")
    assert rejected_on(q, "n1", error) is error  # an error stays an error


async def test_the_pod_goes_on_once_every_waiting_plugin_allows_it():
    fw, pod = _framework(A=5, B=5), MakePod().name("waiting").uid("uid-waiting").obj()
    assert fw.run_permit_plugins(CycleState(), pod, "n1").code == Code.WAIT
    wp = fw.waiting_pods[pod.metadata.uid]
    waiter = asyncio.create_task(fw.wait_on_permit(pod))
    wp.allow("A")
    await asyncio.sleep(0)
    assert not waiter.done()  # B still holds it
    wp.allow("B")
    assert await waiter is None
    assert pod.metadata.uid not in fw.waiting_pods


async def test_a_plugin_that_allowed_no_longer_times_the_pod_out_the_other_one_does():
    fw, pod = _framework(Quick=0.05, Slow=0.2), MakePod().name("waiting").uid("uid-waiting").obj()
    fw.run_permit_plugins(CycleState(), pod, "n1")
    fw.waiting_pods[pod.metadata.uid].allow("Quick")
    s = await fw.wait_on_permit(pod)
    assert s.code == Code.UNSCHEDULABLE and s.plugin == "Slow"
    assert s.message() == "rejected due to timeout after waiting 0.2s at plugin Slow"


async def test_a_zero_timeout_rejects_at_once_and_a_rejection_ends_the_wait():
    fw, pod = _framework(Now=0, Later=60), MakePod().name("waiting").uid("uid-waiting").obj()
    fw.run_permit_plugins(CycleState(), pod, "n1")
    s = await asyncio.wait_for(fw.wait_on_permit(pod), 1)
    assert (s.code, s.plugin) == (Code.UNSCHEDULABLE, "Now")

    fw, pod = _framework(Later=60), MakePod().name("waiting").uid("uid-waiting").obj()
    fw.run_permit_plugins(CycleState(), pod, "n1")
    fw.waiting_pods[pod.metadata.uid].reject("Other", "no room in the gang")
    s = await asyncio.wait_for(fw.wait_on_permit(pod), 1)
    assert (s.code, s.plugin, s.message()) == (Code.UNSCHEDULABLE, "Other", "no room in the gang")


def test_each_plugin_is_built_with_its_framework_as_a_complete_handle():
    """kube-scheduler's frameworkImpl is the Handle its plugins get: what the scheduler gives the
    profile is there while the factories run, the nominator the queue sets afterwards is seen."""
    snapshot, client, seen = object(), object(), {}

    def factory(args, handle):
        seen["handle"] = handle
        seen["snapshot"] = handle.snapshot
        seen["client"] = handle.require_client()
        return _Fifo()

    services = Services(client=client, snapshot=snapshot)  # type: ignore[arg-type]
    fw = Framework("default-scheduler", PluginSets(multi_point=["Fifo"]), {"Fifo": factory}, services)
    assert seen == {"handle": fw, "snapshot": snapshot, "client": client}
    pod = MakePod().name("p").uid("p").obj()
    assert fw.nominated_node(pod) == ""
    fw.set_pod_nominator(SimpleNamespace(node_of=lambda p: "n7", nominated_pods_for_node=lambda n: []))
    assert seen["handle"].nominated_node(pod) == "n7"


def test_a_framework_without_plugins_is_a_handle_that_sorts_nothing():
    handle = new_handle(Services(features=None))
    assert list(handle.pods()) == [] and handle.get_pod("default", "p") is None
    with pytest.raises(RuntimeError, match="no API client"):
        handle.require_client()
    bare = Framework("", None, {})
    with pytest.raises(FrameworkError, match="sorts no pods"):
        bare.less(None, None)  # type: ignore[arg-type]
