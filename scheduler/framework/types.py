"""The scheduling framework's vocabulary, as kube-scheduler's framework package has it.

- ``Status`` / ``Code``: what a plugin says. ``None`` is success everywhere (Kubernetes' nil
  status), so the hot paths allocate nothing when a node passes.
- ``CycleState``: per-attempt scratch space; each plugin writes under its own key (PreFilter ->
  Filter/Score), and preemption clones it to simulate removing pods.
- ``PreFilterResult``: a PreFilter plugin can narrow the nodes worth filtering.
- ``ClusterEvent`` (resource + action type bits), ``QueueingHint`` and ``ClusterEventWithHint``:
  what a plugin says can make a pod it rejected schedulable again, and how to tell per pod;
  ``PreQueueingHintResult``: which pods an event can concern at all (KEP-6132), said once per event.
- ``NominatingInfo`` / ``PostFilterResult``: what PostFilter (preemption) decides.
- ``Diagnosis`` and ``FitError``: why a pod fits nowhere, rendered as kube-scheduler renders it
  ("0/3 nodes are available: 3 Insufficient cpu. preemption: ...").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Protocol, runtime_checkable

from machinery.api import core_pb2
from machinery.resources import pod_requests

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    # The pod does not fit the node now; preemption may help.
    UNSCHEDULABLE = 2
    # The pod does not fit the node and preemption cannot change that.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    # The pod waits for something other than the cluster's state (e.g. an external controller).
    PENDING = 6


_CODE_NAMES = {Code.SUCCESS: "Success", Code.ERROR: "Error", Code.UNSCHEDULABLE: "Unschedulable",
               Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable", Code.WAIT: "Wait",
               Code.SKIP: "Skip", Code.PENDING: "Pending"}


class Status:
    """A plugin's verdict. Build with ``Status(code, reason, ...)``; ``None`` means success."""

    __slots__ = ("code", "reasons", "plugin", "error")

    def __init__(self, code: Code = Code.SUCCESS, *reasons: str, plugin: str = "", error: BaseException | None = None):
        self.code = code
        self.reasons = list(reasons)
        self.plugin = plugin
        self.error = error

    def is_success(self) -> bool:
        return self.code == Code.SUCCESS

    def is_rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> "Status":
        if not self.plugin:
            self.plugin = plugin
        return self

    @property
    def code_name(self) -> str:
        return _CODE_NAMES[self.code]

    def __repr__(self) -> str:
        return f"Status({self.code_name}, {self.reasons!r}, plugin={self.plugin!r})"


def code_of(status: Status | None) -> Code:
    return Code.SUCCESS if status is None else status.code


def is_success(status: Status | None) -> bool:
    return status is None or status.code == Code.SUCCESS


def code_name(status: Status | None) -> str:
    return _CODE_NAMES[code_of(status)]


# ---------------------------------------------------------------- cycle state


class StateData:
    """A value a plugin stores in the CycleState; override ``clone`` when it is mutated later."""

    def clone(self) -> "StateData":
        return self


class CycleState:
    """Per scheduling attempt storage. Plugins read and write their own keys only."""

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()

    def read(self, key: str) -> Any:
        """The value under ``key``; KeyError when PreFilter did not write it."""
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> "CycleState":
        out = CycleState()
        out._data = {k: (v.clone() if isinstance(v, StateData) else v) for k, v in self._data.items()}
        out.skip_filter_plugins = set(self.skip_filter_plugins)
        out.skip_score_plugins = set(self.skip_score_plugins)
        return out


@dataclass(frozen=True)
class PreFilterResult:
    """The nodes worth filtering (None: all of them)."""

    node_names: frozenset[str] | None = None

    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: "PreFilterResult | None") -> "PreFilterResult":
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


# ---------------------------------------------------------------- nominations and post-filter


class NominatingMode(enum.Enum):
    NOOP = 0
    OVERRIDE = 1


@dataclass(frozen=True)
class NominatingInfo:
    node_name: str = ""
    mode: NominatingMode = NominatingMode.NOOP


@dataclass(frozen=True)
class PostFilterResult:
    nominating_info: NominatingInfo | None = None


