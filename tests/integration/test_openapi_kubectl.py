"""The real kubectl reading kplane's OpenAPI documents (apiserver/rest/openapi.py).

Without a cluster: a stub HTTP server answers what kubectl asks before it reads a schema (/version,
legacy discovery of /api and /apis) and serves the documents as they are, so these tests check the
documents against kubectl itself — ``kubectl explain`` walks the v3 schema, ``kubectl apply``
decides on server-side field validation from the v3 PATCH operations — independently of the REST
API server. Against a cluster: the same through kplane's REST API.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from apiserver.rest.openapi import openapi_v2, openapi_v3, openapi_v3_paths
from machinery.api.comments import COMMENTS
from machinery.kinds import KINDS
from tests.harness import kubectl

pytestmark = pytest.mark.integration


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
# A Pod of the Kubernetes docs ("Taints and Tolerations").
POD_MANIFEST = FIXTURES / "pod-with-toleration.yaml"


# ---------------------------------------------------------------------------------------------
# The stub: discovery as kubectl's legacy discovery reads it, and the documents.
# ---------------------------------------------------------------------------------------------


def _group_versions() -> dict[str, str]:
    """group -> version, for every API group of KINDS but the core one."""
    return {k.group: k.api_version.rpartition("/")[2] for k in KINDS if k.group}


def _resource_list(api_version: str) -> dict[str, Any] | None:
    resources = [
        {"name": k.plural, "singularName": k.name.lower(), "namespaced": k.namespaced, "kind": k.name,
         "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"], "shortNames": list(k.short_names)}
        for k in KINDS if k.api_version == api_version
    ]
    if not resources:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version, "resources": resources}


def _not_found() -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
            "message": "the server could not find the requested resource"}


@dataclass
class Stub:
    url: str
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)  # method, path, query
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> the object GET answers
    patches: list[tuple[str, dict[str, Any]]] = field(default_factory=list)  # Content-Type, body


def _handler(stub: Stub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status: int, body: Any) -> None:
            data = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _record(self) -> str:
            url = urlsplit(self.path)
            stub.requests.append((self.command, url.path, parse_qs(url.query)))
            return url.path

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            path = self._record()
            body: Any = None
            if path == "/version":
                body = {"major": "1", "minor": "32", "gitVersion": "v1.32.0", "platform": "linux/amd64"}
            elif path == "/api":
                body = {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}
            elif path == "/apis":
                body = {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                    {"name": g, "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                     "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v}}
                    for g, v in _group_versions().items()]}
            elif path == "/openapi/v2" and "protobuf" not in self.headers.get("Accept", ""):
                body = openapi_v2()
            elif path == "/openapi/v3":
                body = openapi_v3_paths()
            elif path.startswith("/openapi/v3/"):
                body = openapi_v3(path.removeprefix("/openapi/v3/"))
            elif path in stub.objects:
                body = stub.objects[path]
            elif path.startswith(("/api/", "/apis/")):
                body = _resource_list(path.removeprefix("/api/").removeprefix("/apis/"))
            if body is None:
                self._answer(404, _not_found())
            else:
                self._answer(200, body)

        def do_POST(self) -> None:  # noqa: N802
            """A create: answered with what was sent, as a dry run would."""
            self._record()
            length = int(self.headers.get("Content-Length", "0"))
            self._answer(201, json.loads(self.rfile.read(length) or b"{}"))

        def do_PATCH(self) -> None:  # noqa: N802
            """A patch of an object the stub holds: recorded, answered with the object."""
            path = self._record()
            length = int(self.headers.get("Content-Length", "0"))
            stub.patches.append((self.headers.get("Content-Type", ""), json.loads(self.rfile.read(length))))
            if path in stub.objects:
                self._answer(200, stub.objects[path])
            else:
                self._answer(404, _not_found())

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(Stub("")))
    stub = Stub(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(stub)
    thread = threading.Thread(target=server.serve_forever, name="openapi-stub", daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _kubeconfig(directory: Path, server: str, token: str = "stub", ca: str | None = None) -> Path:
    cluster = {"server": server, **({"certificate-authority": ca} if ca else {})}
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "kplane",
        "clusters": [{"name": "kplane", "cluster": cluster}],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "kplane", "context": {"cluster": "kplane", "user": "admin"}}],
    }
    path = directory / "kubeconfig"
    path.write_text(json.dumps(config))
    return path


def _kubectl(kubeconfig: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return kubectl.run(kubeconfig, cache, *args)


def _words(text: str) -> str:
    """Text with its whitespace collapsed: kubectl wraps descriptions at 76 columns."""
    return " ".join(text.split())


def _check_explain_resources(out: str) -> None:
    """What ``kubectl explain pod.spec.containers.resources`` prints from kplane's documents."""
    assert "KIND:       Pod" in out and "VERSION:    v1" in out, out
    assert "FIELD: resources <ResourceRequirements>" in out, out
    assert "requests\t<map[string]Quantity>" in out, out
    assert "limits\t<map[string]Quantity>" in out, out
    assert "claims\t<[]ResourceClaim>" in out, out
    words = _words(out)
    for description in (COMMENTS["kplane.v1.Container.resources"], COMMENTS["kplane.v1.ResourceRequirements"],
                        COMMENTS["kplane.v1.ResourceRequirements.requests"],
                        COMMENTS["kplane.v1.ResourceRequirements.limits"]):
        assert _words(description) in words, out


