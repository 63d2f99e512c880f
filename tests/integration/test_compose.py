"""compose.yaml run for real: ``make image`` (kplane:dev from Debian's packages and PyPI, no
registry), then ``docker compose up -d`` — etcd, the apiserver, the scheduler, the
controller-manager and three nodes in containers, the apiserver's ports and every admin port
published on 127.0.0.1 only — driven from the host as a user drives it: kubectl with the kubeconfig
and kplane with the data dir the cluster writes into the bind-mounted ``.kplane/compose``. Then
chaos in containers (the scheduler's container killed mid-preemption, a kubelet's mid-resize),
and ``down -v`` leaving nothing behind.

The engine is Debian's docker.io (installed with apt and started here when missing: the test
fails with one line, never skips, where it cannot be); the compose implementation Compose v2
where the machine has it, else Debian's docker-compose 1.29, which the file must satisfy too.
"""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from tests.harness import docker as dockerh
from tests.harness import kubectl
from tests.harness.api import ensure_priority_classes, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import ROOT
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.integration

NODES = ("node-1", "node-2", "node-3")
PER_SHARD = 3  # hollow nodes per replica of the hollow-nodes service (250 by default)


def test_compose_yaml_is_valid_for_a_real_compose_implementation():
    """As `docker compose up` reads it in the repository root: compose.yaml and its override."""
    out = subprocess.run([*dockerh.compose_command(), "config"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    for service in ("etcd", "apiserver", "scheduler", "controller-manager", "kubelet-node-1", "runtime-node-1",
                    "hollow-nodes", "tokens"):
        assert service in services, f"{service} is not a service of compose.yaml"
    published = [_port(p) for svc in services.values() for p in svc.get("ports", [])]
    assert "127.0.0.1:6443:6443" in published and "127.0.0.1:6444:6444" in published, published
    assert all(p.startswith("127.0.0.1:") for p in published), published


def _port(p) -> str:
    """A published port as ``host_ip:published:target`` (1.29 prints the short form, v2 the long)."""
    if isinstance(p, dict):
        return f"{p.get('host_ip', '')}:{p.get('published')}:{p.get('target')}"
    return str(p).removesuffix("/tcp")


@pytest.fixture(scope="module")
def engine():
    docker = dockerh.engine()
    try:
        yield docker
    finally:
        dockerh.release()


@pytest.fixture(scope="module")
def compose(engine, request):
    dockerh.build_image()
    cc = dockerh.ComposeCluster(hollow_per_shard=PER_SHARD)
    try:
        cc.up()
        yield cc
    finally:
        if request.session.testsfailed:
            print(f"----- compose logs of {cc.project} -----\n{cc.logs()}")
        cc.down()
        assert cc.leftovers(engine) == [], "compose down -v left these behind"


@pytest.fixture
async def api(compose):
    c = compose.tc.client()
    try:
        yield c
    finally:
        await c.close()


def _kubectl(compose, *args: str) -> str:
    run = kubectl.run(compose.tc.kubeconfig, compose.dir / "kubectl-cache", *args)
    assert run.returncode == 0, f"kubectl {args} failed: {run.stderr}"
    return run.stdout


async def test_the_cluster_comes_up_and_kubectl_and_kplane_drive_it_from_the_host(compose, api):
    tc = compose.tc

    def ready() -> bool:
        nodes = json.loads(_kubectl(compose, "get", "nodes", "-o", "json"))["items"]
        return sorted(n["metadata"]["name"] for n in nodes if any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])) == list(NODES)

    await eventually(ready, timeout=40, interval=1, what="node-1..3 Ready (kubectl get nodes)")
    status = tc.kplane("status", "-o", "json")
    assert status.returncode == 0, status.stderr
    rows = {r["name"]: r for r in json.loads(status.stdout)["components"]}
    assert all(r["healthy"] for r in rows.values()), rows
    assert all(r["admin"].startswith("127.0.0.1:") for r in rows.values()), rows
    assert rows["apiserver"]["grpc"] == "127.0.0.1:6443" and rows["apiserver"]["rest"] == "127.0.0.1:6444"
    assert rows["apiserver-2"]["grpc"] == "127.0.0.1:6453" and rows["apiserver-2"]["rest"] == "127.0.0.1:6454"

    _kubectl(compose, "apply", "-f", str(ROOT / "examples" / "pod.yaml"))
    await wait_running(api, "web", timeout=40)
    out = tc.kplane("resize", "pod", "web", "--cpu", "500m")
    assert out.returncode == 0, out.stderr

    async def actuated() -> bool:
        pod = await api.pods.get("web")
        cs = pod.status.container_statuses
        return bool(cs) and cs[0].resources.requests.get("cpu") == "500m" and \
            not any(c.type == "PodResizeInProgress" for c in pod.status.conditions)

    await eventually(actuated, timeout=30, what="web's resize to 500m actuated")
    assert tc.kplane("get", "pods", "-o", "name").stdout.split() == ["pod/web"]
    await api.pods.delete("web", grace_period_seconds=0)


