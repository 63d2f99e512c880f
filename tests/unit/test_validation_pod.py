"""Pod validation: create, update, status update and the KEP-1287 resize subresource.

Every case asserts the full list of messages, as Kubernetes prints them (``path: Type: detail``),
so a wrong path or wording fails. The resize tests are KEP-1287's "Patch error tests" with the
e2e values (originalCPU 20m, originalCPULimit 30m, increasedCPU 25m, increasedCPULimit 35m,
originalMem 35Mi, originalMemLimit 45Mi, increasedMem 40Mi, increasedMemLimit 50Mi) and its
"Version Skew Strategy".
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from apiserver import defaults
from apiserver.strategy import validate_create, validate_status_update, validate_update
from apiserver.validation import (
    validate_pod_create,
    validate_pod_resize,
    validate_pod_status_update,
    validate_pod_update,
)
from apiserver.validation._common import (
    DNS_LABEL_REGEX_ERR,
    DNS_SUBDOMAIN_REGEX_ERR,
    LABEL_VALUE_REGEX_ERR,
    QUALIFIED_NAME_REGEX_ERR,
)
from apiserver.validation.pod import POD_UPDATE_FORBIDDEN
from machinery import errors, jsonconv, resources
from machinery.api import core_pb2

QUANTITY_ERR = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
AFFINITY = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def pod_from_json(spec: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None,
                  default: bool = True) -> core_pb2.Pod:
    """A pod from Kubernetes JSON (one container "c" running nginx unless ``spec`` says otherwise),
    defaulted as the apiserver defaults it."""
    doc_spec = {"containers": [{"name": "c", "image": "nginx"}]}
    doc_spec.update(spec or {})
    doc = {"metadata": {"name": "web", "namespace": "default", **(metadata or {})}, "spec": doc_spec}
    pod = jsonconv.from_dict(core_pb2.Pod, doc)
    if default:
        defaults.default_pod(pod)
    return pod


def messages(errs: list[errors.FieldError]) -> list[str]:
    return [str(e) for e in errs]


def ctr(name: str = "c", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "nginx", **fields}


def res(requests: dict[str, str] | None = None, limits: dict[str, str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def req_term(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        term["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


# ---------------------------------------------------------------- create

CREATE_CASES: list[tuple[str, dict[str, Any], dict[str, Any] | None, list[str]]] = [
    ("valid", {}, None, []),
    ("pod name not a DNS subdomain", {}, {"name": "Web_1"},
     [f'metadata.name: Invalid value: "Web_1": {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("namespace required", {}, {"namespace": ""}, ["metadata.namespace: Required value"]),
    ("label value", {}, {"labels": {"app": "bad value!"}},
     [f'metadata.labels: Invalid value: "bad value!": {LABEL_VALUE_REGEX_ERR}']),
    ("mirror pod needs nodeName", {}, {"annotations": {"kubernetes.io/config.mirror": "x"}},
     ['metadata.annotations[kubernetes.io/config.mirror]: Invalid value: "x": '
      "must set spec.nodeName if mirror pod annotation is set"]),
    ("deletion cost not an int32", {}, {"annotations": {"controller.kubernetes.io/pod-deletion-cost": "+10"}},
     ['metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: "+10": '
      "must be a 32bit integer"]),
    ("container name not a DNS label", {"containers": [ctr("C1")]}, None,
     [f'spec.containers[0].name: Invalid value: "C1": {DNS_LABEL_REGEX_ERR}']),
    ("container name with dots", {"containers": [ctr("a.b")]}, None,
     ['spec.containers[0].name: Invalid value: "a.b": must not contain dots']),
    ("duplicate container names", {"containers": [ctr("c"), ctr("c")]}, None,
     ['spec.containers[1].name: Duplicate value: "c"']),
    ("init container named like a container", {"initContainers": [ctr("c")]}, None,
     ['spec.initContainers[0].name: Duplicate value: "c"']),
    ("no containers", {"containers": []}, None, ["spec.containers: Required value"]),
    ("image required", {"containers": [{"name": "c"}]}, None, ["spec.containers[0].image: Required value"]),
    ("image with whitespace", {"containers": [ctr(image=" nginx")]}, None,
     ['spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace']),
    ("malformed quantity", {"containers": [ctr(resources=res({"cpu": "abc"}))]}, None,
     [f'spec.containers[0].resources.requests[cpu]: Invalid value: "abc": {QUANTITY_ERR}']),
    ("negative request", {"containers": [ctr(resources=res({"memory": "-1Mi"}))]}, None,
     ['spec.containers[0].resources.requests[memory]: Invalid value: "-1Mi": must be greater than or equal to 0']),
    ("request above limit", {"containers": [ctr(resources=res({"cpu": "2"}, {"cpu": "1"}))]}, None,
     ['spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1']),
    ("memory request above limit", {"containers": [ctr(resources=res({"memory": "2Gi"}, {"memory": "1Gi"}))]}, None,
     ['spec.containers[0].resources.requests: Invalid value: "2Gi": '
      'must be less than or equal to memory limit of 1Gi']),
    ("resource name neither standard nor qualified", {"containers": [ctr(resources=res({"foo": "1"}))]}, None,
     ['spec.containers[0].resources.requests[foo]: Invalid value: "foo": '
      'must be a standard resource type or fully qualified',
      'spec.containers[0].resources.requests[foo]: Invalid value: "foo": must be a standard resource for containers']),
    ("quota-only resource name", {"containers": [ctr(resources=res({"pods": "1"}))]}, None,
     ['spec.containers[0].resources.requests[pods]: Invalid value: "pods": '
      'must be a standard resource for containers']),
    ("extended resource must be whole", {"containers": [ctr(resources=res(limits={"example.com/gpu": "500m"}))]}, None,
     ['spec.containers[0].resources.limits[example.com/gpu]: Invalid value: "500m": must be an integer',
      'spec.containers[0].resources.requests[example.com/gpu]: Invalid value: "500m": must be an integer']),
    ("extended resource needs a limit", {"containers": [ctr(resources=res({"example.com/gpu": "1"}))]}, None,
     ["spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"]),
    ("extended resource request must equal limit",
     {"containers": [ctr(resources=res({"example.com/gpu": "1"}, {"example.com/gpu": "2"}))]}, None,
     ['spec.containers[0].resources.requests: Invalid value: "1": must be equal to example.com/gpu limit of 2']),
    ("hugepages need cpu or memory", {"containers": [ctr(resources=res(limits={"hugepages-2Mi": "4Mi"}))]}, None,
     ["spec.containers[0].resources: Forbidden: HugePages require cpu or memory"]),
    ("hugepages multiple of the page size",
     {"containers": [ctr(resources=res(limits={"hugepages-2Mi": "3Mi", "memory": "1Gi"}))]}, None,
     ['spec.containers[0].resources.limits[hugepages-2Mi]: Invalid value: "3Mi": '
      '3Mi is not positive integer multiple of hugepages-2Mi',
      'spec.containers[0].resources.requests[hugepages-2Mi]: Invalid value: "3Mi": '
      '3Mi is not positive integer multiple of hugepages-2Mi']),
    ("valid hugepages",
     {"containers": [ctr(resources=res(limits={"hugepages-2Mi": "4Mi", "memory": "1Gi"}))]}, None, []),
    ("claims must name pod resource claims",
     {"containers": [ctr(resources={"claims": [{"name": "gpu"}]})]}, None,
     ['spec.containers[0].resources.claims[0]: Not found: "gpu": '
      "must be one of the names in pod.spec.resourceClaims which is empty"]),
    ("claims referencing pod claims", {"containers": [ctr(resources={"claims": [{"name": "gpu"}]})],
                                       "resourceClaims": [{"name": "gpu", "resourceClaimName": "my-gpu"}]}, None, []),
    ("duplicate claim reference", {"containers": [ctr(resources={"claims": [{"name": "gpu"}, {"name": "gpu"}]})],
                                   "resourceClaims": [{"name": "gpu", "resourceClaimName": "my-gpu"}]}, None,
     ['spec.containers[0].resources.claims[1]: Duplicate value: "gpu"']),
    ("pod resource claim names unique", {"resourceClaims": [{"name": "a", "resourceClaimName": "x"},
                                                            {"name": "a", "resourceClaimName": "y"}]}, None,
     ['spec.resourceClaims[1].name: Duplicate value: "a"']),
    ("pod resource claim needs a source", {"resourceClaims": [{"name": "a"}]}, None,
     ['spec.resourceClaims[0]: Invalid value: core.PodResourceClaim{Name:"a", ResourceClaimName:(*string)(nil), '
      "ResourceClaimTemplateName:(*string)(nil)}: "
      "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"]),
    ("pod resource claim has one source",
     {"resourceClaims": [{"name": "a", "resourceClaimName": "x", "resourceClaimTemplateName": "y"}]}, None,
     ['spec.resourceClaims[0]: Invalid value: core.PodResourceClaim{Name:"a", ResourceClaimName:&"x", '
      'ResourceClaimTemplateName:&"y"}: '
      'at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified']),
    ("restartPolicy values", {"restartPolicy": "Sometimes"}, None,
     ['spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"']),
    ("dnsPolicy values", {"dnsPolicy": "Google"}, None,
     ['spec.dnsPolicy: Unsupported value: "Google": supported values: "ClusterFirstWithHostNet", '
      '"ClusterFirst", "Default", "None"']),
    ("dnsPolicy None needs dnsConfig", {"dnsPolicy": "None"}, None,
     ["spec.dnsConfig: Required value: must provide `dnsConfig` when `dnsPolicy` is None"]),
    ("init container restartPolicy Always, OnFailure or Never (KEP-5307)",
     {"initContainers": [ctr("init", restartPolicy="Sometimes")]}, None,
     ['spec.initContainers[0].restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
      '"OnFailure", "Never"']),
    ("regular container restartPolicy (KEP-5307)", {"containers": [ctr(restartPolicy="Sometimes")]}, None,
     ['spec.containers[0].restartPolicy: Unsupported value: "Sometimes": supported values: "Always", '
      '"OnFailure", "Never"']),
    ("probes on a non-sidecar init container",
     {"initContainers": [ctr("init", readinessProbe={"exec": {"command": ["true"]}})]}, None,
     ["spec.initContainers[0].readinessProbe: Forbidden: "
      "may not be set for init containers without restartPolicy=Always"]),
    ("resizePolicy resource", {"containers": [ctr(resizePolicy=[{"resourceName": "ephemeral-storage",
                                                                 "restartPolicy": "NotRequired"}])]}, None,
     ['spec.containers[0].resizePolicy: Unsupported value: "ephemeral-storage": supported values: "cpu", "memory"']),
    ("resizePolicy restart policy", {"containers": [ctr(resizePolicy=[{"resourceName": "cpu",
                                                                       "restartPolicy": "Always"}])]}, None,
     ['spec.containers[0].resizePolicy: Unsupported value: "Always": '
      'supported values: "NotRequired", "RestartContainer"']),
    ("resizePolicy duplicate", {"containers": [ctr(resizePolicy=[
        {"resourceName": "cpu", "restartPolicy": "NotRequired"},
        {"resourceName": "cpu", "restartPolicy": "RestartContainer"}])]}, None,
     ['spec.containers[0].resizePolicy[1]: Duplicate value: "cpu"']),
    ("resizePolicy with restartPolicy Never", {"restartPolicy": "Never", "containers": [ctr(resizePolicy=[
        {"resourceName": "memory", "restartPolicy": "RestartContainer"}])]}, None,
     ['spec.containers[0].resizePolicy: Invalid value: "RestartContainer": '
      "must be 'NotRequired' when `restartPolicy` is 'Never'"]),
    ("resizePolicy on a non-sidecar init container", {"initContainers": [ctr("init", resizePolicy=[
        {"resourceName": "cpu", "restartPolicy": "NotRequired"}])]}, None,
     ['spec.initContainers[0].resizePolicy: Invalid value: []core.ContainerResizePolicy{core.ContainerResizePolicy'
      '{ResourceName:"cpu", RestartPolicy:"NotRequired"}}: must not be set for init containers']),
    ("resizePolicy on a sidecar", {"initContainers": [ctr("sidecar", restartPolicy="Always", resizePolicy=[
        {"resourceName": "cpu", "restartPolicy": "NotRequired"}])]}, None, []),
    ("toleration operator", {"tolerations": [{"key": "k", "operator": "In", "value": "v"}]}, None,
     ['spec.tolerations[0].operator: Unsupported value: "In": supported values: "Equal", "Exists"']),
    ("toleration empty key needs Exists", {"tolerations": [{"operator": "Equal", "value": "v"}]}, None,
     ['spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists when `key` is empty, '
      'which means "match all values and all keys"']),
    ("tolerationSeconds needs NoExecute",
     {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 10}]}, None,
     ["spec.tolerations[0].effect: Invalid value: \"NoSchedule\": "
      "effect must be 'NoExecute' when `tolerationSeconds` is set"]),
    ("Exists takes no value", {"tolerations": [{"key": "k", "operator": "Exists", "value": "x"}]}, None,
     ["spec.tolerations[0].operator: Invalid value: \"x\": value must be empty when `operator` is 'Exists'"]),
    ("toleration effect", {"tolerations": [{"key": "k", "operator": "Exists", "effect": "NoWay"}]}, None,
     ['spec.tolerations[0].effect: Unsupported value: "NoWay": supported values: "NoSchedule", '
      '"PreferNoSchedule", "NoExecute"']),
    ("toleration key", {"tolerations": [{"key": "bad key", "operator": "Exists"}]}, None,
     [f'spec.tolerations[0].key: Invalid value: "bad key": name part {QUALIFIED_NAME_REGEX_ERR}']),
    ("nodeSelector labels", {"nodeSelector": {"disk": "ssd!"}}, None,
     [f'spec.nodeSelector: Invalid value: "ssd!": {LABEL_VALUE_REGEX_ERR}']),
    ("node affinity Gt takes one value",
     {"affinity": req_term({"key": "cores", "operator": "Gt", "values": ["1", "2"]})}, None,
     [f"{AFFINITY}[0].matchExpressions[0].values: Required value: "
      "must be specified single value when `operator` is 'Lt' or 'Gt'"]),
    ("node affinity Lt with one value", {"affinity": req_term({"key": "cores", "operator": "Lt", "values": ["8"]})},
     None, []),
    ("node affinity operator", {"affinity": req_term({"key": "zone", "operator": "Like", "values": ["a"]})}, None,
     [f'{AFFINITY}[0].matchExpressions[0].operator: Invalid value: "Like": not a valid selector operator']),
    ("node affinity In needs values", {"affinity": req_term({"key": "zone", "operator": "In"})}, None,
     [f"{AFFINITY}[0].matchExpressions[0].values: Required value: "
      "must be specified when `operator` is 'In' or 'NotIn'"]),
    ("node affinity Exists takes no values",
     {"affinity": req_term({"key": "zone", "operator": "Exists", "values": ["a"]})}, None,
     [f"{AFFINITY}[0].matchExpressions[0].values: Forbidden: "
      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"]),
    ("node affinity needs a term",
     {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}},
     None,
     [f"{AFFINITY}: Required value: must have at least one node selector term"]),
    ("node field selector key",
     {"affinity": req_term(fields=[{"key": "metadata.uid", "operator": "In", "values": ["x"]}])}, None,
     [f'{AFFINITY}[0].matchFields[0].key: Invalid value: "metadata.uid": not a valid field selector key']),
    ("preferred weight", {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}}, None,
     ["spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: "
      "must be in the range 1-100"]),
    ("pod affinity topologyKey", {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": ""}]}}}, None,
     ["spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: "
      "Required value: can not be empty",
      'spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: "": '
      "name part must be non-empty",
      'spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Invalid value: "": '
      f"name part {QUALIFIED_NAME_REGEX_ERR}"]),
    ("topology spread maxSkew", {"topologySpreadConstraints": [
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}, None,
     ["spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero"]),
    ("topology spread whenUnsatisfiable", {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Maybe"}]}, None,
     ['spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe": '
      'supported values: "DoNotSchedule", "ScheduleAnyway"']),
    ("topology spread topologyKey", {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "DoNotSchedule"}]}, None,
     ["spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty"]),
    ("topology spread minDomains with ScheduleAnyway", {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}]}, None,
     ["spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: "
      "can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway"]),
    ("topology spread minDomains positive", {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 0}]}, None,
     ["spec.topologySpreadConstraints[0].minDomains: Invalid value: 0: must be greater than zero"]),
    ("topology spread duplicate", {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}, None,
     ['spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: "{zone, DoNotSchedule}"']),
    ("topology spread nodeTaintsPolicy", {"topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "nodeTaintsPolicy": "Always"}]},
     None,
     ['spec.topologySpreadConstraints[0].nodeTaintsPolicy: Unsupported value: "Always": '
      'supported values: "Honor", "Ignore"']),
    ("scheduling gate name", {"schedulingGates": [{"name": "bad gate"}]}, None,
     [f'spec.schedulingGates[0]: Invalid value: "bad gate": name part {QUALIFIED_NAME_REGEX_ERR}']),
    ("scheduling gates unique", {"schedulingGates": [{"name": "example.com/gate"}, {"name": "example.com/gate"}]}, None,
     ['spec.schedulingGates[1]: Duplicate value: "example.com/gate"']),
    ("nodeName while gated", {"nodeName": "node-1", "schedulingGates": [{"name": "example.com/gate"}]}, None,
     ["spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"]),
    ("nodeName syntax", {"nodeName": "Node_1"}, None,
     [f'spec.nodeName: Invalid value: "Node_1": {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("priorityClassName syntax", {"priorityClassName": "High_Priority"}, None,
     [f'spec.priorityClassName: Invalid value: "High_Priority": {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("preemptionPolicy values", {"preemptionPolicy": "Sometimes"}, None,
     ['spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"']),
    ("overhead quantity", {"overhead": {"cpu": "lots"}}, None,
     [f'spec.overhead.limits[cpu]: Invalid value: "lots": {QUANTITY_ERR}']),
    ("overhead negative", {"overhead": {"memory": "-1Mi"}}, None,
     ['spec.overhead.limits[memory]: Invalid value: "-1Mi": must be greater than or equal to 0']),
    ("negative terminationGracePeriodSeconds is accepted (as Kubernetes does)",
     {"terminationGracePeriodSeconds": -1}, None, []),
    ("activeDeadlineSeconds positive", {"activeDeadlineSeconds": 0}, None,
     ["spec.activeDeadlineSeconds: Invalid value: 0: must be between 1 and 2147483647, inclusive"]),
    ("hostname label", {"hostname": "My_Host"}, None,
     [f'spec.hostname: Invalid value: "My_Host": {DNS_LABEL_REGEX_ERR}']),
    ("port number required", {"containers": [ctr(ports=[{"containerPort": 0}])]}, None,
     ["spec.containers[0].ports[0].containerPort: Required value"]),
    ("port protocol", {"containers": [ctr(ports=[{"containerPort": 80, "protocol": "HTTP"}])]}, None,
     ['spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP"']),
    ("host port conflict", {"containers": [ctr("a", ports=[{"containerPort": 80, "hostPort": 8080}]),
                                           ctr("b", ports=[{"containerPort": 81, "hostPort": 8080}])]}, None,
     ['spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//8080"']),
    ("volume mount of a missing volume", {"containers": [ctr(volumeMounts=[{"name": "data", "mountPath": "/data"}])]},
     None, ['spec.containers[0].volumeMounts[0].name: Not found: "data"']),
    ("volume mount of a volume", {"volumes": [{"name": "data", "emptyDir": {}}],
                                  "containers": [ctr(volumeMounts=[{"name": "data", "mountPath": "/data"}])]},
     None, []),
    ("env var name", {"containers": [ctr(env=[{"name": "A=B", "value": "x"}])]}, None,
     ['spec.containers[0].env[0].name: Invalid value: "A=B": a valid environment variable name must consist '
      "only of printable ASCII characters other than '='"]),
    ("os name", {"os": {"name": "plan9"}}, None,
     ['spec.os: Unsupported value: "plan9": supported values: "linux", "windows"']),
    ("pod-level requests below the containers'", {
        "resources": {"requests": {"cpu": "100m"}},
        "containers": [ctr("a", resources=res({"cpu": "100m"})), ctr("b", resources=res({"cpu": "100m"}))]}, None,
     ['spec.resources.requests[cpu]: Invalid value: "100m": must be greater than or equal to aggregate container '
      "requests of 200m"]),
    ("pod-level resource names", {"resources": {"requests": {"ephemeral-storage": "1Gi"}}}, None,
     ['spec.resources.requests[ephemeral-storage]: Unsupported value: "ephemeral-storage": '
      'supported values: "cpu", "hugepages-", "memory"']),
]


@pytest.mark.parametrize("spec,metadata,want", [c[1:] for c in CREATE_CASES], ids=[c[0] for c in CREATE_CASES])
def test_validate_pod_create(spec: dict[str, Any], metadata: dict[str, Any] | None, want: list[str]) -> None:
    assert messages(validate_pod_create(pod_from_json(spec, metadata))) == want


def test_without_container_restart_rules_only_a_sidecar_has_a_restart_policy() -> None:
    """The ContainerRestartRules gate off (Kubernetes before 1.35, or switched off)."""
    init = pod_from_json({"initContainers": [ctr("init", restartPolicy="OnFailure")]})
    assert messages(validate_pod_create(init, container_restart_rules=False)) == [
        'spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure": supported values: "Always"']
    regular = pod_from_json({"containers": [ctr(restartPolicy="Always")]})
    assert messages(validate_pod_create(regular, container_restart_rules=False)) == [
        "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"]
    assert messages(validate_pod_create(init)) == [] and messages(validate_pod_create(regular)) == []


def _rules(*rules: dict[str, Any], policy: str | None = "Never", name: str = "c1") -> dict[str, Any]:
    c = ctr(name, restartPolicyRules=list(rules))
    if policy is not None:
        c["restartPolicy"] = policy
    return c


@pytest.mark.parametrize("container,init,want", [
    (_rules({"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}), False, []),
    (_rules({"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0]}}, name="init"), True, []),
    (_rules({"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}, policy=None), False,
     ["spec.containers[0].restartPolicy: Required value: must be specified when restartPolicyRules are specified"]),
    (_rules({"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}, policy="Always", name="init"),
     True, ["spec.initContainers[0].restartPolicyRules: Forbidden: may not be set for containers with "
            "restartPolicy=Always"]),
    (_rules({"action": "Complete", "exitCodes": {"operator": "Between", "values": [1, 1]}}), False,
     ['spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Complete": supported values: "Restart"',
      'spec.containers[0].restartPolicyRules[0].exitCodes.operator: Unsupported value: "Between": supported values: '
      '"In", "NotIn"',
      "spec.containers[0].restartPolicyRules[0].exitCodes.values[1]: Duplicate value: 1"]),
    (_rules({"action": "Restart"}), False,
     ["spec.containers[0].restartPolicyRules[0].exitCodes: Required value: must be specified"]),
    (_rules(*[{"action": "Restart", "exitCodes": {"operator": "In", "values": [i]}} for i in range(21)]), False,
     ["spec.containers[0].restartPolicyRules: Too many: 21: must have at most 20 items"]),
])
def test_container_restart_rules_kep_5307(container: dict[str, Any], init: bool, want: list[str]) -> None:
    spec = {"initContainers": [container]} if init else {"containers": [container]}
    assert messages(validate_pod_create(pod_from_json(spec))) == want


def test_create_requires_terminationGracePeriodSeconds_when_not_defaulted() -> None:
    pod = pod_from_json(default=False)
    defaults.default_pod(pod)
    pod.spec.ClearField("termination_grace_period_seconds")
    assert messages(validate_pod_create(pod)) == ["spec.terminationGracePeriodSeconds: Required value"]


def test_create_rejects_ephemeral_containers() -> None:
    pod = pod_from_json({"ephemeralContainers": [{"name": "debug", "image": "busybox"}]})
    assert messages(validate_pod_create(pod)) == ["spec.ephemeralContainers: Forbidden: cannot be set on create"]


def test_undefaulted_container_fields_are_required() -> None:
    pod = pod_from_json(default=False)
    assert messages(validate_pod_create(pod)) == [
        "spec.terminationGracePeriodSeconds: Required value",
        "spec.containers[0].terminationMessagePolicy: Required value",
        "spec.containers[0].imagePullPolicy: Required value",
        "spec.restartPolicy: Required value",
        "spec.dnsPolicy: Required value",
    ]


def test_invalid_message_as_the_apiserver_returns_it() -> None:
    pod = pod_from_json({"containers": [ctr(resources=res({"cpu": "2"}, {"cpu": "1"}))]})
    exc = errors.Invalid.of("Pod", "web", validate_create("Pod", pod))
    assert exc.message == ('Pod "web" is invalid: spec.containers[0].resources.requests: Invalid value: "2": '
                           "must be less than or equal to cpu limit of 1")


# ---------------------------------------------------------------- update


def updated(old: core_pb2.Pod, change: Any) -> core_pb2.Pod:
    new = core_pb2.Pod()
    new.CopyFrom(old)
    change(new)
    return new


def _add_container(p: core_pb2.Pod) -> None:
    p.spec.containers.add(name="d", image="nginx", image_pull_policy="Always", termination_message_policy="File")


UPDATE_CASES: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    ("image", {}, lambda p: setattr(p.spec.containers[0], "image", "nginx:1.27"), []),
    ("init container image", {"initContainers": [ctr("init")]},
     lambda p: setattr(p.spec.init_containers[0], "image", "busybox"), []),
    ("image removed", {}, lambda p: setattr(p.spec.containers[0], "image", ""),
     ["spec.containers[0].image: Required value", "spec.containers[0].image: Required value"]),
    ("activeDeadlineSeconds set", {}, lambda p: setattr(p.spec, "active_deadline_seconds", 60), []),
    ("activeDeadlineSeconds decreased", {"activeDeadlineSeconds": 60},
     lambda p: setattr(p.spec, "active_deadline_seconds", 30), []),
    ("activeDeadlineSeconds increased", {"activeDeadlineSeconds": 10},
     lambda p: setattr(p.spec, "active_deadline_seconds", 20),
     ["spec.activeDeadlineSeconds: Invalid value: 20: must be less than or equal to previous value"]),
    ("activeDeadlineSeconds removed", {"activeDeadlineSeconds": 10},
     lambda p: p.spec.ClearField("active_deadline_seconds"),
     ["spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"]),
    ("toleration added", {}, lambda p: p.spec.tolerations.add(key="dedicated", operator="Exists"), []),
    ("tolerationSeconds changed", {}, lambda p: setattr(p.spec.tolerations[0], "toleration_seconds", 60), []),
    ("toleration changed", {}, lambda p: setattr(p.spec.tolerations[0], "key", "node.kubernetes.io/memory-pressure"),
     ["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]),
    ("scheduling gate removed", {"schedulingGates": [{"name": "a"}, {"name": "b"}]},
     lambda p: p.spec.scheduling_gates.pop(0), []),
    ("scheduling gate added", {"schedulingGates": [{"name": "a"}]}, lambda p: p.spec.scheduling_gates.add(name="b"),
     ["spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'b'"]),
    ("container added", {}, _add_container,
     ["spec.containers: Forbidden: pod updates may not add or remove containers"]),
    ("same resources spelled differently", {"containers": [ctr(resources=res({"cpu": "1"}))]},
     lambda p: p.spec.containers[0].resources.requests.__setitem__("cpu", "1000m"), []),
    ("terminationGracePeriodSeconds from negative to 1", {"terminationGracePeriodSeconds": -1},
     lambda p: setattr(p.spec, "termination_grace_period_seconds", 1), []),
    ("gated pod: nodeSelector addition", {"schedulingGates": [{"name": "a"}], "nodeSelector": {"disk": "ssd"}},
     lambda p: p.spec.node_selector.__setitem__("zone", "a"), []),
    ("gated pod: nodeSelector mutation", {"schedulingGates": [{"name": "a"}], "nodeSelector": {"disk": "ssd"}},
     lambda p: p.spec.node_selector.__setitem__("disk", "hdd"),
     ['spec.nodeSelector: Invalid value: map[string]string{"disk":"hdd"}: '
      "only additions to spec.nodeSelector are allowed (no mutations or deletions)"]),
    ("gated pod: node affinity requirement added",
     {"schedulingGates": [{"name": "a"}], "affinity": req_term({"key": "zone", "operator": "In", "values": ["a"]})},
     lambda p: p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
     .node_selector_terms[0].match_expressions.add(key="disk", operator="Exists"), []),
    ("gated pod: node affinity requirement changed",
     {"schedulingGates": [{"name": "a"}], "affinity": req_term({"key": "zone", "operator": "In", "values": ["a"]})},
     lambda p: setattr(p.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
                       .node_selector_terms[0].match_expressions[0], "operator", "NotIn"),
     [f'{AFFINITY}[0]: Invalid value: core.NodeSelectorTerm{{MatchExpressions:[]core.NodeSelectorRequirement'
      '{core.NodeSelectorRequirement{Key:"zone", Operator:"NotIn", Values:[]string{"a"}}}, '
      "MatchFields:[]core.NodeSelectorRequirement(nil)}: only additions are allowed (no mutations or deletions)"]),
    ("name changed", {}, lambda p: setattr(p.metadata, "name", "other"),
     ['metadata.name: Invalid value: "other": field is immutable']),
    ("mirror annotation added", {"nodeName": "node-1"},
     lambda p: p.metadata.annotations.__setitem__("kubernetes.io/config.mirror", "x"),
     ["metadata.annotations[kubernetes.io/config.mirror]: Forbidden: may not add mirror pod annotation"]),
]


@pytest.mark.parametrize("spec,change,want", [c[1:] for c in UPDATE_CASES], ids=[c[0] for c in UPDATE_CASES])
def test_validate_pod_update(spec: dict[str, Any], change: Any, want: list[str]) -> None:
    old = pod_from_json(spec)
    assert messages(validate_pod_update(updated(old, change), old)) == want


@pytest.mark.parametrize("field,change", [
    ("restartPolicy", lambda p: setattr(p.spec, "restart_policy", "Never")),
    ("containers", lambda p: p.spec.containers[0].resources.requests.__setitem__("cpu", "2")),
    ("terminationGracePeriodSeconds", lambda p: setattr(p.spec, "termination_grace_period_seconds", 10)),
    ("nodeSelector", lambda p: p.spec.node_selector.__setitem__("zone", "a")),
])
def test_pod_update_may_not_change_other_fields(field: str, change: Any) -> None:
    old = pod_from_json()
    errs = validate_update("Pod", updated(old, change), old)
    assert len(errs) == 1
    text = str(errs[0])
    assert text.startswith(f"spec: Forbidden: {POD_UPDATE_FORBIDDEN}\n")
    assert f"changed: {field}" in text


def test_pod_update_forbidden_message_is_kubernetes_text() -> None:
    assert POD_UPDATE_FORBIDDEN == (
        "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,"
        "`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),"
        "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")


# ---------------------------------------------------------------- status update


def running_pod(**spec: Any) -> core_pb2.Pod:
    pod = pod_from_json({"nodeName": "node-1", **spec})
    pod.status.phase = "Running"
    pod.status.qos_class = resources.compute_qos(pod)
    cs = pod.status.container_statuses.add(name="c")
    cs.state.running.started_at = "2026-01-01T00:00:00Z"
    return pod


STATUS_CASES: list[tuple[str, dict[str, Any], Any, list[str]]] = [
    ("conditions", {}, lambda p: p.status.conditions.add(type="Ready", status="True"), []),
    ("phase Succeeded", {}, lambda p: setattr(p.status, "phase", "Succeeded"), []),
    ("phase value", {}, lambda p: setattr(p.status, "phase", "Done"),
     ['status.phase: Unsupported value: "Done": '
      'supported values: "Pending", "Running", "Succeeded", "Failed", "Unknown"']),
    ("condition type", {}, lambda p: p.status.conditions.add(type="bad type!", status="True"),
     [f'metadata.conditions[0].Type: Invalid value: "bad type!": name part {QUALIFIED_NAME_REGEX_ERR}']),
    ("condition status", {}, lambda p: p.status.conditions.add(type="Ready", status="Maybe"),
     ['status.conditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"']),
    ("nominatedNodeName", {}, lambda p: setattr(p.status, "nominated_node_name", "Node_2"),
     [f'status.nominatedNodeName: Invalid value: "Node_2": {DNS_SUBDOMAIN_REGEX_ERR}']),
    ("observedGeneration", {}, lambda p: setattr(p.status, "observed_generation", -1),
     ["status.observedGeneration: Invalid value: -1: must be greater than or equal to 0"]),
    ("qosClass immutable", {}, lambda p: setattr(p.status, "qos_class", "Guaranteed"),
     ['status.qosClass: Invalid value: "Guaranteed": field is immutable']),
    ("nodeName", {}, lambda p: setattr(p.spec, "node_name", "node-2"),
     ["status.nodeName: Forbidden: may not be changed directly"]),
    ("allocatedResources quantity", {},
     lambda p: p.status.container_statuses[0].allocated_resources.__setitem__("cpu", "x"),
     [f'status.containerStatuses[0].allocatedResources[cpu]: Invalid value: "x": {QUANTITY_ERR}']),
    ("status resources quantity", {},
     lambda p: p.status.container_statuses[0].resources.limits.__setitem__("memory", "-1"),
     ['status.containerStatuses[0].resources.limits[memory]: Invalid value: "-1": must be greater than or equal to 0']),
    ("podIPs", {}, lambda p: p.status.pod_ips.add(ip="10.0.0.300"),
     ['status.podIPs[0]: Invalid value: "10.0.0.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)']),
    ("podIPs one per family", {}, lambda p: (p.status.pod_ips.add(ip="10.0.0.1"), p.status.pod_ips.add(ip="10.0.0.2")),
     ['status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:"10.0.0.1"}, core.PodIP{IP:"10.0.0.2"}}: '
      "may specify no more than one IP for each IP family"]),
    ("hostIPs match hostIP", {},
     lambda p: (setattr(p.status, "host_ip", "10.0.0.1"), p.status.host_ips.add(ip="10.0.0.2")),
     ['status.hostIPs[0].ip: Invalid value: "10.0.0.2": must be equal to `hostIP`']),
    ("resource claim statuses", {}, lambda p: p.status.resource_claim_statuses.add(name="gpu"),
     ['status.resourceClaimStatuses[0].name: Invalid value: "gpu": '
      'must match the name of an entry in `spec.resourceClaims`']),
]


@pytest.mark.parametrize("spec,change,want", [c[1:] for c in STATUS_CASES], ids=[c[0] for c in STATUS_CASES])
def test_validate_pod_status_update(spec: dict[str, Any], change: Any, want: list[str]) -> None:
    old = running_pod(**spec)
    assert messages(validate_pod_status_update(updated(old, change), old)) == want


def test_status_may_not_leave_a_terminal_phase() -> None:
    old = running_pod()
    old.status.phase = "Succeeded"
    new = updated(old, lambda p: setattr(p.status, "phase", "Running"))
    assert messages(validate_status_update("pods", new, old)) == [
        "status.phase: Forbidden: may not transition from Succeeded to Running"]


def test_terminated_container_may_not_run_again_with_restartPolicy_never() -> None:
    old = running_pod(restartPolicy="Never")
    old.status.container_statuses[0].state.ClearField("running")
    old.status.container_statuses[0].state.terminated.exit_code = 0
    new = updated(old, lambda p: p.status.container_statuses[0].state.running.SetInParent())
    new.status.container_statuses[0].state.ClearField("terminated")
    assert messages(validate_pod_status_update(new, old)) == [
        "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state"]


# ---------------------------------------------------------------- resize (KEP-1287)

ORIGINAL_CPU, ORIGINAL_CPU_LIMIT, INCREASED_CPU, INCREASED_CPU_LIMIT = "20m", "30m", "25m", "35m"
ORIGINAL_MEM, ORIGINAL_MEM_LIMIT, INCREASED_MEM, INCREASED_MEM_LIMIT = "35Mi", "45Mi", "40Mi", "50Mi"


def container_resources(cpu_req: str = "", cpu_lim: str = "", mem_req: str = "", mem_lim: str = "",
                        **extra_requests: str) -> dict[str, Any]:
    """e2e's ContainerResources{CPUReq, CPULim, MemReq, MemLim, EphStorReq}."""
    requests = {k: v for k, v in (("cpu", cpu_req), ("memory", mem_req)) if v}
    requests.update({k.replace("_", "-"): v for k, v in extra_requests.items()})
    limits = {k: v for k, v in (("cpu", cpu_lim), ("memory", mem_lim)) if v}
    return res(requests, limits)


