"""When a cluster has settled after a run: every component up, every node Ready, every pod where
the control plane leaves it, every workload controller caught up.

``converged(client, state)`` answers once, with the first reason it has not (a run prints it when
convergence times out: that reason is usually the race's symptom). Settled means:

- every process of the cluster state runs and answers its health check;
- every Node is Ready;
- no pod is terminating on a node that exists (its kubelet must finish it);
- every bound pod that is not terminal is Running, with no resize in progress and no resize the
  kubelet has not decided yet (spec != allocated without a ``PodResizePending`` condition);
- every unbound pod that is not terminal or gated carries the scheduler's verdict (``PodScheduled``
  False, reason Unschedulable), and no Ready, schedulable node has room for it by resources (its
  requests against the node's allocatable less what its pods and the pods nominated to it hold, as
  the scheduler counts them): a pod left pending beside room it fits is a lost wake-up, and a run
  that ends that way fails. Pods the resource count cannot judge (affinity, topology spread, host
  ports, resource claims, a node selector or taints) are taken at the scheduler's word;
- every ReplicaSet and Deployment observed its generation and has as many pods as it wants, or,
  for a Deployment, its rollout is blocked by a pod the scheduler cannot place: the new ReplicaSet
  may not grow (maxSurge is used up) and no old one may shrink (maxUnavailable is used up), as the
  deployment controller's rolling update counts them. Kubernetes leaves such a rollout there until
  its progress deadline, and so does a run.

A Deferred or Infeasible resize is a settled state: the kubelet decided and waits for room.
"""

from __future__ import annotations

import asyncio

from cli import cluster
from controllers import deploymentutil
from machinery import resources
from machinery.api import apps_pb2, core_pb2
from machinery.client import Client

_RESIZE_PENDING = "PodResizePending"


def pod_resize_state(pod: core_pb2.Pod) -> str:
    """``done`` (spec = allocated, nothing pending), ``Deferred``, ``Infeasible``, ``InProgress``
    or ``undecided`` (spec != allocated and the kubelet has not said)."""
    if resources.is_resize_in_progress(pod):
        return "InProgress"
    status = resources.resize_status(pod)
    if status:
        return status
    allocated = {cs.name: cs for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses)}
    for c in resources.resizable_containers(pod):
        cs = allocated.get(c.name)
        if cs is None or not cs.allocated_resources:
            continue  # not started yet: nothing allocated to compare
        want = resources.container_requests(c)
        if want != resources.to_resource_list(cs.allocated_resources):
            return "undecided"
        if cs.resources.requests and want != resources.to_resource_list(cs.resources.requests):
            return "InProgress"  # allocated, not yet actuated
    return "done"


def _wanted(obj: apps_pb2.ReplicaSet | apps_pb2.Deployment) -> int:
    return obj.spec.replicas if obj.spec.HasField("replicas") else 1


def _terminal(pod: core_pb2.Pod) -> bool:
    return pod.status.phase in ("Succeeded", "Failed")


def _pod_unsettled(pod: core_pb2.Pod, nodes: set[str]) -> str:
    name = f"{pod.metadata.namespace}/{pod.metadata.name}"
    if pod.metadata.deletion_timestamp:
        if pod.spec.node_name in nodes:
            return f"pod {name} is terminating on {pod.spec.node_name}"
        return ""  # its node is gone: the pod garbage collector's, in its own time
    if _terminal(pod):
        return ""
    if pod.spec.node_name:
        if pod.spec.node_name not in nodes:
            return ""
        if pod.status.phase != "Running":
            return f"pod {name} is {pod.status.phase or 'without a phase'} on {pod.spec.node_name}"
        state = pod_resize_state(pod)
        if state in ("InProgress", "undecided"):
            return f"pod {name}'s resize is {state}"
        return ""
    if pod.spec.scheduling_gates:
        return ""
    scheduled = next((c for c in pod.status.conditions if c.type == "PodScheduled"), None)
    if scheduled is None or scheduled.status != "False" or scheduled.reason != "Unschedulable":
        return f"pod {name} is pending without the scheduler's verdict"
    return ""


def _judged_by_resources(pod: core_pb2.Pod) -> bool:
    s = pod.spec
    return not (s.HasField("affinity") or s.topology_spread_constraints or s.resource_claims or s.node_selector
                or s.tolerations and any(t.key and not t.key.startswith("node.kubernetes.io/") for t in s.tolerations)
                or any(p.host_port for c in s.containers for p in c.ports))


