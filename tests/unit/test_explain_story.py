"""``kplane explain pod``'s story builder on hand-made histories: a preemptor and its victim, a
resize Deferred and then actuated (KEP-1287), a pod waiting on its ResourceClaim, a pod the
kubelet rejects at admission, faults, pods sharing a name, and the scheduler's log records placed
among the revisions by wall clock."""

from __future__ import annotations

import io
import json
from datetime import datetime
from pathlib import Path

import pytest

from cli.chaos import marks
from cli.check.framework import Entry
from cli.explain import fit_message, scheduler_log
from cli.explain.command import ExplainError, print_story, read_history
from cli.explain.scheduler_log import LogRecord
from cli.explain.story import PodNotFound, build
from machinery import jsonconv, timeutil
from machinery.api import core_pb2, resource_pb2
from tests.harness.builders import MakePod

T0 = "2026-11-28T12:00:00Z"


def at(second: int, micro: int = 0) -> str:
    return f"2026-11-28T12:00:{second:02d}" + (f".{micro:06d}Z" if micro else "Z")


def pod(name: str = "p", uid: str = "uid-p", *, manager: str = "kplane", when: str = T0,
        subresource: str = "", make: MakePod | None = None) -> core_pb2.Pod:
    p = (make or MakePod()).name(name).uid(uid).obj()
    p.metadata.creation_timestamp = T0
    p.metadata.managed_fields.add(manager=manager, operation="Update", time=when, subresource=subresource)
    return p


def then(prev: core_pb2.Pod, manager: str, when: str, subresource: str = "status") -> core_pb2.Pod:
    """The next version of ``prev``, written by ``manager`` at ``when``."""
    p = core_pb2.Pod()
    p.CopyFrom(prev)
    p.metadata.managed_fields.add(manager=manager, operation="Update", time=when, subresource=subresource,
                                  fields_v1=f"{manager}@{when}")
    return p


def event(reason: str, message: str, about: core_pb2.Pod, *, reporter: str = "default-scheduler", host: str = "",
          when: str = T0, related: core_pb2.Pod | None = None, count: int = 1) -> core_pb2.Event:
    ev = core_pb2.Event(reason=reason, message=message, type="Normal", count=count, first_timestamp=when,
                        last_timestamp=when, reporting_component=reporter, reporting_instance=host)
    ev.metadata.name, ev.metadata.namespace = f"{about.metadata.name}.{reason}", "default"
    ref = ev.involved_object
    ref.kind, ref.namespace, ref.name, ref.uid = "Pod", "default", about.metadata.name, about.metadata.uid
    ev.source.component, ev.source.host = reporter, host
    if related is not None:
        ev.related.kind, ev.related.namespace = "Pod", "default"
        ev.related.name, ev.related.uid = related.metadata.name, related.metadata.uid
    return ev


def entry(rev: int, obj, type_: str = "MODIFIED") -> Entry:
    kind = {core_pb2.Pod: "Pod", core_pb2.Event: "Event", resource_pb2.ResourceClaim: "ResourceClaim"}[type(obj)]
    return Entry(rev, type_, kind, obj.metadata.namespace or "default", obj.metadata.name, obj)


def record(when: str, event_: str, component: str = "scheduler", **fields) -> LogRecord:
    parsed = timeutil.parse(when)
    assert parsed is not None
    return LogRecord(parsed, component, event_, {"ts": when, "event": event_, "pod": "default/p", **fields})


def requeued(when: str, cluster_event: str, plugin: str, to: str, pre_queueing_hint: bool = False,
             trigger: str = "", trigger_rv: str = "") -> LogRecord:
    """A pod_requeued record: ``cluster_event`` (a change of ``trigger`` at revision ``trigger_rv``)
    moved the pod from the unschedulable pool to ``to``."""
    return record(when, "pod_requeued", uid="uid-p", cluster_event=cluster_event, plugin=plugin, hint="Queue",
                  pre_queueing_hint=pre_queueing_hint, from_queue="unschedulable", to_queue=to, trigger=trigger,
                  trigger_rv=trigger_rv)


def lines(story) -> list[str]:
    return [f"rev {s.rev} {s.component}: {s.what}" for s in story.steps]


