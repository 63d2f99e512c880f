"""What every sync of a Deployment does (Kubernetes' deployment sync.go): the sync's state, the new
ReplicaSet found or created with its revision, ReplicaSets scaled (proportionally on a scaling
event), paused conditions, old revisions cleaned up, and the status written."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from controllers.deploymentutil import (
    FAILED_RS_CREATE,
    FOUND_NEW_RS,
    NEW_REPLICA_SET,
    PAUSED,
    POD_TEMPLATE_HASH_LABEL,
    RESUMED,
    REVISION_ANNOTATION,
    TIMED_OUT,
    active,
    by_revision,
    by_size_newer,
    by_size_older,
    calculate_status,
    compute_hash,
    desired_replicas_annotation,
    equal_ignore_hash,
    find_active_or_latest,
    find_new_replica_set,
    find_old_replica_sets,
    get_condition,
    get_proportion,
    has_progress_deadline,
    has_revision_history_limit,
    is_rolling_update,
    is_saturated,
    max_revision,
    max_surge,
    new_condition,
    new_rs_new_replicas,
    replicas,
    replicas_annotations_need_update,
    set_condition,
    set_deployment_revision,
    set_new_replica_set_annotations,
    set_replicas_annotations,
    spec_total,
)
from controllers.podcontrol import controller_of, controller_ref, namespace_terminating
from controllers.ranking import is_pod_active
from machinery import errors, failpoints
from machinery.api import apps_pb2, core_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.workqueue.rate_limiting import RateLimitingQueue

log = get_logger()

SCALING_REPLICA_SET = "ScalingReplicaSet"

FP_AFTER_SCALE = failpoints.declare(
    "controller-manager/deployment-after-scale",
    "a Deployment's ReplicaSet was scaled (its spec.replicas written, or created with pods); the rest of the "
    "sync not done")


@dataclass
class Sync:
    """One sync of a Deployment: the deployment as it is being written, its ReplicaSets (each
    replaced by what the API answered when the sync writes it) and its pods by ReplicaSet uid."""

    d: apps_pb2.Deployment
    rss: list[apps_pb2.ReplicaSet]
    pods: dict[str, list[core_pb2.Pod]] = field(default_factory=dict)

    def put(self, rs: apps_pb2.ReplicaSet) -> apps_pb2.ReplicaSet:
        for i, have in enumerate(self.rss):
            if have.metadata.uid == rs.metadata.uid:
                self.rss[i] = rs
                return rs
        self.rss.append(rs)
        return rs

    def fresh(self, rs: apps_pb2.ReplicaSet | None) -> apps_pb2.ReplicaSet | None:
        if rs is None:
            return None
        return next((have for have in self.rss if have.metadata.uid == rs.metadata.uid), rs)

    def live(self) -> dict[str, int]:
        """ReplicaSet uid -> its pods neither finished nor being deleted."""
        return {uid: sum(1 for p in pods if is_pod_active(p)) for uid, pods in self.pods.items()}

    def room(self) -> int:
        """How many more pods the rollout may have: replicas + maxSurge less each ReplicaSet's
        size or live pods, whichever is larger (kplane: so pods of a ReplicaSet just scaled down
        count until their deletion starts)."""
        live = self.live()
        used = sum(max(replicas(rs), live.get(rs.metadata.uid, 0)) for rs in self.rss)
        return replicas(self.d) + max_surge(self.d) - used


class DeploymentContext(Protocol):
    """What a sync uses of the Deployment controller. Kubernetes' sync.go, rolling.go, recreate.go
    and progress.go are methods on the whole DeploymentController; here each takes this narrow
    view, which the controller satisfies, so that none imports the module that builds it."""

    @property
    def client(self) -> Client: ...

    @property
    def recorder(self) -> EventRecorder: ...

    @property
    def queue(self) -> RateLimitingQueue[str]: ...

    def enqueue_key(self, key: str, after: float = 0.0) -> None: ...

    def cached_replica_set(self, name: str, namespace: str) -> apps_pb2.ReplicaSet | None:
        """The ReplicaSet of that name in the controller's informer cache."""
        ...

    def wrote(self, d: apps_pb2.Deployment, rs: apps_pb2.ReplicaSet) -> apps_pb2.ReplicaSet:
        """``rs`` as the API answered this controller's write of it, remembered until the
        informer shows it (``OwnWrites``)."""
        ...


# ------------------------------------------------------------ ReplicaSets and revisions


