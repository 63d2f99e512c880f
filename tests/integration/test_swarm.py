"""The same compose.yaml on a Docker Swarm: ``docker stack deploy`` on a one-node swarm (made on
127.0.0.1 here, left again afterwards) runs the cluster — every service found by DNS
(``endpoint_mode: dnsrr``: a swarm's virtual IPs need IPVS, which this kernel lacks) and none
published, so the test drives it from inside, with kplane in the apiserver's container. node-1..3
Ready, a pod runs, the hollow-nodes service scaled to two shards registers each shard's nodes
under its own names, and ``docker stack rm`` leaves nothing behind.
"""

from __future__ import annotations

import json

import pytest

from tests.harness import docker as dockerh
from tests.harness.cluster import ROOT
from tests.harness.wait import eventually

pytestmark = pytest.mark.integration

PER_SHARD = 3


@pytest.fixture(scope="module")
def stack():
    docker = dockerh.engine()
    try:
        dockerh.build_image()
        dockerh.swarm(docker)
        st = dockerh.StackCluster(docker, hollow_per_shard=PER_SHARD)
        try:
            st.deploy()
            yield st
        finally:
            left = st.remove()
            assert left == [], f"docker stack rm left these behind: {left}"
    finally:
        dockerh.leave_swarm(docker)
        dockerh.release()


def _ready_nodes(st) -> list[str]:
    out = st.kplane("get", "nodes", "-o", "json")
    assert out.returncode == 0, out.stderr
    return sorted(n["metadata"]["name"] for n in json.loads(out.stdout)["items"]
                  if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]))


async def test_stack_deploy_runs_the_cluster_a_pod_and_two_hollow_shards(stack):
    await eventually(lambda: _ready_nodes(stack) == ["node-1", "node-2", "node-3"], timeout=60, interval=1,
                     what="node-1..3 Ready on the swarm")
    applied = stack.kplane("apply", "-f", "-", input=(ROOT / "examples" / "pod.yaml").read_text())
    assert applied.returncode == 0, applied.stderr

    def web_running() -> bool:
        out = stack.kplane("get", "pod", "web", "-o", "json")
        return out.returncode == 0 and json.loads(out.stdout)["status"].get("phase") == "Running"

    await eventually(web_running, timeout=40, interval=1, what="web Running")
    stack.scale("hollow-nodes", 2)
    hollow = sorted(f"hollow-{s}-{i}" for s in (1, 2) for i in range(1, PER_SHARD + 1))
    await eventually(lambda: [n for n in _ready_nodes(stack) if n.startswith("hollow-")] == hollow, timeout=60,
                     interval=1, what=f"two shards of {PER_SHARD} hollow nodes Ready")
    check = stack.kplane("check")
    assert check.returncode == 0, check.stdout + check.stderr
