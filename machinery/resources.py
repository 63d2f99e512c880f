"""Pod resource math shared by every kplane component (scheduler, kubelet, controllers, apiserver).

This is the Python counterpart of Kubernetes' ``k8s.io/component-helpers/resource`` helpers
(``PodRequests``/``PodLimits``) and of ``pkg/apis/core/v1/helper/qos`` (``GetPodQOS``/
``ComputePodQOS``), written from their documented behaviour. Amounts are ``ResourceList``s.

- ``pod_requests`` / ``pod_limits``: what a pod needs, its containers, sidecars, init containers,
  overhead and pod-level resources together (``_aggregate`` sums the containers);
- ``qos_class`` / ``compute_qos``: the pod's QoS class;
- ``to_resource_list`` / ``format_resource_list``: quantity strings to integer units and back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Final

from machinery.api import core_pb2
from machinery.quantity import BINARY_SI, DECIMAL_SI, Quantity, parse_quantity

__all__ = [
    "CPU",
    "EPHEMERAL_STORAGE",
    "HUGEPAGES_PREFIX",
    "MEMORY",
    "NON_ZERO_DEFAULTS",
    "QOS_BEST_EFFORT",
    "QOS_BURSTABLE",
    "QOS_GUARANTEED",
    "RESIZE_DEFERRED",
    "RESIZE_INFEASIBLE",
    "ResourceList",
    "add",
    "compute_qos",
    "container_limits",
    "container_requests",
    "fits",
    "format_resource_list",
    "is_scalar_resource",
    "is_pod_level_requests_set",
    "is_pod_level_resources_set",
    "is_pod_resize_infeasible",
    "is_resize_in_progress",
    "is_restartable_init_container",
    "is_supported_pod_level_resource",
    "max_of",
    "pod_limits",
    "pod_requests",
    "qos_class",
    "resizable_containers",
    "resize_status",
    "sub",
    "to_resource_list",
]

# Amounts are plain ``dict[str, int]`` ("ResourceList" in integer units): ``cpu`` in millicores,
# every other resource (memory, ephemeral-storage, hugepages-*, extended resources) as its integer
# value, rounded up as Go's ``Quantity.MilliValue()``/``Value()`` do.
ResourceList = dict[str, int]

CPU: Final = "cpu"
MEMORY: Final = "memory"
EPHEMERAL_STORAGE: Final = "ephemeral-storage"
HUGEPAGES_PREFIX: Final = "hugepages-"
_STORAGE: Final = "storage"

QOS_GUARANTEED: Final = "Guaranteed"
QOS_BURSTABLE: Final = "Burstable"
QOS_BEST_EFFORT: Final = "BestEffort"

RESIZE_INFEASIBLE: Final = "Infeasible"
RESIZE_DEFERRED: Final = "Deferred"
_POD_RESIZE_PENDING: Final = "PodResizePending"
_POD_RESIZE_IN_PROGRESS: Final = "PodResizeInProgress"
_CONTAINER_RESTART_ALWAYS: Final = "Always"

# The scheduler's defaults for containers that request no cpu/memory, used for scoring
# (schedutil.DefaultMilliCPURequest = 100m, DefaultMemoryRequest = 200Mi). Pass as
# ``pod_requests(..., non_missing=NON_ZERO_DEFAULTS)``.
NON_ZERO_DEFAULTS: Final[Mapping[str, int]] = {CPU: 100, MEMORY: 200 * 1024 * 1024}

_QOS_RESOURCES: Final = (CPU, MEMORY)


# ---------------------------------------------------------------- conversions

# Quantity strings are parsed through :mod:`machinery.quantity` and memoised here, so the per-pod,
# per-cycle hot paths (``pod_requests``, ``pod_limits``, ``compute_qos``) only walk the protobuf
# maps.


@lru_cache(maxsize=16384)
def _milli(s: str) -> int:
    """A cpu quantity string in millicores, rounded up (Go's MilliValue)."""
    return parse_quantity(s).milli_value()


@lru_cache(maxsize=16384)
def _units(s: str) -> int:
    """A quantity string as an integer, rounded up (Go's Value)."""
    return parse_quantity(s).value()


@lru_cache(maxsize=16384)
def _nanos(s: str) -> int:
    """The exact value of a quantity string in nano-units (for exact comparisons)."""
    return parse_quantity(s).nanos


def _amount(name: str, s: str) -> int:
    return _milli(s) if name == CPU else _units(s)


def _rl(m: Mapping[str, str]) -> ResourceList:
    """A protobuf ``map<string,string>`` of quantities as a fresh ResourceList."""
    if not m:
        return {}
    # Keys then __getitem__: much faster than .items() on upb's map containers.
    return {k: (_milli(m[k]) if k == CPU else _units(m[k])) for k in m}


def _max_map_into(acc: ResourceList, m: Mapping[str, str]) -> None:
    """``acc = max(acc, m)`` per resource for a protobuf quantity map."""
    for k in m:
        v = _milli(m[k]) if k == CPU else _units(m[k])
        cur = acc.get(k)
        if cur is None or v > cur:
            acc[k] = v


def _add_map_into(acc: ResourceList, m: Mapping[str, str]) -> None:
    """``acc += m`` for a protobuf quantity map, without building an intermediate dict."""
    for k in m:
        v = _milli(m[k]) if k == CPU else _units(m[k])
        acc[k] = acc.get(k, 0) + v


def to_resource_list(m: Mapping[str, str]) -> ResourceList:
    """Quantity strings (a ``map<string,string>``) to integer units: cpu in millicores, the rest
    as integer values (bytes for memory, ephemeral-storage and hugepages), rounded up.

    Raises :class:`machinery.quantity.QuantityError` (a ValueError) for a malformed quantity.
    """
    return _rl(m)


def is_scalar_resource(name: str) -> bool:
    """Extended resources (``example.com/foo``), hugepages and attachable volumes: what a node
    accounts besides cpu, memory, ephemeral-storage and pods (v1helper.IsScalarResourceName)."""
    if name.startswith(HUGEPAGES_PREFIX) or name.startswith("attachable-volumes-"):
        return True
    return "/" in name and not name.startswith("kubernetes.io/")


def _is_byte_resource(name: str) -> bool:
    return name in (MEMORY, EPHEMERAL_STORAGE, _STORAGE) or name.startswith(HUGEPAGES_PREFIX)


def format_resource_list(rl: Mapping[str, int]) -> dict[str, str]:
    """Integer units back to canonical Kubernetes quantity strings.

    cpu prints as Go prints ``NewMilliQuantity(n, DecimalSI)`` (``1500m``, ``100m``, ``2``);
    byte resources as ``NewQuantity(n, BinarySI)`` (``1Gi``, ``1536Mi``); any other resource as
    ``NewQuantity(n, DecimalSI)``.
    """
    out: dict[str, str] = {}
    for name, n in rl.items():
        if name == CPU:
            q = Quantity.from_milli(n, DECIMAL_SI)
        elif _is_byte_resource(name):
            q = Quantity.from_int(n, BINARY_SI)
        else:
            q = Quantity.from_int(n, DECIMAL_SI)
        out[name] = str(q)
    return out


# ---------------------------------------------------------------- ResourceList helpers


def add(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """``a + b`` per resource (a missing resource counts as 0); a new dict."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def sub(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """``a - b`` per resource (a missing resource counts as 0); a new dict. Not clamped at 0."""
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def max_of(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    """The per-resource maximum of ``a`` and ``b`` over the union of their resources."""
    out = dict(a)
    for k, v in b.items():
        cur = out.get(k)
        if cur is None or v > cur:
            out[k] = v
    return out


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> list[str]:
    """The resources of ``request`` that exceed ``free`` (absent from ``free`` means 0), in
    ``request``'s order; an empty list when the request fits."""
    return [k for k, v in request.items() if v > free.get(k, 0)]


def _add_into(acc: ResourceList, rl: Mapping[str, int]) -> None:
    for k, v in rl.items():
        acc[k] = acc.get(k, 0) + v


def _max_into(acc: ResourceList, rl: Mapping[str, int]) -> None:
    for k, v in rl.items():
        cur = acc.get(k)
        if cur is None or v > cur:
            acc[k] = v


def _apply_non_missing(rl: ResourceList, non_missing: Mapping[str, int]) -> ResourceList:
    """Go's applyNonMissing: resources the container does not name at all (even as 0) get the
    default. ``rl`` is always a dict this module owns, so it is updated in place."""
    for k, v in non_missing.items():
        if k not in rl:
            rl[k] = v
    return rl


# ---------------------------------------------------------------- containers


def is_restartable_init_container(c: core_pb2.Container) -> bool:
    """An init container with ``restartPolicy: Always``, i.e. a sidecar."""
    return c.restart_policy == _CONTAINER_RESTART_ALWAYS


def resizable_containers(pod: core_pb2.Pod) -> list[core_pb2.Container]:
    """Regular containers and sidecars: non-sidecar init containers are never resized (KEP-1287)."""
    return list(pod.spec.containers) + [c for c in pod.spec.init_containers if is_restartable_init_container(c)]


def container_requests(c: core_pb2.Container) -> ResourceList:
    """The container's spec requests in integer units (no defaulting, no status)."""
    return _rl(c.resources.requests)


def container_limits(c: core_pb2.Container) -> ResourceList:
    """The container's spec limits in integer units."""
    return _rl(c.resources.limits)


# ---------------------------------------------------------------- resize status


def is_pod_resize_infeasible(pod: core_pb2.Pod) -> bool:
    """Go's IsPodResizeInfeasible: the first ``PodResizePending`` condition has reason
    ``Infeasible`` (its status is not looked at, as in Go; the kubelet only writes True)."""
    for cond in pod.status.conditions:
        if cond.type == _POD_RESIZE_PENDING:
            return cond.reason == RESIZE_INFEASIBLE
    return False


def resize_status(pod: core_pb2.Pod) -> str | None:
    """``Infeasible`` or ``Deferred`` when the pod has a ``PodResizePending`` condition with
    status ``True`` and that reason; otherwise None."""
    for cond in pod.status.conditions:
        if cond.type == _POD_RESIZE_PENDING and cond.status == "True":
            if cond.reason in (RESIZE_INFEASIBLE, RESIZE_DEFERRED):
                return cond.reason
            return None
    return None


def is_resize_in_progress(pod: core_pb2.Pod) -> bool:
    """True while the kubelet reports a ``PodResizeInProgress`` condition with status ``True``
    (allocated resources accepted but not yet actuated, or actuation failed)."""
    for cond in pod.status.conditions:
        if cond.type == _POD_RESIZE_IN_PROGRESS and cond.status == "True":
            return True
    return False


# ---------------------------------------------------------------- pod-level resources


def is_supported_pod_level_resource(name: str) -> bool:
    """cpu, memory and hugepages-* may be set in ``spec.resources`` (PodLevelResources)."""
    return name == CPU or name == MEMORY or name.startswith(HUGEPAGES_PREFIX)


def _any_supported(names: Iterable[str]) -> bool:
    for name in names:
        if name == CPU or name == MEMORY or name.startswith(HUGEPAGES_PREFIX):
            return True
    return False


def is_pod_level_requests_set(pod: core_pb2.Pod) -> bool:
    """``spec.resources.requests`` names at least one supported pod-level resource."""
    spec = pod.spec
    return spec.HasField("resources") and _any_supported(spec.resources.requests)


def is_pod_level_resources_set(pod: core_pb2.Pod) -> bool:
    """``spec.resources`` requests or limits name at least one supported pod-level resource."""
    spec = pod.spec
    if not spec.HasField("resources"):
        return False
    r = spec.resources
    return _any_supported(r.requests) or _any_supported(r.limits)


def _apply_pod_level(acc: ResourceList, m: Mapping[str, str]) -> None:
    for name in m:
        if is_supported_pod_level_resource(name):
            acc[name] = _amount(name, m[name])


# ---------------------------------------------------------------- pod requests / limits


def _status_index(pod: core_pb2.Pod) -> dict[str, core_pb2.ContainerStatus] | None:
    """Container statuses by name, init container statuses winning a clash (as Go's map)."""
    st = pod.status
    if not st.container_statuses and not st.init_container_statuses:
        return None
    index = {cs.name: cs for cs in st.container_statuses}
    for cs in st.init_container_statuses:
        index[cs.name] = cs
    return index


def _effective_requests(c: core_pb2.Container, statuses: dict[str, core_pb2.ContainerStatus] | None,
                        infeasible: bool) -> ResourceList:
    """Go's determineContainerReqs: with a reported status (``resources`` present), the request
    is max(spec unless infeasible, status.resources.requests, status.allocatedResources)."""
    if statuses is not None:
        cs = statuses.get(c.name)
        if cs is not None and cs.HasField("resources"):
            if infeasible:
                out = _rl(cs.resources.requests)
            else:
                out = _rl(c.resources.requests)
                _max_map_into(out, cs.resources.requests)
            _max_map_into(out, cs.allocated_resources)
            return out
    return _rl(c.resources.requests)


def _effective_limits(c: core_pb2.Container, statuses: dict[str, core_pb2.ContainerStatus] | None,
                      infeasible: bool) -> ResourceList:
    """Go's determineContainerLimits: max(spec unless infeasible, status.resources.limits)."""
    if statuses is not None:
        cs = statuses.get(c.name)
        if cs is not None and cs.HasField("resources"):
            if infeasible:
                return _rl(cs.resources.limits)
            out = _rl(c.resources.limits)
            _max_map_into(out, cs.resources.limits)
            return out
    return _rl(c.resources.limits)


def _aggregate(pod: core_pb2.Pod, use_status_resources: bool, limits: bool,
               non_missing: Mapping[str, int] | None, ignore_desired: bool = False) -> ResourceList:
    """Sum of regular containers and sidecars, maxed with the init phase (KEP-753).

    Regular containers run together, so their requests/limits are summed. Restartable init
    containers (sidecars, KEP-753) keep running, so they are added to that sum, and every init
    container also needs the sidecars started before it: the init phase needs
    ``max_i(init_i + sum(sidecars before i))`` and the pod needs the larger of the init phase and
    the steady state.
    """
    spec = pod.spec
    statuses = _status_index(pod) if use_status_resources else None
    infeasible = statuses is not None and (ignore_desired or is_pod_resize_infeasible(pod))
    effective = _effective_limits if limits else _effective_requests
    spec_field = "limits" if limits else "requests"

    total: ResourceList = {}
    if statuses is None and not non_missing:
        # Fast path (unscheduled pods, kubelets without resize): sum the spec maps directly.
        for c in spec.containers:
            _add_map_into(total, getattr(c.resources, spec_field))
    else:
        for c in spec.containers:
            rl = effective(c, statuses, infeasible)
            if non_missing:
                _apply_non_missing(rl, non_missing)
            _add_into(total, rl)

    if not spec.init_containers:
        return total
    sidecars: ResourceList = {}
    init_phase: ResourceList = {}
    for c in spec.init_containers:
        if is_restartable_init_container(c):
            rl = effective(c, statuses, infeasible)
            if non_missing:
                _apply_non_missing(rl, non_missing)
            _add_into(total, rl)
            _add_into(sidecars, rl)
            _max_into(init_phase, sidecars)
        else:
            # Non-restartable init containers are never resized: their spec is what ran.
            rl = _rl(getattr(c.resources, spec_field))
            if non_missing:
                _apply_non_missing(rl, non_missing)
            _add_into(rl, sidecars)
            _max_into(init_phase, rl)
    _max_into(total, init_phase)
    return total


def pod_requests(pod: core_pb2.Pod, *, use_status_resources: bool = True, exclude_overhead: bool = False,
                 non_missing: Mapping[str, int] | None = None, skip_pod_level: bool = False,
                 ignore_desired: bool = False) -> ResourceList:
    """Kubernetes' PodRequests: the resources a pod needs, in integer units.

    ``use_status_resources`` (InPlacePodVerticalScaling, KEP-1287) makes regular containers and
    sidecars with a reported ``status.containerStatuses[].resources`` (running containers) count for
    max(spec — unless the pod's resize is Infeasible —, allocatedResources, resources.requests).
    ``non_missing`` fills in resources a container does not name at all (the scheduler passes
    :data:`NON_ZERO_DEFAULTS` for scoring). Pod-level ``spec.resources.requests`` replace the
    aggregate for cpu/memory/hugepages unless ``skip_pod_level``. Overhead is added last unless
    ``exclude_overhead``.

    ``ignore_desired`` is the kubelet's view of a pod other than the one it is resizing (KEP-5836
    "Risk of Additional Preemption"): a container with a reported status counts for
    max(allocatedResources, resources.requests), its spec (a resize not yet allocated) ignored.
    """
    reqs = _aggregate(pod, use_status_resources, False, non_missing, ignore_desired)
    spec = pod.spec
    if not skip_pod_level and spec.HasField("resources") and spec.resources.requests:
        _apply_pod_level(reqs, spec.resources.requests)
    if not exclude_overhead and spec.overhead:
        _add_map_into(reqs, spec.overhead)
    return reqs


def pod_limits(pod: core_pb2.Pod, *, use_status_resources: bool = True, exclude_overhead: bool = False,
               skip_pod_level: bool = False) -> ResourceList:
    """Kubernetes' PodLimits: the aggregated limits (resources no container limits are absent).

    Same container/sidecar/init rules as :func:`pod_requests`; with ``use_status_resources`` a
    container's limit is max(spec — unless Infeasible —, status.resources.limits). Pod-level
    ``spec.resources.limits`` replace the aggregate when pod-level resources are set at all.
    Overhead is added only to resources that already have a non-zero limit.
    """
    limits = _aggregate(pod, use_status_resources, True, None)
    spec = pod.spec
    if not skip_pod_level and is_pod_level_resources_set(pod):
        _apply_pod_level(limits, spec.resources.limits)
    if not exclude_overhead and spec.overhead:
        overhead = spec.overhead
        for name in overhead:
            cur = limits.get(name)
            if cur:
                limits[name] = cur + _amount(name, overhead[name])
    return limits


# ---------------------------------------------------------------- QoS


def qos_class(pod: core_pb2.Pod, *, pod_level_resources: bool = True) -> str:
    """Kubernetes' GetPodQOS: ``status.qosClass`` when set (it is immutable once the apiserver
    set it), else :func:`compute_qos`."""
    q = pod.status.qos_class
    return q if q else compute_qos(pod, pod_level_resources=pod_level_resources)


def compute_qos(pod: core_pb2.Pod, *, pod_level_resources: bool = True) -> str:
    """Kubernetes' ComputePodQOS from the spec, counting only cpu and memory.

    - BestEffort: no container (init containers included) has a positive cpu/memory request
      or limit;
    - Guaranteed: every container has positive cpu and memory limits, and the requests equal
      the limits (a missing request is defaulted from the limit, as the apiserver does);
    - Burstable otherwise.

    Zero quantities count as unset. When pod-level resources are set (and the PodLevelResources
    gate, ``pod_level_resources``, is on) they alone decide, with the same rules.
    Ephemeral containers never count.
    """
    spec = pod.spec
    sources: list[core_pb2.ResourceRequirements]
    if pod_level_resources and spec.HasField("resources") and (spec.resources.requests or spec.resources.limits):
        sources = [spec.resources]
    else:
        sources = [c.resources for c in spec.containers]
        sources.extend(c.resources for c in spec.init_containers)

    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for r in sources:
        req_map = r.requests
        lim_map = r.limits
        limits_found = 0
        for name in _QOS_RESOURCES:
            lim_s = lim_map.get(name)
            req_s = req_map.get(name)
            if req_s is None:
                req_s = lim_s  # SetDefaults_Pod: requests default to limits
            if lim_s is not None:
                v = _nanos(lim_s)
                if v > 0:
                    limits[name] = limits.get(name, 0) + v
                    limits_found += 1
            if req_s is not None:
                v = _nanos(req_s)
                if v > 0:
                    requests[name] = requests.get(name, 0) + v
        if limits_found != len(_QOS_RESOURCES):
            guaranteed = False

    if not requests and not limits:
        return QOS_BEST_EFFORT
    if guaranteed and requests == limits:
        return QOS_GUARANTEED
    return QOS_BURSTABLE
