"""``kplane record``: the user-side operations of a history as a schedule that ``kplane run``
replays — KWOK's ``kwokctl snapshot record``, done from the event log (docs/chaos.md, "Record,
replay, diff").

What users did is told apart from what the components did by the objects themselves: who owns
their fields (``manifest.py``), their owner references (a controller's objects are made again by
the controller), a pod's DisruptionTarget condition (why it is going) and the fault Events of
``marks.py``. Each step gets the wall-clock time the objects show for it (creationTimestamp,
deletionTimestamp less the grace period, the user's managedFields time, the condition's or the
Event's time), and its ``after`` is the time since the step before, so a replay keeps the pacing
(to the second: Kubernetes' times have no finer grain).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from google.protobuf.message import Message

from cli.chaos import manifest, marks
from cli.chaos.schedule import Schedule, Step
from cli.check.framework import Entry, World
from machinery import podconditions, timeutil, wellknown
from machinery.api import core_pb2, resource_pb2
from machinery.kinds import lookup, object_meta

# Kinds users create: Nodes, Events, Leases and ResourceSlices are the components'.
USER_KINDS: Final = frozenset({"Pod", "Deployment", "ReplicaSet", "PriorityClass", "PodDisruptionBudget",
                               "ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "Namespace",
                               "ResourceQuota", "LimitRange"})
BUILTIN_NAMESPACES: Final = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
# `kplane up --dra-devices K` creates it; a replay's cluster does the same.
CLUSTER_DEVICE_CLASS: Final = "gpu.kplane.dev"
# DisruptionTarget reasons of the components that end pods (they will do it again in a replay).
COMPONENT_DISRUPTIONS: Final = frozenset({podconditions.PREEMPTION_BY_SCHEDULER,
                                          podconditions.DELETION_BY_TAINT_MANAGER,
                                          podconditions.DELETION_BY_POD_GC, podconditions.TERMINATION_BY_KUBELET})
# Labels every kubelet gives its Node; a node-add step gives the others.
_KUBELET_LABELS: Final = frozenset({wellknown.LABEL_HOSTNAME, wellknown.LABEL_OS, wellknown.LABEL_ARCH,
                                    "beta.kubernetes.io/os", "beta.kubernetes.io/arch"})
_UP_NODE: Final = re.compile(r"node-(\d+)")  # the names `kplane up --nodes N` gives
_DEFAULT_NODE_PODS: Final = 110


class NothingToRecord(ValueError):
    """The history holds no user operation in the window asked for."""


@dataclass(frozen=True)
class _Timed:
    at: datetime | None  # None: when the step before was
    step: Step


def record(entries: Iterable[Entry], since: int = 0, until: int | None = None) -> Schedule:
    """The schedule of the user operations and faults at revisions ``since``..``until`` (both
    included, as ``kplane history --since`` counts); the entries before ``since`` only tell what
    the objects were. Raises NothingToRecord when there is none."""
    r = _Recorder(since, until)
    last = 0
    for e in entries:
        r.observe(e)
        last = max(last, e.rev)
    if not r.steps:
        upto = f" up to {until}" if until is not None else ""
        raise NothingToRecord(f"nothing to record since revision {since}{upto} (history up to {last}): "
                              "no user operation or fault mark")
    return Schedule(_paced(r.steps), cluster=r.cluster())


def _paced(timed: list[_Timed]) -> list[Step]:
    """The steps with ``after`` set from their times (never going back: a step without a time,
    or one earlier than the step before, follows at once)."""
    out: list[Step] = []
    prev: datetime | None = None
    for t in timed:
        after = 0.0
        if t.at is not None:
            if prev is not None and t.at > prev:
                after = (t.at - prev).total_seconds()
            prev = t.at if prev is None or t.at > prev else prev
        out.append(Step(t.step.op, t.step.args, after if out else 0.0))
    return out


def _time(text: str) -> datetime | None:
    try:
        return timeutil.parse(text)
    except ValueError:
        return None


def _ns_args(namespace: str) -> dict[str, str]:
    return {"namespace": namespace} if namespace and namespace != "default" else {}


def _controlled(obj: Message) -> bool:
    return any(ref.controller for ref in object_meta(obj).owner_references)


class _Recorder:
    def __init__(self, since: int, until: int | None):
        self.since, self.until = since, until
        self.world = World()  # every object as of the entry being read
        self.users: set[str] = set()  # uids of the objects users created
        self.deleting: set[str] = set()  # uids whose deletion is accounted for
        self.steps: list[_Timed] = []
        self.clock: datetime | None = None  # the latest time any revision showed
        self.cluster_nodes: dict[str, core_pb2.Node] = {}  # kplane up's, as last seen
        # The node-add steps' arguments by node: the step holds the dict, filled in place once
        # the kubelet reports the capacity.
        self.added_nodes: dict[str, dict[str, Any]] = {}
        self.dra_devices = 0

    def observe(self, e: Entry) -> None:
        prev = self.world.apply(e)
        self._tick(e.obj)
        live = e.rev >= self.since and (self.until is None or e.rev <= self.until)
        if e.kind == "Event":
            ev = e.event
            if live and e.type == "ADDED" and ev is not None and marks.is_fault(ev):
                self._fault(ev)
        elif e.kind == "Node":
            node = e.node
            if node is not None:
                self._node(e.type, prev if isinstance(prev, core_pb2.Node) else None, node, live)
        elif e.kind == "ResourceSlice" and isinstance(e.obj, resource_pb2.ResourceSlice) and not self.dra_devices:
            self.dra_devices = len(e.obj.spec.devices)
        elif e.kind in USER_KINDS:
            self._object(e, prev, live)

    # ------------------------------------------------------------ time

    def _tick(self, obj: Message) -> None:
        meta = object_meta(obj)
        times = [meta.creation_timestamp, *(f.time for f in meta.managed_fields)]
        if isinstance(obj, core_pb2.Event):
            times += [obj.first_timestamp, obj.last_timestamp]
        for text in times:
            t = _time(text)
            if t is not None and (self.clock is None or t > self.clock):
                self.clock = t

    def _add(self, at: datetime | str | None, op: str, args: Any) -> None:
        when = _time(at) if isinstance(at, str) else at
        self.steps.append(_Timed(when if when is not None else self.clock, Step(op, args)))

    # ------------------------------------------------------------ faults and nodes

    def _fault(self, ev: core_pb2.Event) -> None:
        at = ev.first_timestamp or ev.metadata.creation_timestamp
        parsed = marks.parse_fault_message(ev)
        if parsed is None:  # an Event of another kplane: the component, as fault_component reads it
            action = marks.fault_action(ev)
            if action in ("failpoint", "delay-watch"):
                return  # its arguments are not in the message
            self._add(at, action, marks.fault_component(ev))
            return
        action, args = parsed
        if action == "failpoint":
            self._add(at, action, dict(args))
        elif action == "delay-watch":
            try:
                self._add(at, action, {"component": args["component"], "ms": int(args["ms"])})
            except ValueError:
                return
        else:
            self._add(at, action, args["component"])

    def _node(self, type_: str, prev: core_pb2.Node | None, node: core_pb2.Node, live: bool) -> None:
        name = node.metadata.name
        if name.startswith("hollow-"):
            return  # hollow nodes come and go with their one process
        if type_ == "ADDED":
            if not live or not self.steps and _UP_NODE.fullmatch(name):
                self.cluster_nodes[name] = node
            elif live:
                self.added_nodes[name] = _node_add_args(node)
                self._add(node.metadata.creation_timestamp, "node-add", self.added_nodes[name])
            return
        if type_ == "DELETED":
            self.cluster_nodes.pop(name, None)
            self.added_nodes.pop(name, None)
            if live:
                self._add(None, "node-remove", name)
            return
        # The kubelet reports the capacity after it registered the Node.
        if name in self.cluster_nodes:
            self.cluster_nodes[name] = node
        if name in self.added_nodes and "cpu" not in self.added_nodes[name]:
            self.added_nodes[name].update(_node_add_args(node))
        if prev is not None and live and prev.spec.unschedulable != node.spec.unschedulable:
            self._add(manifest.latest_user_time(node) or None, "cordon" if node.spec.unschedulable else "uncordon",
                      name)

    def cluster(self) -> dict[str, Any]:
        """``kplane up``'s settings for the nodes it made (node-1 ... node-N), when they agree."""
        up = [n for name, n in self.cluster_nodes.items() if _UP_NODE.fullmatch(name)]
        if not up:
            return {}
        out: dict[str, Any] = {"nodes": len(up)}
        for key, resource in (("node_cpu", "cpu"), ("node_memory", "memory")):
            values = {n.status.capacity.get(resource, "") for n in up}
            if len(values) == 1 and "" not in values:
                out[key] = values.pop()
        pods = {n.status.capacity.get("pods", "") for n in up}
        if len(pods) == 1 and (p := pods.pop()).isdigit() and int(p) != _DEFAULT_NODE_PODS:
            out["node_pods"] = int(p)
        if self.dra_devices:
            out["dra_devices"] = self.dra_devices
        return out

    # ------------------------------------------------------------ user objects

    def _is_users(self, e: Entry) -> bool:
        """Whether a user made the object: judged once, when it is first seen."""
        meta = object_meta(e.obj)
        if _controlled(e.obj):
            return False
        if e.kind == "Namespace" and e.name in BUILTIN_NAMESPACES:
            return False
        if e.kind == "DeviceClass" and e.name == CLUSTER_DEVICE_CLASS:
            return False
        # No managedFields: the apiserver's own (the namespaces and system- PriorityClasses it
        # bootstraps).
        return any(manifest.is_user(f.manager) for f in meta.managed_fields if f.subresource != "status")

    def _object(self, e: Entry, prev: Message | None, live: bool) -> None:
        uid = object_meta(e.obj).uid
        if e.type == "ADDED" or prev is None:
            if not self._is_users(e):
                return
            self.users.add(uid)
            if e.type == "ADDED" and live:
                self._add(object_meta(e.obj).creation_timestamp, "apply", manifest.manifest(lookup(e.kind), e.obj))
            if e.type == "ADDED":
                return
        if uid not in self.users:
            return
        if e.type == "DELETED":
            self.users.discard(uid)
            if uid not in self.deleting and live and not self._going_by_component(e):
                self._add(None, "delete", self._delete_args(e, immediate=True))
            self.deleting.discard(uid)
            return
        assert prev is not None
        if uid in self.deleting:
            return
        pod, old_pod = e.pod, prev if isinstance(prev, core_pb2.Pod) else None
        if pod is not None and old_pod is not None and _evicted(pod) and not _evicted(old_pod):
            self.deleting.add(uid)
            if live and not _controlled(pod):
                cond = podconditions.get_condition(pod.status, podconditions.DISRUPTION_TARGET)
                self._add(cond.last_transition_time if cond else None, "evict",
                          {"pod": e.name, **_ns_args(e.namespace)})
            return
        meta = object_meta(e.obj)
        if meta.deletion_timestamp and not object_meta(prev).deletion_timestamp:
            self.deleting.add(uid)
            if live and not self._going_by_component(e):
                self._add(_deletion_start(meta), "delete", self._delete_args(e, immediate=False))
            return
        if live:
            self._changed(e, prev)

    def _going_by_component(self, e: Entry) -> bool:
        """Whether a component ends it: a pod the scheduler, the taint manager, the pod GC or the
        kubelet marked, or anything in a namespace being deleted."""
        pod = e.pod
        if pod is not None:
            cond = podconditions.get_condition(pod.status, podconditions.DISRUPTION_TARGET)
            if cond is not None and cond.status == "True" and (
                    cond.reason in COMPONENT_DISRUPTIONS or cond.reason == podconditions.EVICTION_BY_EVICTION_API):
                return True
        ns = self.world.objects.get(("Namespace", "", e.namespace))
        return ns is not None and bool(object_meta(ns).deletion_timestamp)

    def _delete_args(self, e: Entry, immediate: bool) -> dict[str, Any]:
        args: dict[str, Any] = {"kind": e.kind, "name": e.name, **_ns_args(e.namespace)}
        pod = e.pod
        if pod is not None:
            meta = pod.metadata
            if not immediate and meta.HasField("deletion_grace_period_seconds"):
                args["grace_period"] = int(meta.deletion_grace_period_seconds)
            elif immediate and pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
                args["grace_period"] = 0  # a bound, running pod goes at once only when asked to
        return args

    def _changed(self, e: Entry, prev: Message) -> None:
        """A user object changed: a pod resized, a Deployment or ReplicaSet scaled, or anything
        else the users own changed (applied again)."""
        kind = lookup(e.kind)
        at = manifest.latest_user_time(e.obj) or None
        pod, old_pod = e.pod, prev if isinstance(prev, core_pb2.Pod) else None
        if pod is not None and old_pod is not None:
            for args in _resizes(old_pod, pod):
                self._add(manifest.latest_user_time(pod, ("resize",)) or at, "resize",
                          {"pod": e.name, **_ns_args(e.namespace), **args})
        fields_new, fields_old = manifest.user_fields(e.obj), manifest.user_fields(prev)
        before, after = manifest.manifest(kind, prev, fields_new), manifest.manifest(kind, e.obj, fields_new)
        if pod is not None:
            before, after = _without_resources(before), _without_resources(after)
        changed = before != after
        if not changed and fields_old != fields_new:
            old_view, new_view = manifest.manifest(kind, prev, fields_old), manifest.manifest(kind, e.obj, fields_old)
            changed = (_without_resources(old_view) != _without_resources(new_view)) if pod is not None \
                else old_view != new_view
        if not changed:
            return
        if e.kind in ("Deployment", "ReplicaSet"):
            b_spec, a_spec = dict(before.get("spec", {})), dict(after.get("spec", {}))
            b_replicas, a_replicas = b_spec.pop("replicas", None), a_spec.pop("replicas", None)
            if ({**before, "spec": b_spec} == {**after, "spec": a_spec} and isinstance(a_replicas, int)
                    and a_replicas != b_replicas):
                self._add(at, "scale", {"kind": e.kind, "name": e.name, "replicas": a_replicas,
                                        **_ns_args(e.namespace)})
                return
        self._add(at, "apply", manifest.manifest(kind, e.obj))


