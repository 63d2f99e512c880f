"""The controller-manager's pure parts: --controllers and the other flags, the node lifecycle
controller's zone states and taints, the taint eviction controller's toleration time, podgc's order."""

from __future__ import annotations

import argparse

import pytest

from controllers import main as cm
from controllers import options as opts
from controllers.nodelifecycle import no_execute_taints, no_schedule_taints, zone_of, zone_state
from controllers.podgc import _gc_order
from controllers.tainteviction import min_toleration_seconds
from machinery.api import core_pb2


def test_every_known_controller_is_built_by_the_registry():
    assert set(cm.REGISTRY) == set(opts.CONTROLLERS)


@pytest.mark.parametrize("spec, want", [
    ("*", set(opts.CONTROLLERS)),
    ("*,-podgc", set(opts.CONTROLLERS) - {"podgc"}),
    ("podgc", {"podgc"}),
    ("podgc,nodelifecycle", {"podgc", "nodelifecycle"}),
    ("-podgc,*", set(opts.CONTROLLERS) - {"podgc"}),
    ("", set()),
])
def test_controllers_flag_is_read_as_kube_controller_managers(spec, want):
    assert opts.enabled_controllers(spec) == want


def _parse(*argv: str) -> argparse.Namespace:
    return cm.parse_args(["--server", "s", "--token-file", "t", *argv])


@pytest.mark.parametrize("argv, message", [
    (["--controllers", "*,nope"], 'invalid --controllers: "nope" is not in the list of known controllers'),
    (["--node-monitor-grace-period", "soon"], "invalid --node-monitor-grace-period: invalid duration 'soon'"),
    (["--node-monitor-period", "0s"], "invalid --node-monitor-period '0s': must be positive"),
    (["--concurrent-gc-syncs", "0"], "invalid --concurrent-gc-syncs 0: must be at least 1"),
    (["--terminated-pod-gc-threshold", "-1"], "invalid --terminated-pod-gc-threshold -1: must not be negative"),
    (["--leader-elect-renew-deadline", "20s"], "invalid leader election flags: leader election: lease_duration "
     "(15.0s) must be greater than renew_deadline (20.0s)"),
    (["--feature-gates", "NoSuchGate=true"], "invalid --feature-gates: unrecognized feature gate: NoSuchGate"),
])
def test_a_bad_flag_is_one_line_naming_it(argv, message):
    with pytest.raises(SystemExit) as exc:
        cm.check(_parse(*argv))
    assert str(exc.value.code).startswith(message)


def test_kplane_up_refuses_a_bad_controller_manager_arg_before_starting_anything(tmp_path):
    from cli import preflight, topology

    cfg = topology.ClusterConfig(data_dir=str(tmp_path / "d"), controller_manager_args=["--controllers=*,nope"])
    with pytest.raises(preflight.PreflightError) as exc:
        preflight.check_up(cfg, timeout=60)
    assert str(exc.value).startswith('invalid --controller-manager-arg: invalid --controllers: "nope" is not in')
    assert not (tmp_path / "d").exists()


def test_defaults_are_kubernetes_defaults():
    options, election = cm.check(_parse())
    assert (options.node_monitor_period, options.node_monitor_grace_period, options.node_startup_grace_period) == \
        (5.0, 50.0, 60.0)
    assert options.terminated_pod_gc_threshold == 12500
    assert election is not None and (election.lease_duration, election.renew_deadline, election.retry_period) == \
        (15.0, 10.0, 2.0)
    assert cm.check(_parse("--leader-elect", "false"))[1] is None


# ---------------------------------------------------------------- node lifecycle


def _node(ready: str = "True", *, taints: list[tuple[str, str]] = (), unschedulable: bool = False,
          zone: str = "", **conditions: str) -> core_pb2.Node:
    n = core_pb2.Node()
    n.metadata.name = "n1"
    if zone:
        n.metadata.labels["topology.kubernetes.io/zone"] = zone
    n.spec.unschedulable = unschedulable
    for key, effect in taints:
        n.spec.taints.add(key=key, effect=effect)
    n.status.conditions.add(type="Ready", status=ready)
    for type_, status in conditions.items():
        n.status.conditions.add(type=type_, status=status)
    return n


