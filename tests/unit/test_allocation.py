"""The kubelet's allocation manager and checkpoints, against KEP-1287's own examples."""

from __future__ import annotations

import dataclasses
import json

import pytest

from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import ALLOCATED_FILE, CheckpointStore, Resources
from kubelet.allocation.conditions import ResizeCondition
from kubelet.allocation.manager import AllocationManager
from kubelet.kubelet import FP_AFTER_ADMIT_CHECKPOINT, FP_BEFORE_ADMIT_CHECKPOINT, Kubelet, KubeletConfig
from kubelet.node import NodeConfig
from kubelet.runtime_ops import Observed
from kubelet.status import PodView
from machinery import failpoints
from machinery.api import core_pb2
from machinery.informer import key_of
from tests.harness.builders import MakePod


def _resize(pod: core_pb2.Pod, cpu: str, limits: dict | None = None) -> core_pb2.Pod:
    out = core_pb2.Pod()
    out.CopyFrom(pod)
    out.spec.containers[0].resources.requests["cpu"] = cpu
    for k, v in (limits or {}).items():
        out.spec.containers[0].resources.limits[k] = v
    out.metadata.generation = pod.metadata.generation + 1
    return out


def _manager(tmp_path, cpu_millis: int = 2500, memory: int = 8 << 30, pods: int = 110, events=None):
    m = AllocationManager(tmp_path, "node-1", {"cpu": cpu_millis, "memory": memory, "pods": pods}, pods,
                          record_event=(lambda *a: events.append(a[1:])) if events is not None else None)
    m.load()
    return m


def _allocated_cpu(m: AllocationManager, pod: core_pb2.Pod) -> str:
    return m.allocation_of(pod.metadata.uid)["c1"].requests["cpu"]


def _api_condition(c: ResizeCondition, **changes: str) -> core_pb2.PodCondition:
    """``c`` as the pod's API status shows it (what a restarted kubelet restores), with ``changes``."""
    c = dataclasses.replace(c, **changes)
    return core_pb2.PodCondition(type=c.type, status="True", reason=c.reason, message=c.message,
                                 observed_generation=c.observed_generation,
                                 last_transition_time=c.last_transition_time, last_probe_time=c.last_probe_time)


# ---------------------------------------------------------------- KEP-1287 Flow Control


def test_kep1287_flow_control_allocation_steps(tmp_path):
    """Steps 1-15 as the allocation manager sees them (node: 2.5 cpu, another pod holds 0.75)."""
    events = []
    m = _manager(tmp_path, events=events)
    other = MakePod().name("other").uid("uid-other").generation(1).priority(0).req(cpu="750m").obj()
    assert m.add_pod(other, []).ok
    pod = MakePod().name("flow").uid("uid-flow").generation(1).priority(0).req(cpu="1").obj()
    # Steps 1-3: created, scheduled, admitted: allocated cpu 1.
    assert m.add_pod(pod, [other]).ok
    assert _allocated_cpu(m, pod) == "1"
    # Step 4: resize #1 to 1.5.
    r1 = _resize(pod, "1.5")
    # Step 5: the kubelet restarts: allocated read back from the checkpoint; the pod is re-admitted
    # at its allocated resources, not the spec's 1.5.
    m = _manager(tmp_path, events=events)
    assert m.add_pod(r1, [other]).ok
    assert _allocated_cpu(m, r1) == "1"
    # Step 6: the kubelet syncs the pod, sees resize #1 and admits it: InProgress.
    assert m.handle_resize(r1, [other]) is True
    assert _allocated_cpu(m, r1) == "1.5"
    assert m.condition(r1.metadata.uid, cond.IN_PROGRESS).observed_generation == 2
    # Steps 7-9: resize #2 to 2: feasible in theory, not now (0.75 + 2 > 2.5): Deferred.
    r2 = _resize(r1, "2")
    assert m.handle_resize(r2, [other]) is False
    pending = m.condition(r2.metadata.uid, cond.PENDING)
    assert pending.reason == cond.DEFERRED
    assert pending.message == "Node didn't have enough resource: cpu, requested: 2000, used: 750, capacity: 2500"
    assert _allocated_cpu(m, r2) == "1.5"
    # Steps 10-11: resize #3 to 1.6 fits: Pending removed, allocated 1.6, InProgress.
    r3 = _resize(r2, "1.6")
    assert m.handle_resize(r3, [other]) is True
    assert m.condition(r3.metadata.uid, cond.PENDING) is None
    assert _allocated_cpu(m, r3) == "1.6"
    # Steps 14-15: resize #4 to 100 cpus: Infeasible; allocation stays 1.6.
    r4 = _resize(r3, "100")
    assert m.handle_resize(r4, [other]) is False
    pending = m.condition(r4.metadata.uid, cond.PENDING)
    assert pending.reason == cond.INFEASIBLE
    assert pending.message == "Node didn't have enough capacity: cpu, requested: 100000, capacity: 2500"
    assert _allocated_cpu(m, r4) == "1.6"
    reasons = [e[1] for e in events]
    assert reasons.count("ResizeStarted") == 2 and "ResizeDeferred" in reasons and "ResizeInfeasible" in reasons


