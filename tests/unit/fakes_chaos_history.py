"""Hand-built histories for the record and diff tests: pods, Deployments, Nodes and Events as a
cluster writes them (managedFields with their managers, times and subresources), each write an
Entry at the next revision."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from google.protobuf.message import Message

from cli.chaos import marks
from cli.check.framework import Entry
from machinery import jsonconv, timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.kinds import object_meta, of_message

M = TypeVar("M", bound=Message)

T0 = "2026-01-01T10:00:00Z"


def at(seconds: int) -> str:
    """T0 plus ``seconds`` (under an hour)."""
    return f"2026-01-01T10:{seconds // 60:02d}:{seconds % 60:02d}Z"


class History:
    """Entries appended one revision at a time; each object is copied as written."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.rev = 0

    def write(self, type_: str, obj: M) -> M:
        """Append the object as written; the caller gets a copy of its own to change further."""
        self.rev += 1
        stored, mine = type(obj)(), type(obj)()
        stored.CopyFrom(obj)
        meta = object_meta(stored)
        meta.resource_version = str(self.rev)
        mine.CopyFrom(stored)
        self.entries.append(Entry(self.rev, type_, of_message(stored).name, meta.namespace, meta.name, stored))
        return mine

    def save(self, path: Path) -> Path:
        """As ``kplane history`` prints it."""
        path.write_text("".join(json.dumps({"rev": e.rev, "type": e.type, "kind": e.kind, "namespace": e.namespace,
                                            "name": e.name, "object": jsonconv.to_dict(e.obj)}) + "\n"
                                for e in self.entries))
        return path


def managed(obj: Message, manager: str, time: str, fields: dict, subresource: str = "") -> None:
    """Give ``manager`` the ``fields`` (a fieldsV1 tree) at ``time``, replacing its entry."""
    meta = object_meta(obj)
    for i, e in enumerate(meta.managed_fields):
        if e.manager == manager and e.subresource == subresource:
            del meta.managed_fields[i]
            break
    meta.managed_fields.add(manager=manager, operation="Update", api_version="v1", time=time, fields_type="FieldsV1",
                            fields_v1=json.dumps(fields, separators=(",", ":")), subresource=subresource)


POD_FIELDS = {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
              "f:spec": {"f:containers": {'k:{"name":"c1"}': {".": {}, "f:name": {}, "f:image": {},
                                                              "f:resources": {".": {}, "f:requests": {".": {},
                                                                                                      "f:cpu": {}}}}},
                         "f:terminationGracePeriodSeconds": {}}}


def user_pod(name: str, cpu: str = "500m", uid: str = "", created: str = T0, manager: str = "kplane",
             priority: int = 0) -> core_pb2.Pod:
    pod = core_pb2.Pod()
    pod.metadata.name, pod.metadata.namespace = name, "default"
    pod.metadata.uid = uid or f"uid-{name}"
    pod.metadata.creation_timestamp = created
    pod.metadata.generation = 1
    pod.metadata.labels["app"] = name
    c = pod.spec.containers.add(name="c1", image="registry.k8s.io/pause:3.10")
    c.resources.requests["cpu"] = cpu
    pod.spec.termination_grace_period_seconds = 30
    pod.spec.priority = priority
    pod.status.phase = "Pending"
    managed(pod, manager, created, POD_FIELDS)
    return pod


def owned_pod(name: str, owner: str, created: str = T0) -> core_pb2.Pod:
    pod = user_pod(name, created=created, manager="kube-controller-manager")
    pod.metadata.owner_references.add(api_version="apps/v1", kind="ReplicaSet", name=owner, uid=f"uid-{owner}",
                                      controller=True)
    return pod


def bound(pod: core_pb2.Pod, node: str, time: str) -> core_pb2.Pod:
    """The scheduler's binding (nobody's field) and the kubelet running it."""
    pod.spec.node_name = node
    pod.status.phase = "Running"
    del pod.status.container_statuses[:]
    for c in pod.spec.containers:
        s = pod.status.container_statuses.add(name=c.name)
        for r, v in c.resources.requests.items():
            s.allocated_resources[r] = v
            s.resources.requests[r] = v
    managed(pod, "kubelet", time, {"f:status": {"f:phase": {}}}, "status")
    return pod


