"""The Kubernetes REST API against a real 3-node cluster (a scheduler, a controller-manager), driven
by the real kubectl (``make install`` puts it in the venv) and by the official ``kubernetes`` Python
client, with the kubeconfig ``kplane up`` writes. Each assertion is checked against what the gRPC
API shows: one implementation of every verb, two encodings.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
import yaml

from machinery import errors
from tests.harness import cluster as harness
from tests.harness import kubectl as kubectl_cmd
from tests.harness.cluster import FAST_KUBELET, ROOT, cluster_fixture
from tests.harness.metrics import metric
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

kcluster = cluster_fixture(nodes=3, schedulers=1, controller_managers=1, kubelet_args=FAST_KUBELET)
FIXTURES = ROOT / "tests" / "fixtures"


def kubectl(tc, *args: str, input: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return kubectl_cmd.run(tc.kubeconfig, Path(tc.data_dir) / "kubectl-cache", *args, input=input, timeout=timeout)


def ok(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 0, f"kubectl {run.args[5:]} failed ({run.returncode}):\n{run.stderr}"
    return run.stdout


def columns(line: str) -> list[str]:
    """A table line's cells (kubectl and kplane separate them by at least two spaces... or three)."""
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def pod_yaml(name: str, cpu: str = "100m", labels: dict[str, str] | None = None, node: str = "",
             priority_class: str = "", extra: str = "") -> str:
    doc: dict = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
                 "spec": {"containers": [{"name": "c", "image": "nginx",
                                          "resources": {"requests": {"cpu": cpu}, "limits": {"cpu": cpu}}}]}}
    if node:
        doc["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
    if priority_class:
        doc["spec"]["priorityClassName"] = priority_class
    return yaml.safe_dump(doc) + extra


# ---------------------------------------------------------------- apply, get, describe, wait


async def test_kubectl_applies_the_docs_priority_class_pod_and_pdb(kcluster, client):
    out = ok(kubectl(kcluster, "apply", "-f", str(ROOT / "examples" / "pod.yaml")))
    assert out.splitlines() == ["priorityclass.scheduling.k8s.io/high-priority created", "pod/web created"]
    out = ok(kubectl(kcluster, "apply", "-f", str(FIXTURES / "zk-pdb.yaml")))
    assert out.strip() == "poddisruptionbudget.policy/zk-pdb created"
    pod = await client.pods.get("web")
    assert pod.spec.priority == 1000000 and pod.spec.priority_class_name == "high-priority"
    assert (await client.priority_classes.get("high-priority")).value == 1000000
    assert (await client.pod_disruption_budgets.get("zk-pdb")).spec.min_available == "2"
    pc_version = (await client.priority_classes.get("high-priority")).metadata.resource_version
    # Applied again: nothing changes. (kubectl says "configured" for the PriorityClass: its
    # globalDefault: false is omitted from the live object, as Kubernetes omits it, so kubectl's
    # three-way patch sets it again — a patch that changes nothing, so no new revision. The pod's
    # own version moves as the scheduler and its kubelet write it; its spec does not.)
    out = ok(kubectl(kcluster, "apply", "-f", str(ROOT / "examples" / "pod.yaml")))
    assert out.splitlines()[1] == "pod/web unchanged"
    assert (await client.priority_classes.get("high-priority")).metadata.resource_version == pc_version
    again = await client.pods.get("web")
    assert again.metadata.generation == pod.metadata.generation
    assert dict(again.metadata.annotations) == dict(pod.metadata.annotations)
    out = ok(kubectl(kcluster, "wait", "--for=condition=Ready", "pod/web", "--timeout=60s"))
    assert out.strip() == "pod/web condition met"
    pod = await client.pods.get("web")
    assert pod.status.phase == "Running"
    assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


async def test_get_prints_kplanes_columns_and_the_grpc_objects(kcluster, client):
    for kind in ("pods", "nodes", "priorityclasses", "pdb"):
        theirs = ok(kubectl(kcluster, "get", kind, "-o", "wide")).splitlines()
        ours = kcluster.kplane("get", kind, "-o", "wide").stdout.splitlines()
        assert columns(theirs[0]) == columns(ours[0]), kind
        assert sorted(columns(line)[0] for line in theirs[1:]) == sorted(columns(line)[0] for line in ours[1:])
    pod = await client.pods.get("web")
    row = next(columns(line) for line in ok(kubectl(kcluster, "get", "pods", "-o", "wide")).splitlines()
               if line.startswith("web "))
    assert row[1:3] == ["1/1", "Running"] and row[6] == pod.spec.node_name and row[5] == pod.status.pod_ip
    doc = json.loads(ok(kubectl(kcluster, "get", "pod", "web", "-o", "json")))
    assert doc["metadata"]["uid"] == pod.metadata.uid and doc["spec"]["nodeName"] == pod.spec.node_name
    assert doc["status"]["containerStatuses"][0]["restartCount"] == 0
    doc = yaml.safe_load(ok(kubectl(kcluster, "get", "pods", "-o", "yaml")))
    assert doc["kind"] == "List"
    names = {p.metadata.name for p in (await client.pods.list("default")).items}
    assert {i["metadata"]["name"] for i in doc["items"]} == names
    nodes = {n.metadata.name for n in (await client.nodes.list()).items}
    assert set(ok(kubectl(kcluster, "get", "nodes", "-o", "name")).split()) == {f"node/{n}" for n in nodes}
    every = ok(kubectl(kcluster, "get", "pods", "-A")).splitlines()
    assert columns(every[0])[:2] == ["NAMESPACE", "NAME"]


async def test_describe_pod_shows_its_events(kcluster, client):
    out = ok(kubectl(kcluster, "describe", "pod", "web"))
    pod = await client.pods.get("web")
    assert re.search(r"^Name:\s+web$", out, re.M) and re.search(rf"^Node:\s+{pod.spec.node_name}/", out, re.M)
    assert re.search(r"^Priority Class Name:\s+high-priority$", out, re.M)
    events = [e for e in (await client.events.list("default")).items if e.involved_object.name == "web"]
    assert any(e.reason == "Scheduled" for e in events)
    scheduled = next(e for e in events if e.reason == "Scheduled")
    assert "Events:" in out and scheduled.message in out


async def test_patch_subresource_resize_ends_in_the_new_resources(kcluster, client):
    out = ok(kubectl(kcluster, "patch", "pod", "web", "--subresource", "resize", "-p",
                     '{"spec":{"containers":[{"name":"nginx","resources":{"requests":{"cpu":"500m"}}}]}}'))
    assert out.strip() == "pod/web patched"
    pod = await client.pods.get("web")
    assert pod.spec.containers[0].resources.requests["cpu"] == "500m"

    async def actuated() -> bool:
        p = await client.pods.get("web")
        return bool(p.status.container_statuses) and \
            p.status.container_statuses[0].resources.requests.get("cpu") == "500m"

    await eventually(actuated, timeout=30, what="the kubelet actuated the resize")
    doc = json.loads(ok(kubectl(kcluster, "get", "pod", "web", "-o", "json")))
    assert doc["status"]["containerStatuses"][0]["resources"]["requests"]["cpu"] == "500m"


async def test_get_pods_watch_sees_a_preemption_as_it_happens(kcluster, client, tmp_path):
    classes = ("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: rest-low}\nvalue: 10\n---\n"
               "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: rest-high}\nvalue: 1000\n")
    ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "pc.yaml", classes)))
    ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "low.yaml", pod_yaml(
        "victim", "3", {"test": "preempt"}, "node-3", "rest-low"))))
    ok(kubectl(kcluster, "wait", "--for=condition=Ready", "pod/victim", "--timeout=60s"))
    watch = subprocess.Popen([kubectl_cmd.kubectl_path(), "--kubeconfig", kcluster.kubeconfig, "get", "pods",
                              "-l", "test=preempt", "-w"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(line.rstrip("\n") for line in watch.stdout or ()),
                              daemon=True)
    reader.start()
    try:
        await eventually(lambda: any(line.startswith("victim ") for line in lines), timeout=20, what="the listing")
        ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "high.yaml", pod_yaml(
            "preemptor", "3", {"test": "preempt"}, "node-3", "rest-high"))))

        def seen(name: str, status: str) -> bool:
            return any(columns(line)[:1] == [name] and columns(line)[2:3] == [status] for line in lines)

        await eventually(lambda: seen("victim", "Terminating"), timeout=40, what="the victim terminating")
        await eventually(lambda: seen("preemptor", "Running"), timeout=40, what="the preemptor running")
    finally:
        watch.terminate()
        watch.wait(10)
    pod = await client.pods.get("preemptor")
    assert pod.spec.node_name == "node-3"
    with pytest.raises(errors.NotFound):
        await client.pods.get("victim")
    victim_lines = [columns(line) for line in lines if line.startswith("victim ")]
    assert victim_lines[0][2] == "Running" and victim_lines[-1][2] == "Terminating"
    ok(kubectl(kcluster, "delete", "pod", "preemptor", "--grace-period=0", "--force"))


