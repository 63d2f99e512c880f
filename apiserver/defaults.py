"""Defaulting: what Kubernetes' API machinery fills in before validation (pkg/apis/*/v1
``SetDefaults_*``), plus the DefaultTolerationSeconds admission plugin's tolerations.

Every function mutates the message in place and is idempotent, so it may run on updates too.
Not done here, on purpose: a pod's ``status.phase`` (the registry sets ``Pending``),
``spec.priority``/``preemptionPolicy`` (the priority admission step), and ``resizePolicy``
(Kubernetes stopped defaulting it in v1.33).
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping, Sequence
from typing import Any, Final

from machinery import kinds, resources
from machinery.api import core_pb2, policy_pb2, resource_pb2, scheduling_pb2
from machinery.quantity import Quantity, QuantityError, parse_quantity

DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS: Final = 30
DEFAULT_SCHEDULER_NAME: Final = "default-scheduler"
TERMINATION_MESSAGE_PATH: Final = "/dev/termination-log"
# DefaultTolerationSeconds admission: --default-not-ready-toleration-seconds and
# --default-unreachable-toleration-seconds.
DEFAULT_NOT_READY_TOLERATION_SECONDS: Final = 300
DEFAULT_UNREACHABLE_TOLERATION_SECONDS: Final = 300
TAINT_NODE_NOT_READY: Final = "node.kubernetes.io/not-ready"
TAINT_NODE_UNREACHABLE: Final = "node.kubernetes.io/unreachable"

_NANOS_PER_MILLI: Final = 10**6


# ---------------------------------------------------------------- helpers


def _normalize_quantities(m: MutableMapping[str, str]) -> None:
    """SetDefaults_ResourceList, and the form Kubernetes stores: values finer than a milli-unit
    are rounded up to it (``100u`` -> ``1m``) and every value is written as Go's Quantity prints
    it (``1.5`` -> ``1500m``; canonical input such as ``500m`` or ``1Gi`` is kept as given).
    Malformed quantities are left for validation to report."""
    for name in list(m):
        text = m[name]
        try:
            q = parse_quantity(text)
        except QuantityError:
            continue
        rest = q.nanos % _NANOS_PER_MILLI
        if rest:
            q = Quantity.from_nanos(q.nanos - rest + _NANOS_PER_MILLI, q.format)
        out = str(q)
        if out != text:
            m[name] = out


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


def _default_container(c: core_pb2.Container, host_network: bool) -> None:
    if not c.image_pull_policy:
        c.image_pull_policy = "Always" if _image_tag_is_latest(c.image) else "IfNotPresent"
    if not c.termination_message_path:
        c.termination_message_path = TERMINATION_MESSAGE_PATH
    if not c.termination_message_policy:
        c.termination_message_policy = "File"
    for port in c.ports:
        if not port.protocol:
            port.protocol = "TCP"
        if host_network and port.host_port == 0:
            port.host_port = port.container_port
    r = c.resources
    _normalize_quantities(r.limits)
    _normalize_quantities(r.requests)
    # SetDefaults_Pod: a limit without a request makes the request equal to the limit.
    for name in r.limits:
        if name not in r.requests:
            r.requests[name] = r.limits[name]


def _default_tolerations(tolerations: Any) -> None:
    """DefaultTolerationSeconds admission: tolerate not-ready and unreachable nodes for 300s
    unless the pod already tolerates them (an empty key or effect matches)."""
    not_ready = unreachable = False
    for t in tolerations:
        if t.effect in ("NoExecute", ""):
            if t.key in (TAINT_NODE_NOT_READY, ""):
                not_ready = True
            if t.key in (TAINT_NODE_UNREACHABLE, ""):
                unreachable = True
    if not not_ready:
        tolerations.add(key=TAINT_NODE_NOT_READY, operator="Exists", effect="NoExecute",
                        toleration_seconds=DEFAULT_NOT_READY_TOLERATION_SECONDS)
    if not unreachable:
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


def default_pod(pod: core_pb2.Pod) -> None:
    """SetDefaults_Pod, SetDefaults_PodSpec, SetDefaults_Container and DefaultTolerationSeconds."""
    spec = pod.spec
    if not spec.dns_policy:
        spec.dns_policy = "ClusterFirst"
    if not spec.restart_policy:
        spec.restart_policy = "Always"
    if not spec.HasField("termination_grace_period_seconds"):
        spec.termination_grace_period_seconds = DEFAULT_TERMINATION_GRACE_PERIOD_SECONDS
    if not spec.scheduler_name:
        spec.scheduler_name = DEFAULT_SCHEDULER_NAME
    if not spec.HasField("enable_service_links"):
        spec.enable_service_links = True
    for c in spec.containers:
        _default_container(c, spec.host_network)
    for c in spec.init_containers:
        _default_container(c, spec.host_network)
    _normalize_quantities(spec.overhead)
    _default_pod_level_resources(pod)
    _default_tolerations(spec.tolerations)


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
}


def default_object(kind_name: str, obj: Any) -> None:
    """Apply the kind's defaults in place (kinds without defaults are left unchanged)."""
    fn = _DEFAULTERS.get(kinds.lookup(kind_name).name)
    if fn is not None:
        fn(obj)
