"""kplane record and kplane diff on a real cluster's history: a user creates pods, resizes one,
deletes one and evicts one; the saved history records as those steps (and nothing the scheduler
or the kubelets did), from the file as from the cluster; diff finds a history the same as itself
and names the pod a changed copy moved (docs/chaos.md, "Record, replay, diff")."""

from __future__ import annotations

import json

import pytest
import yaml

from cli.chaos import schedule
from machinery import podconditions
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

kcluster = cluster_fixture(nodes=2, schedulers=1, kubelet_args=FAST_KUBELET)

PODS = """
apiVersion: v1
kind: Pod
metadata: {name: NAME, labels: {app: record}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c1
    image: registry.k8s.io/pause:3.10
    resources: {requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 500m, memory: 64Mi}}
"""


def _ok(result) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


async def _running(client, name: str) -> bool:
    pod = await client.pods.get(name, "default")
    return pod.status.phase == "Running"


async def _resized(client) -> bool:
    pod = await client.pods.get("a", "default")
    s = pod.status.container_statuses
    return bool(s) and s[0].resources.requests.get("cpu") == "200m"


async def _gone(client, name: str) -> bool:
    return name not in {p.metadata.name for p in (await client.pods.list("default")).items}


async def test_record_a_users_operations_and_diff_two_histories(kcluster, tmp_path):
    client = kcluster.client()
    try:
        for name in ("a", "b", "c"):
            manifest = tmp_path / f"{name}.yaml"
            manifest.write_text(PODS.replace("NAME", name))
            _ok(kcluster.kplane("apply", "-f", str(manifest)))
        for name in ("a", "b", "c"):
            await eventually(lambda name=name: _running(client, name), timeout=20)
        _ok(kcluster.kplane("resize", "pod", "a", "--cpu", "200m"))
        await eventually(lambda: _resized(client), timeout=20)
        _ok(kcluster.kplane("delete", "pod", "b", "--grace-period", "1"))
        _ok(kcluster.kplane("evict", "pod", "c"))
        for name in ("b", "c"):
            await eventually(lambda name=name: _gone(client, name), timeout=20)
    finally:
        await client.close()

    history = tmp_path / "h.jsonl"
    history.write_text(_ok(kcluster.kplane("history")))
    lines = [json.loads(line) for line in history.read_text().splitlines()]
    # The eviction shows in the history: c was marked by the Eviction API before it went.
    assert any(e["kind"] == "Pod" and e["name"] == "c" and any(
        c["type"] == podconditions.DISRUPTION_TARGET and c.get("reason") == podconditions.EVICTION_BY_EVICTION_API
        for c in e["object"].get("status", {}).get("conditions", [])) for e in lines)

    out = tmp_path / "s.yaml"
    printed = _ok(kcluster.kplane("record", "--history", str(history), "-o", str(out)))
    assert printed.startswith("recorded 6 steps (3 apply, 1 resize, 1 delete, 1 evict)")
    recorded = schedule.load(out)
    assert [s.describe() for s in recorded.steps] == [
        "apply pod/a", "apply pod/b", "apply pod/c", "resize pod=a container=c1 cpu=200m",
        "delete kind=Pod name=b grace_period=1", "evict pod=c"]
    assert all(s.after >= 0 for s in recorded.steps)
    a = recorded.steps[0].args
    assert "status" not in a and "nodeName" not in a["spec"] and set(a["metadata"]) == {"name", "namespace", "labels"}
    assert a["spec"]["containers"][0]["resources"] == {"requests": {"cpu": "100m", "memory": "64Mi"},
                                                       "limits": {"cpu": "500m", "memory": "64Mi"}}
    assert recorded.cluster["nodes"] == 2

    # The same from the cluster's own history.
    live = tmp_path / "live.yaml"
    _ok(kcluster.kplane("record", "-o", str(live)))
    assert [s.to_dict() for s in schedule.load(live).steps] == [s.to_dict() for s in recorded.steps]
    # From a revision after everything: nothing to record, one line, no file.
    last = lines[-1]["rev"]
    refused = kcluster.kplane("record", "--since", str(last + 1), "-o", str(tmp_path / "none.yaml"))
    assert refused.returncode == 1 and refused.stderr.startswith(f"error: nothing to record since revision {last + 1}")
    assert not (tmp_path / "none.yaml").exists()

    same = kcluster.kplane("diff", str(history), str(history))
    assert same.returncode == 0, same.stdout + same.stderr
    assert same.stdout.startswith("same outcomes: 3 pods")

    node_a = next(e["object"]["spec"]["nodeName"] for e in lines if e["name"] == "a"
                  and e["object"].get("spec", {}).get("nodeName"))
    other = "node-2" if node_a == "node-1" else "node-1"
    moved = tmp_path / "moved.jsonl"
    moved.write_text("".join(json.dumps(_moved(e, "a", other)) + "\n" for e in lines))
    differ = kcluster.kplane("diff", str(history), str(moved))
    assert differ.returncode == 1, differ.stdout + differ.stderr
    assert differ.stdout.splitlines()[0] == f"pod default/a: node {node_a} -> {other}"
    bad = kcluster.kplane("diff", str(history), str(out))  # a schedule is no history
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and len(bad.stderr.splitlines()) == 1


def _moved(entry: dict, name: str, node: str) -> dict:
    if entry["kind"] == "Pod" and entry["name"] == name and entry["object"].get("spec", {}).get("nodeName"):
        entry = yaml.safe_load(json.dumps(entry))
        entry["object"]["spec"]["nodeName"] = node
    return entry
