"""core/v1 Namespace, ResourceQuota and LimitRange: Kubernetes' defaulting (SetDefaults_Namespace,
SetDefaults_LimitRangeItem, SetDefaults_ResourceList) and validation (ValidateNamespace*,
ValidateResourceQuota*, ValidateLimitRange), with the messages and paths Kubernetes prints,
asserted in full; and the NamespaceLifecycle admission plugin's answers."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import defaults, strategy
from apiserver.admission.namespacelifecycle import NamespaceLifecycle, system_namespaces
from apiserver.strategy import validate_create, validate_update
from apiserver.validation import (
    validate_limit_range,
    validate_namespace,
    validate_namespace_finalize_update,
    validate_namespace_status_update,
    validate_resource_quota,
    validate_resource_quota_status_update,
)
from apiserver.validation._common import DNS_LABEL_REGEX_ERR
from machinery import errors, jsonconv
from machinery.api import core_pb2
from machinery.kinds import DEPLOYMENT, NAMESPACE, NODE, POD

QUANTITY_ERR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def messages(errs: list[errors.FieldError]) -> list[str]:
    return [str(e) for e in errs]


def copy_of(m: Any) -> Any:
    out = type(m)()
    out.CopyFrom(m)
    return out


# ---------------------------------------------------------------- Namespace


def namespace(name: str = "team-a", **doc: Any) -> core_pb2.Namespace:
    ns = jsonconv.from_dict(core_pb2.Namespace, {"metadata": {"name": name}, **doc})
    defaults.default_object("ns", ns)
    return ns


def test_namespace_create_defaults() -> None:
    """SetDefaults_Namespace's label and, on create, phase Active and the "kubernetes" finalizer."""
    ns = namespace()
    strategy.prepare_for_create(NAMESPACE, ns)
    assert dict(ns.metadata.labels) == {"kubernetes.io/metadata.name": "team-a"}
    assert ns.status.phase == "Active"
    assert list(ns.spec.finalizers) == ["kubernetes"]


def test_namespace_keeps_given_finalizers_and_adds_kubernetes_last() -> None:
    ns = namespace(spec={"finalizers": ["example.com/cleanup"]})
    strategy.prepare_for_create(NAMESPACE, ns)
    assert list(ns.spec.finalizers) == ["example.com/cleanup", "kubernetes"]


NAMESPACE_CASES: list[tuple[str, str, dict[str, Any], list[str]]] = [
    ("valid", "team-a", {}, []),
    ("name is a DNS label", "team.a", {}, ['metadata.name: Invalid value: "team.a": must not contain dots']),
    ("name upper case", "Team", {}, [f'metadata.name: Invalid value: "Team": {DNS_LABEL_REGEX_ERR}']),
    ("finalizer not standard", "team-a", {"spec": {"finalizers": ["cleanup"]}},
     ['spec.finalizers: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully '
      'qualified']),
    ("finalizer qualified", "team-a", {"spec": {"finalizers": ["example.com/cleanup", "kubernetes"]}}, []),
]


@pytest.mark.parametrize("name,doc,want", [c[1:] for c in NAMESPACE_CASES], ids=[c[0] for c in NAMESPACE_CASES])
def test_validate_namespace(name: str, doc: dict[str, Any], want: list[str]) -> None:
    assert messages(validate_namespace(namespace(name, **doc))) == want


def test_namespace_update_keeps_finalizers_and_status() -> None:
    old = namespace()
    strategy.prepare_for_create(NAMESPACE, old)
    new = copy_of(old)
    new.spec.ClearField("finalizers")
    new.status.phase = "Terminating"
    new.metadata.labels["team"] = "a"
    strategy.prepare_for_update(NAMESPACE, new, old)
    assert list(new.spec.finalizers) == ["kubernetes"]
    assert new.status.phase == "Active"
    assert new.metadata.labels["team"] == "a"


def test_namespace_label_follows_the_name_on_update() -> None:
    old = namespace()
    new = copy_of(old)
    new.metadata.labels["kubernetes.io/metadata.name"] = "other"
    defaults.default_object("Namespace", new)
    assert new.metadata.labels["kubernetes.io/metadata.name"] == "team-a"


