"""KEP-1287 "Backward Compatibility and Negative Tests", 4: "Verify Pod updates by older version
of client-go doesn't result in current values of AllocatedResources and ResizePolicy fields being
dropped" — on real processes, with the real kubectl replacing a pod from the manifest an older
client would send: the pod as read, without the fields its types do not have.

As Kubernetes does it (pkg/registry/core/pod/strategy.go, ValidatePodUpdate):

- an update of the pod keeps the whole stored status, ``allocatedResources`` included, whatever
  the request's status says (PrepareForUpdate copies the old status);
- ``resizePolicy`` is part of the spec, which an update may not change beyond images, tolerations
  and a few more: a request without it is refused (``spec: Forbidden: pod updates may not change
  fields other than ...``) and nothing changes — the field is not dropped, and the older client
  learns it must not replace the pod.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.harness import kubectl as kubectl_cmd
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

compat_cluster = cluster_fixture(nodes=1, schedulers=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET)


def _kubectl(tc, tmp_path: Path, *args: str):
    return kubectl_cmd.run(tc.kubeconfig, tmp_path / "cache", *args, timeout=60)


def _as_read(tc, tmp_path: Path) -> dict:
    r = _kubectl(tc, tmp_path, "get", "pod", "old", "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _replace(tc, tmp_path: Path, manifest: dict):
    path = tmp_path / "old.json"
    path.write_text(json.dumps(manifest))
    return _kubectl(tc, tmp_path, "replace", "-f", str(path))


async def test_backward_compatibility_an_older_clients_update_drops_neither_field(compat_cluster, tmp_path):
    tc = compat_cluster
    api = tc.client()
    try:
        await api.pods.create(MakePod().name("old").req(cpu="500m", memory="64Mi")
                              .resize_policy("cpu", "NotRequired").resize_policy("memory", "RestartContainer").obj())
        await wait_running(api, "old", timeout=30)

        async def allocated() -> bool:
            pod = await api.pods.get("old")
            return bool(pod.status.container_statuses and pod.status.container_statuses[0].allocated_resources)

        await eventually(allocated, timeout=30, what="old's allocatedResources reported")
        stored = _as_read(tc, tmp_path)
        policy = stored["spec"]["containers"][0]["resizePolicy"]
        allocated_resources = stored["status"]["containerStatuses"][0]["allocatedResources"]
        assert policy and allocated_resources == {"cpu": "500m", "memory": "64Mi"}

        # A client that knows neither field: its label change is refused for the spec it changed.
        older = copy.deepcopy(stored)
        for c in older["spec"]["containers"]:
            c.pop("resizePolicy", None)
        for cs in older["status"]["containerStatuses"]:
            cs.pop("allocatedResources", None)
        older["metadata"]["labels"] = {"tier": "old-client"}
        r = _replace(tc, tmp_path, older)
        assert r.returncode != 0
        assert "spec: Forbidden: pod updates may not change fields other than" in r.stderr, r.stderr
        after = _as_read(tc, tmp_path)
        assert after["spec"]["containers"][0]["resizePolicy"] == policy
        assert "tier" not in after["metadata"].get("labels", {})

        # A client that knows resizePolicy but not allocatedResources: the update is made, the status
        # (allocatedResources) is the stored one.
        newer = copy.deepcopy(after)
        for cs in newer["status"]["containerStatuses"]:
            cs.pop("allocatedResources", None)
        newer["metadata"]["labels"] = {"tier": "old-client"}
        r = _replace(tc, tmp_path, newer)
        assert r.returncode == 0, r.stderr
        final = _as_read(tc, tmp_path)
        assert final["metadata"]["labels"] == {"tier": "old-client"}
        assert final["spec"]["containers"][0]["resizePolicy"] == policy
        assert final["status"]["containerStatuses"][0]["allocatedResources"] == allocated_resources
    finally:
        await api.close()