async def test_delete_with_a_grace_period(kcluster, client, tmp_path):
    ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "g.yaml", pod_yaml("graceful"))))
    ok(kubectl(kcluster, "wait", "--for=condition=Ready", "pod/graceful", "--timeout=60s"))
    out = ok(kubectl(kcluster, "delete", "pod", "graceful", "--grace-period=7", "--wait=false"))
    # kubectl 1.34+ names the namespace the server answered for; before, it did not.
    assert re.fullmatch(r'pod "graceful" deleted( from default namespace)?', out.strip()), out
    try:
        pod = await client.pods.get("graceful")
        assert pod.metadata.deletion_grace_period_seconds == 7 and pod.metadata.deletion_timestamp
    except errors.NotFound:
        pass  # its kubelet was quicker than this read
    out = ok(kubectl(kcluster, "wait", "--for=delete", "pod/graceful", "--timeout=30s"))
    with pytest.raises(errors.NotFound):
        await client.pods.get("graceful")


async def test_auth_can_i_as_a_node_follows_node_restriction(kcluster, client):
    token = kcluster.token_for("system:node:node-1")
    asks = [(("update", "pods", "--subresource=status"), "yes"), (("create", "pods"), "no"),
            (("update", "nodes/node-1"), "yes"), (("update", "nodes/node-2"), "no"), (("list", "pods"), "yes"),
            (("create", "priorityclasses"), "no")]
    for args, want in asks:
        for who in (("--token", token), ("--as", "system:node:node-1", "--as-group", "system:nodes")):
            run = kubectl(kcluster, "auth", "can-i", *args, *who)
            assert run.stdout.split()[:1] == [want], (args, who, run.stdout, run.stderr)
            assert run.returncode == (0 if want == "yes" else 1)
    assert ok(kubectl(kcluster, "auth", "can-i", "create", "pods")).strip() == "yes"
    # The gRPC API refuses the same node what the review said no to.
    node1 = kcluster.client("system:node:node-1")
    try:
        with pytest.raises(errors.Forbidden):
            await node1.priority_classes.delete("high-priority")
    finally:
        await node1.close()


