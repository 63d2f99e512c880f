"""ReplicaSet, Deployment, Namespace, ResourceQuota and LimitRange against a real apiserver on a
real etcd: the verbs, watch, the status, scale and finalize subresources, namespace deletion and
lifecycle admission, the system namespaces, ``kplane get`` tables and ``kplane apply`` of the
Kubernetes docs' manifests as they are written."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from machinery import errors, jsonconv
from machinery.api import apps_pb2, core_pb2
from machinery.client import Client, WatchEvent
from tests.harness.builders import MakePod
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

# https://kubernetes.io/docs/concepts/workloads/controllers/deployment/ (controllers/nginx-deployment.yaml)
NGINX_DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nginx-deployment
  labels:
    app: nginx
spec:
  replicas: 3
  selector:
    matchLabels:
      app: nginx
  template:
    metadata:
      labels:
        app: nginx
    spec:
      containers:
      - name: nginx
        image: nginx:1.14.2
        ports:
        - containerPort: 80
"""

# https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/ (controllers/frontend.yaml)
FRONTEND_REPLICASET = """\
apiVersion: apps/v1
kind: ReplicaSet
metadata:
  name: frontend
  labels:
    app: guestbook
    tier: frontend
spec:
  # modify replicas according to your case
  replicas: 3
  selector:
    matchLabels:
      tier: frontend
  template:
    metadata:
      labels:
        tier: frontend
    spec:
      containers:
      - name: php-redis
        image: us-docker.pkg.dev/google-samples/containers/gke/gb-frontend:v5
"""


def deployment(name: str, namespace: str = "default", replicas: int | None = 2, app: str = "") -> apps_pb2.Deployment:
    app = app or name
    containers = [{"name": "c1", "image": "registry.k8s.io/pause:3.10"}]
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": app}},
                            "template": {"metadata": {"labels": {"app": app}}, "spec": {"containers": containers}}}
    if replicas is not None:
        spec["replicas"] = replicas
    return jsonconv.from_dict(apps_pb2.Deployment, {"apiVersion": "apps/v1", "kind": "Deployment",
                                                    "metadata": {"name": name, "namespace": namespace},
                                                    "spec": spec})


def namespace(name: str) -> core_pb2.Namespace:
    ns = core_pb2.Namespace(api_version="v1", kind="Namespace")
    ns.metadata.name = name
    return ns