def test_namespace_status_phase_follows_deletion_timestamp() -> None:
    old = namespace()
    new = copy_of(old)
    new.status.phase = "Terminating"
    assert messages(validate_namespace_status_update(new, old)) == [
        "status.Phase: Invalid value: \"Terminating\": may only be 'Active' if `deletionTimestamp` is empty"]
    old.metadata.deletion_timestamp = "2026-01-02T03:04:05Z"
    new = copy_of(old)
    new.status.phase = "Active"
    assert messages(validate_namespace_status_update(new, old)) == [
        "status.Phase: Invalid value: \"Active\": may only be 'Terminating' if `deletionTimestamp` is not empty"]


def test_finalize_takes_the_new_finalizers_and_keeps_the_status() -> None:
    old = namespace()
    strategy.prepare_for_create(NAMESPACE, old)
    old.metadata.deletion_timestamp = "2026-01-02T03:04:05Z"
    old.status.phase = "Terminating"
    new = copy_of(old)
    new.spec.ClearField("finalizers")
    new.status.phase = "Active"
    out = strategy.prepare_for_finalize(new, old)
    assert list(out.spec.finalizers) == [] and out.status.phase == "Terminating"
    bad = copy_of(old)
    bad.spec.finalizers.append("cleanup")
    assert messages(validate_namespace_finalize_update(bad, old)) == [
        'spec.finalizers[1]: Invalid value: "cleanup": name is neither a standard finalizer name nor is it fully '
        'qualified']


# ---------------------------------------------------------------- NamespaceLifecycle admission


class _Namespaces:
    def __init__(self, *nss: core_pb2.Namespace):
        self.by_name = {ns.metadata.name: ns for ns in nss}
        self.fresh_reads = 0

    async def __call__(self, name: str, fresh: bool) -> core_pb2.Namespace | None:
        self.fresh_reads += fresh
        return self.by_name.get(name)


async def test_create_in_a_missing_namespace_is_not_found() -> None:
    with pytest.raises(errors.NotFound, match='^namespaces "nope" not found$'):
        await NamespaceLifecycle().admit_create(POD, "nope", "web", _Namespaces())


async def test_create_in_a_terminating_namespace_is_forbidden() -> None:
    ns = namespace()
    ns.status.phase = "Terminating"
    with pytest.raises(errors.Forbidden) as exc:
        await NamespaceLifecycle().admit_create(DEPLOYMENT, "team-a", "web", _Namespaces(ns))
    assert exc.value.message == ('deployments "web" is forbidden: unable to create new content in namespace team-a '
                                 'because it is being terminated')


async def test_cluster_scoped_kinds_and_active_namespaces_pass() -> None:
    await NamespaceLifecycle().admit_create(NODE, "", "node-1", _Namespaces())
    await NamespaceLifecycle().admit_create(POD, "team-a", "web", _Namespaces(namespace()))


async def test_a_namespace_deleted_lately_is_read_live() -> None:
    """Kubernetes' forceLiveLookup: the cache may still say Active right after a delete."""
    lookup = _Namespaces(namespace())
    plugin = NamespaceLifecycle()
    await plugin.admit_create(POD, "team-a", "web", lookup)
    assert lookup.fresh_reads == 0
    plugin.deleting("team-a")
    await plugin.admit_create(POD, "team-a", "web", lookup)
    assert lookup.fresh_reads == 1


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease"])
def test_system_namespaces_may_not_be_deleted(name: str) -> None:
    with pytest.raises(errors.Forbidden) as exc:
        NamespaceLifecycle.admit_delete(NAMESPACE, name)
    assert exc.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    NamespaceLifecycle.admit_delete(NAMESPACE, "team-a")
    NamespaceLifecycle.admit_delete(POD, name)


def test_system_namespaces_are_valid() -> None:
    for ns in system_namespaces():
        assert messages(validate_create("Namespace", ns)) == []


# ---------------------------------------------------------------- ResourceQuota


def quota(spec: dict[str, Any], status: dict[str, Any] | None = None) -> core_pb2.ResourceQuota:
    q = jsonconv.from_dict(core_pb2.ResourceQuota, {"metadata": {"name": "compute", "namespace": "team-a"},
                                                    "spec": spec, "status": status or {}})
    defaults.default_object("quota", q)
    return q