async def get_all(dc: DeploymentContext, s: Sync,
                  create: bool) -> tuple[apps_pb2.ReplicaSet | None, list[apps_pb2.ReplicaSet]]:
    """getAllReplicaSetsAndSyncRevision: the new ReplicaSet (made if ``create``) and the old ones."""
    old = find_old_replica_sets(s.d, s.rss)
    new = await _get_new_replica_set(dc, s, old, create)
    return new, [rs for rs in s.rss if new is None or rs.metadata.uid != new.metadata.uid]


async def _get_new_replica_set(dc: DeploymentContext, s: Sync, old: list[apps_pb2.ReplicaSet],
                               create: bool) -> apps_pb2.ReplicaSet | None:
    """getNewReplicaSet: the new ReplicaSet with its revision and annotations synced; created if
    missing and ``create``, with the revision of the highest old one + 1.

    It is named ``<deployment>-<hash>``, where the hash (``pod-template-hash``, also a label of its
    selector, template and pods) is computed from the template and ``status.collisionCount``
    (``controllers.deploymentutil.compute_hash``). One created with pods gets the
    ``ScalingReplicaSet`` event and the failpoint ``controller-manager/deployment-after-scale``, as
    ``_scale_replica_set`` does."""
    d = s.d
    existing = find_new_replica_set(d, s.rss)
    new_revision = max_revision(old) + 1
    if existing is not None:
        copy = apps_pb2.ReplicaSet()
        copy.CopyFrom(existing)
        annotations_updated = set_new_replica_set_annotations(d, copy, new_revision, exists=True)
        if annotations_updated or copy.spec.min_ready_seconds != d.spec.min_ready_seconds:
            copy.spec.min_ready_seconds = d.spec.min_ready_seconds
            return s.put(dc.wrote(d, await dc.client.replica_sets.update(copy)))
        # No Progressing condition yet: progress is estimated from now on.
        first = has_progress_deadline(d) and get_condition(d.status, "Progressing") is None
        await _note_new_replica_set(dc, d, copy.metadata.annotations.get(REVISION_ANNOTATION, ""),
                                    FOUND_NEW_RS, f'Found new replica set "{copy.metadata.name}"', first)
        return copy
    if not create:
        return None
    template = core_pb2.PodTemplateSpec()
    template.CopyFrom(d.spec.template)
    collision_count = d.status.collision_count if d.status.HasField("collision_count") else None
    pod_hash = compute_hash(template, collision_count)
    template.metadata.labels[POD_TEMPLATE_HASH_LABEL] = pod_hash
    rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace = f"{d.metadata.name}-{pod_hash}", d.metadata.namespace
    rs.metadata.owner_references.append(controller_ref(d))
    rs.metadata.labels.update(template.metadata.labels)
    rs.spec.replicas = 0
    rs.spec.min_ready_seconds = d.spec.min_ready_seconds
    rs.spec.selector.CopyFrom(d.spec.selector)
    rs.spec.selector.match_labels[POD_TEMPLATE_HASH_LABEL] = pod_hash
    rs.spec.template.CopyFrom(template)
    count = new_rs_new_replicas(d, [*old, rs], rs, s.live())
    rs.spec.replicas = count
    set_new_replica_set_annotations(d, rs, new_revision, exists=False)
    already_exists = False
    try:
        created = dc.wrote(d, await dc.client.replica_sets.create(rs))
    except errors.AlreadyExists:
        # A slow cache, or a hash collision: the ReplicaSet of that name is ours only if it
        # is controlled by this Deployment and has its template.
        found = dc.cached_replica_set(rs.metadata.name, rs.metadata.namespace)
        if found is None:
            raise
        ref = controller_of(found.metadata)
        if ref is None or ref.uid != d.metadata.uid or not equal_ignore_hash(d.spec.template,
                                                                            found.spec.template):
            d.status.collision_count = (collision_count or 0) + 1
            try:
                await write_status(dc, d)
                log.info("deployment_hash_collision", deployment=key_of(d),
                         collision_count=d.status.collision_count)
            except errors.ApiError:
                pass
            raise
        created, already_exists = found, True
    except errors.ApiError as exc:
        if namespace_terminating(exc):
            raise
        msg = f'Failed to create new replica set "{rs.metadata.name}": {exc.message}'
        if has_progress_deadline(d):
            set_condition(d.status, new_condition("Progressing", "False", FAILED_RS_CREATE, msg))
            try:
                await write_status(dc, d)
            except errors.ApiError:
                pass  # the failure to report matters more
        dc.recorder.event(d, "Warning", FAILED_RS_CREATE, msg)
        raise
    s.put(created)
    if not already_exists and count > 0:
        dc.recorder.event(d, "Normal", SCALING_REPLICA_SET,
                          f"Scaled up replica set {created.metadata.name} from 0 to {count}")
        await failpoints.hit(FP_AFTER_SCALE)
    await _note_new_replica_set(dc, d, str(new_revision), NEW_REPLICA_SET,
                                f'Created new replica set "{created.metadata.name}"',
                                not already_exists and has_progress_deadline(d))
    return created


