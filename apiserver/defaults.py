"""Defaulting: what Kubernetes' API machinery fills in before validation (pkg/apis/*/v1
``SetDefaults_*``), plus the DefaultTolerationSeconds admission plugin's tolerations.

A pod template (ReplicaSet, Deployment) gets what Kubernetes' defaulters give a template:
SetDefaults_PodSpec and SetDefaults_Container, not SetDefaults_Pod (no requests copied from
limits, no enableServiceLinks) and not DefaultTolerationSeconds (an admission step for pods); the
pods made from it get those when they are created.

Every function mutates the message in place and is idempotent, so it may run on updates too.
Not done here, on purpose: a pod's ``status.phase`` (the registry sets ``Pending``),
``spec.priority``/``preemptionPolicy`` (the priority admission step), and ``resizePolicy``
(Kubernetes stopped defaulting it in v1.33).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from functools import lru_cache
from typing import Any, Final

from machinery import kinds, memo, resources, wellknown
from machinery.api import apps_pb2, core_pb2, policy_pb2, resource_pb2, scheduling_pb2
from machinery.memo import Memo
from machinery.quantity import Quantity, QuantityError, parse_quantity

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: Final = 30
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
TERMINATION_MESSAGE_PATH: Final = "/dev/termination-log"
# DefaultTolerationSeconds admission: --default-not-ready-toleration-seconds and
# --default-unreachable-toleration-seconds.
DEFAULT_NOT_READY_TOLERATION_SECONDS: Final = 300
DEFAULT_UNREACHABLE_TOLERATION_SECONDS: Final = 300
TAINT_NODE_NOT_READY: Final = wellknown.TAINT_NODE_NOT_READY
TAINT_NODE_UNREACHABLE: Final = wellknown.TAINT_NODE_UNREACHABLE
# SetDefaults_Deployment / SetDefaults_ReplicaSet (apps/v1).
DEFAULT_REPLICAS: Final = 1
DEFAULT_MAX_UNAVAILABLE: Final = "25%"
DEFAULT_MAX_SURGE: Final = "25%"
DEFAULT_REVISION_HISTORY_LIMIT: Final = 10
DEFAULT_PROGRESS_DEADLINE_SECONDS: Final = 600
# SetDefaults_Namespace: every namespace carries its name as this label.
LABEL_METADATA_NAME: Final = "kubernetes.io/metadata.name"

_NANOS_PER_MILLI: Final = 10**6


# ---------------------------------------------------------------- helpers


@lru_cache(maxsize=4096)
def _normalized_quantity(text: str) -> str | None:
    """The stored form of a quantity string (see ``_normalize_quantities``); None if malformed."""
    try:
        q = parse_quantity(text)
    except QuantityError:
        return None
    rest = q.nanos % _NANOS_PER_MILLI
    if rest:
        q = Quantity.from_nanos(q.nanos - rest + _NANOS_PER_MILLI, q.format)
    return str(q)


def _normalize_quantities(m: MutableMapping[str, str]) -> bool:
    """SetDefaults_ResourceList, and the form Kubernetes stores: values finer than a milli-unit
    are rounded up to it (``100u`` -> ``1m``) and every value is written as Go's Quantity prints
    it (``1.5`` -> ``1500m``; canonical input such as ``500m`` or ``1Gi`` is kept as given).
    Malformed quantities are left for validation to report. True if a value changed."""
    if not m:
        return False
    changed = None
    for name in m:  # (iterating a protobuf map's keys is much cheaper than its items())
        text = m[name]
        out = _normalized_quantity(text)
        if out is not None and out != text:
            if changed is None:
                changed = []
            changed.append((name, out))
    if changed is None:
        return False
    for name, out in changed:
        m[name] = out
    return True


@lru_cache(maxsize=4096)
def _image_tag_is_latest(image: str) -> bool:
    """Kubernetes pulls ``:latest`` and untagged images Always (parsers.ParseImageName): the tag
    follows the last ':' of the last path component; a digest-only reference has no tag; a
    reference that does not parse (empty, upper-case repository) counts as not latest."""
    ref, at, _ = image.partition("@")
    head, slash, last = ref.rpartition("/")
    name, tag = ref, ""
    if ":" in last:
        last, _, tag = last.partition(":")
        name = head + slash + last
    parts = name.split("/")
    if len(parts) > 1 and (any(c in parts[0] for c in ".:") or parts[0] == "localhost" or parts[0] != parts[0].lower()):
        parts = parts[1:]  # a registry host
    if not name or name != name.strip() or any(p != p.lower() or not p for p in parts):
        return False
    if tag:
        return tag == "latest"
    return not at


# Scalar defaults and the DefaultTolerationSeconds tolerations are applied by merging
# pre-serialized messages that hold just the missing fields: one MergeFromString is much cheaper
# than setting the fields one by one through the protobuf Python API, and it sets exactly those
# fields (the tolerations are appended in order). Maps are never merged: their entries are set
# one by one, in the original order, so that their iteration order stays what it was.

_PULL_POLICY_UNSET: Final = 1
_MESSAGE_PATH_UNSET: Final = 2
_MESSAGE_POLICY_UNSET: Final = 4


@lru_cache(maxsize=None)
def _container_defaults(unset: int, always: bool) -> bytes:
    """The serialized Container of the defaults for the ``unset`` fields (a bit mask)."""
    c = core_pb2.Container()
    if unset & _PULL_POLICY_UNSET:
        c.image_pull_policy = "Always" if always else "IfNotPresent"
    if unset & _MESSAGE_PATH_UNSET:
        c.termination_message_path = TERMINATION_MESSAGE_PATH
    if unset & _MESSAGE_POLICY_UNSET:
        c.termination_message_policy = "File"
    return c.SerializeToString()


def _default_resources(r: core_pb2.ResourceRequirements) -> bool:
    """SetDefaults_ResourceList and SetDefaults_Pod for a container's resources; True if
    anything changed."""
    limits, requests = r.limits, r.requests
    changed = _normalize_quantities(limits) if limits else False
    if requests and _normalize_quantities(requests):
        changed = True
    # SetDefaults_Pod: a limit without a request makes the request equal to the limit.
    if limits:
        for name in limits:
            if name not in requests:
                requests[name] = limits[name]
                changed = True
    return changed


# Serialized containers whose defaulting is merging the given serialized Container (b"": none)
# and nothing else (no ports, resources left unchanged): the containers of one workload's pods
# are alike. Equal bytes mean an equal container, which the defaulting below treats the same.
# Bounded: cleared when full.
_CONTAINER_MERGES: Memo[bytes, bytes] = Memo("apiserver.defaults.container_merges", 1024)


def _container_scalar_defaults(c: core_pb2.Container) -> bytes:
    """The serialized Container of SetDefaults_Container's scalar defaults that ``c`` lacks
    (b"": none)."""
    unset = 0
    always = False
    if not c.image_pull_policy:
        unset = _PULL_POLICY_UNSET
        always = _image_tag_is_latest(c.image)
    if not c.termination_message_path:
        unset |= _MESSAGE_PATH_UNSET
    if not c.termination_message_policy:
        unset |= _MESSAGE_POLICY_UNSET
    return _container_defaults(unset, always) if unset else b""


def _default_ports(ports: Any, host_network: bool) -> None:
    """SetDefaults_ContainerPort (protocol TCP) and, with hostNetwork, hostPort = containerPort."""
    for port in ports:
        if not port.protocol:
            port.protocol = "TCP"
        if host_network and port.host_port == 0:
            port.host_port = port.container_port


def _default_container(c: core_pb2.Container, host_network: bool) -> bytes | None:
    """SetDefaults_Container. Returns the serialized defaults merged into the container when
    that was all the defaulting did (see _CONTAINER_MERGES), else None."""
    key = c.SerializeToString()
    merge = _CONTAINER_MERGES.get(key)
    if merge is not None:
        if merge:
            c.MergeFromString(merge)
        return merge
    merge = _container_scalar_defaults(c)
    if merge:
        c.MergeFromString(merge)
    ports = c.ports
    if ports:
        _default_ports(ports, host_network)
    if c.HasField("resources") and _default_resources(c.resources):
        return None
    if ports:
        return None
    _CONTAINER_MERGES.put(key, merge)
    return merge


def _tolerations_to_add(tolerations: Any) -> int:
    """DefaultTolerationSeconds admission: which of the not-ready (1) and unreachable (2)
    tolerations the pod lacks (an empty key or effect matches)."""
    not_ready = unreachable = False
    for t in tolerations:
        effect = t.effect
        if effect == "NoExecute" or not effect:
            key = t.key
            if key == TAINT_NODE_NOT_READY or not key:
                not_ready = True
            if key == TAINT_NODE_UNREACHABLE or not key:
                unreachable = True
    return (0 if not_ready else 1) | (0 if unreachable else 2)


_DNS_POLICY_UNSET: Final = 1
_RESTART_POLICY_UNSET: Final = 2
_GRACE_PERIOD_UNSET: Final = 4
_SCHEDULER_NAME_UNSET: Final = 8
_SERVICE_LINKS_UNSET: Final = 16
_NOT_READY_MISSING: Final = 32
_UNREACHABLE_MISSING: Final = 64


@lru_cache(maxsize=None)
def _pod_spec_defaults(unset: int) -> bytes:
    """The serialized PodSpec of the defaults for the ``unset`` fields (a bit mask), with the
    DefaultTolerationSeconds tolerations the pod lacks (appended in this order)."""
    spec = core_pb2.PodSpec()
    if unset & _DNS_POLICY_UNSET:
        spec.dns_policy = "ClusterFirst"
    if unset & _RESTART_POLICY_UNSET:
        spec.restart_policy = "Always"
    if unset & _GRACE_PERIOD_UNSET:
        spec.termination_grace_period_seconds = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    if unset & _SCHEDULER_NAME_UNSET:
        spec.scheduler_name = DEFAULT_SCHEDULER_NAME
    if unset & _SERVICE_LINKS_UNSET:
        spec.enable_service_links = True
    _default_tolerations_into(spec.tolerations, (1 if unset & _NOT_READY_MISSING else 0)
                              | (2 if unset & _UNREACHABLE_MISSING else 0))
    return spec.SerializeToString()


def _pod_spec_unset(spec: core_pb2.PodSpec) -> int:
    """SetDefaults_PodSpec's scalar fields the spec lacks (dnsPolicy, restartPolicy,
    terminationGracePeriodSeconds, schedulerName), as ``_pod_spec_defaults`` bits."""
    unset = 0
    if not spec.dns_policy:
        unset = _DNS_POLICY_UNSET
    if not spec.restart_policy:
        unset |= _RESTART_POLICY_UNSET
    if not spec.HasField("termination_grace_period_seconds"):
        unset |= _GRACE_PERIOD_UNSET
    if not spec.scheduler_name:
        unset |= _SCHEDULER_NAME_UNSET
    return unset


def _default_tolerations_into(tolerations: Any, missing: int) -> None:
    if missing & 1:
        tolerations.add(key=TAINT_NODE_NOT_READY, operator="Exists", effect="NoExecute",
                        toleration_seconds=DEFAULT_NOT_READY_TOLERATION_SECONDS)
    if missing & 2:
        tolerations.add(key=TAINT_NODE_UNREACHABLE, operator="Exists", effect="NoExecute",
                        toleration_seconds=DEFAULT_UNREACHABLE_TOLERATION_SECONDS)


def _all_containers_have_limit(containers: Sequence[core_pb2.Container], name: str) -> bool:
    return all(name in c.resources.limits for c in containers)


def _default_pod_level_resources(pod: core_pb2.Pod) -> None:
    """SetDefaults_Pod with PodLevelResources: hugepage limits from the containers, requests
    from the containers' aggregate (else from the pod-level limit), limits from the containers'
    aggregate when every container has one."""
    spec = pod.spec
    if not spec.HasField("resources"):
        return
    r = spec.resources
    _normalize_quantities(r.limits)
    _normalize_quantities(r.requests)
    try:
        agg_limits = resources.format_resource_list(
            resources.pod_limits(pod, use_status_resources=False, exclude_overhead=True, skip_pod_level=True))
        agg_requests = resources.format_resource_list(
            resources.pod_requests(pod, use_status_resources=False, exclude_overhead=True, skip_pod_level=True))
    except ValueError:
        return  # a malformed container quantity: validation reports it
    # defaultHugePagePodLimits
    if r.limits or r.requests:
        for name, value in agg_limits.items():
            if resources.is_supported_pod_level_resource(name) and name.startswith(resources.HUGEPAGES_PREFIX) \
                    and name not in r.requests and name not in r.limits:
                r.limits[name] = value
    # defaultPodRequests
    if r.limits:
        for name, value in agg_requests.items():
            if name not in r.requests and resources.is_supported_pod_level_resource(name) \
                    and not name.startswith(resources.HUGEPAGES_PREFIX):
                r.requests[name] = value
        for name in r.limits:
            if name not in r.requests and resources.is_supported_pod_level_resource(name):
                r.requests[name] = r.limits[name]
    # defaultPodLimits
    if not resources.is_pod_level_resources_set(pod) or any(
            resources.is_supported_pod_level_resource(n) for n in r.limits):
        return
    if not any(resources.is_supported_pod_level_resource(n) for n in r.requests):
        return
    containers = [*spec.containers, *spec.init_containers]
    for name, value in agg_limits.items():
        if name in r.limits or not resources.is_supported_pod_level_resource(name):
            continue
        if name.startswith(resources.HUGEPAGES_PREFIX) or not _all_containers_have_limit(containers, name):
            continue
        r.limits[name] = value


# ---------------------------------------------------------------- kinds


# Serialized pod specs whose defaulting is only merges: the serialized PodSpec defaults (scalars
# and tolerations) and, per container and init container, the serialized Container defaults
# (see _CONTAINER_MERGES). The pods of one workload are alike; equal bytes mean an equal spec,
# which the defaulting treats the same. Bounded: cleared when full.
_POD_SPEC_MERGES: Memo[bytes, tuple[bytes, tuple[bytes, ...], tuple[bytes, ...]]] = Memo(
    "apiserver.defaults.pod_spec_merges", 512)


def default_pod(pod: core_pb2.Pod) -> None:
    """SetDefaults_Pod, SetDefaults_PodSpec, SetDefaults_Container and DefaultTolerationSeconds."""
    spec = pod.spec
    key = spec.SerializeToString()
    plan = _POD_SPEC_MERGES.get(key)
    if plan is not None:
        spec_merge, merges, init_merges = plan
        for c, merge in zip(spec.containers, merges, strict=True):
            if merge:
                c.MergeFromString(merge)
        if init_merges:
            for c, merge in zip(spec.init_containers, init_merges, strict=True):
                if merge:
                    c.MergeFromString(merge)
        if spec_merge:
            spec.MergeFromString(spec_merge)
        return
    unset = _pod_spec_unset(spec)
    if not spec.HasField("enable_service_links"):
        unset |= _SERVICE_LINKS_UNSET
    host_network = spec.host_network
    container_merges = tuple(_default_container(c, host_network) for c in spec.containers)
    init_containers = spec.init_containers
    init_container_merges = tuple(_default_container(c, host_network) for c in init_containers) \
        if init_containers else ()
    merges = tuple(m for m in container_merges if m is not None)
    init_merges = tuple(m for m in init_container_merges if m is not None)
    only_merges = len(merges) == len(container_merges) and len(init_merges) == len(init_container_merges)
    overhead = spec.overhead
    if overhead and _normalize_quantities(overhead):
        only_merges = False
    if spec.HasField("resources"):
        # (reads only the containers and spec.resources, which nothing below changes)
        _default_pod_level_resources(pod)
        only_merges = False
    tolerations = spec.tolerations
    missing = _tolerations_to_add(tolerations) if tolerations else 3
    if missing & 1:
        unset |= _NOT_READY_MISSING
    if missing & 2:
        unset |= _UNREACHABLE_MISSING
    spec_merge = _pod_spec_defaults(unset) if unset else b""
    if spec_merge:
        spec.MergeFromString(spec_merge)
    if only_merges:
        _POD_SPEC_MERGES.put(key, (spec_merge, merges, init_merges))


def default_pod_template(template: core_pb2.PodTemplateSpec) -> None:
    """SetDefaults_PodSpec and SetDefaults_Container (with SetDefaults_ResourceList) of a pod
    template's spec: what the generated defaulters apply to a ReplicaSet's or Deployment's
    template (see the module's docstring for what only pods get)."""
    spec = template.spec
    unset = _pod_spec_unset(spec)
    if unset:
        spec.MergeFromString(_pod_spec_defaults(unset))
    for c in (*spec.init_containers, *spec.containers):
        merge = _container_scalar_defaults(c)
        if merge:
            c.MergeFromString(merge)
        # hostPort as for pods: validation wants it equal to containerPort under hostNetwork.
        _default_ports(c.ports, spec.host_network)
        if c.HasField("resources"):
            _normalize_quantities(c.resources.limits)
            _normalize_quantities(c.resources.requests)
    _normalize_quantities(spec.overhead)
    if spec.HasField("resources"):
        _normalize_quantities(spec.resources.limits)
        _normalize_quantities(spec.resources.requests)


def default_replica_set(rs: apps_pb2.ReplicaSet) -> None:
    """SetDefaults_ReplicaSet: replicas 1; the template as templates are."""
    if not rs.spec.HasField("replicas"):
        rs.spec.replicas = DEFAULT_REPLICAS
    default_pod_template(rs.spec.template)


def default_deployment(d: apps_pb2.Deployment) -> None:
    """SetDefaults_Deployment: replicas 1, strategy RollingUpdate with maxUnavailable and maxSurge
    25%, revisionHistoryLimit 10, progressDeadlineSeconds 600; the template as templates are."""
    spec = d.spec
    if not spec.HasField("replicas"):
        spec.replicas = DEFAULT_REPLICAS
    strategy = spec.strategy
    if not strategy.type:
        strategy.type = "RollingUpdate"
    if strategy.type == "RollingUpdate":
        rolling = strategy.rolling_update
        if not rolling.HasField("max_unavailable"):
            rolling.max_unavailable = DEFAULT_MAX_UNAVAILABLE
        if not rolling.HasField("max_surge"):
            rolling.max_surge = DEFAULT_MAX_SURGE
    if not spec.HasField("revision_history_limit"):
        spec.revision_history_limit = DEFAULT_REVISION_HISTORY_LIMIT
    if not spec.HasField("progress_deadline_seconds"):
        spec.progress_deadline_seconds = DEFAULT_PROGRESS_DEADLINE_SECONDS
    default_pod_template(spec.template)


def default_namespace(ns: core_pb2.Namespace) -> None:
    """SetDefaults_Namespace (the kubernetes.io/metadata.name label, which the namespace strategy's
    Canonicalize keeps equal to the name on every write) and SetDefaults_NamespaceStatus (phase
    Active)."""
    if ns.metadata.name:
        ns.metadata.labels[LABEL_METADATA_NAME] = ns.metadata.name
    if not ns.status.phase:
        ns.status.phase = "Active"


def default_resource_quota(quota: core_pb2.ResourceQuota) -> None:
    """SetDefaults_ResourceList of spec.hard, status.hard and status.used."""
    _normalize_quantities(quota.spec.hard)
    _normalize_quantities(quota.status.hard)
    _normalize_quantities(quota.status.used)


def default_limit_range(lr: core_pb2.LimitRange) -> None:
    """SetDefaults_LimitRangeItem: a Container item's default limit is its max, its default
    request its default limit, else its min; then SetDefaults_ResourceList of every map."""
    for item in lr.spec.limits:
        for m in (item.max, item.min, item.default, item.default_request, item.max_limit_request_ratio):
            _normalize_quantities(m)
        if item.type != "Container":
            continue
        for name in item.max:
            if name not in item.default:
                item.default[name] = item.max[name]
        for name in item.default:
            if name not in item.default_request:
                item.default_request[name] = item.default[name]
        for name in item.min:
            if name not in item.default_request:
                item.default_request[name] = item.min[name]


def default_node(node: core_pb2.Node) -> None:
    """SetDefaults_NodeStatus: allocatable defaults to capacity."""
    status = node.status
    _normalize_quantities(status.capacity)
    _normalize_quantities(status.allocatable)
    if not status.allocatable and status.capacity:
        for name, value in status.capacity.items():
            status.allocatable[name] = value


def default_priority_class(pc: scheduling_pb2.PriorityClass) -> None:
    """SetDefaults_PriorityClass: preemptionPolicy PreemptLowerPriority."""
    if not pc.HasField("preemption_policy"):
        pc.preemption_policy = "PreemptLowerPriority"


def default_pdb(pdb: policy_pb2.PodDisruptionBudget) -> None:
    """policy/v1 has no defaults: neither minAvailable nor maxUnavailable is filled in (an empty
    budget allows no disruption of the pods it selects, as Kubernetes' disruption controller
    computes), and an unset unhealthyPodEvictionPolicy behaves as IfHealthyBudget."""


def _default_allocation(req: Any) -> None:
    """SetDefaults_ExactDeviceRequest / SetDefaults_DeviceSubRequest."""
    if not req.allocation_mode:
        req.allocation_mode = "ExactCount"
    if req.allocation_mode == "ExactCount" and req.count == 0:
        req.count = 1


def _default_claim_spec(spec: resource_pb2.ResourceClaimSpec) -> None:
    for request in spec.devices.requests:
        if request.HasField("exactly"):
            _default_allocation(request.exactly)
        for sub in request.first_available:
            _default_allocation(sub)


def default_resource_claim(claim: resource_pb2.ResourceClaim) -> None:
    _default_claim_spec(claim.spec)


def default_resource_claim_template(template: resource_pb2.ResourceClaimTemplate) -> None:
    _default_claim_spec(template.spec.spec)


_DEFAULTERS: Final[dict[str, Callable[[Any], None]]] = {
    "Pod": default_pod,
    "Node": default_node,
    "PriorityClass": default_priority_class,
    "PodDisruptionBudget": default_pdb,
    "ResourceClaim": default_resource_claim,
    "ResourceClaimTemplate": default_resource_claim_template,
    "ReplicaSet": default_replica_set,
    "Deployment": default_deployment,
    "Namespace": default_namespace,
    "ResourceQuota": default_resource_quota,
    "LimitRange": default_limit_range,
}


# The defaulters by canonical kind name, for which kinds.lookup is the identity.
_DEFAULTERS_BY_NAME: Final = {name: fn for name, fn in _DEFAULTERS.items() if kinds.lookup(name).name == name}


def default_object(kind_name: str, obj: Any) -> None:
    """Apply the kind's defaults in place (kinds without defaults are left unchanged)."""
    fn = _DEFAULTERS_BY_NAME.get(kind_name) if type(kind_name) is str else None
    if fn is None:
        fn = _DEFAULTERS.get(kinds.lookup(kind_name).name)
    if fn is not None:
        fn(obj)


# The lru_cache memos above, exported with the others (machinery.memo). The unbounded two are keyed
# by a bit mask of the defaults a container or spec lacks: a few dozen keys at most.
memo.track("apiserver.defaults.normalized_quantity", _normalized_quantity)
memo.track("apiserver.defaults.image_tag_is_latest", _image_tag_is_latest)
memo.track("apiserver.defaults.container_defaults", _container_defaults)
memo.track("apiserver.defaults.pod_spec_defaults", _pod_spec_defaults)