def resizable_pod(containers: list[tuple[str, dict[str, Any]]], init: list[tuple[str, dict[str, Any], bool]] = (),
                  *, running: bool = True, status_resources: bool = True, **meta: Any) -> core_pb2.Pod:
    """A pod as the apiserver stored it and its kubelet reported it (QoS class set at create)."""
    spec: dict[str, Any] = {"containers": [ctr(n, resources=r) for n, r in containers], "nodeName": "node-1"}
    if init:
        spec["initContainers"] = [ctr(n, resources=r, **({"restartPolicy": "Always"} if sidecar else {}))
                                  for n, r, sidecar in init]
    pod = pod_from_json(spec, meta or None)
    pod.metadata.resource_version = "7"
    pod.status.qos_class = resources.compute_qos(pod)
    pod.status.phase = "Running" if running else "Pending"
    for c in pod.spec.containers:
        cs = pod.status.container_statuses.add(name=c.name)
        if running:
            cs.state.running.started_at = "2026-01-01T00:00:00Z"
        else:
            cs.state.waiting.reason = "ContainerCreating"
        if status_resources:
            cs.resources.CopyFrom(c.resources)
    return pod


def resized(old: core_pb2.Pod, containers: list[tuple[str, dict[str, Any]]],
            init: list[tuple[str, dict[str, Any]]] = ()) -> core_pb2.Pod:
    """The pod after a resize request: the named containers, in the given order, with the given
    resources (Kubernetes applies the patch, then validates; resources are not defaulted)."""
    new = copy.deepcopy(old)
    for field, wanted in (("containers", containers), ("init_containers", init)):
        if not wanted:
            continue
        by_name = {c.name: c for c in getattr(old.spec, field)}
        target = getattr(new.spec, field)
        del target[:]
        for i, (name, r) in enumerate(wanted):
            base = by_name.get(name) or list(getattr(old.spec, field))[i]
            c = target.add()
            c.CopyFrom(base)
            c.name = name
            c.resources.CopyFrom(jsonconv.from_dict(core_pb2.ResourceRequirements, r))
    return new