QUOTA_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("the Kubernetes docs' compute quota", {"hard": {"requests.cpu": "1", "requests.memory": "1Gi",
                                                     "limits.cpu": "2", "limits.memory": "2Gi",
                                                     "requests.nvidia.com/gpu": 4}}, []),
    ("object counts", {"hard": {"pods": "10", "count/deployments.apps": "2", "configmaps": 5}}, []),
    ("not a quota resource", {"hard": {"storage": "10Gi"}},
     ['spec.hard[storage]: Invalid value: "storage": must be a standard resource for quota']),
    ("not a standard resource", {"hard": {"gpus": "1"}},
     ['spec.hard[gpus]: Invalid value: "gpus": must be a standard resource type or fully qualified',
      'spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota']),
    ("negative", {"hard": {"cpu": "-1"}}, ['spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0']),
    ("pods are counted in whole numbers", {"hard": {"pods": "1500m"}},
     ['spec.hard[pods]: Invalid value: "1500m": must be an integer']),
    ("malformed quantity", {"hard": {"memory": "lots"}}, [f'spec.hard[memory]: Invalid value: "lots": {QUANTITY_ERR}']),
    ("scope", {"hard": {"pods": "5"}, "scopes": ["BestEffort"]}, []),
    ("unsupported scope", {"hard": {"pods": "5"}, "scopes": ["Sometimes"]},
     ['spec.scopes: Invalid value: []core.ResourceQuotaScope{"Sometimes"}: unsupported scope']),
    ("scope not for the resource", {"hard": {"requests.cpu": "1"}, "scopes": ["BestEffort"]},
     ['spec.scopes: Invalid value: []core.ResourceQuotaScope{"BestEffort"}: unsupported scope applied to resource']),
    ("conflicting scopes", {"hard": {"pods": "5"}, "scopes": ["Terminating", "NotTerminating"]},
     ['spec.scopes: Invalid value: []core.ResourceQuotaScope{"Terminating", "NotTerminating"}: conflicting scopes']),
    ("scope selector", {"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}, []),
    ("scope selector operator", {"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "BestEffort", "operator": "In", "values": ["x"]}]}},
     ["spec.scopeSelector.matchExpressions.operator: Invalid value: \"In\": must be 'Exists' when scope is any of "
      "ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, "
      "ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity"]),
    ("scope selector values", {"hard": {"pods": "5"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "PriorityClass", "operator": "NotIn"}]}},
     ["spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is "
      "'In' or 'NotIn' for scope selector"]),
]


@pytest.mark.parametrize("spec,want", [c[1:] for c in QUOTA_CASES], ids=[c[0] for c in QUOTA_CASES])
def test_validate_resource_quota(spec: dict[str, Any], want: list[str]) -> None:
    assert messages(validate_resource_quota(quota(spec))) == want


def test_quota_quantities_are_canonicalised() -> None:
    q = quota({"hard": {"requests.cpu": "0.5", "pods": 10}})
    assert dict(q.spec.hard) == {"requests.cpu": "500m", "pods": "10"}


def test_quota_scopes_are_immutable() -> None:
    old = quota({"hard": {"pods": "5"}, "scopes": ["BestEffort"]})
    new = quota({"hard": {"pods": "6"}, "scopes": ["NotBestEffort"]})
    assert messages(validate_update("ResourceQuota", new, old)) == [
        'spec.scopes: Invalid value: []core.ResourceQuotaScope{"NotBestEffort"}: field is immutable']


def test_quota_status_update() -> None:
    old = quota({"hard": {"pods": "5"}})
    new = copy_of(old)
    new.status.hard["pods"] = "5"
    new.status.used["pods"] = "-1"
    new.status.used["things"] = "1"
    assert messages(validate_resource_quota_status_update(new, old)) == [
        'status.used[pods]: Invalid value: "-1": must be greater than or equal to 0',
        'status.used[things]: Invalid value: "things": must be a standard resource type or fully qualified',
        'status.used[things]: Invalid value: "things": must be a standard resource for quota',
    ]


def test_quota_status_needs_a_resource_version() -> None:
    old = quota({"hard": {"pods": "5"}})
    with pytest.raises(errors.Invalid) as exc:
        strategy.prepare_for_status_update(strategy_kind("ResourceQuota"), copy_of(old), old)
    assert exc.value.message == 'ResourceQuota "compute" is invalid: resourceVersion: Required value'


def strategy_kind(name: str) -> Any:
    from machinery.kinds import lookup
    return lookup(name)


# ---------------------------------------------------------------- LimitRange


def limit_range(*limits: dict[str, Any]) -> core_pb2.LimitRange:
    lr = jsonconv.from_dict(core_pb2.LimitRange, {"metadata": {"name": "cpu-resource-constraint", "namespace": "a"},
                                                  "spec": {"limits": list(limits)}})
    defaults.default_object("limits", lr)
    return lr


