"""Actuating an allocated resize: KEP-1287 "Container resource limit update ordering" and failures.

Given the allocated resources (what the kubelet admitted) and the actuated ones (what the runtime
last accepted), per resource type:

1. if the pod's total limit of that resource increases, the pod-level limit is raised first;
2. all container limit decreases are applied — a memory limit decrease below the container's
   current usage is not attempted (KEP "Memory Limit Decreases": best effort against oom-kills)
   and is reported as an error;
3. if every decrease succeeded and the pod's total decreases, the pod-level limit is lowered;
4. if everything before succeeded, container limit increases are applied; a failed increase
   does not stop the other increases.

The pod-level limit is the sandbox's whole record (``sandbox_record``: cpu shares, cpu quota and
memory limit over all the running containers, plus overhead), sent whole each time. The runtime
refuses a container update that would take the containers over it, so the order is checked by
its outcome.

Containers whose resize policy for a changed resource is RestartContainer are restarted with the
new resources instead of being updated in place (RestartContainer wins over NotRequired).
Actuated resources are recorded per container only when the runtime accepted them. Any error
leaves PodResizeInProgress with reason Error and the message; the next sync retries.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import Histogram

from kubelet.allocation.checkpoint import Resources
from kubelet.status import LinuxResources, milli_to_quota, milli_to_shares, to_linux
from machinery import resources
from machinery.logging import get_logger

log = get_logger()

RESIZE_DURATION = Histogram("kubelet_pod_resize_duration_seconds", "Duration in seconds to actuate a pod resize",
                            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))


class ResizeRuntime(Protocol):
    """What actuation needs from the runtime."""

    async def update_container(self, container_id: str, linux: LinuxResources) -> None: ...

    async def update_sandbox(self, total: LinuxResources) -> None: ...

    async def memory_usage(self, container_id: str) -> int: ...


@dataclass
class ContainerResize:
    name: str
    container_id: str
    allocated: Resources
    actuated: Resources
    restart: bool  # RestartContainer policy for a changed resource


@dataclass
class Outcome:
    actuated: dict[str, Resources] = field(default_factory=dict)  # container -> newly accepted resources
    restart: list[str] = field(default_factory=list)  # containers to restart with the allocated resources
    errors: list[str] = field(default_factory=list)

    @property
    def error_message(self) -> str:
        return "; ".join(self.errors)


def _units(r: Resources) -> tuple[dict[str, int], dict[str, int]]:
    return resources.to_resource_list(r.requests), resources.to_resource_list(r.limits)


def changed_resources(allocated: Resources, actuated: Resources) -> set[str]:
    a_req, a_lim = _units(allocated)
    b_req, b_lim = _units(actuated)
    return {r for r in ("cpu", "memory") if a_req.get(r) != b_req.get(r) or a_lim.get(r) != b_lim.get(r)}


def needs_restart(container, changed: set[str]) -> bool:
    policies = {p.resource_name: p.restart_policy for p in container.resize_policy}
    return any(policies.get(r) == "RestartContainer" for r in changed)


def _limit(r: Resources, name: str) -> int:
    return resources.to_resource_list(r.limits).get(name, 0)


def _request(r: Resources, name: str) -> int:
    return resources.to_resource_list(r.requests).get(name, 0)


def _direction(c: ContainerResize, name: str) -> int:
    """-1 decrease, +1 increase, 0 unchanged, for the container's cgroup setting of ``name``."""
    if name != "memory":  # cpu: shares (request) and quota (limit) move together for ordering purposes
        was = (_limit(c.actuated, "cpu"), _request(c.actuated, "cpu"))
        now = (_limit(c.allocated, "cpu"), _request(c.allocated, "cpu"))
        if now == was:
            return 0
        return -1 if (now[0] < was[0] or (now[0] == was[0] and now[1] < was[1])) else 1
    old, new = _limit(c.actuated, "memory"), _limit(c.allocated, "memory")
    if new == old:
        return 0
    if old == 0:  # from unlimited to a limit: a decrease
        return -1
    if new == 0:
        return 1
    return -1 if new < old else 1


def _with(r: Resources, source: Resources, name: str) -> Resources:
    """``r`` with resource ``name`` (request and limit) taken from ``source``."""
    req, lim = dict(r.requests), dict(r.limits)
    for target, src in ((req, source.requests), (lim, source.limits)):
        if name in src:
            target[name] = src[name]
        else:
            target.pop(name, None)
    return Resources(req, lim)


def _with_request(r: Resources, source: Resources, name: str) -> Resources:
    """``r`` with the request of ``name`` taken from ``source`` (its limit unchanged)."""
    req = dict(r.requests)
    if name in source.requests:
        req[name] = source.requests[name]
    else:
        req.pop(name, None)
    return Resources(req, dict(r.limits))


def _total_limit(values: Iterable[Resources], name: str) -> int:
    """The pod-level limit of ``name`` over its containers: their sum when every one has a limit,
    else 0 — no limit (Kubernetes' ResourceConfigForPod sets a pod cgroup limit only then)."""
    limits = [_limit(r, name) for r in values]
    return sum(limits) if limits and all(limits) else 0


