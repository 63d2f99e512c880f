"""The node lifecycle controller (Kubernetes' pkg/controller/nodelifecycle).

Node health: every ``--node-monitor-period`` (5 s) each node's last sign of life is the last time
this controller saw its Lease's ``renewTime`` or its Ready condition's ``lastHeartbeatTime``
change (its own clock: the kubelet's timestamps are never compared with it). A node silent for
``--node-monitor-grace-period`` (50 s; ``--node-startup-grace-period``, 1 m, before it ever
posted Ready) gets Ready, MemoryPressure, DiskPressure and PIDPressure ``Unknown`` (reason
``NodeStatusUnknown``, "Kubelet stopped posting node status."), the Event ``NodeNotReady``, and
its pods' Ready condition False.

Taints, as Kubernetes' taint-based evictions: Ready False gives ``node.kubernetes.io/not-ready``,
Ready Unknown ``node.kubernetes.io/unreachable``, both ``NoExecute`` (the taint eviction controller
then deletes the pods that do not tolerate it for long enough) and ``NoSchedule`` (with the
pressure conditions' and ``spec.unschedulable``'s NoSchedule taints: Kubernetes'
TaintNodesByCondition). Ready True removes them. NoExecute taints are added at most
``--node-eviction-rate`` nodes per second per zone (0.1, a burst of one), and not at all in a zone
where every node is not ready; when every zone is so ("master disruption": most likely the
control plane, not the nodes, lost contact) NoExecute taints are removed everywhere.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controllers.controller import ControllerContext, ObjectController
from machinery import errors, timeutil, wellknown
from machinery.api import coordination_pb2, core_pb2
from machinery.kinds import LEASE, NODE, POD
from machinery.logging import get_logger
from machinery.retry import retry_update

log = get_logger()

NODE_LEASE_NAMESPACE = "kube-node-lease"
TAINT_NOT_READY = wellknown.TAINT_NODE_NOT_READY
TAINT_UNREACHABLE = wellknown.TAINT_NODE_UNREACHABLE
TAINT_UNSCHEDULABLE = wellknown.TAINT_NODE_UNSCHEDULABLE
# TaintNodesByCondition: condition type -> (status that taints, taint key).
CONDITION_TAINTS = (("Ready", "False", TAINT_NOT_READY), ("Ready", "Unknown", TAINT_UNREACHABLE),
                    (wellknown.NODE_MEMORY_PRESSURE, "True", wellknown.TAINT_NODE_MEMORY_PRESSURE),
                    (wellknown.NODE_DISK_PRESSURE, "True", wellknown.TAINT_NODE_DISK_PRESSURE),
                    (wellknown.NODE_PID_PRESSURE, "True", wellknown.TAINT_NODE_PID_PRESSURE),
                    (wellknown.NODE_NETWORK_UNAVAILABLE, "True", wellknown.TAINT_NODE_NETWORK_UNAVAILABLE))
NO_SCHEDULE_KEYS = frozenset({key for _, _, key in CONDITION_TAINTS} | {TAINT_UNSCHEDULABLE})
NO_EXECUTE_KEYS = frozenset({TAINT_NOT_READY, TAINT_UNREACHABLE})
# Conditions a silent node's kubelet can no longer vouch for.
UNKNOWN_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
ZONE_LABEL, REGION_LABEL = wellknown.LABEL_TOPOLOGY_ZONE, wellknown.LABEL_TOPOLOGY_REGION
NODE_EVICTION_RATE = 0.1  # nodes per second per healthy zone (--node-eviction-rate)
UNHEALTHY_ZONE_THRESHOLD = 0.55
TAINTING_PERIOD = 0.1  # Kubernetes' NodeEvictionPeriod: how often the tainting queues are worked


@dataclass
class _Health:
    """What this controller saw of a node, on its own monotonic clock."""

    probe: float  # when it last saw a sign of life
    heartbeat: str  # the Ready condition's lastHeartbeatTime then
    lease_renew: str  # the Lease's renewTime then


def _condition(node: core_pb2.Node, type_: str) -> core_pb2.NodeCondition | None:
    return next((c for c in node.status.conditions if c.type == type_), None)


def _ready(node: core_pb2.Node) -> str:
    c = _condition(node, "Ready")
    return c.status if c is not None else "Unknown"


def zone_of(node: core_pb2.Node) -> str:
    """Kubernetes' GetZoneKey: region and zone, or "" when the node has neither label."""
    region, zone = node.metadata.labels.get(REGION_LABEL, ""), node.metadata.labels.get(ZONE_LABEL, "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def zone_state(ready_states: list[str]) -> str:
    """Kubernetes' ComputeZoneState: Normal, PartialDisruption or FullDisruption."""
    not_ready = sum(1 for s in ready_states if s != "True")
    ready = len(ready_states) - not_ready
    if ready == 0 and not_ready > 0:
        return "FullDisruption"
    if not_ready > 2 and not_ready / len(ready_states) >= UNHEALTHY_ZONE_THRESHOLD:
        return "PartialDisruption"
    return "Normal"


def no_schedule_taints(node: core_pb2.Node) -> list[core_pb2.Taint]:
    """The node's taints with the NoSchedule taints its conditions and spec.unschedulable call for."""
    want = [key for type_, status, key in CONDITION_TAINTS
            if (c := _condition(node, type_)) is not None and c.status == status]
    if node.spec.unschedulable:
        want.append(TAINT_UNSCHEDULABLE)
    kept = [t for t in node.spec.taints if not (t.effect == "NoSchedule" and t.key in NO_SCHEDULE_KEYS)]
    had = {t.key: t for t in node.spec.taints if t.effect == "NoSchedule" and t.key in NO_SCHEDULE_KEYS}
    return kept + [had.get(key) or core_pb2.Taint(key=key, effect="NoSchedule") for key in want]


def no_execute_taints(node: core_pb2.Node, add: str | None) -> list[core_pb2.Taint]:
    """The node's taints with ``add`` as its one NoExecute readiness taint (none if ``add`` is None)."""
    kept = [t for t in node.spec.taints if not (t.effect == "NoExecute" and t.key in NO_EXECUTE_KEYS)]
    if add is None:
        return kept
    old = next((t for t in node.spec.taints if t.effect == "NoExecute" and t.key == add), None)
    return kept + [old or core_pb2.Taint(key=add, effect="NoExecute", time_added=timeutil.rfc3339())]


def _same_taints(a: list[core_pb2.Taint], b: list[core_pb2.Taint]) -> bool:
    return sorted((t.key, t.value, t.effect) for t in a) == sorted((t.key, t.value, t.effect) for t in b)


class NodeLifecycleController(ObjectController):
    name = "nodelifecycle"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client = ctx.client
        self._nodes = ctx.informers.informer(NODE)
        self._leases = ctx.informers.informer(LEASE)
        self._pods = ctx.informers.informer(POD)
        self._recorder = ctx.recorder("node-controller")
        self._grace = ctx.options.node_monitor_grace_period
        self._startup_grace = ctx.options.node_startup_grace_period
        self._period = ctx.options.node_monitor_period
        self._health: dict[str, _Health] = {}
        self._to_taint: dict[str, list[str]] = {}  # zone -> nodes waiting for a NoExecute taint
        self._tokens: dict[str, tuple[float, float]] = {}  # zone -> (tokens, when counted)
        self._zone_states: dict[str, str] = {}
        self._nodes.add_handler(self.enqueue, lambda old, new: self._node_changed(old, new))

    def _node_changed(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        if old.status.conditions != new.status.conditions or old.spec.unschedulable != new.spec.unschedulable or \
                old.spec.taints != new.spec.taints:
            self.enqueue(new)

    def background(self) -> list[tuple[str, Any]]:
        return [("monitor-node-health", self._monitor_loop), ("no-execute-tainting", self._tainting_loop)]

    # ------------------------------------------------------------ NoSchedule taints (per node key)

    async def sync(self, key: str) -> None:
        """Kubernetes' doNoScheduleTaintingPass for one node."""
        node = self._nodes.get(key)
        if node is None:
            self._health.pop(key, None)
            return
        want = no_schedule_taints(node)
        if not _same_taints(list(node.spec.taints), want):
            await self._set_taints(node.metadata.name, no_schedule_taints)

    # ------------------------------------------------------------ node health

    async def _monitor_loop(self) -> None:
        while True:
            await self.monitor_node_health()
            await asyncio.sleep(self._period)

    async def monitor_node_health(self) -> None:
        """One pass of Kubernetes' monitorNodeHealth over every node."""
        nodes = self._nodes.list_all()
        by_zone: dict[str, list[str]] = {}
        for node in nodes:
            ready = await self._update_health(node)
            by_zone.setdefault(zone_of(node), []).append(ready)
            await self._taint_for_readiness(self._nodes.get(node.metadata.name) or node, ready)
        await self._handle_disruption({zone: zone_state(states) for zone, states in by_zone.items()}, nodes)

    async def _update_health(self, node: core_pb2.Node) -> str:
        """Kubernetes' tryUpdateNodeHealth: note a sign of life, or mark a silent node Unknown.
        Returns the node's Ready status after it."""
        name, now = node.metadata.name, time.monotonic()
        ready = _condition(node, "Ready")
        heartbeat = ready.last_heartbeat_time if ready is not None else ""
        lease = self._leases.get(name, NODE_LEASE_NAMESPACE)
        renew = lease.spec.renew_time if isinstance(lease, coordination_pb2.Lease) else ""
        h = self._health.get(name)
        if h is None:
            h = self._health[name] = _Health(now, heartbeat, renew)
        elif h.heartbeat != heartbeat or h.lease_renew != renew:
            h.probe, h.heartbeat, h.lease_renew = now, heartbeat, renew
        grace = self._grace if ready is not None else self._startup_grace
        if now - h.probe <= grace:
            return ready.status if ready is not None else "Unknown"
        if ready is not None and all((c := _condition(node, t)) is None or c.status == "Unknown"
                                     for t in UNKNOWN_CONDITIONS):
            return "Unknown"  # already marked
        log.info("node_not_posting_status", node=name, silent_s=round(now - h.probe, 1), grace_s=grace)
        await self._mark_unknown(node)
        return "Unknown"

    async def _mark_unknown(self, node: core_pb2.Node) -> None:
        now = timeutil.rfc3339()
        was_ready = _ready(node) == "True"
        name = node.metadata.name

        async def write(node: core_pb2.Node) -> core_pb2.Node:
            fresh = core_pb2.Node()
            fresh.CopyFrom(node)
            have = {c.type: c for c in fresh.status.conditions}
            for type_ in UNKNOWN_CONDITIONS:
                c = have.get(type_)
                if c is None:
                    fresh.status.conditions.add(type=type_, status="Unknown", reason="NodeStatusNeverUpdated",
                                                message="Kubelet never posted node status.",
                                                last_heartbeat_time=node.metadata.creation_timestamp,
                                                last_transition_time=now)
                elif c.status != "Unknown":
                    c.status, c.reason = "Unknown", "NodeStatusUnknown"
                    c.message = "Kubelet stopped posting node status."
                    c.last_transition_time = now
            return await self._client.nodes.update_status(fresh)

        try:
            updated = await retry_update(node, lambda: self._client.nodes.get(name), write)
        except errors.NotFound:
            return
        except errors.Conflict as exc:
            log.warning("node_status_update_conflicts", node=name, error=str(exc))  # next monitor pass retries
            return
        if was_ready:
            self._recorder.event(updated, "Normal", "NodeNotReady", f"Node {name} status is now: NodeNotReady")
            await self._mark_pods_not_ready(name)

    async def _mark_pods_not_ready(self, node: str) -> None:
        """Kubernetes' MarkPodsNotReady: the pods of a node nobody hears from are not Ready."""
        for pod in self._pods.list_all():
            if pod.spec.node_name != node or pod.status.phase in ("Succeeded", "Failed"):
                continue
            fresh = core_pb2.Pod()
            fresh.CopyFrom(pod)
            changed = False
            for c in fresh.status.conditions:
                if c.type == "Ready" and c.status != "False":
                    c.status, c.last_transition_time = "False", timeutil.rfc3339()
                    changed = True
            if not changed:
                continue
            try:
                await self._client.pods.update_status(fresh)
            except (errors.Conflict, errors.NotFound) as exc:
                log.info("mark_pod_not_ready_skipped", pod=f"{pod.metadata.namespace}/{pod.metadata.name}",
                         error=str(exc))

    # ------------------------------------------------------------ NoExecute taints (rate limited per zone)

    async def _taint_for_readiness(self, node: core_pb2.Node, ready: str) -> None:
        """Kubernetes' processTaintBaseEviction."""
        name, zone = node.metadata.name, zone_of(node)
        waiting = self._to_taint.setdefault(zone, [])
        keys = {t.key for t in node.spec.taints if t.effect == "NoExecute"}
        if ready == "True":
            if name in waiting:
                waiting.remove(name)
            if keys & NO_EXECUTE_KEYS:
                await self._set_taints(name, lambda n: no_execute_taints(n, None))
            return
        want = TAINT_NOT_READY if ready == "False" else TAINT_UNREACHABLE
        other = TAINT_UNREACHABLE if want == TAINT_NOT_READY else TAINT_NOT_READY
        if other in keys:  # the node went from one to the other: swap at once
            await self._set_taints(name, functools.partial(no_execute_taints, add=want))
        elif want not in keys and name not in waiting:
            waiting.append(name)

    async def _tainting_loop(self) -> None:
        while True:
            await self.no_execute_tainting_pass()
            await asyncio.sleep(TAINTING_PERIOD)

    async def no_execute_tainting_pass(self) -> None:
        """Kubernetes' doNoExecuteTaintingPass: take nodes off each zone's queue as its rate allows."""
        for zone, waiting in self._to_taint.items():
            while waiting and self._take_token(zone):
                name = waiting.pop(0)
                node = self._nodes.get(name)
                if node is None:
                    continue
                ready = _ready(node)
                if ready == "True":
                    continue  # ready again meanwhile
                want = TAINT_NOT_READY if ready == "False" else TAINT_UNREACHABLE
                await self._set_taints(name, functools.partial(no_execute_taints, add=want))
                log.info("node_tainted", node=name, taint=f"{want}:NoExecute", zone=zone or "(none)")

    def _take_token(self, zone: str) -> bool:
        rate = self._zone_rate(zone)
        if rate <= 0:
            return False
        now = time.monotonic()
        tokens, at = self._tokens.get(zone, (1.0, now))
        tokens = min(1.0, tokens + (now - at) * rate)
        if tokens < 1.0:
            self._tokens[zone] = (tokens, now)
            return False
        self._tokens[zone] = (tokens - 1.0, now)
        return True

    def _zone_rate(self, zone: str) -> float:
        state = self._zone_states.get(zone, "Normal")
        if state == "FullDisruption":
            return 0.0
        if state == "PartialDisruption":
            return 0.0  # --secondary-node-eviction-rate applies to clusters over 50 nodes only
        return NODE_EVICTION_RATE

    async def _handle_disruption(self, states: dict[str, str], nodes: list[core_pb2.Node]) -> None:
        """Kubernetes' handleDisruption: every zone fully disrupted is a control-plane problem."""
        all_disrupted = bool(states) and all(s == "FullDisruption" for s in states.values())
        was_all = bool(self._zone_states) and all(s == "FullDisruption" for s in self._zone_states.values())
        if all_disrupted and not was_all:
            log.warning("master_disruption_mode", zones=len(states),
                        message="Controller detected that all Nodes are not-Ready. Entering master disruption mode.")
        if all_disrupted:
            self._to_taint.clear()
            for node in nodes:
                if any(t.effect == "NoExecute" and t.key in NO_EXECUTE_KEYS for t in node.spec.taints):
                    await self._set_taints(node.metadata.name, lambda n: no_execute_taints(n, None))
        elif was_all:
            log.info("master_disruption_mode_exited", message="Controller detected that some Nodes are Ready. "
                     "Exiting master disruption mode.")
        for zone, state in states.items():
            if self._zone_states.get(zone) != state:
                log.info("zone_state_changed", zone=zone or "(none)", state=state)
        self._zone_states = states

    # ------------------------------------------------------------ writes

    async def _set_taints(self, name: str, taints_for: Callable[[core_pb2.Node], list[core_pb2.Taint]]) -> None:
        """Write the taints ``taints_for(node)`` gives, from the freshest node, retrying on conflict."""
        node = self._nodes.get(name)
        if node is None:
            return

        async def write(node: core_pb2.Node) -> None:
            want = taints_for(node)
            if _same_taints(list(node.spec.taints), want):
                return
            fresh = core_pb2.Node()
            fresh.CopyFrom(node)
            del fresh.spec.taints[:]
            fresh.spec.taints.extend(want)
            await self._client.nodes.update(fresh)
            log.info("node_taints_updated", node=name, taints=[f"{t.key}:{t.effect}" for t in want])

        try:
            await retry_update(node, lambda: self._client.nodes.get(name), write)
        except errors.NotFound:
            return
        except errors.Conflict as exc:
            log.warning("node_taints_update_conflicts", node=name, error=str(exc))  # the next pass retries
