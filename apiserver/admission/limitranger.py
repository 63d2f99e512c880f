"""LimitRanger admission (Kubernetes' plugin/pkg/admission/limitranger), for pods.

On a pod's create, and on its ``resize`` subresource, every LimitRange of the namespace, in name
order, mutates and validates the pod:

- ``LimitRanger``: the plugin, and the writes it looks at (``LimitRanger._ranges_for``);
- ``default_pod``: the requests and limits containers do not name, filled in from the ranges;
- ``violations`` / ``validate_pod``: the ranges' bounds checked, the pod refused with what it breaks.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Final

from apiserver import defaults
from apiserver.admission.interfaces import Attributes, Operation
from apiserver.admission.storage import AdmissionStorage
from machinery import errors, kinds, quota
from machinery.api import core_pb2
from machinery.kinds import LIMIT_RANGE
from machinery.quantity import Quantity

ANNOTATION: Final = "kubernetes.io/limit-ranger"
CONTAINER: Final = "Container"
POD: Final = "Pod"
# resource.MaxMilliValue: the largest value whose milli-value fits an int64.
_MAX_MILLI_VALUE: Final = (2**63 - 1) // 1000
_NONE: Final = Quantity.from_int(0)


def aggregate(messages: Sequence[str]) -> str:
    """Go's utilerrors.NewAggregate(...).Error(): one message as it is, several distinct ones in
    brackets, comma-separated, repeats dropped."""
    distinct = list(dict.fromkeys(messages))
    return distinct[0] if len(distinct) == 1 else "[" + ", ".join(distinct) + "]"


def forbidden(name: str, messages: Sequence[str]) -> errors.Forbidden:
    return errors.Forbidden(f'pods "{name}" is forbidden: {aggregate(messages)}')


# ---------------------------------------------------------------- defaults


def _defaults(ranges: Iterable[core_pb2.LimitRange]) -> list[tuple[dict[str, str], dict[str, str]]]:
    """Each range's (defaultRequest, default) merged over its Container items."""
    out = []
    for lr in ranges:
        requests: dict[str, str] = {}
        limits: dict[str, str] = {}
        for item in lr.spec.limits:
            if item.type == CONTAINER:
                requests.update(item.default_request)
                limits.update(item.default)
        out.append((requests, limits))
    return out


def _fill(target: MutableMapping[str, str], defaults: Mapping[str, str]) -> list[str]:
    """Set what ``defaults`` names and ``target`` does not; the names set, in resource-name order
    (Go's map order is random)."""
    added = sorted(k for k in defaults if k not in target)
    for k in added:
        target[k] = defaults[k]
    return added


def default_pod(pod: core_pb2.Pod, ranges: Sequence[core_pb2.LimitRange], annotate: bool = True) -> str | None:
    """Kubernetes' PodMutateLimitFunc, range by range: fill in the requests and limits containers
    do not name. The annotation value of the last range that filled anything in (None if none did);
    it is set on the pod if ``annotate`` (not on a resize, which changes resources only).

    A container (init containers too) that names no request or no limit for a resource gets the
    ``defaultRequest`` / ``default`` of the Container items, and the pod is annotated
    ``kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for container c1; cpu
    limit for container c1`` (on a resize only the resources stay, as Kubernetes' resize strategy
    keeps only them).
    """
    annotation = None
    for requests, limits in _defaults(ranges):
        notes = []
        for c, prefix in [*((c, "container") for c in pod.spec.containers),
                          *((c, "init container") for c in pod.spec.init_containers)]:
            limited = _fill(c.resources.limits, limits)
            requested = _fill(c.resources.requests, requests)
            if requested:
                notes.append(f"{', '.join(requested)} request for {prefix} {c.name}")
            if limited:
                notes.append(f"{', '.join(limited)} limit for {prefix} {c.name}")
        if notes:
            annotation = "LimitRanger plugin set: " + "; ".join(notes)
            if annotate:
                pod.metadata.annotations[ANNOTATION] = annotation
    return annotation


