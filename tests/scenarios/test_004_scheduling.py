"""Kubernetes docs: Scheduling, Preemption and Eviction, checked on a real cluster: etcd, apiserver,
the scheduler and four nodes (kubelet + runtime each) as processes.

One test per behaviour the document describes, with the document's own manifests where it gives
one: nodeSelector and node affinity (``with-node-affinity``; Assigning Pods to Nodes), scheduling
gates (``test-pod``; Pod Scheduling Readiness), topology spread (the 4-node / 2-zone cluster, its
one-constraint, two-constraint and conflicting examples; Pod Topology Spread Constraints), taints
and tolerations (``key1=value1:NoSchedule``; Taints and Tolerations), ``percentageOfNodesToScore``
(Scheduler Performance Tuning). Each asserts where pods land (``spec.nodeName``) or, for a pod
that fits nowhere, the ``PodScheduled=False`` condition (reason Unschedulable, kube-scheduler's
message) and the matching ``FailedScheduling`` event; where the document says a change makes a
pending pod schedulable, the pod must bind within seconds — the scheduler's periodic flush of
unschedulable pods comes only after 5 minutes, so only the rejecting plugin's QueueingHint can
have moved it.

Node labels and taints are set as ``kubectl label`` / ``kubectl taint`` do, by updating the Node.
The scheduler learns of them on its node watch, which is not ordered with its pod watch, so
after editing nodes a test waits for a *barrier* pod that can only land once the scheduler has
seen the last edit (and so every earlier one) before it creates the pods it checks.

The whole module's scheduler runs with a configuration file setting percentageOfNodesToScore:
50 (``kplane up --scheduler-config``), so every test also shows that pods schedule under it.
After each test ``kplane check`` must find no violated invariant.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
import urllib.request
from pathlib import Path
from typing import Callable

import pytest
import yaml

from machinery import errors, jsonconv
from machinery.api import core_pb2
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, start_cluster, stop_cluster
from tests.harness.fixtures import fixture
from tests.harness.metrics import metric, requeued_by
from tests.harness.wait import condition, eventually, wait_bound, wait_running, wait_unschedulable

pytestmark = pytest.mark.scenario

NODES = ("node-1", "node-2", "node-3", "node-4")
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
BARRIER_LABEL = "scenario.kplane.dev/barrier"
BARRIER_NODE = "node-4"  # never tainted by these tests
# Every label key a test sets; the cleanup removes them all.
TEST_LABELS = (ZONE, "another-node-label-key", "disktype", "example.com/gpu", "zone", "node")
TEST_TAINT_KEYS = ("key1", "key2")

# Kubernetes docs: Scheduler Performance Tuning, "Below is an example configuration that sets
# percentageOfNodesToScore to 50%."
SCHEDULER_CONFIG = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 50
"""

_barriers = itertools.count(1)


@pytest.fixture(scope="module")
def sched_cluster():
    config_dir = tempfile.mkdtemp(prefix="kplane-sched-config-")
    config = Path(config_dir) / "scheduler.yaml"
    config.write_text(SCHEDULER_CONFIG)
    tc = start_cluster(nodes=len(NODES), schedulers=1, kubelet_args=FAST_KUBELET, scheduler_config=str(config))
    try:
        yield tc
    finally:
        stop_cluster(tc)
        shutil.rmtree(config_dir, ignore_errors=True)


@pytest.fixture
async def api(sched_cluster):
    c = sched_cluster.client()
    try:
        yield c
        # After each test: the cluster's history keeps every invariant, then a clean slate.
        out = await asyncio.to_thread(sched_cluster.kplane, "check")
        assert out.returncode == 0, f"kplane check failed:\n{out.stdout}\n{out.stderr}"
        await delete_all_pods(c)
        for name in NODES:
            await _edit_node(c, name, _reset)
    finally:
        await c.close()


# ---------------------------------------------------------------- helpers


def _manifest(text: str) -> core_pb2.Pod:
    """A pod from the document's YAML."""
    return jsonconv.from_dict(core_pb2.Pod, yaml.safe_load(text))


def _renamed(pod: core_pb2.Pod, name: str) -> core_pb2.Pod:
    out = core_pb2.Pod()
    out.CopyFrom(pod)
    out.metadata.name = name
    return out