# ---------------------------------------------------------------- bad input: kubectl's messages


POD = ("apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n"
       "    image: nginx\n{extra}")

BAD_DOCUMENTS = [
    ("unknown-field", "x", POD.format(name="x", extra="    colour: red\n"),
     'strict decoding error: unknown field "spec.containers[0].colour"'),
    ("invalid-name", "Not_A_Name", POD.format(name="Not_A_Name", extra=""),
     'The Pod "Not_A_Name" is invalid: metadata.name: Invalid value: "Not_A_Name"'),
    ("bad-quantity", "q1", POD.format(name="q1", extra="    resources: {requests: {cpu: 1.5.5}}\n"),
     "quantities must match the regular expression"),
    ("negative-quantity", "q2", POD.format(name="q2", extra="    resources: {requests: {cpu: '-1'}}\n"),
     "must be greater than or equal to 0"),
    ("limits-below-requests", "q4",
     POD.format(name="q4", extra="    resources: {requests: {cpu: '2'}, limits: {cpu: '1'}}\n"),
     "must be less than or equal to cpu limit"),
    ("unknown-priority-class", "pcx", POD.format(name="pcx", extra="  priorityClassName: no-such-class\n"),
     'Error from server (Forbidden): error when creating "{file}": pods "pcx" is forbidden: no PriorityClass with '
     "name no-such-class was found"),
    ("unknown-kind", "x", "apiVersion: v1\nkind: Potato\nmetadata: {name: x}\n", 'no matches for kind "Potato"'),
    ("label-20kb", "label-20kb",
     POD.format(name="label-20kb", extra="").replace("{name: label-20kb}",
                                                     "{name: label-20kb, labels: {app: " + "v" * 20_000 + "}}"),
     "(truncated: 20000 characters)"),
    ("over-3mib", "over-3mib",
     POD.format(name="over-3mib", extra="    args: [" + ", ".join(["a" * 1024] * 4096) + "]\n"),
     "Request entity too large: limit is 3145728"),
]


