"""NodeResourcesBalancedAllocation: prefer the node whose resources would be used most evenly.

kube-scheduler's noderesources BalancedAllocation score plugin: ``(1 - std) * 100`` of the
fractions of the node's allocatable each resource would use with the pod there.

- ``NodeResourcesBalancedAllocation.pre_score`` / ``score``: which amounts count, per resource;
- ``balanced_score``: the score from those amounts;
- ``decode_args``: ``NodeResourcesBalancedAllocationArgs``, decoded strictly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from machinery import resources as res
from machinery.api import core_pb2
from scheduler.framework import plugin_args as pa
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import MAX_NODE_SCORE, Code, CycleState, StateData, Status

NAME = "NodeResourcesBalancedAllocation"
_SCORE_STATE_KEY = "PreScore" + NAME

ArgsError = pa.ArgsError
ResourceSpec = pa.ResourceSpec
DEFAULT_RESOURCES = pa.DEFAULT_RESOURCES


@dataclass(frozen=True)
class NodeResourcesBalancedAllocationArgs:
    """kube-scheduler's NodeResourcesBalancedAllocationArgs, with its v1 defaults: ``resources``, a
    list of ``{name, weight}``, cpu and memory when left out or empty (the v1 defaults also turn a
    weight left out or 0 into 1)."""

    resources: tuple[ResourceSpec, ...] = DEFAULT_RESOURCES


def decode_args(raw: Any, path: str = "") -> NodeResourcesBalancedAllocationArgs:
    """NodeResourcesBalancedAllocationArgs from a pluginConfig entry's ``args``, decoded strictly;
    ArgsError names the bad field. Names must be unique and, as kube-scheduler validates, every
    weight must be 1 (the score is unweighted)."""
    fields = pa.fields(raw, path, NAME, ("resources",))
    where = pa.join(path, "resources")
    specs = pa.resource_specs(fields.get("resources"), where)
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if spec.name in seen:
            raise ArgsError(f'{where}[{i}].name: Duplicate value: "{spec.name}"')
        seen.add(spec.name)
        if spec.weight != 1:
            raise ArgsError(f"{where}[{i}].weight: Invalid value: {spec.weight}: must be 1")
    return NodeResourcesBalancedAllocationArgs(specs)


@dataclass(frozen=True)
class _PodRequests(StateData):
    amounts: tuple[int, ...]  # aligned with the plugin's resources


def balanced_score(requested: list[int], allocatable: list[int]) -> int:
    """kube-scheduler's balancedResourceScorer: (1 - std of the used fractions) * 100, truncated.

    A fraction is of the node's allocatable that would be requested with the pod there, capped at
    1; ``std`` is the standard deviation of those fractions: ``|f1 - f2| / 2`` for two resources, the
    population standard deviation for more, 0 for one. A resource the node has none of is left out."""
    fractions: list[float] = []
    for req, alloc in zip(requested, allocatable, strict=True):
        if alloc == 0:
            continue
        fractions.append(min(req / alloc, 1.0))
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) * (f - mean) for f in fractions) / len(fractions))
    return int((1 - std) * MAX_NODE_SCORE)


class NodeResourcesBalancedAllocation:
    """The score plugin. It has no Filter, so it rejects nothing and registers no events."""

    name = NAME

    def __init__(self, args: NodeResourcesBalancedAllocationArgs, handle: Any = None):
        self.resources = tuple(spec.name for spec in args.resources)
        self._cpu_memory = self.resources == (res.CPU, res.MEMORY)  # the default: a fast path below

    def _pod_requests(self, pod: core_pb2.Pod) -> _PodRequests:
        requests = res.pod_requests(pod)
        return _PodRequests(tuple(requests.get(name, 0) for name in self.resources))

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes) -> Status | None:
        """Compute the pod's requests once, and Skip the plugin for a pod that requests none of the
        resources (a best-effort pod: scoring it would pile such pods onto one node,
        kubernetes#129138).

        The pod side is its plain requests (PodRequests: overhead and pod-level resources included,
        the KEP-1287 rule for a pod that reports resources, no defaults for containers that request
        nothing)."""
        req = self._pod_requests(pod)
        if not any(req.amounts):
            return Status(Code.SKIP)  # best effort: every node would look perfectly balanced
        state.write(_SCORE_STATE_KEY, req)
        return None

    def score_nodes(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> list[int] | None:
        """``score`` of every node at once (the framework's BatchScorePlugin): the cpu-and-memory
        arithmetic inlined; a node without cpu or memory allocatable is scored by ``score``."""
        req = state.get(_SCORE_STATE_KEY)
        if req is None or not self._cpu_memory:
            return None
        want_cpu, want_mem = req.amounts[0], req.amounts[1]
        out: list[int] = []
        for ni in nodes:
            alloc, used = ni.allocatable, ni.requested
            cap_cpu, cap_mem = alloc.milli_cpu, alloc.memory
            if not cap_cpu or not cap_mem:
                out.append(self.score(state, pod, ni)[0])
                continue
            f_cpu = (used.milli_cpu + want_cpu) / cap_cpu
            f_mem = (used.memory + want_mem) / cap_mem
            if f_cpu > 1.0:
                f_cpu = 1.0
            if f_mem > 1.0:
                f_mem = 1.0
            out.append(int((1 - abs((f_cpu - f_mem) / 2)) * MAX_NODE_SCORE))
        return out

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        """For each resource in ``resources`` (default cpu and memory), the fraction of the node's
        allocatable that would be requested with the pod there — (node's requested + pod's request) /
        allocatable, capped at 1 — scored by ``balanced_score``. A resource the node has none of is
        left out, and so is an extended resource the pod does not request.

        Like kube-scheduler (``useRequested: true`` in its NewBalancedAllocation), the node side is
        NodeInfo ``requested`` — what the node's pods actually request, not ``non_zero_requested``
        with the 100m / 200Mi defaults LeastAllocated uses."""
        req = state.get(_SCORE_STATE_KEY)
        if req is None:  # PreScore did not run
            req = self._pod_requests(pod)
            if not any(req.amounts):
                return 0, None
        alloc, used = ni.allocatable, ni.requested
        if self._cpu_memory and alloc.milli_cpu and alloc.memory:
            # The same arithmetic as balanced_score for two resources, without the lists.
            f_cpu = min((used.milli_cpu + req.amounts[0]) / alloc.milli_cpu, 1.0)
            f_mem = min((used.memory + req.amounts[1]) / alloc.memory, 1.0)
            return int((1 - abs((f_cpu - f_mem) / 2)) * MAX_NODE_SCORE), None
        requested: list[int] = []
        allocatable: list[int] = []
        for name, want in zip(self.resources, req.amounts, strict=True):
            if name == res.CPU:
                cap, have = alloc.milli_cpu, used.milli_cpu
            elif name == res.MEMORY:
                cap, have = alloc.memory, used.memory
            elif name == res.EPHEMERAL_STORAGE:
                cap, have = alloc.ephemeral_storage, used.ephemeral_storage
            elif want == 0 and res.is_scalar_resource(name):
                continue  # an extended resource the pod does not request is not scored
            elif name in alloc.scalar:
                cap, have = alloc.scalar[name], used.scalar.get(name, 0)
            else:
                continue  # the node does not offer it
            if cap == 0:
                continue
            allocatable.append(cap)
            requested.append(have + want)
        return balanced_score(requested, allocatable), None


def new(args: NodeResourcesBalancedAllocationArgs | Mapping[str, Any] | None,
        handle: Any) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(
        pa.typed(args, NodeResourcesBalancedAllocationArgs, decode_args, NAME), handle)