def invalid_message(errs: list[errors.FieldError]) -> str:
    return errors.Invalid.of("Pod", "testpod", errs).message


def test_kep1287_patch_error_01_best_effort_pod_request_memory() -> None:
    old = resizable_pod([("c1", {})])
    errs = validate_pod_resize(resized(old, [("c1", container_resources(mem_req=ORIGINAL_MEM))]), old)
    assert messages(errs) == ['spec: Invalid value: "BestEffort": Pod QOS Class may not change as a result of resizing']


def test_kep1287_patch_error_02_best_effort_pod_request_cpu() -> None:
    old = resizable_pod([("c1", {})])
    errs = validate_pod_resize(resized(old, [("c1", container_resources(cpu_req=ORIGINAL_CPU))]), old)
    assert messages(errs) == ['spec: Invalid value: "BestEffort": Pod QOS Class may not change as a result of resizing']


def test_kep1287_patch_error_03_guaranteed_pod_remove_cpu_and_memory_limits() -> None:
    old = resizable_pod([("c1", container_resources(ORIGINAL_CPU, ORIGINAL_CPU, ORIGINAL_MEM, ORIGINAL_MEM))])
    new = resized(old, [("c1", container_resources(cpu_req=ORIGINAL_CPU, mem_req=ORIGINAL_MEM))])
    errs = validate_pod_resize(new, old)
    assert messages(errs) == [
        'spec: Invalid value: "Guaranteed": Pod QOS Class may not change as a result of resizing',
        "spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed",
    ]
    assert "resource limits cannot be removed" in invalid_message(errs)