def table(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


# ---------------------------------------------------------------- system namespaces


async def test_the_apiserver_creates_the_system_namespaces(client: Client) -> None:
    got = {ns.metadata.name: ns for ns in (await client.namespaces.list()).items}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= set(got)
    default = got["default"]
    assert default.status.phase == "Active"
    assert list(default.spec.finalizers) == ["kubernetes"]
    assert default.metadata.labels["kubernetes.io/metadata.name"] == "default"


@pytest.mark.parametrize("name", ["default", "kube-system", "kube-public", "kube-node-lease"])
async def test_system_namespaces_may_not_be_deleted(client: Client, name: str) -> None:
    with pytest.raises(errors.Forbidden) as exc:
        await client.namespaces.delete(name)
    assert exc.value.message == f'namespaces "{name}" is forbidden: this namespace may not be deleted'
    assert (await client.namespaces.get(name)).status.phase == "Active"


def test_kplane_delete_of_a_system_namespace_fails_cleanly(kcluster) -> None:
    out = kcluster.kplane("delete", "ns", "kube-system")
    assert out.returncode != 0
    assert out.stderr.strip().splitlines() == [
        'Error from server (Forbidden): namespaces "kube-system" is forbidden: this namespace may not be deleted']


# ---------------------------------------------------------------- Deployment


async def test_deployment_create_get_list_with_defaults(client: Client) -> None:
    created = await client.deployments.create(deployment("web", replicas=None))
    assert created.metadata.generation == 1 and created.metadata.uid
    assert created.spec.replicas == 1
    assert created.spec.strategy.type == "RollingUpdate"
    assert created.spec.strategy.rolling_update.max_surge == "25%"
    assert created.spec.revision_history_limit == 10 and created.spec.progress_deadline_seconds == 600
    assert created.spec.template.spec.restart_policy == "Always"
    got = await client.deployments.get("web")
    assert got == created
    listed = await client.deployments.list("default", label_selector="")
    assert "web" in [d.metadata.name for d in listed.items]


async def test_deployment_validation_is_kubernetes(client: Client) -> None:
    bad = deployment("mismatch")
    bad.spec.template.metadata.labels["app"] = "other"
    with pytest.raises(errors.Invalid) as exc:
        await client.deployments.create(bad)
    assert exc.value.message == ('Deployment "mismatch" is invalid: spec.template.metadata.labels: Invalid value: '
                                 'map[string]string{"app":"other"}: `selector` does not match template `labels`')


async def test_deployment_update_bumps_generation_and_keeps_status_and_selector(client: Client) -> None:
    d = await client.deployments.create(deployment("upd"))
    d.status.replicas = 7  # ignored: only the status subresource writes status
    d.spec.template.spec.containers[0].image = "registry.k8s.io/pause:3.9"
    updated = await client.deployments.update(d)
    assert updated.metadata.generation == 2 and updated.status.replicas == 0
    updated.metadata.annotations["team"] = "a"  # a Deployment's annotations count as spec
    annotated = await client.deployments.update(updated)
    assert annotated.metadata.generation == 3
    annotated.spec.selector.match_labels["tier"] = "web"
    annotated.spec.template.metadata.labels["tier"] = "web"
    with pytest.raises(errors.Invalid, match=r'spec\.selector: Invalid value: v1\.LabelSelector\{MatchLabels:map'
                                             r'\[string\]string\{"app":"upd", "tier":"web"\}, MatchExpressions:'
                                             r'\[\]v1\.LabelSelectorRequirement\(nil\)\}: field is immutable'):
        await client.deployments.update(annotated)


async def test_deployment_patches_merge_the_template_containers_by_name(client: Client, kcluster) -> None:
    d = deployment("patched")
    d.spec.template.spec.containers.add(name="sidecar", image="registry.k8s.io/pause:3.10")
    await client.deployments.create(d)
    out = await client.deployments.patch("patched", {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "registry.k8s.io/pause:3.9"}]}}}})
    assert [(c.name, c.image) for c in out.spec.template.spec.containers] == [
        ("c1", "registry.k8s.io/pause:3.10"), ("sidecar", "registry.k8s.io/pause:3.9")]
    assert out.metadata.generation == 2
    res = kcluster.kplane("patch", "deploy", "patched", "--type", "merge", "-p", '{"spec":{"replicas":4}}')
    assert res.returncode == 0, res.stderr
    assert (await client.deployments.get("patched")).spec.replicas == 4


async def test_deployment_status_subresource(client: Client) -> None:
    d = await client.deployments.create(deployment("stat", replicas=2))
    d.spec.replicas = 9  # ignored by the status subresource
    d.status.observed_generation = 1
    d.status.replicas, d.status.updated_replicas, d.status.ready_replicas, d.status.available_replicas = 2, 2, 1, 1
    out = await client.deployments.update_status(d)
    assert out.spec.replicas == 2 and out.status.ready_replicas == 1 and out.metadata.generation == 1
    out.status.available_replicas = 2
    with pytest.raises(errors.Invalid) as exc:
        await client.deployments.update_status(out)
    assert exc.value.message == ('Deployment "stat" is invalid: status.availableReplicas: Invalid value: 2: '
                                 'cannot be greater than readyReplicas')


async def test_deployment_scale_subresource(client: Client) -> None:
    d = await client.deployments.create(deployment("scaled", replicas=2))
    scale = await client.deployments.get_scale("scaled")
    assert (scale.api_version, scale.kind) == ("autoscaling/v1", "Scale")
    assert scale.metadata.uid == d.metadata.uid and scale.metadata.resource_version == d.metadata.resource_version
    assert scale.spec.replicas == 2 and scale.status.replicas == 0 and scale.status.selector == "app=scaled"
    assert jsonconv.to_dict(scale)["status"] == {"replicas": 0, "selector": "app=scaled"}

    scaled = await client.deployments.scale("scaled", 5, resource_version=scale.metadata.resource_version)
    assert scaled.spec.replicas == 5
    after = await client.deployments.get("scaled")
    assert after.spec.replicas == 5 and after.metadata.generation == 2  # as any spec change
    assert after.spec.template == d.spec.template  # nothing but spec.replicas changed

    with pytest.raises(errors.Conflict, match="the object has been modified"):
        await client.deployments.scale("scaled", 1, resource_version=scale.metadata.resource_version)
    with pytest.raises(errors.Invalid) as exc:
        await client.deployments.scale("scaled", -1)
    assert exc.value.message == 'Scale "scaled" is invalid: spec.replicas: Invalid value: -1: must be greater than ' \
                                'or equal to 0'
    with pytest.raises(errors.NotFound):
        await client.deployments.get_scale("absent")


