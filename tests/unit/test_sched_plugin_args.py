"""Plugin args decoded strictly, as kube-scheduler decodes ``pluginConfig[i].args``: into each plugin's
typed ``<Plugin>Args`` with the v1 defaults (kube-scheduler's apis/config/v1 defaults.go), an unknown
field refused with its full path, a bad value refused with validation_pluginargs.go's wording, and
args for a plugin that takes none refused too. The configurations go through ``scheduler.config``
with the real in-tree registry, as ``python -m scheduler --config`` reads them."""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from machinery.featuregates import FeatureGates
from machinery.version import Version
from scheduler import config
from scheduler.framework.features import Features
from scheduler.framework.interfaces import Services
from scheduler.framework.plugin_args import ArgsError, ResourceSpec
from scheduler.framework.runtime import new_handle
from scheduler.framework.types import ActionType
from scheduler.plugins import (
    default_preemption,
    default_registry,
    inter_pod_affinity,
    node_affinity,
    node_resources_balanced_allocation,
    node_resources_fit,
    pod_topology_spread,
)
from scheduler.plugins.node_resources_fit import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringStrategy,
    UtilizationShapePoint,
)

REGISTRY = default_registry()


def parse(plugin: str, args) -> object:
    """The typed args of ``plugin`` after parsing a one-profile configuration that sets them."""
    cfg = config.parse({"profiles": [{"pluginConfig": [{"name": plugin, "args": args}]}]}, REGISTRY)
    return cfg.profiles[0].plugins.args[plugin]


def refused(plugin: str, args) -> str:
    with pytest.raises(config.ConfigError) as info:
        parse(plugin, args)
    return str(info.value)


# ---------------------------------------------------------------- defaults


def test_every_enabled_plugin_with_args_gets_kube_schedulers_v1_defaults():
    """defaults.go appends default args for each enabled plugin that has an args type."""
    args = config.parse({}, REGISTRY).profiles[0].plugins.args
    assert args == {
        "NodeResourcesFit": NodeResourcesFitArgs(
            ignored_resources=(), ignored_resource_groups=(),
            scoring_strategy=ScoringStrategy("LeastAllocated", (ResourceSpec("cpu", 1), ResourceSpec("memory", 1)))),
        "NodeResourcesBalancedAllocation": node_resources_balanced_allocation.NodeResourcesBalancedAllocationArgs(
            (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))),
        "PodTopologySpread": pod_topology_spread.PodTopologySpreadArgs((), "System"),
        "InterPodAffinity": inter_pod_affinity.InterPodAffinityArgs(1, False),
        "NodeAffinity": node_affinity.NodeAffinityArgs(None),
        "DefaultPreemption": default_preemption.DefaultPreemptionArgs(10, 100),
    }


def test_a_disabled_plugin_gets_no_default_args():
    cfg = config.parse({"profiles": [{"plugins": {"multiPoint": {"disabled": [{"name": "InterPodAffinity"}]}}}]},
                       REGISTRY)
    assert "InterPodAffinity" not in cfg.profiles[0].plugins.args


# ---------------------------------------------------------------- unknown fields, with their full path


@pytest.mark.parametrize("plugin,args,path", [
    ("NodeResourcesFit", {"scoringStrategyy": {"type": "MostAllocated"}}, "scoringStrategyy"),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "wieght": 2}]}},
     "scoringStrategy.resources[0].wieght"),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 0, "scale": 1}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].scale"),
    ("NodeResourcesBalancedAllocation", {"resource": [{"name": "cpu"}]}, "resource"),
    ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "maxskew": 2}]},
     "defaultConstraints[0].maxskew"),
    ("InterPodAffinity", {"hardPodAffinityWieght": 5}, "hardPodAffinityWieght"),
    ("NodeAffinity", {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpression": []}]}}},
     "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpression"),
    ("DefaultPreemption", {"minCandidateNodesPercent": 5}, "minCandidateNodesPercent"),
])
def test_an_unknown_field_is_refused_with_its_full_path(plugin, args, path):
    field = path.rsplit(".", 1)[-1]
    assert refused(plugin, args) == f'profiles[0].pluginConfig[0].args.{path}: unknown field "{field}"'


