"""The OpenAPI documents kubectl reads (apiserver/rest/openapi.py): every kind kplane serves has its
definition, named and shaped as Kubernetes' /openapi/v2 and /openapi/v3 name and shape it, and its
endpoints with the parameters kubectl looks for; the strategic-merge extensions are the ones the
apiserver's patch applies; every reference resolves; the v3 index's hashes are the documents'."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.rest.openapi import openapi_v2, openapi_v3, openapi_v3_paths
from machinery.api.comments import COMMENTS
from machinery.kinds import KINDS
from machinery.patch import MERGE_LISTS

ROOT = Path(__file__).resolve().parents[2]
V2_REFS = "#/definitions/"
V3_REFS = "#/components/schemas/"

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"

# The group/versions KINDS serves, as the /openapi/v3 index names them.
GROUP_VERSIONS = {
    "api/v1", "apis/apps/v1", "apis/scheduling.k8s.io/v1", "apis/policy/v1", "apis/coordination.k8s.io/v1",
    "apis/resource.k8s.io/v1",
}

# Kubernetes' definition names of kplane's kinds (k8s.io/api's Go packages and types).
KUBERNETES_NAMES = {
    "Pod": "io.k8s.api.core.v1.Pod",
    "Node": "io.k8s.api.core.v1.Node",
    "Event": "io.k8s.api.core.v1.Event",
    "Namespace": "io.k8s.api.core.v1.Namespace",
    "ResourceQuota": "io.k8s.api.core.v1.ResourceQuota",
    "LimitRange": "io.k8s.api.core.v1.LimitRange",
    "PriorityClass": "io.k8s.api.scheduling.v1.PriorityClass",
    "PodDisruptionBudget": "io.k8s.api.policy.v1.PodDisruptionBudget",
    "Lease": "io.k8s.api.coordination.v1.Lease",
    "ReplicaSet": "io.k8s.api.apps.v1.ReplicaSet",
    "Deployment": "io.k8s.api.apps.v1.Deployment",
    "ResourceClaim": "io.k8s.api.resource.v1.ResourceClaim",
    "ResourceClaimTemplate": "io.k8s.api.resource.v1.ResourceClaimTemplate",
    "ResourceSlice": "io.k8s.api.resource.v1.ResourceSlice",
    "DeviceClass": "io.k8s.api.resource.v1.DeviceClass",
}


def _gvk(api_version: str, kind: str) -> dict[str, str]:
    group, _, version = api_version.rpartition("/")
    return {"group": group, "kind": kind, "version": version}


def _prefix(api_version: str) -> str:
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


def _item_path(kind: Any) -> str:
    scope = "/namespaces/{namespace}" if kind.namespaced else ""
    return f"{_prefix(kind.api_version)}{scope}/{kind.plural}/{{name}}"


def _param_names(operation: dict[str, Any]) -> set[str]:
    return {p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"}


def _resolve(document: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """Follow a schema's ``$ref`` (or the single ``$ref`` of an ``allOf``) to its definition."""
    while True:
        if "$ref" in schema:
            ref = schema["$ref"]
            if ref.startswith(V2_REFS):
                schema = document["definitions"][ref.removeprefix(V2_REFS)]
            else:
                schema = document["components"]["schemas"][ref.removeprefix(V3_REFS)]
        elif "allOf" in schema and "properties" not in schema:
            (schema,) = schema["allOf"]
        else:
            return schema