def test_restart_before_checkpointing_readmits_as_new(tmp_path):
    """Kubelet Restart Analysis 1: restart before checkpointing -> admission again as if new."""
    m = _manager(tmp_path)
    pod = MakePod().name("fresh").uid("uid-fresh").generation(1).priority(0).req(cpu="1").obj()
    assert not m.is_allocated(pod)
    m2 = _manager(tmp_path)
    assert m2.add_pod(_resize(pod, "1.2"), []).ok
    assert m2.allocation_of(pod.metadata.uid)["c1"].requests["cpu"] == "1.2"


def test_admission_rejects_with_out_of_cpu_and_counts_other_pods_at_max_of_allocated_and_actuated(tmp_path):
    m = _manager(tmp_path, cpu_millis=2000)
    a = MakePod().name("a").uid("uid-a").generation(1).priority(0).req(cpu="1500m").obj()
    assert m.add_pod(a, []).ok
    # a is resized down: allocated 500m, but the runtime still runs it at 1500m (not actuated yet).
    m.set_actuated(a.metadata.uid, "c1", Resources({"cpu": "1500m"}))
    assert m.handle_resize(_resize(a, "500m"), [])
    b = MakePod().name("b").uid("uid-b").generation(1).priority(0).req(cpu="1").obj()
    result = m.add_pod(b, [a])
    assert (result.ok, result.reason) == (False, "OutOfcpu")
    assert result.message == "Node didn't have enough resource: cpu, requested: 1000, used: 1500, capacity: 2000"
    m.set_actuated(a.metadata.uid, "c1", Resources({"cpu": "500m"}))  # now actuated: room for b
    assert m.add_pod(b, [a]).ok


def test_out_of_pods(tmp_path):
    m = _manager(tmp_path, pods=1)
    assert m.add_pod(MakePod().name("one").uid("uid-one").generation(1).priority(0).req(cpu="10m").obj(), []).ok
    two = MakePod().name("two").uid("uid-two").generation(1).priority(0).req(cpu="10m").obj()
    r = m.add_pod(two, [MakePod().name("one").uid("uid-one").generation(1).priority(0).req(cpu="10m").obj()])
    assert r.reason == "OutOfpods" and r.message.startswith("Node didn't have enough resource: pods")


# ---------------------------------------------------------------- the kubelet's admission is add_pod


class _NoApi:
    """A client nothing goes through: the kubelet is built, never started."""

    def resource(self, kind):
        return None


def _kubelet(tmp_path, cpu: str) -> Kubelet:
    k = Kubelet(KubeletConfig(NodeConfig("node-1", cpu=cpu), str(tmp_path)), _NoApi(), runtime=None)
    k.alloc.load()
    return k


def _not_running() -> Observed:
    return Observed(sandbox_id=None, sandbox_ready=False, sandbox_attempt=0, view=PodView(), ids={})


