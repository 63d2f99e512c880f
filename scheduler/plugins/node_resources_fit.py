"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be?

kube-scheduler's noderesources Fit plugin.

- ``NodeResourcesFit.pre_filter`` / ``filter``: the pod's requests against the node's free room.
- ``NodeResourcesFit.pre_score`` / ``score``: how full the node would be, by ``scoringStrategy``.
- ``NodeResourcesFit.events_to_register``: what makes a pod this plugin rejected schedulable.
- ``decode_args``: ``NodeResourcesFitArgs``, decoded strictly.
- A bound pod whose resize is Deferred (KEP-5836) is checked on its own node only:
  ``NodeResourcesFit._filter_deferred``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from machinery import fit, resources
from machinery.api import core_pb2
from machinery.fit import Resource
from machinery.resources import is_scalar_resource
from machinery.selectors import validate_label_key
from scheduler.framework import plugin_args as pa
from scheduler.framework.deferred_resize import is_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    NODE,
    POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    PreFilterResult,
    QueueingHint,
    StateData,
    Status,
)

NAME = "NodeResourcesFit"
_STATE_KEY = "PreFilter" + NAME
_SCORE_STATE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
MAX_CUSTOM_PRIORITY_SCORE = 10  # RequestedToCapacityRatio shape scores are 0..10

SCORING_STRATEGY_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)

ALL_PODS_AT_MAX = "AllPodsAtMax"
KUBELET_CONSISTENT = "KubeletConsistent"
DEFERRED_RESIZE_ACCOUNTINGS = (ALL_PODS_AT_MAX, KUBELET_CONSISTENT)

ArgsError = pa.ArgsError
ResourceSpec = pa.ResourceSpec
DEFAULT_RESOURCES = pa.DEFAULT_RESOURCES


# ---------------------------------------------------------------- args


@dataclass(frozen=True)
class UtilizationShapePoint:
    utilization: int  # 0..100 (percent of the node's allocatable requested)
    score: int  # 0..10


@dataclass(frozen=True)
class RequestedToCapacityRatioParam:
    shape: tuple[UtilizationShapePoint, ...] = ()


@dataclass(frozen=True)
class ScoringStrategy:
    type: str = LEAST_ALLOCATED
    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None


@dataclass(frozen=True)
class NodeResourcesFitArgs:
    """kube-scheduler's NodeResourcesFitArgs, with its v1 defaults.

    ``ignoredResources`` and ``ignoredResourceGroups`` name extended resources the Filter does not
    check. ``scoringStrategy`` is ``{type, resources: [{name, weight}], requestedToCapacityRatio:
    {shape: [{utilization, score}]}}``; left out, the strategy is LeastAllocated over cpu and memory;
    given, its ``type`` is required, ``resources`` default to cpu and memory and a weight left out or
    0 is 1.

    ``deferredResizeAccounting`` (kplane's) chooses how the node's other pods count against a
    deferred resize (KEP-5836 "Risk of Additional Preemption"; ``NodeResourcesFit._filter_deferred``):
    ``AllPodsAtMax`` (default, the alpha behaviour), as for new pods, max(desired, allocated,
    actual) — another pod's pending resize keeps its room, which can preempt more than needed;
    ``KubeletConsistent``, as the kubelet decides a resize, max(allocated, actual), their own pending
    resizes ignored; the resizing pod still counts at max(desired, allocated, actual).
    """

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = ScoringStrategy()
    # kplane's: how a deferred resize's node counts its other pods (KEP-5836 "Risk of Additional Preemption").
    deferred_resize_accounting: str = ALL_PODS_AT_MAX


