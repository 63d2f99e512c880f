"""NodePorts: a pod's host ports must be free on the node.

kube-scheduler's nodeports plugin.

- ``host_ports``: a pod's host ports, as (hostIP, protocol, hostPort) triples.
- ``HostPortInfo``: the host ports in use on a node, and which triples conflict with them.
- ``NodePorts.pre_filter`` / ``filter``: the pod's host ports against those the node's pods use.
- ``NodePorts.events_to_register``: what makes a pod this plugin rejected schedulable.
"""

from __future__ import annotations

from typing import Any, Iterable

from machinery.api import core_pb2
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.plugin_args import no_args
from scheduler.framework.types import (
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    PreFilterResult,
    QueueingHint,
    Status,
)

NAME = "NodePorts"
_STATE_KEY = "PreFilter" + NAME
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"
DEFAULT_PROTOCOL = "TCP"

# (hostIP, protocol, hostPort), sanitized: "" -> 0.0.0.0 and "" -> TCP.
HostPort = tuple[str, str, int]


def host_ports(pod: core_pb2.Pod) -> tuple[HostPort, ...]:
    """Kubernetes' GetHostPorts: the host ports of the pod's sidecars and containers.

    A pod's host ports are the ``hostPort`` > 0 entries of its containers' ``ports`` and of its
    restartable init containers (sidecars, which run as long as the pod); each is a (hostIP,
    protocol, hostPort) triple, an empty hostIP meaning ``0.0.0.0`` and an empty protocol ``TCP``
    (kube-scheduler's HostPortInfo).
    """
    out: list[HostPort] = []
    spec = pod.spec
    for c in spec.init_containers:
        if c.restart_policy != "Always":
            continue  # a plain init container has exited before the pod runs
        for p in c.ports:
            if p.host_port > 0:
                out.append((p.host_ip or DEFAULT_BIND_ALL_HOST_IP, p.protocol or DEFAULT_PROTOCOL, p.host_port))
    for c in spec.containers:
        for p in c.ports:
            if p.host_port > 0:
                out.append((p.host_ip or DEFAULT_BIND_ALL_HOST_IP, p.protocol or DEFAULT_PROTOCOL, p.host_port))
    return tuple(out)


class HostPortInfo:
    """The host ports in use on a node: per IP, the set of (protocol, port) (Kubernetes' HostPortInfo)."""

    __slots__ = ("by_ip",)

    def __init__(self, ports: Iterable[HostPort] = ()):
        self.by_ip: dict[str, set[tuple[str, int]]] = {}
        for p in ports:
            self.add(p)

    def add(self, port: HostPort) -> None:
        ip, protocol, number = port
        if number <= 0:
            return
        self.by_ip.setdefault(ip, set()).add((protocol, number))

    def __len__(self) -> int:
        return sum(len(s) for s in self.by_ip.values())

    def conflicts(self, port: HostPort) -> bool:
        """Whether ``port`` collides with one in use: same protocol and port, and the same IP or
        0.0.0.0 on either side (bind-all overlaps every address)."""
        ip, protocol, number = port
        if number <= 0:
            return False
        pp = (protocol, number)
        if ip == DEFAULT_BIND_ALL_HOST_IP:
            return any(pp in used for used in self.by_ip.values())
        for key in (DEFAULT_BIND_ALL_HOST_IP, ip):
            used = self.by_ip.get(key)
            if used is not None and pp in used:
                return True
        return False


def fits_ports(wanted: Iterable[HostPort], in_use: HostPortInfo) -> bool:
    for p in wanted:
        if in_use.conflicts(p):
            return False
    return True


def used_ports(ni: NodeInfo) -> HostPortInfo:
    """The host ports the node's pods hold (what kube-scheduler's NodeInfo.UsedPorts holds)."""
    used = HostPortInfo()
    for pi in ni.pods:
        for p in host_ports(pi.pod):
            used.add(p)
    return used


class NodePorts:
    name = NAME

    def __init__(self, features: Features = Features()) -> None:
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize  # KEP-5836: Skip them
        # node name -> (NodeInfo generation, its used ports); rebuilt when the generation moves.
        self._used: dict[str, tuple[int, HostPortInfo]] = {}

    def _used_ports(self, ni: NodeInfo) -> HostPortInfo:
        """The host ports the node's pods use. kube-scheduler keeps each node's used ports in its
        NodeInfo; kplane's NodeInfo does not, so this plugin derives them from the node's pods and
        keeps them per node until the NodeInfo's ``generation`` changes (the ports change only when
        the node's pods do)."""
        name = ni.name
        cached = self._used.get(name)
        if cached is not None and cached[0] == ni.generation:
            return cached[1]
        used = used_ports(ni)
        self._used[name] = (ni.generation, used)
        return used

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[PreFilterResult | None, Status | None]:
        """Collect the pod's host ports into the cycle state, and Skip the plugin's Filter when there
        are none (most pods)."""
        if skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        wanted = host_ports(pod)
        if not wanted:
            return None, Status(Code.SKIP)  # no host port: nothing to check
        state.write(_STATE_KEY, wanted)
        if len(self._used) > 2 * len(nodes) + 16:
            self._used.clear()  # forget nodes that left the cluster
        return None, None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        """A node where one of the pod's host ports conflicts with a port its pods already use is
        Unschedulable ``node(s) didn't have free ports for the requested pod ports`` — Unschedulable,
        not Unresolvable: preempting the pod holding the port frees it."""
        wanted = state.get(_STATE_KEY)
        if wanted is None:  # PreFilter did not run
            wanted = host_ports(pod)
            if not wanted:
                return None
        if not ni.pods:
            return None
        if fits_ports(wanted, self._used_ports(ni)):
            return None
        return Status(Code.UNSCHEDULABLE, ERR_REASON)

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """What makes a pod this plugin rejected schedulable (its QueueingHints): a pod deleted that
        was bound or nominated to a node and held a host port conflicting with the pod's (a pod's
        ports cannot be updated, so only deletions free them: ``is_schedulable_after_pod_deleted``);
        a node added (no hint: always retried, as in kube-scheduler)."""
        return [
            # A deleted pod frees its host ports (ports are immutable, so updates never do). Pod, not
            # only AssignedPod: a pod nominated to a node holds its ports there too.
            ClusterEventWithHint(ClusterEvent(POD, ActionType.DELETE), self.is_schedulable_after_pod_deleted),
            # A new node has every port free; no hint, always retried.
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD)),
        ]

    def is_schedulable_after_pod_deleted(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        deleted = old
        if deleted is None:
            return QueueingHint.QUEUE_SKIP
        if not deleted.spec.node_name and not deleted.status.nominated_node_name:
            return QueueingHint.QUEUE_SKIP  # it held no ports on any node
        freed = host_ports(deleted)
        if not freed:
            return QueueingHint.QUEUE_SKIP
        if fits_ports(host_ports(pod), HostPortInfo(freed)):
            return QueueingHint.QUEUE_SKIP  # no port in common: its deletion frees nothing the pod wants
        return QueueingHint.QUEUE


def new(args: Any, handle: Any) -> NodePorts:
    """NodePorts takes no args: kube-scheduler has no NodePortsArgs, and any given are an error."""
    no_args(NAME, args)
    return NodePorts(features_of(handle))