async def test_deployment_watch_sees_create_update_delete(client: Client) -> None:
    events: list[WatchEvent[apps_pb2.Deployment]] = []
    start = (await client.deployments.list("default")).metadata.resource_version

    async def watch() -> None:
        async for ev in client.deployments.watch("default", field_selector="metadata.name=watched",
                                                 resource_version=start, allow_bookmarks=False):
            events.append(ev)
            if ev.type == "DELETED":
                return

    task = asyncio.create_task(watch())
    await client.deployments.create(deployment("watched"))
    await client.deployments.scale("watched", 4)
    await client.deployments.delete("watched")
    await asyncio.wait_for(task, 30)
    assert [(e.type, e.object.spec.replicas) for e in events] == [("ADDED", 2), ("MODIFIED", 4), ("DELETED", 4)]


# ---------------------------------------------------------------- ReplicaSet


async def test_replica_set_verbs_status_and_scale(client: Client) -> None:
    rs = jsonconv.from_dict(apps_pb2.ReplicaSet, {
        "metadata": {"name": "rs1", "namespace": "default"},
        "spec": {"selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]},
                 "template": {"metadata": {"labels": {"tier": "a"}},
                              "spec": {"containers": [{"name": "c1", "image": "registry.k8s.io/pause:3.10"}]}}}})
    created = await client.replica_sets.create(rs)
    assert created.spec.replicas == 1
    scale = await client.replica_sets.get_scale("rs1")
    assert scale.status.selector == "tier in (a,b)"
    await client.replica_sets.scale("rs1", 3)
    got = await client.replica_sets.get("rs1")
    assert got.spec.replicas == 3 and got.metadata.generation == 2
    got.status.replicas, got.status.fully_labeled_replicas, got.status.ready_replicas = 3, 3, 2
    got.status.observed_generation = 2
    out = await client.replica_sets.update_status(got)
    assert out.status.ready_replicas == 2
    assert (await client.replica_sets.get_scale("rs1")).status.replicas == 3


# ---------------------------------------------------------------- Namespace lifecycle


async def test_create_in_a_missing_namespace_is_refused(client: Client) -> None:
    with pytest.raises(errors.NotFound) as exc:
        await client.pods.create(MakePod().name("lost").namespace("no-such-ns").obj())
    assert exc.value.message == 'namespaces "no-such-ns" not found'


async def test_namespace_deletion_waits_for_its_finalizers(client: Client) -> None:
    ns = await client.namespaces.create(namespace("doomed"))
    assert list(ns.spec.finalizers) == ["kubernetes"] and ns.status.phase == "Active"
    # A create right after the namespace's: the apiserver looks past a cache that may not have it yet.
    await client.deployments.create(deployment("app", namespace="doomed"))
    pod = await client.pods.create(MakePod().name("p").namespace("doomed").obj())

    deleted = await client.namespaces.delete("doomed")
    assert deleted.metadata.deletion_timestamp and deleted.status.phase == "Terminating"
    got = await client.namespaces.get("doomed")
    assert got.status.phase == "Terminating" and list(got.spec.finalizers) == ["kubernetes"]
    again = await client.namespaces.delete("doomed")  # kept while spec.finalizers is not empty
    assert again.metadata.resource_version == got.metadata.resource_version

    with pytest.raises(errors.Forbidden) as exc:
        await client.deployments.create(deployment("late", namespace="doomed"))
    assert exc.value.message == ('deployments "late" is forbidden: unable to create new content in namespace doomed '
                                 'because it is being terminated')
    # What is already there may still be changed and deleted (the namespace controller's job).
    pod.metadata.labels["seen"] = "yes"
    pod.metadata.resource_version = ""
    await client.pods.update(pod)
    await client.pods.delete("p", "doomed", grace_period_seconds=0)
    await client.deployments.delete("app", "doomed")

    # An update may not change spec.finalizers; the finalize subresource does.
    got.spec.ClearField("finalizers")
    kept = await client.namespaces.update(got)
    assert list(kept.spec.finalizers) == ["kubernetes"]
    kept.spec.ClearField("finalizers")
    last = await client.namespaces.finalize(kept)
    assert list(last.spec.finalizers) == [] and last.status.phase == "Terminating"
    with pytest.raises(errors.NotFound):
        await client.namespaces.get("doomed")