def test_the_unknown_field_names_its_profile_and_plugin_config_entry():
    doc = {"profiles": [{"schedulerName": "a"},
                        {"schedulerName": "b", "pluginConfig": [
                            {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 2}},
                            {"name": "NodeResourcesFit", "args": {"scoringStrategyy": {}}}]}]}
    with pytest.raises(config.ConfigError) as info:
        config.parse(doc, REGISTRY)
    assert str(info.value) == 'profiles[1].pluginConfig[1].args.scoringStrategyy: unknown field "scoringStrategyy"'


# ---------------------------------------------------------------- bad values, in Kubernetes' wording


@pytest.mark.parametrize("plugin,args,message", [
    ("NodeResourcesFit", {"scoringStrategy": {"type": "Random"}},
     'scoringStrategy.type: Unsupported value: "Random": supported values: "LeastAllocated", "MostAllocated", '
     '"RequestedToCapacityRatio"'),
    ("NodeResourcesFit", {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 2}]}},
     'scoringStrategy.type: Unsupported value: "": supported values: "LeastAllocated", "MostAllocated", '
     '"RequestedToCapacityRatio"'),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "LeastAllocated",
                                              "resources": [{"name": "memory", "weight": 101}]}},
     "scoringStrategy.resources[0].weight: Invalid value: 101: resource weight of memory not in valid range (0, 100]"),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated", "requestedToCapacityRatio": {"shape": []}}},
     "scoringStrategy.requestedToCapacityRatio: Forbidden: must be nil when type is not RequestedToCapacityRatio"),
    ("NodeResourcesFit", {"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
        "shape": [{"utilization": 0, "score": 11}]}}},
     "scoringStrategy.requestedToCapacityRatio.shape[0].score: Invalid value: 11: not in valid range [0, 10]"),
    ("NodeResourcesFit", {"ignoredResourceGroups": ["example.com/gpu"]},
     "ignoredResourceGroups[0]: Invalid value: \"example.com/gpu\": resource group name can't contain '/'"),
    ("NodeResourcesFit", {"ignoredResources": "example.com/gpu"},
     "ignoredResources: Invalid value: 'example.com/gpu': must be a list"),
    ("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu", "weight": 3}]},
     "resources[0].weight: Invalid value: 3: must be 1"),
    ("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ("PodTopologySpread", {"defaultingType": "Cluster"},
     'defaultingType: Unsupported value: "Cluster": supported values: "List", "System"'),
    ("InterPodAffinity", {"hardPodAffinityWeight": 101},
     "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
    ("InterPodAffinity", {"ignorePreferredTermsOfExistingPods": "yes"},
     "ignorePreferredTermsOfExistingPods: Invalid value: 'yes': must be a boolean"),
    ("NodeAffinity", {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "a", "operator": "Near", "values": ["b"]}]}}]}},
     'addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].operator: '
     'Unsupported value: "Near"'),
    ("DefaultPreemption", {"minCandidateNodesPercentage": 101},
     "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"),
    ("DefaultPreemption", {"minCandidateNodesAbsolute": -1},
     "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
    ("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
     "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
    ("DefaultPreemption", {"minCandidateNodesAbsolute": 2**31},
     "minCandidateNodesAbsolute: Invalid value: 2147483648: must be a 32-bit integer"),
    ("DefaultPreemption", {"minCandidateNodesPercentage": "10%"},
     "minCandidateNodesPercentage: Invalid value: '10%': must be an integer"),
])
def test_a_bad_value_is_refused_with_its_path_and_kubernetes_wording(plugin, args, message):
    assert refused(plugin, args).startswith(f"profiles[0].pluginConfig[0].args.{message}")


def test_args_for_a_plugin_without_an_args_type_are_refused():
    assert refused("NodeName", {"nodeName": "n1"}) == \
        'profiles[0].pluginConfig[0].args: Forbidden: plugin "NodeName" takes no args'
    assert parse("NodeName", {}) is None  # nothing given: nothing to refuse


def test_type_meta_must_name_the_plugins_own_args_kind():
    assert refused("InterPodAffinity", {"kind": "NodeAffinityArgs"}) == (
        'profiles[0].pluginConfig[0].args.kind: Invalid value: "NodeAffinityArgs": args for plugin '
        'InterPodAffinity must be of kind InterPodAffinityArgs')
    assert refused("InterPodAffinity", {"apiVersion": "kubescheduler.config.k8s.io/v1beta3"}).startswith(
        'profiles[0].pluginConfig[0].args.apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v1beta3"')
    assert parse("InterPodAffinity", {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "InterPodAffinityArgs",
                                      "hardPodAffinityWeight": 7}).hard_pod_affinity_weight == 7