def _reset(node: core_pb2.Node) -> None:
    for key in TEST_LABELS:
        node.metadata.labels.pop(key, None)
    kept = [t for t in node.spec.taints if t.key not in TEST_TAINT_KEYS]
    del node.spec.taints[:]
    node.spec.taints.extend(kept)


async def _edit_node(api, name: str, edit: Callable[[core_pb2.Node], None]) -> core_pb2.Node:
    """Read, change and write the Node (kubectl label / taint), again if the kubelet wrote meanwhile."""
    for _ in range(20):
        node = await api.nodes.get(name)
        edit(node)
        try:
            return await api.nodes.update(node)
        except errors.Conflict:
            await asyncio.sleep(0.05)
    raise AssertionError(f"could not update node {name}: conflicts")


async def _label(api, name: str, **labels: str) -> None:
    await _edit_node(api, name, lambda n: n.metadata.labels.update(labels))


def _taint(key: str, value: str, effect: str) -> Callable[[core_pb2.Node], None]:
    return lambda n: n.spec.taints.add(key=key, value=value, effect=effect)


async def _scheduler_saw_nodes(api) -> None:
    """Until the scheduler has seen every Node edit made so far: a pod that only the last edit
    lets land has landed (the scheduler's node watch delivers edits in order)."""
    n = str(next(_barriers))
    await _label(api, BARRIER_NODE, **{BARRIER_LABEL: n})
    pod = MakePod().name(f"barrier-{n}").container("pause").obj()
    pod.spec.node_selector[BARRIER_LABEL] = n
    await api.pods.create(pod)
    assert await wait_bound(api, pod.metadata.name) == BARRIER_NODE
    await api.pods.delete(pod.metadata.name, "default", grace_period_seconds=0)

    async def gone():
        try:
            await api.pods.get(pod.metadata.name)
        except errors.NotFound:
            return True
        return False

    await eventually(gone, timeout=20, what=f"{pod.metadata.name} deleted")


# ---------------------------------------------------------- Kubernetes docs: Taints and Tolerations

TOLERATION_EQUAL = """\
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoSchedule"
"""
TOLERATION_EXISTS = """\
- key: "key1"
  operator: "Exists"
  effect: "NoSchedule"
"""


def _on_node1(name: str, tolerations: str = "") -> core_pb2.Pod:
    """A pod that can only go to node-1 (so a taint there is all that decides), with tolerations."""
    pod = MakePod().name(name).container("pause").obj()
    pod.spec.node_selector[HOSTNAME] = "node-1"
    for t in yaml.safe_load(tolerations) or []:
        pod.spec.tolerations.append(jsonconv.from_dict(core_pb2.Toleration, t))
    return pod


async def test_004_taints_key1_value1_noschedule_repels_pods_that_do_not_tolerate_it(api, sched_cluster):
    # kubectl taint nodes node1 key1=value1:NoSchedule
    await _edit_node(api, "node-1", _taint("key1", "value1", "NoSchedule"))
    await _scheduler_saw_nodes(api)

    # "Both of the following tolerations 'match' the taint ... and thus a pod with either
    # toleration would be able to schedule onto node1".
    await api.pods.create(_on_node1("tolerates-equal", TOLERATION_EQUAL))
    await api.pods.create(_on_node1("tolerates-exists", TOLERATION_EXISTS))
    # "no pod will be able to schedule onto node1 unless it has a matching toleration".
    await api.pods.create(_on_node1("no-toleration"))
    assert await wait_bound(api, "tolerates-equal") == "node-1"
    assert await wait_bound(api, "tolerates-exists") == "node-1"
    message = await wait_unschedulable(api, "no-toleration")
    assert message == ("0/4 nodes are available: 1 node(s) had untolerated taint {key1: value1}, "
                       "3 node(s) didn't match Pod's node affinity/selector. preemption: 0/4 nodes are available: "
                       "4 Preemption is not helpful for scheduling.")

    # kubectl taint nodes node1 key1=value1:NoSchedule-  (an update of the Node). Only
    # TaintToleration's QueueingHint for a taint change can requeue the pod: it binds in seconds.
    requeued_before = requeued_by(sched_cluster, "NodeUpdateNodeTaint")
    await _edit_node(api, "node-1", _reset)
    assert await wait_bound(api, "no-toleration") == "node-1"
    assert requeued_by(sched_cluster, "NodeUpdateNodeTaint") == requeued_before + 1
    await wait_running(api, "tolerates-equal", "tolerates-exists", "no-toleration")