# ---------------------------------------------------------------- constraints


def _values(request: Quantity, limit: Quantity, enforced: Quantity) -> tuple[int, int, int]:
    """Go's requestLimitEnforcedValues: milli-values when all three fit, else whole values.

    Requests, limits and bounds compare as Go compares them: in milli-units (whole units beyond
    what an int64 of milli-units holds)."""
    whole = (request.value(), limit.value(), enforced.value())
    if all(v <= _MAX_MILLI_VALUE for v in whole):
        return request.milli_value(), limit.milli_value(), enforced.milli_value()
    return whole


def _observed(name: str, enforced: Quantity, requests: Mapping[str, Quantity], limits: Mapping[str, Quantity]
              ) -> tuple[Quantity | None, Quantity | None, int, int, int]:
    """The request and limit of ``name`` (None when not given) and, comparable, their values and
    the bound's."""
    req, lim = requests.get(name), limits.get(name)
    return (req, lim, *_values(req or _NONE, lim or _NONE, enforced))


def _min(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity],
         limits: Mapping[str, Quantity]) -> str | None:
    """Kubernetes' minConstraint: a request is required, and neither it nor a limit may be lower."""
    req, lim, r, li, e = _observed(name, enforced, requests, limits)
    if req is None:
        return f"minimum {name} usage per {kind} is {enforced}.  No request is specified"
    low = ("request", req) if r < e else ("limit", lim) if lim is not None and li < e else None
    return f"minimum {name} usage per {kind} is {enforced}, but {low[0]} is {low[1]}" if low else None


def _max(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity],
         limits: Mapping[str, Quantity]) -> str | None:
    """Kubernetes' maxConstraint: a limit is required, and neither it nor a request may be higher."""
    req, lim, r, li, e = _observed(name, enforced, requests, limits)
    if lim is None:
        return f"maximum {name} usage per {kind} is {enforced}.  No limit is specified"
    high = ("limit", lim) if li > e else ("request", req) if req is not None and r > e else None
    return f"maximum {name} usage per {kind} is {enforced}, but {high[0]} is {high[1]}" if high else None


def _ratio(kind: str, name: str, enforced: Quantity, requests: Mapping[str, Quantity],
           limits: Mapping[str, Quantity]) -> str | None:
    """Kubernetes' limitRequestRatioConstraint: limit / request no more than the bound."""
    req, lim, r, li, _ = _observed(name, enforced, requests, limits)
    prefix = f"{name} max limit to request ratio per {kind} is {enforced}"
    if req is None or r == 0:
        return f"{prefix}, but no request is specified or request is 0"
    if lim is None or li == 0:
        return f"{prefix}, but no limit is specified or limit is 0"
    observed = li / r
    shown, most = observed, float(enforced.value())
    if enforced.value() <= _MAX_MILLI_VALUE:
        observed, most = observed * 1000, float(enforced.milli_value())
    if observed > most:
        return f"{prefix}, but provided ratio is {shown:f}"
    return None


def _check(item: core_pb2.LimitRangeItem, requests: Mapping[str, Quantity],
           limits: Mapping[str, Quantity]) -> list[str]:
    """The messages for what breaks ``item``'s ``min``, ``max`` and ``maxLimitRequestRatio``; map
    entries are checked in resource-name order (Go's map order is random)."""
    out = []
    for bounds, check in ((item.min, _min), (item.max, _max), (item.max_limit_request_ratio, _ratio)):
        enforced = quota.parse_list(bounds)
        for name in sorted(enforced):
            message = check(item.type, name, enforced[name], requests, limits)
            if message is not None:
                out.append(message)
    return out