async def test_finalize_of_an_active_namespace_keeps_it(client: Client) -> None:
    ns = await client.namespaces.create(namespace("finalized-early"))
    ns.spec.ClearField("finalizers")
    out = await client.namespaces.finalize(ns)
    assert list(out.spec.finalizers) == [] and out.status.phase == "Active"
    marked = await client.namespaces.delete("finalized-early")  # the first delete marks it, as Kubernetes
    assert marked.status.phase == "Terminating"
    await client.namespaces.delete("finalized-early")  # no finalizer left: removed
    with pytest.raises(errors.NotFound):
        await client.namespaces.get("finalized-early")


async def test_namespace_watch_sees_termination_and_removal(client: Client) -> None:
    events: list[tuple[str, str]] = []
    start = (await client.namespaces.list()).metadata.resource_version

    async def watch() -> None:
        async for ev in client.namespaces.watch(field_selector="metadata.name=watched-ns", resource_version=start,
                                                allow_bookmarks=False):
            events.append((ev.type, ev.object.status.phase))
            if ev.type == "DELETED":
                return

    task = asyncio.create_task(watch())
    await client.namespaces.create(namespace("watched-ns"))
    ns = await client.namespaces.delete("watched-ns")
    ns.spec.ClearField("finalizers")
    await client.namespaces.finalize(ns)
    await asyncio.wait_for(task, 30)
    assert events == [("ADDED", "Active"), ("MODIFIED", "Terminating"), ("DELETED", "Terminating")]


# ---------------------------------------------------------------- ResourceQuota and LimitRange


async def test_resource_quota_status_and_table(client: Client, kcluster) -> None:
    q = jsonconv.from_dict(core_pb2.ResourceQuota, {
        "metadata": {"name": "compute", "namespace": "default"},
        "spec": {"hard": {"requests.cpu": "2", "limits.memory": "2Gi", "pods": 10}},
        "status": {"used": {"pods": "99"}}})
    created = await client.resource_quotas.create(q)
    assert dict(created.status.used) == {}  # status is the quota controller's
    with pytest.raises(errors.Invalid) as exc:
        bad = core_pb2.ResourceQuota()
        bad.CopyFrom(created)
        bad.metadata.resource_version = ""
        await client.resource_quotas.update_status(bad)
    assert exc.value.message == 'ResourceQuota "compute" is invalid: resourceVersion: Required value'
    created.status.hard.update(created.spec.hard)
    created.status.used.update({"requests.cpu": "500m", "pods": "1", "limits.memory": "0"})
    await client.resource_quotas.update_status(created)

    out = kcluster.kplane("get", "quota")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"]
    row = next(line for line in lines if line.startswith("compute "))
    assert "pods: 1/10, requests.cpu: 500m/2" in row and row.rstrip().endswith("limits.memory: 0/2Gi")

    with pytest.raises(errors.Invalid) as exc:
        await client.resource_quotas.create(jsonconv.from_dict(core_pb2.ResourceQuota, {
            "metadata": {"name": "bad", "namespace": "default"}, "spec": {"hard": {"storage": "1Gi"}}}))
    assert exc.value.message == ('ResourceQuota "bad" is invalid: spec.hard[storage]: Invalid value: "storage": '
                                 'must be a standard resource for quota')


