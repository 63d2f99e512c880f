"""NodeAffinity: a pod's ``nodeSelector`` and node affinity, and the profile's ``addedAffinity``.

kube-scheduler's nodeaffinity plugin (Kubernetes docs: Assigning Pods to Nodes, "nodeSelector",
"Node affinity", "Node affinity weight", "Node affinity per scheduling profile").

- ``NodeAffinity.pre_filter`` / ``filter``: the pod's required placement and the profile's.
- ``NodeAffinity.pre_score`` / ``score`` / ``normalize_score``: the preferred terms the node matches.
- ``NodeAffinity.is_schedulable_after_node_change``: what makes a pod this plugin rejected
  schedulable.
- ``decode_args``: ``NodeAffinityArgs``, decoded strictly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from machinery import placement, selectors
from machinery.api import core_pb2
from scheduler.framework import plugin_args as pa
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    NODE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    PreFilterResult,
    QueueingHint,
    Status,
)
from scheduler.plugins.helper import default_normalize_score

NAME = "NodeAffinity"
_STATE_KEY = "PreFilter" + NAME
_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

OBJECT_NAME_FIELD = "metadata.name"
_LABEL_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
_FIELD_OPERATORS = ("In", "NotIn")


ArgsError = pa.ArgsError


# ---------------------------------------------------------------- args


def _check_label_requirement(r: core_pb2.NodeSelectorRequirement, path: str) -> None:
    """What Kubernetes' labels.NewRequirement refuses, for one matchExpressions entry."""
    reason = selectors.validate_label_key(r.key)
    if reason:
        raise ArgsError(f'{path}.key: Invalid value: "{r.key}": {reason}')
    op, values = r.operator, list(r.values)
    if op not in _LABEL_OPERATORS:
        raise ArgsError(f'{path}.operator: Unsupported value: "{op}": supported values: '
                        + ", ".join(f'"{o}"' for o in _LABEL_OPERATORS))
    if op in ("In", "NotIn") and not values:
        raise ArgsError(f"{path}.values: Required value: for 'in', 'notin' operators, values set can't be empty")
    if op in ("Exists", "DoesNotExist") and values:
        raise ArgsError(f"{path}.values: Forbidden: values set must be empty for exists and does not exist")
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            raise ArgsError(f"{path}.values: Required value: for 'Gt', 'Lt' operators, exactly one value is required")
        try:
            int(values[0])
        except ValueError:
            raise ArgsError(f"{path}.values[0]: Invalid value: \"{values[0]}\": for 'Gt', 'Lt' operators, the value "
                            f"must be an integer") from None
    for i, v in enumerate(values):
        reason = selectors.validate_label_value(v)
        if reason:
            raise ArgsError(f'{path}.values[{i}]: Invalid value: "{v}": {reason}')


def _check_field_requirement(r: core_pb2.NodeSelectorRequirement, path: str) -> None:
    """What Kubernetes' node field selectors refuse: only In/NotIn, with exactly one value."""
    if r.operator not in _FIELD_OPERATORS:
        raise ArgsError(f'{path}.operator: Unsupported value: "{r.operator}": supported values: "In", "NotIn"')
    if len(r.values) != 1:
        raise ArgsError(f'{path}.values: Invalid value: {list(r.values)}: must have exactly one element')


def _check_term(term: core_pb2.NodeSelectorTerm, path: str) -> None:
    for i, r in enumerate(term.match_expressions):
        _check_label_requirement(r, f"{path}.matchExpressions[{i}]")
    for i, r in enumerate(term.match_fields):
        _check_field_requirement(r, f"{path}.matchFields[{i}]")


@dataclass(frozen=True)
class NodeAffinityArgs:
    """kube-scheduler's NodeAffinityArgs: the profile's ``addedAffinity`` (none by default), a
    NodeAffinity (``requiredDuringSchedulingIgnoredDuringExecution`` and/or
    ``preferredDuringSchedulingIgnoredDuringExecution``) applied to every pod of the profile on top
    of its own."""

    added_affinity: core_pb2.NodeAffinity | None = None


