"""The structured-parameters allocator (Kubernetes' k8s.io/dynamic-resource-allocation/structured).

Kubernetes docs: Dynamic Resource Allocation, "With structured parameters": the scheduler
"retriev[es] the full list of available resources from ResourceSlice objects, track[s] which of
those resources have already been allocated to existing ResourceClaims, and then select[s] from
those resources that remain."

- ``Allocator``: the claims' requests, prepared once; ``Allocator.allocate`` answers for one node;
- ``usable_devices``: the devices a node's ResourceSlices offer (``UsableDevices``: remembered per
  node while its and its slices' versions hold); ``Allocator._search`` picks them;
- ``AllocationError``: what is wrong with the claims themselves, whatever the node.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from machinery.api import core_pb2, resource_pb2
from machinery.dra.selectors import DeviceSelector, SelectorError, compile_selectors
from machinery.placement import NodeSelector

EXACT_COUNT: Final = "ExactCount"
ALL: Final = "All"
# Steps the backtracking search may take for one node before it gives the node up.
SEARCH_BUDGET: Final = 100_000


class DeviceID(NamedTuple):
    """A device, cluster-wide: its driver, pool and name (Kubernetes' DeviceID)."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


def allocated_device_ids(claim: resource_pb2.ResourceClaim) -> list[DeviceID]:
    """The devices a claim's ``status.allocation`` holds (none when it is not allocated)."""
    if not claim.status.HasField("allocation"):
        return []
    return [DeviceID(r.driver, r.pool, r.device) for r in claim.status.allocation.devices.results]


class AllocationError(Exception):
    """The claims cannot be allocated on any node as they are: the error is about the claims
    themselves, whatever the node — a selector kplane cannot evaluate, a missing DeviceClass, or a
    feature kplane's allocator does not have (``firstAvailable`` subrequests, ``constraints``,
    ``adminAccess``)."""


@dataclass(frozen=True)
class _Request:
    claim: int  # index into the allocator's claims
    name: str
    class_name: str
    selectors: tuple[DeviceSelector, ...]  # the class's, then the request's
    all_devices: bool
    count: int


@dataclass(frozen=True)
class _Candidate:
    id: DeviceID
    device: resource_pb2.Device
    slice: resource_pb2.ResourceSlice


Picks = list[list[_Candidate]]  # per request of the allocator, the devices it takes


@dataclass
class NodeDevices:
    """The devices a node's slices offer, in order, and per set of selectors (by their expressions)
    those that match them: both fixed while the node and its slices are (``UsableDevices``)."""
    candidates: list[_Candidate]
    _matching: dict[tuple[str, ...], list[_Candidate]] = field(default_factory=dict)

    def matching(self, selectors: tuple[DeviceSelector, ...]) -> list[_Candidate]:
        """The candidates every one of ``selectors`` matches (shared: not to be changed)."""
        key = tuple(s.expression for s in selectors)
        found = self._matching.get(key)
        if found is None:
            found = self._matching[key] = [d for d in self.candidates
                                           if all(s.matches(d.id.driver, d.device) for s in selectors)]
        return found


def _claim_key(claim: resource_pb2.ResourceClaim) -> str:
    return f"{claim.metadata.namespace}/{claim.metadata.name}"


class Allocator:
    """Allocation of ``claims`` (none allocated yet), node by node.

    ``Allocator(claims, get_class, is_allocated)`` prepares the requests of claims not yet allocated
    once (their DeviceClass's selectors and their own, compiled by ``machinery.dra.selectors``), then
    ``allocate(node, slices)`` answers for one node: one ``AllocationResult`` per claim, or None when
    the node's free devices cannot satisfy them all.
    """

    def __init__(self, claims: Sequence[resource_pb2.ResourceClaim],
                 get_class: Callable[[str], resource_pb2.DeviceClass | None],
                 is_allocated: Callable[[DeviceID], bool]):
        self.claims = list(claims)
        self._is_allocated = is_allocated
        self._requests: list[_Request] = []
        class_selectors: dict[str, tuple[DeviceSelector, ...]] = {}
        for i, claim in enumerate(self.claims):
            devices = claim.spec.devices
            if devices.constraints:
                raise AllocationError(f"claim {_claim_key(claim)}: constraints are not supported by kplane's "
                                      f"allocator")
            for request in devices.requests:
                where = f"claim {_claim_key(claim)}, request {request.name}"
                if request.first_available or not request.HasField("exactly"):
                    raise AllocationError(f"{where}: firstAvailable is not supported by kplane's allocator")
                exactly = request.exactly
                if exactly.HasField("admin_access") and exactly.admin_access:
                    raise AllocationError(f"{where}: adminAccess is not supported by kplane's allocator")
                name = exactly.device_class_name
                if name not in class_selectors:
                    device_class = get_class(name)
                    if device_class is None:
                        raise AllocationError(f"{where}: device class {name} does not exist")
                    try:
                        class_selectors[name] = compile_selectors(list(device_class.spec.selectors))
                    except SelectorError as exc:
                        raise AllocationError(f"device class {name}: {exc}") from None
                try:
                    own = compile_selectors(list(exactly.selectors))
                except SelectorError as exc:
                    raise AllocationError(f"{where}: {exc}") from None
                mode = exactly.allocation_mode or EXACT_COUNT
                self._requests.append(_Request(i, request.name, name, class_selectors[name] + own, mode == ALL,
                                               exactly.count or 1))

    def allocate(self, node: core_pb2.Node,
                 slices: Iterable[resource_pb2.ResourceSlice]) -> list[resource_pb2.AllocationResult] | None:
        """One allocation per claim (in the claims' order) from the devices ``slices`` offer on
        ``node``; None when they do not suffice."""
        picks = self.pick(usable_devices(node, slices))
        return None if picks is None else self.results(node.metadata.name, picks)

    def pick(self, devices: NodeDevices) -> Picks | None:
        """The devices each request takes of a node's ``devices`` (None when they do not suffice),
        without the allocation objects: a Filter visits many nodes and Reserve needs the results of one."""
        return self._search(devices)

    def results(self, node_name: str, picks: Picks) -> list[resource_pb2.AllocationResult]:
        """One ``AllocationResult`` per claim from ``pick``'s answer for the node ``node_name``."""
        results = [resource_pb2.AllocationResult() for _ in self.claims]
        node_local: list[bool] = [False] * len(self.claims)
        selectors: list[core_pb2.NodeSelector | None] = [None] * len(self.claims)
        for request, chosen in zip(self._requests, picks, strict=True):
            out = results[request.claim]
            for c in chosen:
                out.devices.results.add(request=request.name, driver=c.id.driver, pool=c.id.pool, device=c.id.device)
                spec = c.slice.spec
                if spec.HasField("node_name"):
                    node_local[request.claim] = True
                elif spec.HasField("node_selector") and selectors[request.claim] is None:
                    selectors[request.claim] = spec.node_selector
        for i, out in enumerate(results):
            if node_local[i]:
                term = out.node_selector.node_selector_terms.add()
                term.match_fields.add(key="metadata.name", operator="In", values=[node_name])
            elif (sel := selectors[i]) is not None:
                out.node_selector.CopyFrom(sel)
        return results

    def _search(self, devices: NodeDevices) -> Picks | None:
        """Devices for every request, backtracking over the requests in order; None if none fit.

        A device on the node (``_usable_devices``) is usable for a request when ``is_allocated`` says
        it is free and every selector of the request's class and of the request matches. A request
        takes ``count`` devices (``ExactCount``) or every matching device, all of them free
        (``All``); no device goes to two requests. The search backtracks over the requests in order,
        so a request whose selectors only one device meets gets it even when an earlier, less
        particular request could have taken it.
        """
        candidates: list[list[_Candidate]] = []
        for request in self._requests:
            matching = devices.matching(request.selectors)
            if request.all_devices:
                if not matching or any(self._is_allocated(d.id) for d in matching):
                    return None
            else:
                matching = [d for d in matching if not self._is_allocated(d.id)]
                if len(matching) < request.count:
                    return None
            candidates.append(matching)
        taken: set[DeviceID] = set()
        picks: list[list[_Candidate]] = [[] for _ in self._requests]
        budget = [SEARCH_BUDGET]

        def fill(r: int, start: int) -> bool:
            if r == len(self._requests):
                return True
            budget[0] -= 1
            if budget[0] < 0:
                return False
            request, pool = self._requests[r], candidates[r]
            if request.all_devices:
                if any(d.id in taken for d in pool):
                    return False
                picks[r] = list(pool)
                taken.update(d.id for d in pool)
                if fill(r + 1, 0):
                    return True
                taken.difference_update(d.id for d in pool)
                picks[r] = []
                return False
            need = request.count - len(picks[r])
            if need == 0:
                return fill(r + 1, 0)
            for i in range(start, len(pool) - need + 1):
                d = pool[i]
                if d.id in taken:
                    continue
                taken.add(d.id)
                picks[r].append(d)
                if fill(r, i + 1):
                    return True
                picks[r].pop()
                taken.discard(d.id)
            return False

        return picks if fill(0, 0) else None


def _available_on(node: core_pb2.Node, spec: resource_pb2.ResourceSliceSpec) -> bool:
    if spec.HasField("node_name"):
        return spec.node_name == node.metadata.name
    if spec.HasField("node_selector"):
        return NodeSelector(spec.node_selector).matches(node)
    return spec.HasField("all_nodes") and spec.all_nodes


def usable_devices(node: core_pb2.Node, slices: Iterable[resource_pb2.ResourceSlice]) -> NodeDevices:
    """The devices ``slices`` offer on ``node`` (``_usable_devices``), not remembered."""
    return NodeDevices(_usable_devices(node, slices))


class UsableDevices:
    """Each node's usable devices, remembered while the node's and its slices' resourceVersions
    hold, with the devices each set of selectors matches: what a node's slices offer changes only
    when one of them does, yet every pod with a claim asks again for every node its Filter visits
    (100 nodes x 50 devices: most of the scheduler's CPU per such pod). One entry per node, the
    latest versions asked for; ``forget`` drops a node's when it or its slice goes. Objects without
    a resourceVersion (never stored) are not remembered. The scheduler's DRA manager holds one."""

    def __init__(self) -> None:
        self._by_node: dict[str, tuple[tuple[str, ...], NodeDevices]] = {}

    def get(self, node: core_pb2.Node, slices: Iterable[resource_pb2.ResourceSlice]) -> NodeDevices:
        slices = list(slices)
        name, node_rv = node.metadata.name, node.metadata.resource_version
        if not node_rv or not all(s.metadata.resource_version for s in slices):
            return usable_devices(node, slices)
        key = (node_rv, *(part for s in slices for part in (s.metadata.uid, s.metadata.resource_version)))
        known = self._by_node.get(name)
        if known is not None and known[0] == key:
            return known[1]
        found = usable_devices(node, slices)
        self._by_node[name] = (key, found)
        return found

    def forget(self, node_name: str) -> None:
        self._by_node.pop(node_name, None)

    def __len__(self) -> int:
        return len(self._by_node)


def _usable_devices(node: core_pb2.Node, slices: Iterable[resource_pb2.ResourceSlice]) -> list[_Candidate]:
    """The devices of the complete pools available on ``node``, in slice and device order.

    A ResourceSlice is available on the node when ``spec.nodeName`` is the node, ``spec.nodeSelector``
    matches it, or ``spec.allNodes``; its pool is complete when every slice of the pool's newest
    generation is there (``resourceSliceCount``).
    """
    pools: dict[tuple[str, str], list[resource_pb2.ResourceSlice]] = {}
    for s in slices:
        if _available_on(node, s.spec):
            pools.setdefault((s.spec.driver, s.spec.pool.name), []).append(s)
    out: list[_Candidate] = []
    for (driver, pool), members in sorted(pools.items()):
        generation = max(s.spec.pool.generation for s in members)
        current = [s for s in members if s.spec.pool.generation == generation]
        if len(current) < current[0].spec.pool.resource_slice_count:
            continue  # incomplete: the driver is still publishing it
        for s in sorted(current, key=lambda s: s.metadata.name):
            out += [_Candidate(DeviceID(driver, pool, d.name), d, s) for d in s.spec.devices]
    return out