async def test_with_one_apiserver_container_killed_the_cluster_works_through_the_other(compose, api):
    """Every component dials the apiservers' one DNS name; kplane on the host has both published
    addresses: with ``apiserver`` killed, a pod is still created, scheduled and started, and each
    kubectl context answers for its own apiserver."""
    tc = compose.tc
    killed = tc.kplane("kill", "apiserver")
    assert killed.returncode == 0, killed.stderr
    try:
        await api.pods.create(MakePod().name("failover").req(cpu="100m", memory="64Mi").grace(0).obj())
        await wait_running(api, "failover", timeout=60)
        second = kubectl.run(tc.kubeconfig, compose.dir / "kubectl-cache", "--context", "kplane-apiserver-2",
                             "get", "pod", "failover", "-o", "name")
        assert second.returncode == 0 and second.stdout.split() == ["pod/failover"], second.stderr
        first = kubectl.run(tc.kubeconfig, compose.dir / "kubectl-cache", "get", "pods", "--request-timeout=3s")
        assert first.returncode != 0, "the killed apiserver's context still answered"
    finally:
        started = tc.kplane("start", "apiserver")
        assert started.returncode == 0, started.stderr
    assert _kubectl(compose, "get", "pod", "failover", "-o", "name").split() == ["pod/failover"]
    await api.pods.delete("failover", grace_period_seconds=0)


async def test_the_scheduler_container_killed_mid_preemption_and_started_again_converges(compose, api):
    """Two 2-cpu pods of low priority fill each node; a 3-cpu pod of high priority needs both of one
    node's. The scheduler holds after its first victim (``pause`` at
    scheduler/preemption-after-first-victim), its container is SIGKILLed (``kplane kill
    scheduler``) and started again: the preemption completes, with one victim set, and ``kplane
    check`` finds nothing."""
    tc = compose.tc
    await ensure_priority_classes(api, low=100, high=1000)
    lows = [f"low-{i}" for i in range(6)]
    for name in lows:
        await api.pods.create(MakePod().name(name).req(cpu="2", memory="64Mi").priority_class("low").grace(1).obj())
    await wait_running(api, *lows, timeout=40)
    failpoint(tc, "scheduler", "scheduler/preemption-after-first-victim", "pause")
    await api.pods.create(MakePod().name("high").req(cpu="3", memory="64Mi").priority_class("high").grace(1).obj())
    await wait_paused(tc, "scheduler", "scheduler/preemption-after-first-victim")
    assert tc.kplane("kill", "scheduler").returncode == 0
    started = tc.kplane("start", "scheduler")
    assert started.returncode == 0, started.stderr
    running = await wait_running(api, "high", timeout=60)
    victims = [n for n in lows if n not in {p.metadata.name for p in (await api.pods.list("default")).items}]
    assert victims, "no victim was deleted"
    check = tc.kplane("check")
    assert check.returncode == 0, check.stdout + check.stderr
    assert running["high"].spec.node_name
    for name in [n for n in lows if n not in victims] + ["high"]:
        await api.pods.delete(name, grace_period_seconds=0)


async def test_a_kubelet_container_restarted_mid_resize_recovers_from_its_checkpoint(compose, api):
    """The kubelet has allocated a resize (its checkpoint, on the cluster's volume) and not sent it
    to the runtime (``pause`` at kubelet/resize-after-allocate) when its container is killed; the
    container started again reads the checkpoint and actuates the resize."""
    tc = compose.tc
    await api.pods.create(MakePod().name("resized").req(cpu="500m", memory="64Mi").node("node-2").grace(1).obj())
    await wait_running(api, "resized", timeout=40)
    failpoint(tc, "kubelet/node-2", "kubelet/resize-after-allocate", "pause")
    await resize(api, "resized", cpu="1")
    await wait_paused(tc, "kubelet/node-2", "kubelet/resize-after-allocate")
    assert tc.kplane("restart", "kubelet/node-2").returncode == 0

    async def actuated() -> bool:
        cs = (await api.pods.get("resized")).status.container_statuses
        return bool(cs) and cs[0].resources.requests.get("cpu") == "1"

    await eventually(actuated, timeout=40, what="the resize actuated by the restarted kubelet")
    check = tc.kplane("check")
    assert check.returncode == 0, check.stdout + check.stderr
    await api.pods.delete("resized", grace_period_seconds=0)


async def test_hollow_nodes_scale_as_shards_with_names_of_their_own(compose, api):
    """``--scale hollow-nodes=2``: each replica claims a slot and registers its nodes,
    hollow-<slot>-1..n; one restarted gets its own slot back (no third set of names)."""
    out = compose.compose("up", "-d", "--scale", "hollow-nodes=2")
    assert out.returncode == 0, out.stderr
    want = sorted(f"hollow-{s}-{i}" for s in (1, 2) for i in range(1, PER_SHARD + 1))

    async def hollow_ready() -> list[str]:
        return sorted(n.metadata.name for n in (await api.nodes.list()).items if n.metadata.name.startswith("hollow-")
                      and any(c.type == "Ready" and c.status == "True" for c in n.status.conditions))

    await eventually(lambda: _equal(hollow_ready(), want), timeout=60, what=f"two shards of {PER_SHARD} Ready")
    restarted = compose.compose("restart", "hollow-nodes")
    assert restarted.returncode == 0, restarted.stderr
    await eventually(lambda: _equal(hollow_ready(), want), timeout=60, what="the same two shards after a restart")
    assert sorted(n.metadata.name for n in (await api.nodes.list()).items if n.metadata.name.startswith("hollow-")) \
        == want


async def _equal(got, want) -> bool:
    return await got == want
