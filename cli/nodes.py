"""``kplane node add`` / ``kplane node remove``: one more node — its runtime and kubelet — on a
running cluster, or one node fewer.

Adding checks everything before starting anything: the name, quantities, labels and taints are
validated by the apiserver itself (a dry-run create of the Node the kubelet will register), and
a node of that name must not exist. Then the node's kubelet token is added (the apiserver reads
the token file again when it sees an unknown token), two admin ports are taken, the runtime and
the kubelet are started with the same command lines ``kplane up`` gives its nodes, and the node
is recorded in cluster.json, so ``kplane down`` / ``kplane up`` bring it back. If the kubelet
does not become Ready the node is taken down again, leaving the cluster as it was.

Removing stops the kubelet and the runtime and deletes the Node and its Lease, as an operator
removing a machine does; the pods bound to it are then the pod garbage collector's
(``controllers/podgc.py``): after its quarantine it marks each Failed with a ``DisruptionTarget``
condition (reason ``DeletionByPodGC``) and deletes it. The command says how many it left to it.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import asdict
from pathlib import Path

from cli import cluster, topology
from cli.cluster import ClusterError
from kubelet.node import NODE_LEASE_NAMESPACE, NodeConfig, build_node
from machinery import errors, quantity
from machinery.api import core_pb2
from machinery.client import Client

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def parse_spec(name: str, cpu: str, memory: str, pods: int, labels: list[str], taints: list[str]) -> topology.NodeSpec:
    """A NodeSpec from the command line (ClusterError with one line on bad syntax)."""
    for flag, value in (("--cpu", cpu), ("--memory", memory)):
        try:
            if quantity.parse_quantity(value).sign() < 0:
                raise ValueError("must not be negative")
        except ValueError as exc:
            raise ClusterError(f"invalid {flag} {value!r}: {exc}") from None
    if pods < 1:
        raise ClusterError(f"invalid --pods {pods}: must be at least 1")
    label_map: dict[str, str] = {}
    for item in labels:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise ClusterError(f"invalid --label {item!r}: want KEY=VALUE")
        label_map[key] = value
    for item in taints:
        kv, colon, effect = item.rpartition(":")
        if not colon or not kv or kv.startswith("="):
            raise ClusterError(f"invalid --taint {item!r}: want KEY[=VALUE]:EFFECT")
        if effect not in TAINT_EFFECTS:
            raise ClusterError(f"invalid --taint {item!r}: effect must be one of {', '.join(TAINT_EFFECTS)}")
    return topology.NodeSpec(name=name, cpu=cpu, memory=memory, pods=pods, labels=label_map, taints=list(taints))


def _node_object(spec: topology.NodeSpec) -> core_pb2.Node:
    """The Node the kubelet will register for ``spec``."""
    cfg = NodeConfig(spec.name, cpu=spec.cpu, memory=spec.memory, pods=spec.pods, labels=dict(spec.labels))
    for item in spec.taints:
        kv, _, effect = item.rpartition(":")
        key, _, value = kv.partition("=")
        cfg.taints.append(core_pb2.Taint(key=key, value=value, effect=effect))
    return build_node(cfg)


def _client(state: cluster.ClusterState) -> Client:
    return Client(state.server, state.admin_token(), timeout=15.0)


def _require_running(state: cluster.ClusterState) -> None:
    api = state.processes.get("apiserver")
    if api is None or not cluster.alive(api.pid):
        raise ClusterError(f"the cluster in {state.data_dir} is not running (kplane up)")


async def _check_absent(state: cluster.ClusterState, spec: topology.NodeSpec) -> None:
    async with _client(state) as c:
        try:
            await c.nodes.get(spec.name)
        except errors.NotFound:
            pass
        else:
            raise ClusterError(f'node "{spec.name}" already exists')
        try:
            await c.nodes.create(_node_object(spec), dry_run=True)
        except errors.Invalid as exc:
            raise ClusterError(" ".join(exc.message.split())) from None


def add(state: cluster.ClusterState, spec: topology.NodeSpec, timeout: float = 60.0) -> list[cluster.Process]:
    """Start ``spec``'s runtime and kubelet; return them once the node is Ready."""
    _require_running(state)
    for role in ("kubelet", "runtime"):
        if f"{role}/{spec.name}" in state.processes:
            raise ClusterError(f'node "{spec.name}" is already part of this cluster')
    if spec.name.startswith(topology.HOLLOW_PREFIX):
        raise ClusterError(f'node names starting "{topology.HOLLOW_PREFIX}" are kept for hollow nodes')
    asyncio.run(_check_absent(state, spec))

    cfg = topology.ClusterConfig.from_dict(state.config)
    data_dir = Path(state.data_dir)
    cluster.write_tokens(data_dir, [spec.name])
    names = topology.node_port_names(spec.name)
    for name, port in zip(names, cluster.free_ports(len(names)), strict=True):
        cfg.ports[name] = port
    a = topology._Addresses(cfg, "local")
    # The apiservers in turn, as kplane up gives its kubelets theirs (the next after the last node's).
    apis = state.apiserver_addresses
    kubelets = sum(1 for p in state.processes.values() if p.role == "kubelet")
    comps = topology.node_components(cfg, a, spec, topology.servers_from(apis, kubelets), sys.executable)
    procs = [cluster.to_process(c, data_dir) for c in comps]
    for p in procs:
        state.processes[p.name] = p
        cluster.launch(p)
    cfg.added_nodes.append(spec)
    cfg.removed_nodes = [n for n in cfg.removed_nodes if n != spec.name]
    state.config = asdict(cfg)
    state.save()
    for p in procs:
        ok, reason = cluster.wait_healthy(p, timeout)
        if not ok:
            logs = cluster.tail(p.log)
            _take_down(state, spec.name, purge_api=True)
            raise ClusterError(f"{p.name} did not become ready within {timeout:.0f}s: {reason}\n"
                               f"--- last lines of {p.log} ---\n{logs}")
    return procs


