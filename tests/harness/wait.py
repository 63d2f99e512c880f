"""Waiting for the cluster to get somewhere: ``eventually`` (a check polled until it holds or the
time is up) and the waits built on it for a pod's usual states, each failing with what it waited for."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Awaitable, Callable

from machinery import errors
from machinery.api import core_pb2

# Deadlines are written as an idle 2-core machine needs them and stretched by this factor, so that
# a loaded one (CI with other work on a core) passes too: a wait that holds returns at once
# whatever its deadline, and only a failing test waits the longer time.
DEADLINE_SCALE = float(os.environ.get("KPLANE_TEST_DEADLINE_SCALE", "3"))


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0, interval: float = 0.05,
                     what: str = "condition") -> None:
    """Poll ``check`` until it is true, for ``timeout`` x ``DEADLINE_SCALE`` seconds; an exception
    it raises counts as not yet, and the last one is reported if the time runs out."""
    timeout *= DEADLINE_SCALE
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


def condition(pod: core_pb2.Pod, type_: str) -> core_pb2.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == type_), None)


async def wait_running(api, *names: str, timeout: float = 20) -> dict[str, core_pb2.Pod]:
    """Until every named pod is Running with all its containers ready; the pods as last read."""
    got: dict[str, core_pb2.Pod] = {}

    async def check():
        for n in names:
            got[n] = pod = await api.pods.get(n)
            if pod.status.phase != "Running" or not pod.status.container_statuses or \
                    not all(cs.ready for cs in pod.status.container_statuses):
                return False
        return True

    await eventually(check, timeout=timeout, what=f"{', '.join(names)} running")
    return got


async def wait_deleted(api, name: str, timeout: float = 20) -> None:
    """Until the pod is gone from the API."""
    async def check():
        try:
            await api.pods.get(name)
        except errors.NotFound:
            return True
        return False

    await eventually(check, timeout=timeout, interval=0.1, what=f"{name} deleted")


async def wait_bound(api, name: str, timeout: float = 20) -> str:
    """Until the pod is bound; its node."""
    box = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        return bool(pod.spec.node_name)

    await eventually(check, timeout=timeout, what=f"{name} bound")
    return box["pod"].spec.node_name


async def wait_unschedulable(api, name: str, timeout: float = 20) -> str:
    """Until the scheduler has found no node for the pod: PodScheduled=False, reason
    Unschedulable, the pod Pending and unbound, and a Warning FailedScheduling event with the
    same message. The message."""
    box = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        c = condition(pod, "PodScheduled")
        return c is not None and c.status == "False" and c.reason == "Unschedulable"

    await eventually(check, timeout=timeout, what=f"{name} unschedulable")
    pod = box["pod"]
    assert not pod.spec.node_name and pod.status.phase == "Pending", pod
    message = condition(pod, "PodScheduled").message

    async def event():
        evs = await api.events.list("default", field_selector=f"involvedObject.name={name}")
        return any(e.reason == "FailedScheduling" and e.type == "Warning" and e.message == message
                   for e in evs.items)

    await eventually(event, timeout=timeout, what=f"FailedScheduling event for {name}: {message!r}")
    return message