async def test_004_taints_a_pod_must_tolerate_every_noschedule_taint(api):
    # kubectl taint nodes node1 key1=value1:NoSchedule / key1=value1:NoExecute / key2=value2:NoSchedule
    for key, value, effect in (("key1", "value1", "NoSchedule"), ("key1", "value1", "NoExecute"),
                               ("key2", "value2", "NoSchedule")):
        await _edit_node(api, "node-1", _taint(key, value, effect))
    await _scheduler_saw_nodes(api)
    # "the pod will not be able to schedule onto the node, because there is no toleration
    # matching the third taint".
    await api.pods.create(_on_node1("two-tolerations", """\
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoSchedule"
- key: "key1"
  operator: "Equal"
  value: "value1"
  effect: "NoExecute"
"""))
    message = await wait_unschedulable(api, "two-tolerations")
    assert message.startswith("0/4 nodes are available: 1 node(s) had untolerated taint {key2: value2}, "
                              "3 node(s) didn't match Pod's node affinity/selector."), message


# --------------------------------------------------------- Kubernetes docs: Assigning Pods to Nodes

async def test_004_node_selector_schedules_only_onto_nodes_with_every_label(api):
    await _label(api, "node-3", disktype="ssd")
    await _scheduler_saw_nodes(api)
    ssd = MakePod().name("nginx").container("pause").obj()
    ssd.spec.node_selector["disktype"] = "ssd"
    await api.pods.create(ssd)
    assert await wait_bound(api, "nginx") == "node-3"

    # "Kubernetes only schedules the Pod onto nodes that have each of the labels you specify."
    both = MakePod().name("ssd-and-gpu").container("pause").obj()
    both.spec.node_selector.update({"disktype": "ssd", "example.com/gpu": "true"})
    await api.pods.create(both)
    message = await wait_unschedulable(api, "ssd-and-gpu")
    assert message.startswith("0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."), \
        message
    # A node given both labels: NodeAffinity's hint for a label change requeues the pod.
    await _label(api, "node-4", **{"disktype": "ssd", "example.com/gpu": "true"})
    assert await wait_bound(api, "ssd-and-gpu") == "node-4"


WITH_NODE_AFFINITY = fixture("pod-with-node-affinity.yaml")


async def test_004_node_affinity_required_zone_then_preferred_label(api):
    example = _manifest(WITH_NODE_AFFINITY)
    # node-2 has the preferred label but a zone the required rule does not list.
    await _label(api, "node-2", **{ZONE: "antarctica-south1", "another-node-label-key": "another-node-label-value"})
    await _scheduler_saw_nodes(api)
    await api.pods.create(example)
    # "The scheduler can't schedule the Pod unless the rule is met."
    message = await wait_unschedulable(api, "with-node-affinity")
    assert message.startswith("0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector."), \
        message

    # node-1 joins antarctica-east1: the label change requeues the pod, and it lands there — the
    # preferred node-2 still fails the required rule.
    await _label(api, "node-1", **{ZONE: "antarctica-east1"})
    assert await wait_bound(api, "with-node-affinity") == "node-1"
    await api.pods.delete("with-node-affinity", "default", grace_period_seconds=0)

    # node-2 moves to antarctica-west1: both nodes meet the rule, and "the node preferably has a
    # label with the key another-node-label-key": every copy goes to node-2.
    await _label(api, "node-2", **{ZONE: "antarctica-west1"})
    await _scheduler_saw_nodes(api)
    names = [f"with-node-affinity-{i}" for i in range(1, 4)]
    for name in names:
        await api.pods.create(_renamed(example, name))
    assert [await wait_bound(api, n) for n in names] == ["node-2"] * 3
    await wait_running(api, *names)


# ------------------------------------------------- Kubernetes docs: Pod Topology Spread Constraints

# node1..node4: "node=node1,zone=zoneA" ... "node=node4,zone=zoneB".
SPREAD_LABELS = {"node-1": ("node1", "zoneA"), "node-2": ("node2", "zoneA"),
                 "node-3": ("node3", "zoneB"), "node-4": ("node4", "zoneB")}

ONE_CONSTRAINT = fixture("one-constraint.yaml")