@pytest.mark.parametrize("case,name,text,fragment", BAD_DOCUMENTS, ids=[b[0] for b in BAD_DOCUMENTS])
async def test_bad_documents_get_kubectls_message_and_change_nothing(kcluster, client, tmp_path, case, name, text,
                                                                     fragment):
    path = _write(tmp_path, "bad.yaml", text)
    run = kubectl(kcluster, "apply", "-f", path)
    assert run.returncode == 1, run.stdout
    assert fragment.format(file=path) in run.stderr, run.stderr
    assert "Traceback" not in run.stderr
    with pytest.raises(errors.NotFound):
        await client.pods.get(name)


async def test_bad_requests_get_kubectls_message(kcluster, client, tmp_path):
    def fails(run: subprocess.CompletedProcess[str], fragment: str) -> None:
        assert run.returncode == 1, run.stdout
        assert fragment in run.stderr, run.stderr

    fails(kubectl(kcluster, "get", "pod", "x"), 'Error from server (NotFound): pods "x" not found')
    fails(kubectl(kcluster, "get", "priorityclass", "x"),
          'Error from server (NotFound): priorityclasses.scheduling.k8s.io "x" not found')
    fails(kubectl(kcluster, "get", "potatoes"), 'error: the server doesn\'t have a resource type "potatoes"')
    fails(kubectl(kcluster, "--token", "wrong", "get", "pods"), "error: You must be logged in to the server")
    fails(kubectl(kcluster, "delete", "pod", "x"), 'Error from server (NotFound): pods "x" not found')
    # A kubelet's token writing the status of a pod on another node (web runs on one node, node-x is another).
    web = await client.pods.get("web")
    other = next(n for n in ("node-1", "node-2", "node-3") if n != web.spec.node_name)
    before = web.status.phase
    run = kubectl(kcluster, "--token", kcluster.token_for(f"system:node:{other}"), "patch", "pod", "web",
                  "--subresource", "status", "-p", '{"status":{"phase":"Failed"}}')
    fails(run, "Error from server (Forbidden)")
    assert "spec.nodeName set to itself" in run.stderr
    assert (await client.pods.get("web")).status.phase == before
    # A stale resourceVersion: Conflict, nothing written (a gated pod: nothing else writes it).
    gated = POD.format(name="stale", extra="  schedulingGates: [{name: hold}]\n")
    ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "s.yaml", gated)))
    rv = (await client.pods.get("stale")).metadata.resource_version
    stale = gated.replace("{name: stale}", "{name: stale, resourceVersion: '1', labels: {a: b}}")
    fails(kubectl(kcluster, "replace", "-f", _write(tmp_path, "s2.yaml", stale)), "Error from server (Conflict)")
    assert (await client.pods.get("stale")).metadata.resource_version == rv
    # What kplane does not emulate answers at once, never hangs.
    started = time.monotonic()
    fails(kubectl(kcluster, "exec", "web", "--", "ls"), "pods/exec is not emulated by kplane")
    fails(kubectl(kcluster, "logs", "web"), "pods/log is not emulated by kplane")
    assert time.monotonic() - started < 30
    # A server-side apply of a field pods do not have: Kubernetes' BadRequest, nothing created.
    bad = pod_yaml("ssa").replace("spec:\n", "spec:\n  potato: 1\n", 1)
    run = kubectl(kcluster, "apply", "--server-side", "--validate=false", "-f", _write(tmp_path, "ssa.yaml", bad))
    fails(run, "Error from server (BadRequest)")
    assert ("failed to create typed patch object (default/ssa; /v1, Kind=Pod): "
            ".spec.potato: field not declared in schema") in run.stderr, run.stderr
    with pytest.raises(errors.NotFound):
        await client.pods.get("ssa")


