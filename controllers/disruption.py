"""The disruption controller (Kubernetes' pkg/controller/disruption): every PodDisruptionBudget's status.

- ``DisruptionController``: when a budget is synced; ``DisruptionController._try_sync``: its status
  (Kubernetes' trySync); ``DisruptionController.sync``: the fail-safe status when that fails.
- ``stale_disruption_wait``, ``DisruptionController._sync_stale_pod_disruption``: a pod's stale
  ``DisruptionTarget`` condition reset to False.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta

from google.protobuf.message import Message

from controllers.controller import ControllerContext, ObjectController
from machinery import disruption, errors, kinds, podconditions, selectors, timeutil
from machinery.api import apps_pb2, core_pb2, meta_pb2, policy_pb2
from machinery.client import Client
from machinery.informer import key_of
from machinery.kinds import DEPLOYMENT, POD, POD_DISRUPTION_BUDGET, REPLICA_SET, object_meta
from machinery.logging import get_logger
from machinery.process import supervise
from machinery.workqueue.rate_limiting import RateLimitingQueue

log = get_logger()

STALE_POD_DISRUPTION_TIMEOUT = timedelta(minutes=2)  # Kubernetes' stalePodDisruptionTimeout
UNMANAGED_MESSAGE = ("Pods selected by this PodDisruptionBudget (selector: {selector}) were found to be unmanaged. "
                     "As a result, the status of the PDB cannot be calculated correctly, which may result in undefined "
                     'behavior. To account for these pods please set ".spec.minAvailable" field of the PDB to an '
                     "integer value.")


def stale_disruption_wait(pod: core_pb2.Pod, now: datetime) -> float | None:
    """Kubernetes' nonTerminatingPodHasStaleDisruptionCondition: None if the pod has no stale
    DisruptionTarget to reset, else the seconds until it is stale (0: now)."""
    if pod.metadata.deletion_timestamp or pod.status.phase in ("Succeeded", "Failed"):
        return None
    cond = podconditions.get_condition(pod.status, podconditions.DISRUPTION_TARGET)
    if cond is None or cond.status != "True" or cond.reason == podconditions.TERMINATION_BY_KUBELET:
        return None
    since = timeutil.parse(cond.last_transition_time)
    if since is None:
        return 0.0
    return max(0.0, (since + STALE_POD_DISRUPTION_TIMEOUT - now).total_seconds())


class DisruptionController(ObjectController):
    """A budget is synced when it changes, when a pod it selects (before or after the change) is
    added, changed or deleted, and when a ReplicaSet or Deployment of its namespace is."""

    name = "disruption"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client: Client = ctx.client
        self._recorder = ctx.recorder("controllermanager")
        self.stale_queue: RateLimitingQueue[str] = RateLimitingQueue("stale_pod_disruption")
        self._pods = ctx.informers.informer(POD)
        self._pdbs = ctx.informers.informer(POD_DISRUPTION_BUDGET)
        self._replica_sets = ctx.informers.informer(REPLICA_SET)
        self._deployments = ctx.informers.informer(DEPLOYMENT)
        self._pdbs.add_handler(self.enqueue, lambda old, new: self.enqueue(new), self.enqueue)
        self._pods.add_handler(lambda p: self._pod_changed(None, p), self._pod_changed,
                               lambda p: self._pod_changed(p, None))
        for inf in (self._replica_sets, self._deployments):
            inf.add_handler(self._controller_changed, lambda old, new: self._controller_changed(new, old),
                            self._controller_changed)

    # ------------------------------------------------------------ handlers: enqueue only

    def _pod_changed(self, old: core_pb2.Pod | None, new: core_pb2.Pod | None) -> None:
        """A pod's budgets — those selecting it before or after the change — are synced again."""
        keys = {key_of(b) for pod in (old, new) if pod is not None for b in self._budgets_of(pod)}
        for key in keys:
            self.enqueue_key(key)
        if new is not None:
            wait = stale_disruption_wait(new, timeutil.now())
            if wait is not None:
                self.stale_queue.add_after(key_of(new), wait)

    def _controller_changed(self, obj: Message, old: Message | None = None) -> None:
        """A ReplicaSet's or Deployment's scale (or owner) decides the expected pods of budgets over
        its pods: each budget of the namespace is synced again (kplane's; Kubernetes waits for a pod
        event)."""
        if old is not None and isinstance(obj, (apps_pb2.ReplicaSet, apps_pb2.Deployment)) and \
                isinstance(old, (apps_pb2.ReplicaSet, apps_pb2.Deployment)) and \
                obj.spec.replicas == old.spec.replicas and \
                list(obj.metadata.owner_references) == list(old.metadata.owner_references):
            return
        namespace = object_meta(obj).namespace
        for pdb in self._pdbs.list_all():
            if pdb.metadata.namespace == namespace:
                self.enqueue(pdb)

    def _budgets_of(self, pod: core_pb2.Pod) -> list[policy_pb2.PodDisruptionBudget]:
        return [b for b in self._pdbs.list_all() if disruption.selects(b, pod)]

    # ------------------------------------------------------------ workers

    async def start(self, workers: int) -> None:
        await super().start(workers)
        self._tasks.append(supervise(f"{self.name}/stale-pod-disruption", functools.partial(
            self.work, self.stale_queue, self._sync_stale_pod_disruption)))

    async def stop(self) -> None:
        self.stale_queue.shutdown()
        await super().stop()

    async def sync(self, key: str) -> None:
        """Kubernetes' sync: a write conflict is retried; any other failure makes the budget allow
        no disruption (failSafe), retried only if that write fails too. A sync that fails for any
        reason but a write conflict writes ``disruptionsAllowed: 0`` with reason ``SyncFailed`` and
        the error, so no eviction goes through a budget nobody could compute."""
        namespace, _, name = key.partition("/")
        pdb = self._pdbs.get(name, namespace)
        if pdb is None:
            return
        try:
            await self._try_sync(key, pdb)
        except errors.Conflict:
            raise
        except errors.NotFound:
            return  # deleted meanwhile: its informer's delete event comes
        except (errors.ApiError, disruption.NoControllerError, disruption.IntOrPercentError,
                _ScaleLookupError) as exc:
            message = exc.message if isinstance(exc, errors.ApiError) else str(exc)
            log.warning("pdb_sync_failed", pdb=key, error=message)
            try:
                await self._write(pdb, disruption.sync_failed_status(pdb, message, timeutil.now()))
            except errors.NotFound:
                return

    async def _try_sync(self, key: str, pdb: policy_pb2.PodDisruptionBudget) -> None:
        """The budget's status, from the informers' caches (Kubernetes' trySync; the arithmetic is
        ``machinery.disruption``'s), written only when it changes:

        - ``expectedPods``: for an integer ``minAvailable``, the pods the budget selects; for a
          percentage ``minAvailable`` or any ``maxUnavailable``, the sum of the scale
          (``spec.replicas``) of the selected pods' controllers, found through each pod's controller
          ownerReference — a ReplicaSet's, or its Deployment's when a Deployment controls it
          (``_scale_of``). Pods without a controller are left out of that sum (event
          ``UnmanagedPods``); a controller reference that leads nowhere fails the sync.
        - ``desiredHealthy``: ``minAvailable`` of that, or that less ``maxUnavailable`` (percentages
          rounded up); ``currentHealthy``: the Ready pods neither being deleted nor just evicted;
          ``disruptionsAllowed``: the difference, never below 0, and 0 while no pod is expected.
        - ``disruptedPods``: the eviction subresource's entries, dropped once their pod is being
          deleted, or two minutes after the eviction if it never was (event ``NotDeleted``); the
          budget is looked at again when the next entry would expire.
        - ``observedGeneration`` and the ``DisruptionAllowed`` condition (``SufficientPods`` /
          ``InsufficientPods``).
        """
        pods = [p for p in self._pods.list_all() if disruption.selects(pdb, p)]
        if not pods:
            self._recorder.event(pdb, "Normal", "NoPods", "No matching pods found")
        try:
            expected, desired, unmanaged = disruption.expected_pod_count(pdb, pods, self._scale_of)
        except (disruption.NoControllerError, disruption.IntOrPercentError, _ScaleLookupError) as exc:
            self._recorder.event(pdb, "Warning", "CalculateExpectedPodCountFailed",
                                 f"Failed to calculate the number of expected pods: {exc}")
            raise
        if unmanaged:
            log.info("pdb_unmanaged_pods", pdb=key, pods=unmanaged)
            selector = selectors.format_label_selector(pdb.spec.selector, pdb.spec.HasField("selector"))
            self._recorder.event(pdb, "Warning", "UnmanagedPods", UNMANAGED_MESSAGE.format(selector=selector))
        now = timeutil.now()
        disrupted, recheck, expired = disruption.disrupted_pod_map(pdb, pods, now)
        for pod in expired:
            log.info("pdb_eviction_not_followed_by_deletion", pdb=key, pod=pod.metadata.name)
            self._recorder.event(pod, "Warning", "NotDeleted", f"Pod was expected by PDB {key} to be deleted but "
                                 "it wasn't")
        healthy = disruption.count_healthy(pods, disrupted, now)
        status = disruption.budget_status(pdb, healthy, desired, expected, disrupted, now)
        if status is not None:
            await self._write(pdb, status)
            log.info("pdb_status", pdb=key, expected=expected, desired=desired, healthy=healthy,
                     allowed=status.disruptions_allowed)
        if recheck is not None:
            self.enqueue_key(key, after=max(0.0, (recheck - now).total_seconds()))

    async def _write(self, pdb: policy_pb2.PodDisruptionBudget, status: policy_pb2.PodDisruptionBudgetStatus) -> None:
        new = policy_pb2.PodDisruptionBudget()
        new.CopyFrom(pdb)
        new.status.CopyFrom(status)
        await self._client.pod_disruption_budgets.update_status(new)

    # ------------------------------------------------------------ finding a pod's controller's scale

    def _scale_of(self, ref: meta_pb2.OwnerReference, namespace: str) -> tuple[str, int] | None:
        """Kubernetes' finders, in order: a ReplicaSet controlled by a Deployment gives the
        Deployment's scale, any other ReplicaSet its own, a Deployment its own; a reference that
        leads to no such object, None. A kind without the scale subresource is an error."""
        group = ref.api_version.rpartition("/")[0]
        if ref.kind == "ReplicaSet" and group in ("apps", "extensions"):
            rs = self._replica_sets.get(ref.name, namespace)
            if rs is None or rs.metadata.uid != ref.uid:
                return None
            owner = disruption.controller_of(rs.metadata)
            if owner is not None and owner.kind == "Deployment" and \
                    owner.api_version.rpartition("/")[0] in ("apps", "extensions"):
                d = self._deployments.get(owner.name, namespace)
                if d is not None and d.metadata.uid == owner.uid:
                    return d.metadata.uid, _replicas(d)
            return rs.metadata.uid, _replicas(rs)
        if ref.kind == "Deployment" and group in ("apps", "extensions"):
            d = self._deployments.get(ref.name, namespace)
            if d is None or d.metadata.uid != ref.uid:
                return None
            return d.metadata.uid, _replicas(d)
        try:
            kind = kinds.for_api_kind(ref.api_version, ref.kind)
        except kinds.UnknownKindError as exc:
            raise _ScaleLookupError(str(exc)) from None
        resource = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
        raise _ScaleLookupError(f"{resource} does not implement the scale subresource")

    # ------------------------------------------------------------ stale DisruptionTarget conditions

    async def _sync_stale_pod_disruption(self, key: str) -> None:
        """Kubernetes' syncStalePodDisruption: DisruptionTarget set False once stale. As Kubernetes',
        the controller resets a pod's ``DisruptionTarget`` condition to False when it has stayed True
        for two minutes on a pod nobody deleted (a preemption or eviction that did not happen), except
        the kubelet's own (``TerminationByKubelet``)."""
        namespace, _, name = key.partition("/")
        pod = self._pods.get(name, namespace)
        if pod is None:
            return
        wait = stale_disruption_wait(pod, timeutil.now())
        if wait is None:
            return
        if wait > 0:
            self.stale_queue.add_after(key, wait)
            return
        new = core_pb2.Pod()
        new.CopyFrom(pod)
        podconditions.set_condition(new, podconditions.DISRUPTION_TARGET, "False")
        try:
            await self._client.pods.update_status(new)
        except errors.NotFound:
            return
        log.info("stale_disruption_target_reset", pod=key)


class _ScaleLookupError(Exception):
    """A controller reference names a kind without the scale subresource, or no kind at all."""


def _replicas(obj: apps_pb2.ReplicaSet | apps_pb2.Deployment) -> int:
    return obj.spec.replicas if obj.spec.HasField("replicas") else 1

