"""InterPodAffinity: may the pod join the pods in a node's topology domains, and would it like to?

kube-scheduler's interpodaffinity plugin (Kubernetes docs: Assigning Pods to Nodes, "Inter-pod
affinity and anti-affinity"). A term names pods (label selector, namespaces / namespaceSelector,
matchLabelKeys and mismatchLabelKeys already merged by PodInfo) and a ``topologyKey``; a topology
domain is a pair (key, value of that node label), e.g. (topology.kubernetes.io/zone, V).

- ``InterPodAffinity.pre_filter`` / ``filter``: the pod's required terms, existing pods' anti-affinity.
- ``InterPodAffinity.pre_score`` / ``score`` / ``normalize_score``: the preferred terms.
- ``InterPodAffinity.events_to_register``: what makes a pod this plugin rejected schedulable.
- ``decode_args``: ``InterPodAffinityArgs``, decoded strictly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from machinery.api import core_pb2
from scheduler.framework import plugin_args as pa
from scheduler.framework.deferred_resize import skipped_for_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import AffinityTerm, PodInfo, WeightedAffinityTerm
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

NAME = "InterPodAffinity"
_STATE_KEY = "PreFilter" + NAME
_SCORE_STATE_KEY = "PreScore" + NAME

ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"
ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"

DEFAULT_HARD_POD_AFFINITY_WEIGHT = 1
MIN_HARD_POD_AFFINITY_WEIGHT = 0
MAX_HARD_POD_AFFINITY_WEIGHT = 100

# topology key -> topology value -> count (or summed weight). Two levels, so a node is looked up
# with one label read per topology key the counts hold; empty inner dicts are dropped.
_Counts = dict[str, dict[str, int]]
_NONE: dict[str, int] = {}


ArgsError = pa.ArgsError


# ---------------------------------------------------------------- counting topology pairs


def _bump(counts: _Counts, node_labels, key: str, delta: int) -> None:
    """Add ``delta`` to (key, the node's value for key); nothing when the node lacks the key."""
    value = node_labels.get(key)
    if value is None:
        return
    values = counts.get(key)
    if values is None:
        values = counts[key] = {}
    n = values.get(value, 0) + delta
    if n:
        values[value] = n
    else:  # back to zero (remove_pod): drop it, "no peer anywhere" reads ``not counts`` (a score reads 0)
        values.pop(value, None)
        if not values:
            del counts[key]


def _matches_all(terms: tuple[AffinityTerm, ...], pod: core_pb2.Pod) -> bool:
    """Kubernetes' podMatchesAllAffinityTerms: one pod satisfies every term (False for none)."""
    if not terms:
        return False
    for t in terms:
        if not t.matches(pod):
            return False
    return True


def _count_affinity(counts: _Counts, terms: tuple[AffinityTerm, ...], pod: core_pb2.Pod, node_labels,
                    delta: int) -> None:
    if _matches_all(terms, pod):
        for t in terms:
            _bump(counts, node_labels, t.topology_key, delta)


def _count_anti_affinity(counts: _Counts, terms: tuple[AffinityTerm, ...], pod: core_pb2.Pod, node_labels,
                         delta: int) -> None:
    for t in terms:
        if t.matches(pod):
            _bump(counts, node_labels, t.topology_key, delta)


def _clone_counts(counts: _Counts) -> _Counts:
    return {key: dict(values) for key, values in counts.items()}


class _PreFilterState(StateData):
    """The incoming pod's required terms and the topology pair counts Filter reads."""

    __slots__ = ("pod", "affinity_terms", "anti_affinity_terms", "matches_own_affinity", "affinity_counts",
                 "anti_affinity_counts", "existing_anti_affinity_counts")

    def __init__(self, pod: core_pb2.Pod, pi: PodInfo):
        self.pod = pod
        self.affinity_terms = pi.required_affinity_terms
        self.anti_affinity_terms = pi.required_anti_affinity_terms
        # The first-pod rule's second half, fixed for the cycle.
        self.matches_own_affinity = _matches_all(self.affinity_terms, pod)
        # Existing pods matching all the pod's affinity terms, per pair of each term's key.
        self.affinity_counts: _Counts = {}
        # Existing pods matching each of the pod's anti-affinity terms.
        self.anti_affinity_counts: _Counts = {}
        # Existing pods whose required anti-affinity terms match the pod.
        self.existing_anti_affinity_counts: _Counts = {}

    def has_work(self) -> bool:
        return bool(self.existing_anti_affinity_counts or self.affinity_terms or self.anti_affinity_terms)

    def update_with_pod(self, pi: PodInfo, node: core_pb2.Node, delta: int) -> None:
        """Count ``pi`` on ``node`` in (+1) or out (-1): kube-scheduler's updateWithPod."""
        labels = node.metadata.labels
        _count_anti_affinity(self.existing_anti_affinity_counts, pi.required_anti_affinity_terms, self.pod, labels,
                             delta)
        _count_affinity(self.affinity_counts, self.affinity_terms, pi.pod, labels, delta)
        _count_anti_affinity(self.anti_affinity_counts, self.anti_affinity_terms, pi.pod, labels, delta)

    def clone(self) -> "_PreFilterState":
        out = _PreFilterState.__new__(_PreFilterState)
        out.pod = self.pod
        out.affinity_terms = self.affinity_terms
        out.anti_affinity_terms = self.anti_affinity_terms
        out.matches_own_affinity = self.matches_own_affinity
        out.affinity_counts = _clone_counts(self.affinity_counts)
        out.anti_affinity_counts = _clone_counts(self.anti_affinity_counts)
        out.existing_anti_affinity_counts = _clone_counts(self.existing_anti_affinity_counts)
        return out


def _compute_pre_filter_state(pod: core_pb2.Pod, pi: PodInfo, nodes: Iterable[NodeInfo]) -> _PreFilterState:
    s = _PreFilterState(pod, pi)
    affinity, anti = s.affinity_terms, s.anti_affinity_terms
    incoming = bool(affinity or anti)
    for ni in nodes:
        node = ni.node
        if node is None:
            continue
        labels = node.metadata.labels
        for existing in ni.pods_with_required_anti_affinity:
            _count_anti_affinity(s.existing_anti_affinity_counts, existing.required_anti_affinity_terms, pod, labels, 1)
        if incoming:
            for existing in ni.pods:
                if affinity:
                    _count_affinity(s.affinity_counts, affinity, existing.pod, labels, 1)
                if anti:
                    _count_anti_affinity(s.anti_affinity_counts, anti, existing.pod, labels, 1)
    return s


def _satisfies_pod_affinity(s: _PreFilterState, labels) -> bool:
    terms = s.affinity_terms
    if not terms:
        return True
    counts = s.affinity_counts
    peers_everywhere = True
    for t in terms:
        value = labels.get(t.topology_key)
        if value is None:
            return False  # the node must carry every term's topology key
        if counts.get(t.topology_key, _NONE).get(value, 0) <= 0:
            peers_everywhere = False
    if peers_everywhere:
        return True
    # The first pod of a group with affinity to itself: no peer in the whole cluster, and the
    # pod would be its own peer (Kubernetes docs: Assigning Pods to Nodes, "Scheduling a group of
    # pods with inter-pod affinity to themselves").
    return not counts and s.matches_own_affinity


def _satisfies_pod_anti_affinity(s: _PreFilterState, labels) -> bool:
    counts = s.anti_affinity_counts
    if not counts:
        return True
    for t in s.anti_affinity_terms:
        values = counts.get(t.topology_key)
        if values:
            value = labels.get(t.topology_key)
            if value is not None and values.get(value, 0) > 0:
                return False
    return True


def _satisfies_existing_pods_anti_affinity(s: _PreFilterState, labels) -> bool:
    for key, values in s.existing_anti_affinity_counts.items():
        value = labels.get(key)
        if value is not None and values.get(value, 0) > 0:
            return False
    return True


# ---------------------------------------------------------------- scoring


class _PreScoreState(StateData):
    """Summed weights per topology pair; read-only after PreScore, so clones share it."""

    __slots__ = ("topology_score",)

    def __init__(self, topology_score: _Counts):
        self.topology_score = topology_score


def _add_weighted(score: _Counts, terms: Iterable[WeightedAffinityTerm], pod: core_pb2.Pod, node_labels,
                  sign: int) -> None:
    for wt in terms:
        if wt.term.matches(pod):
            _bump(score, node_labels, wt.term.topology_key, sign * wt.weight)



# ---------------------------------------------------------------- args


@dataclass(frozen=True)
class InterPodAffinityArgs:
    """kube-scheduler's InterPodAffinityArgs, with its v1 defaults: ``hardPodAffinityWeight`` (1; "not in
    valid range [0, 100]" outside it) and ``ignorePreferredTermsOfExistingPods`` (false)."""

    hard_pod_affinity_weight: int = DEFAULT_HARD_POD_AFFINITY_WEIGHT
    ignore_preferred_terms_of_existing_pods: bool = False


def decode_args(raw: Any, path: str = "") -> InterPodAffinityArgs:
    """InterPodAffinityArgs from a pluginConfig entry's ``args``; ArgsError names the bad field."""
    fields = pa.fields(raw, path, NAME, ("hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods"))
    weight_path = pa.join(path, "hardPodAffinityWeight")
    weight = pa.integer(fields.get("hardPodAffinityWeight", DEFAULT_HARD_POD_AFFINITY_WEIGHT), weight_path)
    if not MIN_HARD_POD_AFFINITY_WEIGHT <= weight <= MAX_HARD_POD_AFFINITY_WEIGHT:
        raise ArgsError(f"{weight_path}: Invalid value: {weight}: not in valid range "
                        f"[{MIN_HARD_POD_AFFINITY_WEIGHT}, {MAX_HARD_POD_AFFINITY_WEIGHT}]")
    ignore = pa.boolean(fields.get("ignorePreferredTermsOfExistingPods", False),
                        pa.join(path, "ignorePreferredTermsOfExistingPods"))
    return InterPodAffinityArgs(weight, ignore)


class InterPodAffinity:
    name = NAME

    def __init__(self, args: InterPodAffinityArgs, handle: Any = None, features: Features = Features()):
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize  # KEP-5836: Skip them
        self.hard_pod_affinity_weight = args.hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = args.ignore_preferred_terms_of_existing_pods
        self.handle = handle

    # ------------------------------------------------------------ filter

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: list[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        """Count, per topology pair, over every node of the cycle: the existing pods matching *all* the
        pod's required affinity terms (one pod must satisfy them all), the existing pods matching each
        of its required anti-affinity terms, and the existing pods whose required anti-affinity terms
        match the pod. Nothing to check (no required terms, no existing pod repelling it): Skip, so
        Filter does not run."""
        if skipped_for_deferred_resize(self.deferred_resizes, pod):
            return None, Status(Code.SKIP)
        pi = PodInfo(pod)
        if pi.parse_error:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {pi.parse_error}")
        snapshot = self.handle.snapshot
        if not (pi.required_affinity_terms or pi.required_anti_affinity_terms) and snapshot is not None \
                and nodes is snapshot.node_info_list:
            # Only existing pods' anti-affinity can matter: the snapshot keeps the nodes that have such
            # pods (kube-scheduler reads HavePodsWithRequiredAntiAffinityList), no need to walk them all.
            nodes = snapshot.have_pods_with_required_anti_affinity
        s = _compute_pre_filter_state(pod, pi, nodes)
        if not s.has_work():
            return None, Status(Code.SKIP)
        state.write(_STATE_KEY, s)
        return None, None

    def add_pod(self, state: CycleState, pod: core_pb2.Pod, to_add: PodInfo, ni: NodeInfo) -> Status | None:
        """Count ``to_add`` in: preemption simulating nominated pods in."""
        s = state.get(_STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'reading "{_STATE_KEY}" from cycleState: not found')
        if ni.node is not None:
            s.update_with_pod(to_add, ni.node, 1)
        return None

    def remove_pod(self, state: CycleState, pod: core_pb2.Pod, to_remove: PodInfo, ni: NodeInfo) -> Status | None:
        """Count ``to_remove`` out: preemption simulating victims gone."""
        s = state.get(_STATE_KEY)
        if s is None:
            return Status(Code.ERROR, f'reading "{_STATE_KEY}" from cycleState: not found')
        if ni.node is not None:
            s.update_with_pod(to_remove, ni.node, -1)
        return None

    def filter(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> Status | None:
        """Look the node's labels up in PreFilter's counts.

        ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable: removing pods never
        adds a peer) when the node lacks a term's topology key or its domain has no peer — unless no
        peer exists anywhere and the pod matches its own terms (the first pod of a group with affinity
        to itself goes anywhere the topology keys exist); ``node(s) didn't match pod anti-affinity
        rules`` and ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable:
        preemption can remove the pods in the way).
        """
        node = ni.node
        if node is None:
            return Status(Code.ERROR, "node not found")
        s = state.get(_STATE_KEY)
        if s is None:  # PreFilter did not run for this state: count once, then reuse
            s = self._lazy_pre_filter_state(state, pod)
            if isinstance(s, Status):
                return s
        labels = node.metadata.labels
        if s.affinity_terms and not _satisfies_pod_affinity(s, labels):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH)
        if s.anti_affinity_counts and not _satisfies_pod_anti_affinity(s, labels):
            return Status(Code.UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH)
        if s.existing_anti_affinity_counts and not _satisfies_existing_pods_anti_affinity(s, labels):
            return Status(Code.UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH)
        return None

    def _lazy_pre_filter_state(self, state: CycleState, pod: core_pb2.Pod) -> _PreFilterState | Status:
        snapshot = self.handle.snapshot
        if snapshot is None:
            return Status(Code.ERROR, f'reading "{_STATE_KEY}" from cycleState: not found')
        pi = PodInfo(pod)
        if pi.parse_error:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f"parsing pod: {pi.parse_error}")
        s = _compute_pre_filter_state(pod, pi, snapshot.node_info_list)
        state.write(_STATE_KEY, s)
        return s

    # ------------------------------------------------------------ score

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> Status | None:
        """Sum, per topology pair, the weights of preferred terms in both directions: the pod's
        preferred (anti-)affinity terms matching existing pods (+/- weight), existing pods' required
        affinity terms matching the pod (+ ``hardPodAffinityWeight``), and existing pods' preferred
        (anti-)affinity terms matching the pod (+/- weight) — the latter skipped for a pod without
        preferred terms of its own when ``ignorePreferredTermsOfExistingPods`` is set."""
        snapshot = self.handle.snapshot
        if snapshot is None:
            return Status(Code.ERROR, "empty snapshot in InterPodAffinity PreScore")
        pi = PodInfo(pod)
        if pi.parse_error:
            return Status(Code.ERROR, f"parsing pod: {pi.parse_error}")
        preferred, preferred_anti = pi.preferred_affinity_terms, pi.preferred_anti_affinity_terms
        own = bool(preferred or preferred_anti)
        if self.ignore_preferred_terms_of_existing_pods and not own:
            return Status(Code.SKIP)
        hard_weight = self.hard_pod_affinity_weight
        score: _Counts = {}
        # Without preferred terms of its own only pods with (anti-)affinity can contribute.
        for ni in (snapshot.node_info_list if own else snapshot.have_pods_with_affinity):
            node = ni.node
            if node is None:
                continue
            labels = node.metadata.labels
            if not labels:
                continue
            for existing in (ni.pods if own else ni.pods_with_affinity):
                other = existing.pod
                if preferred:
                    _add_weighted(score, preferred, other, labels, 1)
                if preferred_anti:
                    _add_weighted(score, preferred_anti, other, labels, -1)
                if hard_weight:
                    for t in existing.required_affinity_terms:
                        if t.matches(pod):
                            _bump(score, labels, t.topology_key, hard_weight)
                _add_weighted(score, existing.preferred_affinity_terms, pod, labels, 1)
                _add_weighted(score, existing.preferred_anti_affinity_terms, pod, labels, -1)
        if not score:
            return Status(Code.SKIP)
        state.write(_SCORE_STATE_KEY, _PreScoreState(score))
        return None

    def score(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo) -> tuple[int, Status | None]:
        """The sums of PreScore for the node's domains, added up."""
        s = state.get(_SCORE_STATE_KEY)
        if s is None:
            return 0, Status(Code.ERROR, f'reading "{_SCORE_STATE_KEY}" from cycleState: not found')
        node = ni.node
        if node is None:
            return 0, Status(Code.ERROR, "node not found")
        labels = node.metadata.labels
        total = 0
        for key, values in s.topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += values.get(value, 0)
        return total, None

    def normalize_score(self, state: CycleState, pod: core_pb2.Pod, node_names: list[str],
                        scores: list[int]) -> Status | None:
        """Map min..max to 0..100."""
        s = state.get(_SCORE_STATE_KEY)
        if s is None or not s.topology_score or not scores:
            return None
        lo, hi = min(scores), max(scores)
        spread = hi - lo
        for i, raw in enumerate(scores):
            # float64 as kube-scheduler computes it, so the same inputs give the same scores.
            scores[i] = int(float(MAX_NODE_SCORE) * ((raw - lo) / spread)) if spread > 0 else 0
        return None

    # ------------------------------------------------------------ queueing hints

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Pods (the hint passes only assigned ones: an unscheduled pod is in no topology domain).
        # Add: a peer for the pod's affinity may appear. Delete: a pod its anti-affinity repels, or whose anti-affinity
        # repels it, may leave. UpdatePodLabel: a pod may come to match, or stop matching, a term.
        pod_actions = ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE
        # A node added, or relabelled, may carry a topology key the pod's terms need, or open or
        # move a topology domain. (kube-scheduler adds UpdateNodeTaint only when it runs without
        # QueueingHints, to make up for preCheck dropping NodeAdd; kplane always runs the hints.)
        node_actions = ActionType.ADD | ActionType.UPDATE_NODE_LABEL
        return [ClusterEventWithHint(ClusterEvent(POD, pod_actions), self.is_schedulable_after_pod_change),
                ClusterEventWithHint(ClusterEvent(NODE, node_actions), self.is_schedulable_after_node_change)]

    def is_schedulable_after_pod_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue for an assigned pod added, or relabelled, so that it matches all the pod's affinity
        terms (a peer appeared); an assigned pod deleted, or relabelled, that the pod's anti-affinity
        repelled — or whose own anti-affinity repelled the pod (kubernetes#134393) — the obstacle is
        gone; an assigned peer deleted or relabelled away while the pod matches its own affinity terms:
        with no peer left the first-pod rule lets it go anywhere (kubernetes#141354)."""
        if (new is not None and not new.spec.node_name) or (old is not None and not old.spec.node_name):
            return QueueingHint.QUEUE_SKIP  # an unscheduled pod is in no topology domain
        pi = PodInfo(pod)
        terms, anti = pi.required_affinity_terms, pi.required_anti_affinity_terms
        if old is not None and new is not None:  # relabelled
            if _matches_all(terms, new) and not _matches_all(terms, old):
                return QueueingHint.QUEUE  # it became a peer
            for t in anti:
                if t.matches(old) and not t.matches(new):
                    return QueueingHint.QUEUE  # the pod no longer repels it
            if _matches_all(terms, old) and not _matches_all(terms, new) and _matches_all(terms, pod):
                return QueueingHint.QUEUE  # a peer stopped being one: maybe none left (first-pod rule)
            return QueueingHint.QUEUE_SKIP
        if new is not None:  # added: only a peer can help (an added pod never removes an obstacle)
            return QueueingHint.QUEUE if _matches_all(terms, new) else QueueingHint.QUEUE_SKIP
        if old is None:
            return QueueingHint.QUEUE
        # Deleted.
        for t in anti:
            if t.matches(old):
                return QueueingHint.QUEUE  # a pod it repels is gone
        for t in PodInfo(old).required_anti_affinity_terms:
            if t.matches(pod):
                return QueueingHint.QUEUE  # a pod whose anti-affinity repelled it is gone
        if _matches_all(terms, old) and _matches_all(terms, pod):
            return QueueingHint.QUEUE  # a peer is gone: maybe none left, and the first-pod rule applies
        return QueueingHint.QUEUE_SKIP

    def is_schedulable_after_node_change(self, pod: core_pb2.Pod, old: Any, new: Any) -> QueueingHint:
        """Queue for a node added, or relabelled, into a domain of one of the pod's affinity topology
        keys (key gained or value changed), or relabelled out of a domain of one of its anti-affinity
        keys (key dropped or value changed); any node added when the pod has anti-affinity; any node
        added or relabelled when the pod has no required terms of its own: only existing pods'
        anti-affinity can have rejected it, and that node may be free of them (kube-scheduler skips
        this case and leaves the pod to the periodic flush)."""
        if new is None:
            return QueueingHint.QUEUE_SKIP
        pi = PodInfo(pod)
        terms, anti = pi.required_affinity_terms, pi.required_anti_affinity_terms
        if not terms and not anti:
            # Only existing pods' anti-affinity can have rejected it: a new node, or a node moved
            # out of a domain they forbid, may be free of them.
            return QueueingHint.QUEUE
        after = new.metadata.labels
        before = old.metadata.labels if old is not None else None
        for t in terms:
            key = t.topology_key
            if key not in after:
                continue
            if before is None or key not in before or before[key] != after[key]:
                return QueueingHint.QUEUE  # a node in a domain the pod's affinity needs, new or moved
        for t in anti:
            if before is None:
                return QueueingHint.QUEUE  # a new node may sit in a domain free of the pods it repels
            key = t.topology_key
            if key in before and (key not in after or before[key] != after[key]):
                return QueueingHint.QUEUE  # the node left a domain the pod's anti-affinity forbade
        return QueueingHint.QUEUE_SKIP


def new(args: InterPodAffinityArgs | Mapping[str, Any] | None, handle: Any) -> InterPodAffinity:
    return InterPodAffinity(pa.typed(args, InterPodAffinityArgs, decode_args, NAME), handle, features_of(handle))
