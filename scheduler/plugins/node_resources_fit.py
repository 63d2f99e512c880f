"""NodeResourcesFit: does the node have room for the pod's requests, and how full would it be?

kube-scheduler's noderesources Fit plugin.

- PreFilter computes the pod's requests once (overhead included; for a pod already reporting
  status the KEP-1287 rule, though pods being scheduled have none yet).
- Filter: ``Too many pods`` when the node is at its pod count; ``Insufficient <resource>`` for
  each resource the pod asks more of than allocatable minus what the node's pods hold (the node's
  pods count for max(desired unless Infeasible, allocated, actual), so a pending resize keeps
  its room). When the request exceeds the node's whole allocatable, no preemption can help:
  UnschedulableAndUnresolvable.
- Score, by ``scoringStrategy`` (004 §10 "Resource Bin Packing"): ``LeastAllocated`` (default:
  spread), ``MostAllocated`` (bin pack) or ``RequestedToCapacityRatio`` (a piecewise-linear
  shape of utilization), each a weighted average over ``resources`` (default cpu and memory,
  weight 1). Containers that request no cpu/memory count as 100m / 200Mi here, as in Kubernetes.

What makes a pod this plugin rejected schedulable (its QueueingHints):
- an assigned pod deleted — its requests leave the node;
- an assigned pod scaled down (KEP-1287 in-place resize) in a resource the pod asks for, or the
  pod itself scaled down while pending;
- a node added, or its allocatable raised, such that an empty node of that size would fit the pod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from machinery import resources
from machinery.api import core_pb2
from scheduler.framework.node_info import NodeInfo, Resource, is_scalar_resource
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.types import (MAX_NODE_SCORE, ActionType, ClusterEvent, ClusterEventWithHint, Code,
                                       CycleState, PreFilterResult, QueueingHint, StateData, Status, NODE, POD)

NAME = "NodeResourcesFit"
_STATE_KEY = "PreFilter" + NAME
_SCORE_STATE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
MAX_CUSTOM_PRIORITY_SCORE = 10  # RequestedToCapacityRatio shape scores are 0..10

DEFAULT_RESOURCES = ({"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1})


class ArgsError(ValueError):
    pass


@dataclass(frozen=True)
class _PodRequest(StateData):
    resource: Resource
    empty: bool


def _compute_request(pod: core_pb2.Pod) -> _PodRequest:
    r = Resource.of(resources.pod_requests(pod))
    empty = not (r.milli_cpu or r.memory or r.ephemeral_storage or any(r.scalar.values()))
    return _PodRequest(r, empty)


@dataclass(frozen=True)
class Insufficient:
    resource: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool


def fits_request(req: _PodRequest, ni: NodeInfo, ignored: frozenset[str] = frozenset(),
                 ignored_groups: frozenset[str] = frozenset()) -> list[Insufficient]:
    """Kubernetes' fitsRequest: every resource the pod lacks on this node."""
    out: list[Insufficient] = []
    alloc, used = ni.allocatable, ni.requested
    if len(ni.pods) + 1 > alloc.allowed_pod_number:
        out.append(Insufficient("pods", "Too many pods", 1, len(ni.pods), alloc.allowed_pod_number, False))
    if req.empty:
        return out
    r = req.resource
    if r.milli_cpu > 0 and r.milli_cpu > alloc.milli_cpu - used.milli_cpu:
        out.append(Insufficient("cpu", "Insufficient cpu", r.milli_cpu, used.milli_cpu, alloc.milli_cpu,
                                r.milli_cpu > alloc.milli_cpu))
    if r.memory > 0 and r.memory > alloc.memory - used.memory:
        out.append(Insufficient("memory", "Insufficient memory", r.memory, used.memory, alloc.memory,
                                r.memory > alloc.memory))
    if r.ephemeral_storage > 0 and r.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
        out.append(Insufficient("ephemeral-storage", "Insufficient ephemeral-storage", r.ephemeral_storage,
                                used.ephemeral_storage, alloc.ephemeral_storage, r.ephemeral_storage > alloc.ephemeral_storage))
    for name, amount in r.scalar.items():
        if amount == 0 or name in ignored or name.split("/", 1)[0] in ignored_groups:
            continue
        free = alloc.scalar.get(name, 0) - used.scalar.get(name, 0)
        if amount > free:
            out.append(Insufficient(name, f"Insufficient {name}", amount, used.scalar.get(name, 0),
                                    alloc.scalar.get(name, 0), amount > alloc.scalar.get(name, 0)))
    return out


