"""PodTopologySpread: spread a group of pods evenly over topology domains (zones, nodes, ...).

kube-scheduler's podtopologyspread plugin (Kubernetes docs: Pod Topology Spread Constraints). A
constraint (``spec.topologySpreadConstraints[i]``) counts, per *domain* (one value of the node label
``topologyKey``), the pods of the pod's namespace that its selector matches, and bounds the skew.

- ``PodTopologySpread.pre_filter`` / ``filter``: the ``DoNotSchedule`` constraints.
- ``PodTopologySpread.pre_score`` / ``score`` / ``normalize_score``: the ``ScheduleAnyway`` ones.
- ``PodTopologySpread.events_to_register``: what makes a pod this plugin rejected schedulable.
- ``decode_args``: ``PodTopologySpreadArgs``, decoded strictly.

Where this differs from kube-scheduler (terminating pods, the node hint): docs/scheduler.md.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from google.protobuf import json_format

from machinery import wellknown
from machinery.api import core_pb2
from machinery.placement import RequiredNodeAffinity, find_untolerated_taint
from machinery.selectors import NOTHING, LabelSelector, Requirement, SelectorError, from_match, validate_label_key
from scheduler.framework import plugin_args as pa
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
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

NAME = "PodTopologySpread"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"

HOSTNAME_LABEL = wellknown.LABEL_HOSTNAME
ZONE_LABEL = wellknown.LABEL_TOPOLOGY_ZONE

SYSTEM_DEFAULT_CONSTRAINTS = (
    {"maxSkew": 3, "topologyKey": HOSTNAME_LABEL, "whenUnsatisfiable": SCHEDULE_ANYWAY},
    {"maxSkew": 5, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": SCHEDULE_ANYWAY},
)

_NO_PODS = 2**31 - 1  # an unset critical path (kube-scheduler's MaxInt32)


ArgsError = pa.ArgsError


# ---------------------------------------------------------------- constraints


@dataclass(frozen=True)
class _Constraint:
    """One spread constraint with its selector resolved for the pod being scheduled."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int
    honor_affinity: bool  # nodeAffinityPolicy: Honor (the default)
    honor_taints: bool  # nodeTaintsPolicy: Honor (Ignore is the default)


def _selector(c: core_pb2.TopologySpreadConstraint, pod_labels: Mapping[str, str]) -> LabelSelector:
    """``labelSelector`` AND ``key=<pod's value>`` for each of ``matchLabelKeys`` the pod has (the others
    are ignored). An absent ``labelSelector`` selects nothing; ``{}`` selects every pod."""
    if not c.HasField("label_selector"):
        return NOTHING  # matchLabelKeys cannot widen a selector that matches nothing
    base = from_match(c.label_selector.match_labels, c.label_selector.match_expressions)
    extra = tuple(Requirement(key, "=", frozenset({pod_labels[key]})) for key in c.match_label_keys
                  if key in pod_labels)
    return LabelSelector(extra + base.requirements) if extra else base


def _constraints_of(specs: Iterable[core_pb2.TopologySpreadConstraint], pod_labels: Mapping[str, str],
                    action: str) -> tuple[_Constraint, ...]:
    """The constraints with ``whenUnsatisfiable == action`` (unset counts as DoNotSchedule, the API's
    default); ``minDomains`` defaults to 1. Raises SelectorError for a selector that cannot be parsed."""
    return tuple(
        _Constraint(c.max_skew, c.topology_key, _selector(c, pod_labels),
                    c.min_domains if c.HasField("min_domains") else 1,
                    c.node_affinity_policy != IGNORE, c.node_taints_policy == HONOR)
        for c in specs if (c.when_unsatisfiable or DO_NOT_SCHEDULE) == action)


def _node_labels(ni: NodeInfo) -> Mapping[str, str]:
    """The labels of ``ni``'s node (a node that passed Filter always has its Node)."""
    node = ni.node
    return node.metadata.labels if node is not None else {}


