"""``kplane up``'s checks before it starts anything (cli/preflight.py), and the one line it prints when
a component fails to start anyway (cli/cluster.py ``last_error_line``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli import preflight, topology
from cli.cluster import last_error_line
from machinery.version import Version

BAD_ARGS = ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
            "- pluginConfig:\n  - name: NodeResourcesFit\n    args: {scoringStrategyy: {type: MostAllocated}}\n")


def refused(cfg: topology.ClusterConfig, timeout: float = 60.0) -> str:
    with pytest.raises(preflight.PreflightError) as info:
        preflight.check_up(cfg, timeout)
    return str(info.value)


def test_a_good_configuration_passes(tmp_path):
    good = tmp_path / "sched.yaml"
    good.write_text("percentageOfNodesToScore: 50\nprofiles:\n- pluginConfig:\n  - name: NodeResourcesFit\n"
                    "    args: {scoringStrategy: {type: MostAllocated}}\n")
    preflight.check_up(topology.ClusterConfig(data_dir=str(tmp_path / "d"), hollow_nodes=2, scheduler_config=str(good),
                                              feature_gates="SchedulerAsyncPreemption=false", kube_reserved="cpu=100m",
                                              scheduler_args=["--leader-elect-lease-duration=4s"],
                                              kubelet_args=["--sync-frequency=1"],
                                              apiserver_args=["--watch-cache-size=100"]), 60.0)
    assert not (tmp_path / "d").exists()


def test_a_version_reaches_every_component_and_their_own_args_override_it():
    cfg = topology.ClusterConfig(version="1.35", nodes=1, kubelet_args=["--emulated-version=1.33"],
                                 ports={n: 1 for n in topology.port_names(topology.ClusterConfig(nodes=1))})
    preflight.check_up(cfg, 60.0)
    seen = {}
    for comp in topology.build(cfg, "local"):
        flags = [a for i, a in enumerate(comp.argv)
                 if a.startswith("--emulated-version") or comp.argv[i - 1] == "--emulated-version"]
        if flags:
            seen[comp.role] = flags
    assert seen == {"apiserver": ["--emulated-version", "1.35"], "scheduler": ["--emulated-version", "1.35"],
                    "controller-manager": ["--emulated-version", "1.35"],
                    "kubelet": ["--emulated-version", "1.35", "--emulated-version=1.33"]}


@pytest.mark.parametrize("overrides,message", [
    ({"kubelet_args": ["--emulated-version=1.33"]},
     "kubelet/node-1: the kubelet version 1.33 is more than 3 minor versions older than the apiserver's 1.37"),
    ({"version": "1.35", "kubelet_args": ["--emulated-version=1.36"]},
     "kubelet/node-1: the kubelet version 1.36 is newer than the apiserver's 1.35"),
    ({"apiserver_args": ["--emulated-version=1.36"]},
     "scheduler: the kube-scheduler version 1.37 is newer than the apiserver's 1.36"),
    ({"controller_manager_args": ["--emulated-version=1.35"], "schedulers": 0},
     "controller-manager: the kube-controller-manager version 1.35 is more than 1 minor version older than the "
     "apiserver's 1.37"),
])
def test_releases_outside_the_version_skew_policy_are_refused_unless_told(overrides, message):
    cfg = topology.ClusterConfig(nodes=1, **overrides)
    assert refused(cfg).startswith(message) and refused(cfg).endswith("(--ignore-version-skew runs it anyway)")
    preflight.check_up(cfg, 60.0, ignore_version_skew=True)


@pytest.mark.parametrize("overrides", [
    {"version": "1.35", "kubelet_args": ["--emulated-version=1.32"]},  # three minors older: allowed
    {"version": "1.36", "scheduler_args": ["--emulated-version=1.35"]},  # one minor older: allowed
    {"kubelet_args": ["--emulated-version=1.34"]},
])
def test_releases_the_version_skew_policy_allows_pass(overrides):
    preflight.check_up(topology.ClusterConfig(nodes=1, **overrides), 60.0)


def test_a_node_added_beside_the_apiservers_is_held_to_the_policy_too():
    cfg = topology.ClusterConfig(version="1.36", nodes=1)
    old = topology.NodeSpec("old", "4", "8Gi", 110, kubelet_args=["--emulated-version=1.33"])
    preflight.check_node(cfg, old)
    new = topology.NodeSpec("new", "4", "8Gi", 110, kubelet_args=["--emulated-version=1.37"])
    with pytest.raises(preflight.PreflightError, match="^kubelet/new: the kubelet version 1.37 is newer than the "
                                                       "apiserver's 1.36"):
        preflight.check_node(cfg, new)
    preflight.check_node(cfg, new, ignore_version_skew=True)


def test_unknown_feature_gate():
    assert refused(topology.ClusterConfig(feature_gates="NoSuchGate=true")) == \
        "invalid --feature-gates 'NoSuchGate=true': unrecognized feature gate: NoSuchGate"


def test_scheduler_config_with_a_misspelled_plugin_arg(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_ARGS)
    assert refused(topology.ClusterConfig(scheduler_config=str(bad))) == (
        f'invalid --scheduler-config {bad}: profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field '
        f'"scoringStrategyy"')


@pytest.mark.parametrize("overrides,message", [
    ({"nodes": -1}, "invalid --nodes -1: must be 0 or more"),
    ({"node_cpu": "abc"}, "invalid --node-cpu 'abc': quantities must match"),
    ({"node_pods": 0}, "invalid --node-pods 0: must be 1 or more"),
    ({"etcd_members": 2}, "invalid --etcd-members 2: must be 1, 3 or 5"),
    ({"kube_reserved": "cpu"}, "invalid --kube-reserved 'cpu': want key=value"),
    ({"scheduler_args": ["--bogus"]}, "invalid --scheduler-arg: unrecognized arguments: --bogus"),
    ({"scheduler_args": ["--leader-elect-lease-duration=soon"]},
     'invalid --scheduler-arg: invalid scheduler configuration: --leader-elect-lease-duration: Invalid value: "soon"'),
    ({"kubelet_args": ["--sync-frequency=often"]},
     "invalid --kubelet-arg: argument --sync-frequency: invalid float value: 'often'"),
    ({"nodes": 0, "hollow_nodes": 1, "kubelet_args": ["--eviction-hard=memory.available>1Gi"]},
     "invalid --kubelet-arg: invalid eviction configuration"),
    ({"scheduler_args": ["--emulated-version=1.30"]},
     "invalid --scheduler-arg: invalid --emulated-version: emulation version 1.30 is not between [1.32, 1.37]"),
    ({"feature_gates": "SchedulerPreemptionForPodResize=true", "scheduler_args": ["--emulated-version=1.36"]},
     "invalid --scheduler-arg: invalid --feature-gates: cannot set feature gate SchedulerPreemptionForPodResize to "
     "true, feature is PreAlpha at emulated version 1.36, min compatibility version 1.35"),
    ({"kubelet_args": ["--emulated-version=1.38"]},
     "invalid --kubelet-arg: invalid --emulated-version: emulation version 1.38 is not between [1.32, 1.37]"),
    ({"apiserver_args": ["--emulated-version=one"]},
     "invalid --apiserver-arg: invalid --emulated-version: could not parse 'one' as version"),
    ({"version": "1.31"}, "invalid --version 1.31: emulation version 1.31 is not between [1.32, 1.37]"),
    ({"version": "1.36", "feature_gates": "SchedulerPreQueueingHints=false"},
     "invalid --feature-gates 'SchedulerPreQueueingHints=false': cannot set feature gate SchedulerPreQueueingHints "
     "to false, feature is PreAlpha at emulated version 1.36"),
    ({"apiserver_args": ["--watch-cache-size=big"]},
     "invalid --apiserver-arg: argument --watch-cache-size: invalid int value: 'big'"),
])
def test_bad_values_name_their_flag(overrides, message):
    assert refused(topology.ClusterConfig(**overrides)).startswith(message)


def test_a_bad_config_given_to_the_scheduler_through_scheduler_arg(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_ARGS)
    assert refused(topology.ClusterConfig(scheduler_args=[f"--config={bad}"])) == (
        'invalid --scheduler-arg: invalid scheduler configuration: profiles[0].pluginConfig[0].args.scoringStrategyy: '
        'unknown field "scoringStrategyy"')


def test_bad_timeout():
    assert refused(topology.ClusterConfig(), timeout=0) == "invalid --timeout 0: must be greater than 0"


# ---------------------------------------------------------------- a component that fails anyway


def _log(tmp_path, *lines: str) -> str:
    path = tmp_path / "c.log"
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def test_last_error_line_is_the_components_own_message(tmp_path):
    start = json.dumps({"event": "kplane_start", "component": "scheduler"})
    # A SystemExit: its message is the last line.
    assert last_error_line(_log(tmp_path, "earlier run's line", start, "invalid scheduler configuration: x")) == \
        "invalid scheduler configuration: x"
    # A traceback: its final line, not the frames.
    assert last_error_line(_log(tmp_path, start, "Traceback (most recent call last):", '  File "m.py", line 1',
                                "    boom()", "RuntimeError: boom")) == "RuntimeError: boom"
    # A JSON error line, then a clean stop logged at info level.
    failed = json.dumps({"level": "error", "event": "start_failed", "error": "OSError: address already in use",
                         "exception": "Traceback ..."})
    stopped = json.dumps({"level": "info", "event": "stopped", "exit_code": 1})
    assert last_error_line(_log(tmp_path, start, failed, stopped)) == "start_failed: OSError: address already in use"
    # Nothing since this start.
    assert last_error_line(_log(tmp_path, "old failure", start)) == "no output"


def test_a_restart_flag_replaces_every_earlier_spelling_of_it():
    argv = ["python", "-m", "scheduler", "--emulated-version", "1.37", "--x", "--emulated-version=1.36", "--y"]
    assert preflight.with_flag(argv, "--emulated-version", "1.35") == [
        "python", "-m", "scheduler", "--x", "--y", "--emulated-version", "1.35"]
    assert preflight.emulated_version(preflight.with_flag(argv, "--emulated-version", "1.35")) == Version(1, 35)


def test_apiservers_more_than_one_minor_apart_are_refused():
    cfg = topology.ClusterConfig(nodes=0, apiservers=2, version="1.36", schedulers=0, controller_managers=0)
    running = [c for c in topology.build(dataclasses.replace(cfg, ports={n: 1 for n in topology.port_names(cfg)}))
               if c.role == "apiserver"]
    preflight.check_restart(running, "apiserver-2", preflight.with_flag(running[1].argv, "--emulated-version", "1.35"))
    with pytest.raises(preflight.PreflightError, match="^apiservers: the apiserver versions 1.34 and 1.36 are more "
                                                       "than 1 minor version apart"):
        preflight.check_restart(running, "apiserver-2",
                                preflight.with_flag(running[1].argv, "--emulated-version", "1.34"))


def test_a_node_added_is_held_to_the_apiservers_as_they_run_not_as_planned():
    """An apiserver downgraded in place (kplane restart --emulated-version) counts at its new release."""
    cfg = topology.ClusterConfig(nodes=1)
    planned = topology.build(dataclasses.replace(cfg, ports={n: 1 for n in topology.port_names(cfg)}))
    running = [dataclasses.replace(c, argv=preflight.with_flag(c.argv, "--emulated-version", "1.36"))
               if c.role == "apiserver" else c for c in planned]
    new = topology.NodeSpec("new", "4", "8Gi", 110)  # a 1.37 kubelet
    preflight.check_node(cfg, new)
    with pytest.raises(preflight.PreflightError, match="^kubelet/new: the kubelet version 1.37 is newer than the "
                                                       "apiserver's 1.36"):
        preflight.check_node(cfg, new, running=running)