def test_kep1287_patch_error_04_burstable_pod_remove_limits_and_increase_requests() -> None:
    old = resizable_pod([("c1", container_resources(ORIGINAL_CPU, INCREASED_CPU_LIMIT,
                                                    ORIGINAL_MEM, INCREASED_MEM_LIMIT))])
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU, mem_req=INCREASED_MEM))])
    errs = validate_pod_resize(new, old)
    assert messages(errs) == ["spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed"]


def test_kep1287_patch_error_05_burstable_pod_remove_memory_requests() -> None:
    old = resizable_pod([("c1", container_resources(mem_req=ORIGINAL_MEM))])
    errs = validate_pod_resize(resized(old, [("c1", {})]), old)
    assert messages(errs) == [
        'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing',
        "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed",
    ]
    assert "resource requests cannot be removed" in invalid_message(errs)


def test_kep1287_patch_error_06_burstable_pod_remove_cpu_requests() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))])
    errs = validate_pod_resize(resized(old, [("c1", {})]), old)
    assert messages(errs) == [
        'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing',
        "spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed",
    ]


def test_kep1287_patch_error_07_burstable_pod_reorder_containers() -> None:
    r = container_resources(cpu_req=ORIGINAL_CPU)
    old = resizable_pod([("c1", r), ("c2", r)])
    errs = validate_pod_resize(resized(old, [("c2", r), ("c1", r)]), old)
    assert messages(errs) == [
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize",
        "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize",
    ]
    joined = ("spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize, "
              "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize")
    assert joined in invalid_message(errs)