def _unfit_status(r: Resource, ni: NodeInfo, empty: bool, ignored: frozenset[str],
                  ignored_groups: frozenset[str]) -> Status | None:
    """fits_request's verdict as a Status, without building the Insufficient records (the filter
    runs this for every node a pod does not fit, and preemption's dry runs for many more)."""
    alloc, used = ni.allocatable, ni.requested
    reasons: list[str] = []
    unresolvable = False
    if len(ni.pods) + 1 > alloc.allowed_pod_number:
        reasons.append("Too many pods")
    if not empty:
        if r.milli_cpu > 0 and r.milli_cpu > alloc.milli_cpu - used.milli_cpu:
            reasons.append("Insufficient cpu")
            unresolvable = unresolvable or r.milli_cpu > alloc.milli_cpu
        if r.memory > 0 and r.memory > alloc.memory - used.memory:
            reasons.append("Insufficient memory")
            unresolvable = unresolvable or r.memory > alloc.memory
        if r.ephemeral_storage > 0 and r.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage:
            reasons.append("Insufficient ephemeral-storage")
            unresolvable = unresolvable or r.ephemeral_storage > alloc.ephemeral_storage
        for name, amount in r.scalar.items():
            if amount == 0 or name in ignored or name.split("/", 1)[0] in ignored_groups:
                continue
            capacity = alloc.scalar.get(name, 0)
            if amount > capacity - used.scalar.get(name, 0):
                reasons.append(f"Insufficient {name}")
                unresolvable = unresolvable or amount > capacity
    if not reasons:
        return None
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


def _parse_args(args: dict) -> tuple[_Scorer, frozenset[str], frozenset[str]]:
    strategy = args.get("scoringStrategy") or {}
    kind = strategy.get("type", LEAST_ALLOCATED)
    if kind not in (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO):
        raise ArgsError(f'scoringStrategy.type: Unsupported value: "{kind}": supported values: "LeastAllocated", '
                        f'"MostAllocated", "RequestedToCapacityRatio"')
    spec = []
    for i, r in enumerate(strategy.get("resources") or DEFAULT_RESOURCES):
        weight = r.get("weight", 1)
        if not isinstance(weight, int) or weight < 1 or weight > 100:
            raise ArgsError(f"scoringStrategy.resources[{i}].weight: Invalid value: {weight}: resource weight of "
                            f"{r.get('name')} should be in the range [1, 100]")
        spec.append((r["name"], weight))
    shape = None
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        points = (strategy.get("requestedToCapacityRatio") or {}).get("shape") or []
        if not points:
            raise ArgsError("scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point "
                            "must be specified")
        shape = []
        for i, p in enumerate(points):
            u, s = p.get("utilization", 0), p.get("score", 0)
            if not 0 <= u <= 100:
                raise ArgsError(f"scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: Invalid value: "
                                f"{u}: utilization values must not be less than 0 or greater than 100")
            if not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
                raise ArgsError(f"scoringStrategy.requestedToCapacityRatio.shape[{i}].score: Invalid value: {s}: "
                                f"score values must not be less than 0 or greater than 10")
            if shape and u <= shape[-1][0]:
                raise ArgsError(f"scoringStrategy.requestedToCapacityRatio.shape[{i}].utilization: Invalid value: "
                                f"{u}: utilization values must be sorted in increasing order")
            shape.append((u, s))
    return (_Scorer(kind, spec, shape), frozenset(args.get("ignoredResources") or ()),
            frozenset(args.get("ignoredResourceGroups") or ()))


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: dict, handle: Any = None):
        self.scorer, self.ignored, self.ignored_groups = _parse_args(args)
        self.in_place_resize = args.get("enableInPlacePodVerticalScaling", True)

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[PreFilterResult | None, Status | None]:
        state.write(_STATE_KEY, _compute_request(pod))
        return None, None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        req = state.get(_STATE_KEY)
        if req is None:
            req = _compute_request(pod)
        r, alloc, used = req.resource, ni.allocatable, ni.requested
        if (len(ni.pods) < alloc.allowed_pod_number and r.milli_cpu <= alloc.milli_cpu - used.milli_cpu
                and r.memory <= alloc.memory - used.memory and not r.scalar
                and r.ephemeral_storage <= alloc.ephemeral_storage - used.ephemeral_storage):
            return None  # the common case, decided without building the list of what is lacking
        return _unfit_status(r, ni, req.empty, self.ignored, self.ignored_groups)

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes) -> Status | None:
        req = resources.pod_requests(pod, non_missing=resources.NON_ZERO_DEFAULTS)
        state.write(_SCORE_STATE_KEY, req)
        return None

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        req = state.get(_SCORE_STATE_KEY)
        if req is None:
            req = resources.pod_requests(pod, non_missing=resources.NON_ZERO_DEFAULTS)
        return self.scorer.score(ni, req), None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_actions = ActionType.DELETE
        if self.in_place_resize:
            # A pod scaled down in place (KEP-1287) frees room as a deletion does.
            pod_actions |= ActionType.UPDATE_POD_SCALE_DOWN
        node_actions = (ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE | ActionType.UPDATE_NODE_TAINT
                        | ActionType.UPDATE_NODE_LABEL)
        return [ClusterEventWithHint(ClusterEvent(POD, pod_actions), self.is_schedulable_after_pod_event),
                ClusterEventWithHint(ClusterEvent(NODE, node_actions), self.is_schedulable_after_node_change)]

    def is_schedulable_after_pod_event(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
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

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
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


def new(args: dict, handle: Any) -> NodeResourcesFit:
    return NodeResourcesFit(args, handle)