def decode_args(raw: Any, path: str = "") -> NodeAffinityArgs:
    """NodeAffinityArgs from a pluginConfig entry's ``args``, decoded strictly; a malformed
    ``addedAffinity`` is refused with ArgsError naming the bad field."""
    fields = pa.fields(raw, path, NAME, ("addedAffinity",))
    raw_added = fields.get("addedAffinity")
    if raw_added is None:
        return NodeAffinityArgs()
    where = pa.join(path, "addedAffinity")
    added = pa.message(core_pb2.NodeAffinity, raw_added, where)
    if added.HasField("required_during_scheduling_ignored_during_execution"):
        ns = added.required_during_scheduling_ignored_during_execution
        for i, term in enumerate(ns.node_selector_terms):
            _check_term(term, f"{where}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[{i}]")
    for i, t in enumerate(added.preferred_during_scheduling_ignored_during_execution):
        here = f"{where}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        if not 0 <= t.weight <= 100:
            raise ArgsError(f"{here}.weight: Invalid value: {t.weight}: must be in the range 0-100")
        _check_term(t.preference, f"{here}.preference")
    return NodeAffinityArgs(added)


# ---------------------------------------------------------------- the pod's terms


def _required_node_selector(pod: core_pb2.Pod) -> core_pb2.NodeSelector | None:
    """The pod's requiredDuringSchedulingIgnoredDuringExecution, or None when it has none."""
    spec = pod.spec
    if not spec.HasField("affinity"):
        return None
    aff = spec.affinity
    if not aff.HasField("node_affinity"):
        return None
    na = aff.node_affinity
    if not na.HasField("required_during_scheduling_ignored_during_execution"):
        return None
    return na.required_during_scheduling_ignored_during_execution


def _pinned_node_names(ns: core_pb2.NodeSelector) -> tuple[frozenset[str] | None, bool]:
    """The node names the required terms pin (``metadata.name`` In), and whether they pin any.

    Terms are ORed: one term that pins nothing leaves every node possible. Within a term the
    name requirements are ANDed, so their value sets intersect.
    """
    names: set[str] = set()
    for term in ns.node_selector_terms:
        term_names: set[str] | None = None
        for r in term.match_fields:
            if r.key == OBJECT_NAME_FIELD and r.operator == "In":
                values = set(r.values)
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None, False
        names |= term_names
    return frozenset(names), True


def _preferred_terms(pod: core_pb2.Pod) -> placement.PreferredSchedulingTerms | None:
    spec = pod.spec
    if not spec.HasField("affinity") or not spec.affinity.HasField("node_affinity"):
        return None
    terms = spec.affinity.node_affinity.preferred_during_scheduling_ignored_during_execution
    return placement.PreferredSchedulingTerms(terms) if terms else None


# ---------------------------------------------------------------- the plugin