def _record_steps(monkeypatch, m: AllocationManager, steps: list) -> None:
    """Note every call of add_pod's two steps, by pod name, in ``steps``."""
    for step in ("can_admit_pod", "set_allocated"):
        real = getattr(m, step)

        def spy(pod, *args, _real=real, _step=step):
            steps.append((_step, pod.metadata.name))
            return _real(pod, *args)
        monkeypatch.setattr(m, step, spy)


def _record_failpoints(monkeypatch, m: AllocationManager, uid: str, steps: list) -> None:
    """Note each failpoint the kubelet passes, with whether ``uid``'s allocation is checkpointed there."""
    async def hit(name: str) -> None:
        steps.append((name, m.allocation_of(uid) is not None))
    monkeypatch.setattr(failpoints, "hit", hit)


async def test_the_kubelets_admission_takes_add_pods_steps_with_its_failpoints_around_the_checkpoint(
        tmp_path, monkeypatch):
    """KEP-1287 "Kubelet Restart Analysis": the kubelet admits a pod with add_pod's own two steps
    (decide, checkpoint), the restart failpoints just before and just after the checkpoint write;
    add_pod takes the same steps without them and checkpoints the same allocation."""
    k = _kubelet(tmp_path / "kubelet", cpu="2")
    pod = MakePod().name("new").uid("uid-new").generation(1).priority(0).req(cpu="1").obj()
    steps: list = []
    _record_steps(monkeypatch, k.alloc, steps)
    _record_failpoints(monkeypatch, k.alloc, pod.metadata.uid, steps)
    assert await k.admitter.admit(pod, _not_running())
    assert steps == [("can_admit_pod", "new"), (FP_BEFORE_ADMIT_CHECKPOINT, False), ("set_allocated", "new"),
                     (FP_AFTER_ADMIT_CHECKPOINT, True)]
    twin = _manager(tmp_path / "twin", cpu_millis=2000)
    steps.clear()
    _record_steps(monkeypatch, twin, steps)
    assert twin.add_pod(pod, []).ok
    assert steps == [("can_admit_pod", "new"), ("set_allocated", "new")]
    assert twin.allocation_of(pod.metadata.uid) == k.alloc.allocation_of(pod.metadata.uid) == \
        {"c1": Resources({"cpu": "1"})}


async def test_a_critical_pod_that_does_not_fit_preempts_between_add_pods_decision_and_its_checkpoint(
        tmp_path, monkeypatch):
    """Kubernetes' critical-pod admission: add_pod's decision says OutOfcpu, the kubelet evicts a
    victim and checks the fit again, then checkpoints between the same failpoints."""
    k = _kubelet(tmp_path, cpu="2")
    low = MakePod().name("low").uid("uid-low").generation(1).priority(0).req(cpu="1500m").obj()
    assert k.alloc.add_pod(low, []).ok
    k.pods.store[key_of(low)] = low  # the informer's view: low runs here
    critical = MakePod().name("critical").uid("uid-critical").generation(1).priority(2_000_001_000).req(cpu="1").obj()
    steps: list = []
    killed: set[str] = set()

    async def kill_preempted(victim: core_pb2.Pod) -> None:
        steps.append(("preempt", victim.metadata.name))
        killed.add(victim.metadata.uid)
    monkeypatch.setattr(k.admitter, "_kill_preempted", kill_preempted)
    monkeypatch.setattr(k.terminator, "killed", lambda uid: uid in killed)
    _record_steps(monkeypatch, k.alloc, steps)
    _record_failpoints(monkeypatch, k.alloc, critical.metadata.uid, steps)
    assert await k.admitter.admit(critical, _not_running())
    assert steps == [("can_admit_pod", "critical"), ("preempt", "low"), (FP_BEFORE_ADMIT_CHECKPOINT, False),
                     ("set_allocated", "critical"), (FP_AFTER_ADMIT_CHECKPOINT, True)]
    assert _allocated_cpu(k.alloc, critical) == "1"
    # Without the kubelet's preemption add_pod's decision stands: the same pod is refused.
    twin = _manager(tmp_path / "twin", cpu_millis=2000)
    assert twin.add_pod(low, []).ok
    assert twin.add_pod(critical, [low]).reason == "OutOfcpu"


