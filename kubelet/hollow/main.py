"""``python -m kubelet.hollow --nodes N --name-prefix hollow-node- --token-dir D --data-dir D --server S``.

Runs N kubelets on one event loop. Each is a ``Kubelet`` exactly as ``python -m kubelet`` runs it,
with three differences that make it hollow (and one default of its own, below):

- its runtime is a ``FakeRuntime`` object in this process (``InProcessRuntime``), not a separate
  process; its containers live as long as this process (killing it is a power cut of every
  hollow node: their kubelets, when started again, find their pods' containers gone and restart
  them, as after a node reboot);
- all kubelets share one gRPC connection to the apiserver, each call with its own node's token
  (``tokens/<node>.token``), so the node restriction applies to each as to a real kubelet;
- one admin port serves the process from its first moment: /metrics sums every hollow node
  (counters and gauges alike), /healthz answers ok while the process runs (nodes still starting
  included: it is alive, and a thousand nodes take a while), /readyz is ready once every node is
  registered and Ready and says how many are still starting until then, failpoints hit every node.

One default differs from a kubelet's: ``EventedPLEG`` (KEP-3386, alpha, off in Kubernetes) is on
unless ``--feature-gates`` sets it. The runtime is an object in this process whose every state
change is an event, so the generic PLEG's relist of every node every second (the largest idle cost
of a hollow process: 5,000 relists a second at 5,000 nodes) would only find what the events said;
the relist runs every 5 minutes as Kubernetes' Evented PLEG has it. ``EventedPLEG=false`` gives
the relist of Kubernetes' default kubelet back.

Node ``i`` is ``<prefix><i>`` for i in ``--first`` … ``--first + --nodes - 1``; its checkpoints go to
``<data-dir>/<node>/checkpoints``. With ``--slots S`` the process is one shard of several replicas
of a service (compose's ``--scale``, a swarm service): it claims a free slot ``s`` of 1..S
(``kubelet.hollow.shard``) and runs ``<prefix><s>-1`` … ``<prefix><s>-<nodes>``. Every other flag
is the kubelet's and applies to each node.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from pathlib import Path

from kubelet.hollow.shard import claim_slot, slot_node
from kubelet.kubelet import Kubelet
from kubelet.main import add_node_flags, config_from
from kubelet.runtime.client import InProcessRuntime
from kubelet.runtime.fake import FakeRuntime
from machinery import failpoints, featuregates, process
from machinery.admin import AdminServer
from machinery.client import Client
from machinery.files import wait_for_files
from machinery.logging import get_logger, setup_logging

log = get_logger()

# Kubelets registering at once: enough to start hundreds in seconds without a burst of lists
# and creates the apiserver would shed (429) and the kubelets retry.
START_CONCURRENCY = 25


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kubelet.hollow",
                                description="kplane hollow nodes: many kubelets and runtimes in one process")
    p.add_argument("--nodes", type=int, required=True, help="how many hollow nodes")
    p.add_argument("--name-prefix", default="hollow-node-")
    p.add_argument("--first", type=int, default=1, help="index of the first node's name")
    p.add_argument("--slots", type=int, default=0,
                   help="run as one shard of a replicated service: claim a free slot of 1..SLOTS and run "
                        "<prefix><slot>-1 .. <prefix><slot>-<nodes>")
    p.add_argument("--token-dir", required=True, help="directory of <node>.token files")
    p.add_argument("--data-dir", required=True, help="where each node's checkpoint dir goes")
    p.add_argument("--workers", type=int, default=2, help="pod workers per hollow kubelet")
    add_node_flags(p)
    a = p.parse_args(argv)
    a.feature_gates = with_hollow_defaults(a.feature_gates)
    return a


# The gates a hollow kubelet turns on unless --feature-gates sets them (the module's docstring).
HOLLOW_GATE_DEFAULTS = {"EventedPLEG": "true"}


def with_hollow_defaults(gates: str) -> str:
    """``--feature-gates`` with ``HOLLOW_GATE_DEFAULTS`` added for the gates it does not name (by
    either name); a flag that does not parse is left as given, for the kubelet's own check to refuse."""
    try:
        named = {featuregates.canonical_name(name) for name in featuregates.parse_overrides(gates)}
    except featuregates.FeatureGateError:
        return gates
    added = [f"{name}={value}" for name, value in HOLLOW_GATE_DEFAULTS.items() if name not in named]
    return ",".join(([gates] if gates.strip() else []) + added)


