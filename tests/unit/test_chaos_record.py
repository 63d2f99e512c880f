"""kplane record: a history's user operations and fault marks become a schedule's steps, paced by
the objects' own times; what the components did is left out (docs/chaos.md, "Record, replay,
diff")."""

from __future__ import annotations

import pytest
import yaml

from cli.chaos import historyfile, marks, schedule
from cli.chaos.record import NothingToRecord, record
from cli.main import main
from machinery.api import core_pb2
from tests.unit.fakes_chaos_history import (
    T0,
    History,
    at,
    bound,
    deleting,
    deployment,
    fault,
    managed,
    marked,
    node,
    owned_pod,
    resized,
    user_pod,
)


def _ops(s: schedule.Schedule) -> list[tuple[str, float]]:
    return [(step.op, step.after) for step in s.steps]


def _workload() -> History:
    """Two nodes; a user's pod created, bound, resized, deleted; a ReplicaSet's pod; a kill."""
    h = History()
    h.write("ADDED", node("node-1"))
    h.write("ADDED", node("node-2"))
    web = h.write("ADDED", user_pod("web", created=at(10)))
    web = h.write("MODIFIED", bound(web, "node-1", at(11)))
    h.write("ADDED", owned_pod("rs-abcde", "rs", created=at(12)))
    web = h.write("MODIFIED", resized(web, "800m", at(15)))
    h.write("ADDED", fault("kill", "scheduler", at(20)))
    h.write("MODIFIED", deleting(web, at(25), grace=5))
    h.write("DELETED", web)
    return h


def test_user_create_resize_delete_and_a_fault_become_steps_paced_by_their_times():
    s = record(_workload().entries)
    assert _ops(s) == [("apply", 0.0), ("resize", 5.0), ("kill", 5.0), ("delete", 5.0)]
    apply, resize, kill, delete = s.steps
    assert apply.args == {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "c1", "image": "registry.k8s.io/pause:3.10",
                                                   "resources": {"requests": {"cpu": "500m"}}}],
                                   "terminationGracePeriodSeconds": 30}}
    assert resize.args == {"pod": "web", "container": "c1", "cpu": "800m"}
    assert kill.args == "scheduler"
    assert delete.args == {"kind": "Pod", "name": "web", "grace_period": 5}
    assert s.cluster == {"nodes": 2, "node_cpu": "4", "node_memory": "8Gi"}


def test_the_manifest_keeps_no_server_set_field_and_no_binding_the_user_did_not_write():
    apply = record(_workload().entries).steps[0].args
    text = yaml.safe_dump(apply)
    for server_set in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "status",
                       "nodeName", "priority"):
        assert server_set not in text


def test_a_node_name_the_user_wrote_is_kept():
    h = History()
    pod = user_pod("pinned")
    pod.spec.node_name = "node-2"
    fields = {"f:spec": {"f:nodeName": {}, "f:containers": {'k:{"name":"c1"}': {".": {}, "f:name": {}}}}}
    managed(pod, "kubectl-client-side-apply", T0, fields)
    h.write("ADDED", pod)
    assert record(h.entries).steps[0].args["spec"]["nodeName"] == "node-2"


def test_the_schedule_round_trips_through_parse():
    s = record(_workload().entries)
    again = schedule.parse(yaml.safe_load(s.dump()))
    assert [x.to_dict() for x in again.steps] == [x.to_dict() for x in s.steps]
    assert again.cluster == s.cluster


def test_controllers_scheduler_and_kubelet_writes_are_not_recorded():
    h = History()
    rs_pod = h.write("ADDED", owned_pod("rs-abcde", "rs"))
    rs_pod = h.write("MODIFIED", bound(rs_pod, "node-1", at(1)))
    h.write("MODIFIED", deleting(rs_pod, at(2), grace=30))
    victim = h.write("ADDED", user_pod("low", created=at(3)))
    victim = h.write("MODIFIED", bound(victim, "node-1", at(4)))
    victim = h.write("MODIFIED", marked(victim, "PreemptionByScheduler", at(5)))
    h.write("MODIFIED", deleting(victim, at(5), grace=30))
    assert _ops(record(h.entries)) == [("apply", 0.0)]  # only the user's pod creation


def test_an_eviction_is_an_evict_step_and_its_deletion_is_not_recorded_again():
    h = History()
    pod = h.write("ADDED", user_pod("web"))
    pod = h.write("MODIFIED", bound(pod, "node-1", at(1)))
    pod = h.write("MODIFIED", marked(pod, "EvictionByEvictionAPI", at(7)))
    pod = h.write("MODIFIED", deleting(pod, at(7), grace=30))
    h.write("DELETED", pod)
    s = record(h.entries)
    assert _ops(s) == [("apply", 0.0), ("evict", 7.0)]
    assert s.steps[1].args == {"pod": "web"}


def test_an_unbound_pod_deleted_at_once_is_a_delete_without_grace_period():
    h = History()
    pod = h.write("ADDED", user_pod("pending"))
    h.write("DELETED", pod)
    assert record(h.entries).steps[1].args == {"kind": "Pod", "name": "pending"}