# ---------------------------------------------------------------- pending resizes


def test_pending_resizes_are_sorted_by_the_keps_priority(tmp_path):
    m = _manager(tmp_path, cpu_millis=10_000)
    low = MakePod().name("low").uid("uid-low").generation(1).priority(10).req(cpu="1").obj()
    high = MakePod().name("high").uid("uid-high").generation(1).priority(100).req(cpu="1").obj()
    guaranteed = (MakePod().name("guaranteed").uid("uid-guaranteed").generation(1).priority(10)
                  .req(cpu="1", memory="1Gi").lim(cpu="1", memory="1Gi").obj())
    shrink = MakePod().name("shrink").uid("uid-shrink").generation(1).priority(0).req(cpu="2").obj()
    pods = [low, high, guaranteed, shrink]
    for p in pods:
        assert m.add_pod(p, [])
    want = {"low": _resize(low, "2"), "high": _resize(high, "2"),
            "guaranteed": _resize(guaranteed, "2", {"cpu": "2"}), "shrink": _resize(shrink, "1")}
    by_uid = {p.metadata.uid: p for p in want.values()}
    for p in want.values():
        m.push_pending(p.metadata.uid, by_uid)
    order = [by_uid[u].metadata.name for u in m.pending_uids()]
    # Not increasing first; then priority; then Guaranteed before Burstable at equal priority.
    assert order == ["shrink", "high", "guaranteed", "low"]


def test_retry_of_deferred_resizes_chain_reaction(tmp_path):
    """KEP-1287 "Retry of deferred resizes", case 3: deleting pod1 makes room for pod2's resize,
    pod2's makes room for pod3's (once actuated, here at once), pod3's for pod4's."""
    m = _manager(tmp_path, cpu_millis=4000)
    p1 = MakePod().name("p1").uid("uid-p1").generation(1).priority(0).req(cpu="1").obj()
    p2 = MakePod().name("p2").uid("uid-p2").generation(1).priority(0).req(cpu="1").obj()
    p3 = MakePod().name("p3").uid("uid-p3").generation(1).priority(0).req(cpu="1").obj()
    p4 = MakePod().name("p4").uid("uid-p4").generation(1).priority(0).req(cpu="900m").obj()
    live = [p1, p2, p3, p4]
    for p in live:
        assert m.add_pod(p, [q for q in live if q is not p and m.is_allocated(q)]).ok
    # p2 wants +1 cpu and gives nothing back; p3 wants +0.9; p4 +1: only room for p2 once p1 goes.
    # Resizes chosen so that each allocation, once actuated, frees exactly what the next needs.
    want = {p2.metadata.uid: _resize(p2, "2"), p3.metadata.uid: _resize(p3, "1900m"),
            p4.metadata.uid: _resize(p4, "1900m")}
    for uid, p in want.items():
        assert m.handle_resize(p, [want.get(q.metadata.uid, q) for q in live]) is False
        m.push_pending(uid, want)
    assert all(m.is_deferred(uid) for uid in want)
    # pod1 is deleted.
    live.remove(p1)
    m.remove_pod(p1.metadata.uid)

    def active():
        return [want.get(q.metadata.uid, q) for q in live]

    changed = m.retry_pending("pods_removed", want, active)
    assert changed == [p2.metadata.uid]
    assert _allocated_cpu(m, p2) == "2" and m.is_deferred(p3.metadata.uid)
    # p2 actuated; now shrink p2 back to make room for p3, as the test's chain does.
    p2_down = _resize(want[p2.metadata.uid], "1100m")
    want[p2.metadata.uid] = p2_down
    m.handle_resize(p2_down, active())
    changed = m.retry_pending("pod_resized", want, active)
    assert p3.metadata.uid in changed and _allocated_cpu(m, p3) == "1900m"
    assert m.is_deferred(p4.metadata.uid)


