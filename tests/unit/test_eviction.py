"""Node-pressure eviction's pure parts: the flags, memory.available, the ranking the documentation
gives, grace periods, the pressure transition period, minimum reclaim, the messages, admission
under pressure, and the manager's one-pod-per-round decisions (with a fake clock and killer)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from prometheus_client import REGISTRY

from kubelet.eviction.admission import admit
from kubelet.eviction.evaluate import EvictionState, thresholds_met
from kubelet.eviction.manager import EvictionManager, PodKill
from kubelet.eviction.message import eviction_message, node_condition_message
from kubelet.eviction.ranking import rank_memory_pressure
from kubelet.eviction.signals import Observation, PodStats, Summary, observe, summarize
from kubelet.eviction.thresholds import (
    MEMORY_AVAILABLE,
    EvictionConfig,
    Threshold,
    ThresholdError,
    ThresholdValue,
    parse_config,
    parse_duration,
)
from kubelet.node import Conditions, pressure_taints
from machinery.api import core_pb2, cri_pb2
from machinery.quantity import parse_quantity
from tests.harness.builders import MakePod

Mi = 1 << 20
Gi = 1 << 30


# ------------------------------------------------------------------ parsing the flags


def test_default_is_kubernetes_linux_hard_threshold_memory_available_below_100mi():
    cfg = parse_config()
    assert [str(t) for t in cfg.thresholds] == ["memory.available<100Mi"]
    assert cfg.thresholds[0].hard and cfg.pressure_transition_period == 300 and cfg.monitoring_interval == 10
    assert cfg.max_pod_grace_period == 0 and cfg.ignored == ()
    assert EvictionConfig().thresholds == cfg.thresholds


def test_given_hard_thresholds_replace_the_defaults_and_empty_means_none():
    assert [str(t) for t in parse_config(hard="memory.available<1Gi").thresholds] == ["memory.available<1Gi"]
    assert parse_config(hard="").thresholds == ()


def test_quantities_and_percentages_as_the_documentation_writes_them():
    # "memory.available<10% or memory.available<1Gi" on a 10GiB node.
    pct = parse_config(hard="memory.available<10%").thresholds[0]
    assert pct.value.percentage == Fraction(1, 10) and str(pct.value) == "10%"
    assert pct.value.bytes_of(10 * Gi) == Gi
    assert str(pct.value.quantity_of(10 * Gi)) == "1Gi"
    assert str(pct.value.quantity_of(Gi)) == "107374182"  # 10% of 1Gi, rounded down, printed as Kubernetes does
    q = parse_config(hard="memory.available<1Gi").thresholds[0]
    assert q.value.bytes_of(10 * Gi) == Gi and str(q.value.quantity_of(10 * Gi)) == "1Gi"
    assert parse_config(hard="memory.available<12.5%").thresholds[0].value.percentage == Fraction(1, 8)


def test_several_statements_comma_separated_the_last_of_a_repeated_signal_wins():
    cfg = parse_config(hard=" memory.available < 300Mi , memory.available<200Mi,")
    assert [str(t) for t in cfg.thresholds] == ["memory.available<200Mi"]


def test_soft_thresholds_take_their_grace_period_and_minimum_reclaim_applies_to_both():
    cfg = parse_config(hard="memory.available<100Mi", soft="memory.available<1.5Gi",
                       soft_grace_period="memory.available=1m30s", minimum_reclaim="memory.available=0Mi",
                       max_pod_grace_period=20, pressure_transition_period="30s")
    hard, soft = cfg.thresholds
    assert hard.hard and not soft.hard
    assert soft.grace_period == 90 and str(soft.value) == "1536Mi"
    assert hard.min_reclaim == soft.min_reclaim == ThresholdValue(quantity=parse_quantity("0Mi"))
    assert cfg.max_pod_grace_period == 20 and cfg.pressure_transition_period == 30


def test_a_soft_threshold_without_a_grace_period_is_a_startup_error():
    with pytest.raises(ThresholdError, match="grace period must be specified for the soft eviction threshold "
                                             "memory.available"):
        parse_config(soft="memory.available<1Gi")


@pytest.mark.parametrize("kw, message", [
    ({"hard": "memory.available<abc"}, "invalid eviction threshold for memory.available: 'abc': quantities must match"),
    ({"hard": "memory.available<0"}, "eviction threshold memory.available must be positive: 0"),
    ({"hard": "memory.available<-1Mi"}, "eviction threshold memory.available must be positive: -1Mi"),
    ({"hard": "memory.available<150%"}, "eviction percentage threshold memory.available must be <= 100%: 150%"),
    ({"hard": "memory.available<-5%"}, "eviction percentage threshold memory.available must be >= 0%: -5%"),
    ({"hard": "memory.available<x%"}, "'x%' is not a percentage"),
    ({"hard": "memory.available>100Mi"}, "invalid --eviction-hard statement 'memory.available>100Mi': "
                                         "want signal<value"),
    ({"hard": "memory.available<"}, "invalid --eviction-hard statement"),
    ({"hard": "memory.free<1Gi"}, "unsupported eviction signal 'memory.free' in --eviction-hard"),
    ({"soft": "memory.available<1Gi", "soft_grace_period": "memory.available=soon"},
     "invalid --eviction-soft-grace-period memory.available 'soon'"),
    ({"soft": "memory.available<1Gi", "soft_grace_period": "memory.available=-1s"},
     "invalid eviction grace period specified: memory.available=-1s, must be a positive value"),
    ({"minimum_reclaim": "memory.available=-1Mi"}, "negative eviction minimum reclaim specified for memory.available"),
    ({"minimum_reclaim": "memory.available=0%"}, "eviction percentage minimum reclaim memory.available must be "
                                                 "positive: 0%"),
    ({"max_pod_grace_period": -1}, "--eviction-max-pod-grace-period must be >= 0 seconds"),
    ({"pressure_transition_period": "0s"}, "--eviction-pressure-transition-period must be greater than 0"),
    ({"pressure_transition_period": "5 minutes"}, "invalid --eviction-pressure-transition-period '5 minutes'"),
    ({"monitoring_interval": 0}, "--eviction-monitoring-interval must be greater than 0"),
])
def test_bad_flags_are_refused_with_a_clear_error(kw, message):
    with pytest.raises(ThresholdError) as err:
        parse_config(**kw)
    assert message in str(err.value)


def test_zero_and_hundred_percent_are_ignored_as_in_kubernetes():
    assert parse_config(hard="memory.available<0%").thresholds == ()
    assert parse_config(hard="memory.available<100%").thresholds == ()
    assert parse_config(hard="", soft="memory.available<0%").thresholds == ()  # no grace period needed then


def test_signals_kplane_does_not_simulate_are_accepted_and_ignored_with_a_warning():
    cfg = parse_config(hard="memory.available<100Mi,nodefs.available<10%,imagefs.available<15%,"
                            "nodefs.inodesFree<5%,pid.available<1k",
                       minimum_reclaim="nodefs.available=500Mi")
    assert [str(t) for t in cfg.thresholds] == ["memory.available<100Mi"]
    assert cfg.ignored == ("nodefs.available<10%", "imagefs.available<15%", "nodefs.inodesFree<5%",
                           "pid.available<1k", "nodefs.available (grace period / minimum reclaim)")
    # A soft threshold on such a signal still needs its grace period, as in Kubernetes.
    with pytest.raises(ThresholdError, match="nodefs.available"):
        parse_config(soft="nodefs.available<1Gi")


@pytest.mark.parametrize("text, seconds", [("90s", 90), ("1m30s", 90), ("1.5m", 90), ("5m", 300), ("1h", 3600),
                                           ("500ms", 0.5), ("0", 0), ("2h45m", 9900), ("-1s", -1)])
def test_go_durations(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "1d", "m", "1m30", "1.5.2s"])
def test_bad_go_durations(text):
    with pytest.raises(ThresholdError):
        parse_duration(text)


# ------------------------------------------------------------------ signals


def _stat(uid: str, container: str, used: int, ts: int = 1_000_000_000) -> cri_pb2.ContainerStats:
    s = cri_pb2.ContainerStats()
    s.attributes.labels.update({"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": container})
    s.memory.working_set_bytes.value = used
    s.memory.timestamp = ts
    return s


def test_memory_available_is_capacity_minus_the_pods_working_set_minus_system_usage():
    stats = [_stat("a", "c1", 300 * Mi), _stat("a", "c2", 100 * Mi, ts=3_000_000_000), _stat("b", "c1", 200 * Mi)]
    summary = summarize(stats, Gi, system_usage=24 * Mi)
    assert summary.pods["a"].containers == {"c1": 300 * Mi, "c2": 100 * Mi}
    assert summary.pods["a"].working_set == 400 * Mi and summary.pods["b"].working_set == 200 * Mi
    assert summary.working_set == 624 * Mi and summary.time == 3.0
    assert observe(summary) == {MEMORY_AVAILABLE: Observation(400 * Mi, Gi, 3.0)}


def test_memory_available_never_goes_below_zero_and_unlabelled_containers_do_not_count():
    odd = cri_pb2.ContainerStats()
    odd.memory.working_set_bytes.value = 10 * Gi
    summary = summarize([_stat("a", "c1", 2 * Gi), odd], Gi)
    assert list(summary.pods) == ["a"]
    assert observe(summary)[MEMORY_AVAILABLE].available == 0
    assert summarize([], Gi).time is None and observe(summarize([], Gi))[MEMORY_AVAILABLE].available == Gi


# ------------------------------------------------------------------ ranking (the documentation's order)


def _stats_of(usage: dict[str, int]):
    return lambda pod: (PodStats(pod.metadata.uid, {"c1": usage[pod.metadata.name]})
                        if pod.metadata.name in usage else None)


def test_ranking_follows_the_documentation_exceeding_requests_then_priority_then_usage_above_request():
    pods = [
        # under its request, lowest priority of all
        MakePod().name("guaranteed-low").uid("uid-guaranteed-low").priority(100).req(cpu="100m", memory="200Mi")
        .lim(cpu="100m", memory="200Mi").obj(),
        # under its request
        MakePod().name("burstable-under").uid("uid-burstable-under").priority(500).req(memory="500Mi").obj(),
        # exceeds (requests nothing), high priority
        MakePod().name("besteffort-high").uid("uid-besteffort-high").priority(2000).obj(),
        # exceeds by 50Mi
        MakePod().name("burstable-over-mid").uid("uid-burstable-over-mid").priority(1000).req(memory="100Mi").obj(),
        # exceeds by 10Mi, same priority
        MakePod().name("besteffort-mid").uid("uid-besteffort-mid").priority(1000).obj(),
        # exceeds by 400Mi, same priority
        MakePod().name("burstable-over-mid-big").uid("uid-burstable-over-mid-big").priority(1000)
        .req(memory="100Mi").obj(),
    ]
    usage = {"guaranteed-low": 150 * Mi, "burstable-under": 100 * Mi, "besteffort-high": 700 * Mi,
             "burstable-over-mid": 150 * Mi, "besteffort-mid": 10 * Mi, "burstable-over-mid-big": 500 * Mi}
    order = [p.metadata.name for p in rank_memory_pressure(pods, _stats_of(usage))]
    assert order == [
        # 1. usage above requests: by priority, then by how far above
        "burstable-over-mid-big", "burstable-over-mid", "besteffort-mid", "besteffort-high",
        # 2. usage within requests: by priority (Guaranteed is not spared when its priority is lower)
        "guaranteed-low", "burstable-under",
    ]


def test_a_pod_without_stats_is_ranked_first_as_kubernetes_does():
    pods = [MakePod().name("a").uid("uid-a").priority(0).obj(),
            MakePod().name("nostats").uid("uid-nostats").priority(1000).req(memory="1Gi").obj()]
    order = [p.metadata.name for p in rank_memory_pressure(pods, _stats_of({"a": 100 * Mi}))]
    assert order == ["nostats", "a"]


def test_memory_request_counts_init_containers_as_a_maximum_and_overhead():
    pod = (MakePod().name("init").container("c1", memory="100Mi").container("c2", memory="50Mi")
           .init_container("i1", memory="200Mi").obj())
    pod.spec.overhead["memory"] = "10Mi"
    from kubelet.eviction.pods import memory_request
    assert memory_request(pod) == 210 * Mi


# ------------------------------------------------------------------ grace periods, transition period, min reclaim

HARD = Threshold(MEMORY_AVAILABLE, ThresholdValue(quantity=parse_quantity("100Mi")))
SOFT = Threshold(MEMORY_AVAILABLE, ThresholdValue(quantity=parse_quantity("300Mi")), grace_period=30)


def _obs(available_mi: int, t: float | None = None) -> dict[str, Observation]:
    return {MEMORY_AVAILABLE: Observation(available_mi * Mi, Gi, t)}


def test_a_soft_threshold_evicts_only_once_met_for_its_grace_period_but_the_condition_is_at_once():
    state = EvictionState()
    step = state.step([SOFT], _obs(200), now=0, transition_period=60)
    assert step.conditions == ["MemoryPressure"] and step.to_act == []
    assert state.step([SOFT], _obs(200), now=29.9, transition_period=60).to_act == []
    assert state.step([SOFT], _obs(200), now=30, transition_period=60).to_act == [SOFT]


def test_a_soft_threshold_that_stops_being_met_starts_its_grace_period_again():
    state = EvictionState()
    state.step([SOFT], _obs(200), now=0, transition_period=60)
    assert state.step([SOFT], _obs(400), now=10, transition_period=60).met == []
    assert state.step([SOFT], _obs(200), now=15, transition_period=60).to_act == []
    assert state.step([SOFT], _obs(200), now=44, transition_period=60).to_act == []
    assert state.step([SOFT], _obs(200), now=45, transition_period=60).to_act == [SOFT]


def test_a_hard_threshold_acts_at_once():
    state = EvictionState()
    step = state.step([HARD, SOFT], _obs(60), now=0, transition_period=60)
    assert step.to_act == [HARD] and step.met == [HARD, SOFT]


def test_the_condition_stays_for_the_transition_period_after_the_pressure_ends():
    state = EvictionState()
    assert state.step([HARD], _obs(60), now=0, transition_period=300).conditions == ["MemoryPressure"]
    assert state.step([HARD], _obs(500), now=1, transition_period=300).conditions == ["MemoryPressure"]
    assert state.step([HARD], _obs(500), now=299.9, transition_period=300).conditions == ["MemoryPressure"]
    assert state.step([HARD], _obs(500), now=300, transition_period=300).conditions == []


def test_oscillating_pressure_keeps_the_condition_on_instead_of_flapping():
    state = EvictionState()
    seen = []
    for i in range(10):  # below the threshold every other second
        seen.append(state.step([HARD], _obs(60 if i % 2 == 0 else 500), now=i, transition_period=5).conditions)
    assert all(c == ["MemoryPressure"] for c in seen)
    assert state.step([HARD], _obs(500), now=8 + 5, transition_period=5).conditions == []


def test_minimum_reclaim_keeps_reclaiming_until_threshold_plus_minimum_is_available():
    t = Threshold(MEMORY_AVAILABLE, ThresholdValue(quantity=parse_quantity("100Mi")),
                  min_reclaim=ThresholdValue(quantity=parse_quantity("50Mi")))
    state = EvictionState()
    assert state.step([t], _obs(90, 1), now=0, transition_period=1).to_act == [t]
    # Above the threshold but below threshold + minimum reclaim: still reclaiming.
    step = state.step([t], _obs(120, 2), now=1, transition_period=1)
    assert step.to_act == [t] and step.conditions == ["MemoryPressure"]
    assert state.step([t], _obs(149, 3), now=2, transition_period=1).to_act == [t]
    assert state.step([t], _obs(150, 4), now=3, transition_period=1).to_act == []
    # Once resolved, the minimum reclaim applies only after the threshold is met again.
    assert state.step([t], _obs(120, 5), now=4, transition_period=1).to_act == []


def test_minimum_reclaim_as_a_percentage_of_capacity():
    t = Threshold(MEMORY_AVAILABLE, ThresholdValue(quantity=parse_quantity("100Mi")),
                  min_reclaim=ThresholdValue(percentage=Fraction(1, 10)))
    assert thresholds_met([t], _obs(150), enforce_min_reclaim=True) == [t]   # 100Mi + 102.4Mi
    assert thresholds_met([t], _obs(203), enforce_min_reclaim=True) == []


def test_no_decision_twice_on_the_same_stats_sample():
    state = EvictionState()
    assert state.step([HARD], _obs(60, t=5.0), now=0, transition_period=1).to_act == [HARD]
    assert state.step([HARD], _obs(60, t=5.0), now=1, transition_period=1).to_act == []
    assert state.step([HARD], _obs(60, t=6.0), now=2, transition_period=1).to_act == [HARD]


# ------------------------------------------------------------------ messages and admission


def test_the_eviction_message_is_kubernetes_text():
    pod = MakePod().name("burst").uid("uid-burst").priority(0).req(memory="100Mi").obj()
    msg = eviction_message("memory", pod, PodStats("uid-burst", {"c1": 500 * Mi}), parse_quantity("100Mi"), 60 * Mi)
    assert msg.text == ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 60Mi. "
                        "Container c1 was using 500Mi, request is 100Mi, has larger consumption of memory.")
    assert msg.offending == {"offending_containers": "c1", "offending_containers_usage": "500Mi",
                             "starved_resource": "memory"}
    be = MakePod().name("be").uid("uid-be").priority(0).obj()
    assert eviction_message("memory", be, PodStats("uid-be", {"c1": 150 * Mi + 1}), parse_quantity("200Mi"),
                            0).text == ("The node was low on resource: memory. Threshold quantity: 200Mi, "
                                        "available: 0. Container c1 was using 157286401, request is 0, "
                                        "has larger consumption of memory.")
    under = (MakePod().name("g").uid("uid-g").priority(0).req(cpu="100m", memory="200Mi")
             .lim(cpu="100m", memory="200Mi").obj())
    assert eviction_message("memory", under, PodStats("uid-g", {"c1": 150 * Mi}), parse_quantity("200Mi"),
                            24 * Mi).text == "The node was low on resource: memory. Threshold quantity: 200Mi, " \
                                            "available: 24Mi."


def test_under_memory_pressure_best_effort_pods_are_refused_others_admitted():
    pressure = ["MemoryPressure"]
    be = MakePod().name("be").uid("uid-be").priority(0).obj()
    verdict = admit(be, pressure)
    assert (verdict.admit, verdict.reason, verdict.message) == (False, "Evicted",
                                                                "The node had condition: [MemoryPressure].")
    assert admit(be, []).admit
    assert admit(MakePod().name("burst").uid("uid-burst").priority(0).req(memory="100Mi").obj(), pressure).admit
    assert admit(MakePod().name("guaranteed").uid("uid-guaranteed").priority(0).req(cpu="100m", memory="100Mi")
                 .lim(cpu="100m", memory="100Mi").obj(), pressure).admit
    critical = MakePod().name("critical").uid("uid-critical").priority(2_000_001_000).obj()  # system-node-critical
    assert admit(critical, pressure).admit


def test_a_best_effort_pod_tolerating_the_memory_pressure_taint_is_admitted():
    pressure = ["MemoryPressure"]
    tolerant = MakePod().name("t").uid("uid-t").priority(0).obj()
    tolerant.spec.tolerations.add(key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoSchedule")
    assert admit(tolerant, pressure).admit
    everything = MakePod().name("all").uid("uid-all").priority(0).obj()
    everything.spec.tolerations.add(operator="Exists")
    assert admit(everything, pressure).admit
    wrong_effect = MakePod().name("w").uid("uid-w").priority(0).obj()
    wrong_effect.spec.tolerations.add(key="node.kubernetes.io/memory-pressure", operator="Exists", effect="NoExecute")
    assert not admit(wrong_effect, pressure).admit


def test_other_pressure_refuses_all_but_critical_pods():
    burst = MakePod().name("burst").uid("uid-burst").priority(0).req(memory="100Mi").obj()
    verdict = admit(burst, ["MemoryPressure", "DiskPressure"])
    assert not verdict.admit and verdict.message == "The node had condition: [MemoryPressure DiskPressure]."
    assert node_condition_message(["DiskPressure"]) == "The node had condition: [DiskPressure]."


# ------------------------------------------------------------------ the node's pressure taints


def test_pressure_taints_follow_the_conditions_and_keep_other_taints():
    node = core_pb2.Node()
    node.spec.taints.add(key="dedicated", value="x", effect="NoSchedule")
    assert pressure_taints(node, Conditions()) is None
    taints = pressure_taints(node, Conditions(memory_pressure=True))
    assert [(t.key, t.effect) for t in taints] == [("dedicated", "NoSchedule"),
                                                   ("node.kubernetes.io/memory-pressure", "NoSchedule")]
    node.spec.ClearField("taints")
    node.spec.taints.extend(taints)
    node.spec.taints.add(key="node.kubernetes.io/memory-pressure", effect="NoExecute")  # not ours
    assert pressure_taints(node, Conditions(memory_pressure=True)) is None
    assert [(t.key, t.effect) for t in pressure_taints(node, Conditions())] == [
        ("dedicated", "NoSchedule"), ("node.kubernetes.io/memory-pressure", "NoExecute")]


# ------------------------------------------------------------------ the manager, one round at a time


class _FakeClock:
    def __init__(self):
        self.t = 0.0

    def now(self) -> float:
        return self.t

    async def sleep(self, seconds: float) -> None:
        self.t += seconds


class _Killer:
    def __init__(self):
        self.kills: list[tuple[str, PodKill]] = []

    async def kill_pod_abnormally(self, pod, kill: PodKill) -> None:
        self.kills.append((pod.metadata.name, kill))

    async def pod_cleaned_up(self, pod) -> bool:
        return True


class _Node:
    """The simulated node: pods with usage; the killer's victims stop using memory."""

    def __init__(self, pods: list[core_pb2.Pod], usage: dict[str, int], capacity: int = Gi, system: int = 0):
        self.pods, self.usage, self.capacity, self.system = pods, usage, capacity, system
        self.killer = _Killer()
        self.events: list[tuple[str, str, str, str]] = []
        self.conditions: list[list[str]] = []
        self.sample = 0

    def active(self) -> list[core_pb2.Pod]:
        killed = {name for name, _ in self.killer.kills}
        return [p for p in self.pods if p.metadata.name not in killed]

    async def stats(self) -> Summary:
        self.sample += 1
        pods = {p.metadata.uid: PodStats(p.metadata.uid, {"c1": self.usage[p.metadata.name]}) for p in self.active()}
        return Summary(self.capacity, self.system, pods, float(self.sample))

    def manager(self, cfg: EvictionConfig, clock: _FakeClock) -> EvictionManager:
        node = core_pb2.Node()
        node.metadata.name = "node-1"
        return EvictionManager(cfg, stats=self.stats, active_pods=self.active, killer=self.killer,
                               record_event=lambda obj, t, r, m: self.events.append((obj.metadata.name, t, r, m)),
                               node_ref=lambda: node, on_conditions=self.conditions.append, clock=clock,
                               node="node-1")