# --- (a) preemption ---------------------------------------------------------------------------


def _preemption() -> tuple[list[Entry], core_pb2.Pod, core_pb2.Pod]:
    victim = pod("low", "uid-low", make=MakePod().priority(10).node("n1"))
    preemptor = pod(make=MakePod().priority(1000).req(cpu="1"))
    failed = event("FailedScheduling", "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated "
                   "taint {dedicated: gpu}.", preemptor, when=at(1))
    nominated = then(preemptor, "kube-scheduler", at(1))
    nominated.status.nominated_node_name = "n1"
    marked = then(victim, "kube-scheduler", at(1))
    marked.status.conditions.add(type="DisruptionTarget", status="True", reason="PreemptionByScheduler",
                                 message="default-scheduler: preempting to accommodate a higher priority pod")
    preempted = event("Preempted", "Preempted by pod uid-p on node n1", marked, when=at(1), related=preemptor)
    bound = then(nominated, "kube-scheduler", at(3))
    bound.spec.node_name = "n1"
    running = then(bound, "kubelet", at(3))
    running.status.phase = "Running"
    entries = [entry(10, victim, "ADDED"), entry(20, preemptor, "ADDED"), entry(21, failed, "ADDED"),
               entry(22, nominated), entry(23, marked), entry(24, preempted, "ADDED"),
               entry(25, marked, "DELETED"), entry(30, bound), entry(31, running)]
    return entries, preemptor, marked


def test_a_preemptor_s_story_names_each_step_and_the_plugin_behind_each_reason():
    entries, _, _ = _preemption()
    records = [record(at(1, 500000), "pod_unschedulable", message="...",
                      plugins=["NodeResourcesFit", "TaintToleration"], reasons={"Insufficient cpu": "NodeResourcesFit",
                               "node(s) had untolerated taint {dedicated: gpu}": "TaintToleration"}),
               requeued(at(2, 100), "AssignedPodDelete", "NodeResourcesFit", "backoff")]
    story = build(entries, "default", "p", records=records)
    assert story.uid == "uid-p"
    assert lines(story) == [
        "rev 20 kplane: created: priority 1000; requests cpu 1",
        "rev 20 scheduler: queued (default-scheduler)",
        "rev 21 scheduler: FailedScheduling: 0/2 nodes available: 1 Insufficient cpu (NodeResourcesFit), "
        "1 node(s) had untolerated taint {dedicated: gpu} (TaintToleration)",
        "rev 22 scheduler: nominated to n1",
        "rev 24 scheduler: preempted pod default/low on n1",
        # At 12:00:02 the last revision with a time not after it is 25 (its time: 12:00:01).
        "rev 25 scheduler: requeued by AssignedPodDelete (NodeResourcesFit QueueingHint: Queue), "
        "unschedulable -> backoff",
        "rev 30 scheduler: bound to n1",
        "rev 31 kubelet/n1: admitted; running",
    ]
    requeue = story.steps[5]
    assert (requeue.source, requeue.time) == ("scheduler-log", at(2, 100))


def test_a_victim_s_story_says_who_preempted_it():
    entries, _, _ = _preemption()
    story = build(entries, "default", "low")
    assert lines(story)[-3:] == [
        "rev 23 scheduler: marked for disruption: PreemptionByScheduler (default-scheduler: preempting to "
        "accommodate a higher priority pod)",
        "rev 24 scheduler: preempted by default/p on n1",
        "rev 25 apiserver: deleted",
    ]


# --- (b) a resize Deferred, then actuated -----------------------------------------------------------