class NodeAffinity:
    name = NAME

    def __init__(self, args: NodeAffinityArgs, handle: Any = None, features: Features = Features()):
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize  # KEP-5836: Skip them
        self.added_node_selector: placement.NodeSelector | None = None
        self.added_preferred: placement.PreferredSchedulingTerms | None = None
        added = args.added_affinity
        if added is not None:
            if added.HasField("required_during_scheduling_ignored_during_execution"):
                self.added_node_selector = placement.NodeSelector(
                    added.required_during_scheduling_ignored_during_execution)
            if added.preferred_during_scheduling_ignored_during_execution:
                self.added_preferred = placement.PreferredSchedulingTerms(
                    added.preferred_during_scheduling_ignored_during_execution)

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod, nodes) -> tuple[PreFilterResult | None, Status | None]:
        """Compile the pod's required placement once — ``spec.nodeSelector`` AND
        ``requiredDuringSchedulingIgnoredDuringExecution`` — into the cycle state. When every required
        term pins nodes by name (``matchFields`` ``metadata.name`` ``In``), answer with those names
        (the union over the ORed terms of each term's intersection), so only they are filtered; if the
        names cancel out, the pod is UnschedulableAndUnresolvable ``pod affinity terms conflict``. A
        pod with neither a nodeSelector nor required node affinity, in a profile without a required
        ``addedAffinity``, Skips the plugin's Filter."""
        if skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        required = _required_node_selector(pod)
        if required is None and self.added_node_selector is None and not pod.spec.node_selector:
            return None, Status(Code.SKIP)  # nothing for Filter to check
        state.write(_STATE_KEY, placement.RequiredNodeAffinity(pod))
        if required is None or not required.node_selector_terms:
            return None, None
        names, pinned = _pinned_node_names(required)
        if not pinned:
            return None, None
        if not names:
            # Each term pins node names, but its own requirements leave none.
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return PreFilterResult(names), None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        """A node outside the profile's required ``addedAffinity`` is UnschedulableAndUnresolvable
        ``node(s) didn't match scheduler-enforced node affinity``; a node the pod's own required
        placement does not match is UnschedulableAndUnresolvable ``node(s) didn't match Pod's node
        affinity/selector``."""
        node = ni.node
        if node is None:
            return Status(Code.ERROR, "node not found")
        if self.added_node_selector is not None and not self.added_node_selector.matches(node):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED)
        required = state.get(_STATE_KEY)
        if required is None:  # PreFilter did not run (e.g. disabled in the profile)
            required = placement.RequiredNodeAffinity(pod)
        if not required.matches(node):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD)
        return None

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes) -> Status | None:
        """Skip when neither the pod nor the profile's ``addedAffinity`` has preferred terms."""
        preferred = _preferred_terms(pod)
        if preferred is None and self.added_preferred is None:
            return Status(Code.SKIP)  # no preferred term: every node would score 0
        state.write(_SCORE_STATE_KEY, preferred)
        return None

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        """The sum of the weights of the preferred terms the node matches, the pod's and the
        profile's ``addedAffinity`` preferred terms alike."""
        node = ni.node
        if node is None:
            return 0, Status(Code.ERROR, "node not found")
        total = 0
        if self.added_preferred is not None:
            total += self.added_preferred.score(node)
        preferred = state.get(_SCORE_STATE_KEY, False)
        if preferred is False:  # PreScore did not run
            preferred = _preferred_terms(pod)
        if preferred is not None:
            total += preferred.score(node)
        return total, None

    def normalize_score(self, state: CycleState, pod: core_pb2.Pod, node_names: list[str],
                        scores: list[int]) -> Status | None:
        """Scale the sums to 0..100 (DefaultNormalizeScore, not reversed)."""
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            # A new node, or new labels on a node, may match the pod's nodeSelector / required affinity.
            ClusterEventWithHint(ClusterEvent(NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                                 self.is_schedulable_after_node_change),
        ]

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue for a node added, or a node's labels changed, such that the node now matches the
        profile's required ``addedAffinity`` and the pod's required placement, where it did not
        before."""
        if new is None:
            return QueueingHint.QUEUE_SKIP
        if self.added_node_selector is not None and not self.added_node_selector.matches(new):
            return QueueingHint.QUEUE_SKIP  # outside the profile's nodes
        required = placement.RequiredNodeAffinity(pod)
        if not required.matches(new):
            return QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE  # a new node that matches
        # Only an unmatched -> matched change helps. kube-scheduler checks only the pod's terms
        # here; the profile's addedAffinity is checked too, so a node labelled into the profile
        # requeues the pod rather than leaving it to the periodic flush.
        if required.matches(old) and (self.added_node_selector is None or self.added_node_selector.matches(old)):
            return QueueingHint.QUEUE_SKIP  # it matched before: its labels were not why the pod failed
        return QueueingHint.QUEUE


def new(args: NodeAffinityArgs | Mapping[str, Any] | None, handle: Any) -> NodeAffinity:
    return NodeAffinity(pa.typed(args, NodeAffinityArgs, decode_args, NAME), handle, features_of(handle))
