"""Helpers for tests that drive real kubelets and runtimes: a cluster per module, pods waited for
and resized, failpoints at run time, the kubelet's checkpoints on disk, what the runtime really
applied, kill/start of one component, and the cluster's history of a pod."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from cli import cluster
from kubelet.allocation import checkpoint
from kubelet.allocation.checkpoint import Resources
from kubelet.runtime.client import RuntimeClient
from machinery import errors
from machinery.api import core_pb2, cri_pb2
from tests.helpers import eventually

# Kubelet flags that make a test's kubelet react in about a second instead of Kubernetes' minutes.
FAST_KUBELET = ["--sync-frequency=1", "--resize-retry-initial=1", "--resize-retry-interval=1",
                "--restart-backoff=0.2", "--node-status-interval=1"]


async def delete_all_pods(c, namespace: str = "default") -> None:
    """Delete every pod at once (grace 0) and wait until the API has none left."""
    for p in (await c.pods.list(namespace)).items:
        try:
            await c.pods.delete(p.metadata.name, namespace, grace_period_seconds=0)
        except errors.NotFound:
            pass

    async def empty():
        return not (await c.pods.list(namespace)).items

    await eventually(empty, timeout=20, what="pods gone")


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


async def resize(api, name: str, container: str = "c1", **requests: str) -> core_pb2.Pod:
    """Change a container's requests through the ``resize`` subresource; the stored pod."""
    return await api.pods.patch(name, {"spec": {"containers": [{"name": container, "resources": {
        "requests": requests}}]}}, subresource="resize")


def _admin(tc, component: str) -> str:
    tc.reload()
    return tc.process(component).admin


def failpoint(tc, component: str, name: str, action: str) -> None:
    """Arm ``name`` in ``component`` (e.g. ``kubelet/node-1``) through its admin port."""
    req = urllib.request.Request(f"http://{_admin(tc, component)}/failpoints/{name}", data=action.encode(),
                                 method="PUT")
    with urllib.request.urlopen(req, timeout=5) as resp:
        resp.read()


def failpoints_state(tc, component: str) -> dict:
    with urllib.request.urlopen(f"http://{_admin(tc, component)}/failpoints", timeout=5) as resp:
        return json.loads(resp.read())


async def wait_paused(tc, component: str, name: str, timeout: float = 20) -> None:
    """Until a ``pause`` at ``name`` holds a caller in ``component``."""
    await eventually(lambda: failpoints_state(tc, component)["paused"].get(name, 0) > 0, timeout=timeout,
                     what=f"{component} paused at {name}")


def kill(tc, component: str) -> None:
    tc.reload()
    cluster.kill(tc.process(component))
    tc.state.save()


def start(tc, component: str) -> None:
    tc.reload()
    ok, reason = cluster.start(tc.state, tc.process(component), 30)
    tc.state.save()
    assert ok, f"{component} did not start: {reason}"


async def wait_exited(tc, component: str, timeout: float = 20) -> None:
    """Until ``component`` is gone (a failpoint panicked it)."""
    def gone() -> bool:
        tc.reload()
        return not cluster.alive(tc.process(component).pid)
    await eventually(gone, timeout=timeout, what=f"{component} exited")


def checkpoint_dir(tc, node: str) -> Path:
    return Path(tc.data_dir) / "nodes" / node / "checkpoints"


def checkpointed(tc, node: str, uid: str, which: str = checkpoint.ACTUATED_FILE) -> dict[str, Resources]:
    """The allocated or actuated resources the kubelet of ``node`` has on disk for a pod."""
    path = checkpoint_dir(tc, node) / which
    if not path.exists():
        return {}
    return checkpoint.read(path).get(uid, {})


def runtime(tc, node: str) -> RuntimeClient:
    """A client on ``node``'s runtime socket (close it with ``await rt.close()``)."""
    tc.reload()
    argv = tc.process(f"runtime/{node}").argv
    return RuntimeClient(argv[argv.index("--listen") + 1], timeout=5)


async def applied(rt: RuntimeClient, container_id: str) -> cri_pb2.LinuxContainerResources:
    """What the runtime applied to a container (CPU shares, quota, memory limit)."""
    status = await rt.container_status(cri_pb2.ContainerStatusRequest(container_id=container_id))
    return status.status.resources.linux


def metric(tc, component: str, name: str, labels: str = "") -> float:
    """``name`` from ``component``'s /metrics, summed over the series whose labels start with
    ``labels`` (e.g. ``'queue="active"'``; every series when empty); 0 when there is none."""
    with urllib.request.urlopen(f"http://{_admin(tc, component)}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    prefixes = (f"{name}{{{labels}",) if labels else (f"{name} ", f"{name}{{")
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefixes))


def requeued_by(tc, event: str) -> float:
    """Pods the scheduling queue moved on cluster event ``event`` (to activeQ or backoffQ)."""
    return sum(metric(tc, "scheduler", "scheduler_queue_incoming_pods_total", f'event="{event}",queue="{q}"}}')
               for q in ("active", "backoff"))


async def runtime_calls(tc, node: str, operation: str) -> float:
    """``kplane_runtime_operations_total`` of ``node``'s runtime for one operation."""
    return metric(tc, f"runtime/{node}", "kplane_runtime_operations_total", f'operation_type="{operation}"}}')


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


async def pod_history(api, name: str, namespace: str = "default") -> list[core_pb2.Pod]:
    """Every revision of pod ``name`` the cluster's history holds, oldest first."""
    out = []
    async for resp in api.history(since=0, follow=False):
        for e in resp.entries:
            if e.kind == "Pod" and e.name == name and e.namespace == namespace:
                pod = core_pb2.Pod()
                e.object.Unpack(pod)
                out.append(pod)
    return out


async def pod_revisions(api, uids: set[str]) -> dict[str, list[tuple[int, str, core_pb2.Pod]]]:
    """Every revision of the pods with these uids the cluster's history holds, per uid, oldest
    first: (rev, type, pod)."""
    out: dict[str, list[tuple[int, str, core_pb2.Pod]]] = {}
    async for resp in api.history(since=0, follow=False):
        for e in resp.entries:
            if e.kind != "Pod":
                continue
            pod = core_pb2.Pod()
            e.object.Unpack(pod)
            if pod.metadata.uid in uids:
                out.setdefault(pod.metadata.uid, []).append((e.rev, e.type, pod))
    return out


def condition(pod: core_pb2.Pod, type_: str) -> core_pb2.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == type_), None)