def test_a_deferred_resize_then_actuated():
    running = pod(make=MakePod().req(cpu="500m").node("n1").phase("Running").allocated(cpu="500m")
                  .actual(cpu="500m"))
    resized = then(running, "kplane", at(5), "resize")
    resized.spec.containers[0].resources.requests["cpu"] = "1500m"
    resized.metadata.generation = 2
    deferred = then(resized, "kubelet", at(5))
    deferred.status.conditions.add(type="PodResizePending", status="True", reason="Deferred",
                                   message="Node didn't have enough resource: cpu")
    in_progress = then(deferred, "kubelet", at(9))
    del in_progress.status.conditions[:]
    in_progress.status.conditions.add(type="PodResizeInProgress", status="True")
    in_progress.status.container_statuses[0].allocated_resources["cpu"] = "1500m"
    done = then(in_progress, "kubelet", at(9))
    del done.status.conditions[:]
    done.status.container_statuses[0].resources.requests["cpu"] = "1500m"
    completed = event("ResizeCompleted", "Pod resize completed, generation: 2", done, reporter="kubelet",
                      host="n1", when=at(9))
    other_gone = pod("filler", "uid-filler", when=at(8))
    entries = [entry(40, running, "ADDED"), entry(41, resized), entry(42, deferred),
               entry(43, event("ResizeDeferred", "Pod resize Deferred: ...", deferred, reporter="kubelet", host="n1",
                               when=at(5)), "ADDED"),
               entry(50, other_gone, "DELETED"), entry(51, in_progress), entry(52, done),
               entry(53, completed, "ADDED")]
    # The record names the deletion that moved the pod (rev 50): it goes right after it, though
    # its wall time (12:00:09.5) would place it after the kubelet's steps of that second.
    records = [requeued(at(9, 500000), "AssignedPodDelete", "NodeResourcesFit", "active", trigger="default/filler",
                        trigger_rv="50"),
               record(at(8, 400000), "resize_unschedulable", outcome="parked", plugins=["NodeResourcesFit"],
                      message="0/1 nodes are available: 1 pod resize fits, waiting for Kubelet actuation.")]
    assert lines(build(entries, "default", "p", records=records)) == [
        "rev 40 kplane: created: requests cpu 500m",
        "rev 40 kplane: bound to n1 by spec.nodeName (no scheduling)",
        "rev 41 kplane: resize requested: c1 cpu 500m -> 1500m (generation 2)",
        "rev 42 kubelet/n1: resize deferred: Node didn't have enough resource: cpu",
        "rev 50 scheduler: requeued by AssignedPodDelete of default/filler (NodeResourcesFit QueueingHint: Queue), "
        "unschedulable -> active",
        "rev 50 scheduler: the resize fits its node now: parked until the kubelet actuates it",
        "rev 51 kubelet/n1: resize no longer deferred",
        "rev 51 kubelet/n1: resize in progress",
        "rev 51 kubelet/n1: allocated c1 cpu 1500m",
        "rev 52 kubelet/n1: resize done (no longer in progress)",
        "rev 52 kubelet/n1: actuated c1 cpu 1500m",
        "rev 53 kubelet/n1: ResizeCompleted: Pod resize completed, generation: 2",
    ]


# --- (c) a pod waiting on a ResourceClaim ------------------------------------------------------------


def _claim(name: str, owner: core_pb2.Pod) -> resource_pb2.ResourceClaim:
    c = resource_pb2.ResourceClaim()
    c.metadata.name, c.metadata.namespace = name, "default"
    c.metadata.owner_references.add(api_version="v1", kind="Pod", name=owner.metadata.name, uid=owner.metadata.uid)
    return c


