"""The ReplicaSet controller (Kubernetes' pkg/controller/replicaset): as many pods as ``spec.replicas``.

- ``ReplicaSetController.sync`` (syncReplicaSet): one sync of a ReplicaSet, its steps in order;
- ``ReplicaSetController.manage_replicas``: too few pods created, too many deleted;
- ``calculate_status``: the status its pods give it.

Where kplane differs from Kubernetes: docs/controller-manager.md, "Where kplane differs".
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime

from controllers.controller import ControllerContext, ObjectController
from controllers.deploymentutil import replicas as spec_replicas
from controllers.expectations import Expectations
from controllers.podcontrol import PodControl, controller_of, controller_ref, namespace_terminating
from controllers.ranking import is_pod_active, is_pod_available, is_pod_terminating, pods_to_delete, ready_since
from controllers.refmanager import ControllerRefManager, resolve_controller, selecting
from machinery import errors, failpoints, selectors, timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.disruption import is_pod_ready
from machinery.informer import key_of
from machinery.kinds import POD, REPLICA_SET
from machinery.logging import get_logger
from machinery.retry import Backoff, retry_update

log = get_logger()

BURST_REPLICAS = 500  # Kubernetes' BurstReplicas: most pods created or deleted per sync
SLOW_START_INITIAL_BATCH = 1  # Kubernetes' SlowStartInitialBatchSize
REPLICA_FAILURE = "ReplicaFailure"
# updateReplicaSetStatus: the write, and once more (statusUpdateRetries) on a fresh read after a conflict.
STATUS_UPDATE_RETRY = Backoff(steps=2, duration=0.0)
CONTROLLER_UID_INDEX = "controllerUID"
NAMESPACE_INDEX = "metadata.namespace"

# A controller-manager killed at either failpoint and started again creates no pod twice: its informers list every
# pod before any worker runs, and the expectations of the new process start empty.
FP_AFTER_CREATE = failpoints.declare(
    "controller-manager/replicaset-after-create",
    "a ReplicaSet's pod create returned; the next create of the pass not sent yet")
FP_BEFORE_STATUS_UPDATE = failpoints.declare(
    "controller-manager/replicaset-before-status-update",
    "a ReplicaSet's pods created or deleted; its status not written yet")

# A safety check switched off, for chaos to find (docs/chaos.md, "Proof that it finds races").
FP_SKIP_EXPECTATIONS = failpoints.declare(
    "controller-manager/skip-replicaset-expectations",
    "return: a ReplicaSet syncs as if its expectations were met, even with its own creates and deletes not yet "
    "seen by its informer (so it can create twice; deployment-surge-and-unavailability must catch it)")


def pod_key(pod: core_pb2.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


async def slow_start_batch(count: int, initial: int,
                           fn: Callable[[], Awaitable[None]]) -> tuple[int, BaseException | None]:
    """Kubernetes' slowStartBatch: call ``fn`` ``count`` times in concurrent batches of ``initial``,
    doubling after each batch that fully succeeded; a batch with a failure ends it. Returns the
    number of successful calls and the first failure."""
    remaining, successes = count, 0
    batch = min(remaining, initial)
    while batch > 0:
        results = await asyncio.gather(*(fn() for _ in range(batch)), return_exceptions=True)
        failures = [r for r in results if isinstance(r, BaseException)]
        successes += batch - len(failures)
        if failures:
            return successes, failures[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def _condition(status: apps_pb2.ReplicaSetStatus, type_: str) -> apps_pb2.ReplicaSetCondition | None:
    return next((c for c in status.conditions if c.type == type_), None)


def calculate_status(rs: apps_pb2.ReplicaSet, active: list[core_pb2.Pod], terminating: int,
                     manage_error: BaseException | None, now: datetime) -> apps_pb2.ReplicaSetStatus:
    """calculateStatus: the status the ReplicaSet's pods give it (observedGeneration is set when written):
    ``replicas`` (active pods), ``fullyLabeledReplicas`` (those carrying every label of the template),
    ``readyReplicas``, ``availableReplicas`` (Ready for ``minReadySeconds``), ``terminatingReplicas``
    (its pods being deleted), and the ``ReplicaFailure`` condition (reason ``FailedCreate`` or
    ``FailedDelete``) while creates or deletes fail."""
    status = apps_pb2.ReplicaSetStatus()
    status.CopyFrom(rs.status)
    template_labels = rs.spec.template.metadata.labels
    fully_labeled = ready = available = 0
    for pod in active:
        if all(pod.metadata.labels.get(k) == v for k, v in template_labels.items()):
            fully_labeled += 1
        if is_pod_ready(pod):
            ready += 1
            if is_pod_available(pod, rs.spec.min_ready_seconds, now):
                available += 1
    failure = _condition(rs.status, REPLICA_FAILURE)
    if manage_error is not None and failure is None:
        diff = len(active) - spec_replicas(rs)
        reason = "FailedCreate" if diff < 0 else "FailedDelete" if diff > 0 else ""
        status.conditions.add(type=REPLICA_FAILURE, status="True", reason=reason,
                              message=str(manage_error), last_transition_time=timeutil.rfc3339(now))
    elif manage_error is None and failure is not None:
        kept = [c for c in status.conditions if c.type != REPLICA_FAILURE]
        del status.conditions[:]
        status.conditions.extend(kept)
    status.replicas, status.fully_labeled_replicas = len(active), fully_labeled
    status.ready_replicas, status.available_replicas = ready, available
    status.terminating_replicas = terminating
    return status


def status_unchanged(rs: apps_pb2.ReplicaSet, status: apps_pb2.ReplicaSetStatus) -> bool:
    """updateReplicaSetStatus' steady state: every count equal, the generation observed, conditions equal."""
    old = rs.status
    return (old.replicas, old.fully_labeled_replicas, old.ready_replicas, old.available_replicas,
            old.terminating_replicas if old.HasField("terminating_replicas") else None) == (
        status.replicas, status.fully_labeled_replicas, status.ready_replicas, status.available_replicas,
        status.terminating_replicas if status.HasField("terminating_replicas") else None) and \
        rs.metadata.generation == old.observed_generation and list(old.conditions) == list(status.conditions)