class HollowNode:
    def __init__(self, kubelet: Kubelet, runtime: FakeRuntime):
        self.kubelet = kubelet
        self.runtime = runtime

    @property
    def name(self) -> str:
        return self.kubelet.name


def _token(a: argparse.Namespace, name: str) -> str:
    try:
        return (Path(a.token_dir) / f"{name}.token").read_text().strip()
    except OSError as exc:
        raise SystemExit(f"no token for hollow node {name}: {exc}") from None


def node_names(a: argparse.Namespace, slot: int = 0) -> list[str]:
    if slot:
        return [slot_node(a.name_prefix, slot, i) for i in range(1, a.nodes + 1)]
    return [f"{a.name_prefix}{i}" for i in range(a.first, a.first + a.nodes)]


def build(a: argparse.Namespace, shared: Client, slot: int = 0) -> list[HollowNode]:
    """The hollow nodes, configured (SystemExit with one line on bad flags or a missing token)."""
    if a.nodes < 1 or a.workers < 1:
        raise SystemExit("--nodes and --workers must be at least 1")
    nodes = []
    for name in node_names(a, slot):
        token = _token(a, name)
        cfg = config_from(a, node_name=name, checkpoint_dir=str(Path(a.data_dir) / name / "checkpoints"))
        cfg.workers = a.workers
        runtime = FakeRuntime(name)
        nodes.append(HollowNode(Kubelet(cfg, shared.share(token), InProcessRuntime(runtime)), runtime))
    return nodes


async def _start_all(nodes: list[HollowNode]) -> None:
    gate = asyncio.Semaphore(START_CONCURRENCY)

    async def start(n: HollowNode) -> None:
        async with gate:
            await n.runtime.start()
            await n.kubelet.start()

    await asyncio.gather(*(start(n) for n in nodes))


def _not_ready(nodes: list[HollowNode]) -> str | None:
    starting = sum(1 for n in nodes if not n.kubelet.ready)
    if starting:
        return f"{starting} of {len(nodes)} hollow nodes starting"
    down = [n.name for n in nodes if not n.kubelet.node_conditions.ready]
    return f"{len(down)} hollow nodes not ready (e.g. {down[0]})" if down else None


class HollowProcess:
    """Every hollow node of this process, their shared connection and the one admin port."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        # Owns the connection; each node calls with its own token, as "kubelet" like a real one.
        self.shared = Client(a.server, "", timeout=10.0, field_manager="kubelet")
        # A shard builds its nodes once it has its slot; the tokens of every slot are checked now.
        self.nodes: list[HollowNode] = [] if a.slots else build(a, self.shared)
        if a.slots:
            for slot in range(1, a.slots + 1):
                _token(a, slot_node(a.name_prefix, slot, 1))
        nodes = self.nodes
        host, _, port = a.admin_listen.rpartition(":")
        self.admin = AdminServer(host or "127.0.0.1", int(port), health=lambda: None,
                                 ready=lambda: _not_ready(nodes) if nodes else "claiming a shard slot")

    async def start(self) -> None:
        await self.admin.start()
        if self.a.slots:
            slot = await claim_slot(lambda name: self.shared.share(_token(self.a, name)), self.a.name_prefix,
                                    self.a.slots, socket.gethostname())
            self.nodes.extend(build(self.a, self.shared, slot))
        log.info("hollow_nodes_starting", nodes=len(self.nodes), first=self.nodes[0].name, admin_port=self.admin.port)
        await _start_all(self.nodes)
        log.info("hollow_nodes_ready", nodes=len(self.nodes))

    async def stop(self) -> None:
        await asyncio.gather(*(n.kubelet.stop() for n in self.nodes), return_exceptions=True)
        await asyncio.gather(*(n.runtime.close() for n in self.nodes), return_exceptions=True)
        await self.admin.stop()
        await self.shared.close()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    setup_logging("kubelet", a.log_level)
    failpoints.arm_from_env()
    names = [n for slot in range(1, a.slots + 1) for n in node_names(a, slot)] if a.slots else node_names(a)
    wait_for_files(*(str(Path(a.token_dir) / f"{n}.token") for n in names))
    process.main("hollow-nodes", lambda: HollowProcess(a))
