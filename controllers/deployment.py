"""The Deployment controller (Kubernetes' pkg/controller/deployment): rollouts over ReplicaSets.

A Deployment owns one ReplicaSet per pod template it has had, named ``<deployment>-<hash>`` where
the hash (``pod-template-hash``, also a label of its selector, template and pods) is computed from
the template and ``status.collisionCount`` (``controllers.deploymentutil.compute_hash``). The one
whose template is the Deployment's is the *new* ReplicaSet, the others are *old*. Each sync, from
the informers' caches:

1. claim the ReplicaSets (adopt matching orphans, release those that no longer match);
2. being deleted: only the status; paused: only scale (below), and clean up old ReplicaSets;
3. a *scaling event* (an active ReplicaSet's ``deployment.kubernetes.io/desired-replicas`` is not
   the Deployment's replicas): scale proportionally — the one active ReplicaSet takes the new
   size; with several, the difference (up to replicas + maxSurge in all) is shared in proportion
   to their sizes (``deployment.kubernetes.io/max-replicas``), leftovers to the largest;
4. otherwise roll out:

   - RollingUpdate: create the new ReplicaSet if there is none (revision = the highest old one +
     1), scale it up while all ReplicaSets together stay within replicas + maxSurge (maxSurge
     rounded up from a percentage), scale old ones down while the available pods stay at least
     replicas - maxUnavailable (rounded down; both 0 resolves to maxUnavailable 1) — unhealthy old
     replicas first;
   - Recreate: scale every old ReplicaSet to 0, wait until none of their pods is left (not even
     terminating), then create and scale up the new one;

5. once the rollout is complete, delete the old ReplicaSets over ``revisionHistoryLimit`` that
   are scaled to 0, oldest revision first;
6. the status: ``replicas``, ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``,
   ``unavailableReplicas``, ``terminatingReplicas`` summed over the ReplicaSets' statuses,
   ``observedGeneration``, and the conditions ``Available`` (MinimumReplicasAvailable /
   MinimumReplicasUnavailable) and ``Progressing`` (NewReplicaSetCreated, FoundNewReplicaSet,
   ReplicaSetUpdated, NewReplicaSetAvailable; ProgressDeadlineExceeded once no progress was made
   for ``progressDeadlineSeconds``; DeploymentPaused/DeploymentResumed, Unknown), written only
   when it changed. The revision annotation travels with the status write, as in Kubernetes.

Events ``ScalingReplicaSet`` on the Deployment: "Scaled up replica set web-7d4b9 from 0 to 1",
"Scaled down replica set web-5f6c8 from 3 to 2". Failpoint
``controller-manager/deployment-after-scale``: a ReplicaSet's new size was written (or a new
ReplicaSet created with pods), the rest of the sync not done.

Where kplane differs (docs/controller-manager.md): a scale-up counts each ReplicaSet as the larger
of its size and its pods not yet being deleted, so pods of a ReplicaSet just scaled down count
until their deletion starts; old ReplicaSets are not scaled down further while one of them has not
yet observed its last size (its ``availableReplicas`` may still count pods it is deleting); and a
sync waits until the ReplicaSet informer shows this controller's own last writes
(``controllers.ownwrites``): sized from a cache without them, a template change right after a
scale-up would count room that scale-up already took and overshoot replicas + maxSurge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from controllers.controller import ControllerContext, ObjectController
from controllers.deploymentutil import (
    FAILED_RS_CREATE,
    FOUND_NEW_RS,
    NEW_REPLICA_SET,
    NEW_RS_AVAILABLE,
    PAUSED,
    POD_TEMPLATE_HASH_LABEL,
    REPLICA_SET_UPDATED,
    RESUMED,
    REVISION_ANNOTATION,
    TIMED_OUT,
    active,
    by_creation,
    by_revision,
    by_size_newer,
    by_size_older,
    calculate_status,
    compute_hash,
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
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
    max_unavailable,
    new_condition,
    new_rs_new_replicas,
    progress_check_in,
    remove_condition,
    replica_failure,
    replicas,
    replicas_annotations_need_update,
    set_condition,
    set_deployment_revision,
    set_new_replica_set_annotations,
    set_replicas_annotations,
    spec_total,
)
from controllers.ownwrites import OwnWrites
from controllers.podcontrol import controller_of, controller_ref, namespace_terminating
from controllers.ranking import is_pod_active
from controllers.refmanager import ControllerRefManager, resolve_controller, selecting
from controllers.replicaset import CONTROLLER_UID_INDEX, NAMESPACE_INDEX, controller_uid
from machinery import errors, failpoints, selectors, timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.informer import key_of
from machinery.kinds import DEPLOYMENT, POD, REPLICA_SET
from machinery.logging import get_logger

log = get_logger()

SCALING_REPLICA_SET = "ScalingReplicaSet"

FP_AFTER_SCALE = failpoints.declare(
    "controller-manager/deployment-after-scale",
    "a Deployment's ReplicaSet was scaled (its spec.replicas written, or created with pods); the rest of the "
    "sync not done")


@dataclass
class _Sync:
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
        size or live pods, whichever is larger."""
        live = self.live()
        used = sum(max(replicas(rs), live.get(rs.metadata.uid, 0)) for rs in self.rss)
        return replicas(self.d) + max_surge(self.d) - used


