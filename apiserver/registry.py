"""Kubernetes' verbs over etcd, for every kind: create, get, list, update, status, patch, delete.

Writes are optimistic: an update is a compare-and-swap on the object's etcd mod_revision (its
resourceVersion). A write that changes nothing is not written (no new revision), as Kubernetes
skips no-op updates. Reads of the current object start from the watch cache and fall back to
etcd when the cache is behind. Deletion honours finalizers and, for pods, grace periods
(``pods.grace_period``); an object marked for deletion goes away when its last finalizer is
removed and its grace period is 0. A delete's ``propagationPolicy`` becomes the garbage
collector's finalizers as Kubernetes' generic store makes them (``deletion_finalizers``):
Orphan adds ``orphan``, Foreground ``foregroundDeletion``, Background neither, so the object
waits for the garbage collector in the first two cases. A namespace's first delete marks it
Terminating; it goes once its spec.finalizers are empty too (Kubernetes' namespace storage).
Creates of namespaced objects pass namespace lifecycle admission (``admission.namespacelifecycle``).

A write made for a client names its field manager (``field_manager``): its fields are recorded in
metadata.managedFields (``apiserver.fieldmanager``), and a patch of type ``apply`` is server-side
apply (``apply``). The apiserver's own writes (admission's quota charges, bindings, deletions) are
recorded under no manager, as Kubernetes' storage-level writes are not.
"""

from __future__ import annotations

import base64
import builtins
import json
import random
from typing import Any, Callable, Protocol

from google.protobuf.message import Message
from prometheus_client import Counter

from apiserver import strategy
from apiserver.admission.interfaces import AdmissionChain, Attributes, Operation
from apiserver.admission.storage import AdmissionStorage
from apiserver.auth import User
from apiserver.etcd import CompactedError, EtcdClient
from apiserver.fieldmanager import FieldManager, Manager, validate_manager
from apiserver.watchcache import WatchCache
from machinery import errors, jsonconv, patch, selectors, timeutil
from machinery.api import meta_pb2
from machinery.featuregates import FeatureGates
from machinery.kinds import Kind, L, M, list_accessor, object_meta

MAX_RETRIES = 8
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"

CONSISTENT_READ_WAIT = 3.0  # seconds a consistent list waits for the watch cache (Kubernetes' blockTimeout)
_CONSISTENT_READS = Counter("apiserver_watch_cache_consistent_read_total",
                            "Counter for consistent reads from cache.", ["fallback", "resource", "success"])

# The garbage collector's finalizers (metav1.FinalizerOrphanDependents, FinalizerDeleteDependents)
# and DeleteOptions' propagation policies.
FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"
ORPHAN, BACKGROUND, FOREGROUND = "Orphan", "Background", "Foreground"

Build = Callable[[M], M]
# (the new object, the stored one) -> the write as admission sees it.
AttributesFor = Callable[[M, M], Attributes]
# (the admitted object, the stored one) -> the object to store: the kind's strategy (defaults,
# resets, validation; raises Invalid).
Prepare = Callable[[M, M], M]
# (the kind's object, the requested grace period) -> seconds; registered per kind name, so the
# object's type is the kind's (pods.grace_period takes a Pod).
GracePeriodFn = Callable[[Any, int | None], int]


class DeletionRules(Protocol):
    """A kind whose delete does more than the generic one (Kubernetes: a kind's own REST storage
    wrapping the generic store's Delete, as the namespace's does)."""

    def marks_only(self, obj: Any) -> bool:
        """Whether a delete of ``obj`` now only marks it (deletionTimestamp and ``mark``) and keeps it."""
        ...

    def mark(self, obj: Any) -> None:
        """What the kind adds to the mark (a namespace's phase Terminating)."""
        ...

    def removable(self, obj: Any) -> bool:
        """Whether an object marked for deletion may go once its finalizers are gone (a namespace:
        once its spec.finalizers are gone too)."""
        ...


def encode(obj: Message) -> bytes:
    """The stored form: the object without its resourceVersion (which is etcd's mod_revision)."""
    meta = object_meta(obj)
    rv = meta.resource_version
    meta.resource_version = ""
    try:
        return obj.SerializeToString(deterministic=True)
    finally:
        meta.resource_version = rv


