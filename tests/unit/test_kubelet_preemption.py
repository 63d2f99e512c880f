"""Kubelet-side preemption for critical pods (Kubernetes' pkg/kubelet/preemption): which pods go."""

from __future__ import annotations

import pytest

from kubelet.preemption import NoVictims, is_critical, pods_to_preempt, preemptable
from machinery import resources
from tests.helpers import make_pod

CRITICAL = 2_000_001_000


def _pod(name: str, cpu: str | None = None, memory: str | None = None, guaranteed: bool = False,
         priority: int | None = 0):
    pod = make_pod(name, cpu=cpu, memory=memory, limit_cpu=cpu if guaranteed else None,
                   limit_memory=memory if guaranteed else None)
    pod.metadata.uid = name
    if priority is not None:
        pod.spec.priority = priority
    return pod


def _requests(pod):
    return {**resources.pod_requests(pod, use_status_resources=False), "pods": 1}


def _names(pods) -> list[str]:
    return [p.metadata.name for p in pods]


CRITICAL_POD = _pod("critical", cpu="1", memory="1Gi", priority=CRITICAL)


def test_critical_is_priority_at_or_above_system_critical():
    assert is_critical(_pod("a", priority=2_000_000_000)) and is_critical(CRITICAL_POD)
    assert not is_critical(_pod("b", priority=1_999_999_999)) and not is_critical(_pod("c", priority=None))


def test_who_may_preempt_whom():
    low, high = _pod("low", priority=10), _pod("high", priority=100)
    assert preemptable(CRITICAL_POD, high) and not preemptable(CRITICAL_POD, _pod("c2", priority=CRITICAL))
    assert preemptable(high, low) and not preemptable(low, high) and not preemptable(low, _pod("x", priority=None))


def test_burstable_and_besteffort_go_before_guaranteed():
    pods = [_pod("g", cpu="1", memory="1Gi", guaranteed=True), _pod("b", cpu="1", memory="1Gi")]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)) == ["b"]


def test_one_pod_that_covers_everything_beats_several_small_ones():
    pods = [_pod("small1", cpu="500m"), _pod("small2", cpu="500m"), _pod("big", cpu="2")]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)) == ["big"]


def test_equally_close_pods_the_smaller_one_goes():
    pods = [_pod("more-memory", cpu="1", memory="2Gi"), _pod("less-memory", cpu="1", memory="1Gi")]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)) == ["less-memory"]


def test_several_pods_when_no_single_one_is_enough():
    pods = [_pod("a", cpu="600m"), _pod("b", cpu="600m"), _pod("c", cpu="100m")]
    assert sorted(_names(pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests))) == ["a", "b"]


def test_guaranteed_pods_only_when_the_others_cannot_free_enough():
    pods = [_pod("be", priority=0), _pod("bu", cpu="500m"), _pod("g1", cpu="1", memory="1Gi", guaranteed=True),
            _pod("g2", cpu="2", memory="1Gi", guaranteed=True)]
    victims = pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1500}, _requests)
    assert _names(victims) == ["bu", "g1"]


def test_critical_pods_are_never_victims_and_not_enough_is_an_error():
    pods = [_pod("other-critical", cpu="4", priority=CRITICAL), _pod("small", cpu="500m")]
    with pytest.raises(NoVictims,
                       match=r"no set of running pods found to reclaim resources: \[\(res: cpu, q: 500\), \]"):
        pods_to_preempt(CRITICAL_POD, pods, {"cpu": 1000}, _requests)


def test_a_missing_pod_slot_is_freed_by_any_one_pod():
    pods = [_pod("a", cpu="1"), _pod("b", cpu="100m")]
    assert _names(pods_to_preempt(CRITICAL_POD, pods, {"pods": 1}, _requests)) == ["b"]