def _above(a: int, b: int) -> bool:
    """Limit ``a`` is higher than ``b``, 0 being no limit."""
    return a != b and (a == 0 or (b != 0 and a > b))


def sandbox_record(values: Iterable[Resources], overhead: Resources | None = None) -> LinuxResources:
    """A sandbox's whole pod-level record (KEP-1287 "CRI Changes": UpdatePodSandboxResources carries
    all of it, never one field): cpu shares from the sum of the containers' cpu requests, the cpu
    quota and the memory limit from the sums of their limits when every container has one (no
    limit otherwise), each with the pod's overhead added."""
    values = list(values)
    extra = overhead or Resources({}, {})
    cpu, memory = _total_limit(values, "cpu"), _total_limit(values, "memory")
    return LinuxResources(
        cpu_shares=milli_to_shares(sum(_request(r, "cpu") for r in values) + _request(extra, "cpu")),
        cpu_quota=milli_to_quota(cpu + _limit(extra, "cpu")) if cpu else 0,
        memory_limit_in_bytes=memory + _limit(extra, "memory") if memory else 0)


def pod_overhead(pod) -> Resources | None:
    """The pod's ``spec.overhead`` as what it adds to the pod-level requests and limits."""
    if not pod.spec.overhead:
        return None
    return Resources(dict(pod.spec.overhead), dict(pod.spec.overhead))


async def actuate(containers: list[ContainerResize], runtime: ResizeRuntime, pod: str = "",
                  overhead: Resources | None = None) -> Outcome:
    """Apply the allocated resources of a pod's running containers in the KEP's order.

    ``containers`` are all the pod's running containers, those with nothing to change included:
    the pod-level record is over all of them (plus ``overhead``). One pass per resource type
    (memory, then cpu), as Kubernetes' doPodResizeAction: a container update changes only that
    resource, keeping the other at what the runtime already has; the sandbox update carries the
    whole record, the other resource at what the containers have now.
    """
    start = time.perf_counter()
    out = Outcome()
    current: dict[str, Resources] = {}
    in_place: list[ContainerResize] = []
    for c in containers:
        current[c.name] = c.actuated
        if not changed_resources(c.allocated, c.actuated):
            continue
        if c.restart:
            out.restart.append(c.name)
        else:
            in_place.append(c)
    for name in ("memory", "cpu"):
        moving = [c for c in in_place if _direction(c, name) != 0]
        if not moving:
            continue
        target = {**current, **{c.name: _with(current[c.name], c.allocated, name) for c in in_place}}
        was, will = sandbox_record(current.values(), overhead), sandbox_record(target.values(), overhead)
        before = _total_limit(current.values(), name)
        after = _total_limit(target.values(), name)
        raised = _above(after, before) or (name == "cpu" and after == before and will.cpu_shares > was.cpu_shares)
        if raised:
            await set_sandbox_record(runtime, will, pod)
        failed = False
        for c in (c for c in moving if _direction(c, name) < 0):
            if name == "memory":
                limit = _limit(c.allocated, "memory")
                usage = await runtime.memory_usage(c.container_id)
                if limit and usage > limit:
                    out.errors.append(f'container "{c.name}" memory limit ({limit}) below current usage ({usage})')
                    failed = True
                    continue
            if not await _update(runtime, c, _with(current[c.name], c.allocated, name), current, out, pod):
                failed = True
        if failed:
            continue  # no pod-level decrease and no increases for this resource; retried next sync
        if not raised and will != was:
            if name == "memory":
                usage = sum([await runtime.memory_usage(c.container_id) for c in containers])
                if after and usage > after:
                    out.errors.append(f"pod memory limit ({after}) below current usage ({usage})")
                    continue
            await set_sandbox_record(runtime, will, pod)
        for c in (c for c in moving if _direction(c, name) > 0):
            await _update(runtime, c, _with(current[c.name], c.allocated, name), current, out, pod)
    for c in in_place:
        if _direction(c, "memory") == 0:
            # A memory request is not a runtime setting (only the limit is): it is actuated as is.
            current[c.name] = _with_request(current[c.name], c.allocated, "memory")
        if current[c.name] != c.actuated:
            out.actuated[c.name] = current[c.name]
    RESIZE_DURATION.observe(time.perf_counter() - start)
    return out


async def _update(runtime: ResizeRuntime, c: ContainerResize, target: Resources, current: dict[str, Resources],
                  out: Outcome, pod: str) -> bool:
    try:
        await runtime.update_container(c.container_id, to_linux(target))
    except Exception as exc:  # a runtime error: reported in the condition, retried next sync
        out.errors.append(f'updating container "{c.name}": {exc}')
        log.warning("resize_update_failed", pod=pod, container=c.name, error=str(exc))
        return False
    current[c.name] = target
    return True


async def set_sandbox_record(runtime: ResizeRuntime, record: LinuxResources, pod: str) -> None:
    """Set the sandbox's pod-level record (best effort: failures do not block the resize)."""
    try:
        await runtime.update_sandbox(record)
    except Exception as exc:
        log.info("sandbox_resources_update_failed", pod=pod, error=str(exc))