def _generate_name(prefix: str) -> str:
    return prefix + "".join(random.choice(_NAME_CHARS) for _ in range(5))


class Registry:
    def __init__(self, etcd: EtcdClient, cache: WatchCache,
                 admission: Callable[[AdmissionStorage], AdmissionChain] = lambda storage: AdmissionChain([]),
                 gates: FeatureGates = strategy.DEFAULT_GATES):
        self.etcd = etcd
        self.cache = cache
        self.gates = gates  # the strategies drop the fields of disabled gates
        # Set by the server: pods.grace_period(obj, requested) for kinds with graceful deletion.
        self.grace_periods: dict[str, GracePeriodFn] = {}
        # Set by the server: a kind's own deletion rules (namespaces.NamespaceDeletion).
        self.deletion_rules: dict[str, DeletionRules] = {}
        self.fields = FieldManager()
        # Every write passes it (apiserver/admission/chain.py builds the apiserver's).
        self.admission = admission(self)
        self._written: dict[str, int] = {}  # kind plural -> the revision of this apiserver's last write

    # ------------------------------------------------------------ read your writes

    def _wrote(self, kind: Kind[Message, Message], rev: int) -> None:
        if rev > self._written.get(kind.plural, 0):
            self._written[kind.plural] = rev

    async def caught_up_with_etcd(self) -> None:
        """Wait until the watch cache has reached etcd's current revision."""
        await self.cache.wait_for(await self.etcd.current_revision())

    async def caught_up(self, kind: Kind[Message, Message]) -> None:
        """Wait until the watch cache has seen this apiserver's last write of ``kind`` (admission
        reads LimitRanges and ResourceQuotas from the cache right after they were written)."""
        rev = self._written.get(kind.plural, 0)
        if self.cache.rev < rev:
            await self.cache.wait_for(rev)

    # ------------------------------------------------------------ reads

    def _namespace(self, kind: Kind[Message, Message], namespace: str) -> str:
        if not kind.namespaced:
            return ""
        return namespace or "default"

    async def read(self, kind: Kind[M, L], namespace: str, name: str, fresh: bool = False) -> M | None:
        """A private copy of the current object: from the cache, or from etcd if ``fresh``."""
        namespace = self._namespace(kind, namespace)
        if not fresh:
            cached = self.cache[kind].get(namespace, name)
            if cached is not None:
                return strategy.copy(cached)
        kv, _ = await self.etcd.get(kind.key(namespace, name), kind.plural)
        if kv is None:
            return None
        obj = kind.message.FromString(kv.value)
        object_meta(obj).resource_version = str(kv.mod_revision)
        return obj

    async def get(self, kind: Kind[M, L], namespace: str, name: str) -> M:
        obj = await self.read(kind, namespace, name, fresh=True)
        if obj is None:
            raise errors.not_found(kind.plural, name)
        return obj

    async def list(self, kind: Kind[M, L], req: meta_pb2.ListRequest, exact: bool = False) -> L:
        """The objects selected, at the watch cache's revision once it has reached the one asked
        for ("": etcd's current, a consistent read — from etcd if the cache lags, see
        ``_consistent_read``; "0": any) — or, ``exact`` (Kubernetes' resourceVersionMatch=Exact),
        as they were at that very revision, read from etcd's history."""
        try:
            labels = selectors.parse_label_selector(req.label_selector)
            fields = selectors.parse_field_selector(req.field_selector, kind.name, kind.message.DESCRIPTOR)
        except selectors.SelectorError as exc:
            raise errors.BadRequest(str(exc)) from None
        rv = req.resource_version
        namespace = req.namespace if kind.namespaced else ""
        from_etcd = 0  # a revision to read from etcd instead of the cache
        if rv == "":
            from_etcd = await self._consistent_read(kind)
        elif rv != "0":
            try:
                await self.cache.wait_for(int(rv))
            except ValueError:
                raise errors.BadRequest(f'invalid resource version "{rv}"') from None
        at = self.cache.rev
        if exact:
            at = int(rv)
            items = await self._list_at(kind, namespace, labels, fields, at)
        elif from_etcd:
            at = from_etcd
            items = await self._list_at(kind, namespace, labels, fields, at)
        else:
            items = self.cache[kind].select(namespace, labels, fields)
        out = kind.list_message(api_version=kind.api_version, kind=f"{kind.name}List")
        lst = list_accessor(kind, out)
        lst.metadata.resource_version = str(at)
        if req.limit > 0:
            start = 0
            if req.continue_token:
                try:
                    last_key = json.loads(base64.urlsafe_b64decode(req.continue_token))["k"]
                except (ValueError, KeyError, TypeError):
                    raise errors.BadRequest("invalid continue token") from None
                keys = [kind.key(m.namespace, m.name) for m in map(object_meta, items)]
                start = next((i for i, k in enumerate(keys) if k > last_key), len(items))
            page = items[start:start + req.limit]
            if start + req.limit < len(items):
                last = object_meta(page[-1])
                token = {"k": kind.key(last.namespace, last.name)}
                lst.metadata.continue_token = base64.urlsafe_b64encode(json.dumps(token).encode()).decode()
                lst.metadata.remaining_item_count = len(items) - start - req.limit
            items = page
        lst.items.extend(items)
        return out

    async def _consistent_read(self, kind: Kind[M, L]) -> int:
        """A list at resourceVersion "" is a consistent read (Kubernetes' ConsistentListFromCache):
        etcd's current revision is asked for, and the watch cache serves the list once it has
        caught up with it. A cache still behind after ``CONSISTENT_READ_WAIT`` seconds does not
        fail the list: 0 is returned when the cache may serve it, else the revision at which to
        read it from etcd instead (Kubernetes' fallback)."""
        current = await self.etcd.current_revision()
        try:
            await self.cache.wait_for(current, timeout=CONSISTENT_READ_WAIT)
        except errors.Timeout:
            _CONSISTENT_READS.labels("true", kind.plural, "true").inc()
            return current
        _CONSISTENT_READS.labels("false", kind.plural, "true").inc()
        return 0

    async def _list_at(self, kind: Kind[M, L], namespace: str, labels: selectors.LabelSelector,
                       fields: selectors.FieldSelector, rev: int) -> builtins.list[M]:
        try:
            kvs, _, _ = await self.etcd.list(kind.prefix(namespace), revision=rev, type_=kind.plural)
        except CompactedError:
            raise errors.Gone("The resourceVersion for the provided list is too old.") from None
        out = []
        for kv in kvs:
            obj = kind.message.FromString(kv.value)
            meta = object_meta(obj)
            meta.resource_version = str(kv.mod_revision)
            if (labels.empty or labels.matches(meta.labels)) and (fields.empty or fields.matches(obj)):
                out.append(obj)
        return out

    # ------------------------------------------------------------ create

    async def create(self, kind: Kind[M, L], obj: M, user: User, dry_run: bool = False,
                     field_manager: str | None = None) -> M:
        """Create ``obj``; ``field_manager`` owns its fields as requested and defaulted (None: its
        managedFields stay as given)."""
        requested = obj
        obj = strategy.copy(obj)
        meta = object_meta(obj)
        meta.namespace = self._namespace(kind, meta.namespace)
        if meta.resource_version:
            raise errors.BadRequest("resourceVersion should not be set on objects to be created")
        generated = not meta.name and bool(meta.generate_name)
        if generated:
            meta.name = _generate_name(meta.generate_name)
        if not meta.name:
            raise errors.Invalid.of(kind.name, "",
                                    [errors.required("metadata.name", "name or generateName is required")])
        attrs = Attributes(Operation.CREATE, kind, "", meta.namespace, meta.name, obj, None, user, dry_run)
        await self.admission.admit(attrs)
        strategy.prepare_for_create(kind, obj, self.gates)
        if field_manager is not None:
            self.fields.created(kind, requested, obj, Manager(field_manager), strategy.defaulted_request)
        await self.admission.validate(attrs)
        if dry_run:
            return obj
        for _ in range(MAX_RETRIES if generated else 1):
            rev = await self.etcd.create(kind.key(meta.namespace, meta.name), encode(obj), kind.plural)
            if rev is not None:
                meta.resource_version = str(rev)
                self._wrote(kind, rev)
                return obj
            if generated:
                meta.name = _generate_name(meta.generate_name)
        raise errors.already_exists(kind.plural, meta.name)

    # ------------------------------------------------------------ updates

    async def guaranteed_update(self, kind: Kind[M, L], namespace: str, name: str, build: Build[M], *,
                                precondition_rv: str = "", dry_run: bool = False,
                                attributes: AttributesFor[M] | None = None, prepare: Prepare[M] | None = None,
                                manager: Manager | None = None) -> M:
        """Read the current object, ``build`` the new one from it, compare-and-swap; retry on races.

        ``build`` gets a private copy of the stored object and returns the object requested (it
        may raise an ApiError). With ``precondition_rv`` the stored version must be that one.
        A write made for a client says what it is to admission (``attributes``): the chain's
        mutating plugins run on what ``build`` made, then ``prepare`` (the kind's strategy), then,
        when something changes, the validating plugins — dry runs included, all inside the retry
        loop, as Kubernetes runs admission inside its GuaranteedUpdate. ``manager``, if given, is
        recorded as the owner of what the write changes (an Update in managedFields). The
        apiserver's own writes (a quota's charge, a budget's status) pass no ``attributes``.
        """
        namespace = self._namespace(kind, namespace)
        key = kind.key(namespace, name)
        fresh = False
        for _ in range(MAX_RETRIES):
            old = await self.read(kind, namespace, name, fresh)
            if old is None:
                if not fresh:
                    fresh = True
                    continue
                raise errors.not_found(kind.plural, name)
            old_meta = object_meta(old)
            if precondition_rv and old_meta.resource_version != precondition_rv:
                if not fresh:
                    fresh = True
                    continue
                raise errors.conflict(kind.plural, name)
            new = build(strategy.copy(old))
            attrs = attributes(new, old) if attributes is not None else None
            if attrs is not None:
                await self.admission.admit(attrs)
            if prepare is not None:
                new = prepare(new, old)
            new_meta = object_meta(new)
            new_meta.resource_version = old_meta.resource_version
            if manager is not None:
                self.fields.update(kind, old, new, manager)
            new_bytes = encode(new)
            if new_bytes == encode(old):
                return old
            if attrs is not None:
                attrs.object = new
                await self.admission.validate(attrs)
            if dry_run:
                return new
            if self.removal_due(kind, new):
                # The last finalizer is gone from an object whose deletion is due: delete it.
                ok, rev = await self.etcd.delete(key, int(old_meta.resource_version), kind.plural)
            else:
                ok, rev = await self.etcd.update(key, new_bytes, int(old_meta.resource_version), kind.plural)
            if ok:
                new_meta.resource_version = str(rev)
                self._wrote(kind, rev)
                return new
            if precondition_rv:
                raise errors.conflict(kind.plural, name)
            fresh = True
        raise errors.conflict(kind.plural, name, "too many concurrent writers; try again")

    def writes(self, kind: Kind[M, L], subresource: str, user: User, dry_run: bool) -> AttributesFor[M]:
        """The ``attributes`` of an update of ``kind`` (or of its ``subresource``) for ``user``."""
        def attributes(new: M, old: M) -> Attributes:
            meta = object_meta(old)
            return Attributes(Operation.UPDATE, kind, subresource, meta.namespace, meta.name, new, old, user, dry_run)
        return attributes

    async def update(self, kind: Kind[M, L], obj: M, user: User, dry_run: bool = False,
                     subresource: str = "", field_manager: str | None = None) -> M:
        """Update (``subresource`` "") or status update ("status") from a full object, recorded
        under ``field_manager``."""
        meta = object_meta(obj)
        namespace = self._namespace(kind, meta.namespace)
        if subresource == "status" and not kind.has_status:
            raise errors.MethodNotAllowed(f"{kind.plural} have no status subresource")

        def build(old: M) -> M:
            new = strategy.copy(obj)
            new_meta = object_meta(new)
            new_meta.namespace = namespace
            if new_meta.name != object_meta(old).name:
                raise errors.BadRequest("the name of the object does not match the name on the URL")
            return new

        return await self.guaranteed_update(kind, namespace, meta.name, build,
                                            precondition_rv=meta.resource_version, dry_run=dry_run,
                                            attributes=self.writes(kind, subresource, user, dry_run),
                                            prepare=strategy_for_update(kind, subresource, self.gates),
                                            manager=_manager(field_manager, subresource))

    async def patch(self, kind: Kind[M, L], req: meta_pb2.PatchRequest, user: User, dry_run: bool = False,
                    unknown: builtins.list[str] | None = None, field_manager: str | None = None) -> M:
        """Server-side patch: applied to the current object, then stored as an update would be,
        recorded under ``req.field_manager`` or else ``field_manager``; type ``apply`` is
        server-side apply (``apply``).

        Fields the patched object has that its kind does not are refused (Kubernetes'
        fieldValidation=Strict), or, given a list ``unknown``, dropped and their paths put there
        (Warn and Ignore)."""
        if req.subresource not in ("", "status"):
            raise errors.BadRequest(f'unknown subresource "{req.subresource}" for {kind.plural}')
        check_patch_options(req)
        document, precondition = parse_patch(req)
        namespace = self._namespace(kind, req.namespace)
        if req.subresource == "status" and not kind.has_status:
            raise errors.MethodNotAllowed(f"{kind.plural} have no status subresource")
        if is_apply(req):
            return await self.apply(kind, req, document, precondition, user, dry_run)

        def build(old: M) -> M:
            return patched(kind, old, document, req.patch_type, unknown)

        return await self.guaranteed_update(kind, namespace, req.name, build, precondition_rv=precondition,
                                            dry_run=dry_run, attributes=self.writes(kind, req.subresource, user,
                                                                                    dry_run),
                                            prepare=strategy_for_update(kind, req.subresource, self.gates),
                                            manager=_manager(req.field_manager or field_manager, req.subresource))

    async def apply(self, kind: Kind[M, L], req: meta_pb2.PatchRequest, document: object, precondition: str,
                    user: User, dry_run: bool = False) -> M:
        """Server-side apply of the configuration ``document`` by ``req.field_manager``: merged into
        the object (created when there is none, unless this is its status), fields the manager no
        longer applies removed, a conflict with another manager's field refused unless ``req.force``.
        A field the kind does not have is refused whatever the fieldValidation, as in Kubernetes."""
        namespace = self._namespace(kind, req.namespace)
        config = applied_configuration(kind, req, document, namespace)
        manager = Manager(req.field_manager, req.subresource)
        force = req.force
        strategy_of = strategy_for_update(kind, req.subresource, self.gates)

        def build(old: M) -> M:
            def prepare(new: M) -> M:
                object_meta(new).resource_version = object_meta(old).resource_version
                return strategy_of(new, old)
            return self.fields.apply(kind, old, config, manager, force, prepare)

        for _ in range(MAX_RETRIES):
            if await self.read(kind, namespace, req.name) is None and await self.read(
                    kind, namespace, req.name, fresh=True) is None:
                if req.subresource:
                    raise errors.not_found(kind.plural, req.name)
                if precondition:
                    raise errors.conflict(kind.plural, req.name)
                obj = self.fields.apply(kind, None, config, manager, force, lambda new: new)
                meta = object_meta(obj)
                meta.name, meta.namespace = req.name, namespace
                try:
                    return await self.create(kind, obj, user, dry_run)
                except errors.AlreadyExists:
                    continue  # created meanwhile: apply to it
            try:
                return await self.guaranteed_update(kind, namespace, req.name, build, precondition_rv=precondition,
                                                    dry_run=dry_run,
                                                    attributes=self.writes(kind, req.subresource, user, dry_run))
            except errors.NotFound:
                if await self.read(kind, namespace, req.name, fresh=True) is not None:
                    raise
        raise errors.conflict(kind.plural, req.name, "too many concurrent writers; try again")

    # ------------------------------------------------------------ delete

    async def delete(self, kind: Kind[M, L], req: meta_pb2.DeleteRequest, user: User, dry_run: bool = False,
                     verb: str = "delete") -> M:
        namespace = self._namespace(kind, req.namespace)
        key = kind.key(namespace, req.name)
        requested = req.grace_period_seconds if req.HasField("grace_period_seconds") else None
        if requested is not None and requested < 0:
            raise errors.Invalid.of(kind.name, req.name, [errors.invalid("gracePeriodSeconds", requested,
                                                                         "must be greater than or equal to 0")])
        policy = req.propagation_policy if req.HasField("propagation_policy") else None
        if policy is not None and policy not in (FOREGROUND, BACKGROUND, ORPHAN):
            raise errors.Invalid.of("DeleteOptions.meta.k8s.io", "", [errors.not_supported(
                "propagationPolicy", policy, (FOREGROUND, BACKGROUND, ORPHAN, "nil"))])
        fresh = False
        for _ in range(MAX_RETRIES):
            old = await self.read(kind, namespace, req.name, fresh)
            if old is None:
                if not fresh:
                    fresh = True
                    continue
                raise errors.not_found(kind.plural, req.name)
            pre = req.preconditions
            meta = object_meta(old)
            if pre.HasField("uid") and pre.uid != meta.uid:
                raise errors.conflict(kind.plural, req.name, f"Precondition failed: UID in precondition: {pre.uid}, "
                                                             f"UID in object meta: {meta.uid}")
            if pre.HasField("resource_version") and pre.resource_version != meta.resource_version:
                if not fresh:
                    fresh = True
                    continue
                raise errors.conflict(kind.plural, req.name, f"Precondition failed: ResourceVersion in precondition: "
                                                             f"{pre.resource_version}, ResourceVersion in object meta: "
                                                             f"{meta.resource_version}")
            attrs = Attributes(Operation.DELETE, kind, "eviction" if verb == "eviction" else "", namespace, req.name,
                               None, old, user, dry_run)
            await self.admission.admit(attrs)
            await self.admission.validate(attrs)
            rules = self.deletion_rules.get(kind.name)
            if rules is not None and rules.marks_only(old):
                marked = await self._mark_deleting(kind, old, key, policy, rules, dry_run)
                if marked is None:
                    fresh = True
                    continue
                return marked
            grace_fn = self.grace_periods.get(kind.name)
            grace = grace_fn(old, requested) if grace_fn else 0
            finalizers = deletion_finalizers(old, policy)
            if grace == 0 and not (meta.finalizers if finalizers is None else finalizers):
                if dry_run:
                    return old
                ok, rev = await self.etcd.delete(key, int(meta.resource_version), kind.plural)
                if ok:
                    meta.resource_version = str(rev)
                    self._wrote(kind, rev)
                    return old
                fresh = True
                continue
            # Graceful (or finalizers pending): mark the object; the last one out deletes it.
            new = strategy.copy(old)
            if finalizers is not None:
                del object_meta(new).finalizers[:]
                object_meta(new).finalizers.extend(finalizers)
            deadline = timeutil.now().timestamp() + grace
            current = timeutil.parse(meta.deletion_timestamp)
            if current is None or deadline < current.timestamp() or (
                    meta.deletion_grace_period_seconds > grace):
                new_meta = object_meta(new)
                new_meta.deletion_timestamp = timeutil.rfc3339(timeutil.now().fromtimestamp(
                    deadline, tz=timeutil.now().tzinfo))
                new_meta.deletion_grace_period_seconds = grace
            if encode(new) == encode(old) or dry_run:
                return new if dry_run else old
            ok, rev = await self.etcd.update(key, encode(new), int(meta.resource_version), kind.plural)
            if ok:
                object_meta(new).resource_version = str(rev)
                self._wrote(kind, rev)
                return new
            fresh = True
        raise errors.conflict(kind.plural, req.name, "too many concurrent writers; try again")


    async def _mark_deleting(self, kind: Kind[M, L], obj: M, key: str, policy: str | None, rules: DeletionRules,
                             dry_run: bool) -> M | None:
        """A delete that only marks: the first sets deletionTimestamp (and the garbage collector's
        finalizer the propagation policy asks for, and the kind's own mark) and keeps the object;
        one already marked is returned as it is. None: the compare-and-swap lost a race (read
        again)."""
        meta = object_meta(obj)
        if meta.deletion_timestamp:
            return obj
        new = strategy.copy(obj)
        object_meta(new).deletion_timestamp = timeutil.rfc3339()
        finalizers = deletion_finalizers(obj, policy)
        if finalizers is not None:
            del object_meta(new).finalizers[:]
            object_meta(new).finalizers.extend(finalizers)
        rules.mark(new)
        if dry_run:
            return new
        ok, rev = await self.etcd.update(key, encode(new), int(meta.resource_version), kind.plural)
        if not ok:
            return None
        object_meta(new).resource_version = str(rev)
        self._wrote(kind, rev)
        return new

    def removal_due(self, kind: Kind[M, L], obj: M) -> bool:
        """Kubernetes' ShouldDeleteDuringUpdate: the object's deletion was asked for, no finalizer
        is left and no grace period remains — and the kind's own rules let it go
        (ShouldDeleteNamespaceDuringUpdate)."""
        meta = object_meta(obj)
        if not meta.deletion_timestamp or meta.finalizers:
            return False
        if meta.HasField("deletion_grace_period_seconds") and meta.deletion_grace_period_seconds != 0:
            return False
        rules = self.deletion_rules.get(kind.name)
        return rules is None or rules.removable(obj)