# ---------------------------------------------------------------- good configurations, decoded


def test_node_resources_fit_args_decoded_with_defaults_filled_in():
    # A strategy given without resources gets cpu and memory; a weight left out or 0 becomes 1.
    assert parse("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated"}}) == NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy("MostAllocated", (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))))
    got = parse("NodeResourcesFit", {
        "ignoredResources": ["example.com/foo"], "ignoredResourceGroups": ["example.com"],
        "scoringStrategy": {"type": "RequestedToCapacityRatio",
                            "resources": [{"name": "cpu", "weight": 3}, {"name": "intel.com/foo", "weight": 0}],
                            "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                                   {"utilization": 100}]}}})
    assert got == NodeResourcesFitArgs(
        ("example.com/foo",), ("example.com",),
        ScoringStrategy("RequestedToCapacityRatio", (ResourceSpec("cpu", 3), ResourceSpec("intel.com/foo", 1)),
                        RequestedToCapacityRatioParam((UtilizationShapePoint(0, 10), UtilizationShapePoint(100, 0)))))


def test_the_configured_strategy_is_the_one_the_plugin_scores_with():
    """The reliability issue: a typo once left LeastAllocated in place; the spelled field is used."""
    args = parse("NodeResourcesFit", {"scoringStrategy": {"type": "MostAllocated"}})
    assert node_resources_fit.new(args, new_handle()).scorer.strategy == "MostAllocated"


def test_other_plugins_args_decoded():
    assert parse("NodeResourcesBalancedAllocation", {"resources": [{"name": "cpu"}, {"name": "example.com/gpu"}]}) == \
        node_resources_balanced_allocation.NodeResourcesBalancedAllocationArgs(
            (ResourceSpec("cpu", 1), ResourceSpec("example.com/gpu", 1)))
    spread = parse("PodTopologySpread", {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway"}]})
    assert spread == pod_topology_spread.PodTopologySpreadArgs(
        (core_pb2.TopologySpreadConstraint(max_skew=2, topology_key="topology.kubernetes.io/zone",
                                           when_unsatisfiable="ScheduleAnyway"),), "List")
    assert parse("InterPodAffinity", {"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": True}) == \
        inter_pod_affinity.InterPodAffinityArgs(0, True)
    added = parse("NodeAffinity", {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}}})
    terms = added.added_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert [(e.key, e.operator, list(e.values)) for e in terms[0].match_expressions] == [("zone", "In", ["a"])]
    assert parse("DefaultPreemption", {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 5}) == \
        default_preemption.DefaultPreemptionArgs(0, 5)


def test_the_args_are_frozen():
    args = parse("InterPodAffinity", {"hardPodAffinityWeight": 5})
    with pytest.raises(AttributeError):
        args.hard_pod_affinity_weight = 6


def test_a_factory_refuses_another_plugins_args():
    with pytest.raises(ArgsError, match="want args of type InterPodAffinityArgs for plugin InterPodAffinity, "
                                        "got DefaultPreemptionArgs"):
        inter_pod_affinity.new(default_preemption.DefaultPreemptionArgs(), new_handle())


# ---------------------------------------------------------------- feature gates reach plugins as Features


def test_feature_gates_reach_plugins_through_the_handle_not_their_args():
    # (InPlacePodVerticalScaling is locked on from 1.35: a 1.34 scheduler may turn it off.)
    features = Features.from_gates(FeatureGates.parse("SchedulerAsyncPreemption=false,InPlacePodVerticalScaling=false",
                                                      Version(1, 34)))
    assert features == Features(enable_in_place_pod_vertical_scaling=False, enable_async_preemption=False)
    handle = new_handle(Services(features=features))
    assert default_preemption.new(None, handle).async_preemption is False
    assert default_preemption.new(None, new_handle()).async_preemption is True
    fit_events = node_resources_fit.new(None, handle).events_to_register()
    assert not any(e.event.action & ActionType.UPDATE_POD_SCALE_DOWN for e in fit_events)
    fit_events = node_resources_fit.new(None, new_handle()).events_to_register()
    assert any(e.event.action & ActionType.UPDATE_POD_SCALE_DOWN for e in fit_events)