class DeploymentController(ObjectController):
    name = "deployment"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client = ctx.client
        self._deployments = ctx.informers.informer(DEPLOYMENT)
        self._rs = ctx.informers.informer(REPLICA_SET)
        self._pods = ctx.informers.informer(POD)
        self._deployments.add_indexer(NAMESPACE_INDEX, lambda d: [d.metadata.namespace])
        self._rs.add_indexer(NAMESPACE_INDEX, lambda rs: [rs.metadata.namespace])
        self._rs.add_indexer(CONTROLLER_UID_INDEX, controller_uid)
        self._pods.add_indexer(NAMESPACE_INDEX, lambda p: [p.metadata.namespace])
        self._recorder = ctx.recorder("deployment-controller")
        self._own = OwnWrites()  # ReplicaSets written whose write the informer has not shown yet
        self._deployments.add_handler(self.enqueue, lambda old, new: self.enqueue(new), self.enqueue)
        self._rs.add_handler(self._rs_added, self._rs_updated, self._rs_deleted)
        self._pods.add_handler(None, self._pod_updated, self._pod_deleted)

    # ------------------------------------------------------------ event handlers (enqueue only)

    def _resolve(self, rs: apps_pb2.ReplicaSet) -> apps_pb2.Deployment | None:
        return resolve_controller(self._deployments, "Deployment", rs.metadata)

    def _matching(self, rs: apps_pb2.ReplicaSet) -> list[apps_pb2.Deployment]:
        return selecting(self._deployments.by_index(NAMESPACE_INDEX, rs.metadata.namespace), rs.metadata.labels)

    def _rs_added(self, rs: apps_pb2.ReplicaSet) -> None:
        if rs.metadata.deletion_timestamp:
            self._rs_deleted(rs)
            return
        if controller_of(rs.metadata) is not None:
            d = self._resolve(rs)
            if d is not None:
                self.enqueue(d)
            return
        for d in self._matching(rs):
            self.enqueue(d)

    def _rs_updated(self, old: apps_pb2.ReplicaSet, new: apps_pb2.ReplicaSet) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        old_ref, new_ref = controller_of(old.metadata), controller_of(new.metadata)
        ref_changed = old_ref != new_ref
        if ref_changed and old_ref is not None:
            d = self._resolve(old)
            if d is not None:
                self.enqueue(d)
        if new_ref is not None:
            d = self._resolve(new)
            if d is not None:
                self.enqueue(d)
            return
        if ref_changed or dict(old.metadata.labels) != dict(new.metadata.labels):
            for d in self._matching(new):
                self.enqueue(d)

    def _rs_deleted(self, rs: apps_pb2.ReplicaSet) -> None:
        self._own.deleted(rs.metadata.uid)
        d = self._resolve(rs)
        if d is not None:
            self.enqueue(d)

    def _deployment_of(self, pod: core_pb2.Pod) -> apps_pb2.Deployment | None:
        rs = resolve_controller(self._rs, "ReplicaSet", pod.metadata)
        return self._resolve(rs) if rs is not None else None

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        # A pod stopping being live frees room for a rollout (kplane counts live pods in a
        # scale-up; Kubernetes only looks again when a Recreate rollout's last pod is deleted).
        if is_pod_active(old) and not is_pod_active(new):
            d = self._deployment_of(new)
            if d is not None:
                self.enqueue(d)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        d = self._deployment_of(pod)
        if d is not None:
            self.enqueue(d)

    # ------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        """syncDeployment."""
        namespace, _, name = key.partition("/")
        cached = self._deployments.get(name, namespace)
        if cached is None:
            self._own.forget(key)
            return
        d = apps_pb2.Deployment()
        d.CopyFrom(cached)
        try:
            selector = selectors.label_selector_as_selector(d.spec.selector)
        except selectors.SelectorError as exc:
            log.warning("deployment_bad_selector", deployment=key, error=str(exc))
            return
        if selector.empty:
            self._recorder.event(d, "Warning", "SelectingAll",
                                 "This deployment is selecting all pods. A non-empty selector is required.")
            if d.status.observed_generation < d.metadata.generation:
                d.status.observed_generation = d.metadata.generation
                await self._client.deployments.update_status(d)
            return
        s = _Sync(d, await self._claim(d, selector))
        behind = self._own.behind(key, s.rss)
        if behind:
            # Sized from a cache without this controller's own last writes, the rollout would
            # count room they already took; their watch events enqueue the Deployment again.
            log.info("deployment_waits_for_own_writes", deployment=key, replicasets=behind)
            self.enqueue_key(key, after=1.0)
            return
        s.pods = self._pods_by_replica_set(d, selector, s.rss)
        if d.metadata.deletion_timestamp:
            new, old = await self._get_all(s, create=False)
            await self._sync_status(s, old + [new] if new is not None else old, new)
            return
        await self._check_paused_conditions(s)
        if d.spec.paused:
            await self._sync_scale(s)
            return
        if await self._is_scaling_event(s):
            await self._sync_scale(s)
            return
        if d.spec.strategy.type == "Recreate":
            await self._rollout_recreate(s)
        elif is_rolling_update(d):
            await self._rollout_rolling(s)
        else:
            raise ValueError(f"unexpected deployment strategy type: {d.spec.strategy.type}")

    async def _claim(self, d: apps_pb2.Deployment, selector: selectors.LabelSelector) -> list[apps_pb2.ReplicaSet]:
        """getReplicaSetsForDeployment: the ReplicaSets it owns, orphans adopted, strays released."""
        async def recheck() -> apps_pb2.Deployment:
            return await self._client.deployments.get(d.metadata.name, d.metadata.namespace)

        async def patch(namespace: str, name: str, body: str) -> apps_pb2.ReplicaSet:
            return self._wrote(d, await self._client.replica_sets.patch(name, body, namespace=namespace))

        candidates = self._rs.by_index(NAMESPACE_INDEX, d.metadata.namespace)
        manager = ControllerRefManager[apps_pb2.ReplicaSet](d, selector, patch, recheck, "Deployment")
        return list(await manager.claim(candidates))

    def _pods_by_replica_set(self, d: apps_pb2.Deployment, selector: selectors.LabelSelector,
                             rss: Sequence[apps_pb2.ReplicaSet]) -> dict[str, list[core_pb2.Pod]]:
        """getPodMapForDeployment: the pods its selector selects, by the ReplicaSet that controls them."""
        out: dict[str, list[core_pb2.Pod]] = {rs.metadata.uid: [] for rs in rss}
        for pod in self._pods.by_index(NAMESPACE_INDEX, d.metadata.namespace):
            ref = controller_of(pod.metadata)
            if ref is not None and ref.uid in out and selector.matches(pod.metadata.labels):
                out[ref.uid].append(pod)
        return out

    # ------------------------------------------------------------ ReplicaSets and revisions

    async def _get_all(self, s: _Sync, create: bool) -> tuple[apps_pb2.ReplicaSet | None, list[apps_pb2.ReplicaSet]]:
        """getAllReplicaSetsAndSyncRevision: the new ReplicaSet (made if ``create``) and the old ones."""
        old = find_old_replica_sets(s.d, s.rss)
        new = await self._get_new_replica_set(s, old, create)
        return new, [rs for rs in s.rss if new is None or rs.metadata.uid != new.metadata.uid]

    async def _get_new_replica_set(self, s: _Sync, old: list[apps_pb2.ReplicaSet],
                                   create: bool) -> apps_pb2.ReplicaSet | None:
        """getNewReplicaSet: the new ReplicaSet with its revision and annotations synced; created if
        missing and ``create``."""
        d = s.d
        existing = find_new_replica_set(d, s.rss)
        new_revision = max_revision(old) + 1
        if existing is not None:
            copy = apps_pb2.ReplicaSet()
            copy.CopyFrom(existing)
            annotations_updated = set_new_replica_set_annotations(d, copy, new_revision, exists=True)
            if annotations_updated or copy.spec.min_ready_seconds != d.spec.min_ready_seconds:
                copy.spec.min_ready_seconds = d.spec.min_ready_seconds
                return s.put(self._wrote(d, await self._client.replica_sets.update(copy)))
            # No Progressing condition yet: progress is estimated from now on.
            first = has_progress_deadline(d) and get_condition(d.status, "Progressing") is None
            await self._note_new_replica_set(d, copy.metadata.annotations.get(REVISION_ANNOTATION, ""),
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
            created = self._wrote(d, await self._client.replica_sets.create(rs))
        except errors.AlreadyExists:
            # A slow cache, or a hash collision: the ReplicaSet of that name is ours only if it
            # is controlled by this Deployment and has its template.
            found = self._rs.get(rs.metadata.name, rs.metadata.namespace)
            if found is None:
                raise
            ref = controller_of(found.metadata)
            if ref is None or ref.uid != d.metadata.uid or not equal_ignore_hash(d.spec.template,
                                                                                found.spec.template):
                d.status.collision_count = (collision_count or 0) + 1
                try:
                    await self._write_status(d)
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
                    await self._write_status(d)
                except errors.ApiError:
                    pass  # the failure to report matters more
            self._recorder.event(d, "Warning", FAILED_RS_CREATE, msg)
            raise
        s.put(created)
        if not already_exists and count > 0:
            self._recorder.event(d, "Normal", SCALING_REPLICA_SET,
                                 f"Scaled up replica set {created.metadata.name} from 0 to {count}")
            await failpoints.hit(FP_AFTER_SCALE)
        await self._note_new_replica_set(d, str(new_revision), NEW_REPLICA_SET,
                                         f'Created new replica set "{created.metadata.name}"',
                                         not already_exists and has_progress_deadline(d))
        return created

    def _wrote(self, d: apps_pb2.Deployment, rs: apps_pb2.ReplicaSet) -> apps_pb2.ReplicaSet:
        """``rs`` as the API answered this controller's write of it, remembered until the
        informer shows it (``OwnWrites``)."""
        self._own.wrote(key_of(d), rs)
        return rs

    async def _note_new_replica_set(self, d: apps_pb2.Deployment, revision: str, reason: str, message: str,
                                    progressing: bool) -> None:
        """The deployment takes its new ReplicaSet's revision, and with ``progressing`` a Progressing
        condition (``reason``, ``message``); written if either changed."""
        changed = set_deployment_revision(d, revision)
        if progressing:
            set_condition(d.status, new_condition("Progressing", "True", reason, message))
            changed = True
        if changed:
            await self._write_status(d)

    async def _write_status(self, d: apps_pb2.Deployment) -> None:
        """UpdateStatus of the deployment as this sync has it (status and annotations); ``d``
        becomes what the API stored, so the next write of the sync is not a conflict."""
        d.CopyFrom(await self._client.deployments.update_status(d))

    async def _scale_replica_set(self, s: _Sync, rs: apps_pb2.ReplicaSet, size: int,
                                 operation: str) -> tuple[bool, apps_pb2.ReplicaSet]:
        """scaleReplicaSet: the new size and the replicas annotations written; an Event if the size changed."""
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
        updated = s.put(self._wrote(d, await self._client.replica_sets.update(copy)))
        if size_changed:
            self._recorder.event(d, "Normal", SCALING_REPLICA_SET,
                                 f"Scaled {operation} replica set {updated.metadata.name} from {old_size} to {size}")
            log.info("deployment_scaled_replica_set", deployment=key_of(d), replicaset=updated.metadata.name,
                     replicas_from=old_size, replicas_to=size)
            await failpoints.hit(FP_AFTER_SCALE)
        return size_changed, updated

    async def _scale_and_record(self, s: _Sync, rs: apps_pb2.ReplicaSet,
                                size: int) -> tuple[bool, apps_pb2.ReplicaSet]:
        """scaleReplicaSetAndRecordEvent."""
        if replicas(rs) == size:
            return False, rs
        return await self._scale_replica_set(s, rs, size, "up" if replicas(rs) < size else "down")

    # ------------------------------------------------------------ scaling events and pauses

    async def _is_scaling_event(self, s: _Sync) -> bool:
        """isScalingEvent: an active ReplicaSet was sized for other replicas than the Deployment's."""
        new, old = await self._get_all(s, create=False)
        for rs in active([*old, new]):
            desired = desired_replicas_annotation(rs)
            if desired is not None and desired != replicas(s.d):
                return True
        return False

    async def _sync_scale(self, s: _Sync) -> None:
        """sync: scale (paused, or a scaling event), clean up if paused, then the status."""
        new, old = await self._get_all(s, create=False)
        await self._scale(s, new, old)
        new, old = s.fresh(new), [r for r in (s.fresh(o) for o in old) if r is not None]
        if s.d.spec.paused:
            await self._cleanup(s, old)
        await self._sync_status(s, [*old, new] if new is not None else old, new)

    async def _scale(self, s: _Sync, new: apps_pb2.ReplicaSet | None, old: list[apps_pb2.ReplicaSet]) -> None:
        """scale: proportional scaling, so a resize in the middle of a rollout neither hastens nor
        slows it."""
        d = s.d
        only = find_active_or_latest(new, old)
        if only is not None:
            if replicas(only) == replicas(d):
                return
            size = replicas(d)
            if is_rolling_update(d) and size > replicas(only):
                size = max(replicas(only), min(size, replicas(only) + s.room()))
            await self._scale_and_record(s, only, size)
            return
        if is_saturated(d, new):
            for rs in active(old):
                await self._scale_and_record(s, rs, 0)
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
            await self._scale_replica_set(s, rs, sizes[rs.metadata.uid], operation)

    async def _check_paused_conditions(self, s: _Sync) -> None:
        """checkPausedConditions: Progressing Unknown while paused (so no deadline runs out), and when resumed."""
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
        await self._write_status(d)

    async def _cleanup(self, s: _Sync, old: list[apps_pb2.ReplicaSet]) -> None:
        """cleanupDeployment: delete the oldest revisions over revisionHistoryLimit — only those scaled
        to 0 with no pods left and their last size observed."""
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
                await self._client.replica_sets.delete(rs.metadata.name, rs.metadata.namespace)
            except errors.NotFound:
                pass

    # ------------------------------------------------------------ status

    async def _sync_status(self, s: _Sync, all_rss: list[apps_pb2.ReplicaSet],
                           new: apps_pb2.ReplicaSet | None) -> None:
        """syncDeploymentStatus: the status from the ReplicaSets, written if it changed."""
        status = calculate_status(all_rss, new, s.d)
        if status == s.d.status:
            return
        s.d.status.CopyFrom(status)
        await self._write_status(s.d)

    async def _sync_rollout_status(self, s: _Sync) -> None:
        """syncRolloutStatus: the status and the Progressing condition of a rollout."""
        d = s.d
        new = s.fresh(find_new_replica_set(d, s.rss))
        all_rss = list(s.rss)
        now = timeutil.now()
        status = calculate_status(all_rss, new, d, now)
        if not has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = get_condition(d.status, "Progressing")
        complete_before = status.replicas == status.updated_replicas and current is not None and \
            current.reason == NEW_RS_AVAILABLE
        if has_progress_deadline(d) and not complete_before:
            target = f'ReplicaSet "{new.metadata.name}"' if new is not None else f'Deployment "{d.metadata.name}"'
            if deployment_complete(d, status):
                set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE,
                                                    f"{target} has successfully progressed.", now))
            elif deployment_progressing(d, status):
                cond = new_condition("Progressing", "True", REPLICA_SET_UPDATED, f"{target} is progressing.", now)
                if current is not None:
                    if current.status == "True":
                        cond.last_transition_time = current.last_transition_time
                    remove_condition(status, "Progressing")
                set_condition(status, cond)
            elif deployment_timed_out(d, status, now):
                set_condition(status, new_condition("Progressing", "False", TIMED_OUT,
                                                    f"{target} has timed out progressing.", now))
        failure = replica_failure(all_rss, new)
        if failure is not None:
            set_condition(status, failure)
        else:
            remove_condition(status, "ReplicaFailure")
        if status == d.status:
            self._requeue_stuck(d, status)
            return
        d.status.CopyFrom(status)
        await self._write_status(d)

    def _requeue_stuck(self, d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus) -> None:
        """requeueStuckDeployment: look again when the progress deadline of a stalled rollout is due."""
        after = progress_check_in(d, status, timeutil.now())
        if after is None:
            return
        if after == 0.0:
            self.queue.add_rate_limited(key_of(d))
        else:
            self.enqueue_key(key_of(d), after=after + 1.0)

    # ------------------------------------------------------------ RollingUpdate

    async def _rollout_rolling(self, s: _Sync) -> None:
        """rolloutRolling: scale the new ReplicaSet up if room allows, else old ones down."""
        new, old = await self._get_all(s, create=True)
        assert new is not None
        if await self._reconcile_new(s, new):
            await self._sync_rollout_status(s)
            return
        new = s.fresh(new)
        assert new is not None
        if await self._reconcile_old(s, active(s.fresh(o) for o in old), new):
            await self._sync_rollout_status(s)
            return
        if deployment_complete(s.d, s.d.status):
            await self._cleanup(s, [r for r in (s.fresh(o) for o in old) if r is not None])
        await self._sync_rollout_status(s)

    async def _reconcile_new(self, s: _Sync, new: apps_pb2.ReplicaSet) -> bool:
        """reconcileNewReplicaSet."""
        d = s.d
        if replicas(new) == replicas(d):
            return False
        if replicas(new) > replicas(d):
            scaled, _ = await self._scale_and_record(s, new, replicas(d))
            return scaled
        count = new_rs_new_replicas(d, s.rss, new, s.live())
        scaled, _ = await self._scale_and_record(s, new, count)
        return scaled

    async def _reconcile_old(self, s: _Sync, old: list[apps_pb2.ReplicaSet], new: apps_pb2.ReplicaSet) -> bool:
        """reconcileOldReplicaSets: scale old ReplicaSets down as far as availability allows."""
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
        old, cleaned = await self._cleanup_unhealthy(s, old, max_scaled_down)
        scaled = await self._scale_down_old_for_rolling(s, [*old, new], old)
        return cleaned + scaled > 0

    async def _cleanup_unhealthy(self, s: _Sync, old: list[apps_pb2.ReplicaSet],
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
            _, out[i] = await self._scale_and_record(s, rs, replicas(rs) - count)
            total += count
        return out, total

    async def _scale_down_old_for_rolling(self, s: _Sync, all_rss: list[apps_pb2.ReplicaSet],
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
            await self._scale_and_record(s, rs, replicas(rs) - count)
            total += count
        return total

    # ------------------------------------------------------------ Recreate

    async def _rollout_recreate(self, s: _Sync) -> None:
        """rolloutRecreate: old ReplicaSets to 0, wait for their pods to be gone, then the new one up."""
        new, old = await self._get_all(s, create=False)
        scaled_down = False
        for rs in active(old):
            scaled, _ = await self._scale_and_record(s, rs, 0)
            scaled_down = scaled_down or scaled
        if scaled_down:
            await self._sync_rollout_status(s)
            return
        old = [r for r in (s.fresh(o) for o in old) if r is not None]
        if self._old_pods_running(s, new, old):
            await self._sync_rollout_status(s)
            return
        if new is None:
            new, old = await self._get_all(s, create=True)
            assert new is not None
        await self._scale_and_record(s, s.fresh(new) or new, replicas(s.d))
        if deployment_complete(s.d, s.d.status):
            await self._cleanup(s, old)
        await self._sync_rollout_status(s)

    @staticmethod
    def _old_pods_running(s: _Sync, new: apps_pb2.ReplicaSet | None, old: list[apps_pb2.ReplicaSet]) -> bool:
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