def next_available_in(rs: apps_pb2.ReplicaSet, active: list[core_pb2.Pod], now: datetime) -> float | None:
    """Seconds until the next Ready pod becomes available (``minReadySeconds`` after it became
    Ready), when the ReplicaSet is synced again; None if none is waiting for that."""
    if rs.spec.min_ready_seconds <= 0:
        return None
    waits = []
    for pod in active:
        since = ready_since(pod)
        if since is not None and not is_pod_available(pod, rs.spec.min_ready_seconds, now):
            waits.append(since.timestamp() + rs.spec.min_ready_seconds - now.timestamp())
    return max(0.0, min(waits)) if waits else None


class ReplicaSetController(ObjectController):
    name = "replicaset"

    def __init__(self, ctx: ControllerContext, *, burst_replicas: int = BURST_REPLICAS):
        super().__init__()
        self._client = ctx.client
        self._burst = burst_replicas
        self._rs = ctx.informers.informer(REPLICA_SET)
        self._pods = ctx.informers.informer(POD)
        self._rs.add_indexer(CONTROLLER_UID_INDEX, controller_uid)
        self._rs.add_indexer(NAMESPACE_INDEX, lambda rs: [rs.metadata.namespace])
        self._pods.add_indexer(NAMESPACE_INDEX, lambda p: [p.metadata.namespace])
        self._pod_control = PodControl(ctx.client, ctx.recorder("replicaset-controller"))
        self.expectations = Expectations()
        self._rs.add_handler(self.enqueue, self._rs_updated, self._rs_deleted)
        self._pods.add_handler(self._pod_added, self._pod_updated, self._pod_deleted)

    # ------------------------------------------------------------ event handlers (enqueue only)

    def _rs_updated(self, old: apps_pb2.ReplicaSet, new: apps_pb2.ReplicaSet) -> None:
        if old.metadata.uid != new.metadata.uid:
            self._rs_deleted(old)  # deleted and made again under the same name
        self.enqueue(new)

    def _rs_deleted(self, rs: apps_pb2.ReplicaSet) -> None:
        key = key_of(rs)
        self.expectations.delete(key)  # a new ReplicaSet of the same name starts clean
        self.queue.add(key)

    def _resolve(self, pod: core_pb2.Pod) -> apps_pb2.ReplicaSet | None:
        return resolve_controller(self._rs, "ReplicaSet", pod.metadata)

    def _matching(self, pod: core_pb2.Pod) -> list[apps_pb2.ReplicaSet]:
        return selecting(self._rs.by_index(NAMESPACE_INDEX, pod.metadata.namespace), pod.metadata.labels)

    def _pod_added(self, pod: core_pb2.Pod) -> None:
        if pod.metadata.deletion_timestamp:
            self._pod_deleted(pod)  # seen first while being deleted (a restart): not a creation
            return
        if controller_of(pod.metadata) is not None:
            rs = self._resolve(pod)
            if rs is not None:
                key = key_of(rs)
                self.expectations.creation_observed(key)
                self.queue.add(key)
            return
        for rs in self._matching(pod):  # an orphan: whoever matches may adopt it
            self.enqueue(rs)

    def _pod_updated(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return
        labels_changed = dict(old.metadata.labels) != dict(new.metadata.labels)
        if new.metadata.deletion_timestamp:
            # A graceful delete: act now (make its replacement), not when the kubelet is done.
            self._pod_deleted(new)
            if labels_changed:
                self._pod_deleted(old)
            return
        old_ref, new_ref = controller_of(old.metadata), controller_of(new.metadata)
        ref_changed = old_ref != new_ref
        if ref_changed and old_ref is not None:
            previous = self._resolve(old)
            if previous is not None:
                self.enqueue(previous)
        if new_ref is not None:
            rs = self._resolve(new)
            if rs is None:
                return
            self.enqueue(rs)
            if not is_pod_ready(old) and is_pod_ready(new) and rs.spec.min_ready_seconds > 0:
                # Available minReadySeconds from now: look again then (a second more for skew).
                self.enqueue_key(key_of(rs), after=rs.spec.min_ready_seconds + 1.0)
            return
        if labels_changed or ref_changed:
            for rs in self._matching(new):
                self.enqueue(rs)

    def _pod_deleted(self, pod: core_pb2.Pod) -> None:
        rs = self._resolve(pod)
        if rs is None:
            return
        key = key_of(rs)
        self.expectations.deletion_observed(key, pod_key(pod))
        self.queue.add(key)

    # ------------------------------------------------------------ sync

    async def sync(self, key: str) -> None:
        """syncReplicaSet, from the informers' caches: its pods (``_claim``); unless it still waits for
        pods it created or deleted to show in the pod informer (its *expectations*,
        ``controllers.expectations``) or is being deleted, pods created or deleted toward
        ``spec.replicas`` (``manage_replicas``); then its status (``calculate_status``), written only
        when it changed.

        kplane: the status written after a pass that deleted pods counts them as terminating already
        (Kubernetes counts what its cache showed before the deletes and corrects it on the next sync),
        so a Deployment never reads a stale ``availableReplicas`` after a scale-down."""
        namespace, _, name = key.partition("/")
        rs = self._rs.get(name, namespace)
        if rs is None:
            self.expectations.delete(key)
            return
        needs_sync = self.expectations.satisfied(key) or failpoints.returns(FP_SKIP_EXPECTATIONS)
        try:
            selector = selectors.label_selector_as_selector(rs.spec.selector)
        except selectors.SelectorError as exc:
            log.warning("replicaset_bad_selector", replicaset=key, error=str(exc))
            return
        all_pods = self._pods.by_index(NAMESPACE_INDEX, namespace)
        active = await self._claim(rs, selector, [p for p in all_pods if is_pod_active(p)])
        terminating = [p for p in all_pods if is_pod_terminating(p) and _owned(rs, selector, p)]
        manage_error: BaseException | None = None
        deleted: set[str] = set()
        if needs_sync and not rs.metadata.deletion_timestamp:
            try:
                deleted = await self.manage_replicas(rs, active)
            except (errors.ApiError, failpoints.FailpointError) as exc:
                manage_error = exc
        if deleted:  # being deleted now: counted as terminating already
            terminating += [p for p in active if pod_key(p) in deleted]
            active = [p for p in active if pod_key(p) not in deleted]
        now = timeutil.now()
        status = calculate_status(rs, active, len(terminating), manage_error, now)
        await failpoints.hit(FP_BEFORE_STATUS_UPDATE)
        updated = await self._update_status(rs, status)
        wait = next_available_in(updated, active, now)
        if manage_error is None and wait is not None:
            self.enqueue_key(key, after=wait + 0.05)
        if manage_error is not None:
            raise manage_error

    async def _claim(self, rs: apps_pb2.ReplicaSet, selector: selectors.LabelSelector,
                     pods: list[core_pb2.Pod]) -> list[core_pb2.Pod]:
        """Its pods: of the active pods of its namespace (not Succeeded or Failed, not being deleted),
        its own that still match its selector; orphans that match are adopted, its own that no longer
        match released (``controllers.refmanager``)."""
        async def recheck() -> apps_pb2.ReplicaSet:
            return await self._client.replica_sets.get(rs.metadata.name, rs.metadata.namespace)

        async def patch(namespace: str, name: str, body: str) -> core_pb2.Pod:
            return await self._client.pods.patch(name, body, namespace=namespace)

        return await ControllerRefManager[core_pb2.Pod](rs, selector, patch, recheck, "ReplicaSet").claim(pods)

    async def manage_replicas(self, rs: apps_pb2.ReplicaSet, pods: list[core_pb2.Pod]) -> set[str]:
        """manageReplicas: create or delete pods toward ``spec.replicas``. The keys of the pods it
        deleted; raises the first failure (after every pod of the pass was tried).

        Too few pods, and it creates the missing ones (at most ``burstReplicas``, 500, per sync) in
        slow-start batches of 1, 2, 4, … — a batch with a failure ends the pass, so a quota refusal
        costs one call, not 500. Pods are created from the template with ``generateName:
        <replicaset>-`` and the ReplicaSet as their controller (ownerReference apps/v1 ReplicaSet,
        ``controller: true``, ``blockOwnerDeletion: true``). Too many, and it deletes the surplus, the
        pods Kubernetes' ActivePodsWithRanks puts first (``controllers.ranking``: unassigned, Pending,
        not Ready, low deletion cost, doubled up on a node with pods of the same Deployment, Ready for
        less time, restarted more, newer). Events on the ReplicaSet: ``SuccessfulCreate`` "Created
        pod: NAME", ``SuccessfulDelete`` "Deleted pod: NAME", ``FailedCreate``/``FailedDelete``."""
        key = key_of(rs)
        diff = len(pods) - spec_replicas(rs)
        if diff < 0:
            count = min(-diff, self._burst)
            self.expectations.expect_creations(key, count)
            log.info("replicaset_too_few_replicas", replicaset=key, need=spec_replicas(rs), creating=count)
            ref = controller_ref(rs)

            async def create() -> None:
                try:
                    await self._pod_control.create_pod(rs.spec.template, rs, ref)
                except errors.ApiError as exc:
                    if namespace_terminating(exc):
                        return  # every create would fail: nothing to retry
                    raise
                await failpoints.hit(FP_AFTER_CREATE)

            successes, failure = await slow_start_batch(count, SLOW_START_INITIAL_BATCH, create)
            if count - successes > 0:
                # Never sent, or refused: the informer will not show them.
                log.info("replicaset_slow_start_skipped", replicaset=key, skipped=count - successes)
                self.expectations.lower(key, adds=count - successes)
            if failure is not None:
                raise failure
            return set()
        if diff == 0:
            return set()
        count = min(diff, self._burst)
        log.info("replicaset_too_many_replicas", replicaset=key, need=spec_replicas(rs), deleting=count)
        victims = pods_to_delete(pods, self._indirectly_related_pods(rs), count, timeutil.now())
        self.expectations.expect_deletions(key, [pod_key(p) for p in victims])
        results = await asyncio.gather(*(self._pod_control.delete_pod(p.metadata.namespace, p.metadata.name, rs)
                                         for p in victims), return_exceptions=True)
        deleted: set[str] = set()
        first: BaseException | None = None
        for pod, result in zip(victims, results, strict=True):
            if isinstance(result, BaseException):
                self.expectations.deletion_observed(key, pod_key(pod))  # the informer will not show it
                if not isinstance(result, errors.NotFound) and first is None:
                    first = result
            else:
                deleted.add(pod_key(pod))
        if first is not None:
            raise first
        return deleted

    def _indirectly_related_pods(self, rs: apps_pb2.ReplicaSet) -> list[core_pb2.Pod]:
        """getIndirectlyRelatedPods: the pods of every ReplicaSet with the same controller as
        ``rs`` (a Deployment's old and new ReplicaSets); none for a ReplicaSet of its own."""
        owner = controller_of(rs.metadata)
        if owner is None:
            return []
        seen: set[str] = set()
        out: list[core_pb2.Pod] = []
        namespace_pods = self._pods.by_index(NAMESPACE_INDEX, rs.metadata.namespace)
        for related in self._rs.by_index(CONTROLLER_UID_INDEX, owner.uid):
            try:
                sel = selectors.label_selector_as_selector(related.spec.selector)
            except selectors.SelectorError:
                continue
            for pod in namespace_pods:
                if pod.metadata.uid not in seen and sel.matches(pod.metadata.labels):
                    seen.add(pod.metadata.uid)
                    out.append(pod)
        return out

    async def _update_status(self, rs: apps_pb2.ReplicaSet,
                             status: apps_pb2.ReplicaSetStatus) -> apps_pb2.ReplicaSet:
        """updateReplicaSetStatus: write the status unless unchanged; one retry on a stale read."""
        if status_unchanged(rs, status):
            return rs
        observed = rs.metadata.generation  # the generation acted on, not whatever a re-read shows

        async def write(rs: apps_pb2.ReplicaSet) -> apps_pb2.ReplicaSet:
            fresh = apps_pb2.ReplicaSet()
            fresh.CopyFrom(rs)
            fresh.status.CopyFrom(status)
            fresh.status.observed_generation = observed
            return await self._client.replica_sets.update_status(fresh)

        return await retry_update(rs, lambda: self._client.replica_sets.get(rs.metadata.name, rs.metadata.namespace),
                                  write, STATUS_UPDATE_RETRY)


def controller_uid(rs: apps_pb2.ReplicaSet) -> list[str]:
    """The ReplicaSet informer's controllerUID index: its controller's uid."""
    ref = controller_of(rs.metadata)
    return [ref.uid] if ref is not None else []


def _owned(rs: apps_pb2.ReplicaSet, selector: selectors.LabelSelector, pod: core_pb2.Pod) -> bool:
    """FilterClaimedPods: the ReplicaSet is the pod's controller and its selector still selects it."""
    ref = controller_of(pod.metadata)
    return ref is not None and ref.uid == rs.metadata.uid and selector.matches(pod.metadata.labels)
