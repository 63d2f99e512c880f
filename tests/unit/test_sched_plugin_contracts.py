"""Plugin contracts a type checker can see (kube-scheduler's framework/interface.go: one interface
per extension point; here one ``runtime_checkable`` Protocol each, in scheduler/framework/interfaces.py).

- Every public method of an in-tree plugin is a method some contract names, or one of the
  QueueingHints and PreQueueingHints its ``events_to_register`` hands the queue: nothing public is
  there by accident.
- A misspelt method is never skipped silently: at an explicit extension point the plugin "does
  not extend" it; in multiPoint the framework refuses the plugin, naming it and the method.
- Plugin args are decoded strictly: an unknown field is an error naming its path.
"""

from __future__ import annotations

import inspect
from types import MethodType
from typing import Any

import pytest

from scheduler import config
from scheduler import plugins as intree
from scheduler.framework.interfaces import (
    POINT_PROTOCOLS,
    BatchScorePlugin,
    BindPlugin,
    Closer,
    EnqueueExtensions,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    Services,
)
from scheduler.framework.runtime import Framework, FrameworkError, PluginSets, new_handle
from scheduler.framework.types import NODE, ActionType, ClusterEvent, ClusterEventWithHint, QueueingHint
from scheduler.plugins.default_preemption import DefaultPreemption
from scheduler.preemption.evaluator import PreemptionPlugin

# The extension points' contracts, as interface.go lists them, Closer (a plugin with work of its own in
# flight) and BatchScorePlugin (kplane's: Score of every node in one call).
EXTENSION_POINT_CONTRACTS = (PreEnqueuePlugin, QueueSortPlugin, EnqueueExtensions, PreFilterPlugin,
                             PreFilterExtensions, FilterPlugin, PostFilterPlugin, PreScorePlugin, ScorePlugin,
                             ScoreExtensions, BatchScorePlugin, ReservePlugin, PermitPlugin, PreBindPlugin, BindPlugin,
                             PostBindPlugin, Closer)

# Contracts beyond the extension points, by plugin. Only one: DefaultPreemption supplies the
# preemption evaluator's policy (kube-scheduler's preemption.Interface: OffsetAndNumCandidates,
# PodEligibleToPreemptOthers, SelectVictimsOnNode), and names that Protocol as its base class so
# the framework's multiPoint check knows those methods too.
OTHER_CONTRACTS: dict[str, tuple[type, ...]] = {"DefaultPreemption": (PreemptionPlugin,)}


def _methods(contract: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(contract, inspect.isfunction) if not name.startswith("_")}


def _public_methods(plugin: object) -> set[str]:
    return {name for name, _ in inspect.getmembers(type(plugin), callable) if not name.startswith("_")}


def _registered_hints(plugin: object, *, pre: bool = False) -> set[str]:
    """The plugin's own methods that its events_to_register gives as QueueingHints (``pre``: as
    PreQueueingHints, KEP-6132)."""
    if not isinstance(plugin, EnqueueExtensions):
        return set()
    fns = [ev.pre_queueing_hint if pre else ev.hint for ev in plugin.events_to_register()]
    return {fn.__func__.__name__ for fn in fns if isinstance(fn, MethodType) and fn.__self__ is plugin}


def _in_tree_plugins() -> list[tuple[str, object]]:
    return [(name, factory(None, new_handle())) for name, factory in intree.default_registry().items()]


def test_extension_points_are_kube_schedulers_configuration_names():
    assert list(POINT_PROTOCOLS) == ["preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore",
                                     "score", "reserve", "permit", "preBind", "bind", "postBind"]
    assert set(POINT_PROTOCOLS.values()) <= set(EXTENSION_POINT_CONTRACTS)


