"""KEP-5836: Scheduler Preemption for In-Place Pod Resize, piece by piece: the gate and its upstream
alias, what a deferred resize pod is ("Identify Deferred Status"), the kubelet's view of other pods
("Risk of Additional Preemption"), the UpdatePodScaleUp event, NodeName's PreFilter ("Node
Restriction via the PreFilter Phase"), the plugins that answer Skip ("All other plugins ... return
Skip for Deferred pods"), NodeResourcesFit's deferred fit and node-aware hints ("Calculating
Resource Fit in the Filter Phase", "Failures and Reconsideration of Deferred pods") and
DefaultPreemption's ``deferredResizeNomination`` ("Tracking Preemption Nominations to Avoid Double
Preemption")."""

from __future__ import annotations

import pytest

from machinery import resources, timeutil
from machinery.api import core_pb2
from machinery.featuregates import FeatureGateError, FeatureGates
from scheduler import config
from scheduler.cache.snapshot import Snapshot
from scheduler.framework import deferred_resize as dr
from scheduler.framework.features import Features
from scheduler.framework.interfaces import Services
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.plugin_args import ArgsError
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.runtime import new_handle
from scheduler.framework.types import (
    ASSIGNED_POD,
    ActionType,
    Code,
    CycleState,
    PreFilterResult,
    QueueingHint,
    pod_scheduling_property_changes,
)
from scheduler.plugins import (
    default_preemption,
    default_registry,
    inter_pod_affinity,
    node_affinity,
    node_name,
    node_ports,
    node_resources_fit,
    node_unschedulable,
    pod_topology_spread,
    taint_toleration,
)
from tests.harness.builders import MakeNode, MakePod

ON = Features(enable_scheduler_preemption_for_pod_resize=True)
OFF = Features(enable_scheduler_preemption_for_pod_resize=False)
GATE = "SchedulerPreemptionForPodResize"
ALIAS = "InPlacePodVerticalScalingSchedulerPreemption"


# ---------------------------------------------------------------- builders


def running(name: str, node: str = "n1", *, desired: str = "1", allocated: str | None = None,
            actual: str | None = None, priority: int = 0) -> core_pb2.Pod:
    """A pod running on ``node`` with KEP-1287's three states of its one container's cpu: desired
    (the spec), allocated and actual (what its kubelet reports; both default to the one before)."""
    allocated = allocated or desired
    return (MakePod().name(name).uid(f"uid-{name}").generation(1).priority(priority)
            .scheduler_name("default-scheduler").node(node).req(cpu=desired).phase("Running")
            .allocated(cpu=allocated).actual(cpu=actual or allocated).obj())


def deferred(p: core_pb2.Pod) -> core_pb2.Pod:
    """What the kubelet reports when the resize does not fit the node now."""
    p.status.conditions.add(type="PodResizePending", status="True", reason="Deferred")
    return p


def node_info(n: core_pb2.Node, *pods: core_pb2.Pod) -> NodeInfo:
    ni = NodeInfo(n)
    for p in pods:
        ni.add_pod(p)
    return ni


def fit(accounting: str = "AllPodsAtMax", features: Features = ON) -> node_resources_fit.NodeResourcesFit:
    return node_resources_fit.new({"deferredResizeAccounting": accounting}, new_handle(Services(features=features)))


def run_filter(plugin, pod: core_pb2.Pod, ni: NodeInfo):
    state = CycleState()
    plugin.pre_filter(state, pod, [ni])
    return plugin.filter(state, pod, ni)


def verdict(status) -> tuple[Code, list[str]] | None:
    return None if status is None else (status.code, status.reasons)


INSUFFICIENT_CPU = (Code.UNSCHEDULABLE, ["Insufficient cpu"])


# ---------------------------------------------------------------- the gate and its alias


def test_the_upstream_name_enables_the_kep_gate():
    gates = FeatureGates.parse(f"{ALIAS}=true")
    assert gates.enabled(GATE) and gates.enabled(ALIAS)
    assert Features.from_gates(gates).enable_scheduler_preemption_for_pod_resize
    assert not FeatureGates.parse("").enabled(ALIAS)  # alpha: off by default, under either name


def test_both_names_with_the_same_value_are_fine():
    assert FeatureGates.parse(f"{GATE}=true,{ALIAS}=true").enabled(GATE)
    assert not FeatureGates.parse(f"{ALIAS}=false,{GATE}=false").enabled(GATE)


