"""kubectl-like output for ``kplane get``: tables per kind, and Kubernetes JSON/YAML.

The columns are kubectl's (``kubectl get pods``: NAME READY STATUS RESTARTS AGE; ``-o wide`` adds
IP, NODE, NOMINATED NODE, READINESS GATES; ...), from its printers (pkg/printers/internalversion).
"""

from __future__ import annotations

import json
from typing import Callable, Sequence

import yaml
from google.protobuf.message import Message

from machinery import jsonconv, selectors, timeutil
from machinery.api import apps_pb2, coordination_pb2, core_pb2, policy_pb2, resource_pb2, scheduling_pb2
from machinery.kinds import Kind, M, object_meta
from machinery.quantity import QuantityError, parse_quantity

RowFn = Callable[[Message, bool], list[str]]


def _age(obj: Message) -> str:
    ts = object_meta(obj).creation_timestamp
    return timeutil.human_duration(timeutil.age(ts)) if ts else "<unknown>"


def pod_status(pod: core_pb2.Pod) -> str:
    """kubectl's STATUS column (printPod), simplified to what kplane's pods can show."""
    if pod.metadata.deletion_timestamp:
        return "Terminating"
    reason = pod.status.reason or pod.status.phase or "Pending"
    if pod.spec.scheduling_gates and not pod.spec.node_name:
        return "SchedulingGated"
    for cs in pod.status.init_container_statuses:
        if cs.state.HasField("terminated") and cs.state.terminated.exit_code != 0:
            return f"Init:{cs.state.terminated.reason or 'Error'}"
        if cs.state.HasField("waiting") and cs.state.waiting.reason and cs.state.waiting.reason != "PodInitializing":
            return f"Init:{cs.state.waiting.reason}"
    for cs in pod.status.container_statuses:
        if cs.state.HasField("waiting") and cs.state.waiting.reason:
            reason = cs.state.waiting.reason
        elif cs.state.HasField("terminated") and cs.state.terminated.reason:
            reason = cs.state.terminated.reason
    return reason


def _pod_row(p: core_pb2.Pod, wide: bool) -> list[str]:
    total = len(p.spec.containers)
    ready = sum(1 for cs in p.status.container_statuses if cs.ready)
    restarts = sum(cs.restart_count for cs in p.status.container_statuses)
    row = [p.metadata.name, f"{ready}/{total}", pod_status(p), str(restarts), _age(p)]
    if wide:
        gates = p.spec.readiness_gates
        row += [p.status.pod_ip or "<none>", p.spec.node_name or "<none>", p.status.nominated_node_name or "<none>",
                f"{len(gates)}/{len(gates)}" if gates else "<none>"]
    return row


def node_status(n: core_pb2.Node) -> str:
    ready = next((c for c in n.status.conditions if c.type == "Ready"), None)
    status = "Unknown" if ready is None or ready.status == "Unknown" else (
        "Ready" if ready.status == "True" else "NotReady")
    return status + (",SchedulingDisabled" if n.spec.unschedulable else "")


def _node_row(n: core_pb2.Node, wide: bool) -> list[str]:
    roles = sorted(k.split("/", 1)[1] for k in n.metadata.labels if k.startswith("node-role.kubernetes.io/"))
    row = [n.metadata.name, node_status(n), ",".join(roles) or "<none>", _age(n),
           n.status.node_info.kubelet_version or "<none>"]
    if wide:
        internal = next((a.address for a in n.status.addresses if a.type == "InternalIP"), "<none>")
        external = next((a.address for a in n.status.addresses if a.type == "ExternalIP"), "<none>")
        row += [internal, external, n.status.node_info.os_image or "<unknown>",
                n.status.node_info.kernel_version or "<unknown>",
                n.status.node_info.container_runtime_version or "<unknown>"]
    return row


def _pc_row(pc: scheduling_pb2.PriorityClass, wide: bool) -> list[str]:
    return [pc.metadata.name, str(pc.value), "true" if pc.global_default else "false", _age(pc),
            pc.preemption_policy if pc.HasField("preemption_policy") else "PreemptLowerPriority"]