@pytest.mark.parametrize(("name", "plugin"), _in_tree_plugins(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_public_method_of_an_in_tree_plugin_is_named_by_a_contract(name, plugin):
    named = set().union(*map(_methods, EXTENSION_POINT_CONTRACTS + OTHER_CONTRACTS.get(name, ())))
    strays = _public_methods(plugin) - named - _registered_hints(plugin) - _registered_hints(plugin, pre=True)
    assert not strays, f"{name}: {sorted(strays)} named by no contract (make them private, or name the contract)"
    assert set(OTHER_CONTRACTS.get(name, ())) <= set(type(plugin).__mro__), f"{name}: name the contract as a base"


def test_the_hints_are_what_events_to_register_returns():
    # Each plugin's QueueingHints are its is_schedulable_after_* methods, and it registers all of them.
    for name, plugin in _in_tree_plugins():
        hints = {m for m in _public_methods(plugin) if m.startswith("is_schedulable_after_")}
        assert hints == _registered_hints(plugin), name
        # Their PreQueueingHints (KEP-6132) are the pre_queueing_hint_* methods, every one registered.
        pre_hints = {m for m in _public_methods(plugin) if m.startswith("pre_queueing_hint_")}
        assert pre_hints == _registered_hints(plugin, pre=True), name


def test_default_preemption_names_the_evaluators_contract():
    assert PreemptionPlugin in DefaultPreemption.__mro__
    assert _methods(PreemptionPlugin) == {"offset_and_num_candidates", "pod_eligible_to_preempt_others",
                                          "select_victims_on_node"}


def test_the_default_profile_builds_with_every_in_tree_plugin_in_multipoint():
    registry = intree.default_registry()
    profile = config.default_config(registry).profiles[0]
    fw = Framework(profile.scheduler_name, profile.plugins, registry, Services())
    assert fw.points["preFilter"] == ["NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity",
                                      "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                                      "DynamicResources"]
    assert fw.points["postFilter"] == ["DefaultPreemption"]
    assert fw.points["reserve"] == fw.points["preBind"] == ["DynamicResources"]


# ------------------------------------------------------------ misspellings are never skipped silently


class _Fifo:
    def less(self, a, b) -> bool:
        return False

    async def bind(self, state, pod, node_name):
        return None


class _Misspelt:
    """Means to be a Filter plugin."""

    def filtr(self, state, pod, node_info):
        return None


class _ReservesOnly:
    """Half of the Reserve contract: without unreserve it is no Reserve plugin."""

    def reserve(self, state, pod, node_name):
        return None


class _NormalizesWithoutScore:
    def filter(self, state, pod, node_info):
        return None

    def normalize_score(self, state, pod, node_names, scores):
        return None


class _WithHint:
    """A Filter plugin with its QueueingHint, and a helper it forgot to make private."""

    def filter(self, state, pod, node_info):
        return None

    def events_to_register(self):
        return [ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD), self.is_schedulable_after_node_add)]

    def is_schedulable_after_node_add(self, pod, old, new) -> QueueingHint:
        return QueueingHint.QUEUE


class _WithStrayHelper(_WithHint):
    def fits(self, pod, node_info) -> bool:
        return True


def _build(plugin: Any, sets: PluginSets) -> Framework:
    registry = {"Fifo": lambda args, h: _Fifo(), "Custom": lambda args, h: plugin}
    return Framework("default-scheduler", sets, registry, Services())


def test_a_misspelt_method_at_an_explicit_extension_point_is_an_error_naming_the_plugin():
    sets = PluginSets(points={"queueSort": ["Fifo"], "bind": ["Fifo"], "filter": ["Custom"]})
    with pytest.raises(FrameworkError, match='profile "default-scheduler": plugin "Custom" does not extend filter'):
        _build(_Misspelt(), sets)


@pytest.mark.parametrize(("plugin", "method"), [
    (_Misspelt(), "filtr"),
    (_ReservesOnly(), "reserve"),
    (_NormalizesWithoutScore(), "normalize_score"),
    (_WithStrayHelper(), "fits"),
])
def test_a_multipoint_method_no_extension_point_names_is_an_error_naming_plugin_and_method(plugin, method):
    with pytest.raises(FrameworkError) as err:
        _build(plugin, PluginSets(multi_point=["Fifo", "Custom"]))
    assert str(err.value) == (f'profile "default-scheduler": multiPoint plugin "Custom" has method "{method}", '
                              f'which no extension point it implements names')


def test_a_multipoint_plugin_may_have_the_hints_it_registers():
    fw = _build(_WithHint(), PluginSets(multi_point=["Fifo", "Custom"]))
    assert fw.points["filter"] == ["Custom"]
    assert [ev.event for ev in fw.events_to_register()["Custom"]] == [ClusterEvent(NODE, ActionType.ADD)]


def test_a_misspelt_multipoint_plugin_from_the_configuration_is_refused():
    registry = {**intree.default_registry(), "Custom": lambda args, h: _Misspelt()}
    profile = config.parse({"profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "Custom"}]}}}]},
                           registry).profiles[0]
    with pytest.raises(FrameworkError, match='multiPoint plugin "Custom" has method "filtr"'):
        Framework(profile.scheduler_name, profile.plugins, registry, Services())


# ------------------------------------------------------------ args are decoded strictly


def test_an_unknown_plugin_arg_is_an_error_naming_its_path():
    doc = {"profiles": [{"pluginConfig": [
        {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 10}},
        {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated", "resourcez": []}}},
    ]}]}
    with pytest.raises(config.ConfigError) as err:
        config.parse(doc, intree.default_registry())
    assert str(err.value) == 'profiles[0].pluginConfig[1].args.scoringStrategy.resourcez: unknown field "resourcez"'
