"""apiserver.strategy: every kind has its strategy, which holds the kind's validation and drops
the fields of disabled feature gates."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import strategy
from machinery.api import core_pb2
from machinery.featuregates import FeatureGates
from machinery.kinds import KINDS, NODE, Kind, lookup
from tests.harness.builders import MakeNode


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_a_strategy_with_its_validation(kind: Kind[Any, Any]) -> None:
    s = strategy.for_kind(kind)
    assert s.kind is kind
    assert callable(s.validate) and callable(s.validate_update)
    empty = kind.message()
    if kind.has_status:  # a status subresource validates its writes
        assert isinstance(s.validate_status_update(empty, empty), list)
    else:
        with pytest.raises(ValueError, match=f"{kind.name} has no status subresource"):
            s.validate_status_update(empty, empty)


def test_validation_by_kind_name_takes_what_kubectl_takes() -> None:
    pod = lookup("po").message()
    assert strategy.validate_create("pods", pod) == strategy.for_kind(lookup("Pod")).validate(pod)
    assert any("metadata.name" in str(e) for e in strategy.validate_create("po", pod))


# KEP-5836's "dedicated enablement/disablement tests at the kube-apiserver registry layer": the node
# strategy's dropDisabledFields for spec.podPreemptionPolicy (SchedulerPreemptionForPodResize).
GATE_OFF = FeatureGates()
GATE_ON = FeatureGates({"SchedulerPreemptionForPodResize": True})


def copy_of(node: core_pb2.Node) -> core_pb2.Node:
    out = core_pb2.Node()
    out.CopyFrom(node)
    return out


def _node(*owners: str) -> core_pb2.Node:
    builder = MakeNode().name("n1")
    if owners:
        builder.disable_resize_preemption(*owners)
    return builder.obj()


def _stored(*owners: str) -> core_pb2.Node:
    node = _node(*owners)
    strategy.prepare_for_create(NODE, node, GATE_ON)
    return node


@pytest.mark.parametrize("gates, kept", [(GATE_OFF, False), (GATE_ON, True)], ids=["gate off", "gate on"])
def test_a_node_created_with_a_pod_preemption_policy_keeps_it_only_with_the_gate(gates, kept) -> None:
    node = _node("autoscaler.example.com")
    strategy.prepare_for_create(NODE, node, gates)
    assert node.spec.HasField("pod_preemption_policy") is kept
    assert list(node.spec.pod_preemption_policy.disable_resize_preemption) == (
        ["autoscaler.example.com"] if kept else [])


@pytest.mark.parametrize("gates, kept", [(GATE_OFF, False), (GATE_ON, True)], ids=["gate off", "gate on"])
def test_an_update_that_adds_the_policy_keeps_it_only_with_the_gate(gates, kept) -> None:
    old = _stored()
    new = copy_of(old)
    new.spec.pod_preemption_policy.disable_resize_preemption.append("autoscaler.example.com")
    strategy.prepare_for_update(NODE, new, old, gates)
    assert new.spec.HasField("pod_preemption_policy") is kept


def test_a_policy_already_stored_is_kept_and_may_change_with_the_gate_off() -> None:
    old = _stored("autoscaler.example.com")
    new = copy_of(old)
    new.metadata.labels["zone"] = "a"
    strategy.prepare_for_update(NODE, new, old, GATE_OFF)
    assert list(new.spec.pod_preemption_policy.disable_resize_preemption) == ["autoscaler.example.com"]
    changed = copy_of(old)
    del changed.spec.pod_preemption_policy.disable_resize_preemption[:]
    changed.spec.pod_preemption_policy.disable_resize_preemption.append("other.example.com")
    strategy.prepare_for_update(NODE, changed, old, GATE_OFF)
    assert list(changed.spec.pod_preemption_policy.disable_resize_preemption) == ["other.example.com"]
