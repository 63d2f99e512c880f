"""Controllers without processes: the part of ``machinery.client.Client`` the garbage collector,
namespace and disruption controllers call, answered from memory as the apiserver answers.

Every write lands in ``FakeApi.objects`` with a new resourceVersion and is delivered at once to the
informer of its kind, as the watch event would be, so a started controller sees its own writes and
the test's. Deletion follows the apiserver's rules that matter here: preconditions (uid,
resourceVersion), the propagation policy's finalizers (``apiserver.registry.deletion_finalizers``),
graceful deletion of a pod bound to a node (marked, until the test removes it as its kubelet
would: ``api.remove``), removal when the last finalizer goes; patches are applied with the
apiserver's own ``patched``.

    api = FakeApi()
    ctx = api.context()
    gc = GarbageCollector(ctx)
    api.seed(replica_set, pod)
    await gc.start(2)
"""

from __future__ import annotations

import itertools
from typing import Any

from google.protobuf.message import Message

from apiserver.registry import deletion_finalizers, parse_patch, patched
from controllers.controller import ControllerContext
from controllers.informers import SharedInformerFactory
from controllers.options import ControllerOptions
from machinery import errors, timeutil
from machinery.api import core_pb2, meta_pb2
from machinery.kinds import NAMESPACE, POD, Kind, list_accessor, object_meta, of_message


def _copy(obj: Message) -> Message:
    out = type(obj)()
    out.CopyFrom(obj)
    return out


class FakeResource:
    def __init__(self, api: FakeApi, kind: Kind[Message, Message]):
        self.api, self.kind = api, kind

    def _key(self, namespace: str, name: str) -> tuple[str, str, str]:
        return self.kind.plural, namespace if self.kind.namespaced else "", name

    def _stored(self, namespace: str, name: str) -> Message:
        obj = self.api.objects.get(self._key(namespace or "default", name))
        if obj is None:
            raise errors.not_found(self.kind.plural, name)
        return obj

    async def get(self, name: str, namespace: str = "", **_: Any) -> Message:
        return _copy(self._stored(namespace, name))

    async def list(self, namespace: str = "", **_: Any) -> Message:
        out = self.kind.list_message()
        items = [o for (plural, ns, _n), o in sorted(self.api.objects.items())
                 if plural == self.kind.plural and (not namespace or ns == namespace)]
        list_accessor(self.kind, out).items.extend(_copy(o) for o in items)
        return out

    async def update(self, obj: Message, **_: Any) -> Message:
        return self.api.write(self.kind, obj, "update")

    async def update_status(self, obj: Message, **_: Any) -> Message:
        return self.api.write(self.kind, obj, "update_status")

    async def patch(self, name: str, patch: Any, *, namespace: str = "", patch_type: str = "strategic",
                    **_: Any) -> Message:
        req = meta_pb2.PatchRequest(namespace=namespace, name=name, patch_type=patch_type,
                                    patch=patch if isinstance(patch, str) else __import__("json").dumps(patch))
        document, precondition = parse_patch(req)
        old = self._stored(namespace, name)
        if precondition and precondition != object_meta(old).resource_version:
            raise errors.conflict(self.kind.plural, name)
        new = patched(self.kind, old, document, patch_type)
        if object_meta(new).uid != object_meta(old).uid:
            raise errors.Invalid(f"{self.kind.name} \"{name}\" is invalid: metadata.uid: field is immutable")
        return self.api.write(self.kind, new, "patch")

    async def delete(self, name: str, namespace: str = "", *, uid: str | None = None,
                     resource_version: str | None = None, propagation_policy: str | None = None,
                     grace_period_seconds: int | None = None, **_: Any) -> Message:
        old = self._stored(namespace, name)
        meta = object_meta(old)
        if uid is not None and uid != meta.uid:
            raise errors.conflict(self.kind.plural, name, "Precondition failed: UID")
        if resource_version is not None and resource_version != meta.resource_version:
            raise errors.conflict(self.kind.plural, name, "Precondition failed: ResourceVersion")
        self.api.deletes.append((self.kind.name, meta.namespace, name, propagation_policy))
        finalizers = deletion_finalizers(old, propagation_policy)
        new = _copy(old)
        if finalizers is not None:
            del object_meta(new).finalizers[:]
            object_meta(new).finalizers.extend(finalizers)
        graceful = isinstance(old, core_pb2.Pod) and bool(old.spec.node_name) and grace_period_seconds != 0 and \
            old.status.phase not in ("Succeeded", "Failed")
        if isinstance(new, core_pb2.Namespace):
            graceful = True  # the namespace controller's content deletion comes first
            new.status.phase = "Terminating"
        if not object_meta(new).finalizers and not graceful:
            return self.api.remove(self.kind, meta.namespace, name)
        if not object_meta(new).deletion_timestamp:
            object_meta(new).deletion_timestamp = timeutil.rfc3339()
        return self.api.write(self.kind, new, "delete", check_rv=False)

    async def finalize(self, ns: core_pb2.Namespace, **_: Any) -> core_pb2.Namespace:
        old = self._stored("", ns.metadata.name)
        assert isinstance(old, core_pb2.Namespace)
        if ns.metadata.resource_version and ns.metadata.resource_version != old.metadata.resource_version:
            raise errors.conflict("namespaces", ns.metadata.name)
        new = _copy(old)
        assert isinstance(new, core_pb2.Namespace)
        del new.spec.finalizers[:]
        new.spec.finalizers.extend(ns.spec.finalizers)
        self.api.finalized.append(ns.metadata.name)
        if new.metadata.deletion_timestamp and not new.spec.finalizers and not new.metadata.finalizers:
            self.api.remove(NAMESPACE, "", ns.metadata.name)
            return new
        out = self.api.write(NAMESPACE, new, "finalize", check_rv=False)
        assert isinstance(out, core_pb2.Namespace)
        return out