async def test_limit_range_defaults_validation_and_table(client: Client, kcluster) -> None:
    lr = jsonconv.from_dict(core_pb2.LimitRange, {
        "metadata": {"name": "cpu-resource-constraint", "namespace": "default"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "min": {"cpu": "100m"}}]}})
    created = await client.limit_ranges.create(lr)
    item = created.spec.limits[0]
    assert dict(item.default) == {"cpu": "1"} and dict(item.default_request) == {"cpu": "1"}

    out = kcluster.kplane("get", "limits")
    assert out.returncode == 0, out.stderr
    rows = table(out.stdout)
    assert rows[0] == ["NAME", "CREATED", "AT"]
    assert ["cpu-resource-constraint", created.metadata.creation_timestamp] in rows

    bad = jsonconv.from_dict(core_pb2.LimitRange, {
        "metadata": {"name": "bad", "namespace": "default"},
        "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "1"}}]}})
    with pytest.raises(errors.Invalid) as exc:
        await client.limit_ranges.create(bad)
    assert exc.value.message == ('LimitRange "bad" is invalid: spec.limits[0].defaultRequest[cpu]: Invalid value: '
                                 '"1": default request value 1 is greater than default limit value 500m')


# ---------------------------------------------------------------- kplane


def test_kplane_apply_of_the_docs_deployment_and_get(kcluster, tmp_path) -> None:
    path = tmp_path / "nginx-deployment.yaml"
    path.write_text(NGINX_DEPLOYMENT)
    out = kcluster.kplane("apply", "-f", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["deployment.apps/nginx-deployment created"]
    out = kcluster.kplane("apply", "-f", str(path))
    assert out.stdout.splitlines() == ["deployment.apps/nginx-deployment unchanged"]

    out = kcluster.kplane("get", "deploy", "nginx-deployment")
    assert out.returncode == 0, out.stderr
    rows = table(out.stdout)
    assert rows[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert rows[1][:4] == ["nginx-deployment", "0/3", "0", "0"]
    out = kcluster.kplane("get", "deployment", "-o", "wide")
    rows = table(out.stdout)
    assert rows[0] == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert next(r for r in rows if r[0] == "nginx-deployment")[5:] == ["nginx", "nginx:1.14.2", "app=nginx"]

    out = kcluster.kplane("get", "deploy", "nginx-deployment", "-o", "json")
    doc = json.loads(out.stdout)
    assert (doc["apiVersion"], doc["kind"]) == ("apps/v1", "Deployment")
    assert doc["spec"]["strategy"] == {"type": "RollingUpdate",
                                       "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    assert doc["spec"]["revisionHistoryLimit"] == 10 and doc["spec"]["progressDeadlineSeconds"] == 600
    assert doc["spec"]["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert doc["metadata"]["generation"] == 1
    out = kcluster.kplane("get", "deploy", "nginx-deployment", "-o", "yaml")
    assert "progressDeadlineSeconds: 600" in out.stdout

    out = kcluster.kplane("history")
    kinds = {json.loads(line)["kind"] for line in out.stdout.splitlines()}
    assert {"Deployment", "Namespace"} <= kinds


def test_kplane_apply_and_get_replica_set(kcluster, tmp_path) -> None:
    path = tmp_path / "frontend.yaml"
    path.write_text(FRONTEND_REPLICASET)
    out = kcluster.kplane("apply", "-f", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["replicaset.apps/frontend created"]
    out = kcluster.kplane("get", "rs", "frontend", "-o", "wide")
    rows = table(out.stdout)
    assert rows[0] == ["NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"]
    assert rows[1][:4] == ["frontend", "3", "0", "0"]
    assert rows[1][5:] == ["php-redis", "us-docker.pkg.dev/google-samples/containers/gke/gb-frontend:v5",
                           "tier=frontend"]


def test_kplane_apply_of_a_namespace_and_its_content(kcluster, tmp_path) -> None:
    """A Namespace first, then objects in it: the all-or-nothing dry run must not trip over the
    namespace it is about to create."""
    path = tmp_path / "team.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-b\n---\n"
                    + NGINX_DEPLOYMENT.replace("  name: nginx-deployment\n", "  name: nginx\n  namespace: team-b\n"))
    out = kcluster.kplane("apply", "-f", str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["namespace/team-b created", "deployment.apps/nginx created"]
    out = kcluster.kplane("get", "ns")
    rows = table(out.stdout)
    assert rows[0] == ["NAME", "STATUS", "AGE"]
    assert ["team-b", "Active"] == next(r for r in rows if r[0] == "team-b")[:2]
    out = kcluster.kplane("get", "deploy", "-n", "team-b", "-o", "name")
    assert out.stdout.splitlines() == ["deployment.apps/nginx"]

    # A document in a namespace neither existing nor created by the apply fails, changing nothing.
    path.write_text(NGINX_DEPLOYMENT.replace("  name: nginx-deployment\n", "  name: x\n  namespace: team-z\n"))
    out = kcluster.kplane("apply", "-f", str(path))
    assert out.returncode != 0
    assert 'namespaces "team-z" not found' in out.stderr


async def test_kplane_delete_namespace_marks_it_terminating(kcluster, client: Client) -> None:
    await client.namespaces.create(namespace("cli-doomed"))
    out = kcluster.kplane("delete", "namespace", "cli-doomed")
    assert out.returncode == 0, out.stderr
    out = kcluster.kplane("get", "ns", "cli-doomed")
    assert table(out.stdout)[1][:2] == ["cli-doomed", "Terminating"]

    async def gone() -> bool:
        ns = await client.namespaces.get("cli-doomed")
        ns.spec.ClearField("finalizers")
        try:
            await client.namespaces.finalize(ns)
        except errors.Conflict:
            return False
        return True
    await eventually(gone, what="cli-doomed finalized")
    with pytest.raises(errors.NotFound):
        await client.namespaces.get("cli-doomed")
