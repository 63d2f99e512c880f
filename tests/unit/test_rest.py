"""The REST API's pure parts: Kubernetes' URL layout, metav1.Status, content negotiation, request
bodies (JSON and kubectl's protobuf), Table columns (the same as ``kplane get``), discovery and
the access reviews' decisions."""

from __future__ import annotations

import json

import pytest

from apiserver.auth import NODES_GROUP, User
from apiserver.rest import access, codec, discovery, paths, protobuf, tables
from cli import printers as cli_printers
from machinery import errors
from machinery.api import core_pb2
from machinery.kinds import DEPLOYMENT, KINDS, NAMESPACE, NODE, POD, PRIORITY_CLASS, REPLICA_SET
from machinery.version import BINARY, Version
from tests.harness.builders import MakePod, make_priority_class

# ---------------------------------------------------------------- paths


@pytest.mark.parametrize("path,kind,namespace,name,sub", [
    ("/api/v1/namespaces/default/pods", POD, "default", "", ""),
    ("/api/v1/namespaces/default/pods/web", POD, "default", "web", ""),
    ("/api/v1/namespaces/default/pods/web/resize", POD, "default", "web", "resize"),
    ("/api/v1/namespaces/default/pods/web/eviction", POD, "default", "web", "eviction"),
    ("/api/v1/pods", POD, "", "", ""),
    ("/api/v1/nodes/node-1", NODE, "", "node-1", ""),
    ("/api/v1/nodes/node-1/status", NODE, "", "node-1", "status"),
    ("/api/v1/namespaces", NAMESPACE, "", "", ""),
    ("/api/v1/namespaces/team-a", NAMESPACE, "", "team-a", ""),
    ("/api/v1/namespaces/team-a/finalize", NAMESPACE, "", "team-a", "finalize"),
    ("/api/v1/namespaces/team-a/status", NAMESPACE, "", "team-a", "status"),
    ("/apis/apps/v1/namespaces/default/deployments/web/scale", DEPLOYMENT, "default", "web", "scale"),
    ("/apis/apps/v1/replicasets", REPLICA_SET, "", "", ""),
    ("/apis/scheduling.k8s.io/v1/priorityclasses/high", PRIORITY_CLASS, "", "high", ""),
])
def test_paths_name_kubernetes_urls(path, kind, namespace, name, sub):
    t = paths.parse(path)
    assert (t.kind, t.namespace, t.name, t.subresource) == (kind, namespace, name, sub)
    assert t.all_namespaces == (kind.namespaced and not namespace)


@pytest.mark.parametrize("path", [
    "/api/v2/pods", "/apis/apps/v2/deployments", "/api/v1/namespaces/default/potatoes", "/api/v1/pods/web",
    "/api/v1/namespaces/default/nodes/node-1", "/api/v1/namespaces/default/pods/web/nonsense",
    "/apis/apps/v1/namespaces/default/deployments/web/resize", "/api/v1/namespaces/default/pods/web/status/x",
])
def test_paths_that_name_nothing_served_are_not_found(path):
    with pytest.raises(errors.NotFound, match="the server could not find the requested resource"):
        paths.parse(path)


def test_discovery_paths_are_not_resources_and_watch_paths_are():
    for path in ("/api", "/api/v1", "/apis", "/apis/apps", "/apis/apps/v1", "/version"):
        with pytest.raises(paths.NotAResource):
            paths.parse(path)
    t = paths.parse("/api/v1/watch/namespaces/default/pods")
    assert t.watch_path and t.kind is POD and t.namespace == "default"


def test_every_kind_has_a_url_that_parses_back():
    for kind in KINDS:
        ns = "ns" if kind.namespaced else ""
        for sub in ("", *paths.subresources(kind)):
            t = paths.parse(paths.path_of(kind, ns, "x", sub))
            assert (t.kind, t.namespace, t.name, t.subresource) == (kind, ns, "x", sub)


# ---------------------------------------------------------------- Status


def test_not_found_status_is_kubernetes():
    body = codec.status(errors.not_found("pods", "x"), POD, "x")
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pods "x" not found', "reason": "NotFound",
                    "details": {"name": "x", "kind": "pods"}, "code": 404}


def test_a_grouped_resource_is_named_with_its_group_as_kubernetes_does():
    body = codec.status(errors.not_found("priorityclasses", "hi"), PRIORITY_CLASS, "hi")
    assert body["message"] == 'priorityclasses.scheduling.k8s.io "hi" not found'
    assert body["details"] == {"name": "hi", "group": "scheduling.k8s.io", "kind": "priorityclasses"}


def test_conflict_loses_the_grpc_prefix():
    body = codec.status(errors.conflict("pods", "web"), POD, "web")
    assert body["code"] == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on pods "web": the object has been modified; please '
                               "apply your changes to the latest version and try again")


