"""The kubelet's Node: registration, status (capacity, allocatable, conditions, nodeInfo) and Lease.

As Kubernetes' kubelet: the Node is created at start (or adopted if it exists — a restarted
kubelet keeps its node, its spec and the taints others put on it); allocatable = capacity minus
--kube-reserved; status is written every ``status_interval`` when something changed and at least
every ``status_report_interval`` (Kubernetes' nodeStatusUpdateFrequency / nodeStatusReportFrequency);
the Lease ``kube-node-lease/<node>`` (duration 40 s, ``--node-lease-duration-seconds``) is renewed
every quarter of its duration.

Both loops wait as Kubernetes' do, ``wait.JitterUntil(f, period, 0.04, sliding=true)`` (the
kubelet's syncNodeStatus; the lease controller in k8s.io/component-helpers/apimachinery/lease):
``f`` at once, then each wait its period plus up to 4 % more at random. One thing more: the wait
after the first round is a random part of one period, so that nodes started together — hundreds
of hollow kubelets in one process — spread their renewals over the interval at once, where 4 %
jitter alone would take many rounds to part them.
The node's ``spec.podPreemptionPolicy`` is read back for KEP-5836.

While a pressure condition is True the Node carries its ``NoSchedule`` taint
(``node.kubernetes.io/memory-pressure``, ``…/disk-pressure``, ``…/pid-pressure``), removed when
the condition goes False; other taints are left alone. In Kubernetes the node lifecycle
controller does this from the conditions (TaintNodesByCondition); kplane has no such controller
yet, so the node agent does it right after writing the conditions.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from machinery import errors, resources, timeutil, wellknown
from machinery.api import coordination_pb2, core_pb2
from machinery.client import Client
from machinery.logging import get_logger
from machinery.process import cancel_and_wait, supervise
from machinery.retry import retry_update
from machinery.version import BINARY

log = get_logger()

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION_SECONDS = 40
# wait.JitterUntil's maxFactor for the kubelet's node status and lease loops.
JITTER_FACTOR = 0.04
CONDITION_TYPES = ("MemoryPressure", "DiskPressure", "PIDPressure", "Ready")
_CONDITION_TEXT = {
    "MemoryPressure": (("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                       ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available")),
    "DiskPressure": (("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                     ("KubeletHasDiskPressure", "kubelet has disk pressure")),
    "PIDPressure": (("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                    ("KubeletHasInsufficientPID", "kubelet has insufficient PID available")),
}
# The taint each pressure condition puts on the node while True (Kubernetes' TaintNodesByCondition).
PRESSURE_TAINTS = {wellknown.NODE_MEMORY_PRESSURE: wellknown.TAINT_NODE_MEMORY_PRESSURE,
                   wellknown.NODE_DISK_PRESSURE: wellknown.TAINT_NODE_DISK_PRESSURE,
                   wellknown.NODE_PID_PRESSURE: wellknown.TAINT_NODE_PID_PRESSURE}


@dataclass
class NodeConfig:
    name: str
    cpu: str = "4"
    memory: str = "8Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"
    kube_reserved: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[core_pb2.Taint] = field(default_factory=list)
    kubelet_version: str = BINARY.git_version
    runtime_version: str = "kplane-fake://0.1.0"
    address: str = "127.0.0.1"
    # KEP-5328 Node Declared Features: what the control plane must know this kubelet does
    declared_features: tuple[str, ...] = ()


def capacity(cfg: NodeConfig) -> dict[str, str]:
    return {"cpu": cfg.cpu, "memory": cfg.memory, "pods": str(cfg.pods), "ephemeral-storage": cfg.ephemeral_storage}


def allocatable(cfg: NodeConfig) -> dict[str, str]:
    """Capacity minus --kube-reserved, never below zero (Kubernetes' node allocatable)."""
    cap = resources.to_resource_list(capacity(cfg))
    reserved = resources.to_resource_list(cfg.kube_reserved)
    left = {k: max(0, v - reserved.get(k, 0)) for k, v in cap.items()}
    return resources.format_resource_list(left)


def allocatable_units(cfg: NodeConfig) -> dict[str, int]:
    return resources.to_resource_list(allocatable(cfg))


def build_node(cfg: NodeConfig) -> core_pb2.Node:
    node = core_pb2.Node(api_version="v1", kind="Node")
    node.metadata.name = cfg.name
    node.metadata.labels.update({wellknown.LABEL_HOSTNAME: cfg.name, wellknown.LABEL_OS: "linux",
                                 wellknown.LABEL_ARCH: "amd64", "beta.kubernetes.io/os": "linux",
                                 "beta.kubernetes.io/arch": "amd64"})
    node.metadata.labels.update(cfg.labels)
    node.spec.taints.extend(cfg.taints)
    return node


@dataclass
class Conditions:
    """What the kubelet reports about itself; True means the condition holds."""

    ready: bool = True
    ready_message: str = "kubelet is posting ready status"
    memory_pressure: bool = False
    disk_pressure: bool = False
    pid_pressure: bool = False


def set_status(node: core_pb2.Node, cfg: NodeConfig, c: Conditions) -> None:
    """Fill node.status from the config and conditions; transition times kept when unchanged."""
    st = node.status
    st.capacity.clear()
    st.capacity.update(capacity(cfg))
    st.allocatable.clear()
    st.allocatable.update(allocatable(cfg))
    info = st.node_info
    info.kubelet_version = cfg.kubelet_version
    info.kube_proxy_version = cfg.kubelet_version
    info.container_runtime_version = cfg.runtime_version
    info.os_image = "kplane emulated node"
    info.kernel_version = "kplane"
    info.operating_system = "linux"
    info.architecture = "amd64"
    info.machine_id = info.machine_id or cfg.name
    info.system_uuid = info.system_uuid or cfg.name
    info.boot_id = info.boot_id or cfg.name
    if list(st.declared_features) != sorted(cfg.declared_features):
        del st.declared_features[:]
        st.declared_features.extend(sorted(cfg.declared_features))
    del st.addresses[:]
    st.addresses.add(type="InternalIP", address=cfg.address)
    st.addresses.add(type="Hostname", address=cfg.name)
    now = timeutil.rfc3339()
    values = _condition_values(c)
    existing = {x.type: x for x in st.conditions}
    del st.conditions[:]
    for type_ in CONDITION_TYPES:
        status = "True" if values[type_] else "False"
        if type_ == "Ready":
            reason, message = ("KubeletReady", c.ready_message) if c.ready else ("KubeletNotReady", c.ready_message)
        else:
            reason, message = _CONDITION_TEXT[type_][1 if values[type_] else 0]
        old = existing.get(type_)
        transition = old.last_transition_time if old is not None and old.status == status else now
        st.conditions.add(type=type_, status=status, reason=reason, message=message, last_heartbeat_time=now,
                          last_transition_time=transition)


def _condition_values(c: Conditions) -> dict[str, bool]:
    return {"MemoryPressure": c.memory_pressure, "DiskPressure": c.disk_pressure, "PIDPressure": c.pid_pressure,
            "Ready": c.ready}


def pressure_taints(node: core_pb2.Node, c: Conditions) -> list[core_pb2.Taint] | None:
    """The node's taints with a NoSchedule taint per pressure condition that is True (and none for
    those that are False), other taints kept in place; None when they already are so."""
    values = _condition_values(c)
    keys = set(PRESSURE_TAINTS.values())
    want = [key for type_, key in PRESSURE_TAINTS.items() if values[type_]]
    ours = [t for t in node.spec.taints if t.key in keys and t.effect == "NoSchedule"]
    if sorted(t.key for t in ours) == sorted(want) and len(ours) == len(want):
        return None
    kept = [t for t in node.spec.taints if not (t.key in keys and t.effect == "NoSchedule")]
    return kept + [core_pb2.Taint(key=key, effect="NoSchedule") for key in want]


def _status_signature(node: core_pb2.Node) -> bytes:
    """The status without heartbeat times: what must change for a status write to matter."""
    tmp = core_pb2.NodeStatus()
    tmp.CopyFrom(node.status)
    for c in tmp.conditions:
        c.last_heartbeat_time = ""
    return tmp.SerializeToString(deterministic=True)


def loop_waits(period: float, rng: random.Random | None = None) -> Iterator[float]:
    """The waits between rounds of a loop run every ``period`` seconds: first a random part of one
    period (spreading loops started together), then ``period`` plus up to ``JITTER_FACTOR`` of it."""
    r = rng or random.Random()
    yield period * r.random()
    while True:
        yield period * (1 + JITTER_FACTOR * r.random())


class NodeAgent:
    """Keeps the kubelet's Node and Lease current. ``conditions()`` is asked at every status round."""

    def __init__(self, client: Client, cfg: NodeConfig, conditions: Callable[[], Conditions],
                 status_interval: float = 10.0, status_report_interval: float = 300.0,
                 lease_duration: int = LEASE_DURATION_SECONDS, on_node: Callable[[core_pb2.Node], None] | None = None):
        self.client = client
        self.cfg = cfg
        self.conditions = conditions
        self.status_interval = status_interval
        self.status_report_interval = status_report_interval
        self.lease_duration = lease_duration
        # Kubernetes renews at a quarter of the duration (10 s of the default 40 s).
        self.lease_interval = lease_duration / 4
        self._lease: coordination_pb2.Lease | None = None
        self.on_node = on_node
        self.node: core_pb2.Node | None = None
        self._last_report = 0.0
        # The Node (as written or read) and the inputs of the last status round: after it nothing is
        # left to write until one of them changes or a report is due (``update_status``).
        self._settled: tuple[core_pb2.Node, tuple[object, ...]] | None = None
        self._tasks: list[asyncio.Task] = []
        self._wake = asyncio.Event()

    async def register(self) -> core_pb2.Node:
        """Create the Node, or adopt the existing one (keeping its spec), and write its status."""
        while True:
            try:
                try:
                    node = await self.client.nodes.create(build_node(self.cfg))
                    log.info("node_registered", node=self.cfg.name)
                except errors.AlreadyExists:
                    node = await self.client.nodes.get(self.cfg.name)
                    log.info("node_adopted", node=self.cfg.name)
                self.node = node
                await self.update_status(force=True)
                return self.node
            except (errors.Unavailable, errors.Timeout) as exc:
                log.warning("node_register_retry", node=self.cfg.name, error=exc.message)
                await asyncio.sleep(1.0)

    async def update_status(self, force: bool = False) -> None:
        """Write the status if it changed (or is due), then the pressure taints if they changed.

        The status and taints are a function of the Node as last written or read, the config and the
        conditions: when none of them changed since the last round and no report is due, this round
        would find what that one found — nothing to write — and is skipped (a hollow process runs
        hundreds of these rounds a second, each copying and serialising the Node twice)."""
        conditions = self.conditions()
        inputs = self._inputs(conditions)
        due = time.monotonic() - self._last_report >= self.status_report_interval
        settled = self._settled
        if not force and not due and settled is not None and settled[0] is self.node and settled[1] == inputs:
            return
        await self._write_status(conditions, force)
        await self.sync_pressure_taints(conditions)
        self._settled = (self.node, inputs) if self.node is not None else None

    def _inputs(self, c: Conditions) -> tuple[object, ...]:
        """What a status round computes the status and taints from, besides the Node."""
        cfg = self.cfg
        return (c.ready, c.ready_message, c.memory_pressure, c.disk_pressure, c.pid_pressure, cfg.cpu, cfg.memory,
                cfg.pods, cfg.ephemeral_storage, tuple(cfg.kube_reserved.items()), cfg.kubelet_version,
                cfg.runtime_version, cfg.address, tuple(cfg.declared_features))

    async def sync_pressure_taints(self, conditions: Conditions) -> None:
        async def write(node: core_pb2.Node) -> None:
            taints = pressure_taints(node, conditions)
            if taints is None:
                return
            fresh = core_pb2.Node()
            fresh.CopyFrom(node)
            del fresh.spec.taints[:]
            fresh.spec.taints.extend(taints)
            self.node = await self.client.nodes.update(fresh)
            log.info("node_taints_updated", node=self.cfg.name, taints=[f"{t.key}:{t.effect}" for t in taints])
            if self.on_node is not None:
                self.on_node(self.node)

        try:
            await self._update_node(write, "taints")
        except errors.NotFound:
            return

    async def _write_status(self, conditions: Conditions, force: bool) -> None:
        async def write(node: core_pb2.Node) -> None:
            before = _status_signature(node)
            fresh = core_pb2.Node()
            fresh.CopyFrom(node)
            set_status(fresh, self.cfg, conditions)
            due = time.monotonic() - self._last_report >= self.status_report_interval
            if not force and not due and _status_signature(fresh) == before:
                return
            self.node = await self.client.nodes.update_status(fresh)
            self._last_report = time.monotonic()
            if self.on_node is not None:
                self.on_node(self.node)

        try:
            await self._update_node(write, "status")
        except errors.NotFound:
            self.node = None
            await self.register()

    async def _update_node(self, write: Callable[[core_pb2.Node], Awaitable[None]], what: str) -> None:
        """``write`` on the Node as last written or read (read now if there is none), again on a
        fresh read after each conflict; after too many, the next status pass tries again."""
        node = self.node if self.node is not None else await self._latest_node()
        try:
            await retry_update(node, self._latest_node, write)
        except errors.Conflict as exc:
            log.info("node_update_conflicts", node=self.cfg.name, what=what, error=str(exc))

    async def _latest_node(self) -> core_pb2.Node:
        self.node = await self.client.nodes.get(self.cfg.name)
        return self.node

    async def renew_lease(self) -> None:
        """Renew the Lease from the copy last written (one write per renewal, as Kubernetes' lease
        controller); read it again only when that copy is stale or missing."""
        now = timeutil.rfc3339_micro()
        lease = self._lease
        if lease is None:
            try:
                lease = await self.client.leases.get(self.cfg.name, NODE_LEASE_NAMESPACE)
            except errors.NotFound:
                self._lease = await self.client.leases.create(self._new_lease(now))
                return
        fresh = coordination_pb2.Lease()
        fresh.CopyFrom(lease)
        fresh.spec.holder_identity = self.cfg.name
        fresh.spec.lease_duration_seconds = self.lease_duration
        fresh.spec.renew_time = now
        try:
            self._lease = await self.client.leases.update(fresh)
        except (errors.Conflict, errors.NotFound):
            self._lease = None
            raise

    def _new_lease(self, now: str) -> coordination_pb2.Lease:
        lease = coordination_pb2.Lease(api_version="coordination.k8s.io/v1", kind="Lease")
        lease.metadata.name, lease.metadata.namespace = self.cfg.name, NODE_LEASE_NAMESPACE
        lease.spec.holder_identity = self.cfg.name
        lease.spec.lease_duration_seconds = self.lease_duration
        lease.spec.renew_time = now
        if self.node is not None:
            lease.metadata.owner_references.add(api_version="v1", kind="Node", name=self.node.metadata.name,
                                                uid=self.node.metadata.uid)
        return lease

    def poke(self) -> None:
        """Ask for a status round now (a condition changed)."""
        self._wake.set()

    async def run(self) -> None:
        self._tasks = [supervise(f"{self.cfg.name}/node-status", self._status_loop),
                       supervise(f"{self.cfg.name}/node-lease", self._lease_loop)]
        await asyncio.gather(*self._tasks)

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)

    async def _status_loop(self) -> None:
        waits = loop_waits(self.status_interval)
        while True:
            try:
                async with asyncio.timeout(next(waits)):
                    await self._wake.wait()
            except TimeoutError:
                pass
            self._wake.clear()
            try:
                await self.update_status()
            except errors.ApiError as exc:
                log.warning("node_status_update_failed", node=self.cfg.name, error=exc.message)

    async def _lease_loop(self) -> None:
        waits = loop_waits(self.lease_interval)
        while True:
            try:
                await self.renew_lease()
            except errors.ApiError as exc:
                log.warning("node_lease_renew_failed", node=self.cfg.name, error=exc.message)
                if isinstance(exc, errors.Conflict):
                    continue  # re-read at once; the lease is not renewed yet
            await asyncio.sleep(next(waits))
