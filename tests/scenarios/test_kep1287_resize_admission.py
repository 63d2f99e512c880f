"""KEP-1287 "Resize Status" (Infeasible: "the requested resources exceed what the node has") as
Kubernetes 1.36 and later do it, and as upstream's resize e2e expects it: a resize the pod's node
can never hold is refused by the apiserver's PodResizeValidator admission plugin, at once, with
"node didn't have enough allocatable resources: cpu, requested: N, allocatable: M" (403, cause
NodeCapacity), nothing written; a resize on a node labelled other than linux is refused too. One
that is only too big for now is still the kubelet's (Deferred). On a 1.35 cluster the same resize
reaches the kubelet and is PodResizePending/Infeasible, "Node didn't have enough capacity".
Real processes, the real kubectl.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import kubectl as kubectl_cmd
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

admission_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET)
older_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET, version="1.35")

BEYOND = ("node didn't have enough allocatable resources: cpu, requested: 12000, allocatable: 4000; memory, "
          "requested: 17179869184, allocatable: 8589934592")


def _kubectl(tc, tmp_path: Path, *args: str):
    return kubectl_cmd.run(tc.kubeconfig, tmp_path / "cache", *args, timeout=60)


def _resize(tc, tmp_path: Path, pod: str, cpu: str, memory: str):
    patch = {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": cpu, "memory": memory},
                                                                    "limits": {"cpu": cpu, "memory": memory}}}]}}
    return _kubectl(tc, tmp_path, "patch", "pod", pod, "--subresource", "resize", "-p", json.dumps(patch))


def _pod(name: str):
    return (MakePod().name(name).node("node-1").req(cpu="1", memory="1Gi").lim(cpu="1", memory="1Gi").grace(1)
            .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())


def _condition(pod, type_: str):
    return next((c for c in pod.status.conditions if c.type == type_ and c.status == "True"), None)


async def _wait_pending(api, reason: str):
    """Until big's PodResizePending has ``reason``; that condition."""
    async def pending() -> bool:
        c = _condition(await api.pods.get("big"), "PodResizePending")
        return c is not None and c.reason == reason

    await eventually(pending, timeout=30, what=f"the resize {reason} at the kubelet")
    return _condition(await api.pods.get("big"), "PodResizePending")


async def test_resize_status_a_resize_the_node_can_never_hold_is_refused_by_the_apiserver(admission_cluster,
                                                                                          tmp_path):
    tc = admission_cluster
    api = tc.client()
    try:
        await api.pods.create(_pod("big"))
        await wait_running(api, "big", timeout=30)
        before = await api.pods.get("big")

        r = _resize(tc, tmp_path, "big", "12", "16Gi")
        assert r.returncode == 1, r
        assert r.stderr.strip() == f'Error from server (Forbidden): pods "big" is forbidden: {BEYOND}', r.stderr
        after = await api.pods.get("big")
        assert after.metadata.resource_version == before.metadata.resource_version  # nothing written
        assert _condition(after, "PodResizePending") is None

        # Too big only for now: the apiserver lets it through and the kubelet defers it.
        await api.pods.create(MakePod().name("filler").node("node-1").req(cpu="2", memory="64Mi").grace(1).obj())
        await wait_running(api, "filler", timeout=30)
        r = _resize(tc, tmp_path, "big", "3", "2Gi")
        assert r.returncode == 0, r.stderr
        await _wait_pending(api, "Deferred")

        # A node that says it is not linux: no resize at all.
        labelled = _kubectl(tc, tmp_path, "label", "node", "node-1", "kubernetes.io/os=windows", "--overwrite")
        assert labelled.returncode == 0, labelled.stderr
        try:
            r = _resize(tc, tmp_path, "big", "2", "1Gi")
            assert r.returncode == 1
            assert r.stderr.strip() == ('Error from server (Forbidden): pods "big" is forbidden: pod resize is only '
                                        'supported on linux nodes, node "node-1" is "windows"'), r.stderr
        finally:
            _kubectl(tc, tmp_path, "label", "node", "node-1", "kubernetes.io/os=linux", "--overwrite")
        # The refusal's cause, for clients that tell refusals apart (VPA reads it).
        raw = _kubectl(tc, tmp_path, "patch", "pod", "big", "--subresource", "resize", "-v=8", "-p",
                       json.dumps({"spec": {"containers": [{"name": "c1", "resources": {
                           "requests": {"cpu": "12"}, "limits": {"cpu": "12"}}}]}}))
        assert raw.returncode == 1 and '\\"causes\\":[{\\"reason\\":\\"NodeCapacity\\"}]' in raw.stderr, \
            raw.stderr[-2000:]
    finally:
        for name in ("big", "filler"):
            await api.pods.delete(name, "default", grace_period_seconds=0)
        await api.close()


async def test_resize_status_on_kubernetes_1_35_the_kubelet_finds_it_infeasible(older_cluster, tmp_path):
    tc = older_cluster
    api = tc.client()
    try:
        await api.pods.create(_pod("big"))
        await wait_running(api, "big", timeout=30)

        r = _resize(tc, tmp_path, "big", "12", "16Gi")
        assert r.returncode == 0, r.stderr
        c = await _wait_pending(api, "Infeasible")
        # the kubelet names one resource, memory first (Kubernetes' canResizePod)
        assert c.message == "Node didn't have enough capacity: memory, requested: 17179869184, capacity: 8589934592"
    finally:
        await api.pods.delete("big", "default", grace_period_seconds=0)
        await api.close()