def _pdb_row(b: policy_pb2.PodDisruptionBudget, wide: bool) -> list[str]:
    return [b.metadata.name, b.spec.min_available if b.spec.HasField("min_available") else "N/A",
            b.spec.max_unavailable if b.spec.HasField("max_unavailable") else "N/A",
            str(b.status.disruptions_allowed), _age(b)]


def _event_row(e: core_pb2.Event, wide: bool) -> list[str]:
    last = e.last_timestamp or e.event_time or e.metadata.creation_timestamp
    obj = f"{e.involved_object.kind.lower()}/{e.involved_object.name}"
    return [timeutil.human_duration(timeutil.age(last)) if last else "<unknown>", e.type, e.reason, obj, e.message]


def _lease_row(lease: coordination_pb2.Lease, wide: bool) -> list[str]:
    spec = lease.spec
    return [lease.metadata.name, spec.holder_identity if spec.HasField("holder_identity") else "", _age(lease)]


def _claim_row(c: resource_pb2.ResourceClaim, wide: bool) -> list[str]:
    state = []
    if c.status.HasField("allocation"):
        state.append("allocated")
    if c.status.reserved_for:
        state.append("reserved")
    return [c.metadata.name, ",".join(state) or "pending", _age(c)]


def _slice_row(s: resource_pb2.ResourceSlice, wide: bool) -> list[str]:
    return [s.metadata.name, s.spec.node_name if s.spec.HasField("node_name") else "", s.spec.driver,
            s.spec.pool.name, _age(s)]


def _containers_cells(template: core_pb2.PodTemplateSpec) -> list[str]:
    """layoutContainerCells: the template's container names and images, comma-separated."""
    containers = template.spec.containers
    return [",".join(c.name for c in containers), ",".join(c.image for c in containers)]


def _replica_set_row(rs: apps_pb2.ReplicaSet, wide: bool) -> list[str]:
    row = [rs.metadata.name, str(rs.spec.replicas), str(rs.status.replicas), str(rs.status.ready_replicas), _age(rs)]
    if wide:
        row += [*_containers_cells(rs.spec.template),
                selectors.format_label_selector(rs.spec.selector, rs.spec.HasField("selector"))]
    return row


def _deployment_row(d: apps_pb2.Deployment, wide: bool) -> list[str]:
    row = [d.metadata.name, f"{d.status.ready_replicas}/{d.spec.replicas}", str(d.status.updated_replicas),
           str(d.status.available_replicas), _age(d)]
    if wide:
        try:  # printDeployment prints the selector itself: "" when empty, "<invalid>" when it does not convert
            selector = selectors.selector_string(
                selectors.label_selector_as_selector(d.spec.selector, d.spec.HasField("selector")))
        except selectors.SelectorError:
            selector = "<invalid>"
        row += [*_containers_cells(d.spec.template), selector]
    return row


def _namespace_row(ns: core_pb2.Namespace, wide: bool) -> list[str]:
    return [ns.metadata.name, ns.status.phase, _age(ns)]


def _quantity_text(text: str) -> str:
    """A quantity as Go's Quantity.String() prints it ("0" when unset)."""
    try:
        return str(parse_quantity(text or "0"))
    except QuantityError:
        return text


def _quota_row(q: core_pb2.ResourceQuota, wide: bool) -> list[str]:
    """printResourceQuota: ``name: used/hard`` for each resource of status.hard, sorted; those
    named limits.* go to LIMIT, the others to REQUEST."""
    requests: list[str] = []
    limits: list[str] = []
    hard, used = q.status.hard, q.status.used
    for name in sorted(hard):
        cell = f"{name}: {_quantity_text(used.get(name, ''))}/{_quantity_text(hard[name])}"
        pieces = name.split(".")
        (limits if len(pieces) > 1 and pieces[0] == "limits" else requests).append(cell)
    return [q.metadata.name, _age(q), ", ".join(requests), ", ".join(limits)]


def _limit_range_row(lr: core_pb2.LimitRange, wide: bool) -> list[str]:
    created = timeutil.parse(lr.metadata.creation_timestamp)
    return [lr.metadata.name, timeutil.rfc3339(created) if created else "<unknown>"]