def deletion_finalizers(obj: Message, policy: str | None) -> list[str] | None:
    """Kubernetes' deletionFinalizersForGarbageCollection: the object's finalizers once a delete
    with ``policy`` is asked for — ``orphan`` for Orphan, ``foregroundDeletion`` for Foreground,
    neither for Background; with no policy, a garbage-collection finalizer the object already has
    decides, else Background. None when they stay as they are.

    Background is the default of every kind kplane serves: apps/v1's ReplicaSet and Deployment
    strategies say so (DeleteDependents; Orphan was the default of extensions/v1beta1 and
    apps/v1beta1/v1beta2 only), and the other kinds have no policy of their own.
    """
    current = list(object_meta(obj).finalizers)
    if policy is None:
        first = next((f for f in current if f in (FINALIZER_ORPHAN, FINALIZER_FOREGROUND)), None)
        policy = {FINALIZER_ORPHAN: ORPHAN, FINALIZER_FOREGROUND: FOREGROUND}.get(first or "", BACKGROUND)
    wanted = [f for f in current if f not in (FINALIZER_ORPHAN, FINALIZER_FOREGROUND)]
    if policy == ORPHAN:
        wanted.append(FINALIZER_ORPHAN)
    elif policy == FOREGROUND:
        wanted.append(FINALIZER_FOREGROUND)
    return None if set(wanted) == set(current) else wanted