def _walk(document: dict[str, Any], root: str, path: str) -> dict[str, Any]:
    """The schema at a dotted JSON path (``spec.containers[].resources``) below definition ``root``;
    the last step is left unresolved, so its own extensions and description show."""
    definitions = document.get("definitions") or document["components"]["schemas"]
    schema: dict[str, Any] = definitions[root]
    for part in path.split("."):
        schema = _resolve(document, schema)["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            schema = _resolve(document, schema)["items"]
    return schema


def _refs(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "$ref":
                yield item
            else:
                yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _v3_documents() -> dict[str, dict[str, Any]]:
    documents = {}
    for group_version in openapi_v3_paths()["paths"]:
        document = openapi_v3(group_version)
        assert document is not None, group_version
        documents[group_version] = document
    return documents


# ---------------------------------------------------------------------------------------------
# Definitions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_its_kubernetes_definition_with_its_gvk(kind: Any) -> None:
    definitions = openapi_v2()["definitions"]
    name = KUBERNETES_NAMES[kind.name]
    assert definitions[name]["x-kubernetes-group-version-kind"] == [_gvk(kind.api_version, kind.name)]
    assert definitions[name]["description"]
    listed = definitions[f"{name}List"]
    assert listed["x-kubernetes-group-version-kind"] == [_gvk(kind.api_version, f"{kind.name}List")]
    assert listed["required"] == ["items"]
    assert _resolve(openapi_v2(), listed["properties"]["items"]["items"]) is definitions[name]


def test_subresource_bodies_and_apimachinery_types_have_kubernetes_names() -> None:
    definitions = openapi_v2()["definitions"]
    assert definitions["io.k8s.api.autoscaling.v1.Scale"]["x-kubernetes-group-version-kind"] == [
        _gvk("autoscaling/v1", "Scale")]
    assert definitions["io.k8s.api.core.v1.Binding"]["x-kubernetes-group-version-kind"] == [_gvk("v1", "Binding")]
    assert definitions["io.k8s.api.policy.v1.Eviction"]["x-kubernetes-group-version-kind"] == [
        _gvk("policy/v1", "Eviction")]
    assert definitions[f"{META}.Status"]["x-kubernetes-group-version-kind"] == [_gvk("v1", "Status")]
    assert {"type": "object"}.items() <= definitions[f"{META}.ObjectMeta"].items()
    assert definitions[f"{META}.ObjectMeta"]["properties"]["creationTimestamp"]["$ref"] == f"{V2_REFS}{META}.Time"
    assert {k: definitions[QUANTITY][k] for k in ("type",)} == {"type": "string"}
    assert {k: definitions[INT_OR_STRING][k] for k in ("type", "format")} == {
        "type": "string", "format": "int-or-string"}
    assert {k: definitions[f"{META}.Time"][k] for k in ("type", "format")} == {
        "type": "string", "format": "date-time"}
    # core/v1's ResourceClaim is a container's reference to a claim; resource.k8s.io's is the kind.
    assert set(definitions["io.k8s.api.core.v1.ResourceClaim"]["properties"]) == {"name", "request"}
    # References meta.proto holds are core/v1 types in Kubernetes.
    assert "io.k8s.api.core.v1.ObjectReference" in definitions
    assert f"{META}.ObjectReference" not in definitions


def test_pod_requests_are_a_map_of_quantities_in_both_documents() -> None:
    for document, root in [(openapi_v2(), "io.k8s.api.core.v1.Pod"),
                           (_v3_documents()["api/v1"], "io.k8s.api.core.v1.Pod")]:
        for field in ("requests", "limits"):
            schema = _walk(document, root, f"spec.containers[].resources.{field}")
            assert schema["type"] == "object"
            assert schema["additionalProperties"]["$ref"].endswith(QUANTITY)
            assert schema["description"] == COMMENTS[f"kplane.v1.ResourceRequirements.{field}"]


def test_field_types_follow_the_protos() -> None:
    document = openapi_v2()
    pod = "io.k8s.api.core.v1.Pod"
    assert _walk(document, pod, "spec.terminationGracePeriodSeconds") == {"format": "int64", "type": "integer"}
    assert _walk(document, pod, "spec.priority") == {
        "description": COMMENTS["kplane.v1.PodSpec.priority"], "format": "int32", "type": "integer"}
    assert _walk(document, pod, "spec.hostPID") == {"type": "boolean"}
    assert _walk(document, pod, "spec.nodeSelector") == {
        "additionalProperties": {"type": "string"}, "type": "object", "x-kubernetes-map-type": "atomic"}
    assert _walk(document, pod, "metadata.labels") == {"additionalProperties": {"type": "string"}, "type": "object"}
    assert _walk(document, pod, "spec.containers[].command") == {
        "items": {"type": "string"}, "type": "array", "x-kubernetes-list-type": "atomic"}
    assert _walk(document, pod, "status.hostIPs")["x-kubernetes-list-type"] == "atomic"
    # Fields kplane keeps as given are objects of any content.
    probe = _walk(document, pod, "spec.containers[].livenessProbe")
    assert probe["type"] == "object" and probe["x-kubernetes-preserve-unknown-fields"] is True
    pdb = "io.k8s.api.policy.v1.PodDisruptionBudget"
    assert _walk(document, pdb, "spec.minAvailable")["$ref"] == V2_REFS + INT_OR_STRING
    assert _walk(document, pdb, "status.disruptedPods")["additionalProperties"] == {"$ref": f"{V2_REFS}{META}.Time"}
    assert _walk(document, "io.k8s.api.coordination.v1.Lease", "spec.renewTime")["$ref"] == (
        f"{V2_REFS}{META}.MicroTime")
    assert _walk(document, "io.k8s.api.core.v1.Node", "spec.podCIDRs")["x-kubernetes-list-type"] == "set"


def test_every_time_field_is_a_time() -> None:
    """A string field named like a time is metav1.Time or MicroTime, never a bare string: a time
    field added to a proto needs its line in openapi._TIMES."""
    time_name = re.compile(r"(Time|Timestamp|At)$|^timeAdded$")
    for name, definition in openapi_v2()["definitions"].items():
        for field, schema in definition.get("properties", {}).items():
            value = schema.get("additionalProperties", schema)
            if time_name.search(field) and value.get("type") == "string":
                pytest.fail(f"{name}.{field} is a string, not a Time")


def test_required_fields_are_kubernetes_ones() -> None:
    definitions = openapi_v2()["definitions"]
    assert definitions["io.k8s.api.core.v1.Container"]["required"] == ["name"]
    assert definitions["io.k8s.api.core.v1.PodSpec"]["required"] == ["containers"]
    assert definitions[f"{META}.OwnerReference"]["required"] == ["apiVersion", "kind", "name", "uid"]
    assert definitions["io.k8s.api.core.v1.Binding"]["required"] == ["target"]
    assert definitions["io.k8s.api.core.v1.ContainerPort"]["required"] == ["containerPort"]
    assert definitions["io.k8s.api.apps.v1.DeploymentSpec"]["required"] == ["selector", "template"]
    assert definitions["io.k8s.api.core.v1.TopologySpreadConstraint"]["required"] == [
        "maxSkew", "topologyKey", "whenUnsatisfiable"]
    for name, definition in definitions.items():
        for field in definition.get("required", []):
            assert field in definition["properties"], f"{name} requires {field}, which it does not have"


# ---------------------------------------------------------------------------------------------
# Strategic merge patch extensions
# ---------------------------------------------------------------------------------------------


def test_containers_merge_by_name_as_kubernetes_types_say() -> None:
    document = openapi_v2()
    for root, prefix in [("io.k8s.api.core.v1.Pod", "spec"), ("io.k8s.api.apps.v1.Deployment", "spec.template.spec")]:
        containers = _walk(document, root, f"{prefix}.containers")
        assert containers["x-kubernetes-patch-merge-key"] == "name"
        assert containers["x-kubernetes-patch-strategy"] == "merge"
        assert containers["x-kubernetes-list-type"] == "map"
        assert containers["x-kubernetes-list-map-keys"] == ["name"]
        ports = _walk(document, root, f"{prefix}.containers[].ports")
        assert ports["x-kubernetes-patch-merge-key"] == "containerPort"
        assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
        assert _walk(document, root, f"{prefix}.containers[].env")["x-kubernetes-patch-merge-key"] == "name"
        volumes = _walk(document, root, f"{prefix}.volumes")
        assert volumes["x-kubernetes-patch-strategy"] == "merge,retainKeys"
    finalizers = _walk(document, "io.k8s.api.core.v1.Pod", "metadata.finalizers")
    assert finalizers["x-kubernetes-patch-strategy"] == "merge"
    assert "x-kubernetes-patch-merge-key" not in finalizers
    assert _walk(document, "io.k8s.api.core.v1.Pod", "spec.tolerations").get("x-kubernetes-patch-strategy") is None
    assert _walk(document, "io.k8s.api.apps.v1.Deployment", "spec.strategy")["x-kubernetes-patch-strategy"] == (
        "retainKeys")


@pytest.mark.parametrize("kind", sorted(MERGE_LISTS), ids=str)
def test_every_merge_list_of_the_patch_table_is_in_the_schema(kind: str) -> None:
    """machinery.patch is the one source: each list it merges carries its key and strategy here,
    unless the path runs through a field kplane keeps as given (a volume's content)."""
    document = openapi_v2()
    root = KUBERNETES_NAMES[kind]
    for path, strategy in MERGE_LISTS[kind].items():
        try:
            schema = _walk(document, root, path)
        except KeyError:  # below a field kept as given: no properties to carry the extension
            assert any(
                _resolve(document, _walk(document, root, ".".join(path.split(".")[:i]))).get(
                    "x-kubernetes-preserve-unknown-fields")
                for i in range(1, path.count(".") + 1)), path
            continue
        expected = "merge,retainKeys" if strategy.retain_keys else "merge"
        assert schema["x-kubernetes-patch-strategy"] == expected, path
        assert schema.get("x-kubernetes-patch-merge-key", "") == strategy.merge_key, path


# ---------------------------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------------------------

WRITE_PARAMETERS = {"dryRun", "fieldManager", "fieldValidation"}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_a_path_per_verb(kind: Any) -> None:
    paths = openapi_v2()["paths"]
    gvk = _gvk(kind.api_version, kind.name)
    item = _item_path(kind)
    collection = item.removesuffix("/{name}")
    expected = {
        (collection, "get"): "list",
        (collection, "post"): "post",
        (collection, "delete"): "deletecollection",
        (item, "get"): "get",
        (item, "put"): "put",
        (item, "patch"): "patch",
        (item, "delete"): "delete",
    }
    if kind.namespaced:
        expected[(f"{_prefix(kind.api_version)}/{kind.plural}", "get")] = "list"
    for (path, method), action in expected.items():
        operation = paths[path][method]
        assert operation["x-kubernetes-action"] == action, (path, method)
        assert operation["x-kubernetes-group-version-kind"] == gvk, (path, method)
        assert operation["operationId"] and operation["responses"]["200"]
        if method in ("post", "put", "patch"):
            assert WRITE_PARAMETERS <= _param_names(operation), (path, method)
            assert any(p["in"] == "body" for p in operation["parameters"])
    assert {"watch", "labelSelector", "fieldSelector", "resourceVersion", "limit", "continue"} <= _param_names(
        paths[collection]["get"])
    assert _param_names(paths[item]["delete"]) >= {"dryRun", "gracePeriodSeconds", "propagationPolicy"}
    assert _param_names(paths[collection]["delete"]) >= {"labelSelector", "fieldSelector", "dryRun",
                                                         "gracePeriodSeconds", "propagationPolicy"}
    assert paths[item]["patch"]["consumes"] == [
        "application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json",
        "application/strategic-merge-patch+json"]
    assert paths[collection]["get"]["operationId"].startswith("list")


SUBRESOURCES = {
    # kind: {subresource: (methods, the operation's kind and apiVersion)}
    "Pod": {"status": ("get put patch", "v1", "Pod"), "resize": ("get put patch", "v1", "Pod"),
            "binding": ("post", "v1", "Binding"), "eviction": ("post", "policy/v1", "Eviction")},
    "ReplicaSet": {"status": ("get put patch", "apps/v1", "ReplicaSet"),
                   "scale": ("get put patch", "autoscaling/v1", "Scale")},
    "Deployment": {"status": ("get put patch", "apps/v1", "Deployment"),
                   "scale": ("get put patch", "autoscaling/v1", "Scale")},
    "Namespace": {"status": ("get put patch", "v1", "Namespace"), "finalize": ("put", "v1", "Namespace")},
    "Node": {"status": ("get put patch", "v1", "Node")},
}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_subresource_has_its_operations(kind: Any) -> None:
    paths = openapi_v2()["paths"]
    served = (("status",) if kind.has_status else ()) + kind.subresources
    for sub in served:
        operations = paths[f"{_item_path(kind)}/{sub}"]
        methods, api_version, body_kind = SUBRESOURCES.get(kind.name, {}).get(
            sub, ("get put patch", kind.api_version, kind.name))
        assert {m for m in operations if m != "parameters"} == set(methods.split()), sub
        for method in methods.split():
            operation = operations[method]
            assert operation["x-kubernetes-group-version-kind"] == _gvk(api_version, body_kind), (sub, method)
            assert operation["x-kubernetes-action"] == ("post" if method == "post" else method)
            if method != "get":
                assert WRITE_PARAMETERS <= _param_names(operation), (sub, method)
    unserved = {p.rpartition("/")[2] for p in paths if p.startswith(_item_path(kind) + "/")} - set(served)
    assert not unserved


def test_kubectl_finds_field_validation_on_every_patch_of_a_kind_in_v3() -> None:
    """kubectl apply/create validate on the server when the v3 document of the kind's group/version
    has a PATCH operation of the kind's GVK whose own parameters name fieldValidation (kubectl's
    QueryParamVerifierV3 reads the first such operation it meets, so every one must have it)."""
    documents = _v3_documents()
    for kind in KINDS:
        gv = _prefix(kind.api_version).lstrip("/")
        patches = [path["patch"] for path in documents[gv]["paths"].values() if "patch" in path
                   and path["patch"]["x-kubernetes-group-version-kind"] == _gvk(kind.api_version, kind.name)]
        assert patches, kind.name
        for operation in patches:
            assert any(p["name"] == "fieldValidation" and p["in"] == "query" for p in operation["parameters"])


# ---------------------------------------------------------------------------------------------
# v3 index, references, validity, determinism
# ---------------------------------------------------------------------------------------------


def test_v3_index_lists_every_group_version_with_the_hash_of_its_document() -> None:
    index = openapi_v3_paths()["paths"]
    assert set(index) == GROUP_VERSIONS
    for group_version, entry in index.items():
        url, _, query = entry["serverRelativeURL"].partition("?hash=")
        assert url == f"/openapi/v3/{group_version}"
        # Every object's keys are sorted, so the compact JSON the REST server sends, in the order the
        # document is built, is the sorted encoding the hash is of.
        document = openapi_v3(group_version)
        encoded = json.dumps(document, separators=(",", ":")).encode()
        assert encoded == json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
        assert query == hashlib.sha512(encoded).hexdigest().upper()
    assert openapi_v3("apis/batch/v1") is None
    assert openapi_v3("/api/v1/") is openapi_v3("api/v1")


def test_each_v3_document_holds_its_group_version_only() -> None:
    for group_version, document in _v3_documents().items():
        assert document["openapi"].startswith("3.0")
        assert all(path.startswith(f"/{group_version}/") for path in document["paths"])
        kinds = [k for k in KINDS if _prefix(k.api_version).lstrip("/") == group_version]
        schemas = document["components"]["schemas"]
        for kind in kinds:
            assert schemas[KUBERNETES_NAMES[kind.name]]["x-kubernetes-group-version-kind"] == [
                _gvk(kind.api_version, kind.name)]
    core = _v3_documents()["api/v1"]["components"]["schemas"]
    # Kubernetes' v3 gives the JSON types a Quantity or an IntOrString may have.
    assert core[QUANTITY]["oneOf"] == [{"type": "string"}, {"type": "number"}]
    apps = _v3_documents()["apis/apps/v1"]["components"]["schemas"]
    assert apps[INT_OR_STRING]["oneOf"] == [{"type": "integer"}, {"type": "string"}]
    assert apps[INT_OR_STRING]["format"] == "int-or-string"
    # A reference with a description of its own is wrapped in allOf (OpenAPI 3.0 ignores siblings).
    resources = core["io.k8s.api.core.v1.Container"]["properties"]["resources"]
    assert resources["allOf"] == [{"$ref": f"{V3_REFS}io.k8s.api.core.v1.ResourceRequirements"}]
    assert resources["description"] == COMMENTS["kplane.v1.Container.resources"]
    assert "io.k8s.api.apps.v1.Deployment" not in core


def test_every_ref_resolves() -> None:
    v2 = openapi_v2()
    for ref in _refs(v2):
        assert ref.startswith(V2_REFS) and ref.removeprefix(V2_REFS) in v2["definitions"], ref
    for group_version, document in _v3_documents().items():
        for ref in _refs(document):
            assert ref.startswith(V3_REFS), ref
            assert ref.removeprefix(V3_REFS) in document["components"]["schemas"], (group_version, ref)


def test_documents_are_valid_openapi() -> None:
    try:
        from openapi_spec_validator import validate
    except ImportError:  # the dev extra has it; without it, the shape every OpenAPI 3.0 document has
        validate = None
    if validate is not None:
        validate(openapi_v2())
    for document in _v3_documents().values():
        if validate is not None:
            validate(document)
        assert set(document) == {"components", "info", "openapi", "paths", "security"}
        for path in document["paths"].values():
            for method, operation in path.items():
                if method == "parameters":
                    continue
                assert method in {"get", "put", "post", "delete", "patch"}
                for response in operation["responses"].values():
                    assert "description" in response
                for parameter in operation.get("parameters", []):
                    assert {"name", "in", "schema"} <= parameter.keys()


_FINGERPRINT = """
import hashlib, json
from apiserver.rest.openapi import openapi_v2, openapi_v3_paths
print(hashlib.sha512(json.dumps([openapi_v2(), openapi_v3_paths()], sort_keys=True).encode()).hexdigest())
"""


def test_documents_are_the_same_on_every_build() -> None:
    """Two builds in fresh processes with different hash seeds give the same documents (so every
    apiserver serves the same hash, and kubectl's cache stays valid across restarts)."""
    here = hashlib.sha512(json.dumps([openapi_v2(), openapi_v3_paths()], sort_keys=True).encode()).hexdigest()
    for seed in ("1", "2"):
        run = subprocess.run([sys.executable, "-c", _FINGERPRINT], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, timeout=120, check=True)
        assert run.stdout.strip() == here


def test_descriptions_come_from_the_protos() -> None:
    definitions = openapi_v2()["definitions"]
    requirements = definitions["io.k8s.api.core.v1.ResourceRequirements"]
    assert requirements["description"] == COMMENTS["kplane.v1.ResourceRequirements"]
    assert definitions["io.k8s.api.core.v1.Binding"]["description"] == COMMENTS["kplane.v1.Binding"]
    status = definitions["io.k8s.api.core.v1.PodStatus"]["properties"]["qosClass"]
    assert status["description"] == COMMENTS["kplane.v1.PodStatus.qos_class"]