def _sample(name: str, signal: str = MEMORY_AVAILABLE) -> float | None:
    return REGISTRY.get_sample_value(name, {"eviction_signal": signal})


async def test_the_manager_evicts_one_pod_per_round_in_ranking_order_until_the_pressure_is_gone():
    # 1Gi node, hard memory.available<200Mi; 1000Mi used: 24Mi available.
    pods = [MakePod().name("guaranteed").uid("uid-guaranteed").priority(100).req(cpu="100m", memory="200Mi")
            .lim(cpu="100m", memory="200Mi").obj(),
            MakePod().name("burstable").uid("uid-burstable").priority(1000).req(memory="100Mi").obj(),
            MakePod().name("besteffort").uid("uid-besteffort").priority(2000).obj()]
    node = _Node(pods, {"guaranteed": 150 * Mi, "burstable": 150 * Mi, "besteffort": 700 * Mi})
    clock = _FakeClock()
    m = node.manager(parse_config(hard="memory.available<200Mi", pressure_transition_period="30s"), clock)
    before = _sample("kubelet_evictions_total") or 0.0

    assert (await m.synchronize()).metadata.name == "burstable"
    assert node.conditions == [["MemoryPressure"]] and m.conditions == ["MemoryPressure"]
    name, kill = node.killer.kills[0]
    assert kill.grace_period == 0 and kill.reason == "Evicted"
    assert kill.message == ("The node was low on resource: memory. Threshold quantity: 200Mi, available: 24Mi. "
                            "Container c1 was using 150Mi, request is 100Mi, has larger consumption of memory.")
    assert (kill.condition_type, kill.condition_reason) == ("DisruptionTarget", "TerminationByKubelet")
    assert ("node-1", "Warning", "EvictionThresholdMet", "Attempting to reclaim memory") in node.events
    assert ("burstable", "Warning", "Evicted", kill.message) in node.events

    clock.t += 1  # 850Mi used: 174Mi available, still under pressure
    assert (await m.synchronize()).metadata.name == "besteffort"
    assert node.killer.kills[1][1].message.startswith("The node was low on resource: memory. Threshold quantity: "
                                                      "200Mi, available: 174Mi. Container c1 was using 700Mi, "
                                                      "request is 0,")
    clock.t += 1  # 150Mi used: no pressure; the Guaranteed pod stays
    assert await m.synchronize() is None
    assert [n for n, _ in node.killer.kills] == ["burstable", "besteffort"]
    assert m.conditions == ["MemoryPressure"]  # within the transition period
    assert _sample("kubelet_evictions_total") == before + 2
    assert [e for e in node.events if e[2] == "EvictionThresholdMet"] == [
        ("node-1", "Warning", "EvictionThresholdMet", "Attempting to reclaim memory")]

    clock.t += 30
    assert await m.synchronize() is None
    assert m.conditions == [] and node.conditions == [["MemoryPressure"], []]