# ---------------------------------------------------------------- server-side apply

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: ssa-web, labels: {{{labels}}}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: ssa-web}}}}
  template:
    metadata: {{labels: {{app: ssa-web}}}}
    spec: {{containers: [{{name: c, image: nginx}}]}}
"""


def _owners(obj) -> dict[str, tuple[str, dict]]:
    """manager -> (operation, its field set) from an object's managedFields, as the gRPC API shows them."""
    return {e.manager: (e.operation, json.loads(e.fields_v1)) for e in obj.metadata.managed_fields}


async def test_server_side_apply_from_two_field_managers_conflicts(kcluster, client, tmp_path):
    """alice applies a Deployment with 3 replicas; bob applying 5 gets kubectl's conflict message
    naming alice and .spec.replicas, and nothing changes; with --force-conflicts bob takes the
    field; alice re-applying without it keeps her other fields and bob's 5 stays. Each step is
    compared with what the gRPC API shows."""
    def apply(manager: str, replicas: int | None, labels: str = "app: ssa-web", *extra: str):
        text = DEPLOYMENT.format(replicas=replicas, labels=labels)
        if replicas is None:
            text = text.replace("  replicas: None\n", "")
        return kubectl(kcluster, "apply", "--server-side", f"--field-manager={manager}", *extra, "-f",
                       _write(tmp_path, f"{manager}.yaml", text))

    ok(apply("alice", 3))
    made = await client.deployments.get("ssa-web")
    assert made.spec.replicas == 3
    owners = _owners(made)
    assert owners["alice"][0] == "Apply", owners
    assert "f:replicas" in owners["alice"][1]["f:spec"], owners
    shown = json.loads(ok(kubectl(kcluster, "get", "deployment", "ssa-web", "-o", "json", "--show-managed-fields")))
    alice = next(e for e in shown["metadata"]["managedFields"] if e["manager"] == "alice")
    assert (alice["operation"], alice["fieldsV1"]) == owners["alice"]

    run = apply("bob", 5)
    assert run.returncode == 1, run.stdout
    assert "Apply failed with 1 conflict" in run.stderr, run.stderr
    assert 'conflict with "alice"' in run.stderr and ".spec.replicas" in run.stderr, run.stderr
    after = await client.deployments.get("ssa-web")
    # (the deployment controller writes its status meanwhile: the spec's generation is what bob did not move)
    assert (after.spec.replicas, after.metadata.generation) == (3, made.metadata.generation)
    assert "bob" not in _owners(after)

    ok(apply("bob", 5, "app: ssa-web", "--force-conflicts"))
    forced = await client.deployments.get("ssa-web")
    assert forced.spec.replicas == 5
    owners = _owners(forced)
    assert "f:replicas" in owners["bob"][1]["f:spec"], owners
    assert "f:replicas" not in owners["alice"][1]["f:spec"], owners

    # alice drops replicas and adds a label: her label lands, bob's replicas stay.
    ok(apply("alice", None, "app: ssa-web, tier: front"))
    last = await client.deployments.get("ssa-web")
    assert last.spec.replicas == 5 and last.metadata.labels["tier"] == "front"

    # The same apply over gRPC: carol conflicts with bob on replicas, then forces it.
    config = {"metadata": {"name": "ssa-web"}, "spec": {"replicas": 7}}
    with pytest.raises(errors.Conflict, match='Apply failed with 1 conflict: conflict with "bob": .spec.replicas'):
        await client.deployments.apply(config, field_manager="carol")
    assert (await client.deployments.get("ssa-web")).spec.replicas == 5
    taken = await client.deployments.apply(config, field_manager="carol", force=True)
    assert taken.spec.replicas == 7 and "f:replicas" in _owners(taken)["carol"][1]["f:spec"]
    shown = json.loads(ok(kubectl(kcluster, "get", "deployment", "ssa-web", "-o", "json", "--show-managed-fields")))
    assert shown["spec"]["replicas"] == 7
    assert "carol" in {e["manager"] for e in shown["metadata"]["managedFields"]}
    ok(kubectl(kcluster, "delete", "deployment", "ssa-web"))


RS = """apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: owners}
spec:
  replicas: 1
  selector: {matchLabels: {app: owners}}
  template:
    metadata: {labels: {app: owners}}
    spec: {containers: [{name: c, image: nginx}]}
"""


