"""Which pods a ReplicaSet deletes first (controllers.ranking), rule by rule as Kubernetes'
ActivePodsWithRanks orders them, and the expectations that keep a slow informer from making it
act twice (controllers.expectations)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from controllers.expectations import Expectations
from controllers.ranking import (
    deletion_cost,
    is_pod_available,
    pods_to_delete,
    rank_by_related_pods_on_node,
    sort_for_deletion,
)
from machinery import timeutil
from machinery.api import core_pb2
from tests.harness.builders import MakePod

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


def _ago(seconds: float) -> str:
    return timeutil.rfc3339(NOW - timedelta(seconds=seconds))


def _pod(name: str, *, node: str = "node-1", phase: str = "Running", ready_for: float | None = 3600,
         created: float = 7200, restarts: int = 0, cost: str | None = None, uid: str = "") -> core_pb2.Pod:
    """A pod on ``node`` in ``phase``, Ready for ``ready_for`` seconds (None: not Ready), created
    ``created`` seconds ago, its container restarted ``restarts`` times."""
    p = MakePod().name(name).uid(uid or f"uid-{name}").phase(phase)
    if node:
        p.node(node)
    if ready_for is not None:
        p.condition("Ready", "True", last_transition_time=_ago(ready_for))
    if cost is not None:
        p.annotation("controller.kubernetes.io/pod-deletion-cost", cost)
    pod = p.obj()
    pod.metadata.creation_timestamp = _ago(created)
    pod.status.container_statuses.add(name="c1", restart_count=restarts)
    return pod


def _order(*pods: core_pb2.Pod, ranks: list[int] | None = None) -> list[str]:
    return [p.metadata.name for p in sort_for_deletion(list(pods), ranks or [0] * len(pods), NOW)]


@pytest.mark.parametrize("first, second, rule", [
    (_pod("a", node=""), _pod("b"), "1. unassigned before assigned"),
    (_pod("a", phase="Pending"), _pod("b", phase="Unknown"), "2. Pending before Unknown"),
    (_pod("a", phase="Unknown"), _pod("b", phase="Running"), "2. Unknown before Running"),
    (_pod("a", ready_for=None), _pod("b"), "3. not Ready before Ready"),
    (_pod("a", cost="-5"), _pod("b", cost="10"), "4. lower deletion cost first"),
    (_pod("a", ready_for=10), _pod("b", ready_for=36000), "6. Ready for less time first (log scale)"),
    (_pod("a", restarts=3), _pod("b", restarts=1), "7. more restarts first"),
    (_pod("a", created=10), _pod("b", created=36000), "8. newer first (log scale)"),
])
def test_each_rule_of_active_pods_with_ranks(first, second, rule):
    assert _order(second, first) == ["a", "b"], rule
    assert _order(first, second) == ["a", "b"], rule


def test_rules_apply_in_kubernetes_order():
    """An earlier rule wins over every later one."""
    assert _order(_pod("ready-new", created=1, restarts=9), _pod("unready-old", ready_for=None)) == \
        ["unready-old", "ready-new"], "not Ready beats restarts and age"
    assert _order(_pod("cheap-ready", cost="-1"), _pod("dear-ready", cost="1", ready_for=1)) == \
        ["cheap-ready", "dear-ready"], "deletion cost beats ready time"
    assert _order(_pod("a", ready_for=1), _pod("b", ready_for=36000), ranks=[1, 2]) == ["b", "a"], \
        "rank (doubled up) beats ready time"


def test_times_of_the_same_power_of_two_tie_and_the_uid_decides():
    """LogarithmicScaleDown: 100 s and 120 s ago are both in [2^36, 2^37) ns: the uid orders them."""
    a, b = _pod("a", created=100, uid="uid-2"), _pod("b", created=120, uid="uid-1")
    assert _order(a, b) == ["b", "a"]
    a2, b2 = _pod("a", created=100, uid="uid-1"), _pod("b", created=120, uid="uid-2")
    assert _order(b2, a2) == ["a", "b"]


def test_an_invalid_deletion_cost_counts_as_zero():
    assert deletion_cost(_pod("a", cost="abc")) == 0
    assert deletion_cost(_pod("a", cost="2147483648")) == 0
    assert deletion_cost(_pod("a", cost="-2147483648")) == -2147483648
    assert deletion_cost(_pod("a")) == 0


def test_rank_is_the_number_of_active_related_pods_on_the_node():
    mine = [_pod("a", node="n1"), _pod("b", node="n2")]
    related = mine + [_pod("c", node="n1"), _pod("d", node="n1", phase="Succeeded")]
    assert rank_by_related_pods_on_node(mine, related) == [2, 1]


def test_pods_to_delete_prefers_the_doubled_up_node():
    """Two replicas on n1 and one on n2, a Deployment's old pod also on n1: one of n1's goes."""
    pods = [_pod("n1-a", node="n1", ready_for=7200), _pod("n1-b", node="n1", ready_for=7100),
            _pod("n2-a", node="n2", ready_for=10)]
    related = pods + [_pod("old", node="n1")]
    assert [p.metadata.name for p in pods_to_delete(pods, related, 1, NOW)][0].startswith("n1-")
    assert len(pods_to_delete(pods, related, 5, NOW)) == 3


def test_available_means_ready_for_min_ready_seconds():
    pod = _pod("a", ready_for=10)
    assert is_pod_available(pod, 0, NOW) and is_pod_available(pod, 9, NOW)
    assert not is_pod_available(pod, 10, NOW), "strictly more than minReadySeconds (Kubernetes' Before)"
    assert not is_pod_available(_pod("b", ready_for=None), 0, NOW)


# ---------------------------------------------------------------- expectations


def test_expectations_wait_for_every_create_and_delete_then_expire():
    t = [0.0]
    exp = Expectations(timeout=300, clock=lambda: t[0])
    assert exp.satisfied("ns/rs"), "none recorded: act"
    exp.expect_creations("ns/rs", 2)
    assert not exp.satisfied("ns/rs")
    exp.creation_observed("ns/rs")
    assert not exp.satisfied("ns/rs")
    exp.creation_observed("ns/rs")
    assert exp.satisfied("ns/rs")
    exp.expect_deletions("ns/rs", ["ns/a", "ns/b"])
    exp.deletion_observed("ns/rs", "ns/a")
    exp.deletion_observed("ns/rs", "ns/a")  # its deletionTimestamp, then its DELETED: counted once
    assert exp.pending("ns/rs") == (0, 1)
    exp.deletion_observed("ns/rs", "ns/other")
    assert not exp.satisfied("ns/rs")
    t[0] = 301.0
    assert exp.satisfied("ns/rs"), "a lost watch event cannot keep it asleep for ever"
    exp.delete("ns/rs")
    assert exp.pending("ns/rs") == (0, 0)