def test_kep1287_patch_error_08_guaranteed_pod_rename_containers() -> None:
    r = container_resources(ORIGINAL_CPU, ORIGINAL_CPU, ORIGINAL_MEM, ORIGINAL_MEM)
    old = resizable_pod([("c1-old", r), ("c2-old", r)])
    errs = validate_pod_resize(resized(old, [("c1-new", r), ("c2-new", r)]), old)
    assert messages(errs) == [
        "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize",
        "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize",
    ]


def test_kep1287_patch_error_09_burstable_pod_set_requests_equal_to_limits() -> None:
    old = resizable_pod([("c1", container_resources(ORIGINAL_CPU, INCREASED_CPU_LIMIT,
                                                    ORIGINAL_MEM, INCREASED_MEM_LIMIT))])
    new = resized(old, [("c1", container_resources(INCREASED_CPU_LIMIT, INCREASED_CPU_LIMIT,
                                                   INCREASED_MEM_LIMIT, INCREASED_MEM_LIMIT))])
    assert messages(validate_pod_resize(new, old)) == [
        'spec: Invalid value: "Burstable": Pod QOS Class may not change as a result of resizing']


def test_kep1287_patch_error_10_burstable_pod_resize_ephemeral_storage() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU, mem_req=ORIGINAL_MEM,
                                                    ephemeral_storage="1"))])
    new = resized(old, [("c1", container_resources(cpu_req=ORIGINAL_CPU, mem_req=ORIGINAL_MEM, ephemeral_storage="3"))])
    errs = validate_pod_resize(new, old)
    assert messages(errs) == ["spec: Forbidden: only cpu and memory resources are mutable"]


