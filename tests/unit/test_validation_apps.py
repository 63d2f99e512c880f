"""apps/v1 ReplicaSet and Deployment, and autoscaling/v1 Scale: Kubernetes' defaulting
(SetDefaults_ReplicaSet, SetDefaults_Deployment, the template's SetDefaults_PodSpec) and
validation (pkg/apis/apps/validation, the apps/v1 strategies' immutable selector), with the
messages and field paths Kubernetes prints, asserted in full."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import defaults
from apiserver.strategy import validate_create, validate_update
from apiserver.validation import (
    validate_deployment,
    validate_deployment_status_update,
    validate_replica_set,
    validate_replica_set_status_update,
    validate_scale,
)
from apiserver.validation._common import DNS_SUBDOMAIN_REGEX_ERR, PERCENT_REGEX_ERR
from machinery import errors, jsonconv
from machinery.api import apps_pb2, autoscaling_pb2

NGINX = {"containers": [{"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}]}]}


def messages(errs: list[errors.FieldError]) -> list[str]:
    return [str(e) for e in errs]


def deployment(spec: dict[str, Any] | None = None, **meta: Any) -> apps_pb2.Deployment:
    """The Deployment of the Kubernetes docs (nginx-deployment), with ``spec`` merged over its spec,
    defaulted."""
    doc: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "nginx-deployment", "namespace": "default", "labels": {"app": "nginx"}, **meta},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "nginx"}},
                 "template": {"metadata": {"labels": {"app": "nginx"}}, "spec": NGINX}, **(spec or {})},
    }
    d = jsonconv.from_dict(apps_pb2.Deployment, {k: v for k, v in doc.items() if v is not None})
    defaults.default_object("Deployment", d)
    return d


def replica_set(spec: dict[str, Any] | None = None) -> apps_pb2.ReplicaSet:
    doc = {"metadata": {"name": "frontend", "namespace": "default"},
           "spec": {"selector": {"matchLabels": {"tier": "frontend"}},
                    "template": {"metadata": {"labels": {"tier": "frontend"}},
                                 "spec": {"containers": [{"name": "php-redis", "image": "redis"}]}},
                    **(spec or {})}}
    rs = jsonconv.from_dict(apps_pb2.ReplicaSet, doc)
    defaults.default_object("ReplicaSet", rs)
    return rs


def copy_of(m: Any) -> Any:
    out = type(m)()
    out.CopyFrom(m)
    return out


# ---------------------------------------------------------------- defaulting


def test_deployment_defaults_are_set_defaults_deployment() -> None:
    d = deployment({"replicas": None})
    assert d.spec.replicas == 1
    assert d.spec.strategy.type == "RollingUpdate"
    assert (d.spec.strategy.rolling_update.max_unavailable, d.spec.strategy.rolling_update.max_surge) == ("25%", "25%")
    assert d.spec.revision_history_limit == 10
    assert d.spec.progress_deadline_seconds == 600


def test_deployment_defaults_keep_what_is_given() -> None:
    d = deployment({"replicas": 0, "revisionHistoryLimit": 0, "progressDeadlineSeconds": 30,
                    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2}}})
    assert d.spec.HasField("replicas") and d.spec.replicas == 0
    assert d.spec.revision_history_limit == 0 and d.spec.progress_deadline_seconds == 30
    assert (d.spec.strategy.rolling_update.max_unavailable, d.spec.strategy.rolling_update.max_surge) == ("25%", "2")


def test_recreate_strategy_gets_no_rolling_update() -> None:
    d = deployment({"strategy": {"type": "Recreate"}})
    assert not d.spec.strategy.HasField("rolling_update")
    assert messages(validate_deployment(d)) == []


def test_template_is_defaulted_as_a_pod_template_not_as_a_pod() -> None:
    """SetDefaults_PodSpec and SetDefaults_Container; not SetDefaults_Pod (requests from limits,
    enableServiceLinks) nor DefaultTolerationSeconds, which only pods get."""
    d = deployment({"template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [
        {"name": "nginx", "image": "nginx:1.14.2", "ports": [{"containerPort": 80}],
         "resources": {"limits": {"cpu": "1.5", "memory": "128Mi"}}}]}}})
    spec = d.spec.template.spec
    assert (spec.restart_policy, spec.dns_policy) == ("Always", "ClusterFirst")
    assert spec.scheduler_name == "default-scheduler"
    assert spec.termination_grace_period_seconds == 30
    c = spec.containers[0]
    assert (c.image_pull_policy, c.termination_message_path, c.termination_message_policy) == (
        "IfNotPresent", "/dev/termination-log", "File")
    assert c.ports[0].protocol == "TCP"
    assert dict(c.resources.limits) == {"cpu": "1500m", "memory": "128Mi"}
    assert dict(c.resources.requests) == {}
    assert not spec.HasField("enable_service_links")
    assert list(spec.tolerations) == []


def test_replica_set_defaults_replicas_to_one() -> None:
    rs = replica_set()
    assert rs.spec.replicas == 1
    assert rs.spec.template.spec.restart_policy == "Always"


# ---------------------------------------------------------------- Deployment validation


NOT_MATCHING = 'spec.template.metadata.labels: Invalid value: map[string]string{"app":"web"}: ' \
               '`selector` does not match template `labels`'
DEPLOYMENT_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("the Kubernetes docs' nginx-deployment", {}, []),
    ("template labels do not match the selector",
     {"template": {"metadata": {"labels": {"app": "web"}}, "spec": NGINX}}, [NOT_MATCHING]),
    ("no selector", {"selector": None},
     ["spec.selector: Required value",
      'spec.template.metadata.labels: Invalid value: map[string]string{"app":"nginx"}: '
      '`selector` does not match template `labels`']),
    ("empty selector", {"selector": {}},
     ["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
      "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment"]),
    ("selector operator",
     {"selector": {"matchExpressions": [{"key": "app", "operator": "Like", "values": ["nginx"]}]}},
     ['spec.selector.matchExpressions[0].operator: Invalid value: "Like": not a valid selector operator',
      'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), '
      'MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"app", Operator:"Like", '
      'Values:[]string{"nginx"}}}}: invalid label selector']),
    ("selector by expression", {"selector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["nginx", "web"]}]}}, []),
    ("negative replicas", {"replicas": -1}, ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]),
    ("restartPolicy Never",
     {"template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {**NGINX, "restartPolicy": "Never"}}},
     ['spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"']),
    ("activeDeadlineSeconds",
     {"template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {**NGINX, "activeDeadlineSeconds": 10}}},
     ["spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in ReplicaSet is not Supported"]),
    ("the template's pod spec is validated under spec.template.spec",
     {"template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": [
         {"name": "Nginx", "image": "nginx", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}}]}}},
     ['spec.template.spec.containers[0].name: Invalid value: "Nginx": a lowercase RFC 1123 label must consist of '
      "lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
      "'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
      'spec.template.spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu '
      'limit of 1']),
    ("no containers", {"template": {"metadata": {"labels": {"app": "nginx"}}, "spec": {"containers": []}}},
     ["spec.template.spec.containers: Required value"]),
    ("template labels are checked at spec.template.labels",
     {"selector": {"matchLabels": {"app": "nginx"}},
      "template": {"metadata": {"labels": {"app": "nginx", "bad key": "x"}}, "spec": NGINX}},
     ['spec.template.labels: Invalid value: "bad key": name part must consist of alphanumeric characters, '
      "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
      "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]),
    ("ephemeral containers",
     {"template": {"metadata": {"labels": {"app": "nginx"}},
                   "spec": {**NGINX, "ephemeralContainers": [{"name": "debug", "image": "busybox"}]}}},
     ["spec.template.spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"]),
    ("maxSurge and maxUnavailable both 0",
     {"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}},
     ['spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:""}: '
      "may not be 0 when `maxSurge` is 0"]),
    ("maxSurge 0% and maxUnavailable 0",
     {"strategy": {"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}}},
     ['spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:""}: '
      "may not be 0 when `maxSurge` is 0"]),
    ("maxUnavailable over 100%", {"strategy": {"rollingUpdate": {"maxUnavailable": "150%"}}},
     ['spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, '
      'StrVal:"150%"}: must not be greater than 100%']),
    ("maxSurge over 100% is allowed", {"strategy": {"rollingUpdate": {"maxSurge": "200%"}}}, []),
    ("maxSurge not a percent", {"strategy": {"rollingUpdate": {"maxSurge": "half"}}},
     [f'spec.strategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{{Type:1, IntVal:0, '
      f'StrVal:"half"}}: {PERCENT_REGEX_ERR}']),
    ("negative maxUnavailable", {"strategy": {"rollingUpdate": {"maxUnavailable": -1}}},
     ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: -1: must be greater than or equal to 0"]),
    ("Recreate with rollingUpdate", {"strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}},
     ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]),
    ("unknown strategy", {"strategy": {"type": "BlueGreen"}},
     ['spec.strategy: Unsupported value: apps.DeploymentStrategy{Type:"BlueGreen", '
      'RollingUpdate:(*apps.RollingUpdateDeployment)(nil)}: supported values: "Recreate", "RollingUpdate"']),
    ("negative revisionHistoryLimit", {"revisionHistoryLimit": -1},
     ["spec.revisionHistoryLimit: Invalid value: -1: must be greater than or equal to 0"]),
    ("progressDeadlineSeconds not above minReadySeconds", {"minReadySeconds": 30, "progressDeadlineSeconds": 30},
     ["spec.progressDeadlineSeconds: Invalid value: 30: must be greater than minReadySeconds"]),
    ("negative minReadySeconds", {"minReadySeconds": -1},
     ["spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"]),
]


@pytest.mark.parametrize("spec,want", [c[1:] for c in DEPLOYMENT_CASES], ids=[c[0] for c in DEPLOYMENT_CASES])
def test_validate_deployment(spec: dict[str, Any], want: list[str]) -> None:
    d = deployment(spec)
    assert messages(validate_deployment(d)) == want
    assert messages(validate_create("deploy", d)) == want


def test_deployment_name_is_a_dns_subdomain() -> None:
    assert messages(validate_deployment(deployment(name="Web"))) == [
        f'metadata.name: Invalid value: "Web": {DNS_SUBDOMAIN_REGEX_ERR}']


def test_whole_message_as_the_apiserver_sends_it() -> None:
    d = deployment({"template": {"metadata": {"labels": {"app": "web"}}, "spec": NGINX}})
    err = errors.Invalid.of("Deployment", d.metadata.name, validate_deployment(d))
    assert err.message == f'Deployment "nginx-deployment" is invalid: {NOT_MATCHING}'


# ---------------------------------------------------------------- updates


def test_selector_is_immutable() -> None:
    old = deployment()
    new = deployment({"selector": {"matchLabels": {"app": "nginx", "tier": "web"}},
                      "template": {"metadata": {"labels": {"app": "nginx", "tier": "web"}}, "spec": NGINX}})
    assert messages(validate_update("Deployment", new, old)) == [
        'spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"nginx", "tier":"web"}, '
        "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]


def test_replica_set_selector_is_immutable_too() -> None:
    old = replica_set()
    new = replica_set({"selector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}})
    assert messages(validate_update("rs", new, old)) == [
        "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), "
        'MatchExpressions:[]v1.LabelSelectorRequirement{v1.LabelSelectorRequirement{Key:"tier", Operator:"Exists", '
        "Values:[]string(nil)}}}: field is immutable"]


def test_replicas_template_and_strategy_may_change() -> None:
    old = deployment()
    new = deployment({"replicas": 5, "strategy": {"type": "Recreate"},
                      "template": {"metadata": {"labels": {"app": "nginx"}},
                                   "spec": {"containers": [{"name": "nginx", "image": "nginx:1.16.1"}]}}})
    assert messages(validate_update("Deployment", new, old)) == []


# ---------------------------------------------------------------- ReplicaSet


RS_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("the Kubernetes docs' frontend", {}, []),
    ("negative replicas", {"replicas": -2}, ["spec.replicas: Invalid value: -2: must be greater than or equal to 0"]),
    ("negative minReadySeconds", {"minReadySeconds": -1},
     ["spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"]),
    ("labels do not match", {"selector": {"matchLabels": {"tier": "backend"}}},
     ['spec.template.metadata.labels: Invalid value: map[string]string{"tier":"frontend"}: '
      '`selector` does not match template `labels`']),
    ("restartPolicy OnFailure", {"template": {"metadata": {"labels": {"tier": "frontend"}}, "spec": {
        "restartPolicy": "OnFailure", "containers": [{"name": "php-redis", "image": "redis"}]}}},
     ['spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"']),
]


@pytest.mark.parametrize("spec,want", [c[1:] for c in RS_CASES], ids=[c[0] for c in RS_CASES])
def test_validate_replica_set(spec: dict[str, Any], want: list[str]) -> None:
    assert messages(validate_replica_set(replica_set(spec))) == want


# ---------------------------------------------------------------- status


def test_replica_set_status_rules() -> None:
    old = replica_set()
    new = copy_of(old)
    s = new.status
    s.replicas, s.fully_labeled_replicas, s.ready_replicas, s.available_replicas = 2, 3, 2, 3
    s.terminating_replicas = -1
    assert messages(validate_replica_set_status_update(new, old)) == [
        "status.terminatingReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.fullyLabeledReplicas: Invalid value: 3: cannot be greater than status.replicas",
        "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
        "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas",
    ]


def test_deployment_status_rules() -> None:
    old = deployment()
    old.status.collision_count = 2
    new = copy_of(old)
    s = new.status
    s.replicas, s.updated_replicas, s.ready_replicas, s.available_replicas, s.unavailable_replicas = 3, 4, 3, 3, -1
    s.collision_count = 1
    assert messages(validate_deployment_status_update(new, old)) == [
        "status.unavailableReplicas: Invalid value: -1: must be greater than or equal to 0",
        "status.updatedReplicas: Invalid value: 4: cannot be greater than status.replicas",
        "status.collisionCount: Invalid value: 1: cannot be decremented",
    ]


# ---------------------------------------------------------------- Scale


def test_validate_scale() -> None:
    scale = autoscaling_pb2.Scale()
    scale.metadata.name, scale.metadata.namespace = "nginx-deployment", "default"
    scale.spec.replicas = -1
    assert messages(validate_scale(scale)) == ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"]
    scale.spec.replicas = 0
    assert messages(validate_scale(scale)) == []