def _room(nodes: list[core_pb2.Node], pods: list[core_pb2.Pod]) -> dict[str, dict[str, int]]:
    """Per Ready, schedulable, untainted node: allocatable less what its pods (and pods nominated to
    it) hold, with ``pods`` the count of pod slots left."""
    room: dict[str, dict[str, int]] = {}
    for n in nodes:
        ready = any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)
        blocked = any(t.effect in ("NoSchedule", "NoExecute") for t in n.spec.taints)
        if ready and not n.spec.unschedulable and not blocked:
            room[n.metadata.name] = dict(resources.to_resource_list(n.status.allocatable))
    for p in pods:
        node = p.spec.node_name or p.status.nominated_node_name
        if node not in room or _terminal(p):
            continue
        free = room[node]
        for r, v in resources.pod_requests(p).items():
            free[r] = free.get(r, 0) - v
        free["pods"] = free.get("pods", 0) - 1
    return room


def _fits_somewhere(pod: core_pb2.Pod, room: dict[str, dict[str, int]]) -> str:
    want = resources.pod_requests(pod)
    for node, free in sorted(room.items()):
        if free.get("pods", 0) >= 1 and all(free.get(r, 0) >= v for r, v in want.items() if v):
            return node
    return ""


def _owned_by(obj: apps_pb2.ReplicaSet | core_pb2.Pod, uid: str) -> bool:
    return any(ref.controller and ref.uid == uid for ref in obj.metadata.owner_references)


def rollout_blocked(d: apps_pb2.Deployment, rss: list[apps_pb2.ReplicaSet], pods: list[core_pb2.Pod]) -> bool:
    """A rolling update that cannot move until a pending pod of its is placed: one of its pods is
    unbound, the new ReplicaSet may not grow (NewRSNewReplicas gives its size) and the old ones may
    not shrink (reconcileOldReplicaSets: all pods less minAvailable less the new ReplicaSet's
    unavailable pods is not above 0, and no old ReplicaSet has an unhealthy pod to clean up)."""
    if not deploymentutil.is_rolling_update(d):
        return False
    own = [rs for rs in rss if _owned_by(rs, d.metadata.uid)]
    new = deploymentutil.find_new_replica_set(d, own)
    if new is None:
        return False
    pending = any(not p.spec.node_name and not p.metadata.deletion_timestamp and not _terminal(p)
                  and any(_owned_by(p, rs.metadata.uid) for rs in own) for p in pods)
    if not pending or deploymentutil.new_rs_new_replicas(d, own, new) != deploymentutil.replicas(new):
        return False
    old = [rs for rs in own if rs.metadata.uid != new.metadata.uid and deploymentutil.replicas(rs) > 0]
    if not old:
        return True
    all_pods = deploymentutil.spec_total(own)
    new_unavailable = deploymentutil.replicas(new) - new.status.available_replicas
    if all_pods - deploymentutil.min_available(d) - new_unavailable <= 0:
        return True
    unhealthy = any(deploymentutil.replicas(rs) > rs.status.available_replicas for rs in old)
    available = sum(rs.status.available_replicas for rs in own)
    return not unhealthy and available - deploymentutil.min_available(d) <= 0


async def converged(client: Client, state: cluster.ClusterState) -> tuple[bool, str]:
    for p in state.processes.values():
        ok, reason = await asyncio.to_thread(cluster.health, p)
        if not ok:
            return False, f"{p.name} is not healthy: {reason}"
    node_list = await client.nodes.list()
    nodes = {n.metadata.name for n in node_list.items}
    for n in node_list.items:
        if not any(c.type == "Ready" and c.status == "True" for c in n.status.conditions):
            return False, f"node {n.metadata.name} is not Ready"
    pods = list((await client.pods.list("")).items)
    room: dict[str, dict[str, int]] | None = None
    for pod in pods:
        why = _pod_unsettled(pod, nodes)
        if why:
            return False, why
        if not pod.spec.node_name and not pod.status.nominated_node_name and not _terminal(pod) \
                and not pod.metadata.deletion_timestamp and not pod.spec.scheduling_gates \
                and _judged_by_resources(pod):
            room = room if room is not None else _room(list(node_list.items), pods)
            fits = _fits_somewhere(pod, room)
            if fits:
                return False, (f"pod {pod.metadata.namespace}/{pod.metadata.name} is pending, unschedulable, "
                               f"but fits {fits} by resources")
    rss = list((await client.replica_sets.list("")).items)
    for rs in rss:
        if rs.status.observed_generation < rs.metadata.generation or rs.status.replicas != _wanted(rs):
            return False, (f"replicaset {rs.metadata.namespace}/{rs.metadata.name} has {rs.status.replicas} of "
                           f"{_wanted(rs)} pods (observed generation {rs.status.observed_generation} of "
                           f"{rs.metadata.generation})")
    for d in (await client.deployments.list("")).items:
        if d.status.observed_generation < d.metadata.generation or (
                (d.status.updated_replicas != _wanted(d) or d.status.replicas != _wanted(d))
                and not rollout_blocked(d, rss, pods)):
            return False, (f"deployment {d.metadata.namespace}/{d.metadata.name} has {d.status.updated_replicas} "
                           f"updated of {_wanted(d)} ({d.status.replicas} in all)")
    return True, "converged"