def test_kep1287_patch_error_11_burstable_pod_nonrestartable_init_container() -> None:
    old = resizable_pod([("c1", {})],
                        init=[("c1-init", container_resources(cpu_req=ORIGINAL_CPU, mem_req=ORIGINAL_MEM), False)])
    new = resized(old, [], init=[("c1-init", container_resources(cpu_req=INCREASED_CPU, mem_req=INCREASED_MEM))])
    errs = validate_pod_resize(new, old)
    assert messages(errs) == [
        "spec.initContainers[0].resources: Forbidden: resources for non-sidecar init containers are immutable"]


# Version skew (KEP-1287 "Version Skew Strategy"): the first running container decides.


def test_version_skew_running_container_without_status_resources_is_rejected() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))], status_resources=False)
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    assert messages(validate_pod_resize(new, old)) == [
        "spec: Forbidden: Pod running on node without support for resize"]


def test_version_skew_empty_status_resources_means_support() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))], status_resources=False)
    old.status.container_statuses[0].resources.SetInParent()  # resources: {}
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    assert messages(validate_pod_resize(new, old)) == []


def test_version_skew_no_running_containers_is_allowed() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))], running=False, status_resources=False)
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    assert messages(validate_pod_resize(new, old)) == []


def test_version_skew_unscheduled_pod_is_allowed() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))])
    old.spec.node_name = ""
    old.ClearField("status")
    old.status.qos_class = "Burstable"
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    assert messages(validate_pod_resize(new, old)) == []


