"""Nodes coming and going on a running cluster (``kplane node add/remove``), and hollow nodes
(many kubelets in one process) running pods through the kubelet's own code path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cli import cluster
from machinery.api import core_pb2
from machinery.client import Client
from tests.harness.api import delete_all_pods, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import ROOT, cluster_fixture
from tests.harness.metrics import metric
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.integration

# A controller-manager with only its pod garbage collector, quick: `node remove` leaves it the pods.
nodes_cluster = cluster_fixture(nodes=1, hollow_nodes=4, node_cpu="4", node_memory="8Gi", controller_managers=1,
                                controller_manager_args=["--controllers=podgc", "--pod-gc-period=500ms",
                                                         "--pod-gc-quarantine=1s"])


@pytest.fixture
async def api(nodes_cluster):
    c = nodes_cluster.client()
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


def _revision(tc) -> int:
    out = tc.kplane("history")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1])["rev"] if lines else 0


def _changes_since(tc, rev: int) -> list[tuple[str, str, str]]:
    """(type, kind, name) of every write after ``rev`` but the running cluster's own heartbeats:
    Lease renewals, Events, and Node updates that leave the spec and labels as they were."""
    out = tc.kplane("history", "--since", str(rev + 1))
    assert out.returncode == 0, out.stderr
    entries = [json.loads(line) for line in out.stdout.strip().splitlines() if line]
    seen: dict[str, tuple] = {}
    for e in [json.loads(line) for line in tc.kplane("history").stdout.strip().splitlines() if line]:
        if e["kind"] == "Node" and e["rev"] <= rev:
            obj = e["object"]
            seen[e["name"]] = (obj.get("spec"), obj["metadata"].get("labels"))
    changes = []
    for e in entries:
        obj = e["object"]
        if e["kind"] in ("Lease", "Event"):
            continue
        if e["kind"] == "Node" and e["type"] == "MODIFIED" and \
                seen.get(e["name"]) == (obj.get("spec"), obj["metadata"].get("labels")):
            continue
        changes.append((e["type"], e["kind"], e["name"]))
    return changes


def _fails_cleanly(result, fragment: str) -> None:
    assert result.returncode != 0, f"expected failure, got: {result.stdout}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert fragment in lines[0], f"{fragment!r} not in {lines[0]!r}"


async def test_node_add_runs_a_node_of_its_own_size_then_remove_deregisters_it_and_podgc_collects_its_pods(
        nodes_cluster, api):
    tc = nodes_cluster
    out = tc.kplane("node", "add", "big-1", "--cpu", "16", "--memory", "32Gi", "--pods", "20",
                    "--label", "topology.kubernetes.io/zone=zone-b", "--taint", "dedicated=infra:NoSchedule")
    assert out.returncode == 0, out.stderr
    node = await api.nodes.get("big-1")
    assert dict(node.status.capacity)["cpu"] == "16" and dict(node.status.allocatable)["pods"] == "20"
    assert node.metadata.labels["topology.kubernetes.io/zone"] == "zone-b"
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [("dedicated", "infra", "NoSchedule")]
    assert next(c for c in node.status.conditions if c.type == "Ready").status == "True"
    # A pod bigger than the cluster's other nodes runs there.
    pod = MakePod().name("wide").req(cpu="10", memory="1Gi").node("big-1").grace(0).obj()
    pod.spec.tolerations.add(key="dedicated", operator="Equal", value="infra", effect="NoSchedule")
    await api.pods.create(pod)
    uid = (await wait_running(api, "wide"))["wide"].metadata.uid
    tc.reload()
    kubelet_pid = tc.process("kubelet/big-1").pid

    out = tc.kplane("node", "remove", "big-1")
    assert out.returncode == 0, out.stderr
    assert "1 pod(s) bound to it left to the pod garbage collector" in out.stdout
    tc.reload()
    assert "kubelet/big-1" not in tc.state.processes and not cluster.alive(kubelet_pid)
    names = {n.metadata.name for n in (await api.nodes.list()).items}
    assert "big-1" not in names and "node-1" in names

    async def collected() -> bool:
        return not (await api.pods.list("default")).items
    await eventually(collected, timeout=20, what="the controller-manager's podgc to collect the pod")
    # Kubernetes' podgc: Failed with DisruptionTarget (DeletionByPodGC), then deleted.
    history = tc.kplane("history").stdout.splitlines()
    entries = [json.loads(line) for line in history]
    last = [e for e in entries if e["kind"] == "Pod" and e["object"]["metadata"].get("uid") == uid][-2:]  # not Events
    assert last[0]["type"] == "MODIFIED" and last[1]["type"] == "DELETED"
    status = last[0]["object"]["status"]
    assert status["phase"] == "Failed"
    assert {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
            "message": "PodGC: node no longer exists"}.items() <= next(
        c for c in status["conditions"] if c["type"] == "DisruptionTarget").items()


BAD_NODES = [
    (["node", "add", "Bad_Name"], "a lowercase RFC 1123 subdomain"),
    (["node", "add", "n1", "--cpu", "1.5.5"], "invalid --cpu '1.5.5'"),
    (["node", "add", "n2", "--memory=-1Gi"], "must not be negative"),
    (["node", "add", "n3", "--taint", "gpu=yes:Sometimes"], "effect must be one of"),
    (["node", "add", "n4", "--taint", "no-effect"], "want KEY[=VALUE]:EFFECT"),
    (["node", "add", "n5", "--label", "bad key=1"], "metadata.labels"),
    (["node", "add", "n6", "--pods", "0"], "invalid --pods 0"),
    (["node", "add", "node-1"], 'node "node-1" is already part of this cluster'),
    (["node", "add", "hollow-node-2"], "kept for hollow nodes"),
    (["node", "remove", "ghost"], 'no node "ghost" in this cluster'),
    (["node", "remove", "hollow-node-2"], "is a hollow node"),
    (["node", "remove", "node-1", "--cpu", "2"], "takes no --cpu"),
]


@pytest.mark.parametrize("argv,fragment", BAD_NODES, ids=[" ".join(b[0][:3]) for b in BAD_NODES])
def test_bad_node_commands_fail_with_one_line_and_change_nothing(nodes_cluster, argv, fragment):
    tc = nodes_cluster
    before_rev = _revision(tc)
    before_state = Path(tc.data_dir, cluster.STATE_FILE).read_text()
    before_tokens = Path(tc.data_dir, cluster.TOKENS_FILE).read_text()
    _fails_cleanly(tc.kplane(*argv), fragment)
    assert _changes_since(tc, before_rev) == []
    assert Path(tc.data_dir, cluster.STATE_FILE).read_text() == before_state
    assert Path(tc.data_dir, cluster.TOKENS_FILE).read_text() == before_tokens


async def test_a_node_of_the_same_name_registered_by_someone_else_is_refused(nodes_cluster, api):
    tc = nodes_cluster
    node = core_pb2.Node(api_version="v1", kind="Node")
    node.metadata.name = "taken"
    await api.nodes.create(node)
    try:
        before = _revision(tc)
        _fails_cleanly(tc.kplane("node", "add", "taken"), 'node "taken" already exists')
        assert _changes_since(tc, before) == []
    finally:
        await api.nodes.delete("taken")


async def test_hollow_nodes_register_and_run_pods_with_the_kubelets_own_code_path(nodes_cluster, api):
    tc = nodes_cluster
    nodes = {n.metadata.name: n for n in (await api.nodes.list()).items}
    hollow = sorted(n for n in nodes if n.startswith("hollow-node-"))
    assert hollow == ["hollow-node-1", "hollow-node-2", "hollow-node-3", "hollow-node-4"]
    for name in hollow:
        ready = next(c for c in nodes[name].status.conditions if c.type == "Ready")
        assert ready.status == "True"
        assert nodes[name].status.node_info.kubelet_version == "v1.37.0"
        lease = await api.leases.get(name, "kube-node-lease")
        assert lease.spec.holder_identity == name
    pods = [MakePod().name(f"h{i}").req(cpu="500m", memory="64Mi").node(f"hollow-node-{i}")
            .grace(0).obj() for i in range(1, 5)]
    for p in pods:
        p.spec.containers[0].resize_policy.add(resource_name="cpu", restart_policy="NotRequired")
        await api.pods.create(p)
    running = await wait_running(api, *(p.metadata.name for p in pods))
    assert dict(running["h3"].status.container_statuses[0].allocated_resources)["cpu"] == "500m"
    # KEP-1287 on a hollow node, as on a real one.
    await resize(api, "h3", cpu="700m")

    async def resized():
        cs = (await api.pods.get("h3")).status.container_statuses[0]
        return cs.resources.requests.get("cpu") == "700m" and cs.allocated_resources.get("cpu") == "700m"

    await eventually(resized, timeout=20, what="h3 resized on its hollow node")
    # A pod that does not fit is refused by that hollow node's admission.
    await api.pods.create(MakePod().name("toobig").req(cpu="4").node("hollow-node-3").grace(0).obj())

    async def refused():
        p = await api.pods.get("toobig")
        return p.status.phase == "Failed" and p.status.reason == "OutOfcpu"

    await eventually(refused, timeout=20, what="toobig refused with OutOfcpu")
    # One admin port for the process; its metrics add up every hollow kubelet.
    starts = metric(tc, "hollow-nodes", "kplane_runtime_operations_total", 'operation_type="start_container"}')
    assert starts >= 4


async def test_killing_the_hollow_process_is_a_power_cut_its_kubelets_restart_their_pods(nodes_cluster, api):
    tc = nodes_cluster
    await api.pods.create(MakePod().name("survivor").req(cpu="100m").node("hollow-node-2").grace(0).obj())
    before = (await wait_running(api, "survivor"))["survivor"]
    tc.reload()
    cluster.kill(tc.process("hollow-nodes"))
    ok, reason = cluster.start(tc.state, tc.process("hollow-nodes"), 60)
    tc.state.save()
    assert ok, reason

    async def restarted():
        p = await api.pods.get("survivor")
        cs = p.status.container_statuses
        return p.metadata.uid == before.metadata.uid and cs and cs[0].ready and \
            cs[0].container_id != before.status.container_statuses[0].container_id

    await eventually(restarted, timeout=30, what="the pod's container started again after the power cut")


def test_hollow_process_needs_a_token_per_node(tmp_path):
    (tmp_path / "tokens").mkdir()
    out = subprocess.run([sys.executable, "-m", "kubelet.hollow", "--nodes", "2", "--server", "127.0.0.1:1",
                          "--token-dir", str(tmp_path / "tokens"), "--data-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode != 0
    assert "no token for hollow node hollow-node-1" in out.stderr


async def test_hollow_nodes_split_over_two_processes_all_ready_and_both_stopped_by_down(tmp_path):
    """``kplane up --hollow-nodes 6 --hollow-processes 2``: hollow-node-1..3 in ``hollow-nodes``,
    4..6 in ``hollow-nodes-2``, every one Ready; ``kplane node remove`` names the process a hollow
    node lives in; ``kplane down`` stops both processes."""
    data_dir = tmp_path / "data"

    def kplane(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "cli", "--data-dir", str(data_dir), *args], capture_output=True,
                              text=True, timeout=timeout, cwd=ROOT)

    try:
        up = kplane("up", "--detach", "--nodes", "0", "--schedulers", "0", "--controller-managers", "0",
                    "--hollow-nodes", "6", "--hollow-processes", "2", timeout=180)
        assert up.returncode == 0, up.stderr
        state = cluster.ClusterState.load(data_dir)
        assert state is not None
        hollow = {n: p for n, p in state.processes.items() if p.role == "hollow"}
        assert list(hollow) == ["hollow-nodes", "hollow-nodes-2"]
        assert [(p.argv[p.argv.index("--first") + 1], p.argv[p.argv.index("--nodes") + 1])
                for p in hollow.values()] == [("1", "3"), ("4", "3")]
        assert state.config["hollow_processes"] == 2
        api = Client(state.server, state.admin_token(), timeout=15.0)

        async def all_ready() -> bool:
            nodes = {n.metadata.name: n for n in (await api.nodes.list()).items}
            return sorted(nodes) == sorted(f"hollow-node-{i}" for i in range(1, 7)) and all(
                any(c.type == "Ready" and c.status == "True" for c in n.status.conditions) for n in nodes.values())

        try:
            await eventually(all_ready, timeout=30, what="hollow-node-1..6 Ready")
        finally:
            await api.close()
        status = json.loads(kplane("status", "-o", "json").stdout)["components"]
        assert [(c["name"], c["healthy"]) for c in status if c["name"].startswith("hollow-nodes")] == [
            ("hollow-nodes", True), ("hollow-nodes-2", True)]
        _fails_cleanly(kplane("node", "remove", "hollow-node-5"), "in the hollow-nodes-2 process")
    finally:
        down = kplane("down")
    assert down.returncode == 0, down.stderr
    stopped = down.stdout.strip().partition("stopped: ")[2].partition(";")[0].split(", ")
    assert {"hollow-nodes", "hollow-nodes-2"} <= set(stopped), down.stdout
    assert not any(cluster.alive(p.pid) for p in hollow.values())
