"""The namespace controller (Kubernetes' pkg/controller/namespace and its deletion package).

A deleted namespace is kept by the apiserver, ``Terminating``, until its ``kubernetes`` finalizer
is gone from ``spec.finalizers`` (docs/api.md "Namespaces"). This controller removes it once the
namespace is empty, as Kubernetes' namespacedResourcesDeleter does.

- ``NamespaceController.delete``: one pass, the namespace's content deleted, then the finalizer;
- ``NamespaceController.sync``: when a namespace is looked at (again);
- ``ConditionUpdater``: the namespace's conditions, written on each pass.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from controllers.controller import ControllerContext, ObjectController
from machinery import errors, timeutil
from machinery.api import core_pb2
from machinery.client import Client
from machinery.kinds import KINDS, NAMESPACE, POD, Kind, list_accessor, object_meta
from machinery.logging import get_logger
from machinery.retry import Backoff, retry_update

log = get_logger()

FINALIZER_KUBERNETES = "kubernetes"  # the token this controller removes (v1.FinalizerKubernetes)
# A namespace's events are looked at 5 s after they arrive (Kubernetes' namespaceDeletionGracePeriod:
# time for every apiserver to refuse new content in it before the controller lists it).
DELETION_GRACE_PERIOD = 5.0  # Kubernetes' namespaceDeletionGracePeriod
# How long a namespace waits for objects held by finalizers.
FINALIZER_ESTIMATE_SECONDS = 15  # Kubernetes' finalizerEstimateSeconds
# retryOnConflictError tries again at once and without end; ten tries, then the workqueue's backoff.
RETRY_ON_CONFLICT = Backoff(steps=10, duration=0.0)

# The conditions this controller keeps, in Kubernetes' order, with their "all is well" reason and message.
DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
OK_CONDITIONS: dict[str, tuple[str, str]] = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GV_PARSING_FAILURE: ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


class ResourcesRemaining(Exception):
    """Kubernetes' ResourcesRemainingError: content is going, expected gone in ``estimate`` seconds."""

    def __init__(self, estimate: int):
        super().__init__(f"some content remains in the namespace, estimate {estimate} seconds before it is removed")
        self.estimate = estimate


@dataclass
class KindRemaining:
    """What one kind left in the namespace after a pass (Kubernetes' gvrDeletionMetadata)."""

    estimate: int = 0  # seconds to wait; 0 is no estimate, not "nothing left"
    remaining: int = 0
    finalizers: dict[str, int] = field(default_factory=dict)  # finalizer -> objects it holds


class _Replaced(Exception):
    """The namespace a retry re-read is another of the same name."""


class ContentError(Exception):
    """Deleting one kind's content failed (``left``: what it left); the pass goes on with the
    other kinds."""

    def __init__(self, message: str, left: KindRemaining | None = None):
        super().__init__(message)
        self.left = left or KindRemaining()


NamespaceUpdate = Callable[[core_pb2.Namespace], Awaitable[core_pb2.Namespace]]


def resource_name(kind: Kind[Message, Message]) -> str:
    """``pods.`` / ``replicasets.apps``: a kind as the conditions' messages name it (resource.group)."""
    return f"{kind.plural}.{kind.group}"


def gvr_string(kind: Kind[Message, Message]) -> str:
    """A kind as Go prints a schema.GroupVersionResource with %v: ``{ v1 pods}``, ``{apps v1 replicasets}``."""
    version = kind.api_version.rpartition("/")[2]
    return f"{{{kind.group} {version} {kind.plural}}}"