def remove(state: cluster.ClusterState, name: str) -> int:
    """Stop the node's kubelet and runtime and deregister it; the number of pods still bound to it
    (the pod garbage collector's from now on)."""
    if f"kubelet/{name}" not in state.processes:
        shard = topology.hollow_shard_of(topology.ClusterConfig.from_dict(state.config), name)
        if shard is not None and shard.name in state.processes:
            raise ClusterError(f'"{name}" is a hollow node: hollow nodes run together in the '
                               f'{shard.name} process and come and go with it')
        nodes = sorted(p.removeprefix("kubelet/") for p in state.processes if p.startswith("kubelet/"))
        raise ClusterError(f'no node "{name}" in this cluster (nodes: {", ".join(nodes) or "none"})')
    _require_running(state)
    return _take_down(state, name, purge_api=True)


def _take_down(state: cluster.ClusterState, name: str, purge_api: bool) -> int:
    for role in ("kubelet", "runtime"):
        proc = state.processes.get(f"{role}/{name}")
        if proc is not None:
            cluster.stop(proc)
    left = asyncio.run(_deregister(state, name)) if purge_api else 0
    cfg = topology.ClusterConfig.from_dict(state.config)
    cfg.added_nodes = [n for n in cfg.added_nodes if n.name != name]
    for port_name in topology.node_port_names(name):
        cfg.ports.pop(port_name, None)
    if name not in cfg.removed_nodes and any(n.name == name for n in topology.node_specs(cfg)):
        cfg.removed_nodes.append(name)  # one of `kplane up --nodes N`: `up` must not bring it back
    for role in ("kubelet", "runtime"):
        state.processes.pop(f"{role}/{name}", None)
    state.config = asdict(cfg)
    state.save()
    shutil.rmtree(Path(state.data_dir) / "nodes" / name, ignore_errors=True)
    return left


def left_to_podgc(state: cluster.ClusterState, count: int) -> str:
    """What ``node remove`` says of the pods still bound to the node it removed."""
    running = [p for name, p in state.processes.items() if name.startswith("controller-manager")
               and cluster.alive(p.pid)]
    if running:
        return f"{count} pod(s) bound to it left to the pod garbage collector, which deletes them within a minute"
    return (f"{count} pod(s) bound to it left to the pod garbage collector; no controller-manager runs in this "
            "cluster, so they stay until one does")


async def _deregister(state: cluster.ClusterState, name: str) -> int:
    """Delete the Node and its Lease; the number of pods still bound to it."""
    async with _client(state) as c:
        for delete in (lambda: c.nodes.delete(name), lambda: c.leases.delete(name, NODE_LEASE_NAMESPACE)):
            try:
                await delete()
            except errors.NotFound:
                pass
        pods = await c.pods.list("", field_selector=f"spec.nodeName={name}")
        return len(pods.items)