def strategy_for_update(kind: Kind[M, L], subresource: str,
                        gates: FeatureGates = strategy.DEFAULT_GATES) -> Prepare[M]:
    """The kind's strategy for an update of the object ("") or of its status ("status")."""
    if subresource == "status":
        return lambda new, old: strategy.prepare_for_status_update(kind, new, old)

    def prepare(new: M, old: M) -> M:
        strategy.prepare_for_update(kind, new, old, gates)
        return new
    return prepare


APPLY = "apply"


def is_apply(req: meta_pb2.PatchRequest) -> bool:
    return req.patch_type.split(";")[0].strip().lower() in (APPLY, "application/apply-patch+yaml")


def _manager(name: str | None, subresource: str = "") -> Manager | None:
    return Manager(name, subresource) if name is not None else None


def check_patch_options(req: meta_pb2.PatchRequest) -> None:
    """Kubernetes' ValidatePatchOptions: an apply names its field manager, only an apply may
    force, a field manager is at most 128 printable bytes."""
    errs: builtins.list[errors.FieldError] = []
    if is_apply(req):
        if not req.field_manager:
            errs.append(errors.required("fieldManager", "is required for apply patch"))
    elif req.HasField("force"):
        errs.append(errors.forbidden("force", "may not be specified for non-apply patch"))
    errs.extend(validate_manager(req.field_manager))
    if errs:
        raise errors.Invalid.of("PatchOptions.meta.k8s.io", "", errs)