class ConditionUpdater:
    """Kubernetes' namespaceConditionUpdater: the pass's failures and remains as conditions.

    Each pass writes the namespace's conditions ``NamespaceDeletionDiscoveryFailure``,
    ``NamespaceDeletionGroupVersionParsingFailure``, ``NamespaceDeletionContentFailure``,
    ``NamespaceContentRemaining`` and ``NamespaceFinalizersRemaining``, each False with its "all is
    well" reason or True with what went wrong or what remains ("Some resources are remaining: pods.
    has 2 resource instances").
    """

    def __init__(self) -> None:
        self.new: dict[str, core_pb2.NamespaceCondition] = {}
        self.content_errors: list[str] = []

    def _failed(self, type_: str, reason: str, message: str) -> None:
        self.new[type_] = core_pb2.NamespaceCondition(type=type_, status="True", reason=reason, message=message,
                                                      last_transition_time=timeutil.rfc3339())

    def discovery_failed(self, message: str) -> None:
        self._failed(DISCOVERY_FAILURE, "DiscoveryFailed", message)

    def delete_content_failed(self, error: str) -> None:
        self.content_errors.append(error)

    def content_totals(self, remaining: dict[str, int], finalizers: dict[str, int]) -> None:
        """Kubernetes' ProcessContentTotals: what remains, by resource and by finalizer, sorted."""
        if remaining:
            items = sorted(f"{name} has {n} resource instances" for name, n in remaining.items() if n)
            self._failed(CONTENT_REMAINING, "SomeResourcesRemain", f"Some resources are remaining: {', '.join(items)}")
        if finalizers:
            items = sorted(f"{name} in {n} resource instances" for name, n in finalizers.items() if n)
            self._failed(FINALIZERS_REMAINING, "SomeFinalizersRemain",
                         f"Some content in the namespace has finalizers remaining: {', '.join(items)}")

    def update(self, status: core_pb2.NamespaceStatus) -> bool:
        """Kubernetes' Update/updateConditions: every condition type set (failing, or its "all is
        well" variant); lastTransitionTime moves only when the status does. True if anything changed."""
        if CONTENT_FAILURE not in self.new and self.content_errors:
            errs = sorted(self.content_errors)
            self._failed(CONTENT_FAILURE, "ContentDeletionFailed",
                         f"Failed to delete all resource types, {len(errs)} remaining: {', '.join(errs)}")
        changed = False
        for type_, (reason, message) in OK_CONDITIONS.items():
            want = self.new.get(type_) or core_pb2.NamespaceCondition(
                type=type_, status="False", reason=reason, message=message, last_transition_time=timeutil.rfc3339())
            old = next((c for c in status.conditions if c.type == type_), None)
            if old is None:
                status.conditions.append(want)
                changed = True
            elif (old.status, old.reason, old.message) != (want.status, want.reason, want.message):
                if old.status != want.status:
                    old.last_transition_time = timeutil.rfc3339()
                old.status, old.reason, old.message = want.status, want.reason, want.message
                changed = True
        return changed


def _aggregate(errs: list[str]) -> str:
    """apimachinery's NewAggregate(...).Error(): one message, or ``[a, b]``."""
    return errs[0] if len(errs) == 1 else f"[{', '.join(errs)}]"