def test_version_skew_only_the_first_running_container_counts() -> None:
    r = container_resources(cpu_req=ORIGINAL_CPU)
    old = resizable_pod([("c1", r), ("c2", r)])
    old.status.container_statuses[0].ClearField("resources")  # c1 running, no resources
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU)), ("c2", r)])
    assert messages(validate_pod_resize(new, old)) == [
        "spec: Forbidden: Pod running on node without support for resize"]
    old.status.container_statuses[0].state.ClearField("running")  # c1 waiting: c2 decides
    old.status.container_statuses[0].state.waiting.reason = "CrashLoopBackOff"
    assert messages(validate_pod_resize(new, old)) == []


RESIZE_CASES: list[tuple[str, list[tuple[str, dict[str, Any]]], Any, list[str]]] = [
    ("cpu increase", [("c1", container_resources(ORIGINAL_CPU, ORIGINAL_CPU_LIMIT, ORIGINAL_MEM, ORIGINAL_MEM_LIMIT))],
     lambda old: resized(old, [("c1", container_resources(INCREASED_CPU, INCREASED_CPU_LIMIT,
                                                          ORIGINAL_MEM, ORIGINAL_MEM_LIMIT))]),
     []),
    ("memory limit decrease (allowed since v1.34)",
     [("c1", container_resources(ORIGINAL_CPU, ORIGINAL_CPU_LIMIT, ORIGINAL_MEM, INCREASED_MEM_LIMIT))],
     lambda old: resized(old, [("c1", container_resources(ORIGINAL_CPU, ORIGINAL_CPU_LIMIT,
                                                          ORIGINAL_MEM, ORIGINAL_MEM_LIMIT))]),
     []),
    ("guaranteed resize stays guaranteed",
     [("c1", container_resources(ORIGINAL_CPU, ORIGINAL_CPU, ORIGINAL_MEM, ORIGINAL_MEM))],
     lambda old: resized(old, [("c1", container_resources(INCREASED_CPU, INCREASED_CPU,
                                                          INCREASED_MEM, INCREASED_MEM))]),
     []),
    ("limit below request", [("c1", container_resources(ORIGINAL_CPU, ORIGINAL_CPU_LIMIT))],
     lambda old: resized(old, [("c1", container_resources(INCREASED_CPU_LIMIT, ORIGINAL_CPU_LIMIT))]),
     ['spec.containers[0].resources.requests: Invalid value: "35m": must be less than or equal to cpu limit of 30m']),
    ("malformed quantity", [("c1", container_resources(ORIGINAL_CPU))],
     lambda old: resized(old, [("c1", container_resources("lots"))]),
     [f'spec.containers[0].resources.requests[cpu]: Invalid value: "lots": {QUANTITY_ERR}']),
    ("resizePolicy is immutable in kplane", [("c1", container_resources(ORIGINAL_CPU))],
     lambda old: _with(resized(old, [("c1", container_resources(INCREASED_CPU))]),
                       lambda p: p.spec.containers[0].resize_policy.add(resource_name="cpu",
                                                                         restart_policy="RestartContainer")),
     ["spec.containers[0].resizePolicy: Forbidden: field is immutable"]),
    ("image change", [("c1", container_resources(ORIGINAL_CPU))],
     lambda old: _with(resized(old, [("c1", container_resources(INCREASED_CPU))]),
                       lambda p: setattr(p.spec.containers[0], "image", "nginx:2")),
     ["spec: Forbidden: only cpu and memory resources are mutable"]),
    ("other spec field", [("c1", container_resources(ORIGINAL_CPU))],
     lambda old: _with(resized(old, [("c1", container_resources(INCREASED_CPU))]),
                       lambda p: setattr(p.spec, "active_deadline_seconds", 30)),
     ["spec: Forbidden: only cpu and memory resources are mutable"]),
    ("container added", [("c1", container_resources(ORIGINAL_CPU))],
     lambda old: _with(copy.deepcopy(old),
                       lambda p: p.spec.containers.add().CopyFrom(_renamed(p.spec.containers[0], "c2"))),
     ["spec.containers: Forbidden: containers may not be added or removed on resize"]),
]