def _name_age_row(o: Message, wide: bool) -> list[str]:
    return [object_meta(o).name, _age(o)]


def _of(message: type[M], fn: Callable[[M, bool], list[str]]) -> RowFn:
    """``fn``, the row of one kind's objects, as a row of any message: the tables are keyed by
    kind, so the object is a ``message``."""
    def row(obj: Message, wide: bool) -> list[str]:
        if not isinstance(obj, message):
            raise TypeError(f"a {message.__name__} row given a {type(obj).__name__}")
        return fn(obj, wide)
    return row


_TABLES: dict[str, tuple[list[str], list[str], RowFn]] = {
    "Pod": (["NAME", "READY", "STATUS", "RESTARTS", "AGE"], ["IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
            _of(core_pb2.Pod, _pod_row)),
    "Node": (["NAME", "STATUS", "ROLES", "AGE", "VERSION"],
             ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"],
             _of(core_pb2.Node, _node_row)),
    "PriorityClass": (["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"], [],
                      _of(scheduling_pb2.PriorityClass, _pc_row)),
    "PodDisruptionBudget": (["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"], [],
                            _of(policy_pb2.PodDisruptionBudget, _pdb_row)),
    "Event": (["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], [], _of(core_pb2.Event, _event_row)),
    "Lease": (["NAME", "HOLDER", "AGE"], [], _of(coordination_pb2.Lease, _lease_row)),
    "ResourceClaim": (["NAME", "STATE", "AGE"], [], _of(resource_pb2.ResourceClaim, _claim_row)),
    "ResourceSlice": (["NAME", "NODE", "DRIVER", "POOL", "AGE"], [], _of(resource_pb2.ResourceSlice, _slice_row)),
    "ReplicaSet": (["NAME", "DESIRED", "CURRENT", "READY", "AGE"], ["CONTAINERS", "IMAGES", "SELECTOR"],
                   _of(apps_pb2.ReplicaSet, _replica_set_row)),
    "Deployment": (["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], ["CONTAINERS", "IMAGES", "SELECTOR"],
                   _of(apps_pb2.Deployment, _deployment_row)),
    "Namespace": (["NAME", "STATUS", "AGE"], [], _of(core_pb2.Namespace, _namespace_row)),
    "ResourceQuota": (["NAME", "AGE", "REQUEST", "LIMIT"], [], _of(core_pb2.ResourceQuota, _quota_row)),
    "LimitRange": (["NAME", "CREATED AT"], [], _of(core_pb2.LimitRange, _limit_range_row)),
}


def table_header(kind: Kind[Message, Message], wide: bool, all_namespaces: bool) -> list[str]:
    head, extra, _ = _TABLES.get(kind.name, (["NAME", "AGE"], [], _name_age_row))
    cols = head + (extra if wide else [])
    return (["NAMESPACE"] + cols) if all_namespaces and kind.namespaced else cols


def table_row(kind: Kind[Message, Message], obj: Message, wide: bool, all_namespaces: bool) -> list[str]:
    _, _, fn = _TABLES.get(kind.name, (["NAME", "AGE"], [], _name_age_row))
    row = fn(obj, wide)
    return ([object_meta(obj).namespace] + row) if all_namespaces and kind.namespaced else row


def format_table(rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i]) for i, c in enumerate(r[:-1])] + [r[-1]]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def to_json(obj: Message | dict) -> str:
    return json.dumps(obj if isinstance(obj, dict) else jsonconv.to_dict(obj), indent=4)


def to_yaml(obj: Message | dict) -> str:
    return yaml.safe_dump(obj if isinstance(obj, dict) else jsonconv.to_dict(obj), sort_keys=False)


def as_list(items: list[Message]) -> dict:
    return {"apiVersion": "v1", "items": [jsonconv.to_dict(i) for i in items], "kind": "List",
            "metadata": {"resourceVersion": ""}}


def resource_name(kind: Kind, name: str) -> str:
    """kubectl's ``pod/web``, ``priorityclass.scheduling.k8s.io/high``."""
    group = kind.group
    return f"{kind.name.lower()}{'.' + group if group else ''}/{name}"
