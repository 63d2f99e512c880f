"""Kubelet-side preemption for critical pods (Kubernetes' pkg/kubelet/preemption): which pods go."""

from __future__ import annotations

import pytest

from kubelet.preemption import NoVictims, is_critical, pods_to_preempt, preemptable
from machinery import resources
from tests.harness.builders import MakePod

CRITICAL = 2_000_001_000


def _requests(pod):
    return {**resources.pod_requests(pod, use_status_resources=False), "pods": 1}


def _names(pods) -> list[str]:
    return [p.metadata.name for p in pods]


CRITICAL_POD = MakePod().name("critical").uid("critical").priority(CRITICAL).req(cpu="1", memory="1Gi").obj()


def test_critical_is_priority_at_or_above_system_critical():
    assert is_critical(MakePod().name("a").uid("a").priority(2_000_000_000).obj()) and is_critical(CRITICAL_POD)
    assert not is_critical(MakePod().name("b").uid("b").priority(1_999_999_999).obj())
    assert not is_critical(MakePod().name("c").uid("c").obj())


def test_who_may_preempt_whom():
    low = MakePod().name("low").uid("low").priority(10).obj()
    high = MakePod().name("high").uid("high").priority(100).obj()
    other_critical = MakePod().name("c2").uid("c2").priority(CRITICAL).obj()
    assert preemptable(CRITICAL_POD, high) and not preemptable(CRITICAL_POD, other_critical)
    no_priority = MakePod().name("x").uid("x").obj()
    assert preemptable(high, low) and not preemptable(low, high) and not preemptable(low, no_priority)


def test_burstable_and_besteffort_go_before_guaranteed():
    pods = [MakePod().name("g").uid("g").priority(0).req(cpu="1", memory="1Gi").lim(cpu="1", memory="1Gi").obj(),
            MakePod().name("b").uid("b").priority(0).req(cpu="1", memory="1Gi").obj()]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)) == ["b"]


def test_one_pod_that_covers_everything_beats_several_small_ones():
    pods = [MakePod().name("small1").uid("small1").priority(0).req(cpu="500m").obj(),
            MakePod().name("small2").uid("small2").priority(0).req(cpu="500m").obj(),
            MakePod().name("big").uid("big").priority(0).req(cpu="2").obj()]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)) == ["big"]


def test_equally_close_pods_the_smaller_one_goes():
    pods = [MakePod().name("more-memory").uid("more-memory").priority(0).req(cpu="1", memory="2Gi").obj(),
            MakePod().name("less-memory").uid("less-memory").priority(0).req(cpu="1", memory="1Gi").obj()]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)) == ["less-memory"]


def test_several_pods_when_no_single_one_is_enough():
    pods = [MakePod().name("a").uid("a").priority(0).req(cpu="600m").obj(),
            MakePod().name("b").uid("b").priority(0).req(cpu="600m").obj(),
            MakePod().name("c").uid("c").priority(0).req(cpu="100m").obj()]
    assert sorted(_names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests))) == ["a", "b"]


def test_guaranteed_pods_only_when_the_others_cannot_free_enough():
    pods = [MakePod().name("be").uid("be").priority(0).obj(),
            MakePod().name("bu").uid("bu").priority(0).req(cpu="500m").obj(),
            MakePod().name("g1").uid("g1").priority(0).req(cpu="1", memory="1Gi").lim(cpu="1", memory="1Gi").obj(),
            MakePod().name("g2").uid("g2").priority(0).req(cpu="2", memory="1Gi").lim(cpu="2", memory="1Gi").obj()]
    victims = pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1500}, _requests)
    assert _names(victims) == ["bu", "g1"]


def test_critical_pods_are_never_victims_and_not_enough_is_an_error():
    pods = [MakePod().name("other-critical").uid("other-critical").priority(CRITICAL).req(cpu="4").obj(),
            MakePod().name("small").uid("small").priority(0).req(cpu="500m").obj()]
    with pytest.raises(NoVictims,
                       match=r"no set of running pods found to reclaim resources: \[\(res: cpu, q: 500\), \]"):
        pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)


def test_a_missing_pod_slot_is_freed_by_any_one_pod():
    pods = [MakePod().name("a").uid("a").priority(0).req(cpu="1").obj(),
            MakePod().name("b").uid("b").priority(0).req(cpu="100m").obj()]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"pods": 1}, _requests)) == ["b"]
