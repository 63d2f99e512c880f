"""Resource quota accounting: what a ResourceQuota counts, and how — shared by the apiserver's
ResourceQuota admission and the controller-manager's resourcequota controller, as Kubernetes
shares k8s.io/apiserver/pkg/quota/v1 (resource lists, CalculateUsage, the generic object-count
evaluator) and pkg/quota/v1/evaluator/core (the pod evaluator) between the two.

- ``ResourceList``, ``add`` and the helpers after it: amounts, as exact quantities;
- ``PodEvaluator``: what a pod counts (``pod_amounts``: its requests and limits);
- ``ObjectCountEvaluator``: what every other namespaced kind counts, by number;
- ``calculate_usage`` / ``matches``: what a quota's namespace uses, and whether a quota limits an
  object.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Final, Protocol

from google.protobuf.message import Message

from machinery import resources, timeutil
from machinery.api import core_pb2
from machinery.kinds import EVENT, KINDS, POD, RESOURCE_QUOTA, Kind
from machinery.quantity import Quantity, parse_quantity

# Amounts are exact quantities, summed as Go's ``quota.Add`` sums them (the left term's format wins
# unless it is zero), so ``status.used`` and the admission's messages print as Kubernetes prints
# them: ``1536Mi``, ``1500m``, ``1G``.
ResourceList = dict[str, Quantity]

PODS: Final = "pods"
REQUESTS_PREFIX: Final = "requests."
LIMITS_PREFIX: Final = "limits."
_NATIVE_PREFIX: Final = "kubernetes.io/"
_HUGEPAGES: Final = resources.HUGEPAGES_PREFIX
_ZERO: Final = Quantity.from_int(0)
_ONE: Final = Quantity.from_int(1)

# A quota that tracks one of these makes every container of a new pod name it (Kubernetes' "it was
# a mistake" validationSet: kept for compatibility, never extended).
_MUST_SPECIFY: Final = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_LEGACY_COUNT_NAMES: Final = {RESOURCE_QUOTA.plural: "resourcequotas"}

_quantity = lru_cache(maxsize=16384)(parse_quantity)


# ---------------------------------------------------------------- resource lists (quota/v1 resources.go)


def parse_list(m: Mapping[str, str]) -> ResourceList:
    """A protobuf quantity map as a ResourceList (raises QuantityError on a malformed quantity)."""
    return {k: _quantity(m[k]) for k in m}


def to_strings(rl: Mapping[str, Quantity]) -> dict[str, str]:
    return {k: str(v) for k, v in rl.items()}


def add(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """``a + b`` over the union of their resources."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out[k] + v if k in out else v
    return out