async def test_critical_pods_are_never_evicted():
    pods = [MakePod().name("critical").uid("uid-critical").priority(2_000_000_000).obj(),
            MakePod().name("small").uid("uid-small").priority(0).req(cpu="100m", memory="100Mi")
            .lim(cpu="100m", memory="100Mi").obj()]
    node = _Node(pods, {"critical": 950 * Mi, "small": 10 * Mi})
    m = node.manager(parse_config(hard="memory.available<200Mi"), _FakeClock())
    # The critical pod ranks first (it exceeds its request) but is skipped; the next one goes.
    assert (await m.synchronize()).metadata.name == "small"
    assert await m.synchronize() is None  # only the critical pod is left: nothing to evict
    assert m.conditions == ["MemoryPressure"]


async def test_system_daemons_over_their_reservation_evict_pods_under_their_requests_by_priority():
    # The documentation's case: only Guaranteed / Burstable pods within requests are left.
    pods = [MakePod().name("g-high").uid("uid-g-high").priority(1000).req(cpu="100m", memory="200Mi")
            .lim(cpu="100m", memory="200Mi").obj(),
            MakePod().name("b-low").uid("uid-b-low").priority(10).req(memory="300Mi").obj(),
            MakePod().name("g-low").uid("uid-g-low").priority(100).req(cpu="100m", memory="200Mi")
            .lim(cpu="100m", memory="200Mi").obj()]
    node = _Node(pods, {"g-high": 100 * Mi, "b-low": 100 * Mi, "g-low": 100 * Mi}, system=700 * Mi)
    m = node.manager(parse_config(hard="memory.available<200Mi"), _FakeClock())
    assert (await m.synchronize()).metadata.name == "b-low"