def _has_all_keys(labels: Mapping[str, str], constraints: Sequence[_Constraint]) -> bool:
    for c in constraints:
        if c.topology_key not in labels:
            return False
    return True


class _Inclusion:
    """Which of a pod's constraints count a node (nodeAffinityPolicy / nodeTaintsPolicy).

    ``nodeAffinityPolicy`` Honor (the default) counts only nodes matching the pod's nodeSelector and
    required node affinity; ``nodeTaintsPolicy`` Ignore is the default, and Honor counts only nodes
    whose NoSchedule/NoExecute taints the pod tolerates. A node must also carry every constraint's
    topologyKey, which the callers check.
    """

    __slots__ = ("constraints", "affinity", "tolerations", "check_affinity", "check_taints")

    def __init__(self, pod: core_pb2.Pod, constraints: tuple[_Constraint, ...]):
        self.constraints = constraints
        self.affinity = RequiredNodeAffinity(pod)
        self.tolerations = pod.spec.tolerations
        self.check_affinity = not self.affinity.empty and any(c.honor_affinity for c in constraints)
        self.check_taints = any(c.honor_taints for c in constraints)

    def counted_by(self, node: core_pb2.Node) -> list[bool] | None:
        """None when every constraint counts ``node``, else one flag per constraint."""
        affinity_ok = not self.check_affinity or self.affinity.matches(node)
        taints_ok = not self.check_taints or find_untolerated_taint(node.spec.taints, self.tolerations) is None
        if affinity_ok and taints_ok:
            return None
        return [(affinity_ok or not c.honor_affinity) and (taints_ok or not c.honor_taints) for c in self.constraints]


# ---------------------------------------------------------------- counting matching pods


def _count_matching(pods: Iterable[PodInfo], selector: LabelSelector, namespace: str) -> int:
    """Pods of ``namespace`` the selector matches, terminating pods aside (kubernetes#87621)."""
    n = 0
    for pi in pods:
        meta = pi.pod.metadata
        if meta.namespace == namespace and not meta.deletion_timestamp and selector.matches(meta.labels):
            n += 1
    return n


def _zero(ni: NodeInfo) -> int:
    return 0


class _MatchCounts:
    """Per (namespace, selector), each node's count of matching pods with the NodeInfo generation it
    was counted at. A generation is never reused and changes with every pod added or removed, so a
    remembered count is right as long as the generation is the same.

    Counting matching pods is the plugin's one costly part (every pod on every node). The generation
    changes whenever the node's pods do (the cache replaces a PodInfo on every pod update), so
    successive pods of one workload recount only the nodes that changed. A pod edited in place inside
    a NodeInfo, bypassing ``add_pod`` / ``remove_pod``, would go unseen.
    """

    def __init__(self, max_selectors: int = 64):
        self._max = max_selectors
        self._memos: OrderedDict[tuple[str, LabelSelector], dict[str, tuple[int, int]]] = OrderedDict()

    def counter(self, namespace: str, selector: LabelSelector, num_nodes: int) -> Callable[[NodeInfo], int]:
        if selector.nothing:
            return _zero
        key = (namespace, selector)
        memo = self._memos.get(key)
        if memo is None or len(memo) > 2 * num_nodes + 16:  # new, or holding many deleted nodes
            memo = self._memos[key] = {}
        self._memos.move_to_end(key)
        while len(self._memos) > self._max:
            self._memos.popitem(last=False)

        def count(ni: NodeInfo) -> int:
            name, generation = ni.name, ni.generation
            hit = memo.get(name)
            if hit is not None and hit[0] == generation:
                return hit[1]
            n = _count_matching(ni.pods, selector, namespace)
            memo[name] = (generation, n)
            return n

        return count


# ---------------------------------------------------------------- cycle state