def subtract_non_negative(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> ResourceList:
    """Go's SubtractWithNonNegativeResult: ``a - b`` per resource, floored at zero, over the union."""
    out: ResourceList = {}
    for k, v in a.items():
        d = v - b[k] if k in b else v
        out[k] = d if d > _ZERO else _ZERO
    for k in b:
        out.setdefault(k, _ZERO)
    return out


def mask(rl: Mapping[str, Quantity], names: Iterable[str]) -> ResourceList:
    """The entries of ``rl`` whose resource is in ``names``."""
    keep = set(names)
    return {k: v for k, v in rl.items() if k in keep}


def exceeded(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> list[str]:
    """Go's LessThanOrEqual(a, b) turned around: the resources in both where ``a`` is larger (sorted)."""
    return sorted(k for k, v in b.items() if k in a and a[k] > v)


def equals(a: Mapping[str, Quantity], b: Mapping[str, Quantity]) -> bool:
    return a.keys() == b.keys() and all(a[k] == b[k] for k in a)


def is_zero(rl: Mapping[str, Quantity]) -> bool:
    return all(v.is_zero() for v in rl.values())


def negative(rl: Mapping[str, Quantity]) -> list[str]:
    return sorted(k for k, v in rl.items() if v.sign() < 0)


def pretty(rl: Mapping[str, Quantity]) -> str:
    """Kubernetes' prettyPrint: ``name=quantity`` sorted by name, comma-joined."""
    return ",".join(f"{k}={rl[k]}" for k in sorted(rl))


def _max_into(acc: ResourceList, rl: Mapping[str, Quantity]) -> None:
    """Go's maxResourceList: ``acc[k] = max(acc[k], rl[k])`` over ``rl``'s resources."""
    for k, v in rl.items():
        if k not in acc or v > acc[k]:
            acc[k] = v


def _add_into(acc: ResourceList, rl: Mapping[str, Quantity]) -> None:
    for k, v in rl.items():
        acc[k] = acc[k] + v if k in acc else v


# ---------------------------------------------------------------- a pod's requests and limits


def _container_amounts(c: core_pb2.Container, status: core_pb2.ContainerStatus | None,
                       infeasible: bool) -> tuple[ResourceList, ResourceList]:
    """A container's requests and limits; with status resources (KEP-1287), each the largest of
    desired (unless the resize is Infeasible), actual and — for requests — allocated."""
    requests, limits = parse_list(c.resources.requests), parse_list(c.resources.limits)
    if status is None or not status.HasField("resources"):
        return requests, limits
    if infeasible:
        requests, limits = {}, {}
    for acc, reported in ((requests, status.resources.requests), (requests, status.allocated_resources),
                          (limits, status.resources.limits)):
        for k in reported:
            v = _quantity(reported[k])
            if k not in acc or v >= acc[k]:
                acc[k] = v
    return requests, limits


def pod_amounts(pod: core_pb2.Pod, *, use_status_resources: bool = True,
                overhead: bool = True) -> tuple[ResourceList, ResourceList]:
    """Kubernetes' PodRequests and PodLimits as exact quantities.

    ``use_status_resources`` counts reported container status as KEP-1287 says (the quota's view);
    without it only the spec counts (LimitRanger's view, which also leaves ``overhead`` out).

    With in-place resize the quota's view follows KEP-1287 "Resource Quota": a container that
    reports status resources counts for the largest of its desired (spec — ignored while the pod's
    resize is Infeasible), allocated (``allocatedResources``) and actual
    (``status.containerStatuses[].resources``) requests and limits (``_container_amounts``), so a
    pending resize up counts at once and a resize down frees quota only once the kubelet has
    actuated it. Sidecars and init containers count as KEP-753 says, pod-level resources replace
    what they name, overhead is added.
    """
    spec = pod.spec
    statuses = {cs.name: cs for cs in pod.status.container_statuses} if use_status_resources else {}
    init_statuses = {cs.name: cs for cs in pod.status.init_container_statuses} if use_status_resources else {}
    infeasible = use_status_resources and resources.is_pod_resize_infeasible(pod)
    requests: ResourceList = {}
    limits: ResourceList = {}
    for c in spec.containers:
        r, lim = _container_amounts(c, statuses.get(c.name), infeasible)
        _add_into(requests, r)
        _add_into(limits, lim)
    # Init containers run one after another before the others start, each beside the sidecars
    # started before it; sidecars then keep running beside the regular containers.
    sidecar_r: ResourceList = {}
    sidecar_l: ResourceList = {}
    init_r: ResourceList = {}
    init_l: ResourceList = {}
    for c in spec.init_containers:
        if resources.is_restartable_init_container(c):
            r, lim = _container_amounts(c, init_statuses.get(c.name), infeasible)
            for acc, amounts in ((requests, r), (limits, lim), (sidecar_r, r), (sidecar_l, lim)):
                _add_into(acc, amounts)
            phase_r, phase_l = sidecar_r, sidecar_l
        else:
            phase_r = add(parse_list(c.resources.requests), sidecar_r)
            phase_l = add(parse_list(c.resources.limits), sidecar_l)
        _max_into(init_r, phase_r)
        _max_into(init_l, phase_l)
    _max_into(requests, init_r)
    _max_into(limits, init_l)
    if resources.is_pod_level_requests_set(pod):
        requests.update({k: _quantity(v) for k, v in spec.resources.requests.items()
                         if resources.is_supported_pod_level_resource(k)})
    if resources.is_pod_level_resources_set(pod):
        limits.update({k: _quantity(v) for k, v in spec.resources.limits.items()
                       if resources.is_supported_pod_level_resource(k)})
    if overhead and spec.overhead:
        extra = parse_list(spec.overhead)
        _add_into(requests, extra)
        for k, v in extra.items():
            if k in limits:
                limits[k] = limits[k] + v
    return requests, limits


# ---------------------------------------------------------------- names


def is_native_resource(name: str) -> bool:
    """Unqualified names and ``*kubernetes.io/*`` ones are Kubernetes' own."""
    return "/" not in name or _NATIVE_PREFIX in name


def _is_extended(name: str) -> bool:
    return not is_native_resource(name) and not name.startswith(REQUESTS_PREFIX)


def object_count_name(kind: Kind[Message, Message]) -> str:
    """``count/<plural>`` for the core group, ``count/<plural>.<group>`` otherwise."""
    return f"count/{kind.plural}.{kind.group}" if kind.group else f"count/{kind.plural}"


POD_COUNT: Final = object_count_name(POD)


def compute_usage(requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]) -> ResourceList:
    """Kubernetes' podComputeUsageHelper: the quota resources a set of requests and limits uses."""
    out: ResourceList = {PODS: _ONE}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            out[name] = out[REQUESTS_PREFIX + name] = requests[name]
        if name in limits:
            out[LIMITS_PREFIX + name] = limits[name]
    for name, v in requests.items():
        if name.startswith(_HUGEPAGES):
            out[name] = out[REQUESTS_PREFIX + name] = v
        elif _is_extended(name):
            out[REQUESTS_PREFIX + name] = v
    return out


# ---------------------------------------------------------------- evaluators


class Evaluator(Protocol):
    """What quota knows about one resource (Kubernetes' quota.Evaluator): which quota resources it
    accounts, whether a quota's scopes select an object, and what an object uses."""

    @property
    def resource(self) -> str:
        """The group resource, as errors name it: ``pods``, ``replicasets.apps``."""

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        """The quota resources among ``names`` this evaluator accounts."""

    def matches_scope(self, selector: core_pb2.ScopedResourceSelectorRequirement, obj: Message) -> bool:
        """Whether ``obj`` is in the scope ``selector`` names."""

    def usage(self, obj: Message, now: datetime) -> ResourceList:
        """What ``obj`` uses."""

    def constraints(self, required: Sequence[str], obj: Message) -> str | None:
        """Why ``obj`` may not be admitted under a quota tracking ``required`` (None: it may)."""


@dataclass(frozen=True)
class ObjectCountEvaluator:
    """Kubernetes' generic object-count evaluator: one per kind, one unit per object.

    Every namespaced kind other than pods and Events is counted by number:
    ``count/<plural>.<group>`` (``count/replicasets.apps``), ``count/<plural>`` for the core group,
    and ResourceQuotas also under the legacy name ``resourcequotas``.
    """

    kind: Kind[Message, Message]

    @property
    def resource(self) -> str:
        return f"{self.kind.plural}.{self.kind.group}" if self.kind.group else self.kind.plural

    @property
    def names(self) -> tuple[str, ...]:
        legacy = _LEGACY_COUNT_NAMES.get(self.kind.plural)
        return (object_count_name(self.kind), legacy) if legacy else (object_count_name(self.kind),)

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        return [n for n in names if n in self.names]

    def matches_scope(self, selector: core_pb2.ScopedResourceSelectorRequirement, obj: Message) -> bool:
        return False  # scopes select pods only

    def usage(self, obj: Message, now: datetime) -> ResourceList:
        return {n: _ONE for n in self.names}

    def constraints(self, required: Sequence[str], obj: Message) -> str | None:
        return None


def counts_compute(pod: core_pb2.Pod, now: datetime) -> bool:
    """Kubernetes' QuotaV1Pod: a pod counts for compute resources (and ``pods``) unless it is
    terminal, or being deleted and past its grace period — a pod stuck terminating (its node
    lost) must not keep its owner from replacing it."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return False
    meta = pod.metadata
    if meta.deletion_timestamp and meta.HasField("deletion_grace_period_seconds"):
        deleted = timeutil.parse(meta.deletion_timestamp)
        if deleted is not None and now > deleted + timedelta(seconds=meta.deletion_grace_period_seconds):
            return False
    return True


def is_terminating(pod: core_pb2.Pod) -> bool:
    """The Terminating scope: the pod has an active deadline."""
    return pod.spec.HasField("active_deadline_seconds") and pod.spec.active_deadline_seconds >= 0


def _cross_namespace(terms: Iterable[core_pb2.PodAffinityTerm]) -> bool:
    return any(t.namespaces or t.HasField("namespace_selector") for t in terms)


def _uses_cross_namespace_affinity(pod: core_pb2.Pod) -> bool:
    affinity = pod.spec.affinity
    for a in (affinity.pod_affinity, affinity.pod_anti_affinity):
        if _cross_namespace(a.required_during_scheduling_ignored_during_execution) or _cross_namespace(
                w.pod_affinity_term for w in a.preferred_during_scheduling_ignored_during_execution):
            return True
    return False


def _priority_class_matches(pod: core_pb2.Pod, selector: core_pb2.ScopedResourceSelectorRequirement) -> bool:
    """The PriorityClass scope as a label selector over ``{PriorityClass: <the pod's class>}``."""
    name = pod.spec.priority_class_name
    op = selector.operator
    if op == "In":
        return bool(name) and name in selector.values
    if op == "NotIn":
        return not name or name not in selector.values
    if op == "DoesNotExist":
        return not name
    return bool(name)  # Exists


class PodEvaluator:
    """Kubernetes' pod evaluator (pkg/quota/v1/evaluator/core/pods.go)."""

    resource: Final = POD.plural
    _RESOURCES: Final = frozenset({POD_COUNT, PODS, "cpu", "memory", "ephemeral-storage", "requests.cpu",
                                   "requests.memory", "requests.ephemeral-storage", "limits.cpu", "limits.memory",
                                   "limits.ephemeral-storage"})

    def matching_resources(self, names: Iterable[str]) -> list[str]:
        out = []
        for n in names:
            if n in self._RESOURCES or n.startswith(_HUGEPAGES) or n.startswith(REQUESTS_PREFIX + _HUGEPAGES) or (
                    n.startswith(REQUESTS_PREFIX) and not is_native_resource(n)):
                out.append(n)
        return out

    def matches_scope(self, selector: core_pb2.ScopedResourceSelectorRequirement, obj: Message) -> bool:
        assert isinstance(obj, core_pb2.Pod)
        scope = selector.scope_name
        if scope in ("Terminating", "NotTerminating"):
            return is_terminating(obj) == (scope == "Terminating")
        if scope in ("BestEffort", "NotBestEffort"):
            return (resources.qos_class(obj) == resources.QOS_BEST_EFFORT) == (scope == "BestEffort")
        if scope == "PriorityClass":
            return _priority_class_matches(obj, selector)
        if scope == "CrossNamespacePodAffinity":
            return _uses_cross_namespace_affinity(obj)
        return False

    def usage(self, obj: Message, now: datetime) -> ResourceList:
        """Kubernetes' PodUsageFunc: a pod always counts ``count/pods``; while it is not terminal and
        not past its deletion grace (``counts_compute``, Kubernetes' QuotaV1Pod) it also counts
        ``pods`` and its compute resources (``pod_amounts``)."""
        assert isinstance(obj, core_pb2.Pod)
        out: ResourceList = {POD_COUNT: _ONE}
        if not counts_compute(obj, now):
            return out
        requests, limits = pod_amounts(obj)
        out.update(compute_usage(requests, limits))
        return out

    def constraints(self, required: Sequence[str], obj: Message) -> str | None:
        """Kubernetes' pod Constraints: under a quota tracking cpu or memory, every container must
        name that request or limit (unless pod-level resources are set)."""
        assert isinstance(obj, core_pb2.Pod)
        if resources.is_pod_level_resources_set(obj):
            return None
        wanted = _MUST_SPECIFY.intersection(required)
        missing: dict[str, set[str]] = {}
        for c in (*obj.spec.containers, *obj.spec.init_containers):
            named = compute_usage(parse_list(c.resources.requests), parse_list(c.resources.limits))
            for res in wanted.difference(named):
                missing.setdefault(res, set()).add(c.name)
        if not missing:
            return None
        return "must specify " + "; ".join(f"{res} for: {','.join(sorted(missing[res]))}" for res in sorted(missing))


POD_EVALUATOR: Final = PodEvaluator()
# Kinds whose objects quota counts: every namespaced kind but Events (Kubernetes ignores them).
_EVALUATORS: Final[dict[str, Evaluator]] = {
    k.plural: POD_EVALUATOR if k is POD else ObjectCountEvaluator(k)
    for k in KINDS if k.namespaced and k is not EVENT
}


def evaluator_for(kind: Kind[Message, Message]) -> Evaluator | None:
    """The evaluator of ``kind``'s objects; None for kinds quota does not count."""
    return _EVALUATORS.get(kind.plural)


def evaluator_for_plural(plural: str) -> Evaluator:
    """The evaluator of a counted kind, by its plural (``counted_kinds``)."""
    return _EVALUATORS[plural]


def counted_kinds() -> list[Kind[Message, Message]]:
    """The kinds quota counts (the resourcequota controller watches each)."""
    return [k for k in KINDS if k.plural in _EVALUATORS]


def countable(name: str) -> bool:
    """Whether some evaluator accounts the quota resource ``name`` (``services`` is not, here)."""
    return any(e.matching_resources([name]) for e in _EVALUATORS.values())


# ---------------------------------------------------------------- quotas


def scope_selectors(quota: core_pb2.ResourceQuota) -> list[core_pb2.ScopedResourceSelectorRequirement]:
    """The quota's scopes (each as ``Exists``) and its scope selector's expressions."""
    out = [core_pb2.ScopedResourceSelectorRequirement(scope_name=s, operator="Exists") for s in quota.spec.scopes]
    out.extend(quota.spec.scope_selector.match_expressions)
    return out


def in_scope(evaluator: Evaluator, quota: core_pb2.ResourceQuota, obj: Message) -> bool:
    return all(evaluator.matches_scope(s, obj) for s in scope_selectors(quota))


def matches(evaluator: Evaluator, quota: core_pb2.ResourceQuota, obj: Message) -> bool:
    """Kubernetes' generic Matches: the quota limits something the evaluator accounts — going by
    ``status.hard``, so a quota the controller has not yet observed limits nothing — and its scopes
    select ``obj``."""
    return bool(evaluator.matching_resources(quota.status.hard)) and in_scope(evaluator, quota, obj)


def calculate_usage(quota: core_pb2.ResourceQuota, objects: Mapping[str, Sequence[Message]],
                    now: datetime) -> ResourceList:
    """Kubernetes' CalculateUsage: what the objects of the quota's namespace (``objects``, by kind
    plural) use of the resources the quota's ``spec.hard`` names, each tracked resource starting at
    zero."""
    hard = list(quota.spec.hard)
    usage: ResourceList = {}
    for plural, evaluator in _EVALUATORS.items():
        tracked = evaluator.matching_resources(hard)
        if not tracked:
            continue
        stats: ResourceList = dict.fromkeys(tracked, _ZERO)
        for obj in objects.get(plural, ()):
            if in_scope(evaluator, quota, obj):
                stats = add(stats, evaluator.usage(obj, now))
        usage = add(usage, mask(stats, tracked))
    return usage