class FakeApi:
    """The objects, the writes made, and a client-shaped view of them."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Message] = {}
        self.informers = SharedInformerFactory(self)  # type: ignore[arg-type]
        self.namespace = "default"
        self.deletes: list[tuple[str, str, str, str | None]] = []  # (kind, namespace, name, propagation)
        self.finalized: list[str] = []
        self.removed: list[tuple[str, str, str]] = []  # (kind, namespace, name), in order
        self._rv = itertools.count(100)
        self._resources: dict[str, FakeResource] = {}
        self._uids = itertools.count(1)

    def context(self) -> ControllerContext:
        return ControllerContext(self, self.informers, ControllerOptions(enabled=frozenset()))  # type: ignore[arg-type]

    def resource(self, kind: Kind[Message, Message]) -> FakeResource:
        rc = self._resources.get(kind.plural)
        if rc is None:
            rc = self._resources[kind.plural] = FakeResource(self, kind)
        return rc

    def __getattr__(self, name: str) -> FakeResource:
        from machinery.kinds import KINDS
        plurals = {"pods": "pods", "namespaces": "namespaces", "pod_disruption_budgets": "poddisruptionbudgets",
                   "replica_sets": "replicasets", "deployments": "deployments"}
        if name in plurals:
            return self.resource(next(k for k in KINDS if k.plural == plurals[name]))
        raise AttributeError(name)

    # ------------------------------------------------------------ the test's side

    def seed(self, *objs: Message) -> list[Message]:
        """Create objects (a uid, a resourceVersion; a namespace with the kubernetes finalizer)."""
        out = []
        for obj in objs:
            obj = _copy(obj)
            meta = object_meta(obj)
            meta.uid = meta.uid or f"uid-{next(self._uids)}"
            meta.namespace = meta.namespace if of_message(obj).namespaced else ""
            if of_message(obj).namespaced and not meta.namespace:
                meta.namespace = "default"
            meta.creation_timestamp = meta.creation_timestamp or timeutil.rfc3339()
            meta.generation = meta.generation or 1
            if isinstance(obj, core_pb2.Namespace) and not obj.spec.finalizers:
                obj.spec.finalizers.append("kubernetes")
                obj.status.phase = obj.status.phase or "Active"
            out.append(self.write(of_message(obj), obj, "create", check_rv=False))
        return out

    def get(self, kind: Kind[Message, Message], name: str, namespace: str = "default") -> Message | None:
        return self.objects.get((kind.plural, namespace if kind.namespaced else "", name))

    def write(self, kind: Kind[Message, Message], obj: Message, verb: str, check_rv: bool = True) -> Message:
        meta = object_meta(obj)
        key = (kind.plural, meta.namespace if kind.namespaced else "", meta.name)
        old = self.objects.get(key)
        if verb != "create" and old is None:
            raise errors.not_found(kind.plural, meta.name)
        if check_rv and old is not None and meta.resource_version and \
                meta.resource_version != object_meta(old).resource_version:
            raise errors.conflict(kind.plural, meta.name)
        new = _copy(obj)
        if old is not None and verb == "update_status":
            new = _copy(old)
            new.status.CopyFrom(obj.status)  # type: ignore[attr-defined]
        new_meta = object_meta(new)
        if old is not None:
            new_meta.uid = object_meta(old).uid
            if object_meta(old).deletion_timestamp:
                new_meta.deletion_timestamp = object_meta(old).deletion_timestamp
        if new_meta.deletion_timestamp and not new_meta.finalizers and not (
                isinstance(new, core_pb2.Pod) and new.spec.node_name and verb != "delete") and \
                not isinstance(new, core_pb2.Namespace) and verb != "delete":
            return self.remove(kind, new_meta.namespace, new_meta.name)
        new_meta.resource_version = str(next(self._rv))
        self.objects[key] = new
        self.informers.informer(kind)._apply("ADDED" if old is None else "MODIFIED", _copy(new))
        return _copy(new)

    def remove(self, kind: Kind[Message, Message], namespace: str, name: str) -> Message:
        """The object goes (a kubelet's last delete of a pod, or the apiserver's removal)."""
        key = (kind.plural, namespace if kind.namespaced else "", name)
        obj = self.objects.pop(key)
        self.removed.append((kind.name, key[1], name))
        last = _copy(obj)
        object_meta(last).resource_version = str(next(self._rv))
        self.informers.informer(kind)._apply("DELETED", last)
        return _copy(last)

    def pods_of(self, namespace: str = "default") -> list[core_pb2.Pod]:
        return [o for (plural, ns, _), o in self.objects.items() if plural == POD.plural and ns == namespace
                and isinstance(o, core_pb2.Pod)]