def test_node_policy_sets_and_clears_preemption_disabled_on_deferred_pods(tmp_path):
    """KEP-5836: Deferred + non-empty disableResizePreemption -> PodResizePreemptionDisabled."""
    m = _manager(tmp_path, cpu_millis=2000)
    big = MakePod().name("big").uid("uid-big").generation(1).priority(0).req(cpu="1").obj()
    other = MakePod().name("other").uid("uid-other").generation(1).priority(0).req(cpu="1").obj()
    m.add_pod(big, [])
    m.add_pod(other, [big])
    m.refresh_preemption_policy(["autoscaling.k8s.io/cluster-autoscaler"], {})
    grown = _resize(big, "1500m")
    m.handle_resize(grown, [other])
    c = m.condition(grown.metadata.uid, cond.PREEMPTION_DISABLED)
    assert c.reason == "PreemptionDisabledByNodePolicy"
    assert c.message == "Preemption for in-place pod resize is disabled on node 'node-1' by preemption policy."
    assert m.refresh_preemption_policy([], {grown.metadata.uid: grown}) == [grown.metadata.uid]
    assert m.condition(grown.metadata.uid, cond.PREEMPTION_DISABLED) is None
    m.refresh_preemption_policy(["x.io/y"], {grown.metadata.uid: grown})
    assert m.condition(grown.metadata.uid, cond.PREEMPTION_DISABLED) is not None
    # The resize resolves (it is reverted): both conditions go.
    m.handle_resize(big, [other])
    assert m.conditions_of(grown.metadata.uid) == {}


def test_pending_condition_keeps_its_transition_time_until_its_reason_changes(tmp_path):
    m = _manager(tmp_path, cpu_millis=1000)
    pod = MakePod().name("t").uid("uid-t").generation(1).priority(0).req(cpu="500m").obj()
    m.add_pod(pod, [])
    other = MakePod().name("o").uid("uid-o").generation(1).priority(0).req(cpu="500m").obj()
    m.add_pod(other, [pod])
    m.handle_resize(_resize(pod, "800m"), [other])
    first = m.condition(pod.metadata.uid, cond.PENDING)
    first_time = first.last_transition_time
    # As a restarted kubelet takes it from the pod's API status: the same condition, set long ago.
    m.restore_conditions(pod.metadata.uid, [_api_condition(first, last_transition_time="2000-01-01T00:00:00Z")])
    m.handle_resize(_resize(_resize(pod, "800m"), "900m"), [other])  # still Deferred, new generation
    assert m.condition(pod.metadata.uid, cond.PENDING).last_transition_time == "2000-01-01T00:00:00Z"
    m.handle_resize(_resize(pod, "5"), [other])  # now Infeasible: a new transition
    assert m.condition(pod.metadata.uid, cond.PENDING).last_transition_time != "2000-01-01T00:00:00Z"
    assert first_time


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_survives_restart_and_detects_corruption(tmp_path):
    s = CheckpointStore(tmp_path, ALLOCATED_FILE)
    s.load()
    s.set_pod("u1", {"c": Resources({"cpu": "1"}, {"cpu": "2"})})
    s2 = CheckpointStore(tmp_path, ALLOCATED_FILE)
    s2.load()
    assert s2.get("u1", "c") == Resources({"cpu": "1"}, {"cpu": "2"})
    doc = json.loads((tmp_path / ALLOCATED_FILE).read_text())
    doc["pods"]["u1"]["c"]["requests"]["cpu"] = "9"  # tampered: checksum no longer matches
    (tmp_path / ALLOCATED_FILE).write_text(json.dumps(doc))
    s3 = CheckpointStore(tmp_path, ALLOCATED_FILE)
    s3.load()
    assert s3.get_pod("u1") is None and s3.recovered_from_corruption
    assert list(tmp_path.glob(f"{ALLOCATED_FILE}.corrupt-*"))
    (tmp_path / ALLOCATED_FILE).write_bytes(b"\x00garbage")
    s4 = CheckpointStore(tmp_path, ALLOCATED_FILE)
    s4.load()  # never raises
    assert s4.pods() == []