async def _note_new_replica_set(dc: DeploymentContext, d: apps_pb2.Deployment, revision: str, reason: str,
                                message: str, progressing: bool) -> None:
    """The deployment takes its new ReplicaSet's revision, and with ``progressing`` a Progressing
    condition (``reason``, ``message``); written if either changed."""
    changed = set_deployment_revision(d, revision)
    if progressing:
        set_condition(d.status, new_condition("Progressing", "True", reason, message))
        changed = True
    if changed:
        await write_status(dc, d)


async def write_status(dc: DeploymentContext, d: apps_pb2.Deployment) -> None:
    """UpdateStatus of the deployment as this sync has it (status and annotations: the revision
    annotation travels with the status write, as in Kubernetes); ``d`` becomes what the API stored,
    so the next write of the sync is not a conflict."""
    d.CopyFrom(await dc.client.deployments.update_status(d))


async def _scale_replica_set(dc: DeploymentContext, s: Sync, rs: apps_pb2.ReplicaSet, size: int,
                             operation: str) -> tuple[bool, apps_pb2.ReplicaSet]:
    """scaleReplicaSet: the new size and the replicas annotations written; if the size changed, the
    Event ``ScalingReplicaSet`` on the Deployment ("Scaled up replica set web-7d4b9 from 0 to 1",
    "Scaled down replica set web-5f6c8 from 3 to 2") and the failpoint
    ``controller-manager/deployment-after-scale`` (the rest of the sync not done)."""
    d = s.d
    size_changed = replicas(rs) != size
    maximum = replicas(d) + max_surge(d)
    if not size_changed and not replicas_annotations_need_update(rs, replicas(d), maximum):
        return False, rs
    old_size = replicas(rs)
    copy = apps_pb2.ReplicaSet()
    copy.CopyFrom(rs)
    copy.spec.replicas = size
    set_replicas_annotations(copy, replicas(d), maximum)
    updated = s.put(dc.wrote(d, await dc.client.replica_sets.update(copy)))
    if size_changed:
        dc.recorder.event(d, "Normal", SCALING_REPLICA_SET,
                          f"Scaled {operation} replica set {updated.metadata.name} from {old_size} to {size}")
        log.info("deployment_scaled_replica_set", deployment=key_of(d), replicaset=updated.metadata.name,
                 replicas_from=old_size, replicas_to=size)
        await failpoints.hit(FP_AFTER_SCALE)
    return size_changed, updated


async def scale_and_record(dc: DeploymentContext, s: Sync, rs: apps_pb2.ReplicaSet,
                           size: int) -> tuple[bool, apps_pb2.ReplicaSet]:
    """scaleReplicaSetAndRecordEvent."""
    if replicas(rs) == size:
        return False, rs
    return await _scale_replica_set(dc, s, rs, size, "up" if replicas(rs) < size else "down")


# ------------------------------------------------------------ scaling events and pauses


async def is_scaling_event(dc: DeploymentContext, s: Sync) -> bool:
    """isScalingEvent: an active ReplicaSet was sized for other replicas than the Deployment's (its
    ``deployment.kubernetes.io/desired-replicas`` is not the Deployment's replicas)."""
    new, old = await get_all(dc, s, create=False)
    for rs in active([*old, new]):
        desired = desired_replicas_annotation(rs)
        if desired is not None and desired != replicas(s.d):
            return True
    return False


async def sync_scale(dc: DeploymentContext, s: Sync) -> None:
    """sync: scale (paused, or a scaling event), clean up if paused, then the status."""
    new, old = await get_all(dc, s, create=False)
    await _scale(dc, s, new, old)
    new, old = s.fresh(new), [r for r in (s.fresh(o) for o in old) if r is not None]
    if s.d.spec.paused:
        await cleanup(dc, s, old)
    await sync_status(dc, s, [*old, new] if new is not None else old, new)


