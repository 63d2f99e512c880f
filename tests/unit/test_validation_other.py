"""Validation of object metadata and of the kinds other than Pod: Node, PriorityClass,
PodDisruptionBudget, Lease, Event and the DRA kinds, plus the kind dispatcher. Messages are
asserted in full, as Kubernetes prints them."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf.message import Message

from apiserver import defaults
from apiserver.strategy import validate_create, validate_status_update, validate_update
from apiserver.validation import (
    name_is_dns_subdomain,
    validate_device_class,
    validate_event,
    validate_lease,
    validate_node,
    validate_node_update,
    validate_object_meta,
    validate_object_meta_update,
    validate_pdb,
    validate_pdb_status_update,
    validate_priority_class,
    validate_priority_class_update,
    validate_resource_claim,
    validate_resource_claim_status_update,
    validate_resource_claim_template,
    validate_resource_claim_update,
    validate_resource_slice,
    validate_resource_slice_update,
)
from apiserver.validation._common import (
    DNS_LABEL_REGEX_ERR,
    DNS_SUBDOMAIN_REGEX_ERR,
    PERCENT_REGEX_ERR,
    QUALIFIED_NAME_REGEX_ERR,
)
from machinery import errors, jsonconv
from machinery.api import coordination_pb2, core_pb2, meta_pb2, policy_pb2, resource_pb2, scheduling_pb2

QUANTITY_ERR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def messages(errs: list[errors.FieldError]) -> list[str]:
    return [str(e) for e in errs]


def obj(cls: type[Message], doc: dict[str, Any]) -> Any:
    return jsonconv.from_dict(cls, doc)


def copy_of(m: Any) -> Any:
    out = type(m)()
    out.CopyFrom(m)
    return out


# ---------------------------------------------------------------- metadata

META_CASES: list[tuple[str, dict[str, Any], bool, list[str]]] = [
    ("valid", {"name": "web", "namespace": "default", "labels": {"app": "web"}}, True, []),
    ("generateName", {"generateName": "web-", "name": "web-x7k2p", "namespace": "default"}, True, []),
    ("bad generateName", {"generateName": "Web-", "name": "web-1", "namespace": "default"}, True,
     [f'metadata.generateName: Invalid value: "Web-": {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("name required", {"namespace": "default"}, True,
     ["metadata.name: Required value: name or generateName is required"]),
    ("namespace not a DNS label", {"name": "web", "namespace": "my.ns"}, True,
     ['metadata.namespace: Invalid value: "my.ns": must not contain dots']),
    ("namespace on a cluster-scoped kind", {"name": "node-1", "namespace": "default"}, False,
     ["metadata.namespace: Forbidden: not allowed on this type"]),
    ("label key prefix", {"name": "web", "namespace": "default", "labels": {"Example.com/app": "web"}}, True,
     [f'metadata.labels: Invalid value: "Example.com/app": prefix part {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("label key too long", {"name": "web", "namespace": "default", "labels": {"a" * 64: "x"}}, True,
     [f'metadata.labels: Invalid value: "{"a" * 64}": name part must be no more than 63 characters']),
    ("annotation key", {"name": "web", "namespace": "default", "annotations": {"bad key": "x"}}, True,
     [f'metadata.annotations: Invalid value: "bad key": name part {QUALIFIED_NAME_REGEX_ERR}']),
    ("annotation keys are case-insensitive", {"name": "web", "namespace": "default",
                                              "annotations": {"Example.COM/Key": "x"}}, True, []),
    ("annotations over 256 KiB", {"name": "web", "namespace": "default", "annotations": {"big": "x" * (256 * 1024)}},
     True, ["metadata.annotations: Too long: may not be more than 262144 bytes"]),
    ("finalizer not standard", {"name": "web", "namespace": "default", "finalizers": ["cleanup"]}, True,
     ['metadata.finalizers[0]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it '
      "fully qualified"]),
    ("orphan and foreground", {"name": "web", "namespace": "default", "finalizers": ["orphan", "foregroundDeletion"]},
     True, ['metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: '
            "finalizer orphan and foregroundDeletion cannot be both set"]),
]


@pytest.mark.parametrize("meta,namespaced,want", [c[1:] for c in META_CASES], ids=[c[0] for c in META_CASES])
def test_validate_object_meta(meta: dict[str, Any], namespaced: bool, want: list[str]) -> None:
    assert messages(validate_object_meta(obj(meta_pb2.ObjectMeta, meta), namespaced, name_is_dns_subdomain)) == want


OLD_META = {"name": "web", "namespace": "default", "uid": "u-1", "creationTimestamp": "2026-01-02T03:04:05Z",
            "generation": 2}
META_UPDATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("labels may change", {}, {"labels": {"tier": "a"}}, []),
    ("uid may be left empty", {}, {"uid": ""}, []),
    ("name", {}, {"name": "api"}, ['metadata.name: Invalid value: "api": field is immutable']),
    ("namespace", {}, {"namespace": "prod"}, ['metadata.namespace: Invalid value: "prod": field is immutable']),
    ("uid", {}, {"uid": "u-2"}, ['metadata.uid: Invalid value: "u-2": field is immutable']),
    ("creationTimestamp", {}, {"creationTimestamp": "2026-01-02T03:04:06Z"},
     ["metadata.creationTimestamp: Invalid value: 2026-01-02 03:04:06 +0000 UTC: field is immutable"]),
    ("generation", {}, {"generation": 1}, ["metadata.generation: Invalid value: 1: must not be decremented"]),
    ("finalizers while deleting", {"deletionTimestamp": "2026-01-02T03:04:05Z", "finalizers": ["a.io/x"]},
     {"finalizers": ["a.io/x", "a.io/y"]},
     ['metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, '
      'found new finalizers []string{"a.io/y"}']),
]


@pytest.mark.parametrize("old_extra,new_extra,want", [c[1:] for c in META_UPDATE_CASES],
                         ids=[c[0] for c in META_UPDATE_CASES])
def test_validate_object_meta_update(old_extra: dict[str, Any], new_extra: dict[str, Any], want: list[str]) -> None:
    old = obj(meta_pb2.ObjectMeta, {**OLD_META, **old_extra})
    new = obj(meta_pb2.ObjectMeta, {**OLD_META, **old_extra, **new_extra})
    assert messages(validate_object_meta_update(new, old)) == want


# ---------------------------------------------------------------- nodes


def node_from_json(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
                   name: str = "node-1") -> core_pb2.Node:
    n = obj(core_pb2.Node, {"metadata": {"name": name}, "spec": spec or {}, "status": status or {}})
    defaults.default_node(n)
    return n


NODE_CASES: list[tuple[str, dict[str, Any], dict[str, Any], list[str]]] = [
    ("valid", {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
     {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}, []),
    ("taint effect", {"taints": [{"key": "dedicated", "effect": "Sometimes"}]}, {},
     ['metadata.taints[0].effect: Unsupported value: "Sometimes": supported values: "NoSchedule", '
      '"PreferNoSchedule", "NoExecute"']),
    ("taint effect required", {"taints": [{"key": "dedicated"}]}, {}, ["metadata.taints[0].effect: Required value"]),
    ("taint key", {"taints": [{"key": "bad key", "effect": "NoSchedule"}]}, {},
     [f'metadata.taints[0].key: Invalid value: "bad key": name part {QUALIFIED_NAME_REGEX_ERR}']),
    ("taint value", {"taints": [{"key": "k", "value": "a b", "effect": "NoSchedule"}]}, {},
     ["metadata.taints[0].value: Invalid value: \"a b\": a valid label must be an empty string or consist of "
      "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
      "'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?"
      "[A-Za-z0-9])?')"]),
    ("taints unique by key and effect", {"taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"},
                                                    {"key": "dedicated", "value": "b", "effect": "NoSchedule"}]}, {},
     ['metadata.taints[1]: Duplicate value: core.Taint{Key:"dedicated", Value:"b", Effect:"NoSchedule", '
      "TimeAdded:(*v1.Time)(nil)}: taints must be unique by key and effect pair"]),
    ("same key, other effect", {"taints": [{"key": "dedicated", "effect": "NoSchedule"},
                                           {"key": "dedicated", "effect": "NoExecute"}]}, {}, []),
    ("negative capacity", {}, {"capacity": {"cpu": "-1"}},
     ['status.capacity.cpu: Invalid value: "-1": must be greater than or equal to 0',
      'status.allocatable.cpu: Invalid value: "-1": must be greater than or equal to 0']),
    ("pods must be whole", {}, {"capacity": {"cpu": "4"}, "allocatable": {"pods": "1500m"}},
     ['status.allocatable.pods: Invalid value: "1500m": must be an integer']),
    ("malformed capacity", {}, {"capacity": {"memory": "8 GB"}, "allocatable": {"memory": "8Gi"}},
     [f'status.capacity.memory: Invalid value: "8 GB": {QUANTITY_ERR}']),
    ("podCIDRs", {"podCIDRs": ["10.0.0.0/33"]}, {},
     ['spec.podCIDRs[0]: Invalid value: "10.0.0.0/33": '
      'must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)']),
    ("disableResizePreemption owners", {"podPreemptionPolicy": {"disableResizePreemption": [
        "autoscaling.k8s.io/cluster-autoscaler", "autoscaling.k8s.io/vpa-updater"]}}, {}, []),
    ("disableResizePreemption label key",
     {"podPreemptionPolicy": {"disableResizePreemption": ["Cluster Autoscaler"]}}, {},
     [f'spec.podPreemptionPolicy.disableResizePreemption[0]: Invalid value: "Cluster Autoscaler": name part '
      f"{QUALIFIED_NAME_REGEX_ERR}"]),
    ("disableResizePreemption is a set", {"podPreemptionPolicy": {"disableResizePreemption": ["a.io/x", "a.io/x"]}}, {},
     ['spec.podPreemptionPolicy.disableResizePreemption[1]: Duplicate value: "a.io/x"']),
    ("disableResizePreemption at most 20", {"podPreemptionPolicy": {"disableResizePreemption": [
        f"owner.io/o{i}" for i in range(21)]}}, {},
     ["spec.podPreemptionPolicy.disableResizePreemption: Too many: 21: must have at most 20 items"]),
]


@pytest.mark.parametrize("spec,status,want", [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_validate_node(spec: dict[str, Any], status: dict[str, Any], want: list[str]) -> None:
    assert messages(validate_node(node_from_json(spec, status))) == want


def test_node_name() -> None:
    assert messages(validate_create("no", node_from_json(name="Node_1"))) == [
        f'metadata.name: Invalid value: "Node_1": {DNS_SUBDOMAIN_REGEX_ERR}']


NODE_UPDATE_CASES: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    ("taints and unschedulable", {"podCIDRs": ["10.0.1.0/24"], "providerID": "kplane://node-1"},
     lambda n: (setattr(n.spec, "unschedulable", True), n.spec.taints.add(key="k", effect="NoSchedule")), []),
    ("podCIDR set once", {}, lambda n: n.spec.pod_cidrs.append("10.0.1.0/24"), []),
    ("podCIDR changed", {"podCIDRs": ["10.0.1.0/24"]}, lambda n: n.spec.pod_cidrs.__setitem__(0, "10.0.2.0/24"),
     ['spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid']),
    ("providerID changed", {"providerID": "kplane://node-1"}, lambda n: setattr(n.spec, "provider_id", "x://y"),
     ['spec.providerID: Forbidden: node updates may not change providerID except from "" to valid']),
    ("duplicate addresses", {}, lambda n: (n.status.addresses.add(type="InternalIP", address="10.0.0.1"),
                                           n.status.addresses.add(type="InternalIP", address="10.0.0.1")),
     ['status.addresses[1]: Duplicate value: core.NodeAddress{Type:"InternalIP", Address:"10.0.0.1"}']),
    ("invalid taint", {}, lambda n: n.spec.taints.add(key="k", effect="Never"),
     ['metadata.taints[0].effect: Unsupported value: "Never": supported values: "NoSchedule", "PreferNoSchedule", '
      '"NoExecute"']),
]


@pytest.mark.parametrize("spec,change,want", [c[1:] for c in NODE_UPDATE_CASES], ids=[c[0] for c in NODE_UPDATE_CASES])
def test_validate_node_update(spec: dict[str, Any], change: Any, want: list[str]) -> None:
    old = node_from_json(spec)
    new = copy_of(old)
    change(new)
    assert messages(validate_node_update(new, old)) == want
    assert messages(validate_status_update("Node", new, old)) == want


# ---------------------------------------------------------------- priority classes


def pc(name: str, value: int, **extra: Any) -> scheduling_pb2.PriorityClass:
    out = obj(scheduling_pb2.PriorityClass, {"metadata": {"name": name}, "value": value, **extra})
    defaults.default_priority_class(out)
    return out


RESERVED = ("metadata.name: Forbidden: "
            "priority class names with 'system-' prefix are reserved for system use only. error: ")
PC_CASES: list[tuple[str, Any, list[str]]] = [
    ("user class", pc("high", 1000), []),
    ("highest user value", pc("top", 1_000_000_000), []),
    ("above user maximum", pc("too-high", 1_000_000_001),
     ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]),
    ("system-node-critical", pc("system-node-critical", 2_000_001_000), []),
    ("system-cluster-critical", pc("system-cluster-critical", 2_000_000_000), []),
    ("unknown system class", pc("system-foo", 10), [RESERVED + "system-foo is not a known system priority class"]),
    ("system class value", pc("system-cluster-critical", 5),
     [RESERVED + "value of system-cluster-critical PriorityClass must be 2000000000"]),
    ("system class globalDefault", pc("system-node-critical", 2_000_001_000, globalDefault=True),
     [RESERVED + "globalDefault of system-node-critical PriorityClass must be false"]),
    ("preemptionPolicy", pc("high", 10, preemptionPolicy="Sometimes"),
     ['preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"']),
    ("name", pc("High", 10), [f'metadata.name: Invalid value: "High": {DNS_SUBDOMAIN_REGEX_ERR}']),
]


@pytest.mark.parametrize("priority_class,want", [c[1:] for c in PC_CASES], ids=[c[0] for c in PC_CASES])
def test_validate_priority_class(priority_class: scheduling_pb2.PriorityClass, want: list[str]) -> None:
    assert messages(validate_priority_class(priority_class)) == want


@pytest.mark.parametrize("change,want", [
    (lambda p: setattr(p, "description", "for web"), []),
    (lambda p: setattr(p, "global_default", True), []),
    (lambda p: setattr(p, "value", 2000), ["value: Forbidden: may not be changed in an update."]),
    (lambda p: setattr(p, "preemption_policy", "Never"),
     ['preemptionPolicy: Invalid value: "Never": field is immutable']),
], ids=["description", "globalDefault", "value", "preemptionPolicy"])
def test_validate_priority_class_update(change: Any, want: list[str]) -> None:
    old = pc("high", 1000)
    new = copy_of(old)
    change(new)
    assert messages(validate_priority_class_update(new, old)) == want
    assert messages(validate_update("pc", new, old)) == want


# ---------------------------------------------------------------- pod disruption budgets


def pdb(spec: dict[str, Any], name: str = "web") -> policy_pb2.PodDisruptionBudget:
    return obj(policy_pb2.PodDisruptionBudget, {"metadata": {"name": name, "namespace": "default"}, "spec": spec})


SELECTOR = {"matchLabels": {"app": "web"}}
PDB_CASES: list[tuple[str, dict[str, Any], str, list[str]]] = [
    ("minAvailable int", {"minAvailable": 2, "selector": SELECTOR}, "web", []),
    ("maxUnavailable percent", {"maxUnavailable": "50%", "selector": SELECTOR}, "web", []),
    ("neither set", {"selector": SELECTOR}, "web", []),
    ("both set", {"minAvailable": 1, "maxUnavailable": 1, "selector": SELECTOR}, "web",
     ["spec: Invalid value: policy.PodDisruptionBudgetSpec{MinAvailable:&intstr.IntOrString{Type:0, IntVal:1, "
      'StrVal:""}, Selector:&v1.LabelSelector{...}, MaxUnavailable:&intstr.IntOrString{Type:0, IntVal:1, StrVal:""}, '
      "UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}: "
      "minAvailable and maxUnavailable cannot be both set"]),
    ("negative", {"minAvailable": -1}, "web",
     ["spec.minAvailable: Invalid value: -1: must be greater than or equal to 0"]),
    ("not a percent", {"maxUnavailable": "half%"}, "web",
     [f'spec.maxUnavailable: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, StrVal:"half%"}}: '
      f'{PERCENT_REGEX_ERR}']),
    ("over 100%", {"minAvailable": "150%"}, "web",
     ['spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:"150%"}: '
      'must not be greater than 100%']),
    ("selector operator", {"selector": {"matchExpressions": [{"key": "app", "operator": "Like", "values": ["a"]}]}},
     "web", ['spec.selector.matchExpressions[0].operator: Invalid value: "Like": not a valid selector operator']),
    ("unhealthyPodEvictionPolicy", {"unhealthyPodEvictionPolicy": "Never"}, "web",
     ['spec.unhealthyPodEvictionPolicy: Unsupported value: "Never": '
      'supported values: "AlwaysAllow", "IfHealthyBudget"']),
    ("name is a path segment", {"minAvailable": 1}, "a/b",
     ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]),
]


@pytest.mark.parametrize("spec,name,want", [c[1:] for c in PDB_CASES], ids=[c[0] for c in PDB_CASES])
def test_validate_pdb(spec: dict[str, Any], name: str, want: list[str]) -> None:
    assert messages(validate_pdb(pdb(spec, name))) == want


def test_pdb_spec_is_mutable_in_policy_v1() -> None:
    old = pdb({"minAvailable": 1, "selector": SELECTOR})
    new = copy_of(old)
    new.spec.min_available = "50%"
    assert messages(validate_update("PodDisruptionBudget", new, old)) == []
    new.spec.max_unavailable = "1"
    assert len(validate_update("PodDisruptionBudget", new, old)) == 1


def test_pdb_status_update() -> None:
    old = pdb({"minAvailable": 1, "selector": SELECTOR})
    new = copy_of(old)
    new.status.disruptions_allowed = -1
    new.status.conditions.add(type="DisruptionAllowed", status="Maybe", reason="bad reason",
                              last_transition_time="2026-01-01T00:00:00Z")
    assert messages(validate_pdb_status_update(new, old)) == [
        'status.conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"',
        'status.conditions[0].reason: Invalid value: "bad reason": a condition reason must start with alphabetic '
        "character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an "
        "alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or "
        "'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
        "status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0",
    ]


# ---------------------------------------------------------------- leases


def lease(spec: dict[str, Any], name: str = "node-1") -> coordination_pb2.Lease:
    return obj(coordination_pb2.Lease, {"metadata": {"name": name, "namespace": "kube-node-lease"}, "spec": spec})


LEASE_CASES: list[tuple[str, Any, list[str]]] = [
    ("valid",
     lease({"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2026-01-01T00:00:00.000000Z"}), []),
    ("duration", lease({"leaseDurationSeconds": 0}),
     ["spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"]),
    ("transitions", lease({"leaseTransitions": -1}),
     ["spec.leaseTransitions: Invalid value: -1: must be greater than or equal to 0"]),
    ("strategy", lease({"strategy": "Newest"}),
     ['spec.strategy.strategy: Unsupported value: "Newest": supported values: "OldestEmulationVersion"']),
    ("preferredHolder needs a strategy", lease({"preferredHolder": "node-2"}),
     ["spec.preferredHolder: Forbidden: may only be specified if `strategy` is defined"]),
    ("name", lease({}, name="Node_1"), [f'metadata.name: Invalid value: "Node_1": {DNS_SUBDOMAIN_REGEX_ERR}']),
]


@pytest.mark.parametrize("the_lease,want", [c[1:] for c in LEASE_CASES], ids=[c[0] for c in LEASE_CASES])
def test_validate_lease(the_lease: coordination_pb2.Lease, want: list[str]) -> None:
    assert messages(validate_lease(the_lease)) == want


# ---------------------------------------------------------------- events


def event(**fields: Any) -> core_pb2.Event:
    doc = {"metadata": {"name": "web.17a", "namespace": "default"}, "reason": "Scheduled", "type": "Normal",
           "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}}
    doc.update(fields)
    return obj(core_pb2.Event, doc)


EVENT_CASES: list[tuple[str, Any, list[str]]] = [
    ("valid", event(), []),
    ("cluster-scoped object in default", event(involvedObject={"kind": "Node", "name": "node-1"}), []),
    ("namespace mismatch", event(involvedObject={"kind": "Pod", "namespace": "other", "name": "web"}),
     ['involvedObject.namespace: Invalid value: "other": does not match event.namespace']),
    ("eventTime needs the reporting fields", event(eventTime="2026-01-01T00:00:00.000000Z", reason=""),
     ["reportingController: Required value",
      'reportingController: Invalid value: "": name part must be non-empty',
      f'reportingController: Invalid value: "": name part {QUALIFIED_NAME_REGEX_ERR}',
      "reportingInstance: Required value", "action: Required value", "reason: Required value"]),
    ("type", event(type="Info"), ['type: Invalid value: "": has invalid value: Info']),
    ("name is a path segment", event(metadata={"name": "..", "namespace": "default"}),
     ["metadata.name: Invalid value: \"..\": may not be '..'"]),
]


@pytest.mark.parametrize("the_event,want", [c[1:] for c in EVENT_CASES], ids=[c[0] for c in EVENT_CASES])
def test_validate_event(the_event: core_pb2.Event, want: list[str]) -> None:
    assert messages(validate_event(the_event)) == want


# ---------------------------------------------------------------- DRA


def claim(requests: list[dict[str, Any]], name: str = "gpu-claim") -> resource_pb2.ResourceClaim:
    c = obj(resource_pb2.ResourceClaim, {"metadata": {"name": name, "namespace": "default"},
                                         "spec": {"devices": {"requests": requests}}})
    defaults.default_object("ResourceClaim", c)
    return c


GPU = {"deviceClassName": "gpu.example.com"}
CLAIM_CASES: list[tuple[str, list[dict[str, Any]], list[str]]] = [
    ("valid", [{"name": "gpu", "exactly": GPU}], []),
    ("firstAvailable", [{"name": "gpu", "firstAvailable": [{"name": "big", **GPU}, {"name": "small", **GPU}]}], []),
    ("request name", [{"name": "GPU", "exactly": GPU}],
     [f'spec.devices.requests[0].name: Invalid value: "GPU": {DNS_LABEL_REGEX_ERR}']),
    ("exactly one kind of request", [{"name": "gpu"}],
     ["spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"]),
    ("both kinds of request", [{"name": "gpu", "exactly": GPU, "firstAvailable": [{"name": "a", **GPU}]}],
     ["spec.devices.requests[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
      "but multiple fields are set"]),
    ("deviceClassName required", [{"name": "gpu", "exactly": {}}],
     ["spec.devices.requests[0].exactly.deviceClassName: Required value"]),
    ("count with All", [{"name": "gpu", "exactly": {**GPU, "allocationMode": "All", "count": 2}}],
     ["spec.devices.requests[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"]),
    ("negative count", [{"name": "gpu", "exactly": {**GPU, "count": -1}}],
     ["spec.devices.requests[0].exactly.count: Invalid value: -1: must be greater than zero"]),
    ("allocationMode", [{"name": "gpu", "exactly": {**GPU, "allocationMode": "Some", "count": 1}}],
     ['spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": '
      'supported values: "All", "ExactCount"']),
    ("selector needs cel", [{"name": "gpu", "exactly": {**GPU, "selectors": [{}]}}],
     ["spec.devices.requests[0].exactly.selectors[0].cel: Required value"]),
    ("request names unique", [{"name": "gpu", "exactly": GPU}, {"name": "gpu", "exactly": GPU}],
     ['spec.devices.requests[1]: Duplicate value: "gpu"']),
    ("at most 32 requests", [{"name": f"r{i}", "exactly": GPU} for i in range(33)],
     ["spec.devices.requests: Too many: 33: must have at most 32 items"]),
]


@pytest.mark.parametrize("requests,want", [c[1:] for c in CLAIM_CASES], ids=[c[0] for c in CLAIM_CASES])
def test_validate_resource_claim(requests: list[dict[str, Any]], want: list[str]) -> None:
    assert messages(validate_resource_claim(claim(requests))) == want


def test_resource_claim_spec_is_immutable() -> None:
    old = claim([{"name": "gpu", "exactly": GPU}])
    new = copy_of(old)
    new.spec.devices.requests[0].exactly.count = 2
    errs = messages(validate_resource_claim_update(new, old))
    assert len(errs) == 1
    assert errs[0].startswith("spec: Invalid value: resource.ResourceClaimSpec{")
    assert errs[0].endswith(": field is immutable")


def test_resource_claim_status() -> None:
    old = claim([{"name": "gpu", "exactly": GPU}])
    new = copy_of(old)
    new.status.reserved_for.add(resource="pods", name="web", uid="u-1")
    assert messages(validate_resource_claim_status_update(new, old)) == [
        "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"]
    new.status.allocation.devices.results.add(request="cpu", driver="gpu.example.com", pool="node-1", device="gpu-0")
    assert messages(validate_status_update("ResourceClaim", new, old)) == [
        "status.allocation.devices.results[0].request: Invalid value: \"cpu\": must be the name of a request in the "
        "claim or the name of a request and a subrequest separated by '/'"]
    new.status.allocation.devices.results[0].request = "gpu"
    assert messages(validate_status_update("ResourceClaim", new, old)) == []


def test_resource_claim_template_metadata() -> None:
    template = obj(resource_pb2.ResourceClaimTemplate, {
        "metadata": {"name": "gpu", "namespace": "default"},
        "spec": {"metadata": {"name": "x", "labels": {"app": "web"}},
                 "spec": {"devices": {"requests": [{"name": "gpu"}]}}}})
    assert messages(validate_resource_claim_template(template)) == [
        "spec.metadata.name: Forbidden: cannot be set",
        "spec.spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required",
    ]


def slice_(spec: dict[str, Any]) -> resource_pb2.ResourceSlice:
    doc_spec = {"driver": "gpu.example.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1}}
    doc_spec.update(spec)
    return obj(resource_pb2.ResourceSlice, {"metadata": {"name": "node-1-gpu"}, "spec": doc_spec})


EXACTLY_ONE = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
SLICE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("valid", {"nodeName": "node-1", "devices": [{"name": "gpu-0", "attributes": {"model": {"string": "a100"}},
                                                  "capacity": {"memory": {"value": "40Gi"}}}]}, []),
    ("no node selection", {}, [f"spec: Required value: {EXACTLY_ONE}"]),
    ("two node selections", {"nodeName": "node-1", "allNodes": True},
     [f'spec: Invalid value: "{{`nodeName`, `allNodes`}}": {EXACTLY_ONE}, but multiple fields are set']),
    ("driver", {"driver": "GPU_driver", "allNodes": True},
     [f'spec.driver: Invalid value: "GPU_driver": {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("pool count", {"allNodes": True, "pool": {"name": "p", "resourceSliceCount": 0}},
     ["spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero"]),
    ("device names unique", {"allNodes": True, "devices": [{"name": "gpu-0"}, {"name": "gpu-0"}]},
     ['spec.devices[1]: Duplicate value: "gpu-0"']),
    ("attribute has one value", {"allNodes": True, "devices": [{"name": "gpu-0", "attributes": {"model": {}}}]},
     ['spec.devices[0].attributes[model]: Invalid value: "": exactly one value must be specified']),
    ("capacity quantity", {"allNodes": True, "devices": [{"name": "gpu-0", "capacity": {"memory": {"value": "lots"}}}]},
     [f'spec.devices[0].capacity[memory].value: Invalid value: "lots": {QUANTITY_ERR}']),
]


@pytest.mark.parametrize("spec,want", [c[1:] for c in SLICE_CASES], ids=[c[0] for c in SLICE_CASES])
def test_validate_resource_slice(spec: dict[str, Any], want: list[str]) -> None:
    assert messages(validate_resource_slice(slice_(spec))) == want


def test_resource_slice_driver_is_immutable() -> None:
    old = slice_({"nodeName": "node-1"})
    new = copy_of(old)
    new.spec.driver = "other.example.com"
    assert messages(validate_resource_slice_update(new, old)) == [
        'spec.driver: Invalid value: "other.example.com": field is immutable']


@pytest.mark.parametrize("spec,want", [
    ({"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}, []),
    ({"selectors": [{}]}, ["spec.selectors[0].cel: Required value"]),
    ({"extendedResourceName": "example.com/gpu"}, []),
    ({"extendedResourceName": "cpu"},
     ['spec.extendedResourceName: Invalid value: "cpu": must be a valid extended resource name']),
], ids=["selector", "selector needs cel", "extended resource", "not an extended resource"])
def test_validate_device_class(spec: dict[str, Any], want: list[str]) -> None:
    dc = obj(resource_pb2.DeviceClass, {"metadata": {"name": "gpu.example.com"}, "spec": spec})
    assert messages(validate_device_class(dc)) == want


# ---------------------------------------------------------------- dispatcher


@pytest.mark.parametrize("kind_name", ["Pod", "pods", "pod", "po"])
def test_dispatch_accepts_kubectl_names(kind_name: str) -> None:
    pod = obj(core_pb2.Pod, {"metadata": {"name": "web", "namespace": "default"},
                             "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    defaults.default_object(kind_name, pod)
    assert validate_create(kind_name, pod) == []


def test_status_update_of_a_kind_without_status() -> None:
    with pytest.raises(ValueError, match="Lease has no status subresource"):
        validate_status_update("leases", lease({}), lease({}))