@pytest.mark.parametrize("old,new,expected", [
    ({"cpu": "1"}, {"cpu": "2"}, ("cpu", "requests", "increase")),
    ({"cpu": "2"}, {"cpu": "1"}, ("cpu", "requests", "decrease")),
    ({}, {"memory": "1Gi"}, ("memory", "requests", "add")),
])
def test_requested_resizes_are_counted_per_container_resource_and_direction(old, new, expected):
    from prometheus_client import REGISTRY

    from kubelet.allocation.manager import count_requested_resizes
    a = MakePod().name("m").container("c1").req(old).obj()
    b = MakePod().name("m").container("c1").req(new).obj()
    labels = dict(zip(("resource", "requirement", "operation"), expected, strict=True))
    before = REGISTRY.get_sample_value("kubelet_container_requested_resizes_total", labels) or 0
    count_requested_resizes(a, b)
    assert REGISTRY.get_sample_value("kubelet_container_requested_resizes_total", labels) == before + 1


def test_an_infeasible_resize_is_counted_once_per_request_not_per_retry(tmp_path):
    from prometheus_client import REGISTRY

    labels = {"reason_detail": "insufficient_node_allocatable"}
    before = REGISTRY.get_sample_value("kubelet_pod_infeasible_resizes_total", labels) or 0
    m = _manager(tmp_path, cpu_millis=2000)
    pod = MakePod().name("big").uid("uid-big").generation(1).priority(0).req(cpu="1").obj()
    assert m.add_pod(pod, []).ok
    huge = _resize(pod, "100")
    for _ in range(3):  # the request, then retries
        assert not m.handle_resize(huge, [])
    assert m.is_infeasible(pod.metadata.uid)
    assert REGISTRY.get_sample_value("kubelet_pod_infeasible_resizes_total", labels) == before + 1
    assert not m.handle_resize(_resize(huge, "50"), [])  # another request, infeasible too
    assert REGISTRY.get_sample_value("kubelet_pod_infeasible_resizes_total", labels) == before + 2


def _gauge(name: str, **labels: str) -> float:
    from prometheus_client import REGISTRY
    value = REGISTRY.get_sample_value(name, labels)
    return value if value is not None else 0.0


def test_pending_and_in_progress_gauges_sum_every_kubelet_of_the_process(tmp_path):
    """kubelet_pod_pending_resizes / kubelet_pod_in_progress_resizes are read from the managers'
    conditions at scrape time, so two kubelets in one process (hollow nodes) add up."""
    before = {r: _gauge("kubelet_pod_pending_resizes", reason=r) for r in ("deferred", "infeasible")}
    before_ip = _gauge("kubelet_pod_in_progress_resizes")
    a, b = _manager(tmp_path / "a"), _manager(tmp_path / "b")
    a.restore_conditions("uid-1", [_api_condition(ResizeCondition(cond.PENDING, cond.DEFERRED, "no room", 2))])
    b.restore_conditions("uid-2", [_api_condition(ResizeCondition(cond.PENDING, cond.DEFERRED, "no room", 2))])
    b.restore_conditions("uid-3", [_api_condition(ResizeCondition(cond.PENDING, cond.INFEASIBLE, "too big", 2))])
    a.set_in_progress("uid-4", 3)
    assert _gauge("kubelet_pod_pending_resizes", reason="deferred") == before["deferred"] + 2
    assert _gauge("kubelet_pod_pending_resizes", reason="infeasible") == before["infeasible"] + 1
    assert _gauge("kubelet_pod_in_progress_resizes") == before_ip + 1
    b.remove_pod("uid-2")  # its only condition goes with it
    assert _gauge("kubelet_pod_pending_resizes", reason="deferred") == before["deferred"] + 1


def _duo_beside(m: AllocationManager, c1: str, c2: str, other_cpu: str) -> tuple[core_pb2.Pod, core_pb2.Pod]:
    """Admitted: a pod "other" asking ``other_cpu``, then pod "duo" with containers c1 and c2."""
    pod = MakePod().name("duo").container("c1", cpu=c1).container("c2", cpu=c2).obj()
    pod.metadata.uid, pod.metadata.generation = "uid-duo", 1
    other = MakePod().name("other").uid("uid-other").generation(1).priority(0).req(cpu=other_cpu).obj()
    assert m.add_pod(other, []).ok and m.add_pod(pod, [other]).ok
    return pod, other