def test_a_pod_waiting_on_its_resource_claim():
    p = pod(make=MakePod())
    p.spec.resource_claims.add(name="gpu", resource_claim_template_name="gpu")
    claim = _claim("p-gpu-x", p)
    named = then(p, "kube-controller-manager", at(1))
    named.status.resource_claim_statuses.add(name="gpu", resource_claim_name="p-gpu-x")
    failed = event("FailedScheduling", "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes "
                   "are available: 2 Preemption is not helpful for scheduling.", p, when=at(1))
    allocated = resource_pb2.ResourceClaim()
    allocated.CopyFrom(claim)
    allocated.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="n1", device="gpu-0")
    term = allocated.status.allocation.node_selector.node_selector_terms.add()
    term.match_fields.add(key="metadata.name", operator="In", values=["n1"])
    allocated.status.reserved_for.add(resource="pods", name="p", uid="uid-p")
    bound = then(named, "kube-scheduler", at(6))
    bound.spec.node_name = "n1"
    entries = [entry(1, p, "ADDED"), entry(2, claim, "ADDED"), entry(3, named), entry(4, failed, "ADDED"),
               entry(9, allocated), entry(10, bound)]
    records = [record(at(1, 5), "pod_unschedulable", plugins=["DynamicResources"],
                      message="0/2 nodes are available: 2 cannot allocate all claims."),
               requeued(at(5, 7), "ResourceClaimUpdate", "DynamicResources", "active", pre_queueing_hint=True)]
    assert lines(build(entries, "default", "p", records=records)) == [
        "rev 1 kplane: created: claims gpu",
        "rev 1 scheduler: queued (default-scheduler)",
        "rev 2 controller-manager: ResourceClaim p-gpu-x created for the pod",
        "rev 3 controller-manager: pod claim gpu: ResourceClaim p-gpu-x",
        # A verdict record without reasons: its only rejecting plugin gave every reason.
        "rev 4 scheduler: FailedScheduling: 0/2 nodes available: 2 cannot allocate all claims (DynamicResources); "
        "preemption: 0/2 nodes available: 2 Preemption is not helpful for scheduling",
        "rev 4 scheduler: requeued by ResourceClaimUpdate (DynamicResources QueueingHint: Queue, named by "
        "DynamicResources PreQueueingHint), unschedulable -> active",
        "rev 9 scheduler: ResourceClaim p-gpu-x allocated: dra.kplane.dev/n1/gpu-0 on n1",
        "rev 9 scheduler: ResourceClaim p-gpu-x reserved for the pod",
        "rev 10 scheduler: bound to n1",
    ]


# --- the kubelet, faults, names, errors ------------------------------------------------------------


def test_a_pod_the_kubelet_rejects_at_admission():
    p = pod(make=MakePod().req(cpu="3").node("n1"))
    rejected = then(p, "kubelet", at(1))
    rejected.status.phase, rejected.status.reason = "Failed", "OutOfcpu"
    rejected.status.message = "Pod was rejected: Node didn't have enough resource: cpu"
    story = build([entry(1, p, "ADDED"), entry(2, rejected)], "default", "p")
    assert lines(story)[-1] == ("rev 2 kubelet/n1: rejected at admission: OutOfcpu: Pod was rejected: Node didn't "
                                "have enough resource: cpu")


def test_faults_in_the_pod_s_life_on_its_node_and_the_control_plane_are_steps():
    p = pod(make=MakePod().node("n1"))
    faults = [marks.fault_event("kill", "kubelet/n1", "kubelet/n1 killed"),
              marks.fault_event("kill", "kubelet/n2", "kubelet/n2 killed"),
              marks.fault_event("failpoint", "scheduler", "scheduler failpoint before-bind=panic")]
    for i, f in enumerate(faults):
        f.metadata.name = f"kplane-fault.{i}"
    entries = [entry(1, p, "ADDED"), *(entry(2 + i, f, "ADDED") for i, f in enumerate(faults)),
               entry(9, p, "DELETED"), entry(10, marks.fault_event("kill", "scheduler", "scheduler killed"), "ADDED")]
    assert lines(build(entries, "default", "p"))[2:] == [
        "rev 2 kplane: fault: kubelet/n1 killed",
        "rev 4 kplane: fault: scheduler failpoint before-bind=panic",
        "rev 9 apiserver: deleted",
    ]


def test_pods_sharing_a_name_are_told_apart_by_uid():
    first, second = pod(uid="uid-1"), pod(uid="uid-2")
    second.metadata.creation_timestamp = at(30)
    entries = [entry(1, first, "ADDED"), entry(2, then(first, "kplane", at(20), ""), "DELETED"),
               entry(3, second, "ADDED")]
    old_record = record(at(10), "scheduling_error", error="boom")
    latest = build(entries, "default", "p", records=[old_record])
    assert (latest.uid, latest.uids, [s.rev for s in latest.steps]) == ("uid-2", ["uid-1", "uid-2"], [3, 3])
    earlier = build(entries, "default", "p", uid="uid-1", records=[old_record])
    assert lines(earlier) == ["rev 1 kplane: created", "rev 1 scheduler: queued (default-scheduler)",
                              "rev 1 scheduler: scheduling error: boom", "rev 2 kplane: deleted"]
    with pytest.raises(PodNotFound, match="with uid uid-3 not found in the history"):
        build(entries, "default", "p", uid="uid-3")
    with pytest.raises(PodNotFound, match='pods "x" not found in the history'):
        build(entries, "default", "x")