def _evicted(pod: core_pb2.Pod) -> bool:
    return podconditions.is_disruption_target(pod, podconditions.EVICTION_BY_EVICTION_API)


def _deletion_start(meta: Any) -> datetime | None:
    """When a graceful delete was asked for: its deadline less its grace period."""
    deadline = _time(meta.deletion_timestamp)
    if deadline is None:
        return None
    return deadline - timedelta(seconds=meta.deletion_grace_period_seconds)


_RESIZE_KEYS: Final = (("requests", "cpu", "cpu"), ("requests", "memory", "memory"),
                       ("limits", "cpu", "limit_cpu"), ("limits", "memory", "limit_memory"))


def _resizes(old: core_pb2.Pod, new: core_pb2.Pod) -> list[dict[str, Any]]:
    """A resize step's arguments per container whose cpu or memory changed (its new values)."""
    before = {c.name: c for c in [*old.spec.containers, *old.spec.init_containers]}
    out = []
    for c in [*new.spec.containers, *new.spec.init_containers]:
        was = before.get(c.name)
        if was is None:
            continue
        args: dict[str, Any] = {}
        for section, resource, arg in _RESIZE_KEYS:
            now_value = getattr(c.resources, section).get(resource, "")
            if now_value and now_value != getattr(was.resources, section).get(resource, ""):
                args[arg] = now_value
        if args:
            out.append({"container": c.name, **args})
    return out


def _without_resources(doc: dict[str, Any]) -> dict[str, Any]:
    """A pod manifest without its containers' resources (a resize's, compared apart)."""
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return doc
    spec = dict(spec)
    for field in ("containers", "initContainers"):
        if isinstance(spec.get(field), list):
            spec[field] = [{k: v for k, v in c.items() if k != "resources"} if isinstance(c, dict) else c
                           for c in spec[field]]
    return {**doc, "spec": spec}


def _node_add_args(node: core_pb2.Node) -> dict[str, Any]:
    """``kplane node add``'s arguments for a Node: its capacity, and the labels and taints it
    registered with beyond the kubelet's own."""
    args: dict[str, Any] = {"name": node.metadata.name}
    for key in ("cpu", "memory"):
        if node.status.capacity.get(key):
            args[key] = node.status.capacity[key]
    pods = node.status.capacity.get("pods", "")
    if pods.isdigit():
        args["pods"] = int(pods)
    labels = {k: v for k, v in node.metadata.labels.items() if k not in _KUBELET_LABELS}
    if labels:
        args["labels"] = dict(sorted(labels.items()))
    taints = [f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in node.spec.taints
              if not t.key.startswith("node.kubernetes.io/")]
    if taints:
        args["taints"] = taints
    return args