def test_invalid_carries_its_causes():
    exc = errors.Invalid.of("Pod", "Bad_Name", [errors.invalid("metadata.name", "Bad_Name", "a lowercase RFC 1123"),
                                                errors.required("spec.containers")])
    body = codec.status(exc, POD, "Bad_Name")
    assert body["code"] == 422 and body["reason"] == "Invalid"
    assert body["details"]["kind"] == "Pod"
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "Bad_Name": a lowercase RFC 1123',
         "field": "metadata.name"},
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"}]


@pytest.mark.parametrize("exc,code,reason", [
    (errors.Gone("too old resource version: 1 (5)"), 410, "Expired"),
    (errors.TooManyRequests("Cannot evict pod"), 429, "TooManyRequests"),
    (errors.Unauthorized("Unauthorized"), 401, "Unauthorized"),
    (errors.Forbidden('pods "x" is forbidden'), 403, "Forbidden"),
    (errors.RequestEntityTooLarge.of(), 413, "RequestEntityTooLarge"),
    (errors.Unavailable("the apiserver is not ready"), 503, "ServiceUnavailable"),
    (codec.NotEmulated("pods/exec is not emulated by kplane"), 501, "NotImplemented"),
])
def test_each_error_has_its_code_and_reason(exc, code, reason):
    body = codec.status(exc)
    assert (body["code"], body["reason"], body["message"]) == (code, reason, exc.message)


# ---------------------------------------------------------------- negotiation and bodies


def test_kubectl_get_asks_for_a_table_and_gets_one():
    accept = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
              "application/json")
    out = codec.negotiate(accept, table=True)
    assert (out.form, out.version) == ("table", "v1")
    assert out.content_type == "application/json;as=Table;v=v1;g=meta.k8s.io"
    assert codec.negotiate(accept, table=False) == codec.PLAIN  # a write falls back to the object


def test_aggregated_discovery_falls_back_to_the_legacy_document():
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
    assert codec.negotiate(accept, discovery=True).version == "v2"
    assert codec.negotiate(accept) == codec.PLAIN
    assert codec.negotiate("application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io,application/json",
                           table=True) == codec.PLAIN


def test_protobuf_only_is_not_acceptable():
    with pytest.raises(codec.NotAcceptable):
        codec.negotiate("application/vnd.kubernetes.protobuf")
    assert codec.negotiate("application/vnd.kubernetes.protobuf, */*") == codec.PLAIN


def test_field_validation_strict_refuses_warn_drops_with_a_warning():
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
           "spec": {"containers": [{"name": "c", "image": "i", "colour": "red"}], "foo": 1}}
    with pytest.raises(errors.BadRequest, match='Pod in version "v1" cannot be handled as a Pod: strict decoding '
                                                'error: unknown field "spec.containers\\[0\\].colour", unknown '
                                                'field "spec.foo"'):
        codec.decode(core_pb2.Pod, "v1", "Pod", doc, "Strict")
    warnings: list[str] = []
    pod = codec.decode(core_pb2.Pod, "v1", "Pod", doc, "Warn", warnings)
    assert isinstance(pod, core_pb2.Pod) and pod.spec.containers[0].image == "i"
    assert warnings == ['unknown field "spec.containers[0].colour"', 'unknown field "spec.foo"']
    with pytest.raises(errors.BadRequest, match="does not match the expected API version"):
        codec.decode(core_pb2.Pod, "v1", "Pod", {**doc, "apiVersion": "apps/v1"}, "Ignore")


def _pb(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_kubectls_protobuf_access_review_is_read():
    attrs = _pb(1, b"default") + _pb(2, b"update") + _pb(5, b"pods") + _pb(6, b"status")
    raw = _pb(2, _pb(1, attrs))  # spec.resourceAttributes
    type_meta = _pb(1, b"authorization.k8s.io/v1") + _pb(2, b"SelfSubjectAccessReview")
    body = protobuf.MAGIC + _pb(1, type_meta) + _pb(2, raw)
    doc = codec.read_document(body, protobuf.MEDIA_TYPE)
    assert doc == {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"resourceAttributes": {"namespace": "default", "verb": "update", "resource": "pods",
                                                   "subresource": "status"}}}
    with pytest.raises(codec.UnsupportedMediaType):
        codec.read_document(protobuf.MAGIC + _pb(1, _pb(1, b"v1") + _pb(2, b"Pod")), protobuf.MEDIA_TYPE)


# ---------------------------------------------------------------- tables


