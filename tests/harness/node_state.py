"""What a node of a running cluster really holds, read beside the API: the kubelet's allocated and
actuated checkpoints on disk, and what its runtime applied to a container."""

from __future__ import annotations

from pathlib import Path

from kubelet.allocation import checkpoint
from kubelet.allocation.checkpoint import Resources
from kubelet.runtime.client import RuntimeClient
from machinery.api import core_pb2, cri_pb2


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


async def crash(tc, node: str, pod: core_pb2.Pod, code: int = 137) -> None:
    """Make the pod's first container exit in ``node``'s runtime (``code``, reason Error), as a
    crash of its process would."""
    cid = pod.status.container_statuses[0].container_id.split("://", 1)[-1]
    rt = runtime(tc, node)
    try:
        await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=code, reason="Error"))
    finally:
        await rt.close()