async def test_managed_fields_name_the_components_as_kubernetes_does(kcluster, client, tmp_path):
    """A ReplicaSet applied by kubectl: its pod is the controller-manager's (Update) and its status
    the kubelet's (Update of the status subresource), as `kubectl get --show-managed-fields` shows
    on a Kubernetes cluster; the ReplicaSet is kubectl's, its status the controller-manager's."""
    ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "rs.yaml", RS)))

    async def running_pod():
        pods = (await client.pods.list(label_selector="app=owners")).items
        return pods[0] if pods and pods[0].status.phase == "Running" else None

    async def running() -> bool:
        return await running_pod() is not None

    await eventually(running, timeout=60, what="the ReplicaSet's pod Running")
    pod = await running_pod()
    assert pod is not None
    owners = {(e.manager, e.operation, e.subresource): json.loads(e.fields_v1) for e in pod.metadata.managed_fields}
    made = owners[("kube-controller-manager", "Update", "")]
    assert "f:ownerReferences" in made["f:metadata"] and "f:containers" in made["f:spec"], owners
    assert "f:phase" in owners[("kubelet", "Update", "status")]["f:status"], owners
    shown = json.loads(ok(kubectl(kcluster, "get", "pod", pod.metadata.name, "-o", "json", "--show-managed-fields")))
    assert {(e["manager"], e["operation"], e.get("subresource", "")) for e in shown["metadata"]["managedFields"]} \
        == set(owners)
    rs = await client.replica_sets.get("owners")
    rs_owners = {(e.manager, e.subresource) for e in rs.metadata.managed_fields}
    assert ("kubectl-client-side-apply", "") in rs_owners, rs_owners
    await eventually(lambda: _rs_status_owned(client), timeout=30, what="the ReplicaSet's status written")
    ok(kubectl(kcluster, "delete", "replicaset", "owners"))


async def _rs_status_owned(client) -> bool:
    rs = await client.replica_sets.get("owners")
    return ("kube-controller-manager", "status") in {(e.manager, e.subresource) for e in rs.metadata.managed_fields}


# ---------------------------------------------------------------- drain


async def test_drain_evicts_as_the_pod_disruption_budget_allows(kcluster, client, tmp_path):
    """zk-pdb (minAvailable 2) covers two zookeeper pods on node-2: draining node-2 evicts neither
    (429, kubectl retries until its timeout); with the budget at minAvailable 1 it evicts one, then
    waits for the other; without a budget the node drains."""
    docs = "---\n".join(pod_yaml(f"zk-{i}", "100m", {"app": "zookeeper"}, "node-2") for i in range(2))
    ok(kubectl(kcluster, "apply", "-f", _write(tmp_path, "zk.yaml", docs)))
    ok(kubectl(kcluster, "wait", "--for=condition=Ready", "pod/zk-0", "pod/zk-1", "--timeout=60s"))

    async def budget_seen() -> bool:
        pdb = await client.pod_disruption_budgets.get("zk-pdb")
        return pdb.status.current_healthy == 2 and pdb.status.observed_generation == pdb.metadata.generation

    await eventually(budget_seen, timeout=30, what="the disruption controller counted the zookeeper pods")
    try:
        run = kubectl(kcluster, "drain", "node-2", "--force", "--ignore-daemonsets", "--timeout=8s")
        assert run.returncode == 1
        assert "Cannot evict pod as it would violate the pod's disruption budget" in run.stderr
        assert (await client.nodes.get("node-2")).spec.unschedulable
        assert {p.metadata.name for p in (await client.pods.list("default", label_selector="app=zookeeper")).items
                if not p.metadata.deletion_timestamp} == {"zk-0", "zk-1"}
        ok(kubectl(kcluster, "delete", "pdb", "zk-pdb"))
        out = ok(kubectl(kcluster, "drain", "node-2", "--force", "--ignore-daemonsets", "--timeout=60s"))
        assert "node/node-2 drained" in out
        for name in ("zk-0", "zk-1"):
            with pytest.raises(errors.NotFound):
                await client.pods.get(name)
    finally:
        ok(kubectl(kcluster, "uncordon", "node-2"))
    assert not (await client.nodes.get("node-2")).spec.unschedulable


# ---------------------------------------------------------------- the official Python client


def _python_client(tc):
    from kubernetes import client as k8s
    from kubernetes import config

    return k8s, k8s.CoreV1Api(config.new_client_from_config(config_file=tc.kubeconfig))