def violations(pod: core_pb2.Pod, lr: core_pb2.LimitRange) -> list[str]:
    """Kubernetes' PodValidateLimitFunc: what in ``pod`` breaks ``lr``'s Container and Pod items.

    Container items' ``min``, ``max`` and ``maxLimitRequestRatio`` are checked against each
    container's requests and limits, Pod items' against the pod's (its containers summed, sidecars
    and init containers as KEP-753, pod-level resources replacing what they name), with Kubernetes'
    messages — ``minimum cpu usage per Container is 100m, but request is 50m``, ``maximum memory
    usage per Pod is 1Gi, but limit is 2Gi``, ``cpu max limit to request ratio per Container is 2,
    but provided ratio is 4.000000``.
    """
    out = []
    for item in lr.spec.limits:
        if item.type == CONTAINER:
            for c in (*pod.spec.containers, *pod.spec.init_containers):
                out += _check(item, quota.parse_list(c.resources.requests), quota.parse_list(c.resources.limits))
        elif item.type == POD:
            requests, limits = quota.pod_amounts(pod, use_status_resources=False, overhead=False)
            out += _check(item, requests, limits)
    return out


def validate_pod(pod: core_pb2.Pod, ranges: Sequence[core_pb2.LimitRange]) -> None:
    """Raise Forbidden with the violations of the first range ``pod`` breaks: the first LimitRange
    with violations refuses the pod with all of them, ``pods "x" is forbidden: [minimum ...,
    maximum ...]``."""
    for lr in ranges:
        found = violations(pod, lr)
        if found:
            raise forbidden(pod.metadata.name, found)


class LimitRanger:
    """The plugin: mutates and validates a pod's create and its resize against the namespace's
    LimitRanges, read from the watch cache.

    On a pod's create, and on its ``resize`` subresource (KEP-1287 "Affected Components": "for
    LimitRanger we check that a resize request does not violate the min and max limits specified in
    LimitRange for the Pod's namespace"), every LimitRange of the namespace, in name order,
    **mutates** (``admit``: ``default_pod``) and **validates** (``validate``: ``validate_pod``).
    """

    name = "LimitRanger"

    def __init__(self, registry: AdmissionStorage):
        self._registry = registry

    async def ranges(self, namespace: str) -> list[core_pb2.LimitRange]:
        """The namespace's LimitRanges in name order, this apiserver's latest writes of them included."""
        await self._registry.caught_up(LIMIT_RANGE)
        prefix = LIMIT_RANGE.prefix(namespace)
        store = self._registry.cache[LIMIT_RANGE].store
        return [store[k] for k in sorted(store) if k.startswith(prefix)]

    async def _ranges_for(self, a: Attributes) -> list[core_pb2.LimitRange] | None:
        """The ranges this write is held to (kept for its validate step); None if it is not one
        LimitRanger looks at: a pod's create or resize. A pod being deleted is held to none (let
        through, as Kubernetes does)."""
        if a.kind is not kinds.POD or not isinstance(a.object, core_pb2.Pod):
            return None
        create = a.operation is Operation.CREATE and not a.subresource
        resize = a.operation is Operation.UPDATE and a.subresource == "resize"
        if not (create or resize):
            return None
        if self.name not in a.admitted:
            deleting = isinstance(a.old_object, core_pb2.Pod) and bool(a.old_object.metadata.deletion_timestamp)
            a.admitted[self.name] = [] if deleting else await self.ranges(a.namespace)
        ranges = a.admitted[self.name]
        assert isinstance(ranges, list)
        return ranges

    async def admit(self, a: Attributes) -> None:
        ranges = await self._ranges_for(a)
        if not ranges:
            return
        assert isinstance(a.object, core_pb2.Pod)
        if a.subresource == "resize":
            default_pod(a.object, ranges, annotate=False)
        else:
            defaults.default_pod(a.object)  # Kubernetes defaults the request body before admission
            default_pod(a.object, ranges)

    async def validate(self, a: Attributes) -> None:
        ranges = await self._ranges_for(a)
        if ranges:
            assert isinstance(a.object, core_pb2.Pod)
            validate_pod(a.object, ranges)
