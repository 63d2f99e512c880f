"""The schedule file format (cli/chaos/schedule.py): what parses, what round-trips, and the one
line a bad file gets."""

from __future__ import annotations

import pytest

from cli.chaos import schedule
from cli.chaos.converge import pod_resize_state
from tests.harness import builders


def test_a_schedule_round_trips_through_its_yaml():
    doc = {"name": "x", "cluster": {"nodes": 2, "node_cpu": "2"},
           "steps": [{"apply": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}}},
                     {"after": 0.5, "resize": {"pod": "a", "cpu": "1500m"}},
                     {"kill": "scheduler"},
                     {"failpoint": {"component": "scheduler", "name": "scheduler/before-bind", "action": "pause"}},
                     {"wait": {"for": "running", "pods": ["a"], "timeout": 30}}],
           "expect": [{"pod": "a", "phase": "Running"}]}
    s = schedule.parse(doc)
    assert [x.op for x in s.steps] == ["apply", "resize", "kill", "failpoint", "wait"]
    assert s.steps[1].after == 0.5 and s.steps[2].arg("component") == "scheduler"
    assert s.steps[1].kind == "user" and s.steps[2].kind == "fault" and s.steps[4].kind == "wait"
    again = schedule.parse(__import__("yaml").safe_load(s.dump()))
    assert again.to_dict() == s.to_dict()
    assert s.steps[1].describe() == "resize pod=a cpu=1500m"


@pytest.mark.parametrize("steps,message", [
    ([{"kil": "x"}], "step 1: unknown operation 'kil'"),
    ([{"kill": "x", "start": "x"}], "step 1: want exactly one operation"),
    ([{"after": -1, "kill": "x"}], "step 1: after must be a number of seconds >= 0"),
    ([{"resize": {"pod": "a"}}], "step 1 (resize): nothing to resize"),
    ([{"resize": {"pod": "a", "cpu": "lots"}}], "step 1 (resize): invalid cpu 'lots'"),
    ([{"scale": {"kind": "deployment", "name": "d", "replicas": -2}}], "step 1 (scale): replicas must be"),
    ([{"wait": {"for": "godot"}}], "step 1 (wait): cannot wait for 'godot'"),
    ([{"failpoint": {"component": "scheduler"}}], "step 1 (failpoint): missing action, name"),
    ([{"evict": {"pod": "a", "grace": 3}}], "step 1 (evict): unknown argument grace"),
    ([{"apply": {"kind": "Pod"}}], "step 1 (apply): want a manifest"),
    ([{"corrupt-checkpoint": {"node": "node-1", "file": "both"}}], "step 1 (corrupt-checkpoint): file must be one of"),
    ([{"corrupt-checkpoint": {"file": "allocated"}}], "step 1 (corrupt-checkpoint): missing node"),
    ([{"exit": {"pod": "a", "code": -1}}], "step 1 (exit): code must be a whole number >= 0"),
    ([{"wait": {"for": "failpoint-paused", "count": 1.5}}], "step 1 (wait): count must be a whole number"),
])
def test_a_bad_step_is_refused_with_one_line_naming_it(steps, message):
    with pytest.raises(schedule.ScheduleError) as exc:
        schedule.parse({"steps": steps})
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)


def test_unknown_cluster_settings_and_expectations_are_refused():
    with pytest.raises(schedule.ScheduleError, match="unknown cluster setting nodez"):
        schedule.parse({"steps": [], "cluster": {"nodez": 2}})
    with pytest.raises(schedule.ScheduleError, match="expect 1: unknown key colour"):
        schedule.parse({"steps": [], "expect": [{"pod": "a", "colour": "red"}]})


