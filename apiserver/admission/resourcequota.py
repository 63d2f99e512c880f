"""ResourceQuota admission (Kubernetes' plugin/pkg/admission/resourcequota), the last validating step.

On the create of any object quota counts (``machinery.quota``: pods by their resources, every other
namespaced kind but Events by number) and on a pod's ``resize`` subresource, each ResourceQuota of
the namespace that matches the object is checked and charged.

- ``check_request`` (Kubernetes' CheckRequest): which quotas match, and the check against them;
- ``ResourceQuotaAdmission.charge``: the charge, written at once, and its retries on a conflict.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Sequence
from datetime import datetime
from typing import Final

from google.protobuf.message import Message

from apiserver import strategy
from apiserver.admission.interfaces import Attributes, Operation
from apiserver.admission.storage import AdmissionStorage
from machinery import errors, quota, timeutil
from machinery.api import core_pb2
from machinery.kinds import POD, RESOURCE_QUOTA, Kind, object_meta

RETRIES: Final = 3


def _forbidden(evaluator: quota.Evaluator, name: str, why: str) -> errors.Forbidden:
    return errors.Forbidden(f'{evaluator.resource} "{name}" is forbidden: {why}')


def check_request(quotas: Sequence[core_pb2.ResourceQuota], evaluator: quota.Evaluator, obj: Message,
                  old: Message | None, now: datetime) -> list[core_pb2.ResourceQuota]:
    """Kubernetes' CheckRequest: the quotas ``obj`` changes, with their new ``status.used`` (an
    empty list if it changes none); raises Forbidden when ``obj`` may not be admitted. ``old`` is
    the stored object of an update (a resize), None for a create.

    Each ResourceQuota of the namespace that matches the object (``quota.matches``: it limits
    something the object's evaluator accounts, going by ``status.hard``, and its scopes select the
    object) is checked:

    - a pod must name the requests/limits the quota tracks (``failed quota: q: must specify
      requests.cpu for: c1``), and every tracked resource must have a ``status.used``
      (``status unknown for quota: q, resources: requests.cpu``);
    - the object's usage — on a resize, its increase over what the pod already counts (KEP-1287
      "Resource Quota": each container at the largest of desired, allocated and actual), floored at
      zero per resource — added to ``status.used`` must stay within ``status.hard``, else
      ``exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=1500m, limited:
      requests.cpu=2``, resources sorted and comma-joined, only those exceeded.

    **A quota never observed by the controller** (empty ``status.hard``, as every quota is when
    created) matches nothing, so it refuses nothing until the resourcequota controller has written
    its status — what Kubernetes does; the controller corrects ``status.used`` later in any case (an
    object that was charged but then not stored, a pod that finished)."""
    name = object_meta(obj).name
    interesting = []
    for q in quotas:
        if not quota.matches(evaluator, q, obj):
            continue
        restricted = evaluator.matching_resources(q.status.hard)
        why = evaluator.constraints(restricted, obj)
        if why is not None:
            raise _forbidden(evaluator, name, f"failed quota: {q.metadata.name}: {why}")
        unknown = sorted(r for r in restricted if r not in q.status.used)
        if unknown:
            raise _forbidden(evaluator, name, f"status unknown for quota: {q.metadata.name}, "
                                              f"resources: {','.join(sorted(restricted))}")
        interesting.append(q)
    delta = evaluator.usage(obj, now)
    below_zero = quota.negative(delta)
    if below_zero:
        raise _forbidden(evaluator, name, f"quota usage is negative for resource(s): {','.join(below_zero)}")
    if old is not None and object_meta(old).resource_version:
        delta = quota.subtract_non_negative(delta, evaluator.usage(old, now))
    if quota.is_zero(delta) or not interesting:
        return []
    out = []
    for q in interesting:
        hard = quota.parse_list(q.status.hard)
        used = quota.parse_list(q.status.used)
        requested = quota.mask(delta, hard)
        new_used = quota.add(used, requested)
        over = quota.exceeded(quota.mask(new_used, requested), hard)
        if over:
            raise _forbidden(evaluator, name, f"exceeded quota: {q.metadata.name}, requested: "
                                              f"{quota.pretty(quota.mask(requested, over))}, used: "
                                              f"{quota.pretty(quota.mask(used, over))}, limited: "
                                              f"{quota.pretty(quota.mask(hard, over))}")
        if not quota.equals(new_used, used):
            charged = strategy.copy(q)
            charged.status.used.clear()
            charged.status.used.update(quota.to_strings(new_used))
            out.append(charged)
    return out


class ResourceQuotaAdmission:
    """The plugin: reads the namespace's quotas from the watch cache and charges them in etcd, the
    last step before the write. It charges creates of every kind it has an evaluator for, and a
    pod's resize (its increase)."""

    name = "ResourceQuota"

    def __init__(self, registry: AdmissionStorage):
        self._registry = registry
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def _quotas(self, namespace: str) -> list[core_pb2.ResourceQuota]:
        prefix = RESOURCE_QUOTA.prefix(namespace)
        store = self._registry.cache[RESOURCE_QUOTA].store
        return [store[k] for k in sorted(store) if k.startswith(prefix)]

    async def validate(self, a: Attributes) -> None:
        if a.object is None:
            return
        if a.operation is Operation.CREATE and not a.subresource:
            await self.charge(a.kind, a.object, dry_run=a.dry_run)
        elif a.operation is Operation.UPDATE and a.subresource == "resize" and a.kind is POD:
            await self.charge(POD, a.object, a.old_object, dry_run=a.dry_run)

    async def charge(self, kind: Kind[Message, Message], obj: Message, old: Message | None = None, *,
                     dry_run: bool = False) -> None:
        """Check ``obj`` (created, or a resize of ``old``) against its namespace's quotas and
        charge them; raise Forbidden (or Conflict after the retries) if it may not be admitted.

        An admitted request charges each quota it changes at once: ``status.used`` is written with
        the quota's resourceVersion as precondition, so two apiserver requests can never both spend
        the last of a quota; on a conflict the quotas that failed are read again from etcd and
        checked again (three retries, as Kubernetes), then the conflict is the answer. Requests of
        one namespace are checked one at a time (Kubernetes' evaluator also works a namespace's
        requests in one worker), so within this apiserver they do not even conflict. A dry run is
        checked and charges nothing."""
        evaluator = quota.evaluator_for(kind)
        if evaluator is None:
            return
        namespace = object_meta(obj).namespace
        await self._registry.caught_up(RESOURCE_QUOTA)  # the latest quota writes, ours included
        if not self._quotas(namespace):
            return
        lock = self._locks.get(namespace)
        if lock is None:
            lock = self._locks[namespace] = asyncio.Lock()
        async with lock:
            await self._registry.caught_up(RESOURCE_QUOTA)
            quotas = self._quotas(namespace)
            for attempt in range(RETRIES + 1):
                if not quotas:
                    return
                charged = check_request(quotas, evaluator, obj, old, timeutil.now())
                if dry_run or not charged:
                    return
                failed = await self._charge(charged)
                if not failed:
                    return
                if attempt == RETRIES:
                    raise errors.conflict(RESOURCE_QUOTA.plural, failed[-1].metadata.name)
                fresh = [await self._registry.read(RESOURCE_QUOTA, namespace, q.metadata.name, fresh=True)
                         for q in failed]
                quotas = [q for q in fresh if q is not None]  # a deleted quota limits no more

    async def _charge(self, charged: Sequence[core_pb2.ResourceQuota]) -> list[core_pb2.ResourceQuota]:
        """Write each quota's new ``status.used`` against the version it was computed from; the
        quotas whose version had changed."""
        failed = []
        for q in charged:
            meta = q.metadata

            def with_used(stored: core_pb2.ResourceQuota, q: core_pb2.ResourceQuota = q) -> core_pb2.ResourceQuota:
                stored.status.used.clear()
                stored.status.used.update(q.status.used)
                return stored

            try:
                await self._registry.guaranteed_update(RESOURCE_QUOTA, meta.namespace, meta.name, with_used,
                                                       precondition_rv=meta.resource_version)
            except errors.Conflict:
                failed.append(q)
            except errors.NotFound:
                pass  # deleted meanwhile: it limits no more
        return failed