# ---------------------------------------------------------------- cluster events and hints


class ActionType(enum.IntFlag):
    NONE = 0
    ADD = 1
    DELETE = 1 << 1
    UPDATE_NODE_ALLOCATABLE = 1 << 2
    UPDATE_NODE_LABEL = 1 << 3
    UPDATE_NODE_TAINT = 1 << 4
    UPDATE_NODE_CONDITION = 1 << 5
    UPDATE_NODE_ANNOTATION = 1 << 6
    UPDATE_POD_LABEL = 1 << 7
    # A pod's resource requests went down (a delete-free way to free room: KEP-1287 resizes).
    UPDATE_POD_SCALE_DOWN = 1 << 8
    UPDATE_POD_TOLERATION = 1 << 9
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED = 1 << 10
    UPDATE_POD_GENERATED_RESOURCE_CLAIM = 1 << 11
    UPDATE_OTHER = 1 << 12  # any other update (the pod's or node's generic Update)
    # A pod's resources went up: its desired requests, or what the kubelet allocated or actuated
    # (KEP-5836: a parked deferred resize may have lost its room).
    UPDATE_POD_SCALE_UP = 1 << 13
    UPDATE = (UPDATE_NODE_ALLOCATABLE | UPDATE_NODE_LABEL | UPDATE_NODE_TAINT | UPDATE_NODE_CONDITION
              | UPDATE_NODE_ANNOTATION | UPDATE_POD_LABEL | UPDATE_POD_SCALE_DOWN | UPDATE_POD_TOLERATION
              | UPDATE_POD_SCHEDULING_GATES_ELIMINATED | UPDATE_POD_GENERATED_RESOURCE_CLAIM | UPDATE_OTHER
              | UPDATE_POD_SCALE_UP)
    ALL = ADD | DELETE | UPDATE


_ACTION_NAMES = {
    ActionType.ADD: "Add", ActionType.DELETE: "Delete", ActionType.UPDATE_NODE_ALLOCATABLE: "UpdateNodeAllocatable",
    ActionType.UPDATE_NODE_LABEL: "UpdateNodeLabel", ActionType.UPDATE_NODE_TAINT: "UpdateNodeTaint",
    ActionType.UPDATE_NODE_CONDITION: "UpdateNodeCondition", ActionType.UPDATE_NODE_ANNOTATION: "UpdateNodeAnnotation",
    ActionType.UPDATE_POD_LABEL: "UpdatePodLabel", ActionType.UPDATE_POD_SCALE_DOWN: "UpdatePodScaleDown",
    ActionType.UPDATE_POD_SCALE_UP: "UpdatePodScaleUp",
    ActionType.UPDATE_POD_TOLERATION: "UpdatePodToleration",
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED: "UpdatePodSchedulingGatesEliminated",
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM: "UpdatePodGeneratedResourceClaim",
    ActionType.UPDATE_OTHER: "Update", ActionType.UPDATE: "Update", ActionType.ALL: "All",
}

# Event resources. ``Pod`` covers both assigned and unscheduled pods when a plugin registers it.
POD = "Pod"
ASSIGNED_POD = "AssignedPod"
UNSCHEDULED_POD = "UnschedulablePod"
NODE = "Node"
RESOURCE_CLAIM = "ResourceClaim"
RESOURCE_SLICE = "ResourceSlice"
DEVICE_CLASS = "DeviceClass"
WILDCARD = "*"


def _resource_matches(registered: str, incoming: str) -> bool:
    if registered == WILDCARD or registered == incoming:
        return True
    return registered == POD and incoming in (ASSIGNED_POD, UNSCHEDULED_POD)


@dataclass(frozen=True)
class ClusterEvent:
    resource: str
    action: ActionType
    custom_label: str = ""

    @property
    def label(self) -> str:
        """The name used in logs and metrics (``NodeAdd``, ``AssignedPodDelete``, ``UnschedulableTimeout``)."""
        if self.custom_label:
            return self.custom_label
        return f"{self.resource}{_ACTION_NAMES.get(self.action, 'Update')}"

    def is_wildcard(self) -> bool:
        return self.resource == WILDCARD and self.action == ActionType.ALL

    def matches(self, incoming: "ClusterEvent") -> bool:
        """Whether this registered event covers an ``incoming`` one."""
        return self.is_wildcard() or (_resource_matches(self.resource, incoming.resource)
                                      and bool(self.action & incoming.action))


