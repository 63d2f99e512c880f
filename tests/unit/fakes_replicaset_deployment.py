"""The ReplicaSet and Deployment controllers without processes: the real controllers over an
in-memory API.

The controllers are built as the controller-manager builds them (``ControllerContext``, shared
informers) but never started: no watch runs, no worker. The test plays the apiserver — the
controllers' writes land in :class:`FakeApi`, which answers the verbs they use as the apiserver
does (generated names, uids, resourceVersions, a stale resourceVersion a conflict, the generation
bumped on a spec change, status kept by an update, a Deployment's status update taking its
annotations, strategic merge patches with their uid precondition, graceful deletion of a bound pod)
— and the informers: every write becomes a watch event that reaches the informers' caches when the
test says (``api.deliver()``), or at once with ``api.auto_deliver``. A slow informer is a test that
does not deliver yet. Events are kept in order in ``api.recorded``.

    api = FakeApi()
    rsc = ReplicaSetController(api.context())
    api.add(MakeReplicaSet().name("web").replicas(3).obj())
    await rsc.sync("default/web")
    assert len(api.list(POD)) == 3
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message

from apiserver import defaults
from apiserver.registry import patched
from controllers import options as opts
from controllers.controller import ControllerContext
from controllers.informers import SharedInformerFactory
from machinery import errors, timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.kinds import DEPLOYMENT, POD, REPLICA_SET, Kind, object_meta, spec_of

_KINDS = {"Pod": POD, "ReplicaSet": REPLICA_SET, "Deployment": DEPLOYMENT}


def _copy(obj: Message) -> Any:
    out = type(obj)()
    out.CopyFrom(obj)
    return out


class _Resource:
    """One kind's verbs, over the API's objects."""

    def __init__(self, api: FakeApi, kind: Kind[Any, Any]):
        self.api, self.kind = api, kind

    def _key(self, namespace: str, name: str) -> tuple[str, str, str]:
        return (self.kind.name, namespace or "default", name)

    def _stored(self, namespace: str, name: str) -> Any:
        obj = self.api.objects.get(self._key(namespace, name))
        if obj is None:
            raise errors.not_found(self.kind.plural, name)
        return obj

    async def get(self, name: str, namespace: str = "", **_: object) -> Any:
        self.api.fail_if("get", self.kind, name)
        return _copy(self._stored(namespace, name))

    async def create(self, obj: Any, **_: object) -> Any:
        meta = object_meta(obj)
        self.api.fail_if("create", self.kind, meta.name or meta.generate_name)
        obj = _copy(obj)
        meta = object_meta(obj)
        meta.namespace = meta.namespace or "default"
        if not meta.name:
            meta.name = meta.generate_name + uuid.uuid4().hex[:5]
        key = self._key(meta.namespace, meta.name)
        if key in self.api.objects:
            raise errors.already_exists(self.kind.plural, meta.name)
        meta.uid = f"uid-{meta.name}"
        meta.creation_timestamp = self.api.now()
        meta.generation = 1
        obj.api_version, obj.kind = self.kind.api_version, self.kind.name
        defaults.default_object(self.kind.name, obj)
        if isinstance(obj, core_pb2.Pod):
            obj.status.phase = obj.status.phase or "Pending"
        return self.api.store("ADDED", key, obj)

    def _current(self, verb: str, obj: Any) -> Any:
        """The stored object ``obj`` is a write of: a conflict unless it carries its resourceVersion."""
        meta = object_meta(obj)
        self.api.fail_if(verb, self.kind, meta.name)
        old = self._stored(meta.namespace, meta.name)
        if meta.resource_version != object_meta(old).resource_version:
            raise errors.conflict(self.kind.plural, meta.name)
        return old

    async def update(self, obj: Any, **_: object) -> Any:
        old = self._current("update", obj)
        meta = object_meta(obj)
        new = _copy(obj)
        if old.HasField("status"):
            new.status.CopyFrom(old.status)
        object_meta(new).generation = object_meta(old).generation + (1 if spec_of(old) != spec_of(new) else 0)
        return self.api.store("MODIFIED", self._key(meta.namespace, meta.name), new)

    async def update_status(self, obj: Any, **_: object) -> Any:
        old = self._current("update_status", obj)
        meta = object_meta(obj)
        new = _copy(old)
        new.status.CopyFrom(obj.status)
        if isinstance(new, apps_pb2.Deployment):  # its status strategy takes annotations from the request
            new.metadata.annotations.clear()
            new.metadata.annotations.update(obj.metadata.annotations)
        return self.api.store("MODIFIED", self._key(meta.namespace, meta.name), new)

    async def patch(self, name: str, patch: Any, *, namespace: str = "", **_: object) -> Any:
        self.api.fail_if("patch", self.kind, name)
        old = self._stored(namespace, name)
        document = json.loads(patch) if isinstance(patch, str) else patch
        new = patched(self.kind, old, document, "strategic")
        if object_meta(new).uid != object_meta(old).uid:
            raise errors.Invalid.of(self.kind.name, name, [errors.invalid("metadata.uid", object_meta(new).uid,
                                                                          "field is immutable")])
        return self.api.store("MODIFIED", self._key(namespace, name), new)

    async def delete(self, name: str, namespace: str = "", *, grace_period_seconds: int | None = None,
                     **_: object) -> Any:
        self.api.fail_if("delete", self.kind, name)
        key = self._key(namespace, name)
        old = self._stored(namespace, name)
        if isinstance(old, core_pb2.Pod) and old.spec.node_name and grace_period_seconds != 0 and \
                old.status.phase not in ("Succeeded", "Failed"):
            if old.metadata.deletion_timestamp:
                return _copy(old)
            new = _copy(old)
            new.metadata.deletion_timestamp = self.api.now()
            return self.api.store("MODIFIED", key, new)  # graceful: its kubelet finishes it
        del self.api.objects[key]
        self.api.writes.append(("delete", self.kind.name, name))
        self.api.emit(self.kind, "DELETED", old)
        return _copy(old)


class _Recorder:
    """An EventRecorder that keeps the Events in order instead of writing them."""

    def __init__(self, api: FakeApi, component: str):
        self.api, self.component = api, component

    def event(self, obj: Message, type_: str, reason: str, message: str, related: Message | None = None,
              action: str = "") -> None:
        self.api.recorded.append((object_meta(obj).name, type_, reason, message))

    def start(self) -> None:
        pass

    async def stop(self) -> None:
        pass


class _Context(ControllerContext):
    def recorder(self, component: str) -> Any:
        return _Recorder(self.client, component)  # type: ignore[arg-type]


class FakeApi:
    """The apiserver, as far as the ReplicaSet and Deployment controllers use it."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], Any] = {}  # (kind, namespace, name) -> object
        self.pending: list[tuple[Kind[Any, Any], str, Any]] = []  # watch events not yet delivered
        self.auto_deliver = False
        self.recorded: list[tuple[str, str, str, str]] = []  # Events: (object name, type, reason, message)
        self.writes: list[tuple[str, str, str]] = []  # (verb, kind, name)
        self.failures: dict[tuple[str, str], Callable[[str], errors.ApiError | None]] = {}  # (verb, kind) -> fn
        self._rv = itertools.count(100)
        self.clock = timeutil.now()
        self.pods = _Resource(self, POD)
        self.replica_sets = _Resource(self, REPLICA_SET)
        self.deployments = _Resource(self, DEPLOYMENT)
        # The kinds this API serves: a fake for other controllers adds its own (fakes_resourceclaim.py).
        self.kinds: dict[str, Kind[Any, Any]] = dict(_KINDS)
        self.resources: dict[str, _Resource] = {POD.name: self.pods, REPLICA_SET.name: self.replica_sets,
                                                DEPLOYMENT.name: self.deployments}
        self.factory = SharedInformerFactory(self)  # type: ignore[arg-type]

    # ------------------------------------------------------------ what the controllers call

    def resource(self, kind: Kind[Any, Any]) -> Any:
        return self.resources[kind.name]

    def context(self, **options: Any) -> ControllerContext:
        return _Context(self, self.factory, opts.ControllerOptions(enabled=frozenset(), **options))  # type: ignore[arg-type]

    def now(self) -> str:
        return timeutil.rfc3339(self.clock)

    def fail_if(self, verb: str, kind: Kind[Any, Any], name: str) -> None:
        fn = self.failures.get((verb, kind.name))
        exc = fn(name) if fn is not None else None
        if exc is not None:
            raise exc

    def store(self, type_: str, key: tuple[str, str, str], obj: Any) -> Any:
        object_meta(obj).resource_version = str(next(self._rv))
        self.objects[key] = obj
        self.writes.append(({"ADDED": "create", "MODIFIED": "update"}[type_], key[0], key[2]))
        self.emit(self.kinds[key[0]], type_, obj)
        return _copy(obj)

    def emit(self, kind: Kind[Any, Any], type_: str, obj: Any) -> None:
        self.pending.append((kind, type_, _copy(obj)))
        if self.auto_deliver:
            self.deliver()

    # ------------------------------------------------------------ what tests call

    def deliver(self, *kinds: Kind[Any, Any]) -> None:
        """Every watch event so far reaches the informers (and their handlers) — only those of
        ``kinds`` when given (the other kinds' watches are slower), the rest kept in order."""
        keep = []
        while self.pending:
            kind, type_, obj = self.pending.pop(0)
            if kinds and kind not in kinds:
                keep.append((kind, type_, obj))
                continue
            self.factory.informer(kind)._apply(type_, obj)
        self.pending = keep

    def add(self, obj: Any) -> Any:
        """An object created by someone else (the test), delivered to the informers at once."""
        kind = self.kinds[type(obj).DESCRIPTOR.name]
        obj = _copy(obj)
        meta = object_meta(obj)
        meta.namespace = meta.namespace or "default"
        meta.uid = meta.uid or f"uid-{meta.name}"
        meta.creation_timestamp = meta.creation_timestamp or self.now()
        meta.generation = meta.generation or 1
        obj.api_version, obj.kind = kind.api_version, kind.name
        defaults.default_object(kind.name, obj)
        stored = self.store("ADDED", (kind.name, meta.namespace, meta.name), obj)
        self.deliver()
        return stored

    def change(self, obj: Any, fn: Callable[[Any], None], *, status: bool = False) -> Any:
        """``fn`` applied to the stored object as a client's update (of its status with ``status``);
        delivered at once, with what its kind's informer had still to deliver (other kinds'
        watches keep what is pending)."""
        meta = object_meta(obj)
        key = (type(obj).DESCRIPTOR.name, meta.namespace or "default", meta.name)
        old = self.objects[key]
        new = _copy(old)
        fn(new)
        if not status and spec_of(new) != spec_of(old):
            object_meta(new).generation += 1
        stored = self.store("MODIFIED", key, new)
        self.deliver(self.kinds[key[0]])
        return stored

    def get(self, kind: Kind[Any, Any], name: str, namespace: str = "default") -> Any:
        return self.objects[(kind.name, namespace, name)]

    def list(self, kind: Kind[Any, Any], namespace: str = "default") -> list[Any]:
        return [o for (k, ns, _), o in self.objects.items() if k == kind.name and ns == namespace]

    def run_pods(self, *, ready: bool = True, node: str = "node-1") -> None:
        """Every pod not yet Running bound to ``node`` and Running (Ready unless not ``ready``), as the
        scheduler and a kubelet would make it."""
        for pod in self.list(POD):
            if pod.metadata.deletion_timestamp or pod.status.phase == "Running":
                continue

            def run(p: core_pb2.Pod) -> None:
                p.spec.node_name = p.spec.node_name or node
                p.status.phase = "Running"
                if ready:
                    p.status.conditions.add(type="Ready", status="True", last_transition_time=self.now())
            self.change(pod, run)

    def finish_deletions(self) -> None:
        """Every pod being deleted is gone, as its kubelet would finish it."""
        for pod in self.list(POD):
            if pod.metadata.deletion_timestamp:
                del self.objects[("Pod", pod.metadata.namespace, pod.metadata.name)]
                self.emit(POD, "DELETED", pod)
        self.deliver()