def test_both_names_with_different_values_are_refused_naming_both():
    with pytest.raises(FeatureGateError) as info:
        FeatureGates.parse(f"{GATE}=true,{ALIAS}=false")
    assert f"{GATE}=true" in str(info.value) and f"{ALIAS}=false" in str(info.value)


def test_an_unknown_name_still_fails():
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: InPlacePodVerticalScalingPreemption"):
        FeatureGates.parse("InPlacePodVerticalScalingPreemption=true")


# ---------------------------------------------------------------- what a deferred resize pod is


def test_a_deferred_resize_pod_is_bound_with_pod_resize_pending_true_deferred():
    assert dr.is_deferred_resize(deferred(running("a", desired="3", allocated="1")))
    unbound = deferred(MakePod().name("pending").req(cpu="1").obj())
    assert not dr.is_deferred_resize(unbound)
    infeasible = running("b", desired="3", allocated="1")
    infeasible.status.conditions.add(type="PodResizePending", status="True", reason="Infeasible")
    assert not dr.is_deferred_resize(infeasible)
    cleared = running("c", desired="3", allocated="1")
    cleared.status.conditions.add(type="PodResizePending", status="False", reason="Deferred")
    assert not dr.is_deferred_resize(cleared)
    assert not dr.is_deferred_resize(running("d"))


def test_a_deferred_condition_about_an_older_generation_is_still_the_pods_deferred_resize():
    """Resized again (the generation moved on) and not judged by the kubelet yet: still a deferred
    resize, as upstream's IsPodResizeDeferred reads the reason alone; the cycle judges the new
    request (KEP-5836 "Failures and Reconsideration", issue 25 item 10)."""
    pod = deferred(running("a", desired="3", allocated="1"))
    pod.metadata.generation = 3
    pod.status.conditions[-1].observed_generation = 2
    assert dr.is_deferred_resize(pod)
    pod.status.conditions[-1].observed_generation = 3
    assert dr.is_deferred_resize(pod)
    pod.status.conditions[-1].observed_generation = 0  # a kubelet that does not say: taken as current
    assert dr.is_deferred_resize(pod)


def test_pod_resize_preemption_disabled_condition():
    p = deferred(running("a", desired="3", allocated="1"))
    assert not dr.preemption_disabled_by_condition(p)
    p.status.conditions.add(type="PodResizePreemptionDisabled", status="True", reason="PreemptionDisabledByNodePolicy")
    assert dr.preemption_disabled_by_condition(p)
    p.status.conditions[-1].status = "False"
    assert not dr.preemption_disabled_by_condition(p)


@pytest.mark.parametrize("kubelet,disable,disabled", [
    ("v1.35.0", ("example.com/batch",), True),  # too old to tell its pods: the scheduler reads the node
    ("v1.36.2", ("example.com/batch",), True),  # the last release before KEP-5836's gate came in
    ("v1.37.0", ("example.com/batch",), False),  # it sets PodResizePreemptionDisabled itself
    ("not-a-version", ("example.com/batch",), False),  # unparsable counts as new
    ("v1.35.0", (), False),  # an empty list disables nothing
])
def test_version_skew_the_node_policy_counts_only_for_kubelets_before_1_37(kubelet, disable, disabled):
    assert dr.node_disables_resize_preemption(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                                              .kubelet_version(kubelet)
                                              .disable_resize_preemption(*disable).obj()) is disabled


@pytest.mark.parametrize("kubelet,declared,disabled", [
    ("v1.37.0", ["InPlacePodVerticalScaling"], True),  # the gate's release, gate off: propagates nothing
    ("v1.37.0", ["InPlacePodVerticalScaling", "SchedulerPreemptionForPodResize"], False),  # it propagates
    ("v1.35.0", ["SchedulerPreemptionForPodResize"], False),  # what it declares wins over its version
    ("v1.37.0", [], False),  # declares nothing: by version
])
def test_the_node_policy_fallback_goes_by_what_the_kubelet_declares(kubelet, declared, disabled):
    """KEP-5328 Node Declared Features: a kubelet that declares features is taken at its word."""
    node = (MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version(kubelet)
            .disable_resize_preemption("autoscaler-a").obj())
    node.status.declared_features.extend(declared)
    assert dr.node_disables_resize_preemption(node) is disabled


def test_no_node_disables_nothing():
    assert not dr.node_disables_resize_preemption(None)


def test_a_resize_request_is_the_pods_uid_and_generation():
    p = running("a")
    p.metadata.generation = 3
    assert dr.resize_request(p) == "uid-a/3"