def _keys(taints) -> set[tuple[str, str]]:
    return {(t.key, t.effect) for t in taints}


@pytest.mark.parametrize("states, want", [
    (["True", "True", "True"], "Normal"),
    (["True", "Unknown", "True"], "Normal"),
    (["False", "Unknown"], "FullDisruption"),
    (["True", "False", "False", "False"], "PartialDisruption"),  # 3 of 4 not ready: over 55 %, more than 2
    (["True", "True", "False", "False"], "Normal"),  # 2 not ready: never partial
])
def test_zone_state_is_kubernetes_compute_zone_state(states, want):
    assert zone_state(states) == want


def test_nodes_without_zone_labels_share_one_zone():
    assert zone_of(_node()) == zone_of(_node()) == ""
    assert zone_of(_node(zone="a")) != zone_of(_node(zone="b"))


def test_no_schedule_taints_follow_conditions_and_unschedulable_and_keep_others():
    node = _node("False", taints=[("dedicated", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoSchedule")],
                 unschedulable=True, DiskPressure="True")
    assert _keys(no_schedule_taints(node)) == {
        ("dedicated", "NoSchedule"), ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"), ("node.kubernetes.io/unschedulable", "NoSchedule")}
    assert _keys(no_schedule_taints(_node("Unknown"))) == {("node.kubernetes.io/unreachable", "NoSchedule")}
    assert _keys(no_schedule_taints(_node("True"))) == set()


def test_no_execute_readiness_taint_is_swapped_not_added_twice_and_keeps_its_time():
    node = _node("Unknown", taints=[("node.kubernetes.io/not-ready", "NoExecute"), ("x", "NoExecute")])
    swapped = no_execute_taints(node, "node.kubernetes.io/unreachable")
    assert _keys(swapped) == {("x", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute")}
    assert swapped[-1].time_added, "a new NoExecute taint says when it was added"
    node.spec.taints[0].time_added = "2026-01-01T00:00:00Z"
    kept = no_execute_taints(node, "node.kubernetes.io/not-ready")
    assert [t.time_added for t in kept if t.key == "node.kubernetes.io/not-ready"] == ["2026-01-01T00:00:00Z"]
    assert _keys(no_execute_taints(node, None)) == {("x", "NoExecute")}


# ---------------------------------------------------------------- taint eviction


def _taint(key: str) -> core_pb2.Taint:
    return core_pb2.Taint(key=key, effect="NoExecute")


def _tol(key: str, seconds: int | None = None, operator: str = "Exists") -> core_pb2.Toleration:
    t = core_pb2.Toleration(key=key, operator=operator, effect="NoExecute")
    if seconds is not None:
        t.toleration_seconds = seconds
    return t


def test_a_pod_that_does_not_tolerate_a_no_execute_taint_goes_at_once():
    assert min_toleration_seconds([_taint("a")], []) == 0.0
    assert min_toleration_seconds([_taint("a"), _taint("b")], [_tol("a")]) == 0.0


def test_the_smallest_toleration_seconds_of_the_tolerations_used_decides():
    taints = [_taint("node.kubernetes.io/unreachable"), _taint("other")]
    assert min_toleration_seconds(taints, [_tol("node.kubernetes.io/unreachable", 300), _tol("other", 60)]) == 60.0
    assert min_toleration_seconds([_taint("a")], [_tol("a", -5)]) == 0.0


def test_tolerations_without_seconds_tolerate_for_ever():
    assert min_toleration_seconds([_taint("a")], [_tol("a")]) is None


# ---------------------------------------------------------------- podgc


def test_podgc_deletes_evicted_pods_first_then_the_oldest():
    def pod(name: str, created: str, evicted: bool = False) -> core_pb2.Pod:
        p = core_pb2.Pod()
        p.metadata.name, p.metadata.creation_timestamp = name, created
        p.status.phase = "Failed"
        p.status.reason = "Evicted" if evicted else "Error"
        return p
    pods = [pod("new", "2026-01-03T00:00:00Z"), pod("old", "2026-01-01T00:00:00Z"),
            pod("evicted", "2026-01-05T00:00:00Z", evicted=True), pod("a-old", "2026-01-01T00:00:00Z")]
    assert [p.metadata.name for p in sorted(pods, key=_gc_order)] == ["evicted", "a-old", "old", "new"]