# The queue's own events (kube-scheduler's labels).
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"

EVENT_ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, ActionType.ADD)
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, ActionType.DELETE)
EVENT_UNSCHEDULED_POD_ADD = ClusterEvent(UNSCHEDULED_POD, ActionType.ADD)
EVENT_UNSCHEDULED_POD_UPDATE = ClusterEvent(UNSCHEDULED_POD, ActionType.UPDATE)
EVENT_NODE_ADD = ClusterEvent(NODE, ActionType.ADD)
EVENT_NODE_DELETE = ClusterEvent(NODE, ActionType.DELETE)
EVENT_RESOURCE_CLAIM_ADD = ClusterEvent(RESOURCE_CLAIM, ActionType.ADD)
EVENT_RESOURCE_CLAIM_UPDATE = ClusterEvent(RESOURCE_CLAIM, ActionType.UPDATE_OTHER)
EVENT_RESOURCE_CLAIM_DELETE = ClusterEvent(RESOURCE_CLAIM, ActionType.DELETE)
EVENT_RESOURCE_SLICE_ADD = ClusterEvent(RESOURCE_SLICE, ActionType.ADD)
EVENT_RESOURCE_SLICE_UPDATE = ClusterEvent(RESOURCE_SLICE, ActionType.UPDATE_OTHER)
EVENT_DEVICE_CLASS_ADD = ClusterEvent(DEVICE_CLASS, ActionType.ADD)
EVENT_DEVICE_CLASS_UPDATE = ClusterEvent(DEVICE_CLASS, ActionType.UPDATE_OTHER)
EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(WILDCARD, ActionType.ALL, UNSCHEDULABLE_TIMEOUT)
EVENT_FORCE_ACTIVATE = ClusterEvent(WILDCARD, ActionType.ALL, FORCE_ACTIVATE)


class QueueingHint(enum.IntEnum):
    QUEUE_SKIP = 0  # the event cannot make the pod schedulable
    QUEUE = 1  # it may: retry the pod


# hint(pod, old_obj, new_obj) -> QueueingHint. An exception counts as QUEUE (never strand a pod).
QueueingHintFn = Callable[[core_pb2.Pod, Any, Any], QueueingHint]


@dataclass(frozen=True)
class PreQueueingHintResult:
    """What a PreQueueingHint says about one cluster event (KEP-6132 "Design Details",
    PreQueueingHintResult): ``all_pods`` — every pod in the unschedulable pool may be concerned
    (``pods`` is ignored); otherwise only the pods named in ``pods`` (``namespace/name``, the
    queue's keys) are offered to the plugin's QueueingHint, and none at all when it is empty."""

    all_pods: bool = False
    pods: tuple[str, ...] = ()

    @classmethod
    def narrowed(cls, pods: Iterable[str]) -> "PreQueueingHintResult":
        """Only these pods (``namespace/name``); an empty iterable: no pod."""
        return cls(False, tuple(pods))


@runtime_checkable
class PreQueueingHintFn(Protocol):
    """KEP-6132 PreQueueingHint: which pods one cluster event can concern, said once per event.

    Optional on an event registration (``ClusterEventWithHint.pre_queueing_hint``). With the gate
    SchedulerPreQueueingHints on, the queue calls it once per matching event, before it walks the
    unschedulable pool, and then asks the same registration's QueueingHint only about the pods it
    named — for this plugin alone: another plugin registered for the same event is asked about
    the pods its own PreQueueingHint names, or, without one, about every pod it rejected. With
    the gate off it is never called."""

    def __call__(self, old: Any, new: Any) -> PreQueueingHintResult:
        """``old``/``new``: the object before and after the event (None for an add / a delete).
        ``all_pods``: every pod this plugin rejected may be concerned — the safe answer whenever
        the pods cannot be told (an index error, an event that frees something for anyone);
        otherwise the pods (``namespace/name``) that may be, none when empty. Naming a pod too
        many costs one QueueingHint call; naming one too few leaves it to the periodic flush of
        the unschedulable pool. An exception counts as ``all_pods``."""
        ...


