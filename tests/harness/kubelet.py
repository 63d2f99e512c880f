"""A kubelet without processes: the real ``Kubelet`` over an in-process ``FakeRuntime`` and a fake API.

The kubelet is built exactly as ``python -m kubelet`` builds it, but never started: no informer
watches, no workers run. The test plays the API server — it adds, changes and deletes pods in
the kubelet's informer cache as watch events would, and each API write the kubelet makes lands
in :class:`FakeApi`, which answers as the apiserver does for the verbs the kubelet's sync path
uses (a status update with a stale resourceVersion is a conflict; a delete may carry a uid
precondition) — and it drives the pod workers by hand: ``await h.sync("web")`` is one pod
worker taking that pod once, ``await h.drain()`` runs the queued work until none is left. So
the sync path (admission, resize, actuation, termination, status writes) is tested step by
step, deterministically. ResourceClaims the kubelet reads (``kubelet.dra``) are the test's too:
``h.api.claims["default/web-gpu"] = claim``.

    h = KubeletHarness(tmp_path, cpu="4")
    await h.start()
    h.add(MakePod().name("web").req(cpu="1").obj())
    await h.sync("web")
    assert h.api.pod("web").status.phase == "Running"
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

from kubelet.kubelet import Kubelet, KubeletConfig
from kubelet.node import NodeConfig
from kubelet.pod_workers import Cleanup, SyncPod
from kubelet.runtime.client import InProcessRuntime
from kubelet.runtime.fake import FakeRuntime
from machinery import errors, resources, timeutil
from machinery.api import core_pb2, resource_pb2
from machinery.informer import key_of


@dataclass
class Write:
    """One API write the kubelet made: its verb and the pod as the API then held it."""

    verb: str  # update_status | delete
    name: str
    pod: core_pb2.Pod


M = TypeVar("M", core_pb2.Pod, resource_pb2.ResourceClaim)


def _read(stored: dict[str, M], plural: str, namespace: str, name: str) -> M:
    """A copy of the object the API holds under ``namespace/name``; NotFound without one."""
    obj = stored.get(f"{namespace}/{name}")
    if obj is None:
        raise errors.not_found(plural, name)
    out = type(obj)()
    out.CopyFrom(obj)
    return out


class _Pods:
    """``client.pods``: the verbs the kubelet's sync path uses, over the API's dict of pods."""

    def __init__(self, api: FakeApi):
        self._api = api

    async def get(self, name: str, namespace: str = "default") -> core_pb2.Pod:
        return _read(self._api.stored, "pods", namespace, name)

    async def update_status(self, pod: core_pb2.Pod) -> core_pb2.Pod:
        key = key_of(pod)
        current = self._api.stored.get(key)
        if current is None:
            raise errors.not_found("pods", pod.metadata.name)
        if pod.metadata.resource_version != current.metadata.resource_version:
            raise errors.conflict("pods", pod.metadata.name)
        new = core_pb2.Pod()
        new.CopyFrom(current)
        new.status.CopyFrom(pod.status)
        new.metadata.resource_version = self._api.next_rv()
        self._api.stored[key] = new
        self._api.writes.append(Write("update_status", pod.metadata.name, new))
        return new

    async def delete(self, name: str, namespace: str = "default", *, grace_period_seconds: int | None = None,
                     uid: str | None = None, **_: object) -> core_pb2.Pod:
        key = f"{namespace}/{name}"
        current = self._api.stored.get(key)
        if current is None:
            raise errors.not_found("pods", name)
        if uid is not None and current.metadata.uid != uid:
            raise errors.conflict("pods", name, "the UID in the precondition does not match")
        del self._api.stored[key]
        self._api.writes.append(Write("delete", name, current))
        return current


class _Events:
    """``client.events``: the event recorder's creates, kept in order."""

    def __init__(self, api: FakeApi):
        self._api = api

    async def create(self, ev: core_pb2.Event) -> core_pb2.Event:
        ev.metadata.name = ev.metadata.generate_name + uuid.uuid4().hex[:5]
        self._api.event_log.append(ev)
        return ev

    async def get(self, name: str, namespace: str = "default") -> core_pb2.Event:
        for ev in self._api.event_log:
            if ev.metadata.name == name:
                return ev
        raise errors.not_found("events", name)

    async def update(self, ev: core_pb2.Event) -> core_pb2.Event:
        return ev


class _Claims:
    """``client.resource_claims``: the reads of the kubelet's DRA manager, from the API's claims."""

    def __init__(self, api: FakeApi):
        self._api = api

    async def get(self, name: str, namespace: str = "default") -> resource_pb2.ResourceClaim:
        return _read(self._api.claims, "resourceclaims", namespace, name)


class FakeApi:
    """The part of ``machinery.client.Client`` a never-started kubelet uses, answered from memory."""

    def __init__(self) -> None:
        self.stored: dict[str, core_pb2.Pod] = {}  # namespace/name -> the pod as the API holds it
        self.claims: dict[str, resource_pb2.ResourceClaim] = {}  # namespace/name -> ResourceClaim
        self.writes: list[Write] = []
        self.event_log: list[core_pb2.Event] = []
        self._rv = itertools.count(100)
        self.pods = _Pods(self)
        self.events = _Events(self)
        self.resource_claims = _Claims(self)

    def resource(self, kind: object) -> object:
        return kind  # informers ask for it when built; a never-started one never calls it

    def next_rv(self) -> str:
        return str(next(self._rv))

    def pod(self, name: str, namespace: str = "default") -> core_pb2.Pod:
        return self.stored[f"{namespace}/{name}"]

    def status_writes(self, name: str) -> list[core_pb2.PodStatus]:
        return [w.pod.status for w in self.writes if w.verb == "update_status" and w.name == name]