TWO_CONSTRAINTS = fixture("two-constraints.yaml")


async def _spread_cluster(api, nodes: tuple[str, ...], pods: dict[str, int]) -> None:
    """Label ``nodes`` as the document's cluster, then put ``pods[node]`` pods labelled foo: bar
    on each node (bound directly, as pods already running there)."""
    for name in nodes:
        node, zone = SPREAD_LABELS[name]
        await _label(api, name, node=node, zone=zone)
    await _scheduler_saw_nodes(api)
    i = 0
    for node, count in pods.items():
        for _ in range(count):
            i += 1
            pod = MakePod().name(f"pod-{i}").label("foo", "bar").container("pause").obj()
            pod.spec.node_name = node
            await api.pods.create(pod)


async def _zone_counts(api) -> dict[str, int]:
    counts = {"zoneA": 0, "zoneB": 0}
    for p in (await api.pods.list("default", label_selector="foo=bar")).items:
        if p.spec.node_name:
            counts[SPREAD_LABELS[p.spec.node_name][1]] += 1
    return counts


async def test_004_topology_spread_one_constraint_incoming_pod_goes_to_the_less_loaded_zone(api):
    # "a 4-node cluster where 3 Pods labeled foo: bar are located in node1, node2 and node3".
    await _spread_cluster(api, NODES, {"node-1": 1, "node-2": 1, "node-3": 1})
    await api.pods.create(_manifest(ONE_CONSTRAINT))
    # "the incoming Pod can only be placed onto a node in zone B" ([3, 1] would be skew 2).
    assert await wait_bound(api, "mypod") in ("node-3", "node-4")
    assert await _zone_counts(api) == {"zoneA": 2, "zoneB": 2}

    # maxSkew 1 holds for every further pod: each lands where the zones stay within one.
    for i in range(2, 6):
        await api.pods.create(_renamed(_manifest(ONE_CONSTRAINT), f"mypod-{i}"))
        await wait_bound(api, f"mypod-{i}")
        counts = await _zone_counts(api)
        assert abs(counts["zoneA"] - counts["zoneB"]) <= 1, counts
    assert await _zone_counts(api) == {"zoneA": 4, "zoneB": 4}


async def test_004_topology_spread_two_constraints_only_node4(api):
    await _spread_cluster(api, NODES, {"node-1": 1, "node-2": 1, "node-3": 1})
    # node-4 made the least attractive by score (half its cpu taken by a pod the constraints do
    # not count): only the constraints can send the pod there.
    filler = MakePod().name("filler").label("app", "filler").container("pause").obj()
    filler.spec.node_name = "node-4"
    filler.spec.containers[0].resources.requests.update({"cpu": "2", "memory": "1Gi"})
    await api.pods.create(filler)
    await api.pods.create(_manifest(TWO_CONSTRAINTS))
    # "the only valid placement is onto node node4".
    assert await wait_bound(api, "mypod") == "node-4"


async def test_004_topology_spread_conflicting_constraints_stay_pending(api):
    # "a 3-node cluster across 2 zones": node1 holds 2 pods, node2 1, node3 2. node-4 carries
    # neither topology key, so it is bypassed ("Nodes missing any of these topologyKeys").
    await _spread_cluster(api, ("node-1", "node-2", "node-3"), {"node-1": 2, "node-2": 1, "node-3": 2})
    await api.pods.create(_manifest(TWO_CONSTRAINTS))
    # "you would see that the Pod mypod stays in the Pending state".
    message = await wait_unschedulable(api, "mypod")
    assert message.startswith("0/4 nodes are available: 1 node(s) didn't match pod topology spread constraints "
                              "(missing required label), 3 node(s) didn't match pod topology spread "
                              "constraints."), message
    # "you might also decide to delete an existing Pod manually": one of node1's. Then zone A
    # and B hold 2 each and node1, node2 1 each: mypod fits on node1 or node2, and PodTopologySpread's
    # hint for an assigned pod's deletion requeues it.
    on_node1 = [p.metadata.name for p in (await api.pods.list("default", label_selector="foo=bar")).items
                if p.spec.node_name == "node-1"]
    await api.pods.delete(on_node1[0], "default", grace_period_seconds=0)
    assert await wait_bound(api, "mypod") in ("node-1", "node-2")