# The PreQueueingHint answer that changes nothing: every pod is evaluated (KEP-6132's "evaluate all").
ALL_PODS = PreQueueingHintResult(all_pods=True)


@dataclass(frozen=True)
class ClusterEventWithHint:
    event: ClusterEvent
    hint: QueueingHintFn | None = None  # None: always QUEUE
    # KEP-6132: called once per matching event before the pool is walked, to name the pods this
    # plugin's ``hint`` is asked about (``PreQueueingHintFn``).
    # None: every pod it rejected, as without the feature.
    pre_queueing_hint: PreQueueingHintFn | None = None


def pod_scheduling_property_changes(new: core_pb2.Pod, old: core_pb2.Pod,
                                    requests_of: Callable[[core_pb2.Pod], Mapping[str, int]]) -> list[ClusterEvent]:
    """Kubernetes' PodSchedulingPropertiesChange: the UpdatePodXYZ events an update amounts to.

    ``requests_of(pod)`` gives a pod's resource requests (the KEP-1287 rule for assigned pods).
    """
    resource = ASSIGNED_POD if new.spec.node_name else UNSCHEDULED_POD
    actions: list[ActionType] = []
    if new.metadata.labels != old.metadata.labels:
        actions.append(ActionType.UPDATE_POD_LABEL)
    if _resources_may_differ(new, old):  # most updates (a kubelet's status write) cannot scale anything
        old_req, new_req = requests_of(old), requests_of(new)
        if any(name not in new_req or new_req[name] < amount for name, amount in old_req.items()):
            actions.append(ActionType.UPDATE_POD_SCALE_DOWN)
        if any(amount > old_req.get(name, 0) for name, amount in new_req.items()) or \
                _held_went_up(old, new):
            actions.append(ActionType.UPDATE_POD_SCALE_UP)
    if not new.spec.scheduling_gates and old.spec.scheduling_gates:
        actions.append(ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if len(new.spec.tolerations) != len(old.spec.tolerations):
        actions.append(ActionType.UPDATE_POD_TOLERATION)
    if list(new.status.resource_claim_statuses) != list(old.status.resource_claim_statuses):
        actions.append(ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM)
    if not actions:
        actions.append(ActionType.UPDATE_OTHER)
    return [ClusterEvent(resource, a) for a in actions]


def _held_went_up(old: core_pb2.Pod, new: core_pb2.Pod) -> bool:
    """Whether what the kubelet holds for the pod (max(allocated, actual)) went up in anything."""
    before, after = pod_requests(old, ignore_desired=True), pod_requests(new, ignore_desired=True)
    return any(amount > before.get(name, 0) for name, amount in after.items())


def _resources_may_differ(new: core_pb2.Pod, old: core_pb2.Pod) -> bool:
    """Whether anything a pod's requests are computed from changed (spec containers, overhead,
    pod-level resources, the resize conditions, the containers' reported resources)."""
    ns, os_ = new.spec, old.spec
    if ns.containers != os_.containers or ns.init_containers != os_.init_containers or ns.overhead != os_.overhead \
            or ns.resources != os_.resources:
        return True
    nst, ost = new.status, old.status
    if [(c.name, c.allocated_resources, c.resources) for c in nst.container_statuses] != \
            [(c.name, c.allocated_resources, c.resources) for c in ost.container_statuses]:
        return True
    if [(c.name, c.allocated_resources, c.resources) for c in nst.init_container_statuses] != \
            [(c.name, c.allocated_resources, c.resources) for c in ost.init_container_statuses]:
        return True
    return [(c.type, c.reason) for c in nst.conditions if c.type == "PodResizePending"] != \
        [(c.type, c.reason) for c in ost.conditions if c.type == "PodResizePending"]


def node_scheduling_property_changes(new: core_pb2.Node, old: core_pb2.Node) -> list[ClusterEvent]:
    """Kubernetes' NodeSchedulingPropertiesChange."""
    actions: list[ActionType] = []
    if new.spec.unschedulable != old.spec.unschedulable and not new.spec.unschedulable:
        actions.append(ActionType.UPDATE_NODE_TAINT)  # becoming schedulable is treated as a taint change
    if dict(new.status.allocatable) != dict(old.status.allocatable):
        actions.append(ActionType.UPDATE_NODE_ALLOCATABLE)
    if dict(new.metadata.labels) != dict(old.metadata.labels):
        actions.append(ActionType.UPDATE_NODE_LABEL)
    if list(new.spec.taints) != list(old.spec.taints):
        actions.append(ActionType.UPDATE_NODE_TAINT)
    if {c.type: c.status for c in new.status.conditions} != {c.type: c.status for c in old.status.conditions}:
        actions.append(ActionType.UPDATE_NODE_CONDITION)
    if dict(new.metadata.annotations) != dict(old.metadata.annotations):
        actions.append(ActionType.UPDATE_NODE_ANNOTATION)
    out, seen = [], set()
    for a in actions:
        if a not in seen:
            seen.add(a)
            out.append(ClusterEvent(NODE, a))
    return out


# ---------------------------------------------------------------- why a pod fits nowhere


NO_NODE_AVAILABLE = "0/{} nodes are available"


@dataclass
class Diagnosis:
    """Per node statuses of a failed attempt, and which plugins rejected the pod."""

    node_to_status: dict[str, Status] = field(default_factory=dict)
    # Nodes a PreFilterResult ruled out get this status (not stored per node).
    absent_nodes_status: Status | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""

    def status_of(self, node: str) -> Status | None:
        return self.node_to_status.get(node, self.absent_nodes_status)

    def reason_plugins(self) -> dict[str, str]:
        """Each reason of the FitError message with the plugin that gave it (``{"Insufficient
        cpu": "NodeResourcesFit"}``): what ``pod_unschedulable`` logs so ``kplane explain`` can
        name the plugin behind each count of the message."""
        out: dict[str, str] = {}
        statuses = list(self.node_to_status.values())
        if self.absent_nodes_status is not None:
            statuses.append(self.absent_nodes_status)
        for st in statuses:
            for r in st.reasons:
                out.setdefault(r, st.plugin)
        return out


class SchedulingError(Exception):
    """A scheduling cycle that could not run to a verdict: no nodes at all, or a plugin's Error
    (FitError is the other way a cycle fails: it ran, and no node fits)."""

    def __init__(self, status: Status):
        super().__init__(status.message())
        self.status = status


class FitError(Exception):
    """No node fits the pod. ``str()`` is kube-scheduler's message."""

    def __init__(self, pod: core_pb2.Pod, num_all_nodes: int, diagnosis: Diagnosis):
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        return fit_error_message(self.num_all_nodes, self.diagnosis)


def reasons_histogram(statuses: Iterable[Status | None]) -> str:
    """``"1 node(s) had untolerated taint {a: b}, 2 Insufficient cpu"`` (sorted, as kube-scheduler)."""
    counts: dict[str, int] = {}
    for st in statuses:
        if st is None:
            continue
        for r in st.reasons:
            counts[r] = counts.get(r, 0) + 1
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


def fit_error_message(num_all_nodes: int, d: Diagnosis, all_nodes: Iterable[str] = ()) -> str:
    msg = NO_NODE_AVAILABLE.format(num_all_nodes) + ":"
    if d.pre_filter_msg:
        msg += f" {d.pre_filter_msg}."
    else:
        statuses: list[Status | None] = list(d.node_to_status.values())
        if d.absent_nodes_status is not None:
            absent = num_all_nodes - len(d.node_to_status)
            statuses += [d.absent_nodes_status] * max(absent, 0)
        histogram = reasons_histogram(statuses)
        if histogram:
            msg += f" {histogram}."
    if d.post_filter_msg:
        msg += f" {d.post_filter_msg}"
    return msg