def _resized(pod: core_pb2.Pod, c1: str, c2: str) -> core_pb2.Pod:
    """The pod's next generation, asking ``c1`` and ``c2`` cpu for its two containers."""
    out = core_pb2.Pod()
    out.CopyFrom(pod)
    out.spec.containers[0].resources.requests["cpu"] = c1
    out.spec.containers[1].resources.requests["cpu"] = c2
    out.metadata.generation = pod.metadata.generation + 1
    return out


def test_kep1287_atomic_resizes_across_containers_are_accepted_whole_or_not_at_all(tmp_path):
    """KEP-1287 "Atomic Resizes": all containers' requests are one request. Here c1's increase
    alone would fit, c2's would too, both together do not: nothing is allocated, Deferred; once
    room appears, both are allocated at once."""
    m = _manager(tmp_path, cpu_millis=4000)
    pod, other = _duo_beside(m, "1", "1", other_cpu="1500m")
    both = _resized(pod, "1500m", "1500m")
    assert m.handle_resize(both, [other]) is False
    assert m.condition("uid-duo", cond.PENDING).reason == cond.DEFERRED
    assert (m.allocation_of("uid-duo")["c1"].requests["cpu"], m.allocation_of("uid-duo")["c2"].requests["cpu"]) == \
        ("1", "1")
    m.remove_pod(other.metadata.uid)
    assert m.handle_resize(both, []) is True
    assert (m.allocation_of("uid-duo")["c1"].requests["cpu"], m.allocation_of("uid-duo")["c2"].requests["cpu"]) == \
        ("1500m", "1500m")


def test_kep5836_a_resize_moving_cpu_between_containers_counts_each_at_its_larger_size(tmp_path):
    """KEP-5836 "Risk of Additional Preemption": the kubelet takes the resizing pod at
    max(desired, allocated, actual) per container. c1 gives a CPU to c2 on a full node: the sum
    stays 3, but until c1's decrease is actuated the node would hold 4 — Deferred, with
    Kubernetes' numbers; with room for the larger size, allocated."""
    m = _manager(tmp_path, cpu_millis=4000)
    pod, other = _duo_beside(m, "2", "1", other_cpu="1")
    for c in ("c1", "c2"):
        m.set_actuated("uid-duo", c, m.allocation_of("uid-duo")[c])
    moved = _resized(pod, "1", "2")
    assert m.handle_resize(moved, [other]) is False
    pending = m.condition("uid-duo", cond.PENDING)
    assert (pending.reason, pending.message) == (
        cond.DEFERRED, "Node didn't have enough resource: cpu, requested: 4000, used: 1000, capacity: 4000")
    smaller = MakePod().name("other").uid("uid-other").generation(1).priority(0).req(cpu="0").obj()
    m.remove_pod("uid-other")
    assert m.add_pod(smaller, []).ok
    assert m.handle_resize(moved, [smaller]) is True
    assert (m.allocation_of("uid-duo")["c1"].requests["cpu"], m.allocation_of("uid-duo")["c2"].requests["cpu"]) == \
        ("1", "2")


def test_the_fit_check_switched_off_by_its_failpoint_admits_past_allocatable(tmp_path):
    """kubelet/skip-fit-check=return (docs/chaos.md, "Proof that it finds races"): a pod the node has
    no room for is admitted and checkpointed — what allocated-within-allocatable catches."""
    from kubelet.allocation.manager import FP_SKIP_FIT_CHECK
    from machinery import failpoints
    m = _manager(tmp_path, cpu_millis=2000)
    a = MakePod().name("a").uid("uid-a").generation(1).priority(0).req(cpu="1500m").obj()
    b = MakePod().name("b").uid("uid-b").generation(1).priority(0).req(cpu="1").obj()
    assert m.add_pod(a, []).ok and not m.add_pod(b, [a]).ok
    failpoints.arm(FP_SKIP_FIT_CHECK, "return")
    try:
        assert m.add_pod(b, [a]).ok
    finally:
        failpoints.reset()
    assert m.allocation_of(b.metadata.uid)["c1"].requests["cpu"] == "1"