async def test_python_client_lists_what_grpc_lists(kcluster, client):
    k8s, v1 = _python_client(kcluster)

    async def same() -> bool:  # pods of the earlier tests may still be going: compare once settled
        return ({p.metadata.name for p in v1.list_namespaced_pod("default").items}
                == {p.metadata.name for p in (await client.pods.list("default")).items})

    await eventually(same, timeout=30, what="the same pods listed over REST and gRPC")
    theirs = v1.list_namespaced_pod("default")
    ours = await client.pods.list("default")
    by_name = {p.metadata.name: p for p in ours.items}
    for p in theirs.items:
        assert p.metadata.uid == by_name[p.metadata.name].metadata.uid
        assert (p.spec.node_name or "") == by_name[p.metadata.name].spec.node_name
    nodes = v1.list_node()
    assert sorted(n.metadata.name for n in nodes.items) == ["node-1", "node-2", "node-3"]
    assert all(n.status.node_info.kubelet_version for n in nodes.items)
    # Pages, over pods of this test's own (what earlier tests left is not counted on).
    for i in range(3):
        v1.create_namespaced_pod("default", yaml.safe_load(pod_yaml(f"page-{i}", labels={"page": "yes"})))
    names: list[str] = []
    page = v1.list_namespaced_pod("default", label_selector="page=yes", limit=2)
    assert len(page.items) == 2 and page.metadata._continue, page.metadata
    names += [p.metadata.name for p in page.items]
    rest = v1.list_namespaced_pod("default", label_selector="page=yes", limit=2, _continue=page.metadata._continue)
    assert len(rest.items) == 1 and not rest.metadata._continue
    names += [p.metadata.name for p in rest.items]
    assert sorted(names) == ["page-0", "page-1", "page-2"] == sorted(
        p.metadata.name for p in (await client.pods.list("default", label_selector="page=yes")).items)
    for i in range(3):
        await client.pods.delete(f"page-{i}", grace_period_seconds=0)
    with pytest.raises(k8s.ApiException) as exc:
        v1.read_namespaced_pod("x", "default")
    assert exc.value.status == 404 and json.loads(exc.value.body)["reason"] == "NotFound"


async def test_python_client_resizes_and_evicts(kcluster, client, tmp_path):
    k8s, v1 = _python_client(kcluster)
    body = yaml.safe_load(pod_yaml("py-resize", "200m", {"app": "py"}))
    v1.create_namespaced_pod("default", body)
    await eventually(lambda: _ready(client, "py-resize"), timeout=60, what="py-resize running")
    patched = v1.patch_namespaced_pod_resize(
        "py-resize", "default", {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "300m"},
                                                                                     "limits": {"cpu": "300m"}}}]}})
    assert patched.spec.containers[0].resources.requests["cpu"] == "300m"
    pod = await client.pods.get("py-resize")
    assert pod.spec.containers[0].resources.limits["cpu"] == "300m" and pod.metadata.generation == 2
    # A budget with no disruption to spare refuses the eviction (429), as the gRPC API does.
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "py-pdb"},
           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "py"}}}}
    k8s.PolicyV1Api(v1.api_client).create_namespaced_pod_disruption_budget("default", pdb)

    async def counted() -> bool:
        b = await client.pod_disruption_budgets.get("py-pdb")
        return b.status.observed_generation == b.metadata.generation and b.status.current_healthy == 1

    await eventually(counted, timeout=30, what="the budget's status")
    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="py-resize", namespace="default"))
    with pytest.raises(k8s.ApiException) as exc:
        v1.create_namespaced_pod_eviction("py-resize", "default", eviction)
    assert exc.value.status == 429
    assert "Cannot evict pod as it would violate the pod's disruption budget" in json.loads(exc.value.body)["message"]
    with pytest.raises(errors.TooManyRequests):
        await client.pods.evict("py-resize")
    k8s.PolicyV1Api(v1.api_client).delete_namespaced_pod_disruption_budget("py-pdb", "default")
    v1.create_namespaced_pod_eviction("py-resize", "default", eviction)

    async def going() -> bool:
        try:
            return bool((await client.pods.get("py-resize")).metadata.deletion_timestamp)
        except errors.NotFound:
            return True

    await eventually(going, timeout=20, what="the evicted pod going")