async def test_soft_eviction_waits_for_the_grace_period_and_caps_the_pods_grace_period():
    pods = [MakePod().name("be").uid("uid-be").priority(0).obj()]
    pods[0].spec.termination_grace_period_seconds = 30
    node = _Node(pods, {"be": 800 * Mi})
    clock = _FakeClock()
    cfg = parse_config(soft="memory.available<300Mi", soft_grace_period="memory.available=10s",
                       max_pod_grace_period=5)
    m = node.manager(cfg, clock)
    assert await m.synchronize() is None and m.conditions == ["MemoryPressure"]
    clock.t = 9.5
    assert await m.synchronize() is None
    clock.t = 10
    assert (await m.synchronize()).metadata.name == "be"
    assert node.killer.kills[0][1].grace_period == 5  # min(30, 5)


def test_soft_eviction_without_a_max_pod_grace_period_kills_at_once_and_a_shorter_pod_grace_wins():
    pod = MakePod().name("p").uid("uid-p").priority(0).obj()
    pod.spec.termination_grace_period_seconds = 3
    flags = dict(soft="memory.available<300Mi", soft_grace_period="memory.available=1s")
    no_max = _Node([pod], {"p": 0}).manager(parse_config(**flags), _FakeClock())
    soft = no_max.config.thresholds[-1]
    assert not soft.hard and no_max.grace_period(pod, soft) == 0
    capped = _Node([pod], {"p": 0}).manager(parse_config(**flags, max_pod_grace_period=20), _FakeClock())
    assert capped.grace_period(pod, soft) == 3  # min(3, 20)
    assert capped.grace_period(pod, HARD) == 0


async def test_nothing_happens_without_thresholds_or_when_stats_fail():
    node = _Node([MakePod().name("a").uid("uid-a").priority(0).obj()], {"a": 2 * Gi})
    m = node.manager(parse_config(hard=""), _FakeClock())
    assert await m.synchronize() is None and m.conditions == [] and node.conditions == []
    from kubelet.runtime.errors import RuntimeUnavailable

    async def broken():
        raise RuntimeUnavailable("ListContainerStats", "down", None)
    m2 = node.manager(parse_config(), _FakeClock())
    m2.stats = broken
    assert await m2.synchronize() is None
