"""kubectl's table columns per kind, shared by ``kplane get`` and the apiserver's Table responses.

The columns and cells are kubectl's (Kubernetes' pkg/printers/internalversion): ``kubectl get
pods`` prints NAME READY STATUS RESTARTS AGE and ``-o wide`` adds IP, NODE, NOMINATED NODE,
READINESS GATES. A ``Column`` carries the name Kubernetes gives it in a meta.k8s.io/v1 Table
("Nominated Node"; kubectl prints it upper-cased) and its priority (1: shown with ``-o wide``
only). ``kplane get`` prints ``header``/``cells`` itself; the apiserver's REST API serves the same
columns and cells as a Table (``apiserver/rest/tables.py``), so ``kubectl get -o wide`` and
``kplane get -o wide`` print the same columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from google.protobuf.message import Message

from machinery import selectors, timeutil
from machinery.api import apps_pb2, coordination_pb2, core_pb2, policy_pb2, resource_pb2, scheduling_pb2
from machinery.kinds import Kind, M, object_meta
from machinery.quantity import QuantityError, parse_quantity

RowFn = Callable[[Message, bool], list[str]]

_NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
             "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
             "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
             "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_AGE_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
            "guaranteed to be set in happens-before order across separate operations. Clients may not set this "
            "value. It is represented in RFC3339 form and is in UTC.")


@dataclass(frozen=True)
class Column:
    """One column of a kind's table (metav1.TableColumnDefinition)."""

    name: str  # as Kubernetes names it: "Nominated Node"; kubectl prints it upper-cased
    type: str = "string"  # string, integer, date (OpenAPI types, as the Table says)
    format: str = ""  # "name" for the object's name
    description: str = ""
    priority: int = 0  # 1: only with -o wide

    @property
    def header(self) -> str:
        """What kubectl (and ``kplane get``) print above the column."""
        return self.name.upper()


NAME = Column("Name", format="name", description=_NAME_DOC)
AGE = Column("Age", description=_AGE_DOC)


def _cols(*names: str, priority: int = 0) -> list[Column]:
    out = []
    for n in names:
        if n == "Name":
            out.append(NAME)
        elif n == "Age":
            out.append(AGE)
        else:
            out.append(Column(n, priority=priority))
    return out


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
    """printResourceClaim's STATE (resourceClaimState): deleted, then pending or allocated[,reserved]."""
    state = []
    deleted = bool(c.metadata.deletion_timestamp)
    if deleted:
        state.append("deleted")
    if not c.status.HasField("allocation"):
        if not deleted:
            state.append("pending")
    else:
        state.append("allocated")
        if c.status.reserved_for:
            state.append("reserved")
    return [c.metadata.name, ",".join(state), _age(c)]


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


@dataclass(frozen=True)
class _Table:
    columns: list[Column]  # priority 0 first, then the -o wide ones (priority 1)
    row: RowFn

    @property
    def narrow(self) -> int:
        return sum(1 for c in self.columns if c.priority == 0)


def _table(head: list[str], wide: list[str], row: RowFn, types: dict[str, str] | None = None) -> _Table:
    cols = _cols(*head) + _cols(*wide, priority=1)
    if types:
        cols = [Column(c.name, types[c.name], c.format, c.description, c.priority) if c.name in types else c
                for c in cols]
    return _Table(cols, row)


_TABLES: dict[str, _Table] = {
    "Pod": _table(["Name", "Ready", "Status", "Restarts", "Age"], ["IP", "Node", "Nominated Node", "Readiness Gates"],
                  _of(core_pb2.Pod, _pod_row)),
    "Node": _table(["Name", "Status", "Roles", "Age", "Version"],
                   ["Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime"],
                   _of(core_pb2.Node, _node_row)),
    "PriorityClass": _table(["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"], [],
                            _of(scheduling_pb2.PriorityClass, _pc_row),
                            {"Value": "integer", "Global-Default": "boolean"}),
    "PodDisruptionBudget": _table(["Name", "Min Available", "Max Unavailable", "Allowed Disruptions", "Age"], [],
                                  _of(policy_pb2.PodDisruptionBudget, _pdb_row), {"Allowed Disruptions": "integer"}),
    "Event": _table(["Last Seen", "Type", "Reason", "Object", "Message"], [], _of(core_pb2.Event, _event_row)),
    "Lease": _table(["Name", "Holder", "Age"], [], _of(coordination_pb2.Lease, _lease_row)),
    "ResourceClaim": _table(["Name", "State", "Age"], [], _of(resource_pb2.ResourceClaim, _claim_row)),
    "ResourceSlice": _table(["Name", "Node", "Driver", "Pool", "Age"], [],
                            _of(resource_pb2.ResourceSlice, _slice_row)),
    "ReplicaSet": _table(["Name", "Desired", "Current", "Ready", "Age"], ["Containers", "Images", "Selector"],
                         _of(apps_pb2.ReplicaSet, _replica_set_row),
                         {"Desired": "integer", "Current": "integer", "Ready": "integer"}),
    "Deployment": _table(["Name", "Ready", "Up-to-date", "Available", "Age"], ["Containers", "Images", "Selector"],
                         _of(apps_pb2.Deployment, _deployment_row), {"Up-to-date": "integer", "Available": "integer"}),
    "Namespace": _table(["Name", "Status", "Age"], [], _of(core_pb2.Namespace, _namespace_row)),
    "ResourceQuota": _table(["Name", "Age", "Request", "Limit"], [], _of(core_pb2.ResourceQuota, _quota_row)),
    "LimitRange": _table(["Name", "Created At"], [], _of(core_pb2.LimitRange, _limit_range_row),
                         {"Created At": "date"}),
}
_DEFAULT = _table(["Name", "Age"], [], _name_age_row)


def columns(kind: Kind[Message, Message]) -> list[Column]:
    """Every column of ``kind``'s table, the ``-o wide`` ones (priority 1) last."""
    return list(_TABLES.get(kind.name, _DEFAULT).columns)


def cells(kind: Kind[Message, Message], obj: Message, wide: bool = True) -> list[str]:
    """The cells of ``obj``'s row: every column's (``wide``), or the priority-0 columns' only."""
    table = _TABLES.get(kind.name, _DEFAULT)
    row = table.row(obj, wide)
    return row if wide else row[:table.narrow]


def header(kind: Kind[Message, Message], wide: bool) -> list[str]:
    """What kubectl prints above ``kind``'s columns (without and with ``-o wide``)."""
    return [c.header for c in columns(kind) if wide or c.priority == 0]