def applied_configuration(kind: Kind[M, L], req: meta_pb2.PatchRequest, document: object,
                          namespace: str) -> dict[str, Any]:
    """The configuration of an apply, checked as Kubernetes checks it: an object of the kind at its
    version, naming the object of the URL, without managedFields."""
    if not isinstance(document, dict):
        raise errors.BadRequest("the apply configuration must be an object")
    version = document.get("apiVersion") or ""
    if version != kind.api_version:
        raise errors.BadRequest(f"Incorrect version specified in apply patch. Specified patch version: {version}, "
                                f"expected: {kind.api_version}")
    if document.get("kind") != kind.name:
        raise errors.BadRequest(f"the kind in the apply configuration ({document.get('kind') or ''}) does not match "
                                f"the kind of the URL ({kind.name})")
    meta = document.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise errors.BadRequest("metadata must be an object")
    meta = meta or {}
    if meta.get("managedFields") is not None:
        raise errors.BadRequest("metadata.managedFields must be nil")
    if meta.get("name", req.name) != req.name:
        raise errors.BadRequest(f"the name of the object ({meta.get('name')}) does not match the name on the URL "
                                f"({req.name})")
    if kind.namespaced and meta.get("namespace", namespace) not in (namespace, "", None):
        raise errors.BadRequest(f"the namespace of the object ({meta.get('namespace')}) does not match the namespace "
                                f"on the request ({namespace})")
    return document