def test_a_deployment_scaled_is_a_scale_step_and_a_template_change_an_apply():
    h = History()
    d = h.write("ADDED", deployment("web", 2))
    d.spec.replicas = 3
    managed(d, "kplane", at(4), {"f:spec": {"f:replicas": {}}}, "scale")
    d = h.write("MODIFIED", d)
    d.status.replicas = 3  # the controller's status: nothing to record
    d = h.write("MODIFIED", d)
    d.spec.template.spec.containers[0].image = "nginx:2"
    managed(d, "kplane", at(9), {"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {
            'k:{"name":"c1"}': {".": {}, "f:name": {}, "f:image": {}}}}}}})
    h.write("MODIFIED", d)
    s = record(h.entries)
    assert _ops(s) == [("apply", 0.0), ("scale", 4.0), ("apply", 5.0)]
    assert s.steps[1].args == {"kind": "Deployment", "name": "web", "replicas": 3}
    assert s.steps[2].args["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"


def test_fault_marks_become_their_steps_with_their_arguments():
    h = History()
    h.write("ADDED", fault("failpoint", "scheduler", T0, {"name": "before-bind", "action": "sleep(200)"}))
    h.write("ADDED", fault("restart", "kubelet/node-1", at(3)))
    h.write("ADDED", fault("delay-watch", "apiserver", at(4), {"ms": 500}))
    s = record(h.entries)
    assert [x.to_dict() for x in s.steps] == [
        {"failpoint": {"component": "scheduler", "name": "before-bind", "action": "sleep(200)"}},
        {"after": 3.0, "restart": "kubelet/node-1"},
        {"after": 1.0, "delay-watch": {"component": "apiserver", "ms": 500}},
    ]


def test_fault_message_round_trips_and_refuses_words_it_cannot_read_back():
    ev = marks.fault_event("failpoint", "kubelet/node-1",
                           marks.fault_message("failpoint", "kubelet/node-1", {"name": "x", "action": "panic"}))
    assert ev.message == "kubelet/node-1 failpoint name=x action=panic"
    assert marks.parse_fault_message(ev) == ("failpoint", {"component": "kubelet/node-1", "name": "x",
                                                          "action": "panic"})
    assert marks.fault_component(ev) == "kubelet/node-1"
    with pytest.raises(ValueError):
        marks.fault_message("failpoint", "scheduler", {"name": "x"})
    with pytest.raises(ValueError):
        marks.fault_message("kill", "two words")


def test_node_cordon_and_a_node_added_later_are_recorded():
    h = History()
    n1 = h.write("ADDED", node("node-1"))
    h.write("ADDED", user_pod("web", created=at(1)))
    n1.spec.unschedulable = True
    managed(n1, "kplane", at(2), {"f:spec": {"f:unschedulable": {}}})
    h.write("MODIFIED", n1)
    big = node("big", created=at(6), cpu="16")
    big.metadata.labels["zone"] = "b"
    registered = core_pb2.Node()
    registered.CopyFrom(big)
    registered.status.Clear()  # the kubelet reports the capacity after it registered
    h.write("ADDED", registered)
    h.write("MODIFIED", big)
    s = record(h.entries)
    assert [x.to_dict() for x in s.steps[1:]] == [
        {"after": 1.0, "cordon": "node-1"},
        {"after": 4.0, "node-add": {"name": "big", "cpu": "16", "memory": "8Gi", "pods": 110,
                                     "labels": {"zone": "b"}}},
    ]


def test_since_and_until_choose_the_revisions_recorded():
    h = _workload()
    resize_rev = next(e.rev for e in h.entries if e.type == "MODIFIED" and e.obj.metadata.generation == 2)
    s = record(h.entries, since=resize_rev, until=resize_rev + 1)
    assert _ops(s) == [("resize", 0.0), ("kill", 5.0)]


def test_nothing_to_record_is_refused():
    h = History()
    h.write("ADDED", node("node-1"))
    with pytest.raises(NothingToRecord, match="nothing to record since revision 0"):
        record(h.entries)


def test_a_saved_history_reads_back(tmp_path):
    h = _workload()
    entries = historyfile.read(h.save(tmp_path / "h.jsonl"))
    assert [(e.rev, e.type, e.kind, e.name) for e in entries] == [(e.rev, e.type, e.kind, e.name) for e in h.entries]
    assert entries[2].obj == h.entries[2].obj


def test_kplane_record_writes_the_schedule_from_a_saved_history(tmp_path, capsys):
    path = _workload().save(tmp_path / "h.jsonl")
    out = tmp_path / "s.yaml"
    assert main(["record", "--history", str(path), "-o", str(out)]) == 0
    assert "recorded 4 steps (1 apply, 1 resize, 1 kill, 1 delete)" in capsys.readouterr().out
    assert [s.op for s in schedule.load(out).steps] == ["apply", "resize", "kill", "delete"]


@pytest.mark.parametrize("args, message", [
    (["--since", "100"], "error: nothing to record since revision 100"),
    (["--since", "5", "--until", "2"], "error: --since must be >= 0 and --until >= --since"),
])
def test_kplane_record_refuses_with_one_line_and_writes_nothing(tmp_path, capsys, args, message):
    path = _workload().save(tmp_path / "h.jsonl")
    out = tmp_path / "s.yaml"
    assert main(["record", "--history", str(path), "-o", str(out), *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not out.exists()


def test_kplane_record_names_the_bad_line_of_a_history_file(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    path.write_text('{"rev": 1, "type": "ADDED", "kind": "Pod", "name": "a", "object": {}}\nnot json\n')
    assert main(["record", "--history", str(path), "-o", str(tmp_path / "s.yaml")]) == 1
    assert capsys.readouterr().err.startswith(f"error: {path}:2: not JSON")