class KubeletHarness:
    """A never-started kubelet of node ``node-1`` with its runtime, checkpoints in ``tmp_path``."""

    def __init__(self, tmp_path: Path, *, cpu: str = "4", memory: str = "8Gi", pods: int = 110,
                 resize_preemption: bool = False, dra_devices: int = 0):
        self.api = FakeApi()
        self.runtime = FakeRuntime("node-1")
        cfg = KubeletConfig(NodeConfig("node-1", cpu=cpu, memory=memory, pods=pods), str(tmp_path / "checkpoints"),
                            resize_preemption=resize_preemption, restart_backoff=0.0, dra_devices=dra_devices)
        self.kubelet = Kubelet(cfg, self.api, InProcessRuntime(self.runtime))  # type: ignore[arg-type]
        self.kubelet.pods.add_handler(self.kubelet.workers.on_pod_add, self.kubelet.workers.on_pod_update,
                                      self.kubelet.workers.on_pod_delete)

    async def start(self) -> None:
        """What ``Kubelet.start`` does before its loops: checkpoints read, the runtime up, events written."""
        self.kubelet.alloc.load()
        await self.runtime.start()
        self.kubelet.recorder.start()

    async def stop(self) -> None:
        await self.kubelet.recorder.stop()
        await self.runtime.close()

    # --- the API server's side ------------------------------------------------------------------

    def add(self, pod: core_pb2.Pod, node: str = "node-1") -> core_pb2.Pod:
        """The pod as the apiserver stores it, bound to ``node``, delivered to the kubelet as ADDED."""
        stored = core_pb2.Pod()
        stored.CopyFrom(pod)
        stored.metadata.namespace = stored.metadata.namespace or "default"
        stored.metadata.uid = stored.metadata.uid or str(uuid.uuid4())
        stored.metadata.generation = stored.metadata.generation or 1
        stored.metadata.creation_timestamp = timeutil.rfc3339()
        stored.metadata.resource_version = self.api.next_rv()
        stored.spec.node_name = node
        stored.status.phase = stored.status.phase or "Pending"
        stored.status.qos_class = resources.qos_class(stored)
        self.api.stored[key_of(stored)] = stored
        self._deliver("ADDED", stored)
        return stored

    def resize(self, name: str, container: str = "c1", *, cpu: str | None = None,
               memory: str | None = None) -> core_pb2.Pod:
        """A resize through the API: the container's requests change, the generation goes up."""
        new = core_pb2.Pod()
        new.CopyFrom(self.api.pod(name))
        c = next(c for c in new.spec.containers if c.name == container)
        for resource, value in (("cpu", cpu), ("memory", memory)):
            if value is not None:
                c.resources.requests[resource] = value
        new.metadata.generation += 1
        return self._store(new)

    def delete(self, name: str, grace: int = 30) -> core_pb2.Pod:
        """A graceful delete of a bound pod: it gets its deletionTimestamp and grace period."""
        new = core_pb2.Pod()
        new.CopyFrom(self.api.pod(name))
        new.metadata.deletion_timestamp = timeutil.rfc3339(timeutil.now() + timedelta(seconds=grace))
        new.metadata.deletion_grace_period_seconds = grace
        return self._store(new)

    def forget(self, name: str) -> None:
        """The pod is gone from the API (deleted at once): the kubelet's informer sees DELETED."""
        pod = self.api.stored.pop(f"default/{name}")
        self._deliver("DELETED", pod)

    def _store(self, pod: core_pb2.Pod) -> core_pb2.Pod:
        pod.metadata.resource_version = self.api.next_rv()
        self.api.stored[key_of(pod)] = pod
        self._deliver("MODIFIED", pod)
        return pod

    def deliver_writes(self) -> None:
        """The kubelet's own writes come back through its watch (status-only: no work is queued)."""
        for key, pod in list(self.api.stored.items()):
            seen = self.kubelet.pods.store.get(key)
            if seen is not None and seen.metadata.resource_version != pod.metadata.resource_version:
                self._deliver("MODIFIED", pod)
        for key in [k for k in self.kubelet.pods.store if k not in self.api.stored]:
            self._deliver("DELETED", self.kubelet.pods.store[key])

    def _deliver(self, type_: str, pod: core_pb2.Pod) -> None:
        copy = core_pb2.Pod()
        copy.CopyFrom(pod)
        self.kubelet.pods._apply(type_, copy)

    # --- the pod workers, by hand --------------------------------------------------------------

    def queued(self) -> int:
        """How many work items wait in the pod workers' queue."""
        return len(self.kubelet.workers.queue)

    async def sync(self, name: str, namespace: str = "default") -> None:
        """One pod worker takes this pod once (whatever else is queued), then its writes come back."""
        await self.kubelet.pod_sync.sync_pod(f"{namespace}/{name}")
        self.deliver_writes()

    async def drain(self, limit: int = 50) -> int:
        """Run queued work items one at a time until none is left; how many ran."""
        ran = 0
        q = self.kubelet.workers.queue
        while len(q) and ran < limit:
            item, _ = await q.get()
            try:
                match item:
                    case Cleanup(uid=uid):
                        await self.kubelet.pod_sync.sync_cleanup(uid)
                    case SyncPod(key=key):
                        await self.kubelet.pod_sync.sync_pod(key)
            finally:
                q.done(item)
            self.deliver_writes()
            ran += 1
        return ran

    async def events(self) -> list[tuple[str, str, str]]:
        """Every Event written so far as (involved pod, type, reason), in order."""
        await self.kubelet.recorder.flush()
        return [(e.involved_object.name, e.type, e.reason) for e in self.api.event_log]
