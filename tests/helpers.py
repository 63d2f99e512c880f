"""Builders and waiting helpers shared by the tests."""

from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable

from machinery.api import core_pb2, policy_pb2, scheduling_pb2


def make_pod(name: str, *, namespace: str = "default", containers: list[tuple[str, dict, dict]] | None = None,
             cpu: str | None = None, memory: str | None = None, limit_cpu: str | None = None,
             limit_memory: str | None = None, labels: dict | None = None, priority_class: str = "",
             node: str = "", init_containers: list[tuple[str, dict, dict, str | None]] | None = None,
             grace: int | None = None) -> core_pb2.Pod:
    """A pod with one container "c1" (or ``containers`` as (name, requests, limits))."""
    pod = core_pb2.Pod(api_version="v1", kind="Pod")
    pod.metadata.name = name
    pod.metadata.namespace = namespace
    pod.metadata.labels.update(labels or {})
    if containers is None:
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        limits = {k: v for k, v in (("cpu", limit_cpu), ("memory", limit_memory)) if v}
        containers = [("c1", requests, limits)]
    for cname, requests, limits in containers:
        c = pod.spec.containers.add(name=cname, image="registry.k8s.io/pause:3.10")
        c.resources.requests.update(requests)
        c.resources.limits.update(limits)
    for cname, requests, limits, restart in init_containers or []:
        c = pod.spec.init_containers.add(name=cname, image="registry.k8s.io/pause:3.10")
        c.resources.requests.update(requests)
        c.resources.limits.update(limits)
        if restart:
            c.restart_policy = restart
    if priority_class:
        pod.spec.priority_class_name = priority_class
    if node:
        pod.spec.node_name = node
    if grace is not None:
        pod.spec.termination_grace_period_seconds = grace
    return pod


def make_priority_class(name: str, value: int, *, global_default: bool = False,
                        preemption_policy: str | None = None) -> scheduling_pb2.PriorityClass:
    pc = scheduling_pb2.PriorityClass(api_version="scheduling.k8s.io/v1", kind="PriorityClass", value=value,
                                      global_default=global_default)
    pc.metadata.name = name
    if preemption_policy:
        pc.preemption_policy = preemption_policy
    return pc


async def ensure_priority_classes(api, **values: int) -> None:
    """Create the PriorityClasses ``name=value`` that do not exist yet (a module's tests share them)."""
    from machinery import errors

    for name, value in values.items():
        try:
            await api.priority_classes.create(make_priority_class(name, value))
        except errors.AlreadyExists:
            pass


def make_pdb(name: str, match_labels: dict, *, min_available: str | None = None,
             max_unavailable: str | None = None, namespace: str = "default") -> policy_pb2.PodDisruptionBudget:
    pdb = policy_pb2.PodDisruptionBudget(api_version="policy/v1", kind="PodDisruptionBudget")
    pdb.metadata.name, pdb.metadata.namespace = name, namespace
    pdb.spec.selector.match_labels.update(match_labels)
    if min_available is not None:
        pdb.spec.min_available = min_available
    if max_unavailable is not None:
        pdb.spec.max_unavailable = max_unavailable
    return pdb


def mark_running_and_ready(pod: core_pb2.Pod, with_status_resources: bool = True) -> core_pb2.Pod:
    """What a kubelet reports for a started pod (used where no kubelet runs)."""
    pod.status.phase = "Running"
    del pod.status.conditions[:]
    pod.status.conditions.add(type="Ready", status="True")
    del pod.status.container_statuses[:]
    for c in pod.spec.containers:
        cs = pod.status.container_statuses.add(name=c.name, ready=True, image=c.image)
        cs.state.running.started_at = "2026-01-01T00:00:00Z"
        if with_status_resources:
            cs.allocated_resources.update(c.resources.requests)
            cs.resources.requests.update(c.resources.requests)
            cs.resources.limits.update(c.resources.limits)
    return pod


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0, interval: float = 0.05,
                     what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return
        except Exception as exc:  # keep trying; report the last error
            last_exc = exc
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}"
                         + (f" (last error: {last_exc})" if last_exc else ""))