def _decode_shape(raw: Any, path: str) -> tuple[UtilizationShapePoint, ...]:
    points = []
    for i, item in enumerate(pa.listing(raw, path) if raw is not None else []):
        here = f"{path}[{i}]"
        fields = pa.mapping(item, here)
        pa.check_fields(fields, ("utilization", "score"), here)
        points.append(UtilizationShapePoint(pa.integer(fields.get("utilization", 0), f"{here}.utilization"),
                                            pa.integer(fields.get("score", 0), f"{here}.score")))
    if not points:
        raise ArgsError(f"{path}: Required value: at least one point must be specified")
    for i in range(1, len(points)):
        if points[i - 1].utilization >= points[i].utilization:
            raise ArgsError(f"{path}[{i}].utilization: Invalid value: {points[i].utilization}: values must be "
                            f"sorted in increasing order")
    for i, point in enumerate(points):
        if not 0 <= point.utilization <= 100:
            raise ArgsError(f"{path}[{i}].utilization: Invalid value: {point.utilization}: not in valid range "
                            f"[0, 100]")
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ArgsError(f"{path}[{i}].score: Invalid value: {point.score}: not in valid range "
                            f"[0, {MAX_CUSTOM_PRIORITY_SCORE}]")
    return tuple(points)


def _decode_strategy(raw: Any, path: str) -> ScoringStrategy:
    if raw is None:
        return ScoringStrategy()
    fields = pa.mapping(raw, path)
    pa.check_fields(fields, ("type", "resources", "requestedToCapacityRatio"), path)
    kind = pa.string(fields.get("type", ""), f"{path}.type")
    if kind not in SCORING_STRATEGY_TYPES:
        raise ArgsError(f'{path}.type: Unsupported value: "{kind}": supported values: '
                        + ", ".join(f'"{t}"' for t in SCORING_STRATEGY_TYPES))
    specs = pa.resource_specs(fields.get("resources"), f"{path}.resources")
    for i, spec in enumerate(specs):
        if not 0 < spec.weight <= 100:
            raise ArgsError(f"{path}.resources[{i}].weight: Invalid value: {spec.weight}: resource weight of "
                            f"{spec.name} not in valid range (0, 100]")
    ratio_path = f"{path}.requestedToCapacityRatio"
    raw_ratio = fields.get("requestedToCapacityRatio")
    ratio = None
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        if raw_ratio is None:
            raise ArgsError(f"{ratio_path}: Required value: must be specified when type is RequestedToCapacityRatio")
        ratio_fields = pa.mapping(raw_ratio, ratio_path)
        pa.check_fields(ratio_fields, ("shape",), ratio_path)
        ratio = RequestedToCapacityRatioParam(_decode_shape(ratio_fields.get("shape"), f"{ratio_path}.shape"))
    elif raw_ratio is not None:
        raise ArgsError(f"{ratio_path}: Forbidden: must be nil when type is not RequestedToCapacityRatio")
    return ScoringStrategy(kind, specs, ratio)


def decode_args(raw: Any, path: str = "") -> NodeResourcesFitArgs:
    """NodeResourcesFitArgs from a pluginConfig entry's ``args``, decoded strictly with kube-scheduler's
    v1 defaults and validation_pluginargs.go's checks; ArgsError names the bad field."""
    fields = pa.fields(raw, path, NAME, ("ignoredResources", "ignoredResourceGroups", "scoringStrategy",
                                         "deferredResizeAccounting"))
    ignored = pa.strings(fields.get("ignoredResources"), pa.join(path, "ignoredResources"))
    for i, name in enumerate(ignored):
        reason = validate_label_key(name)
        if reason:
            raise ArgsError(f'{pa.join(path, "ignoredResources")}[{i}]: Invalid value: "{name}": {reason}')
    groups = pa.strings(fields.get("ignoredResourceGroups"), pa.join(path, "ignoredResourceGroups"))
    for i, group in enumerate(groups):
        here = f'{pa.join(path, "ignoredResourceGroups")}[{i}]'
        if "/" in group:
            raise ArgsError(f"{here}: Invalid value: \"{group}\": resource group name can't contain '/'")
        reason = validate_label_key(group)
        if reason:
            raise ArgsError(f'{here}: Invalid value: "{group}": {reason}')
    strategy = _decode_strategy(fields.get("scoringStrategy"), pa.join(path, "scoringStrategy"))
    accounting_path = pa.join(path, "deferredResizeAccounting")
    accounting = pa.string(fields.get("deferredResizeAccounting", ALL_PODS_AT_MAX), accounting_path)
    if accounting not in DEFERRED_RESIZE_ACCOUNTINGS:
        raise ArgsError(f'{accounting_path}: Unsupported value: "{accounting}": supported values: '
                        + ", ".join(f'"{a}"' for a in DEFERRED_RESIZE_ACCOUNTINGS))
    return NodeResourcesFitArgs(ignored, groups, strategy, accounting)