# ---------------------------------------------------------------- the kubelet's view of a pod


def test_ignore_desired_counts_what_the_kubelet_holds_not_the_spec():
    """"Risk of Additional Preemption": the kubelet counts another pod at max(allocated, actual)."""
    p = deferred(running("a", desired="3", allocated="1", actual="1"))
    assert resources.pod_requests(p, ignore_desired=True) == {"cpu": 1000}
    assert resources.pod_requests(p) == {"cpu": 3000}


# ---------------------------------------------------------------- UpdatePodScaleUp


def _changes(old: core_pb2.Pod, new: core_pb2.Pod) -> list[ActionType]:
    events = pod_scheduling_property_changes(new, old, lambda p: PodInfo(p).requests)
    assert {e.resource for e in events} == {ASSIGNED_POD}
    return [e.action for e in events]


def _bumped(p: core_pb2.Pod) -> core_pb2.Pod:
    out = core_pb2.Pod()
    out.CopyFrom(p)
    out.metadata.resource_version = str(int(p.metadata.resource_version or "1") + 1)
    return out


def test_a_desired_upsize_is_a_scale_up():
    old = running("a", desired="1")
    new = _bumped(old)
    new.spec.containers[0].resources.requests["cpu"] = "3"
    assert _changes(old, new) == [ActionType.UPDATE_POD_SCALE_UP]


def test_the_kubelet_allocating_more_is_a_scale_up():
    """The spec asked for 3 already; the kubelet now allocates them ("Reconsideration Race Conditions")."""
    old = deferred(running("a", desired="3", allocated="1"))
    new = _bumped(old)
    new.status.container_statuses[0].allocated_resources["cpu"] = "3"
    assert _changes(old, new) == [ActionType.UPDATE_POD_SCALE_UP]


def test_an_actuated_downsize_is_a_scale_down_only():
    old = running("a", desired="2")
    new = running("a", desired="1")
    new.metadata.resource_version = "2"
    assert _changes(old, new) == [ActionType.UPDATE_POD_SCALE_DOWN]


def test_a_status_only_write_is_a_generic_update_only():
    old = running("a", desired="2")
    new = _bumped(old)
    new.status.conditions.add(type="Ready", status="True")
    assert _changes(old, new) == [ActionType.UPDATE_OTHER]


# ---------------------------------------------------------------- NodeName's PreFilter


def test_node_name_pre_filter_keeps_only_the_node_the_pod_names():
    pl = node_name.new(None, new_handle(Services(features=ON)))
    assert pl.pre_filter(CycleState(), deferred(running("a", "n1", desired="3", allocated="1")), []) == \
        (PreFilterResult(frozenset({"n1"})), None)
    assert pl.pre_filter(CycleState(), MakePod().name("pending").req(cpu="1").obj(), []) == (None, None)


# ---------------------------------------------------------------- every other filter skips


def _with_everything_to_check() -> core_pb2.Pod:
    """A deferred resize pod that, were it a new pod, each of the skipping plugins would check."""
    p = deferred(running("a", desired="3", allocated="1", priority=100))
    p.metadata.labels["app"] = "web"
    p.spec.node_selector["disktype"] = "ssd"  # NodeAffinity
    p.spec.containers[0].ports.add(container_port=80, host_port=8080, protocol="TCP")  # NodePorts
    term = p.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.add(  # InterPodAffinity
        topology_key="kubernetes.io/hostname")
    term.label_selector.match_labels["app"] = "db"
    c = p.spec.topology_spread_constraints.add(max_skew=1, topology_key="zone",  # PodTopologySpread
                                               when_unsatisfiable="DoNotSchedule")
    c.label_selector.match_labels["app"] = "web"
    p.spec.tolerations.add(key="node.kubernetes.io/unschedulable", operator="Exists", effect="NoSchedule")
    return p


SKIPPING = [node_unschedulable, taint_toleration, node_ports, node_affinity, inter_pod_affinity, pod_topology_spread]


@pytest.mark.parametrize("module", SKIPPING, ids=lambda m: m.NAME)
def test_every_filter_but_node_name_and_fit_skips_a_deferred_resize(module):
    pod = _with_everything_to_check()
    ni = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                   .kubelet_version("v1.37.0").obj(), pod)
    plugin = module.new(None, new_handle(Services(features=ON)))
    result, status = plugin.pre_filter(CycleState(), pod, [ni])
    assert result is None and status is not None and status.code == Code.SKIP