def parse_patch(req: meta_pb2.PatchRequest) -> tuple[object, str]:
    """The patch document, and the resourceVersion it requires (metadata.resourceVersion), if any."""
    try:
        document = json.loads(req.patch or "null")
    except ValueError as exc:
        raise errors.BadRequest(f"the patch is not valid JSON: {exc}") from None
    precondition = ""
    if isinstance(document, dict):
        precondition = str((document.get("metadata") or {}).get("resourceVersion") or "")
    return document, precondition


def patched(kind: Kind[M, L], old: M, document: object, patch_type: str, unknown: list[str] | None = None) -> M:
    """The object ``old`` with a patch applied (through Kubernetes JSON). Unknown fields in the
    result are refused, or — given a list ``unknown`` — dropped and their paths put there."""
    patch_type = patch_type or "strategic"
    fields = _top_level_fields(kind, document, patch_type)
    # A merge patch of some top-level fields leaves the others as they are: only those go through
    # JSON (a status patch does not convert the spec back and forth). The result is the same.
    source = old
    if fields is not None:
        source = kind.message()
        for name in fields:
            if old.HasField(name):
                getattr(source, name).CopyFrom(getattr(old, name))
    try:
        result = patch.apply_patch(jsonconv.to_dict(source), document, patch_type, kind.name)
    except patch.PatchError as exc:
        raise errors.BadRequest(str(exc)) from None
    if unknown is not None and isinstance(result, dict):
        result, dropped = jsonconv.prune_unknown(kind.message, result)
        unknown.extend(d for d in dropped if d not in unknown)
    try:
        new = jsonconv.from_dict(kind.message, result)
    except jsonconv.DecodeError as exc:
        raise errors.BadRequest(f"{kind.name} in version \"{kind.api_version}\" cannot be handled as a {kind.name}: "
                                f"{exc}") from None
    if fields is not None:
        part, new = new, strategy.copy(old)
        for name in fields:
            new.ClearField(name)
            if part.HasField(name):
                getattr(new, name).CopyFrom(getattr(part, name))
    new_meta, old_meta = object_meta(new), object_meta(old)
    if new_meta.name != old_meta.name:
        raise errors.BadRequest("the patch may not change metadata.name")
    new_meta.resource_version = old_meta.resource_version
    return new


_MERGE_PATCH_TYPES = {"strategic", "merge"}


def _top_level_fields(kind: Kind[Message, Message], document: object, patch_type: str) -> list[str] | None:
    """The message fields a strategic or JSON merge patch touches, when it names only whole
    top-level message fields (metadata, spec, status) and no directive; None otherwise."""
    if patch.PATCH_TYPES.get(patch_type.split(";")[0].strip().lower()) not in _MERGE_PATCH_TYPES:
        return None
    if not isinstance(document, dict) or not document:
        return None
    by_name = kind.message.DESCRIPTOR.fields_by_name
    for key in document:
        f = by_name.get(key)
        if f is None or f.message_type is None or f.json_name != key:
            return None
    return list(document)
