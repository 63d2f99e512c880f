"""The RollingUpdate strategy (Kubernetes' deployment rolling.go): the new ReplicaSet scaled up
within replicas + maxSurge, old ones scaled down while replicas - maxUnavailable stay available."""

from __future__ import annotations

from controllers.deployment.progress import sync_rollout_status
from controllers.deployment.sync import DeploymentContext, Sync, cleanup, get_all, scale_and_record
from controllers.deploymentutil import (
    active,
    by_creation,
    deployment_complete,
    max_unavailable,
    new_rs_new_replicas,
    replicas,
    spec_total,
)
from machinery.api import apps_pb2


async def rollout_rolling(dc: DeploymentContext, s: Sync) -> None:
    """rolloutRolling: scale the new ReplicaSet up if room allows, else old ones down.

    The new ReplicaSet is created if there is none and scaled up while all ReplicaSets together stay
    within replicas + maxSurge (maxSurge rounded up from a percentage); old ones are scaled down
    while the available pods stay at least replicas - maxUnavailable (rounded down; both 0 resolves
    to maxUnavailable 1), unhealthy old replicas first."""
    new, old = await get_all(dc, s, create=True)
    assert new is not None
    if await _reconcile_new(dc, s, new):
        await sync_rollout_status(dc, s)
        return
    new = s.fresh(new)
    assert new is not None
    if await _reconcile_old(dc, s, active(s.fresh(o) for o in old), new):
        await sync_rollout_status(dc, s)
        return
    if deployment_complete(s.d, s.d.status):
        await cleanup(dc, s, [r for r in (s.fresh(o) for o in old) if r is not None])
    await sync_rollout_status(dc, s)


async def _reconcile_new(dc: DeploymentContext, s: Sync, new: apps_pb2.ReplicaSet) -> bool:
    """reconcileNewReplicaSet."""
    d = s.d
    if replicas(new) == replicas(d):
        return False
    if replicas(new) > replicas(d):
        scaled, _ = await scale_and_record(dc, s, new, replicas(d))
        return scaled
    count = new_rs_new_replicas(d, s.rss, new, s.live())
    scaled, _ = await scale_and_record(dc, s, new, count)
    return scaled


async def _reconcile_old(dc: DeploymentContext, s: Sync, old: list[apps_pb2.ReplicaSet],
                         new: apps_pb2.ReplicaSet) -> bool:
    """reconcileOldReplicaSets: scale old ReplicaSets down as far as availability allows; kplane: not
    further while one of them has not yet observed its last size (its ``availableReplicas`` may
    still count pods it is deleting)."""
    d = s.d
    if spec_total(old) == 0:
        return False
    if any(rs.status.observed_generation < rs.metadata.generation for rs in old):
        return False  # kplane: an old ReplicaSet's availableReplicas may still count pods it deletes
    all_pods = spec_total([*old, new])
    min_avail = replicas(d) - max_unavailable(d)
    new_unavailable = replicas(new) - new.status.available_replicas
    max_scaled_down = all_pods - min_avail - new_unavailable
    if max_scaled_down <= 0:
        return False
    old, cleaned = await _cleanup_unhealthy(dc, s, old, max_scaled_down)
    scaled = await _scale_down_old_for_rolling(dc, s, [*old, new], old)
    return cleaned + scaled > 0


async def _cleanup_unhealthy(dc: DeploymentContext, s: Sync, old: list[apps_pb2.ReplicaSet],
                             max_cleanup: int) -> tuple[list[apps_pb2.ReplicaSet], int]:
    """cleanupUnhealthyReplicas: old replicas that are not available go first (they cost no availability)."""
    out = by_creation(old)
    total = 0
    for i, rs in enumerate(out):
        if total >= max_cleanup:
            break
        if replicas(rs) == 0 or replicas(rs) == rs.status.available_replicas:
            continue
        count = min(max_cleanup - total, replicas(rs) - rs.status.available_replicas)
        _, out[i] = await scale_and_record(dc, s, rs, replicas(rs) - count)
        total += count
    return out, total


async def _scale_down_old_for_rolling(dc: DeploymentContext, s: Sync, all_rss: list[apps_pb2.ReplicaSet],
                                      old: list[apps_pb2.ReplicaSet]) -> int:
    """scaleDownOldReplicaSetsForRollingUpdate: old ones, oldest first, down by the available
    pods over replicas - maxUnavailable."""
    min_avail = replicas(s.d) - max_unavailable(s.d)
    available = sum(rs.status.available_replicas for rs in all_rss)
    if available <= min_avail:
        return 0
    total, target = 0, available - min_avail
    for rs in by_creation(old):
        if total >= target:
            break
        if replicas(rs) == 0:
            continue
        count = min(replicas(rs), target - total)
        await scale_and_record(dc, s, rs, replicas(rs) - count)
        total += count
    return total
