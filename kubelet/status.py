"""The pod status a kubelet reports: phase, conditions, container statuses with KEP-1287 resources.

Pure functions from (the pod, what the runtime says, the allocation, the resize conditions) to a
PodStatus, following Kubernetes' generateAPIPodStatus:

- ``containerStatuses[].allocatedResources``: the allocated requests (KEP-1287);
- ``containerStatuses[].resources``: for a running container the *actual* resources the runtime
  reports, converted back from CRI units (shares, quota/period, bytes); for a container that is
  not running, the allocated resources. Where the runtime's value is what the allocated value
  turns into (1.5 cpu -> 1536 shares), the allocated quantity is reported, so status does not
  flap on rounding; where the runtime applied something else (a rounded quota), that is reported.
  A kubelet emulating a release without in-place resize reports neither field (the apiserver's
  version-skew rule then refuses resizes of its pods);
- conditions: PodScheduled and DisruptionTarget kept from the API, PodReadyToStartContainers,
  Initialized, ContainersReady, Ready from the containers, and the resize conditions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.conditions import RESIZE_CONDITION_TYPES, ResizeCondition
from kubelet.restart_rules import will_restart
from machinery import podconditions, quantity, resources, timeutil
from machinery.api import core_pb2

CPU_PERIOD = 100_000
MIN_SHARES = 2
SHARES_PER_CPU = 1024
KEPT_CONDITIONS = (podconditions.POD_SCHEDULED, podconditions.DISRUPTION_TARGET)


# ---------------------------------------------------------------- CRI resource units


def milli_to_shares(milli: int) -> int:
    """Kubernetes' MilliCPUToShares."""
    if milli == 0:
        return MIN_SHARES
    return max(MIN_SHARES, milli * SHARES_PER_CPU // 1000)


def shares_to_milli(shares: int) -> int:
    """Kubernetes' SharesToMilliCPU (inverse of the above, rounding up)."""
    if shares == MIN_SHARES:
        return 0
    return -(-shares * 1000 // SHARES_PER_CPU)


def milli_to_quota(milli: int, period: int = CPU_PERIOD) -> int:
    """Kubernetes' MilliCPUToQuota; 0 means no limit."""
    if milli == 0:
        return 0
    return max(1000, milli * period // 1000)


def quota_to_milli(quota: int, period: int = CPU_PERIOD) -> int:
    if quota <= 0 or period <= 0:
        return 0
    return -(-quota * 1000 // period)


@dataclass(frozen=True)
class LinuxResources:
    """What the runtime applies to a container (CRI LinuxContainerResources)."""

    cpu_shares: int = 0
    cpu_quota: int = 0
    cpu_period: int = CPU_PERIOD
    memory_limit_in_bytes: int = 0


def to_linux(r: Resources) -> LinuxResources:
    """The runtime settings for a container's requirements, as kubelet computes them."""
    req = resources.to_resource_list(r.requests)
    lim = resources.to_resource_list(r.limits)
    return LinuxResources(cpu_shares=milli_to_shares(req.get("cpu", 0)), cpu_quota=milli_to_quota(lim.get("cpu", 0)),
                          cpu_period=CPU_PERIOD, memory_limit_in_bytes=lim.get("memory", 0))


def actual_requirements(allocated: Resources, applied: LinuxResources, actuated: Resources | None = None) -> Resources:
    """The ResourceRequirements reported in status for what the runtime applied. The runtime
    reports no memory request: that is the actuated one (what the runtime was last given), which
    the kubelet counts the pod at; it differs from the allocated one while a resize is not applied
    (KEP-1287 "Memory Limit Decreases": a limit below the usage is never sent)."""
    alloc_req = resources.to_resource_list(allocated.requests)
    alloc_lim = resources.to_resource_list(allocated.limits)
    requests = dict(allocated.requests)
    if actuated is not None and "memory" in actuated.requests:
        requests["memory"] = actuated.requests["memory"]
    limits = dict(allocated.limits)
    if "cpu" in alloc_req or applied.cpu_shares > MIN_SHARES:
        if milli_to_shares(alloc_req.get("cpu", 0)) != applied.cpu_shares:
            requests["cpu"] = str(quantity.Quantity.from_milli(shares_to_milli(applied.cpu_shares)))
    if "cpu" in alloc_lim or applied.cpu_quota > 0:
        if milli_to_quota(alloc_lim.get("cpu", 0), applied.cpu_period) != applied.cpu_quota:
            milli = quota_to_milli(applied.cpu_quota, applied.cpu_period)
            if milli:
                limits["cpu"] = str(quantity.Quantity.from_milli(milli))
            else:
                limits.pop("cpu", None)
    if "memory" in alloc_lim or applied.memory_limit_in_bytes > 0:
        if alloc_lim.get("memory", 0) != applied.memory_limit_in_bytes:
            if applied.memory_limit_in_bytes:
                limits["memory"] = str(quantity.Quantity.from_int(applied.memory_limit_in_bytes, "BinarySI"))
            else:
                limits.pop("memory", None)
    return Resources(requests, limits)


# ---------------------------------------------------------------- runtime view


@dataclass
class ContainerView:
    """One container instance as the runtime reports it."""

    name: str
    id: str = ""
    state: str = "created"  # created, running, exited, unknown
    attempt: int = 0
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    image: str = ""
    applied: LinuxResources | None = None


@dataclass
class PodView:
    """A pod as the runtime reports it: its sandbox and, per container, the latest and previous instance."""

    sandbox_ready: bool = False
    ip: str = ""
    containers: dict[str, ContainerView] = field(default_factory=dict)
    previous: dict[str, ContainerView] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)


RUNTIME_PREFIX = "kplane"


def _state(view: ContainerView | None, waiting_reason: str, waiting_message: str = "") -> core_pb2.ContainerState:
    st = core_pb2.ContainerState()
    if view is None or view.state == "created" or view.state == "unknown":
        st.waiting.reason = waiting_reason
        if waiting_message:
            st.waiting.message = waiting_message
    elif view.state == "running":
        st.running.started_at = view.started_at
    else:
        t = st.terminated
        t.exit_code = view.exit_code
        t.reason = view.reason or ("Completed" if view.exit_code == 0 else "Error")
        t.message = view.message
        t.started_at = view.started_at
        t.finished_at = view.finished_at
        t.container_id = f"{RUNTIME_PREFIX}://{view.id}"
    return st


def container_status(c: core_pb2.Container, pod_view: PodView, allocated: Resources | None,
                     report_resources: bool, waiting_reason: str = "ContainerCreating",
                     waiting_message: str = "", actuated: Resources | None = None) -> core_pb2.ContainerStatus:
    view = pod_view.containers.get(c.name)
    cs = core_pb2.ContainerStatus(name=c.name, image=c.image, restart_count=pod_view.restarts.get(c.name, 0))
    cs.state.CopyFrom(_state(view, waiting_reason, waiting_message))
    prev = pod_view.previous.get(c.name)
    if prev is not None and prev.state == "exited":
        cs.last_state.CopyFrom(_state(prev, ""))
    if view is not None:
        cs.container_id = f"{RUNTIME_PREFIX}://{view.id}"
        cs.image_id = f"{c.image}@sha256:{'0' * 64}" if c.image else ""
        cs.started = view.state == "running"
        cs.ready = view.state == "running"
    else:
        cs.started = False
    if report_resources:
        alloc = allocated if allocated is not None else Resources.of(c.resources)
        cs.allocated_resources.update(alloc.requests)
        if view is not None and view.state == "running" and view.applied is not None:
            actual = actual_requirements(alloc, view.applied, actuated)
        else:
            actual = alloc
        cs.resources.SetInParent()  # present even when empty: "{}" says this kubelet supports resize
        cs.resources.requests.update(actual.requests)
        cs.resources.limits.update(actual.limits)
    return cs


def _condition(type_: str, ok: bool, reason: str, old: dict[str, core_pb2.PodCondition], now: str,
               generation: int) -> core_pb2.PodCondition:
    status = "True" if ok else "False"
    prev = old.get(type_)
    transition = prev.last_transition_time if prev is not None and prev.status == status else now
    return core_pb2.PodCondition(type=type_, status=status, reason="" if ok else reason,
                                 last_transition_time=transition, observed_generation=generation)


def phase(pod: core_pb2.Pod, view: PodView, container_rules: bool = True) -> str:
    """Kubernetes' getPhase for the containers' states and the restart policies: the pod's, or with
    container restart rules (KEP-5307) each container's own (``restart_rules.will_restart``). A
    stopped container that will be started again keeps the pod Running."""
    if pod.status.phase in ("Succeeded", "Failed"):
        return pod.status.phase
    inits = [c for c in pod.spec.init_containers if not resources.is_restartable_init_container(c)]
    for c in inits:
        v = view.containers.get(c.name)
        if v is None or v.state != "exited" or v.exit_code != 0:
            if v is not None and v.state == "exited" and not will_restart(pod, c, v.exit_code, container_rules):
                return "Failed"
            return "Pending"
    waiting = running = stopped = succeeded = restarting = 0
    for c in pod.spec.containers:
        v = view.containers.get(c.name)
        if v is not None and v.state == "running":
            running += 1
        elif v is not None and v.state == "exited":
            stopped += 1
            succeeded += v.exit_code == 0
            restarting += will_restart(pod, c, v.exit_code, container_rules)
        elif (prev := view.previous.get(c.name)) is not None and prev.state == "exited":
            stopped += 1  # waiting to restart after it stopped: counts as stopped, as Kubernetes does
            restarting += will_restart(pod, c, prev.exit_code, container_rules)
        else:
            waiting += 1
    if waiting:
        return "Pending"
    if running:
        return "Running"
    if not stopped:
        return "Pending"
    if restarting:
        return "Running"
    return "Succeeded" if stopped == succeeded else "Failed"


def compute_status(pod: core_pb2.Pod, view: PodView, allocation: dict[str, Resources] | None,
                   resize_conditions: dict[str, ResizeCondition], report_resources: bool = True,
                   host_ip: str = "", blocked: tuple[str, str] | None = None,
                   actuated: Mapping[str, Resources] | None = None,
                   container_rules: bool = True) -> core_pb2.PodStatus:
    """The PodStatus to report for ``pod`` given what the runtime says (``actuated``: the actuated
    resources by container, from the kubelet's checkpoint). ``blocked`` is the
    (reason, message) the containers not started yet wait with when something keeps the pod from
    starting them (its ResourceClaims not prepared: ``kubelet.dra``)."""
    now = timeutil.rfc3339()
    old = {c.type: c for c in pod.status.conditions}
    st = core_pb2.PodStatus()
    st.qos_class = pod.status.qos_class
    st.nominated_node_name = pod.status.nominated_node_name
    st.resource_claim_statuses.extend(pod.status.resource_claim_statuses)  # the resourceclaim controller's
    st.observed_generation = pod.metadata.generation
    st.phase = phase(pod, view, container_rules)
    st.start_time = pod.status.start_time or now
    if host_ip:
        st.host_ip = host_ip
        st.host_ips.add(ip=host_ip)
    if view.ip:
        st.pod_ip = view.ip
        st.pod_ips.add(ip=view.ip)
    allocation = allocation or {}
    blocked_reason, blocked_message = blocked if blocked is not None else ("", "")
    for c in pod.spec.init_containers:
        st.init_container_statuses.append(container_status(c, view, allocation.get(c.name), report_resources,
                                                           blocked_reason or "PodInitializing", blocked_message,
                                                           (actuated or {}).get(c.name)))
    initialized = all(
        (v := view.containers.get(c.name)) is not None and (
            v.state == "running" if resources.is_restartable_init_container(c) else
            (v.state == "exited" and v.exit_code == 0))
        for c in pod.spec.init_containers)
    for c in pod.spec.containers:
        st.container_statuses.append(container_status(
            c, view, allocation.get(c.name), report_resources,
            blocked_reason or ("ContainerCreating" if initialized else "PodInitializing"), blocked_message,
            (actuated or {}).get(c.name)))
    all_ready = bool(pod.spec.containers) and all(cs.ready for cs in st.container_statuses)
    gen = pod.metadata.generation
    terminal = st.phase in ("Succeeded", "Failed")
    for type_ in KEPT_CONDITIONS:
        if type_ in old:
            st.conditions.append(old[type_])
    if podconditions.POD_SCHEDULED not in old:  # a pod bound by its spec: the kubelet says it is scheduled
        st.conditions.add(type=podconditions.POD_SCHEDULED, status="True", last_transition_time=now)
    st.conditions.append(_condition("PodReadyToStartContainers", view.sandbox_ready and not terminal, "", old, now,
                                    gen))
    st.conditions.append(_condition("Initialized", initialized, "ContainersNotInitialized", old, now, gen))
    st.conditions.append(_condition("Ready", all_ready and not terminal, "ContainersNotReady", old, now, gen))
    st.conditions.append(_condition("ContainersReady", all_ready and not terminal, "ContainersNotReady", old, now,
                                    gen))
    for type_ in RESIZE_CONDITION_TYPES:
        rc = resize_conditions.get(type_)
        if rc is not None:
            st.conditions.add(type=type_, status="True", reason=rc.reason, message=rc.message,
                              observed_generation=rc.observed_generation,
                              last_transition_time=rc.last_transition_time, last_probe_time=rc.last_probe_time)
    return st