@pytest.mark.parametrize("module", SKIPPING, ids=lambda m: m.NAME)
def test_without_the_gate_the_same_pod_is_checked(module):
    pod = _with_everything_to_check()
    ni = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                   .kubelet_version("v1.37.0").obj(), pod)
    plugin = module.new(None, new_handle(Services(features=OFF)))
    _, status = plugin.pre_filter(CycleState(), pod, [ni])
    assert status is None or status.code != Code.SKIP


def test_the_gate_skips_only_deferred_pods():
    new_pod = _with_everything_to_check()
    new_pod.spec.node_name = ""  # the same pod, pending: every plugin has work
    ni = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                   .kubelet_version("v1.37.0").obj())
    for module in SKIPPING:
        _, status = module.new(None, new_handle(Services(features=ON))).pre_filter(CycleState(), new_pod, [ni])
        assert status is None or status.code != Code.SKIP, module.NAME


# ---------------------------------------------------------------- NodeResourcesFit: the deferred fit


def test_all_pods_at_max_a_node_already_over_committed_by_the_desired_request_is_insufficient():
    """The cache holds the pod at max(desired 3, allocated 1) = 3; beside 2 cpu of others, 3 + 2 > 4."""
    pod = deferred(running("a", desired="3", allocated="1"))
    full = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                     .kubelet_version("v1.37.0").obj(), pod, running("b", desired="2"))
    assert verdict(run_filter(fit(), pod, full)) == INSUFFICIENT_CPU
    room = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                     .kubelet_version("v1.37.0").obj(), pod, running("b", desired="1"))
    assert run_filter(fit(), pod, room) is None


def test_the_queue_copy_asking_more_than_the_cache_copy_counts_for_the_more():
    cached = deferred(running("a", desired="3", allocated="1"))
    ni = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                   .kubelet_version("v1.37.0").obj(), cached, running("b", desired="1"))
    assert run_filter(fit(), cached, ni) is None  # 3 + 1 fits 4
    resized_again = deferred(running("a", desired="4", allocated="1"))  # the queue saw it first
    assert verdict(run_filter(fit(), resized_again, ni)) == INSUFFICIENT_CPU  # 4 + 1 does not


def test_the_queue_copy_asking_less_than_the_cache_copy_never_counts_for_less():
    cached = deferred(running("a", desired="3", allocated="1"))
    ni = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                   .kubelet_version("v1.37.0").obj(), cached, running("b", desired="2"))
    reverted = deferred(running("a", desired="2", allocated="1"))
    assert verdict(run_filter(fit(), reverted, ni)) == INSUFFICIENT_CPU  # the cache's 3 + 2 > 4
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj()
    assert run_filter(fit(), reverted, node_info(n1, reverted, running("b", desired="2"))) is None


def test_a_deferred_pod_the_node_info_lacks_counts_for_its_full_request():
    """Desired 3 against 2 free: not the 2 it asks beyond its allocation."""
    pod = deferred(running("a", desired="3", allocated="1"))
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj()
    assert verdict(run_filter(fit(), pod, node_info(n1, running("b", desired="2")))) == INSUFFICIENT_CPU
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj()
    assert run_filter(fit(), pod, node_info(n1, running("b", desired="1"))) is None


def test_a_deferred_pod_is_on_its_node_already_so_a_full_pod_count_does_not_stop_it():
    pod = deferred(running("a", desired="2", allocated="1"))
    ni = node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="2")
                   .kubelet_version("v1.37.0").obj(), pod, running("b", desired="1"))
    assert run_filter(fit(), pod, ni) is None
    new = MakePod().name("new").req(cpu="100m").obj()
    assert verdict(run_filter(fit(), new, ni)) == (Code.UNSCHEDULABLE, ["Too many pods"])


def test_a_resize_beyond_the_whole_node_is_unresolvable():
    pod = deferred(running("a", desired="5", allocated="1"))
    n1 = MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj()
    status = run_filter(fit(), pod, node_info(n1, pod))
    assert verdict(status) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["Insufficient cpu"])


def _kep_four_pods(with_pod4: bool = True) -> tuple[core_pb2.Pod, NodeInfo]:
    """"Risk of Additional Preemption", X = 2 cpu on a node of 2X: every pod runs at X/2; Pod1 asks
    for X, Pods 2-4 for 2X, all Deferred."""
    pod1 = deferred(running("pod1", desired="2", allocated="1", priority=1000))
    others = [deferred(running(f"pod{i}", desired="4", allocated="1")) for i in (2, 3, 4)]
    if not with_pod4:
        others = others[:2]
    return pod1, node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                           .kubelet_version("v1.37.0").obj(), pod1, *others)