def test_load_names_the_file_and_line_of_bad_yaml(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("steps: [\n")
    with pytest.raises(schedule.ScheduleError, match="s.yaml: line"):
        schedule.load(p)
    with pytest.raises(schedule.ScheduleError, match="cannot read"):
        schedule.load(tmp_path / "absent.yaml")


def test_resize_state_reads_spec_allocated_actual_and_conditions():
    pod = builders.MakePod().name("p").req(cpu="1").obj()
    cs = pod.status.container_statuses.add(name=pod.spec.containers[0].name)
    cs.allocated_resources["cpu"] = "1"
    cs.resources.requests["cpu"] = "1"
    assert pod_resize_state(pod) == "done"
    pod.spec.containers[0].resources.requests["cpu"] = "2"
    assert pod_resize_state(pod) == "undecided"
    cs.allocated_resources["cpu"] = "2"
    assert pod_resize_state(pod) == "InProgress"  # allocated, not actuated
    pod.status.conditions.add(type="PodResizePending", status="True", reason="Deferred")
    assert pod_resize_state(pod) == "Deferred"


def _ready(node):
    node.status.conditions.add(type="Ready", status="True")
    return node


def _unschedulable(pod):
    pod.status.conditions.add(type="PodScheduled", status="False", reason="Unschedulable")
    return pod


def test_a_pending_pod_beside_room_it_fits_is_a_lost_wake_up():
    from cli.chaos.converge import _fits_somewhere, _pod_unsettled, _room
    nodes = [_ready(builders.MakeNode().name("node-1").allocatable(cpu="2", memory="4Gi", pods="10").obj()),
             _ready(builders.MakeNode().name("node-2").allocatable(cpu="2", memory="4Gi", pods="10").obj())]
    on1 = builders.MakePod().name("a").req(cpu="1500m").obj()
    on1.spec.node_name = "node-1"
    nominated = builders.MakePod().name("n").req(cpu="1500m").obj()
    nominated.status.nominated_node_name = "node-2"
    waiting = _unschedulable(builders.MakePod().name("w").req(cpu="1").obj())
    pods = [on1, nominated, waiting]
    assert _pod_unsettled(waiting, {"node-1", "node-2"}) == ""  # the scheduler has said Unschedulable
    assert _fits_somewhere(waiting, _room(nodes, pods)) == ""  # node-1 holds 1.5, node-2 is promised
    nominated.status.nominated_node_name = ""
    assert _fits_somewhere(waiting, _room(nodes, pods)) == "node-2"  # nothing promised there now
    nodes[1].spec.unschedulable = True
    nominated.status.nominated_node_name = "node-2"
    assert _fits_somewhere(waiting, _room(nodes, pods)) == ""
    no_verdict = builders.MakePod().name("x").req(cpu="1").obj()
    assert _pod_unsettled(no_verdict, {"node-1"}) == "pod default/x is pending without the scheduler's verdict"


def _rs_of(d, name, uid, template, replicas, available):
    rs = builders.MakeReplicaSet().name(name).replicas(replicas).obj()
    rs.metadata.uid = uid
    rs.metadata.owner_references.add(kind="Deployment", name=d.metadata.name, uid=d.metadata.uid, controller=True)
    rs.spec.template.CopyFrom(template)
    rs.status.replicas = replicas
    rs.status.available_replicas = available
    return rs


def test_a_rollout_held_by_a_pod_the_scheduler_cannot_place_is_settled():
    """The chaos run that found this: web-18, replicas 3, maxSurge 25% (1) and maxUnavailable 25%
    (0), "2 updated of 3 (4 in all)" — a new pod pending Unschedulable on a full cluster. The
    controller may not add a fifth pod nor take an old one away, as Kubernetes' would not."""
    from cli.chaos.converge import rollout_blocked
    d = builders.MakeDeployment().name("web").replicas(3).rolling_update("25%", "25%").req(cpu="1").obj()
    d.metadata.uid = "d1"
    old_template = builders.MakeDeployment().name("web").req(cpu="2").obj().spec.template
    new = _rs_of(d, "web-new", "rs-new", d.spec.template, 2, 1)
    old = _rs_of(d, "web-old", "rs-old", old_template, 2, 2)
    pending = _unschedulable(builders.MakePod().name("web-new-x").owner("ReplicaSet", "web-new", "rs-new").obj())
    running = builders.MakePod().name("web-new-y").owner("ReplicaSet", "web-new", "rs-new").node("node-1").obj()
    assert rollout_blocked(d, [new, old], [pending, running])
    # placed, the rollout can move on: nothing holds it
    assert not rollout_blocked(d, [new, old], [running])
    # with room to surge the controller would add a pod: not settled
    d.spec.strategy.rolling_update.max_surge = "2"
    assert not rollout_blocked(d, [new, old], [pending, running])
    d.spec.strategy.rolling_update.max_surge = "25%"
    # an old ReplicaSet with more available than minAvailable needs would shrink: not settled
    d.spec.strategy.rolling_update.max_unavailable = "2"
    assert not rollout_blocked(d, [new, old], [pending, running])
    # another Deployment's pending pod does not hold this one
    d.spec.strategy.rolling_update.max_unavailable = "25%"
    stranger = _unschedulable(builders.MakePod().name("z").owner("ReplicaSet", "other", "rs-other").obj())
    assert not rollout_blocked(d, [new, old], [stranger, running])


def test_the_steps_the_race_catalogue_added_parse():
    s = schedule.parse({"steps": [
        {"exit": "job"},
        {"exit": {"pod": "web", "container": "c", "code": 1}},
        {"corrupt-checkpoint": {"node": "node-1"}},
        {"corrupt-checkpoint": {"node": "node-1", "file": "actuated"}},
        {"wait": {"for": "exited", "component": "kubelet/node-1"}},
        {"wait": {"for": "nominated", "pod": "p", "node": "node-2"}},
        {"wait": {"for": "restarted", "pods": ["a", "b"]}},
        {"wait": {"for": "failpoint-paused", "component": "scheduler", "name": "x", "count": 2}}],
        "expect": [{"pod": "a", "restarts": 0, "actual": {"cpu": "1"}}]})
    assert [x.op for x in s.steps[:4]] == ["exit", "exit", "corrupt-checkpoint", "corrupt-checkpoint"]
    assert s.steps[0].arg("pod") == "job" and all(x.kind == "fault" for x in s.steps[:4])
    assert s.steps[3].describe() == "corrupt-checkpoint node=node-1 file=actuated"


def test_a_relative_scheduler_config_is_read_beside_the_schedule(tmp_path):
    (tmp_path / "conf").mkdir()
    p = tmp_path / "s.yaml"
    p.write_text("cluster: {scheduler_config: conf/sched.yaml}\nsteps: []\n")
    assert schedule.load(p).cluster["scheduler_config"] == str(tmp_path / "conf" / "sched.yaml")
    p.write_text("cluster: {scheduler_config: /etc/sched.yaml}\nsteps: []\n")
    assert schedule.load(p).cluster["scheduler_config"] == "/etc/sched.yaml"


class _Pods:
    def __init__(self, *pods):
        self._pods = {p.metadata.name: p for p in pods}

    async def get(self, name, namespace):
        from machinery import errors
        if name not in self._pods:
            raise errors.NotFound(f"pods {name} not found")
        return self._pods[name]

    async def list(self, namespace):
        from machinery.api import core_pb2
        return core_pb2.PodList(items=list(self._pods.values()))


class _Client:
    def __init__(self, *pods):
        self.pods = _Pods(*pods)


async def test_expect_reads_restarts_actual_requests_and_an_event_that_must_not_happen():
    from cli.chaos import expect
    pod = builders.MakePod().name("p").req(cpu="1").obj()
    cs = pod.status.container_statuses.add(name=pod.spec.containers[0].name, restart_count=1)
    cs.allocated_resources["cpu"] = "1"
    cs.resources.requests["cpu"] = "2"
    client = _Client(pod)
    assert await expect.unmet(client, [{"pod": "p", "restarts": 1, "requests": {"cpu": "1"},
                                        "actual": {"cpu": "2"}}], [], 0) == []
    unmet = await expect.unmet(client, [{"pod": "p", "restarts": 0, "actual": {"cpu": "1"}},
                                        {"event": "OutOfcpu", "max": 0}], [], 0)
    assert unmet == ["expect 1: pod p runs with {'cpu': '2'}, want {'cpu': '1'}",
                     "expect 1: pod p's container restarted 1 time(s), want 0"]


def test_unnominated_waits_for_a_nomination_to_go():
    from cli.chaos.schedule import Step
    from cli.chaos.steps import _pod_is
    pod = builders.MakePod().name("p").obj()
    pod.status.nominated_node_name = "node-2"
    from_node_2 = Step("wait", {"for": "unnominated", "pod": "p", "node": "node-2"})
    from_any = Step("wait", {"for": "unnominated", "pod": "p"})
    assert not _pod_is("unnominated", pod, from_node_2) and not _pod_is("unnominated", pod, from_any)
    pod.status.nominated_node_name = "node-1"
    assert _pod_is("unnominated", pod, from_node_2) and not _pod_is("unnominated", pod, from_any)
    pod.status.nominated_node_name = ""
    assert _pod_is("unnominated", pod, from_node_2) and _pod_is("unnominated", pod, from_any)
    schedule.parse({"steps": [{"wait": {"for": "unnominated", "pod": "p", "node": "node-2"}}]})


async def test_expect_counts_the_pods_of_a_set_that_are_gone_and_running():
    from cli.chaos import expect
    running = builders.MakePod().name("low-1").obj()
    running.status.phase = "Running"
    pending = builders.MakePod().name("low-2").obj()
    client = _Client(running, pending)
    names = ["low-0", "low-1", "low-2", "low-3"]
    assert await expect.unmet(client, [{"pods": names, "gone": 2, "running": 1}], [], 0) == []
    assert await expect.unmet(client, [{"pods": names, "gone": 3, "running": 2}], [], 0) == [
        "expect 1: 2 of 4 pods gone (low-0, low-3), want 3",
        "expect 1: 1 of 4 pods Running (low-1), want 2"]
