"""Taint-based eviction (Kubernetes' pkg/controller/tainteviction): pods off NoExecute-tainted nodes.

When a node has ``NoExecute`` taints (the node lifecycle controller's ``not-ready`` and
``unreachable``, or anyone's), each pod bound there is looked at, as the Kubernetes docs' "Taints
and Tolerations" say:

- a pod that does not tolerate every NoExecute taint is deleted at once;
- a pod that tolerates them all, the smallest ``tolerationSeconds`` of the tolerations used
  deciding, is deleted that many seconds after it was first seen so (every pod gets 300 s for
  ``not-ready`` and ``unreachable`` from the DefaultTolerationSeconds admission plugin);
- a pod whose tolerations have no ``tolerationSeconds`` stays.

When the taints go (the node is Ready again) or the pod's tolerations change so that it may stay,
its pending deletion is cancelled. A deletion first gives the pod a ``DisruptionTarget`` condition
(reason ``DeletionByTaintManager``), then deletes it gracefully — its kubelet, if it is alive, stops
it; if not, the pod stays Terminating and its controller makes a replacement. Events on the pod:
``TaintManagerEviction`` "Marking for deletion Pod ns/name", and "Cancelling deletion of Pod ns/name".
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from prometheus_client import Counter

from controllers.controller import Controller, ControllerContext
from machinery import errors, placement, podconditions
from machinery.api import core_pb2
from machinery.informer import key_of
from machinery.kinds import NODE, POD
from machinery.logging import get_logger
from machinery.retry import Backoff, on_error

log = get_logger()

# Kubernetes tries a deletion five times, 10 ms apart.
DELETE_RETRY = Backoff(steps=5, duration=0.010)

DELETIONS = Counter("taint_eviction_controller_pod_deletions_total",
                    "Total number of Pods deleted by TaintEvictionController since its start.")
DISRUPTION_MESSAGE = "Taint manager: deleting due to NoExecute taint"


@dataclass(frozen=True)
class NodeUpdate:
    """A node's NoExecute taints changed: look at every pod bound there."""

    node: str


@dataclass(frozen=True)
class PodUpdate:
    """A pod's node or tolerations changed: look at it."""

    key: str  # namespace/name


WorkItem = NodeUpdate | PodUpdate


def no_execute(node: core_pb2.Node | None) -> list[core_pb2.Taint]:
    return [t for t in node.spec.taints if t.effect == "NoExecute"] if node is not None else []


def min_toleration_seconds(taints: list[core_pb2.Taint], tolerations: list[core_pb2.Toleration]) -> float | None:
    """How long the pod may stay: 0 if a taint is not tolerated, None if for ever (Kubernetes'
    GetMatchingTolerations, then getMinTolerationTime over the tolerations used)."""
    used: list[core_pb2.Toleration] = []
    for taint in taints:
        matching = [t for t in tolerations if placement.tolerates(t, taint)]
        if not matching:
            return 0.0
        used.append(matching[0])
    seconds = [t.toleration_seconds for t in used if t.HasField("toleration_seconds")]
    if not seconds:
        return None if used else 0.0
    return float(max(0, min(seconds)))


@dataclass
class _Scheduled:
    started: float  # monotonic: when the pod was first seen to be evicted
    fire_at: float
    task: asyncio.Task[None]