class _CriticalPaths:
    """The domain with the fewest matching pods and a runner-up (kube-scheduler's criticalPaths).

    Enough to keep the minimum right while preemption or nominated pods change one node, hence one
    domain, on a clone of the state; the runner-up is not always the second smallest.
    """

    __slots__ = ("first", "first_count", "second", "second_count")

    def __init__(self, first: str | None = None, first_count: int = _NO_PODS, second: str | None = None,
                 second_count: int = _NO_PODS):
        self.first, self.first_count = first, first_count
        self.second, self.second_count = second, second_count

    @classmethod
    def of(cls, counts: Mapping[str, int]) -> "_CriticalPaths":
        paths = cls()
        for value, n in counts.items():
            paths.update(value, n)
        return paths

    def clone(self) -> "_CriticalPaths":
        return _CriticalPaths(self.first, self.first_count, self.second, self.second_count)

    def update(self, value: str, n: int) -> None:
        if value == self.first:
            self.first_count = n
        elif value == self.second:
            self.second_count = n
        else:
            if n < self.first_count:
                self.second, self.second_count = self.first, self.first_count
                self.first, self.first_count = value, n
            elif n < self.second_count:
                self.second, self.second_count = value, n
            return
        if self.first_count > self.second_count:
            self.first, self.first_count, self.second, self.second_count = (
                self.second, self.second_count, self.first, self.first_count)


class _PreFilterState(StateData):
    """The hard constraints, and per constraint the matching pods per domain and its critical paths.
    Preemption clones it and changes the counts, so ``clone`` copies them."""

    def __init__(self, constraints: tuple[_Constraint, ...], self_match: tuple[int, ...],
                 counts: list[dict[str, int]], paths: list[_CriticalPaths], inclusion: _Inclusion):
        self.constraints = constraints
        self.self_match = self_match  # 1 where the pod matches the constraint's own selector
        self.counts = counts
        self.paths = paths
        self.inclusion = inclusion

    def clone(self) -> "_PreFilterState":
        return _PreFilterState(self.constraints, self.self_match, [dict(d) for d in self.counts],
                               [p.clone() for p in self.paths], self.inclusion)

    def min_match(self, i: int) -> int:
        """The global minimum of constraint ``i``: 0 while there are fewer domains than minDomains."""
        if len(self.counts[i]) < self.constraints[i].min_domains:
            return 0
        return self.paths[i].first_count


@dataclass(frozen=True)
class _PreScoreState(StateData):
    """Raw scores of the filtered nodes; read only after PreScore, so clones share it."""

    scores: dict[str, int]
    ignored: frozenset[str]  # filtered nodes lacking a topologyKey: they score 0


def _missing_state(key: str) -> Status:
    return Status(Code.ERROR, f'reading "{key}" from cycleState: not found')


# ---------------------------------------------------------------- args


@dataclass(frozen=True)
class PodTopologySpreadArgs:
    """kube-scheduler's PodTopologySpreadArgs, with its v1 defaults (``defaultingType`` System).

    Default constraints (``System``: hostname maxSkew 3 and zone maxSkew 5, both ScheduleAnyway; or
    ``List`` with ``defaultConstraints``) are meant for a pod without constraints of its own, with the
    selector of the Services, ReplicaSets, StatefulSets and ReplicationControllers that select it.
    kplane has none of those objects, so that selector is always empty and, as kube-scheduler does for
    a pod nothing selects, no default constraint applies. The args are still decoded strictly and
    validated as kube-scheduler validates them (``decode_args``).
    """

    default_constraints: tuple[core_pb2.TopologySpreadConstraint, ...] = ()
    defaulting_type: str = SYSTEM_DEFAULTING