class NamespaceController(ObjectController):
    name = "namespace"
    # Content not gone when it should be (a pod past its grace period, say): the pass is retried.
    expected_errors = (ContentError,)

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client: Client = ctx.client
        self._namespaces = ctx.informers.informer(NAMESPACE)
        self._namespaces.add_handler(self._namespace_changed, lambda old, new: self._namespace_changed(new))
        # Every namespaced kind the apiserver serves: the content a namespace's deletion removes.
        self.content_kinds = [k for k in KINDS if k.namespaced]
        for kind in self.content_kinds:
            ctx.informers.informer(kind).add_handler(on_delete=functools.partial(self._content_deleted, kind))

    def _namespace_changed(self, ns: core_pb2.Namespace) -> None:
        if ns.metadata.deletion_timestamp:
            self.enqueue_key(ns.metadata.name, after=DELETION_GRACE_PERIOD)

    def _content_deleted(self, kind: Kind[Message, Message], obj: Message) -> None:
        """kplane's addition: a Terminating namespace is looked at again as soon as its content goes,
        rather than only when its estimate says (Kubernetes waits for the estimate)."""
        ns = self._namespaces.get(object_meta(obj).namespace)
        if ns is not None and ns.metadata.deletion_timestamp:
            self.enqueue_key(ns.metadata.name, after=0.5)

    async def sync(self, key: str) -> None:
        """Kubernetes' syncNamespaceFromKey and worker: content remaining is looked at again after
        half its estimate plus a second (and, kplane's addition, as soon as an informer shows an
        object of a Terminating namespace deleted: ``_content_deleted``); any other failure is
        retried rate-limited."""
        if self._namespaces.get(key) is None:
            return  # gone
        try:
            await self.delete(key)
        except ResourcesRemaining as r:
            wait = r.estimate // 2 + 1
            log.info("namespace_content_remaining", namespace=key, estimate=r.estimate, wait=wait)
            self.enqueue_key(key, after=wait)

    # ------------------------------------------------------------ Kubernetes' namespacedResourcesDeleter

    async def delete(self, name: str) -> None:
        """Delete the namespace's content, then remove this controller's finalizer; raises
        ResourcesRemaining while content is still going.

        As Kubernetes' namespacedResourcesDeleter: every namespaced kind the apiserver serves is
        listed in the namespace, each object deleted and the kind listed again
        (``_delete_content_of``); each pass writes the namespace's conditions (``ConditionUpdater``);
        while objects remain, the namespace waits; once nothing remains, the ``kubernetes`` finalizer
        is taken out of ``spec.finalizers`` through the namespace's ``finalize`` subresource
        (``_finalize``), and the apiserver removes the namespace.
        """
        try:
            ns = await self._client.namespaces.get(name)
        except errors.NotFound:
            return
        if not ns.metadata.deletion_timestamp:
            return
        try:
            ns = await self._retry_on_conflict(ns, self._update_phase)
        except errors.NotFound:
            return
        if not ns.metadata.deletion_timestamp or not ns.spec.finalizers:
            return  # no longer deleting, or finalized already
        estimate = await self._delete_all_content(ns)
        if estimate > 0:
            raise ResourcesRemaining(estimate)
        try:
            await self._retry_on_conflict(ns, self._finalize)
        except errors.NotFound:
            return
        log.info("namespace_finalized", namespace=name)

    async def _retry_on_conflict(self, ns: core_pb2.Namespace, fn: NamespaceUpdate) -> core_pb2.Namespace:
        """Kubernetes' retryOnConflictError: ``fn`` again on the latest namespace after a conflict,
        unless the namespace was replaced by another of the same name."""
        uid = ns.metadata.uid

        async def latest() -> core_pb2.Namespace:
            fresh = await self._client.namespaces.get(ns.metadata.name)
            if fresh.metadata.uid != uid:
                raise _Replaced()
            return fresh

        try:
            return await retry_update(ns, latest, fn, RETRY_ON_CONFLICT)
        except _Replaced:
            raise errors.Conflict("namespace uid has changed across retries") from None

    async def _update_phase(self, ns: core_pb2.Namespace) -> core_pb2.Namespace:
        """Kubernetes' updateNamespaceStatusFunc: Terminating (kplane's apiserver sets it with the
        deletionTimestamp already, so this is a no-op there)."""
        if not ns.metadata.deletion_timestamp or ns.status.phase == "Terminating":
            return ns
        new = core_pb2.Namespace()
        new.CopyFrom(ns)
        new.status.phase = "Terminating"
        return await self._client.namespaces.update_status(new)

    async def _finalize(self, ns: core_pb2.Namespace) -> core_pb2.Namespace:
        """Kubernetes' finalizeNamespace: spec.finalizers without ``kubernetes``, sorted, through the
        finalize subresource (the namespace is removed when none is left)."""
        new = core_pb2.Namespace()
        new.CopyFrom(ns)
        kept = sorted({f for f in ns.spec.finalizers if f != FINALIZER_KUBERNETES})
        del new.spec.finalizers[:]
        new.spec.finalizers.extend(kept)
        try:
            return await self._client.namespaces.finalize(new)
        except errors.NotFound:
            return ns

    async def _delete_all_content(self, ns: core_pb2.Namespace) -> int:
        """Kubernetes' deleteAllContent: every kind's content deleted, the conditions written; the
        estimate in seconds (0: nothing remains). Raises when some kind could not be deleted."""
        name = ns.metadata.name
        deleted_at = timeutil.parse(ns.metadata.deletion_timestamp)
        since = time.time() - deleted_at.timestamp() if deleted_at is not None else 0.0
        updater = ConditionUpdater()
        errs: list[str] = []
        estimate = 0
        remaining: dict[str, int] = {}
        finalizers: dict[str, int] = {}
        for kind in self.content_kinds:
            try:
                left = await self._delete_content_of(kind, name, since)
            except ContentError as exc:
                errs.append(str(exc))
                updater.delete_content_failed(str(exc))
                left = exc.left
            except errors.ApiError as exc:
                errs.append(exc.message)
                updater.delete_content_failed(exc.message)
                left = KindRemaining()
            estimate = max(estimate, left.estimate)
            if left.remaining > 0:
                remaining[resource_name(kind)] = left.remaining
                for f, n in left.finalizers.items():
                    finalizers[f] = finalizers.get(f, 0) + n
        updater.content_totals(remaining, finalizers)
        # Always written: a condition that was failing and is not any more must say so.
        if updater.update(ns.status):
            try:
                await self._client.namespaces.update_status(ns)
            except errors.ApiError as exc:
                log.info("namespace_conditions_not_written", namespace=name, error=exc.message)
        if errs:
            raise ContentError(_aggregate(errs))
        log.info("namespace_content_deleted", namespace=name, estimate=estimate, remaining=remaining)
        return estimate

    async def _delete_content_of(self, kind: Kind[Message, Message], namespace: str, since: float) -> KindRemaining:
        """Kubernetes' deleteAllContentForGroupVersionResource: each object deleted (kplane has no
        DeleteCollection: Kubernetes' deleteEachItem), then what is left counted.

        Objects are deleted with propagation Background, so the garbage collector puts no orphan
        finalizer in the way; pods gracefully, with their own grace period. While objects remain,
        the namespace waits: for pods, the longest ``terminationGracePeriodSeconds`` of its running
        pods (``_estimate_for_pods``) counted from the namespace's deletion (``since``); for objects
        held by finalizers, 15 s (``FINALIZER_ESTIMATE_SECONDS``).
        """
        estimate = 0
        rc = self._client.resource(kind)
        if kind is POD:
            estimate = await self._estimate_for_pods(namespace)
            if since >= estimate:
                estimate = 0
        for obj in list_accessor(kind, await rc.list(namespace)).items:
            try:
                await rc.delete(object_meta(obj).name, namespace, propagation_policy="Background")
            except (errors.NotFound, errors.MethodNotAllowed):
                pass
        left = list_accessor(kind, await rc.list(namespace)).items
        if not left:
            return KindRemaining()
        held: dict[str, int] = {}
        for obj in left:
            for f in object_meta(obj).finalizers:
                held[f] = held.get(f, 0) + 1
        if estimate:
            return KindRemaining(estimate, len(left), held)
        if held:
            return KindRemaining(FINALIZER_ESTIMATE_SECONDS, len(left), held)
        raise ContentError(f"unexpected items still remain in namespace: {namespace} for gvr: {gvr_string(kind)}",
                           KindRemaining(estimate, len(left)))

    async def _estimate_for_pods(self, namespace: str) -> int:
        """Kubernetes' estimateGracefulTerminationForPods: the longest grace period of the pods
        not yet Succeeded or Failed."""
        estimate = 0
        for pod in (await self._client.pods.list(namespace)).items:
            if pod.status.phase in ("Succeeded", "Failed"):
                continue
            if pod.spec.HasField("termination_grace_period_seconds"):
                estimate = max(estimate, pod.spec.termination_grace_period_seconds)
        return estimate