def _with(pod: core_pb2.Pod, change: Any) -> core_pb2.Pod:
    change(pod)
    return pod


def _renamed(c: core_pb2.Container, name: str) -> core_pb2.Container:
    out = core_pb2.Container()
    out.CopyFrom(c)
    out.name = name
    return out


@pytest.mark.parametrize("containers,make_new,want", [c[1:] for c in RESIZE_CASES], ids=[c[0] for c in RESIZE_CASES])
def test_validate_pod_resize(containers: list[tuple[str, dict[str, Any]]], make_new: Any, want: list[str]) -> None:
    old = resizable_pod(containers)
    assert messages(validate_pod_resize(make_new(old), old)) == want


def test_resize_sidecar_cpu_and_memory() -> None:
    r = container_resources(ORIGINAL_CPU, ORIGINAL_CPU_LIMIT, ORIGINAL_MEM, ORIGINAL_MEM_LIMIT)
    old = resizable_pod([("c1", r)], init=[("c1-init", r, True)])
    grown = container_resources(INCREASED_CPU, INCREASED_CPU_LIMIT, INCREASED_MEM, INCREASED_MEM_LIMIT)
    assert messages(validate_pod_resize(resized(old, [], init=[("c1-init", grown)]), old)) == []
    no_limits = container_resources(cpu_req=ORIGINAL_CPU, mem_req=ORIGINAL_MEM)
    assert messages(validate_pod_resize(resized(old, [], init=[("c1-init", no_limits)]), old)) == [
        "spec.initContainers[0].resources.limits: Forbidden: resource limits cannot be removed"]


def test_resize_disabled_by_feature_gate() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))])
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    errs = validate_pod_resize(new, old, in_place_enabled=False)
    assert messages(errs) == [": Forbidden: in-place pod resize is disabled"]


def test_resize_static_pod() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))],
                        annotations={"kubernetes.io/config.mirror": "abc"})
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    assert messages(validate_pod_resize(new, old)) == [": Forbidden: static pods cannot be resized"]


def test_resize_pod_level_resources() -> None:
    old = resizable_pod([("c1", container_resources(cpu_req=ORIGINAL_CPU))])
    old.spec.resources.requests["cpu"] = "100m"
    new = resized(old, [("c1", container_resources(cpu_req=INCREASED_CPU))])
    assert messages(validate_pod_resize(new, old)) == [": Forbidden: pods with pod-level resources cannot be resized"]
