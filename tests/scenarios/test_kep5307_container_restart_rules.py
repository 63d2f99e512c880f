"""KEP-5307 "Container Restart Rules" beside in-place resize, as upstream's e2e for both has it
(issue 25 item 12), on real processes with the real kubectl:

- a regular (non-sidecar) init container may carry its own ``restartPolicy`` (OnFailure in a
  Never pod): it is retried on failure and the pod goes on once it succeeds; it is still no
  sidecar, so a resize may not touch its resources ("resources for non-sidecar init containers
  are immutable"), while the regular container resizes in place;
- a regular container's ``restartPolicyRules`` restart it on the exit codes they name (42) in a
  Never pod, which stays Running, and not on others: the pod then Fails.

A simulated init container exits with the codes of ``kplane.dev/init-exit-codes.<container>``,
one per run; a running container is made to exit through the runtime.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from machinery import jsonconv
from machinery.api import core_pb2, cri_pb2
from tests.harness import kubectl as kubectl_cmd
from tests.harness.api import api_fixture
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.node_state import runtime
from tests.harness.wait import eventually

pytestmark = pytest.mark.scenario

NODE = "node-1"
rules_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="4Gi", kubelet_args=FAST_KUBELET)


def _kubectl(tc, tmp_path: Path, *args: str):
    return kubectl_cmd.run(tc.kubeconfig, tmp_path / "cache", *args, timeout=60)


def _container(name: str, init: bool = False, **extra) -> dict:
    c = {"name": name, "image": "app", "resources": {"requests": {"cpu": "500m", "memory": "64Mi"},
                                                     "limits": {"cpu": "500m", "memory": "64Mi"}}, **extra}
    if not init:  # (a resize policy is for sidecars and regular containers)
        c["resizePolicy"] = [{"resourceName": "cpu", "restartPolicy": "NotRequired"}]
    return c


def _apply(tc, tmp_path: Path, doc: dict) -> None:
    path = tmp_path / f"{doc['metadata']['name']}.json"
    path.write_text(json.dumps(doc))
    r = _kubectl(tc, tmp_path, "apply", "-f", str(path))
    assert r.returncode == 0, r.stderr


async def _phase(api, name: str, want: str) -> core_pb2.Pod:
    async def reached() -> bool:
        return (await api.pods.get(name)).status.phase == want
    await eventually(reached, timeout=30, what=f"{name} {want}")
    return await api.pods.get(name)


async def _exit(tc, pod: core_pb2.Pod, code: int) -> None:
    cid = pod.status.container_statuses[0].container_id.split("://", 1)[-1]
    rt = runtime(tc, NODE)
    try:
        await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=code))
    finally:
        await rt.close()


api = api_fixture("rules_cluster")


async def test_a_non_sidecar_init_container_with_its_own_restart_policy(api, rules_cluster, tmp_path):
    tc = rules_cluster
    _apply(tc, tmp_path, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "setup", "annotations": {"kplane.dev/init-exit-codes.init": "1,0"}},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "initContainers": [_container("init", True, restartPolicy="OnFailure")],
                 "containers": [_container("c1")]}})
    pod = await _phase(api, "setup", "Running")
    init = pod.status.init_container_statuses[0]
    assert init.restart_count == 1 and init.state.terminated.exit_code == 0  # failed once, retried, done
    assert pod.spec.init_containers[0].restart_policy == "OnFailure"

    # Not a sidecar: its resources stay as they are; the regular container's change in place.
    r = _kubectl(tc, tmp_path, "patch", "pod", "setup", "--subresource", "resize", "-p", json.dumps(
        {"spec": {"initContainers": [{"name": "init", "resources": {"requests": {"cpu": "1"},
                                                                     "limits": {"cpu": "1"}}}]}}))
    assert r.returncode == 1
    assert "spec.initContainers[0].resources: Forbidden: resources for non-sidecar init containers are immutable" \
        in r.stderr, r.stderr
    r = _kubectl(tc, tmp_path, "patch", "pod", "setup", "--subresource", "resize", "-p", json.dumps(
        {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}}]}}))
    assert r.returncode == 0, r.stderr

    async def resized() -> bool:
        cs = (await api.pods.get("setup")).status.container_statuses
        return bool(cs) and cs[0].resources.requests.get("cpu") in ("1", "1000m")
    await eventually(resized, timeout=30, what="c1 resized in place")
    assert (await api.pods.get("setup")).status.container_statuses[0].restart_count == 0

    # Never, without a policy of its own: a failing init container fails the pod.
    _apply(tc, tmp_path, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "strict", "annotations": {"kplane.dev/init-exit-codes.init": "1,0"}},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "initContainers": [_container("init", True)], "containers": [_container("c1")]}})
    failed = await _phase(api, "strict", "Failed")
    assert failed.status.init_container_statuses[0].restart_count == 0


async def test_a_containers_restart_rules_restart_it_on_the_codes_they_name(api, rules_cluster, tmp_path):
    tc = rules_cluster
    rule = {"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}
    _apply(tc, tmp_path, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"},
        "spec": {"nodeName": NODE, "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                 "containers": [_container("c1", restartPolicy="Never", restartPolicyRules=[rule])]}})
    pod = await _phase(api, "worker", "Running")
    stored = jsonconv.to_dict(pod)["spec"]["containers"][0]
    assert stored["restartPolicyRules"] == [rule]

    await _exit(tc, pod, 42)  # a code the rule names: restarted, the pod keeps Running

    async def restarted() -> bool:
        cs = (await api.pods.get("worker")).status.container_statuses
        return bool(cs) and cs[0].restart_count == 1 and cs[0].state.HasField("running")
    await eventually(restarted, timeout=30, what="c1 restarted after exit 42")
    pod = await api.pods.get("worker")
    assert pod.status.phase == "Running"
    assert pod.status.container_statuses[0].last_state.terminated.exit_code == 42

    await _exit(tc, pod, 1)  # a code no rule names: the container's Never decides, the pod fails
    failed = await _phase(api, "worker", "Failed")
    assert failed.status.container_statuses[0].restart_count == 1