# ---------------------------------------------------------------------------------------------
# Against the stub
# ---------------------------------------------------------------------------------------------


def test_kubectl_explain_pod_containers_resources(stub: Stub, tmp_path: Path) -> None:
    run = _kubectl(_kubeconfig(tmp_path, stub.url), tmp_path / "cache", "explain", "pod.spec.containers.resources")
    assert run.returncode == 0, run.stderr
    _check_explain_resources(run.stdout)
    assert any(path.startswith("/openapi/v3/api/v1") for _, path, _ in stub.requests)


def test_kubectl_explain_walks_every_kind(stub: Stub, tmp_path: Path) -> None:
    """``kubectl explain <plural>`` finds each kind's schema by the GVK of its path's operations."""
    kubeconfig, cache = _kubeconfig(tmp_path, stub.url), tmp_path / "cache"
    for kind in KINDS:
        run = _kubectl(kubeconfig, cache, "explain", kind.plural)
        assert run.returncode == 0, (kind.name, run.stderr)
        assert f"KIND:       {kind.name}" in run.stdout
        assert "metadata\t<ObjectMeta>" in run.stdout, run.stdout
    run = _kubectl(kubeconfig, cache, "explain", "deployment.spec.strategy.rollingUpdate.maxSurge")
    assert run.returncode == 0, run.stderr
    assert "FIELD: maxSurge <IntOrString>" in run.stdout, run.stdout


def test_kubectl_apply_leaves_field_validation_to_the_server(stub: Stub, tmp_path: Path) -> None:
    """kubectl sends fieldValidation=Strict (and validates nothing itself) because the v3 document
    of v1 has it on the Pod's PATCH operations; the stub answers the dry-run create."""
    run = _kubectl(_kubeconfig(tmp_path, stub.url), tmp_path / "cache", "apply", "--dry-run=server",
                   "-f", str(POD_MANIFEST))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "pod/nginx created (server dry run)"
    (create,) = [(path, query) for method, path, query in stub.requests if method == "POST"]
    assert create == ("/api/v1/namespaces/default/pods", {
        "dryRun": ["All"], "fieldManager": ["kubectl-client-side-apply"], "fieldValidation": ["Strict"]})
    assert not any(path == "/openapi/v2" for _, path, _ in stub.requests)


def test_kubectl_apply_builds_its_strategic_merge_patch_from_the_v3_extensions(stub: Stub, tmp_path: Path) -> None:
    """Client-side apply of a changed Pod: kubectl computes a strategic merge patch from the v3
    schema's x-kubernetes-patch-* (containers merge by name: only the changed container, and
    $setElementOrder) and never reads /openapi/v2 (its fallback is the Go structs compiled in)."""
    applied = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"containers": [{"name": "app", "image": "nginx"}, {"name": "sidecar", "image": "busybox"}]}}
    live = json.loads(json.dumps(applied))
    live["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(applied)}
    stub.objects["/api/v1/namespaces/default/pods/web"] = live
    changed = json.loads(json.dumps(applied))
    changed["spec"]["containers"][0]["image"] = "nginx:1.27"
    manifest = tmp_path / "web.json"
    manifest.write_text(json.dumps(changed))
    run = _kubectl(_kubeconfig(tmp_path, stub.url), tmp_path / "cache", "apply", "-f", str(manifest))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "pod/web configured"
    ((content_type, patch),) = stub.patches
    assert content_type == "application/strategic-merge-patch+json"
    assert patch["spec"] == {"$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                             "containers": [{"image": "nginx:1.27", "name": "app"}]}
    assert not any(path == "/openapi/v2" for _, path, _ in stub.requests)


# ---------------------------------------------------------------------------------------------
# Against a cluster's REST API
# ---------------------------------------------------------------------------------------------

def test_kubectl_explain_and_apply_against_a_cluster(kcluster: Any, tmp_path: Path) -> None:
    """The documents through kplane's REST API: explain, a server-side dry run, and an unknown
    field refused by the server's strict field validation, which kubectl asked for."""
    kubeconfig = Path(kcluster.kubeconfig)
    cache = tmp_path / "cache"
    run = _kubectl(kubeconfig, cache, "explain", "pod.spec.containers.resources")
    assert run.returncode == 0, run.stderr
    _check_explain_resources(run.stdout)
    run = _kubectl(kubeconfig, cache, "apply", "--dry-run=server", "-f", str(POD_MANIFEST))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "pod/nginx created (server dry run)"
    bad = tmp_path / "bad.yaml"
    bad.write_text(POD_MANIFEST.read_text().replace("  containers:\n", "  containerz: []\n  containers:\n"))
    run = _kubectl(kubeconfig, cache, "apply", "--dry-run=server", "-f", str(bad))
    assert run.returncode != 0
    assert 'unknown field "spec.containerz"' in run.stderr, run.stderr