# -------------------------------------------------------- Kubernetes docs: Pod Scheduling Readiness

TEST_POD = fixture("pod-with-scheduling-gates.yaml")


async def test_004_scheduling_gates_keep_test_pod_gated_until_removed(api, sched_cluster):
    tc = sched_cluster
    await api.pods.create(_manifest(TEST_POD))
    # The scheduler has it, parked as gated: scheduler_pending_pods{queue="gated"}.
    await eventually(lambda: metric(tc, "scheduler", "scheduler_pending_pods", 'queue="gated"}') >= 1, timeout=20,
                     what='scheduler_pending_pods{queue="gated"} >= 1')
    out = tc.kplane("get", "pod", "test-pod")
    assert out.returncode == 0 and out.stdout.split("\n")[1].split()[:3] == ["test-pod", "0/1", "SchedulingGated"], \
        out.stdout + out.stderr
    pod = await api.pods.get("test-pod")
    assert [g.name for g in pod.spec.scheduling_gates] == ["example.com/foo", "example.com/bar"]
    # Never tried: no PodScheduled condition, no FailedScheduling event.
    assert not pod.spec.node_name and pod.status.phase == "Pending"
    assert condition(pod, "PodScheduled") is None, pod.status
    evs = await api.events.list("default", field_selector="involvedObject.name=test-pod")
    assert not [e for e in evs.items if e.reason == "FailedScheduling"]

    # "remove its schedulingGates entirely by reapplying a modified manifest" (an update).
    del pod.spec.scheduling_gates[:]
    await api.pods.update(pod)
    # "this Pod's state get transited from previous SchedulingGated to Running".
    await wait_bound(api, "test-pod")
    await wait_running(api, "test-pod")
    out = tc.kplane("get", "pod", "test-pod", "-o", "wide")
    row = out.stdout.split("\n")[1].split()
    assert row[:3] == ["test-pod", "1/1", "Running"] and row[6] in NODES, out.stdout
    assert metric(tc, "scheduler", "scheduler_pending_pods", 'queue="gated"}') == 0


# ---------------------------------------------------- Kubernetes docs: Scheduler Performance Tuning

async def test_004_percentage_of_nodes_to_score_50_still_scores_every_node_of_a_small_cluster(api, sched_cluster):
    tc = sched_cluster
    argv = tc.process("scheduler").argv
    config = argv[argv.index("--config") + 1]
    assert yaml.safe_load(Path(config).read_text())["percentageOfNodesToScore"] == 50
    # "There is also a hardcoded minimum value of 100 nodes": with 4 nodes every node is found
    # feasible and scored, so pods that prefer node-4 all get it (were only 50% of the nodes
    # looked at, node-4 would be missed in about every other cycle).
    names = [f"prefers-node-4-{i}" for i in range(1, 5)]
    for name in names:
        pod = MakePod().name(name).container("pause").obj()
        pref = pod.spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution.add(weight=100)
        pref.preference.match_expressions.add(key=HOSTNAME, operator="In", values=["node-4"])
        await api.pods.create(pod)
    assert [await wait_bound(api, n) for n in names] == ["node-4"] * 4
    await wait_running(api, *names)


async def test_the_scheduler_exports_kube_schedulers_metrics(api, sched_cluster):
    """The metrics the issue names, with kube-scheduler's names and labels, after some scheduling."""
    tc = sched_cluster
    await api.pods.create(MakePod().name("metric-probe").container("pause").obj())
    await wait_running(api, "metric-probe")
    tc.reload()
    with urllib.request.urlopen(f"http://{tc.process('scheduler').admin}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    for needle in ('scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"}',
                   'scheduler_pending_pods{queue="active"}', 'scheduler_pending_pods{queue="backoff"}',
                   'scheduler_pending_pods{queue="unschedulable"}', 'scheduler_pending_pods{queue="gated"}',
                   "scheduler_pod_scheduling_attempts_bucket",
                   'scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="default-scheduler",'
                   'result="scheduled"}',
                   "scheduler_preemption_victims_bucket", "scheduler_pod_scheduled_after_flush_total",
                   'scheduler_queue_incoming_pods_total{event="UnschedulablePodAdd",queue="active"}',
                   'leader_election_master_status{name="kube-scheduler"} 1.0'):
        assert needle in text, needle