def test_kep5836_risk_of_additional_preemption_all_pods_at_max():
    pod1, ni = _kep_four_pods()
    assert verdict(run_filter(fit("AllPodsAtMax"), pod1, ni)) == INSUFFICIENT_CPU  # 2 + 4 + 4 + 4 > 4
    pod1, ni = _kep_four_pods(with_pod4=False)
    assert verdict(run_filter(fit("AllPodsAtMax"), pod1, ni)) == INSUFFICIENT_CPU  # 2 + 4 + 4 > 4


def test_kep5836_risk_of_additional_preemption_kubelet_consistent():
    pod1, ni = _kep_four_pods()
    assert verdict(run_filter(fit("KubeletConsistent"), pod1, ni)) == INSUFFICIENT_CPU  # 2 + 1 + 1 + 1 = 5 > 4
    pod1, ni = _kep_four_pods(with_pod4=False)
    assert run_filter(fit("KubeletConsistent"), pod1, ni) is None  # 2 + 1 + 1 = 4: one victim is enough


def test_deferred_resize_accounting_decoded():
    assert node_resources_fit.decode_args({}).deferred_resize_accounting == "AllPodsAtMax"
    for value in ("AllPodsAtMax", "KubeletConsistent"):
        assert node_resources_fit.decode_args({"deferredResizeAccounting": value}).deferred_resize_accounting == value


def test_an_unknown_deferred_resize_accounting_is_refused_naming_the_field():
    with pytest.raises(ArgsError) as info:
        node_resources_fit.decode_args({"deferredResizeAccounting": "AllPodsAtMin"})
    assert str(info.value) == ('deferredResizeAccounting: Unsupported value: "AllPodsAtMin": supported values: '
                               '"AllPodsAtMax", "KubeletConsistent"')
    with pytest.raises(config.ConfigError) as info:
        config.parse({"profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {
            "deferredResizeAccounting": "AllPodsAtMin"}}]}]}, default_registry())
    assert str(info.value).startswith(
        'profiles[0].pluginConfig[0].args.deferredResizeAccounting: Unsupported value: "AllPodsAtMin"')


# ---------------------------------------------------------------- NodeResourcesFit: node-aware hints


def _on_n1() -> core_pb2.Pod:
    return deferred(running("a", "n1", desired="3", allocated="1", priority=100))


def _changed(p: core_pb2.Pod, *, desired: str | None = None, allocated: str | None = None,
             actual: str | None = None, labels: dict | None = None) -> core_pb2.Pod:
    new = _bumped(p)
    if desired is not None:
        new.spec.containers[0].resources.requests["cpu"] = desired
    cs = new.status.container_statuses[0]
    if allocated is not None:
        cs.allocated_resources["cpu"] = allocated
    if actual is not None:
        cs.resources.requests["cpu"] = actual
    new.metadata.labels.update(labels or {})
    return new


def test_hints_for_a_deferred_pod_look_at_pod_events_on_its_node_only():
    pl, me = fit(), _on_n1()
    hint = pl.is_schedulable_after_pod_event
    assert hint(me, running("x", "n2"), None) == QueueingHint.QUEUE_SKIP  # deleted elsewhere
    assert hint(me, running("x", "n1"), None) == QueueingHint.QUEUE  # deleted on its node: room freed
    big = running("b", "n1", desired="2")
    assert hint(me, big, _changed(big, desired="1", allocated="1", actual="1")) == QueueingHint.QUEUE  # scaled down
    small = running("c", "n1", desired="1")
    assert hint(me, small, _changed(small, desired="2")) == QueueingHint.QUEUE  # scaled up: desired
    asking = deferred(running("d", "n1", desired="2", allocated="1"))
    assert hint(me, asking, _changed(asking, allocated="2")) == QueueingHint.QUEUE  # the kubelet allocated more
    assert hint(me, small, _changed(small, labels={"tier": "x"})) == QueueingHint.QUEUE_SKIP  # nothing moved
    elsewhere = running("e", "n2", desired="1")
    assert hint(me, elsewhere, _changed(elsewhere, desired="3")) == QueueingHint.QUEUE_SKIP