def test_container_defaults_come_from_max_then_default_then_min() -> None:
    """SetDefaults_LimitRangeItem: default limit := max; default request := default, else min."""
    lr = limit_range({"type": "Container", "max": {"cpu": "1", "memory": "1Gi"}, "min": {"cpu": "100m",
                                                                                          "memory": "10Mi"},
                      "default": {"memory": "512Mi"}})
    item = lr.spec.limits[0]
    assert dict(item.default) == {"cpu": "1", "memory": "512Mi"}
    assert dict(item.default_request) == {"cpu": "1", "memory": "512Mi"}
    pod_item = limit_range({"type": "Pod", "max": {"cpu": "2"}}).spec.limits[0]
    assert dict(pod_item.default) == {} and dict(pod_item.default_request) == {}


LIMIT_CASES: list[tuple[str, list[dict[str, Any]], list[str]]] = [
    ("the Kubernetes docs' cpu-resource-constraint", [
        {"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "500m"},
         "max": {"cpu": "1"}, "min": {"cpu": "100m"}}], []),
    ("min above max", [{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "2"}, "default": {"cpu": "1"},
                        "defaultRequest": {"cpu": "1"}}],
     ['spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max value 1',
      'spec.limits[0].defaultRequest[cpu]: Invalid value: "1": min value 2 is greater than default request value 1',
      'spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1']),
    ("default request above default", [{"type": "Container", "default": {"memory": "256Mi"},
                                        "defaultRequest": {"memory": "512Mi"}}],
     ['spec.limits[0].defaultRequest[memory]: Invalid value: "512Mi": default request value 512Mi is greater than '
      'default limit value 256Mi']),
    ("default above max", [{"type": "Container", "max": {"cpu": "1"}, "default": {"cpu": "2"},
                            "defaultRequest": {"cpu": "1"}}],
     ['spec.limits[0].default[cpu]: Invalid value: "1": default value 2 is greater than max value 1']),
    ("Pod items take no defaults", [{"type": "Pod", "max": {"cpu": "2"}, "default": {"cpu": "1"}}],
     ["spec.limits[0].default: Forbidden: may not be specified when `type` is 'Pod'"]),
    ("ratio below 1", [{"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}],
     ['spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "500m": ratio 500m is less than 1']),
    ("ratio above max/min", [{"type": "Pod", "max": {"cpu": "2"}, "min": {"cpu": "1"},
                              "maxLimitRequestRatio": {"cpu": "3"}}],
     ['spec.limits[0].maxLimitRequestRatio[cpu]: Invalid value: "3": ratio 3 is greater than max/min = 2.000000']),
    ("PVC without storage bounds", [{"type": "PersistentVolumeClaim", "max": {"cpu": "1"}}],
     ["spec.limits[0].limits: Required value: either minimum or maximum storage value is required, but neither "
      "was provided"]),
    ("PVC storage", [{"type": "PersistentVolumeClaim", "max": {"storage": "2Gi"}, "min": {"storage": "1Gi"}}], []),
    ("unknown type", [{"type": "Node"}],
     ['spec.limits[0].type: Invalid value: "Node": must be a standard limit type or fully qualified']),
    ("duplicate type", [{"type": "Container", "max": {"cpu": "1"}}, {"type": "Container", "max": {"cpu": "2"}}],
     ['spec.limits[1].type: Duplicate value: "Container"']),
    ("not a container resource", [{"type": "Container", "max": {"pods": "1"}}],
     ['spec.limits[0].max[pods]: Invalid value: "pods": must be a standard resource for containers',
      'spec.limits[0].default[pods]: Invalid value: "pods": must be a standard resource for containers',
      'spec.limits[0].defaultRequest[pods]: Invalid value: "pods": must be a standard resource for containers']),
    ("extended resources may not be overcommitted", [
        {"type": "Container", "default": {"example.com/gpu": "2"}, "defaultRequest": {"example.com/gpu": "1"}}],
     ['spec.limits[0].defaultRequest[example.com/gpu]: Invalid value: "1": default value 2 must equal to '
      'defaultRequest value 1 in example.com/gpu']),
]


@pytest.mark.parametrize("limits,want", [c[1:] for c in LIMIT_CASES], ids=[c[0] for c in LIMIT_CASES])
def test_validate_limit_range(limits: list[dict[str, Any]], want: list[str]) -> None:
    assert messages(validate_limit_range(limit_range(*limits))) == want