@dataclass(frozen=True)
class _PodRequest(StateData):
    resource: Resource


@dataclass(frozen=True)
class _DeferredRequest(StateData):
    """A deferred resize's request, from the queue's copy of the pod (KEP-5836)."""

    resource: Resource
    uid: str


def _kubelet_view(pi: PodInfo) -> Resource:
    """What the kubelet counts for a pod it is not resizing: max(allocated, actual)."""
    return Resource.of(resources.pod_requests(pi.pod, ignore_desired=True))


def _compute_request(pod: core_pb2.Pod) -> _PodRequest:
    return _PodRequest(Resource.of(resources.pod_requests(pod)))


def fits_request(req: _PodRequest, ni: NodeInfo, ignored: frozenset[str] = frozenset(),
                 ignored_groups: frozenset[str] = frozenset()) -> list[fit.Insufficient]:
    """Kubernetes' fitsRequest on a NodeInfo: every resource the pod lacks on this node."""
    return fit.fits_request(req.resource, ni.allocatable, ni.requested, len(ni.pods), ignored, ignored_groups)


def _unfit_status(lacking: list[fit.Insufficient]) -> Status | None:
    """What the pod lacks as the filter's Status: Unschedulable, or UnschedulableAndUnresolvable
    when something is beyond the node's allocatable (no preemption can help)."""
    if not lacking:
        return None
    reasons, unresolvable = [], False
    for i in lacking:
        reasons.append(i.reason)
        unresolvable = unresolvable or i.unresolvable
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE, *reasons)


# ---------------------------------------------------------------- scoring strategies