def test_fit_messages_parse_into_node_counts_per_reason():
    m = fit_message.parse("0/3 nodes are available: 1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu. "
                          "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.")
    assert m is not None and m.preemption is not None
    assert (m.filters.nodes, m.filters.reasons) == (3, [(1, "node(s) had untolerated taint {a: b}"),
                                                        (2, "Insufficient cpu")])
    assert m.preemption.reasons == [(3, "No preemption victims found for incoming pod")]
    pre_filter = fit_message.parse("0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims.")
    assert pre_filter is not None and pre_filter.filters.text == "pod has unbound immediate PersistentVolumeClaims"
    assert fit_message.parse("Pod was rejected") is None


def test_scheduler_logs_are_read_for_one_pod_only(tmp_path: Path):
    log = tmp_path / "scheduler-2.log"
    log.write_text("\n".join([
        json.dumps({"pod": "default/p", "event": "pod_requeued", "ts": at(1, 1), "cluster_event": "NodeAdd"}),
        json.dumps({"pod": "default/p2", "event": "pod_requeued", "ts": at(1, 2), "cluster_event": "NodeAdd"}),
        json.dumps({"pod": "default/p", "event": "scheduler_synced", "ts": at(1, 3)}),
        "Traceback (most recent call last): default/p",
        '{"pod": "default/p", "event": "pod_requ',
    ]))
    (tmp_path / "apiserver.log").write_text(json.dumps({"pod": "default/p", "event": "pod_requeued", "ts": at(1)}))
    got = scheduler_log.read(scheduler_log.log_files(tmp_path), "default/p")
    assert [(r.component, r.event, r.time) for r in got] == [
        ("scheduler-2", "pod_requeued", datetime.fromisoformat("2026-11-28T12:00:01.000001+00:00"))]


def test_a_saved_history_is_read_and_the_story_printed(tmp_path: Path):
    p = pod(make=MakePod().node("n1"))
    saved = tmp_path / "history.jsonl"
    saved.write_text(json.dumps({"rev": 7, "type": "ADDED", "kind": "Pod", "namespace": "default", "name": "p",
                                 "object": jsonconv.to_dict(p)}) + "\n")
    story = build(read_history(saved), "default", "p")
    out = io.StringIO()
    print_story(story, "text", out)
    assert out.getvalue() == ("pod default/p (uid uid-p)\n"
                              "rev 7  kplane  created\n"
                              "rev 7  kplane  bound to n1 by spec.nodeName (no scheduling)\n")
    out = io.StringIO()
    print_story(story, "json", out)
    assert json.loads(out.getvalue())[0] == {"rev": 7, "component": "kplane", "what": "created",
                                             "source": "history", "time": T0}
    saved.write_text('{"rev": 1, "kind": "Pod"}\n')
    with pytest.raises(ExplainError, match="line 1: not a kplane history entry"):
        list(read_history(saved))
    with pytest.raises(ExplainError, match="cannot read --history"):
        list(read_history(tmp_path / "missing.jsonl"))


def test_a_victim_preempted_twice_by_the_pod_is_two_steps():
    """The victims-in-flight race: the same Preempted event, its count bumped, is the pod
    preempting that victim again (before the victim is gone)."""
    entries, preemptor, marked = _preemption()
    again = event("Preempted", "Preempted by pod uid-p on node n1", marked, when=at(2), related=preemptor, count=2)
    deleted = next(i for i, e in enumerate(entries) if e.type == "DELETED")
    entries[deleted:deleted + 1] = [entry(25, again), entry(26, marked, "DELETED")]
    preempted = [line for line in lines(build(entries, "default", "p")) if "preempted pod" in line]
    assert preempted == ["rev 24 scheduler: preempted pod default/low on n1",
                         "rev 25 scheduler: preempted pod default/low on n1 (#2)"]