def test_hints_for_a_deferred_pods_own_updates():
    pl, me = fit(), _on_n1()
    hint = pl.is_schedulable_after_pod_event
    assert hint(me, me, _changed(me, desired="4")) == QueueingHint.QUEUE  # resized again
    status_only = _bumped(me)
    status_only.status.conditions.add(type="Ready", status="True")
    assert hint(me, me, status_only) == QueueingHint.QUEUE_SKIP


def test_hints_for_a_deferred_pod_look_at_more_room_on_its_node_only():
    pl, me = fit(), _on_n1()
    hint = pl.is_schedulable_after_node_change
    assert hint(me,
                MakeNode().name("n2").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj(),
                MakeNode().name("n2").allocatable(cpu="8", memory="8Gi", pods="110")
                .kubelet_version("v1.37.0").obj()) == QueueingHint.QUEUE_SKIP
    assert hint(me,
                MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj(),
                MakeNode().name("n1").allocatable(cpu="8", memory="8Gi", pods="110")
                .kubelet_version("v1.37.0").obj()) == QueueingHint.QUEUE
    assert hint(me,
                MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").kubelet_version("v1.37.0").obj(),
                MakeNode().name("n1").allocatable(cpu="2", memory="8Gi", pods="110")
                .kubelet_version("v1.37.0").obj()) == QueueingHint.QUEUE_SKIP


def test_a_pending_pod_still_ignores_another_pods_scale_up():
    pl = fit()
    pending = MakePod().name("pending").req(cpu="2").obj()
    pending.metadata.uid = "uid-pending"
    other = running("b", "n1", desired="1")
    assert pl.is_schedulable_after_pod_event(pending, other, _changed(other, desired="2")) == QueueingHint.QUEUE_SKIP


def test_scale_up_is_registered_only_with_the_gate():
    def actions(features: Features) -> ActionType:
        out = ActionType(0)
        for e in node_resources_fit.new(None, new_handle(Services(features=features))).events_to_register():
            out |= e.event.action
        return out

    assert actions(ON) & ActionType.UPDATE_POD_SCALE_UP
    assert not actions(OFF) & ActionType.UPDATE_POD_SCALE_UP


# ---------------------------------------------------------------- DefaultPreemption: deferredResizeNomination


def test_deferred_resize_nomination_decoded():
    assert default_preemption.decode_args({}).deferred_resize_nomination == "None"
    for value in ("None", "SpecNodeName"):
        assert default_preemption.decode_args({"deferredResizeNomination": value}).deferred_resize_nomination == value
    with pytest.raises(ArgsError) as info:
        default_preemption.decode_args({"deferredResizeNomination": "NominatedNodeName"})
    assert str(info.value) == ('deferredResizeNomination: Unsupported value: "NominatedNodeName": supported values: '
                               '"None", "SpecNodeName"')


def _preemption(nomination: str, features: Features = ON) -> tuple[default_preemption.DefaultPreemption,
                                                                   core_pb2.Pod]:
    """A deferred pod on n1 beside a lower-priority pod that its earlier preemption is terminating."""
    resizing = deferred(running("a", "n1", desired="3", allocated="1", priority=100))
    victim = running("v", "n1", desired="1", priority=10)
    victim.metadata.deletion_timestamp = timeutil.rfc3339()
    victim.status.conditions.add(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")
    snapshot = Snapshot.of([node_info(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110")
                                      .kubelet_version("v1.37.0").obj(), resizing, victim)])
    services = Services(features=features, snapshot=snapshot)
    return default_preemption.new({"deferredResizeNomination": nomination}, new_handle(services)), resizing


def test_option_4_spec_node_name_is_the_nomination_so_a_terminating_victim_blocks_a_second_preemption():
    pl, pod = _preemption("SpecNodeName")
    assert pl.pod_eligible_to_preempt_others(pod, None) == \
        (False, "not eligible due to a terminating pod on the nominated node.")


def test_option_1_none_may_preempt_again():
    pl, pod = _preemption("None")
    assert pl.pod_eligible_to_preempt_others(pod, None) == (True, "")


def test_spec_node_name_needs_the_gate():
    pl, pod = _preemption("SpecNodeName", OFF)
    assert pl.pod_eligible_to_preempt_others(pod, None) == (True, "")


@pytest.mark.parametrize("nomination", ["None", "SpecNodeName"])
def test_preemption_policy_never_is_never_eligible(nomination):
    pl, pod = _preemption(nomination)
    pod.spec.preemption_policy = "Never"
    assert pl.pod_eligible_to_preempt_others(pod, None) == (False, "not eligible due to preemptionPolicy=Never.")
