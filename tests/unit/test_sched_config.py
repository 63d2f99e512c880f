"""KubeSchedulerConfiguration: kube-scheduler's defaults, merging, multiPoint expansion and errors."""

from __future__ import annotations

import pytest

from scheduler import config
from scheduler.framework.interfaces import Services
from scheduler.framework.runtime import Framework, FrameworkError


class _Plugin:
    def __init__(self, *methods: str):
        for m in methods:
            setattr(self, m, lambda *a, **k: None)


# What each default plugin implements (enough for the expansion).
IMPLEMENTS = {
    "SchedulingGates": ("pre_enqueue",), "PrioritySort": ("less",), "NodeUnschedulable": ("filter",),
    "NodeName": ("filter",), "TaintToleration": ("filter", "pre_score", "score"),
    "NodeAffinity": ("pre_filter", "filter", "pre_score", "score"), "NodePorts": ("pre_filter", "filter"),
    "NodeResourcesFit": ("pre_filter", "filter", "pre_score", "score"),
    "PodTopologySpread": ("pre_filter", "filter", "pre_score", "score"),
    "InterPodAffinity": ("pre_filter", "filter", "pre_score", "score"),
    "DynamicResources": ("pre_filter", "filter", "reserve", "unreserve", "pre_bind"),
    "DefaultPreemption": ("post_filter",),
    "NodeResourcesBalancedAllocation": ("pre_score", "score"), "DefaultBinder": ("bind",),
    "Custom": ("filter", "score"),
}
REGISTRY = {name: (lambda methods: (lambda args, h: _Plugin(*methods)))(m) for name, m in IMPLEMENTS.items()}


def framework(doc: dict) -> Framework:
    cfg = config.parse(doc, REGISTRY)
    return Framework(cfg.profiles[0].scheduler_name, cfg.profiles[0].plugins, REGISTRY, Services())


def test_default_profile_is_kube_schedulers():
    fw = framework({})
    assert fw.points["filter"] == ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts",
                                   "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity", "DynamicResources"]
    assert fw.points["reserve"] == fw.points["preBind"] == ["DynamicResources"]
    assert fw.points["score"] == ["TaintToleration", "NodeAffinity", "NodeResourcesFit", "PodTopologySpread",
                                  "InterPodAffinity", "NodeResourcesBalancedAllocation"]
    assert fw.weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
                          "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1}
    assert fw.points["postFilter"] == ["DefaultPreemption"] and fw.points["bind"] == ["DefaultBinder"]
    assert fw.points["preEnqueue"] == ["SchedulingGates"] and fw.points["queueSort"] == ["PrioritySort"]


def test_disabling_at_one_point_and_enabling_first_there():
    fw = framework({"profiles": [{"schedulerName": "default-scheduler", "plugins": {
        "score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                  "enabled": [{"name": "Custom", "weight": 5}]},
        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "NodeResourcesFit"}]}}}]})
    assert fw.points["score"][0] == "Custom" and "NodeResourcesBalancedAllocation" not in fw.points["score"]
    assert fw.weights["Custom"] == 5
    assert fw.points["filter"] == ["NodeResourcesFit"]
    assert "NodeAffinity" in fw.points["preFilter"], "disabling filter leaves other points alone"


def test_multipoint_overrides_a_default_weight_and_disables_plugins_everywhere():
    fw = framework({"profiles": [{"plugins": {"multiPoint": {
        "enabled": [{"name": "NodeResourcesFit", "weight": 7}], "disabled": [{"name": "InterPodAffinity"}]}}}]})
    assert fw.weights["NodeResourcesFit"] == 7
    assert all("InterPodAffinity" not in names for names in fw.points.values())


def test_plugin_args_and_several_profiles():
    cfg = config.parse({"percentageOfNodesToScore": 30, "podInitialBackoffSeconds": 2, "podMaxBackoffSeconds": 20,
                        "profiles": [{"schedulerName": "default-scheduler"},
                                     {"schedulerName": "bin-packer", "percentageOfNodesToScore": 100,
                                      "pluginConfig": [{"name": "NodeResourcesFit", "args": {
                                          "scoringStrategy": {"type": "MostAllocated"}}}]}]}, REGISTRY)
    assert [p.scheduler_name for p in cfg.profiles] == ["default-scheduler", "bin-packer"]
    assert cfg.profiles[1].plugins.args["NodeResourcesFit"].scoring_strategy.type == "MostAllocated"
    assert cfg.profiles[1].percentage_of_nodes_to_score == 100 and cfg.percentage_of_nodes_to_score == 30
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (2, 20)


def test_leader_election_durations():
    cfg = config.parse({"leaderElection": {"leaseDuration": "4s", "renewDeadline": "3s", "retryPeriod": "500ms"}},
                       REGISTRY)
    le = cfg.leader_election
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (4, 3, 0.5) and le.leader_elect


@pytest.mark.parametrize("doc,fragment", [
    ({"kind": "Other"}, 'apiVersion/kind: want'),
    ({"colour": "red"}, 'colour: unknown field "colour"'),
    ({"percentageOfNodesToScore": 101}, "percentageOfNodesToScore: Invalid value: 101"),
    ({"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 1}, "podMaxBackoffSeconds"),
    ({"profiles": [{"schedulerName": "a"}, {"schedulerName": "a"}]}, 'profiles[1].schedulerName: Duplicate value'),
    ({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "Nope"}]}}}]}, 'unknown plugin "Nope"'),
    ({"profiles": [{"plugins": {"fliter": {}}}]}, 'profiles[0].plugins.fliter: unknown field'),
    ({"profiles": [{"pluginConfig": [{"name": "Ghost", "args": {}}]}]}, 'unknown plugin "Ghost"'),
    ({"leaderElection": {"leaseDuration": "soon"}}, "leaderElection.leaseDuration"),
])
def test_bad_configurations_name_the_field(doc, fragment):
    with pytest.raises(config.ConfigError) as exc:
        config.parse(doc, REGISTRY)
    assert fragment in str(exc.value)


def test_a_profile_without_a_binder_or_queue_sort_cannot_run():
    with pytest.raises(FrameworkError, match="bind plugin"):
        framework({"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "DefaultBinder"}]}}}]})
    with pytest.raises(FrameworkError, match="queueSort"):
        framework({"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "PrioritySort"}]}}}]})


def test_a_plugin_enabled_where_it_cannot_serve_is_refused():
    with pytest.raises(FrameworkError, match='"DefaultBinder" does not extend filter'):
        framework({"profiles": [{"plugins": {"filter": {"enabled": [{"name": "DefaultBinder"}]}}}]})


def test_load_reports_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(str(tmp_path / "missing.yaml"), REGISTRY)
    bad = tmp_path / "bad.yaml"
    bad.write_text("profiles: [\n")
    with pytest.raises(config.ConfigError, match="not valid YAML"):
        config.load(str(bad), REGISTRY)
