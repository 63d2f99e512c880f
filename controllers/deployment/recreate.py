"""The Recreate strategy (Kubernetes' deployment recreate.go): every old ReplicaSet scaled to 0 and
its pods gone before the new one is scaled up."""

from __future__ import annotations

from controllers.deployment.progress import sync_rollout_status
from controllers.deployment.sync import DeploymentContext, Sync, cleanup, get_all, scale_and_record
from controllers.deploymentutil import active, deployment_complete, replicas
from machinery.api import apps_pb2


async def rollout_recreate(dc: DeploymentContext, s: Sync) -> None:
    """rolloutRecreate: old ReplicaSets to 0, wait until none of their pods is left (not even
    terminating), then create the new one and scale it up."""
    new, old = await get_all(dc, s, create=False)
    scaled_down = False
    for rs in active(old):
        scaled, _ = await scale_and_record(dc, s, rs, 0)
        scaled_down = scaled_down or scaled
    if scaled_down:
        await sync_rollout_status(dc, s)
        return
    old = [r for r in (s.fresh(o) for o in old) if r is not None]
    if _old_pods_running(s, new, old):
        await sync_rollout_status(dc, s)
        return
    if new is None:
        new, old = await get_all(dc, s, create=True)
        assert new is not None
    await scale_and_record(dc, s, s.fresh(new) or new, replicas(s.d))
    if deployment_complete(s.d, s.d.status):
        await cleanup(dc, s, old)
    await sync_rollout_status(dc, s)


def _old_pods_running(s: Sync, new: apps_pb2.ReplicaSet | None, old: list[apps_pb2.ReplicaSet]) -> bool:
    """oldPodsRunning: an old ReplicaSet reports pods, or has a pod not Succeeded or Failed
    (terminating ones included: Recreate means none of the old pods runs beside a new one)."""
    if sum(rs.status.replicas for rs in old) > 0:
        return True
    for uid, pods in s.pods.items():
        if new is not None and uid == new.metadata.uid:
            continue
        if any(p.status.phase not in ("Succeeded", "Failed") for p in pods):
            return True
    return False