def _least(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def _most(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


def broken_linear(shape: list[tuple[int, int]]):
    """Kubernetes' helper.BuildBrokenLinearFunction over (utilization, score) points."""

    def f(p: int) -> int:
        for i, (u, s) in enumerate(shape):
            if p <= u:
                if i == 0:
                    return shape[0][1]
                u0, s0 = shape[i - 1]
                return s0 + (s - s0) * (p - u0) // (u - u0)
        return shape[-1][1]

    return f


class _Scorer:
    """One ``scoringStrategy`` (Kubernetes docs: Resource Bin Packing): ``LeastAllocated`` (the
    default: spread), ``MostAllocated`` (bin pack) or ``RequestedToCapacityRatio`` (a piecewise-linear
    shape of utilization), each a weighted average over ``resources`` (default cpu and memory,
    weight 1)."""

    def __init__(self, strategy: str, spec: list[tuple[str, int]], shape: list[tuple[int, int]] | None):
        self.resources = spec
        self.strategy = strategy
        self.default = strategy == LEAST_ALLOCATED and spec == [("cpu", 1), ("memory", 1)]
        if strategy == LEAST_ALLOCATED:
            self.one = _least
        elif strategy == MOST_ALLOCATED:
            self.one = _most
        else:
            scaled = [(u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)) for u, s in shape or []]
            raw = broken_linear(scaled)

            def ratio(requested: int, capacity: int) -> int:
                if capacity == 0:
                    return raw(0)
                return raw(min(requested, capacity) * 100 // capacity)

            self.one = ratio

    def score_all(self, nodes: list[NodeInfo], pod_req: dict[str, int]) -> list[int]:
        """``score`` of each node; the default strategy's arithmetic inlined in one loop."""
        if not self.default:
            return [self.score(ni, pod_req) for ni in nodes]
        want_cpu, want_mem = pod_req.get("cpu", 0), pod_req.get("memory", 0)
        out: list[int] = []
        for ni in nodes:
            alloc = ni.allocatable
            cap_cpu, cap_mem = alloc.milli_cpu, alloc.memory
            if not cap_cpu or not cap_mem:
                out.append(self.score(ni, pod_req))
                continue
            nz = ni.non_zero_requested
            c, m = nz.milli_cpu + want_cpu, nz.memory + want_mem
            sc = (cap_cpu - c) * MAX_NODE_SCORE // cap_cpu if c <= cap_cpu else 0
            sm = (cap_mem - m) * MAX_NODE_SCORE // cap_mem if m <= cap_mem else 0
            out.append((sc + sm) // 2)
        return out

    def score(self, ni: NodeInfo, pod_req: dict[str, int]) -> int:
        alloc = ni.allocatable
        if self.default and alloc.milli_cpu and alloc.memory:
            # cpu and memory, weight 1 each, LeastAllocated: the same arithmetic, inlined.
            nz = ni.non_zero_requested
            c, m = nz.milli_cpu + pod_req.get("cpu", 0), nz.memory + pod_req.get("memory", 0)
            sc = (alloc.milli_cpu - c) * MAX_NODE_SCORE // alloc.milli_cpu if c <= alloc.milli_cpu else 0
            sm = (alloc.memory - m) * MAX_NODE_SCORE // alloc.memory if m <= alloc.memory else 0
            return (sc + sm) // 2
        total = weights = 0
        for name, weight in self.resources:
            want = pod_req.get(name, 0)
            if name == "cpu":
                cap, req = alloc.milli_cpu, ni.non_zero_requested.milli_cpu + want
            elif name == "memory":
                cap, req = alloc.memory, ni.non_zero_requested.memory + want
            elif name == "ephemeral-storage":
                cap, req = alloc.ephemeral_storage, ni.requested.ephemeral_storage + want
            else:
                if want == 0 and is_scalar_resource(name):
                    continue  # an extended resource the pod does not use is not scored
                cap = alloc.scalar.get(name, 0)
                req = ni.requested.scalar.get(name, 0) + want
            if cap == 0:
                continue
            total += self.one(req, cap) * weight
            weights += weight
        return total // weights if weights else 0


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: NodeResourcesFitArgs, handle: Any = None, features: Features = Features()):
        strategy = args.scoring_strategy
        shape = strategy.requested_to_capacity_ratio
        self.scorer = _Scorer(strategy.type, [(r.name, r.weight) for r in strategy.resources],
                              [(p.utilization, p.score) for p in shape.shape] if shape is not None else None)
        self.ignored = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        self.in_place_resize = features.enable_in_place_pod_vertical_scaling
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize
        self.kubelet_consistent = args.deferred_resize_accounting == KUBELET_CONSISTENT

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[PreFilterResult | None, Status | None]:
        """Compute the pod's requests once: overhead included, and for a pod already reporting status
        the KEP-1287 rule (pods being scheduled have none yet); for a deferred resize, the queue's
        copy's requests (``_DeferredRequest``)."""
        if self.deferred_resizes and is_deferred_resize(pod):
            state.write(_STATE_KEY, _DeferredRequest(Resource.of(resources.pod_requests(pod)), pod.metadata.uid))
            return None, None
        state.write(_STATE_KEY, _compute_request(pod))
        return None, None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        """``Too many pods`` when the node is at its pod count; ``Insufficient <resource>`` for each
        resource the pod asks more of than allocatable minus what the node's pods hold (the node's
        pods count for max(desired unless Infeasible, allocated, actual), so a pending resize keeps
        its room). When the request exceeds the node's whole allocatable, no preemption can help:
        UnschedulableAndUnresolvable (``_unfit_status``). A deferred resize: ``_filter_deferred``."""
        req = state.get(_STATE_KEY)
        if req is None:
            if self.deferred_resizes and is_deferred_resize(pod):
                req = _DeferredRequest(Resource.of(resources.pod_requests(pod)), pod.metadata.uid)
            else:
                req = _compute_request(pod)
        if isinstance(req, _DeferredRequest):
            return self._filter_deferred(req, ni)
        r, alloc, used = req.resource, ni.allocatable, ni.requested
        if (len(ni.pods) < alloc.allowed_pod_number and r.milli_cpu <= alloc.milli_cpu - used.milli_cpu
                and r.memory <= alloc.memory - used.memory and not r.scalar
                and r.ephemeral_storage <= alloc.ephemeral_storage - used.ephemeral_storage):
            return None  # the common case, decided without building the list of what is lacking
        return _unfit_status(fit.fits_request(r, alloc, used, len(ni.pods), self.ignored, self.ignored_groups))

    def _filter_deferred(self, req: _DeferredRequest, ni: NodeInfo) -> Status | None:
        """Does the resize fit the node the pod runs on? (KEP-5836, the SchedulerPreemptionForPodResize
        gate: a bound pod whose resize is Deferred is checked on its own node only, "NodeResourcesFit
        Plugin: Calculating Resource Fit in the Filter Phase".)

        The cache already holds the pod, at max(desired, allocated, actual), so it is not counted
        twice: against the node's free room only what the queue's copy asks beyond the cache's copy
        counts (the two may diverge for a moment; the larger wins), and the pod-count check is
        skipped (the pod is on the node). The node's other pods count as ``deferredResizeAccounting``
        says (``NodeResourcesFitArgs``). When it fits, the scheduler parks the pod
        (``schedule_deferred_resize``: "pod resize fits, waiting for Kubelet actuation", recorded as
        this plugin's UnschedulableAndUnresolvable)."""
        own = next((pi for pi in ni.pods if pi.pod.metadata.uid == req.uid), None)
        want = req.resource.clone()
        if own is not None:
            for name, amount in own.requests.items():
                if amount > want.get(name):
                    want.add({name: amount - want.get(name)})
        if self.kubelet_consistent:
            used = Resource()
            for pi in ni.pods:
                if pi is not own:
                    used.add(_kubelet_view(pi).as_dict())
        else:
            used = ni.requested.clone()
            if own is not None:
                used.add(own.requests, -1)
        # Already on the node: no pod slot to find.
        return _unfit_status(fit.fits_request(want, ni.allocatable, used, None, self.ignored, self.ignored_groups))

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes) -> Status | None:
        """The pod's requests for scoring: containers that request no cpu/memory count as 100m / 200Mi
        here, as in Kubernetes."""
        req = resources.pod_requests(pod, non_missing=resources.NON_ZERO_DEFAULTS)
        state.write(_SCORE_STATE_KEY, req)
        return None

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        req = state.get(_SCORE_STATE_KEY)
        if req is None:
            req = resources.pod_requests(pod, non_missing=resources.NON_ZERO_DEFAULTS)
        return self.scorer.score(ni, req), None

    def score_nodes(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> list[int] | None:
        """``score`` of every node at once (the framework's BatchScorePlugin)."""
        req = state.get(_SCORE_STATE_KEY)
        if req is None:
            req = resources.pod_requests(pod, non_missing=resources.NON_ZERO_DEFAULTS)
        return self.scorer.score_all(nodes, req)

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_actions = ActionType.DELETE
        if self.in_place_resize:
            # A pod scaled down in place (KEP-1287) frees room as a deletion does.
            pod_actions |= ActionType.UPDATE_POD_SCALE_DOWN
        if self.deferred_resizes:
            # Another pod's resize may take the room a parked deferred resize waits for (KEP-5836
            # "Reconsideration Race Conditions"), and a deferred pod's own new request needs a new look.
            pod_actions |= ActionType.UPDATE_POD_SCALE_UP
        node_actions = (ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_TAINT
                        | ActionType.UPDATE_NODE_LABEL)
        return [ClusterEventWithHint(ClusterEvent(POD, pod_actions), self.is_schedulable_after_pod_event),
                ClusterEventWithHint(ClusterEvent(NODE, node_actions), self.is_schedulable_after_node_change)]

    def is_schedulable_after_pod_event(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue for an assigned pod deleted (its requests leave the node), an assigned pod scaled down
        (KEP-1287 in-place resize) in a resource the pod asks for, or the pod itself scaled down while
        pending. A deferred resize: ``_deferred_after_pod_event``."""
        if pod.spec.node_name:
            return self._deferred_after_pod_event(pod, old, new)
        if new is None:  # deleted
            # An unscheduled pod's deletion frees nothing; an assigned pod's frees its requests.
            return QueueingHint.QUEUE if old is not None and old.spec.node_name else QueueingHint.QUEUE_SKIP
        if not self.in_place_resize or old is None:
            return QueueingHint.QUEUE_SKIP
        if not new.spec.node_name and new.metadata.uid != pod.metadata.uid:
            # Another unscheduled pod's resize frees nothing; the rejected pod's own scale-down
            # (a pending pod resized, KEP-1287 scheduler logic step 2) may make it fit.
            return QueueingHint.QUEUE_SKIP
        wanted = resources.pod_requests(pod)
        before, after = PodInfo(old).requests, PodInfo(new).requests
        for name, amount in before.items():
            if wanted.get(name, 0) > 0 and after.get(name, 0) < amount:
                return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def _deferred_after_pod_event(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Node-aware hints for a deferred resize (KEP-5836 "Failures and Reconsideration"): only
        what happens on its own node can change its outcome. An event on another node is QueueSkip;
        on its node a pod deleted or scaled down, or — for a parked pod whose room another resize may
        take — another pod scaled up, are Queue; so is a change of the pod's own requests."""
        other = new if new is not None else old
        if other is None:
            return QueueingHint.QUEUE
        if other.metadata.uid == pod.metadata.uid:
            if old is None or new is None:
                return QueueingHint.QUEUE_SKIP
            # Its own request changed (a new resize before the last was actuated): look again.
            return QueueingHint.QUEUE if PodInfo(old).requests != PodInfo(new).requests else QueueingHint.QUEUE_SKIP
        if other.spec.node_name != pod.spec.node_name:
            return QueueingHint.QUEUE_SKIP
        if new is None:
            return QueueingHint.QUEUE  # a pod on its node deleted
        if old is None:
            return QueueingHint.QUEUE_SKIP
        # Scaled down: room freed. Scaled up (desired, or the kubelet's allocation): room a parked
        # resize counted on may be gone, and a preemption under way may need more victims.
        before, after = PodInfo(old).requests, PodInfo(new).requests
        if before != after:
            return QueueingHint.QUEUE
        held_before = resources.pod_requests(old, ignore_desired=True)
        held_after = resources.pod_requests(new, ignore_desired=True)
        return QueueingHint.QUEUE if held_before != held_after else QueueingHint.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue for a node added, or its allocatable raised, such that an empty node of that size would
        fit the pod. For a deferred resize, only its own node's allocatable raised."""
        if pod.spec.node_name:  # a deferred resize: its own node only, and only more room
            if new is None or new.metadata.name != pod.spec.node_name:
                return QueueingHint.QUEUE_SKIP
            if old is None:
                return QueueingHint.QUEUE
            before = resources.to_resource_list(old.status.allocatable)
            after = resources.to_resource_list(new.status.allocatable)
            return QueueingHint.QUEUE if any(after.get(n, 0) > v for n, v in before.items()) or \
                any(n not in before for n in after) else QueueingHint.QUEUE_SKIP
        req = _compute_request(pod)
        if fits_request(req, NodeInfo(new), self.ignored, self.ignored_groups):
            return QueueingHint.QUEUE_SKIP  # it would not fit even on the empty node
        if old is None:
            return QueueingHint.QUEUE
        # It fits the empty node, but only more of something it asks for can change anything.
        before = resources.to_resource_list(old.status.allocatable)
        after = resources.to_resource_list(new.status.allocatable)
        wanted = resources.pod_requests(pod)
        for name, amount in wanted.items():
            if amount and after.get(name, 0) > before.get(name, 0):
                return QueueingHint.QUEUE
        if after.get("pods", 0) > before.get("pods", 0):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP


def new(args: NodeResourcesFitArgs | Mapping[str, Any] | None, handle: Any) -> NodeResourcesFit:
    return NodeResourcesFit(pa.typed(args, NodeResourcesFitArgs, decode_args, NAME), handle, features_of(handle))
