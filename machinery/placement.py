"""Where a pod may go: taints and tolerations, node selectors and node affinity.

The Python counterpart of Kubernetes' ``k8s.io/component-helpers/scheduling/corev1`` (and its
``nodeaffinity`` package), shared by the scheduler's plugins and the kubelet:

- ``tolerates(toleration, taint)`` — Toleration.ToleratesTaint;
- ``find_untolerated_taint(taints, tolerations, effects)`` — the first taint of the given effects
  no toleration tolerates (FindMatchingUntoleratedTaint);
- ``NodeSelector`` — compiled NodeSelectorTerms (ORed; a term ANDs its matchExpressions on labels
  and matchFields on ``metadata.name``); an empty term matches nothing, as in Kubernetes;
- ``RequiredNodeAffinity`` — a pod's ``nodeSelector`` AND its required node affinity
  (GetRequiredNodeAffinity), which is what the scheduler and the kubelet check;
- ``PreferredSchedulingTerms`` — the weighted preferred terms, summed per node.

Compiled forms are plain tuples of closures-free data, so matching a node is a few dict lookups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from machinery.api import core_pb2

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


# ---------------------------------------------------------------- taints and tolerations


def tolerates(t: core_pb2.Toleration, taint: core_pb2.Taint) -> bool:
    """Kubernetes' Toleration.ToleratesTaint."""
    if t.effect and t.effect != taint.effect:
        return False
    if t.key and t.key != taint.key:
        return False
    op = t.operator
    if op == "Exists":
        return True
    if op in ("", "Equal"):
        return t.value == taint.value
    return False


def tolerated(taint: core_pb2.Taint, tolerations: Iterable[core_pb2.Toleration]) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def find_untolerated_taint(taints: Sequence[core_pb2.Taint], tolerations: Sequence[core_pb2.Toleration],
                           effects: tuple[str, ...] = (NO_SCHEDULE, NO_EXECUTE)) -> core_pb2.Taint | None:
    """The first taint with one of ``effects`` that no toleration tolerates, or None."""
    for taint in taints:
        if taint.effect in effects and not tolerated(taint, tolerations):
            return taint
    return None


# ---------------------------------------------------------------- node selectors


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "In":
            v = labels.get(self.key)
            return v is not None and v in self.values
        if op == "NotIn":
            v = labels.get(self.key)
            return v is None or v not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        if op in ("Gt", "Lt"):
            v = labels.get(self.key)
            if v is None or len(self.values) != 1:
                return False
            try:
                have, want = int(v), int(next(iter(self.values)))
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True)
class _Term:
    expressions: tuple[_Requirement, ...]
    fields: tuple[_Requirement, ...]  # only metadata.name is a valid field

    def matches(self, node: core_pb2.Node) -> bool:
        if not self.expressions and not self.fields:
            return False  # an empty term matches no objects
        labels = node.metadata.labels
        for r in self.expressions:
            if not r.matches(labels):
                return False
        if self.fields:
            fields = {"metadata.name": node.metadata.name}
            for r in self.fields:
                if not r.matches(fields):
                    return False
        return True


def _requirements(reqs: Iterable[core_pb2.NodeSelectorRequirement]) -> tuple[_Requirement, ...]:
    return tuple(_Requirement(r.key, r.operator, frozenset(r.values)) for r in reqs)


def _term(t: core_pb2.NodeSelectorTerm) -> _Term:
    return _Term(_requirements(t.match_expressions), _requirements(t.match_fields))


class NodeSelector:
    """NodeSelectorTerms, ORed (Kubernetes' nodeaffinity.NodeSelector)."""

    __slots__ = ("terms",)

    def __init__(self, selector: core_pb2.NodeSelector):
        self.terms = tuple(_term(t) for t in selector.node_selector_terms)

    def matches(self, node: core_pb2.Node) -> bool:
        return any(t.matches(node) for t in self.terms)


class RequiredNodeAffinity:
    """A pod's ``spec.nodeSelector`` AND its requiredDuringScheduling node affinity."""

    __slots__ = ("labels", "selector")

    def __init__(self, pod: core_pb2.Pod):
        self.labels: tuple[tuple[str, str], ...] = tuple(pod.spec.node_selector.items())
        aff = pod.spec.affinity
        self.selector: NodeSelector | None = None
        if aff.HasField("node_affinity") and aff.node_affinity.HasField(
                "required_during_scheduling_ignored_during_execution"):
            self.selector = NodeSelector(aff.node_affinity.required_during_scheduling_ignored_during_execution)

    @property
    def empty(self) -> bool:
        return not self.labels and self.selector is None

    def matches(self, node: core_pb2.Node) -> bool:
        if self.labels:
            node_labels = node.metadata.labels
            for k, v in self.labels:
                if node_labels.get(k) != v:
                    return False
        return self.selector is None or self.selector.matches(node)


class PreferredSchedulingTerms:
    """Weighted preferred node affinity terms; ``score(node)`` sums the weights of those matching."""

    __slots__ = ("terms",)

    def __init__(self, terms: Iterable[core_pb2.PreferredSchedulingTerm]):
        self.terms = tuple((t.weight, _term(t.preference)) for t in terms if t.weight)

    def score(self, node: core_pb2.Node) -> int:
        return sum(w for w, term in self.terms if term.matches(node))