def decode_args(raw: Any, path: str = "") -> PodTopologySpreadArgs:
    """PodTopologySpreadArgs from a pluginConfig entry's ``args``; ArgsError names each bad field
    (validation_pluginargs.go's checks, all of them at once as kube-scheduler reports them)."""
    fields = pa.fields(raw, path, NAME, ("defaultConstraints", "defaultingType"))
    kind_path, list_path = pa.join(path, "defaultingType"), pa.join(path, "defaultConstraints")
    kind = pa.string(fields.get("defaultingType") or SYSTEM_DEFAULTING, kind_path)
    raw_list = fields.get("defaultConstraints")
    parsed = tuple(pa.message(core_pb2.TopologySpreadConstraint, item, f"{list_path}[{i}]")
                   for i, item in enumerate(pa.listing(raw_list, list_path) if raw_list is not None else []))
    errors: list[str] = []
    if kind not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        errors.append(f'{kind_path}: Unsupported value: "{kind}": supported values: "List", "System"')
    elif kind == SYSTEM_DEFAULTING and parsed:
        errors.append(f'{kind_path}: Invalid value: "System": when .defaultConstraints are not empty')
    for i, c in enumerate(parsed):
        here = f"{list_path}[{i}]"
        if c.max_skew <= 0:
            errors.append(f"{here}.maxSkew: Invalid value: {c.max_skew}: not in valid range (0, inf)")
        if not c.topology_key:
            errors.append(f"{here}.topologyKey: Required value: can not be empty")
        else:
            reason = validate_label_key(c.topology_key)
            if reason:
                errors.append(f'{here}.topologyKey: Invalid value: "{c.topology_key}": {reason}')
        if not c.when_unsatisfiable:
            errors.append(f"{here}.whenUnsatisfiable: Required value: can not be empty")
        elif c.when_unsatisfiable not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            errors.append(f'{here}.whenUnsatisfiable: Unsupported value: "{c.when_unsatisfiable}": supported '
                          f'values: "DoNotSchedule", "ScheduleAnyway"')
        if c.HasField("label_selector"):
            errors.append(f"{here}.labelSelector: Forbidden: constraint must not define a selector, as they "
                          f"deduced for each pod")
        if any(p.topology_key == c.topology_key and p.when_unsatisfiable == c.when_unsatisfiable
               for p in parsed[:i]):
            errors.append(f'{here}: Duplicate value: "{{{c.topology_key}, {c.when_unsatisfiable}}}"')
    if errors:
        raise ArgsError(errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    return PodTopologySpreadArgs(parsed, kind)


def _system_default_constraints() -> tuple[core_pb2.TopologySpreadConstraint, ...]:
    return tuple(json_format.ParseDict(c, core_pb2.TopologySpreadConstraint()) for c in SYSTEM_DEFAULT_CONSTRAINTS)


# ---------------------------------------------------------------- the plugin


class PodTopologySpread:
    name = NAME

    def __init__(self, args: PodTopologySpreadArgs, handle: Any = None, features: Features = Features()):
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize  # KEP-5836: Skip them
        self.handle = handle
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints = (_system_default_constraints() if self.system_defaulted
                                    else args.default_constraints)
        self._match_counts = _MatchCounts()

    def _constraints(self, pod: core_pb2.Pod, action: str) -> tuple[_Constraint, ...]:
        """The pod's own constraints with ``whenUnsatisfiable == action``. A pod without constraints of its
        own gets none, so PreFilter and PreScore skip it."""
        if pod.spec.topology_spread_constraints:
            return _constraints_of(pod.spec.topology_spread_constraints, pod.metadata.labels, action)
        # Default constraints take the selector of the Services, ReplicaSets, StatefulSets and
        # ReplicationControllers selecting the pod. kplane has none, so the selector is empty and,
        # as kube-scheduler does for a pod nothing selects, no default constraint applies.
        return ()

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: Sequence[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        """Count, once per cycle, the pods of each domain for the ``whenUnsatisfiable: DoNotSchedule``
        constraints; Skip when the pod has none. Per constraint the state keeps the two least loaded
        domains ("critical paths", ``_CriticalPaths``), so that the PreFilter extensions ``add_pod`` /
        ``remove_pod`` (preemption, nominated pods) keep the minimum right in O(1) on the state clone
        that simulates one node."""
        if skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        try:
            constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        except SelectorError as exc:
            return None, Status(Code.ERROR, f"obtaining pod's hard topology spread constraints: {exc}", error=exc)
        if not constraints:
            return None, Status(Code.SKIP)
        state.write(_PRE_FILTER_KEY, self._count_domains(pod, constraints, nodes))
        return None, None

    def _count_domains(self, pod: core_pb2.Pod, constraints: tuple[_Constraint, ...],
                       nodes: Sequence[NodeInfo]) -> _PreFilterState:
        """The matching pods per domain, counting a node only if it carries every constraint's
        topologyKey and, per constraint, its node policies let it (``_Inclusion``)."""
        keys = [c.topology_key for c in constraints]
        inclusion = _Inclusion(pod, constraints)
        counters = [self._match_counts.counter(pod.metadata.namespace, c.selector, len(nodes)) for c in constraints]
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for ni in nodes:
            node = ni.node
            if node is None:
                continue
            labels = node.metadata.labels
            if not all(k in labels for k in keys):
                continue  # a node lacking any topologyKey counts for no constraint
            values = [labels[k] for k in keys]
            counted = inclusion.counted_by(node)
            for i, value in enumerate(values):
                if counted is None or counted[i]:
                    domain = counts[i]
                    domain[value] = domain.get(value, 0) + counters[i](ni)
        pod_labels = pod.metadata.labels
        self_match = tuple(1 if c.selector.matches(pod_labels) else 0 for c in constraints)
        return _PreFilterState(constraints, self_match, counts, [_CriticalPaths.of(d) for d in counts], inclusion)

    def add_pod(self, state: CycleState, pod: core_pb2.Pod, to_add: PodInfo, node_info: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod, to_add.pod, node_info, 1)

    def remove_pod(self, state: CycleState, pod: core_pb2.Pod, to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        return self._update_with_pod(state, pod, to_remove.pod, node_info, -1)

    def _update_with_pod(self, state: CycleState, pod: core_pb2.Pod, other: core_pb2.Pod, ni: NodeInfo,
                         delta: int) -> Status | None:
        s: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return _missing_state(_PRE_FILTER_KEY)
        node = ni.node
        meta = other.metadata
        if node is None or meta.namespace != pod.metadata.namespace or meta.deletion_timestamp:
            return None
        labels = node.metadata.labels
        if not _has_all_keys(labels, s.constraints):
            return None
        counted = s.inclusion.counted_by(node)
        for i, c in enumerate(s.constraints):
            if (counted is None or counted[i]) and c.selector.matches(meta.labels):
                value = labels[c.topology_key]
                domain = s.counts[i]
                domain[value] = domain.get(value, 0) + delta
                s.paths[i].update(value, domain[value])
        return None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        """UnschedulableAndUnresolvable ``node(s) didn't match pod topology spread constraints (missing
        required label)`` for a node without a topologyKey; Unschedulable ``node(s) didn't match pod
        topology spread constraints`` (preemption may help) when a skew exceeds maxSkew.

        The skew of a node is the pods in its domain, plus one if the pod matches its own selector,
        minus the global minimum: the fewest pods in a counted domain, or 0 while there are fewer
        counted domains than ``minDomains`` (default 1).
        """
        s: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
        if s is None:
            return _missing_state(_PRE_FILTER_KEY)
        node = ni.node
        if node is None:
            return Status(Code.ERROR, "node not found")
        labels = node.metadata.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH)
            # pods already in the domain + the pod itself if it matches - the global minimum
            if s.counts[i].get(value, 0) + s.self_match[i] - s.min_match(i) > c.max_skew:
                return Status(Code.UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH)
        return None

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """Compute the raw score of every filtered node for the ``ScheduleAnyway`` constraints, so
        Score is a dict lookup; Skip when the pod has none."""
        snapshot = self.handle.snapshot
        if snapshot is None:
            return Status(Code.ERROR, "getting all nodes: the cycle has no snapshot")
        all_nodes = snapshot.node_info_list
        if not all_nodes:
            return Status(Code.SKIP)
        try:
            constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        except SelectorError as exc:
            return Status(Code.ERROR, f"obtaining pod's soft topology spread constraints: {exc}", error=exc)
        if not constraints:
            return Status(Code.SKIP)
        # Only the pod's own constraints require every topologyKey, so that system defaults still
        # spread over hostnames on nodes without a zone label.
        require_all = bool(pod.spec.topology_spread_constraints) or not self.system_defaulted
        state.write(_PRE_SCORE_KEY, self._score_nodes(pod, constraints, nodes, all_nodes, require_all))
        return None

    def _score_nodes(self, pod: core_pb2.Pod, constraints: tuple[_Constraint, ...], nodes: Sequence[NodeInfo],
                     all_nodes: Sequence[NodeInfo], require_all: bool) -> _PreScoreState:
        """A node's raw score sums, per constraint, the pods in its domain times log(domains + 2) (so
        constraints over few domains are not drowned by those over many) plus maxSkew - 1 (a larger
        maxSkew tolerates more)."""
        keys = [c.topology_key for c in constraints]
        per_node = [k == HOSTNAME_LABEL for k in keys]  # hostname domains: the node's own pods
        # The domains of the filtered nodes, each with its matching pods (counted below).
        domains: list[dict[str, int]] = [{} for _ in constraints]
        ignored: set[str] = set()
        for ni in nodes:
            labels = _node_labels(ni)
            if require_all and not _has_all_keys(labels, constraints):
                ignored.add(ni.name)
                continue
            for i, key in enumerate(keys):
                if not per_node[i]:
                    domains[i].setdefault(labels.get(key, ""), 0)
        weights = [math.log((len(nodes) - len(ignored) if per_node[i] else len(domains[i])) + 2)
                   for i in range(len(constraints))]
        counters = [self._match_counts.counter(pod.metadata.namespace, c.selector, len(all_nodes))
                    for c in constraints]
        inclusion = _Inclusion(pod, constraints)
        for ni in all_nodes:
            node = ni.node
            if node is None:
                continue
            labels = node.metadata.labels
            if require_all and not _has_all_keys(labels, constraints):
                continue
            counted = inclusion.counted_by(node)
            for i, key in enumerate(keys):
                if per_node[i] or (counted is not None and not counted[i]):
                    continue
                domain = domains[i]
                value = labels.get(key, "")
                if value in domain:  # only domains some filtered node is in matter
                    domain[value] += counters[i](ni)
        scores: dict[str, int] = {}
        for ni in nodes:
            name = ni.name
            if name in ignored:
                continue
            labels = _node_labels(ni)
            total = 0.0
            for i, c in enumerate(constraints):
                label = labels.get(keys[i])
                if label is None:
                    continue
                n = counters[i](ni) if per_node[i] else domains[i][label]
                total += n * weights[i] + (c.max_skew - 1)
            scores[name] = int(math.floor(total + 0.5))  # Go's math.Round, half away from zero
        return _PreScoreState(scores, frozenset(ignored))

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        s: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            return 0, _missing_state(_PRE_SCORE_KEY)
        return s.scores.get(ni.name, 0), None

    def normalize_score(self, state: CycleState, pod: core_pb2.Pod, node_names: list[str],
                        scores: list[int]) -> Status | None:
        """Fewer matching pods is better: 100 * (max + min - s) / max; filtered nodes lacking a
        topologyKey score 0."""
        s: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
        if s is None:
            return _missing_state(_PRE_SCORE_KEY)
        ignored = s.ignored
        counted = [score for name, score in zip(node_names, scores, strict=True) if name not in ignored]
        if not counted:
            scores[:] = [0] * len(scores)
            return None
        low, high = min(counted), max(counted)
        for i, name in enumerate(node_names):
            if name in ignored:
                scores[i] = 0
            elif high == 0:
                scores[i] = MAX_NODE_SCORE
            else:
                scores[i] = MAX_NODE_SCORE * (high + low - scores[i]) // high
        return None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # An assigned pod added, relabelled or deleted moves a domain's count when a constraint's
            # selector matches it; the pod itself gaining a toleration makes more nodes count under
            # nodeTaintsPolicy: Honor.
            ClusterEventWithHint(ClusterEvent(POD, ActionType.ADD | ActionType.UPDATE_POD_LABEL
                                              | ActionType.UPDATE_POD_TOLERATION | ActionType.DELETE),
                                 self.is_schedulable_after_pod_change),
            # A node added, deleted, relabelled or retainted can create, remove or move a domain, or
            # change whether the pod may count or run there.
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.DELETE | ActionType.UPDATE_NODE_LABEL
                                              | ActionType.UPDATE_NODE_TAINT),
                                 self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_pod_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when an assigned pod of the pod's namespace is added, deleted, or relabelled so that a
        hard constraint's selector starts or stops matching it (a domain's count moves), or when the pod
        itself gains a toleration while a hard constraint honours taints (more nodes count)."""
        for changed in (old, new):
            if changed is not None and not _involved(changed, pod):
                return QueueingHint.QUEUE_SKIP  # unscheduled, or another namespace: counts nowhere
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if old is not None and new is not None:
            if (new.metadata.uid == pod.metadata.uid and list(new.spec.tolerations) != list(old.spec.tolerations)
                    and any(c.honor_taints for c in constraints)):
                return QueueingHint.QUEUE
            before, after = old.metadata.labels, new.metadata.labels
            if dict(before) == dict(after):
                return QueueingHint.QUEUE_SKIP
            if any(c.selector.matches(before) != c.selector.matches(after) for c in constraints):
                return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        changed = new if new is not None else old
        if changed is None:
            return QueueingHint.QUEUE
        if any(c.selector.matches(changed.metadata.labels) for c in constraints):
            return QueueingHint.QUEUE
        return QueueingHint.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue when a node is added, deleted, relabelled or retainted that carries every topologyKey
        and that the pod could run on or a constraint counts: a domain appears, disappears, moves or
        becomes eligible."""
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        old_matters = old is not None and _node_matters(pod, constraints, old)
        new_matters = new is not None and _node_matters(pod, constraints, new)
        if old is not None and new is not None:
            if old_matters != new_matters:
                return QueueingHint.QUEUE  # it starts or stops counting / hosting
            if new_matters:
                before, after = old.metadata.labels, new.metadata.labels
                if any(before.get(c.topology_key) != after.get(c.topology_key) for c in constraints):
                    return QueueingHint.QUEUE  # it moved to another domain
                if list(old.spec.taints) != list(new.spec.taints):
                    return QueueingHint.QUEUE
            return QueueingHint.QUEUE_SKIP
        return QueueingHint.QUEUE if old_matters or new_matters else QueueingHint.QUEUE_SKIP


