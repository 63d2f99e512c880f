"""Defaulting (apiserver.defaults): Kubernetes' SetDefaults_* for the kinds kplane serves and the
DefaultTolerationSeconds admission plugin."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import defaults
from machinery import jsonconv
from machinery.api import core_pb2, policy_pb2, resource_pb2, scheduling_pb2


def decoded_pod(spec: dict[str, Any] | None = None) -> core_pb2.Pod:
    doc_spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx:1.27"}]}
    doc_spec.update(spec or {})
    p = jsonconv.from_dict(core_pb2.Pod, {"metadata": {"name": "web", "namespace": "default"}, "spec": doc_spec})
    defaults.default_pod(p)
    return p


def test_pod_spec_defaults() -> None:
    spec = decoded_pod().spec
    assert spec.restart_policy == "Always"
    assert spec.HasField("termination_grace_period_seconds") and spec.termination_grace_period_seconds == 30
    assert spec.dns_policy == "ClusterFirst"
    assert spec.scheduler_name == "default-scheduler"
    assert spec.HasField("enable_service_links") and spec.enable_service_links is True


@pytest.mark.parametrize("field,json,value", [
    ("restart_policy", "restartPolicy", "Never"),
    ("termination_grace_period_seconds", "terminationGracePeriodSeconds", 0),
    ("dns_policy", "dnsPolicy", "Default"),
    ("scheduler_name", "schedulerName", "my-scheduler"),
    ("enable_service_links", "enableServiceLinks", False),
])
def test_pod_spec_values_are_kept(field: str, json: str, value: Any) -> None:
    assert getattr(decoded_pod({json: value}).spec, field) == value


def test_pod_defaults_leave_security_context_priority_preemption_and_status_alone() -> None:
    p = decoded_pod()
    assert not p.spec.HasField("security_context")
    assert not p.spec.HasField("preemption_policy")
    assert not p.spec.HasField("priority")
    assert not p.HasField("status")


@pytest.mark.parametrize("image,policy", [
    ("nginx", "Always"),
    ("nginx:latest", "Always"),
    ("registry.example.com:5000/team/app", "Always"),
    ("nginx:1.27", "IfNotPresent"),
    ("registry.example.com:5000/team/app:v2", "IfNotPresent"),
    ("nginx@sha256:0123456789abcdef", "IfNotPresent"),
    ("nginx:latest@sha256:0123456789abcdef", "Always"),
])
def test_image_pull_policy(image: str, policy: str) -> None:
    assert decoded_pod({"containers": [{"name": "c", "image": image}]}).spec.containers[0].image_pull_policy == policy


def test_explicit_image_pull_policy_is_kept() -> None:
    c = decoded_pod({"containers": [{"name": "c", "image": "nginx", "imagePullPolicy": "Never"}]}).spec.containers[0]
    assert c.image_pull_policy == "Never"


def test_container_defaults() -> None:
    p = decoded_pod({"initContainers": [{"name": "init", "image": "busybox",
                                 "ports": [{"containerPort": 53, "protocol": "UDP"}]}],
             "containers": [{"name": "c", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]})
    for c in (p.spec.containers[0], p.spec.init_containers[0]):
        assert c.termination_message_path == "/dev/termination-log"
        assert c.termination_message_policy == "File"
    assert p.spec.containers[0].ports[0].protocol == "TCP"
    assert p.spec.init_containers[0].ports[0].protocol == "UDP"
    assert p.spec.containers[0].ports[0].host_port == 0


def test_host_network_defaults_host_ports() -> None:
    p = decoded_pod({"hostNetwork": True,
                     "containers": [{"name": "c", "image": "nginx:1", "ports": [{"containerPort": 80}]}]})
    assert p.spec.containers[0].ports[0].host_port == 80


@pytest.mark.parametrize("resources,requests", [
    ({"limits": {"cpu": "500m", "memory": "1Gi"}}, {"cpu": "500m", "memory": "1Gi"}),
    ({"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m"}}, {"cpu": "250m", "memory": "1Gi"}),
    ({"requests": {"cpu": "250m"}}, {"cpu": "250m"}),
    ({"limits": {"example.com/gpu": "1"}}, {"example.com/gpu": "1"}),
    ({}, {}),
])
def test_requests_default_to_limits(resources: dict[str, Any], requests: dict[str, str]) -> None:
    p = decoded_pod({"containers": [{"name": "c", "image": "nginx:1", "resources": resources}],
             "initContainers": [{"name": "i", "image": "busybox", "resources": resources}]})
    assert dict(p.spec.containers[0].resources.requests) == requests
    assert dict(p.spec.init_containers[0].resources.requests) == requests


@pytest.mark.parametrize("given,stored", [
    ("100u", "1m"),        # finer than a milli-unit: rounded up
    ("1.5", "1500m"),      # stored as Kubernetes prints it
    ("0.1", "100m"),
    ("2048Mi", "2Gi"),
    ("500m", "500m"),      # canonical input is kept
    ("1Gi", "1Gi"),
    ("lots", "lots"),      # malformed: left for validation
])
def test_quantities_are_rounded_and_canonical(given: str, stored: str) -> None:
    p = decoded_pod({"containers": [{"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": given}}}],
             "overhead": {"memory": given}})
    assert p.spec.containers[0].resources.requests["cpu"] == stored
    assert p.spec.overhead["memory"] == stored


def test_resize_policy_is_not_defaulted() -> None:
    assert len(decoded_pod().spec.containers[0].resize_policy) == 0


def test_pod_level_requests_default_to_pod_level_limits() -> None:
    p = decoded_pod({"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}})
    assert dict(p.spec.resources.requests) == {"cpu": "1", "memory": "1Gi"}


def test_pod_level_requests_default_to_container_requests() -> None:
    p = decoded_pod({"resources": {"limits": {"cpu": "1"}},
             "containers": [{"name": "a", "image": "x:1", "resources": {"requests": {"cpu": "100m"}}},
                            {"name": "b", "image": "x:1", "resources": {"requests": {"cpu": "200m"}}}]})
    assert dict(p.spec.resources.requests) == {"cpu": "300m"}


def test_default_tolerations_added() -> None:
    tolerations = [(t.key, t.operator, t.effect, t.toleration_seconds) for t in decoded_pod().spec.tolerations]
    assert tolerations == [("node.kubernetes.io/not-ready", "Exists", "NoExecute", 300),
                           ("node.kubernetes.io/unreachable", "Exists", "NoExecute", 300)]


@pytest.mark.parametrize("toleration,keys", [
    ({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
     ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]),
    ({"key": "node.kubernetes.io/unreachable", "operator": "Exists"},
     ["node.kubernetes.io/unreachable", "node.kubernetes.io/not-ready"]),
    ({"operator": "Exists"}, [""]),
    ({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoSchedule"},
     ["node.kubernetes.io/not-ready", "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]),
])
def test_default_tolerations_respect_existing_ones(toleration: dict[str, Any], keys: list[str]) -> None:
    assert [t.key for t in decoded_pod({"tolerations": [toleration]}).spec.tolerations] == keys


def test_pod_defaults_are_idempotent() -> None:
    p = decoded_pod({"containers": [{"name": "c", "image": "nginx", "resources": {"limits": {"cpu": "1"}}}]})
    again = core_pb2.Pod()
    again.CopyFrom(p)
    defaults.default_pod(again)
    assert again == p


def test_node_allocatable_defaults_to_capacity() -> None:
    node = core_pb2.Node()
    node.status.capacity.update({"cpu": "4", "memory": "8Gi", "pods": "110"})
    defaults.default_object("nodes", node)
    assert dict(node.status.allocatable) == {"cpu": "4", "memory": "8Gi", "pods": "110"}


def test_node_allocatable_is_kept() -> None:
    node = core_pb2.Node()
    node.status.capacity["cpu"] = "4"
    node.status.allocatable["cpu"] = "3500m"
    defaults.default_node(node)
    assert dict(node.status.allocatable) == {"cpu": "3500m"}


@pytest.mark.parametrize("given,want", [(None, "PreemptLowerPriority"), ("Never", "Never")])
def test_priority_class_preemption_policy(given: str | None, want: str) -> None:
    pc = scheduling_pb2.PriorityClass(value=10)
    if given is not None:
        pc.preemption_policy = given
    defaults.default_object("PriorityClass", pc)
    assert pc.preemption_policy == want


def test_pdb_has_no_defaults_in_policy_v1() -> None:
    pdb = policy_pb2.PodDisruptionBudget()
    pdb.spec.selector.match_labels["app"] = "web"
    before = pdb.SerializeToString()
    defaults.default_object("pdb", pdb)
    assert pdb.SerializeToString() == before
    assert not pdb.spec.HasField("min_available") and not pdb.spec.HasField("max_unavailable")


def test_resource_claim_allocation_mode_and_count() -> None:
    claim = resource_pb2.ResourceClaim()
    claim.spec.devices.requests.add(name="gpu").exactly.device_class_name = "gpu.example.com"
    all_req = claim.spec.devices.requests.add(name="all")
    all_req.exactly.device_class_name = "gpu.example.com"
    all_req.exactly.allocation_mode = "All"
    defaults.default_object("ResourceClaim", claim)
    exactly = claim.spec.devices.requests[0].exactly
    assert (exactly.allocation_mode, exactly.count) == ("ExactCount", 1)
    assert (all_req.exactly.allocation_mode, all_req.exactly.count) == ("All", 0)


def test_kinds_without_defaults_are_untouched() -> None:
    from machinery.api import coordination_pb2

    lease = coordination_pb2.Lease()
    lease.metadata.name = "node-1"
    defaults.default_object("Lease", lease)
    assert lease == coordination_pb2.Lease(metadata=lease.metadata)