def resized(pod: core_pb2.Pod, cpu: str, time: str, manager: str = "kplane") -> core_pb2.Pod:
    pod.spec.containers[0].resources.requests["cpu"] = cpu
    pod.metadata.generation += 1
    managed(pod, manager, time, {"f:spec": {"f:containers": {'k:{"name":"c1"}': {
        "f:resources": {"f:requests": {"f:cpu": {}}}}}}}, "resize")
    return pod


def resize_pending(pod: core_pb2.Pod, reason: str, time: str) -> core_pb2.Pod:
    del pod.status.conditions[:]
    pod.status.conditions.add(type="PodResizePending", status="True", reason=reason, last_transition_time=time)
    managed(pod, "kubelet", time, {"f:status": {"f:conditions": {}}}, "status")
    return pod


def actuated(pod: core_pb2.Pod, time: str) -> core_pb2.Pod:
    del pod.status.conditions[:]
    return bound(pod, pod.spec.node_name, time)


def marked(pod: core_pb2.Pod, reason: str, time: str) -> core_pb2.Pod:
    pod.status.conditions.add(type="DisruptionTarget", status="True", reason=reason, last_transition_time=time)
    return pod


def deleting(pod: core_pb2.Pod, time_asked: str, grace: int) -> core_pb2.Pod:
    """A graceful delete asked at ``time_asked`` (its deadline ``grace`` seconds later)."""
    asked = timeutil.parse(time_asked)
    assert asked is not None
    pod.metadata.deletion_timestamp = timeutil.rfc3339(asked + timedelta(seconds=grace))
    pod.metadata.deletion_grace_period_seconds = grace
    return pod


def deployment(name: str, replicas: int, created: str = T0) -> apps_pb2.Deployment:
    d = apps_pb2.Deployment()
    d.metadata.name, d.metadata.namespace, d.metadata.uid = name, "default", f"uid-{name}"
    d.metadata.creation_timestamp = created
    d.spec.replicas = replicas
    d.spec.selector.match_labels["app"] = name
    d.spec.template.metadata.labels["app"] = name
    d.spec.template.spec.containers.add(name="c1", image="nginx")
    managed(d, "kplane", created, {"f:spec": {"f:replicas": {}, "f:selector": {}, "f:template": {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {"f:containers": {
            'k:{"name":"c1"}': {".": {}, "f:name": {}, "f:image": {}}}}}}})
    return d


def node(name: str, created: str = T0, cpu: str = "4", memory: str = "8Gi") -> core_pb2.Node:
    n = core_pb2.Node()
    n.metadata.name, n.metadata.uid, n.metadata.creation_timestamp = name, f"uid-{name}", created
    n.metadata.labels["kubernetes.io/hostname"] = name
    n.status.capacity.update({"cpu": cpu, "memory": memory, "pods": "110"})
    managed(n, "kubelet", created, {"f:metadata": {"f:labels": {}}})
    return n


def fault(action: str, component: str, time: str, args: dict | None = None) -> core_pb2.Event:
    ev = marks.fault_event(action, component, marks.fault_message(action, component, args))
    ev.metadata.name = f"kplane-fault.{action}.{time}"
    ev.metadata.uid = ev.metadata.name
    ev.metadata.creation_timestamp = ev.first_timestamp = ev.last_timestamp = time
    return ev


def event(reason: str, pod: core_pb2.Pod, time: str, related: core_pb2.Pod | None = None) -> core_pb2.Event:
    ev = core_pb2.Event(reason=reason, message=reason, type="Normal", first_timestamp=time, last_timestamp=time)
    ev.metadata.name, ev.metadata.namespace = f"{pod.metadata.name}.{reason}.{time}", "default"
    ev.metadata.uid = ev.metadata.name
    ev.involved_object.kind, ev.involved_object.name = "Pod", pod.metadata.name
    ev.involved_object.namespace, ev.involved_object.uid = "default", pod.metadata.uid
    if related is not None:
        ev.related.kind, ev.related.name = "Pod", related.metadata.name
        ev.related.namespace, ev.related.uid = "default", related.metadata.uid
    return ev