def _involved(changed: core_pb2.Pod, pod: core_pb2.Pod) -> bool:
    """Whether ``changed`` can move ``pod``'s counts: it is the pod itself, or assigned in its namespace."""
    return changed.metadata.uid == pod.metadata.uid or (
        bool(changed.spec.node_name) and changed.metadata.namespace == pod.metadata.namespace)


def _node_matters(pod: core_pb2.Pod, constraints: Sequence[_Constraint], node: core_pb2.Node) -> bool:
    """Whether ``node`` can change where ``pod`` may go: it carries every topologyKey, and the pod
    could run on it or some constraint counts its pods."""
    if not _has_all_keys(node.metadata.labels, constraints):
        return False
    affinity_ok = RequiredNodeAffinity(pod).matches(node)
    taints_ok = find_untolerated_taint(node.spec.taints, pod.spec.tolerations) is None
    if affinity_ok and taints_ok:
        return True
    return any((affinity_ok or not c.honor_affinity) and (taints_ok or not c.honor_taints) for c in constraints)


def new(args: PodTopologySpreadArgs | Mapping[str, Any] | None, handle: Any) -> PodTopologySpread:
    return PodTopologySpread(pa.typed(args, PodTopologySpreadArgs, decode_args, NAME), handle, features_of(handle))