class TaintEvictionController(Controller[WorkItem]):
    name = "taint-eviction-controller"

    def __init__(self, ctx: ControllerContext):
        super().__init__()
        self._client = ctx.client
        self._nodes = ctx.informers.informer(NODE)
        self._pods = ctx.informers.informer(POD)
        self._pods.add_indexer("spec.nodeName", lambda p: [p.spec.node_name] if p.spec.node_name else [])
        self._recorder = ctx.recorder("taint-eviction-controller")
        self._scheduled: dict[str, _Scheduled] = {}
        self._nodes.add_handler(lambda n: self._node_updated(None, n), self._node_updated,
                                lambda n: self._node_updated(n, None))
        self._pods.add_handler(lambda p: self._pod_updated(None, p), self._pod_updated,
                               lambda p: self._pod_updated(p, None))

    def _node_updated(self, old: core_pb2.Node | None, new: core_pb2.Node | None) -> None:
        if old is not None and new is not None and no_execute(old) == no_execute(new):
            return
        node = new if new is not None else old
        assert node is not None
        self.queue.add(NodeUpdate(node.metadata.name))

    def _pod_updated(self, old: core_pb2.Pod | None, new: core_pb2.Pod | None) -> None:
        if old is not None and new is not None and old.spec.tolerations == new.spec.tolerations and \
                old.spec.node_name == new.spec.node_name:
            return
        pod = new if new is not None else old
        assert pod is not None
        self.queue.add(PodUpdate(key_of(pod)))

    async def stop(self) -> None:
        for s in self._scheduled.values():
            s.task.cancel()
        self._scheduled.clear()
        await super().stop()

    async def sync(self, key: WorkItem) -> None:
        match key:
            case NodeUpdate(node=name):
                taints = no_execute(self._nodes.get(name))
                for pod in self._pods.by_index("spec.nodeName", name):
                    self._process(pod, taints)
            case PodUpdate(key=pod_key):
                namespace, _, name = pod_key.partition("/")
                found = self._pods.get(name, namespace)
                if found is None or not found.spec.node_name:
                    self._cancel(pod_key, event_for=None)
                    return
                self._process(found, no_execute(self._nodes.get(found.spec.node_name)))

    def _process(self, pod: core_pb2.Pod, taints: list[core_pb2.Taint]) -> None:
        """Kubernetes' processPodOnNode."""
        key = key_of(pod)
        if not taints:
            self._cancel(key, event_for=pod)
            return
        stay = min_toleration_seconds(taints, list(pod.spec.tolerations))
        if stay is None:
            self._cancel(key, event_for=pod)  # tolerates for ever
            return
        now = time.monotonic()
        current = self._scheduled.get(key)
        if current is not None:
            if current.started + stay >= current.fire_at - 1e-9 and stay > 0:
                return  # already due no later than the new tolerations say
            self._cancel(key, event_for=None)
            now = current.started if stay > 0 else now
        fire_at = now + stay
        self._scheduled[key] = _Scheduled(now, fire_at, asyncio.get_running_loop().create_task(
            self._evict_at(pod, fire_at)))
        log.info("taint_eviction_scheduled", pod=key, node=pod.spec.node_name,
                 in_s=round(fire_at - time.monotonic(), 1))

    def _cancel(self, key: str, event_for: core_pb2.Pod | None) -> None:
        s = self._scheduled.pop(key, None)
        if s is None:
            return
        s.task.cancel()
        if event_for is not None:
            self._recorder.event(event_for, "Normal", "TaintManagerEviction", f"Cancelling deletion of Pod {key}")
            log.info("taint_eviction_cancelled", pod=key)

    async def _evict_at(self, pod: core_pb2.Pod, fire_at: float) -> None:
        await asyncio.sleep(max(0.0, fire_at - time.monotonic()))
        key = key_of(pod)
        self._recorder.event(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {key}")

        def retriable(exc: Exception) -> bool:
            if isinstance(exc, errors.NotFound) or not isinstance(exc, errors.ApiError):
                return False
            log.info("taint_eviction_retry", pod=key, error=str(exc))
            return True

        try:
            await on_error(DELETE_RETRY, retriable, lambda: self._delete(pod))
            DELETIONS.inc()
        except errors.NotFound:
            pass
        except errors.ApiError as exc:
            log.warning("taint_eviction_failed", pod=key, error=str(exc))
        s = self._scheduled.get(key)
        if s is not None and s.fire_at == fire_at:
            del self._scheduled[key]

    async def _delete(self, pod: core_pb2.Pod) -> None:
        """Kubernetes' addConditionAndDeletePod: DisruptionTarget first, then a graceful delete."""
        current = await self._client.pods.get(pod.metadata.name, pod.metadata.namespace)
        if current.metadata.uid != pod.metadata.uid:
            return  # a new pod of the same name: not the one we meant
        if not podconditions.is_disruption_target(current):
            fresh = core_pb2.Pod()
            fresh.CopyFrom(current)
            podconditions.update_condition(fresh.status, podconditions.disruption_target(
                podconditions.DELETION_BY_TAINT_MANAGER, DISRUPTION_MESSAGE))
            await self._client.pods.update_status(fresh)
        await self._client.pods.delete(pod.metadata.name, pod.metadata.namespace, uid=pod.metadata.uid)
        log.info("taint_eviction_deleted", pod=key_of(pod), node=pod.spec.node_name)