@pytest.mark.parametrize("kind", KINDS, ids=[k.name for k in KINDS])
def test_table_columns_are_kplane_gets(kind):
    cols = tables.column_definitions(kind)
    assert [c["name"].upper() for c in cols] == cli_printers.table_header(kind, True, False)
    assert [c["name"].upper() for c in cols if c["priority"] == 0] == cli_printers.table_header(kind, False, False)


def test_table_rows_are_kplane_gets_cells():
    pod = MakePod().name("web").req(cpu="100m").node("node-1").obj()
    pod.metadata.creation_timestamp = "2026-01-01T00:00:00Z"
    out = tables.table(POD, [pod], codec.Output("table", codec.JSON, "v1", "Metadata"), {"resourceVersion": "7"})
    assert out["kind"] == "Table" and out["apiVersion"] == "meta.k8s.io/v1"
    assert out["metadata"] == {"resourceVersion": "7"}
    assert [str(c) for c in out["rows"][0]["cells"]] == cli_printers.table_row(POD, pod, True, False)
    assert out["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert out["rows"][0]["object"]["metadata"]["name"] == "web"
    pc = make_priority_class("high", 1000)
    row = tables.row(PRIORITY_CLASS, pc, "None")
    assert row["cells"][1] == 1000 and row["cells"][2] is False and "object" not in row


def test_a_table_watch_frame_is_a_one_row_table_event():
    enc = tables.watch_encoding(POD, "v1", "Object")
    frame = enc.encode("MODIFIED", MakePod().name("web").obj())
    event = json.loads(frame)
    assert event["type"] == "MODIFIED" and event["object"]["kind"] == "Table"
    assert event["object"]["rows"][0]["object"]["metadata"]["name"] == "web"
    assert frame.endswith(b"\n") and tables.watch_encoding(POD, "v1", "Object") is enc


# ---------------------------------------------------------------- discovery


def test_discovery_lists_every_kind_with_its_subresources():
    core = discovery.resource_list("", "v1")
    names = {r["name"]: r for r in core["resources"]}
    assert names["pods"]["shortNames"] == ["po"] and names["pods"]["namespaced"] is True
    assert names["pods/eviction"]["group"] == "policy" and names["pods/eviction"]["kind"] == "Eviction"
    assert names["pods/resize"]["verbs"] == ["get", "patch", "update"]
    assert names["nodes"]["namespaced"] is False
    apps = {r["name"]: r for r in discovery.resource_list("apps", "v1")["resources"]}
    assert apps["deployments/scale"]["group"] == "autoscaling" and apps["deployments/scale"]["kind"] == "Scale"
    groups = {g["name"] for g in discovery.api_group_list()["groups"]}
    assert {"apps", "scheduling.k8s.io", "policy", "coordination.k8s.io", "resource.k8s.io",
            "authorization.k8s.io"} <= groups
    served = {(paths.group_version(k)[0], k.plural) for k in KINDS}
    listed = set()
    for legacy in (True, False):
        for item in discovery.aggregated(legacy, "v2")["items"]:
            for v in item["versions"]:
                listed |= {(item["metadata"].get("name", ""), r["resource"]) for r in v["resources"]}
    assert served <= listed


def test_version_is_the_release_the_apiserver_emulates():
    v = discovery.version(BINARY)
    assert (v["gitVersion"], v["major"], v["minor"]) == ("v1.37.0", "1", "37")
    v = discovery.version(Version(1, 35))
    assert (v["gitVersion"], v["minor"], v["emulationMinor"]) == ("v1.35.0", "35", "35")


# ---------------------------------------------------------------- access reviews


class _Cache:
    def __init__(self, pods):
        self.pods = pods

    def __getitem__(self, kind):
        pods = self.pods

        class _KindCache:
            def get(self, namespace, name):
                return pods.get((namespace, name)) if kind is POD else None
        return _KindCache()


def test_access_reviews_follow_node_restriction():
    node = User("system:node:node-1", groups=(NODES_GROUP,))
    cache = _Cache({("default", "mine"): MakePod().name("mine").node("node-1").obj(),
                    ("default", "theirs"): MakePod().name("theirs").node("node-2").obj()})

    def can(user, **attrs):
        return access.decide(user, attrs, cache)[0]  # type: ignore[arg-type]

    assert can(User("admin", groups=("system:masters",)), verb="create", resource="pods")
    assert can(node, verb="list", resource="pods")
    assert can(node, verb="update", resource="pods", subresource="status")
    assert can(node, verb="patch", resource="pods", subresource="status", namespace="default", name="mine")
    assert not can(node, verb="patch", resource="pods", subresource="status", namespace="default", name="theirs")
    assert not can(node, verb="create", resource="pods")
    assert can(node, verb="update", resource="nodes", name="node-1")
    assert not can(node, verb="update", resource="nodes", name="node-2")
    assert not can(node, verb="create", group="scheduling.k8s.io", resource="priorityclasses")