async def _scale(dc: DeploymentContext, s: Sync, new: apps_pb2.ReplicaSet | None,
                 old: list[apps_pb2.ReplicaSet]) -> None:
    """scale: proportional scaling, so a resize in the middle of a rollout neither hastens nor
    slows it. The one active ReplicaSet takes the new size; with several, the difference (up to
    replicas + maxSurge in all) is shared in proportion to their sizes
    (``deployment.kubernetes.io/max-replicas``), leftovers to the largest."""
    d = s.d
    only = find_active_or_latest(new, old)
    if only is not None:
        if replicas(only) == replicas(d):
            return
        size = replicas(d)
        if is_rolling_update(d) and size > replicas(only):
            size = max(replicas(only), min(size, replicas(only) + s.room()))
        await scale_and_record(dc, s, only, size)
        return
    if is_saturated(d, new):
        for rs in active(old):
            await scale_and_record(dc, s, rs, 0)
        return
    if not is_rolling_update(d):
        return
    all_rss = active([*old, new])
    allowed = replicas(d) + max_surge(d) if replicas(d) > 0 else 0
    to_add = allowed - spec_total(all_rss)
    if to_add > 0:
        to_add = min(to_add, max(0, s.room()))
    operation = ""
    if to_add > 0:
        all_rss, operation = by_size_newer(all_rss), "up"
    elif to_add < 0:
        all_rss, operation = by_size_older(all_rss), "down"
    added = 0
    sizes: dict[str, int] = {}
    for rs in all_rss:
        if to_add != 0:
            proportion = get_proportion(rs, d, to_add, added)
            sizes[rs.metadata.uid] = replicas(rs) + proportion
            added += proportion
        else:
            sizes[rs.metadata.uid] = replicas(rs)
    for i, rs in enumerate(all_rss):
        if i == 0 and to_add != 0:
            sizes[rs.metadata.uid] = max(0, sizes[rs.metadata.uid] + to_add - added)  # leftovers to the largest
        await _scale_replica_set(dc, s, rs, sizes[rs.metadata.uid], operation)


async def check_paused_conditions(dc: DeploymentContext, s: Sync) -> None:
    """checkPausedConditions: Progressing Unknown while paused (DeploymentPaused, so no deadline runs
    out), and when resumed (DeploymentResumed)."""
    d = s.d
    if not has_progress_deadline(d):
        return
    cond = get_condition(d.status, "Progressing")
    if cond is not None and cond.reason == TIMED_OUT:
        return
    paused_cond = cond is not None and cond.reason == PAUSED
    if d.spec.paused and not paused_cond:
        set_condition(d.status, new_condition("Progressing", "Unknown", PAUSED, "Deployment is paused"))
    elif not d.spec.paused and paused_cond:
        set_condition(d.status, new_condition("Progressing", "Unknown", RESUMED, "Deployment is resumed"))
    else:
        return
    await write_status(dc, d)


async def cleanup(dc: DeploymentContext, s: Sync, old: list[apps_pb2.ReplicaSet]) -> None:
    """cleanupDeployment, once the rollout is complete or while paused: delete the old ReplicaSets
    over revisionHistoryLimit, oldest revision first — only those scaled to 0 with no pods left and
    their last size observed."""
    d = s.d
    if not has_revision_history_limit(d):
        return
    cleanable = [rs for rs in old if not rs.metadata.deletion_timestamp]
    diff = len(cleanable) - d.spec.revision_history_limit
    if diff <= 0:
        return
    for rs in by_revision(cleanable)[:diff]:
        if rs.status.replicas != 0 or replicas(rs) != 0 or \
                rs.metadata.generation > rs.status.observed_generation or rs.metadata.deletion_timestamp:
            continue
        log.info("deployment_cleanup_replica_set", deployment=key_of(d), replicaset=rs.metadata.name)
        try:
            await dc.client.replica_sets.delete(rs.metadata.name, rs.metadata.namespace)
        except errors.NotFound:
            pass


# ------------------------------------------------------------ status


async def sync_status(dc: DeploymentContext, s: Sync, all_rss: list[apps_pb2.ReplicaSet],
                      new: apps_pb2.ReplicaSet | None) -> None:
    """syncDeploymentStatus: the status from the ReplicaSets, written if it changed: ``replicas``,
    ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``, ``unavailableReplicas``,
    ``terminatingReplicas`` summed over the ReplicaSets' statuses, ``observedGeneration``, and the
    condition ``Available`` (MinimumReplicasAvailable / MinimumReplicasUnavailable)."""
    status = calculate_status(all_rss, new, s.d)
    if status == s.d.status:
        return
    s.d.status.CopyFrom(status)
    await write_status(dc, s.d)