async def _ready(client, name: str) -> bool:
    try:
        p = await client.pods.get(name)
    except errors.NotFound:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)


# ---------------------------------------------------------------- watches and their clients


def _watchers(tc, kind: str) -> float:
    return metric(tc, "apiserver", "apiserver_registered_watchers", f'group="",kind="{kind}",version="v1"}}')


async def test_a_watch_streams_json_lines_and_is_let_go_when_its_client_leaves(kcluster, client):
    """A raw ``?watch=1`` over HTTPS: the current objects as ADDED lines, then a create as it
    happens; the client hangs up and the apiserver drops the watcher (nothing leaks, nothing hangs)."""
    import http.client
    import ssl

    from machinery.api import core_pb2

    host, port = kcluster.rest.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=str(Path(kcluster.data_dir) / "pki" / "ca.crt"))
    before = _watchers(kcluster, "LimitRange")  # the components' own watches of LimitRanges, if any
    conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=20)
    conn.request("GET", "/api/v1/namespaces/default/limitranges?watch=1&allowWatchBookmarks=true",
                 headers={"Authorization": f"Bearer {kcluster.token}"})
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "application/json"
    assert _watchers(kcluster, "LimitRange") == before + 1
    lr = core_pb2.LimitRange(metadata={"name": "watched"})
    lr.spec.limits.add(type="Container", max={"cpu": "2"})
    created = await client.limit_ranges.create(lr)
    event = json.loads(resp.readline())
    while event["type"] == "BOOKMARK":
        event = json.loads(resp.readline())
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "watched"
    assert event["object"]["metadata"]["resourceVersion"] == created.metadata.resource_version
    resp.close()
    conn.close()
    await eventually(lambda: _watchers(kcluster, "LimitRange") == before, timeout=20,
                     what="the apiserver dropped the watch of a client that left")


async def test_python_client_watch_resumes_after_an_apiserver_restart(kcluster, client):
    """A watch from the list's resourceVersion sees a create; the apiserver is killed and started
    again; two more pods are created; a watch resumed from the last version seen gets exactly
    those two, in order, with the versions the gRPC API reports (replayed from the watch cache,
    which the restarted apiserver refilled from etcd's history)."""
    k8s, v1 = _python_client(kcluster)
    from kubernetes import watch

    listed = v1.list_namespaced_pod("default", label_selector="test=resume")
    assert listed.items == []
    last = listed.metadata.resource_version
    await client.pods.create(_grpc_pod("resume-a"))

    def collect(since: str, count: int) -> list[tuple[str, str, str]]:
        out: list[tuple[str, str, str]] = []
        w = watch.Watch()
        for ev in w.stream(v1.list_namespaced_pod, "default", label_selector="test=resume", resource_version=since,
                           timeout_seconds=20):
            obj = ev["object"]
            out.append((ev["type"], obj.metadata.name, obj.metadata.resource_version))
            if len(out) >= count:
                w.stop()
        return out

    first = await asyncio.to_thread(collect, last, 1)
    assert [(t, n) for t, n, _ in first] == [("ADDED", "resume-a")]
    assert first[0][2] == (await client.pods.get("resume-a")).metadata.resource_version
    harness.kill(kcluster, "apiserver")
    harness.start(kcluster, "apiserver")
    await client.pods.create(_grpc_pod("resume-b"))
    await client.pods.create(_grpc_pod("resume-c"))
    resumed = await asyncio.to_thread(collect, first[-1][2], 2)
    assert [(t, n) for t, n, _ in resumed] == [("ADDED", "resume-b"), ("ADDED", "resume-c")]
    for _, name, rv in resumed:
        assert rv == (await client.pods.get(name)).metadata.resource_version
    # resourceVersionMatch=Exact: the list as it was at the first version, read from etcd's history.
    then = v1.list_namespaced_pod("default", label_selector="test=resume", resource_version=last,
                                  resource_version_match="Exact")
    assert then.items == [] and then.metadata.resource_version == last


def _grpc_pod(name: str):
    from tests.harness.builders import MakePod

    # No scheduler serves "nobody": nothing but this test writes the pod.
    return MakePod().name(name).labels({"test": "resume"}).scheduler_name("nobody").obj()
