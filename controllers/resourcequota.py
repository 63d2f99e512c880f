"""The resource quota controller (Kubernetes' pkg/controller/resourcequota): each ResourceQuota's
``status.hard`` (its ``spec.hard``, as last observed) and ``status.used`` (what its namespace uses).

- ``ResourceQuotaController``: its two workqueues, and when a quota is recomputed;
- ``ResourceQuotaController.sync``: one quota's status, its usage computed as ``machinery.quota``
  says over the shared informers' caches;
- ``pod_update_matters``: which pod updates change what a quota counts.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Final

from google.protobuf.message import Message

from controllers.controller import ControllerContext, ObjectController
from machinery import quota, timeutil
from machinery.api import core_pb2
from machinery.informer import Informer, key_of
from machinery.kinds import RESOURCE_QUOTA, Kind, object_meta
from machinery.logging import get_logger
from machinery.process import supervise
from machinery.workqueue.rate_limiting import RateLimitingQueue

log = get_logger()

NAMESPACE_INDEX: Final = "namespace"
# How soon a quota whose status is newer than the caches is looked at again (informers see a
# bookmark with the current revision at least every second).
CATCH_UP_DELAY: Final = 0.1


def _revision(rv: str) -> int:
    return int(rv) if rv.isdigit() else 0


def _namespace(obj: Message) -> list[str]:
    return [object_meta(obj).namespace]


def _status_resources(statuses: Any) -> dict[str, tuple[bytes, bytes]]:
    return {cs.name: (cs.resources.SerializeToString(deterministic=True) if cs.HasField("resources") else b"",
                      core_pb2.ContainerStatus(allocated_resources=cs.allocated_resources).SerializeToString(
                          deterministic=True))
            for cs in statuses}


def pod_update_matters(old: core_pb2.Pod, new: core_pb2.Pod) -> bool:
    """Kubernetes' quota update filter for pods: the reported resources changed (KEP-1287; kplane
    also counts a change of ``allocatedResources``, which the usage reads too), the Terminating
    scope changed, or the pod stopped counting (it became terminal)."""
    for field in ("container_statuses", "init_container_statuses"):
        if _status_resources(getattr(old.status, field)) != _status_resources(getattr(new.status, field)):
            return True
    if quota.is_terminating(old) != quota.is_terminating(new):
        return True
    now = timeutil.now()
    return quota.counts_compute(old, now) and not quota.counts_compute(new, now)


class ResourceQuotaController(ObjectController):
    """Keeps every ResourceQuota's status.

    As Kubernetes, two workqueues: ``resourcequota_priority`` for quotas whose ``spec.hard`` is not
    yet in ``status.hard``, or that track a resource with no usage yet (a new quota is usable only
    once this controller has written its status, so it goes first: ``_add_quota``), and
    ``resourcequota_primary`` for the rest; ``--concurrent-resource-quota-syncs`` workers on each.

    A quota is recomputed when its ``spec.hard`` changes, when an object of a kind it tracks is
    created or deleted in its namespace, when a pod's reported resources change (KEP-1287 "Resource
    Quota": "to properly handle scale-down, resource quota controller now needs to evaluate pod
    updates where .status...resources changed"), when a pod becomes terminal or its Terminating
    scope changes (``pod_update_matters``) — and every quota, fully, each
    ``--resource-quota-sync-period`` (5m; ``_resync_loop``).
    """

    name = "resourcequota"
    queue_name = "resourcequota_primary"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self.priority_queue: RateLimitingQueue[str] = RateLimitingQueue("resourcequota_priority")
        self._client = ctx.client
        self._period = ctx.options.resource_quota_sync_period
        self._quotas = ctx.informers.informer(RESOURCE_QUOTA)
        self._quotas.add_indexer(NAMESPACE_INDEX, _namespace)
        self._quotas.add_handler(on_add=self._add_quota, on_update=self._update_quota, on_delete=self.enqueue)
        self._objects: dict[str, Informer[Any]] = {}
        for kind in quota.counted_kinds():
            inf = ctx.informers.informer(kind)
            inf.add_indexer(NAMESPACE_INDEX, _namespace)
            self._objects[kind.plural] = inf
            # No add handler, as Kubernetes' quota monitor: a created object was charged by admission
            # already, and a recount during a burst of creates could only miss the latest of them.
            inf.add_handler(on_update=functools.partial(self._updated, kind),
                            on_delete=functools.partial(self._replenish, kind))

    # ------------------------------------------------------------ events

    def _add_quota(self, q: core_pb2.ResourceQuota) -> None:
        """A new or changed quota: first in line if its status does not yet say what it limits."""
        key = key_of(q)
        if not quota.equals(quota.parse_list(q.spec.hard), quota.parse_list(q.status.hard)):
            self.priority_queue.add(key)
            return
        if any(name not in q.status.used and quota.countable(name) for name in q.status.hard):
            self.priority_queue.add(key)
            return
        self.queue.add(key)

    def _update_quota(self, old: core_pb2.ResourceQuota, new: core_pb2.ResourceQuota) -> None:
        # Status updates are this controller's (or admission's) own: only a spec.hard change matters.
        if not quota.equals(quota.parse_list(old.spec.hard), quota.parse_list(new.spec.hard)):
            self._add_quota(new)

    def _updated(self, kind: Kind[Message, Message], old: Message, new: Message) -> None:
        if isinstance(old, core_pb2.Pod) and isinstance(new, core_pb2.Pod) and pod_update_matters(old, new):
            self._replenish(kind, new)

    def _replenish(self, kind: Kind[Message, Message], obj: Message) -> None:
        """Kubernetes' replenishQuota: recompute the namespace's quotas that track ``kind``."""
        evaluator = quota.evaluator_for(kind)
        if evaluator is None:
            return
        for q in self._quotas.by_index(NAMESPACE_INDEX, object_meta(obj).namespace):
            if evaluator.matching_resources(q.status.hard):
                self.queue.add(key_of(q))

    # ------------------------------------------------------------ work

    async def start(self, workers: int) -> None:
        await super().start(workers)
        self._tasks += [supervise(f"{self.name}/priority-worker-{i}",
                                  functools.partial(self.work, self.priority_queue, self.sync))
                        for i in range(workers)]

    def background(self) -> list[tuple[str, Any]]:
        return [("resync", self._resync_loop)]

    async def stop(self) -> None:
        self.priority_queue.shutdown()
        await super().stop()

    async def _resync_loop(self) -> None:
        """Kubernetes' enqueueAll: every quota, fully recomputed, every sync period."""
        while True:
            await asyncio.sleep(self._period)
            for q in self._quotas.list_all():
                self.queue.add(key_of(q))

    async def sync(self, key: str) -> None:
        """Recompute one quota's status. Usage is computed as ``machinery.quota`` says — pods by
        their resources, KEP-1287's largest of desired, allocated and actual for a container that
        reports status resources, terminal pods and pods past their deletion grace not counted; the
        other namespaced kinds by number (``count/replicasets.apps``) — over the shared informers'
        caches, so the controller reads nothing but its caches and writes only quota status
        (``UpdateStatus``, with the quota's resourceVersion: a conflict with the apiserver's
        ResourceQuota admission, which charges quotas as it admits, is retried from the cache)."""
        namespace, _, name = key.partition("/")
        q = self._quotas.get(name, namespace)
        if q is None:
            return  # deleted
        behind = [plural for plural, inf in self._objects.items()
                  if quota.evaluator_for_plural(plural).matching_resources(q.spec.hard)
                  and _revision(inf.resource_version) < _revision(q.metadata.resource_version)]
        if behind:
            # The quota was written — admission charged it — at a revision these caches have not
            # seen yet: counting from them would undo the charge of what they do not show.
            log.debug("resourcequota_caches_behind", quota=key, kinds=behind)
            self.queue.add_after(key, CATCH_UP_DELAY)
            return
        objects = {plural: inf.by_index(NAMESPACE_INDEX, namespace) for plural, inf in self._objects.items()}
        used = quota.parse_list(q.status.used)
        used.update(quota.calculate_usage(q, objects, timeutil.now()))
        # What the quota no longer limits is dropped; what nobody can count (services, storage)
        # keeps the last value observed.
        used = quota.mask(used, q.spec.hard)
        status = core_pb2.ResourceQuotaStatus(hard=q.spec.hard, used=quota.to_strings(used))
        if quota.equals(quota.parse_list(status.hard), quota.parse_list(q.status.hard)) and quota.equals(
                used, quota.parse_list(q.status.used)):
            return
        fresh = core_pb2.ResourceQuota()
        fresh.CopyFrom(q)
        fresh.status.CopyFrom(status)
        await self._client.resource_quotas.update_status(fresh)
        log.info("resourcequota_synced", quota=key, used=dict(status.used))
