"""The Deployment controller (Kubernetes' deployment_controller.go): its informers' handlers, which
only enqueue, and syncDeployment, which claims the ReplicaSets and hands the rollout to the
strategy (rolling.py, recreate.py) or to a scale-only sync (sync.py)."""

from __future__ import annotations

from collections.abc import Sequence

from controllers.controller import ControllerContext, ObjectController
from controllers.deployment.recreate import rollout_recreate
from controllers.deployment.rolling import rollout_rolling
from controllers.deployment.sync import (
    Sync,
    check_paused_conditions,
    get_all,
    is_scaling_event,
    sync_scale,
    sync_status,
)
from controllers.deploymentutil import is_rolling_update
from controllers.ownwrites import OwnWrites
from controllers.podcontrol import controller_of
from controllers.ranking import is_pod_active
from controllers.refmanager import ControllerRefManager, resolve_controller, selecting
from controllers.replicaset import CONTROLLER_UID_INDEX, NAMESPACE_INDEX, controller_uid
from machinery import selectors
from machinery.api import apps_pb2, core_pb2
from machinery.informer import key_of
from machinery.kinds import DEPLOYMENT, POD, REPLICA_SET
from machinery.logging import get_logger

log = get_logger()


class DeploymentController(ObjectController):
    name = "deployment"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self.client = ctx.client
        self._deployments = ctx.informers.informer(DEPLOYMENT)
        self._rs = ctx.informers.informer(REPLICA_SET)
        self._pods = ctx.informers.informer(POD)
        self._deployments.add_indexer(NAMESPACE_INDEX, lambda d: [d.metadata.namespace])
        self._rs.add_indexer(NAMESPACE_INDEX, lambda rs: [rs.metadata.namespace])
        self._rs.add_indexer(CONTROLLER_UID_INDEX, controller_uid)
        self._pods.add_indexer(NAMESPACE_INDEX, lambda p: [p.metadata.namespace])
        self.recorder = ctx.recorder("deployment-controller")
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
        """syncDeployment, from the informers' caches: claim the ReplicaSets (``_claim``); being
        deleted: only the status; paused: only scale, and clean up old ReplicaSets (``sync_scale``);
        a scaling event (``is_scaling_event``): scale proportionally (``sync_scale``); otherwise roll
        out with the strategy (``rollout_rolling``, ``rollout_recreate``).

        kplane: first the sync waits until the ReplicaSet informer shows this controller's own last
        writes (``controllers.ownwrites``): sized from a cache without them, a template change right
        after a scale-up would count room that scale-up already took and overshoot replicas + maxSurge.
        """
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
            self.recorder.event(d, "Warning", "SelectingAll",
                                "This deployment is selecting all pods. A non-empty selector is required.")
            if d.status.observed_generation < d.metadata.generation:
                d.status.observed_generation = d.metadata.generation
                await self.client.deployments.update_status(d)
            return
        s = Sync(d, await self._claim(d, selector))
        behind = self._own.behind(key, s.rss)
        if behind:
            # Sized from a cache without this controller's own last writes, the rollout would
            # count room they already took; their watch events enqueue the Deployment again.
            log.info("deployment_waits_for_own_writes", deployment=key, replicasets=behind)
            self.enqueue_key(key, after=1.0)
            return
        s.pods = self._pods_by_replica_set(d, selector, s.rss)
        if d.metadata.deletion_timestamp:
            new, old = await get_all(self, s, create=False)
            await sync_status(self, s, old + [new] if new is not None else old, new)
            return
        await check_paused_conditions(self, s)
        if d.spec.paused:
            await sync_scale(self, s)
            return
        if await is_scaling_event(self, s):
            await sync_scale(self, s)
            return
        if d.spec.strategy.type == "Recreate":
            await rollout_recreate(self, s)
        elif is_rolling_update(d):
            await rollout_rolling(self, s)
        else:
            raise ValueError(f"unexpected deployment strategy type: {d.spec.strategy.type}")

    async def _claim(self, d: apps_pb2.Deployment, selector: selectors.LabelSelector) -> list[apps_pb2.ReplicaSet]:
        """getReplicaSetsForDeployment: the ReplicaSets it owns, orphans adopted, strays released."""
        async def recheck() -> apps_pb2.Deployment:
            return await self.client.deployments.get(d.metadata.name, d.metadata.namespace)

        async def patch(namespace: str, name: str, body: str) -> apps_pb2.ReplicaSet:
            return self.wrote(d, await self.client.replica_sets.patch(name, body, namespace=namespace))

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

    # ------------------------------------------------------------ what the sync modules use (DeploymentContext)

    def cached_replica_set(self, name: str, namespace: str) -> apps_pb2.ReplicaSet | None:
        return self._rs.get(name, namespace)

    def wrote(self, d: apps_pb2.Deployment, rs: apps_pb2.ReplicaSet) -> apps_pb2.ReplicaSet:
        """``rs`` as the API answered this controller's write of it, remembered until the
        informer shows it (``OwnWrites``)."""
        self._own.wrote(key_of(d), rs)
        return rs
