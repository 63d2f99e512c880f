"""Informer events into the cache and the queue (kube-scheduler's eventhandlers.go).

Pods the scheduler watches are those not finished (``status.phase`` neither Succeeded nor
Failed; a pod that finishes leaves the watch as a deletion, freeing its room):

- a bound pod goes to the cache; its arrival, update (labels, a KEP-1287 scale-down) or
  deletion is a cluster event that may requeue unschedulable pods, through the rejecting
  plugins' QueueingHints;
- an unbound pod of one of this scheduler's profiles goes to the queue (add, update, delete);
  one that gets bound (by us or anyone) leaves the queue for the cache. A nominated pod holds
  room on its node for pods of lower or equal priority: when its nomination moves or it is
  deleted, that room is freed as if a bound pod had gone (an AssignedPod delete for them).

Node adds, updates (split into allocatable / label / taint / condition changes) and deletes go
to the cache and are cluster events too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from machinery.api import core_pb2
from machinery.logging import get_logger
from scheduler.framework.pod_info import PodInfo, pod_priority
from scheduler.framework.types import (EVENT_ASSIGNED_POD_ADD, EVENT_ASSIGNED_POD_DELETE, EVENT_NODE_ADD,
                                       EVENT_NODE_DELETE, node_scheduling_property_changes,
                                       pod_scheduling_property_changes)

if TYPE_CHECKING:
    from scheduler.scheduler import Scheduler

log = get_logger()

POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


def _requests(pod: core_pb2.Pod) -> dict[str, int]:
    return PodInfo(pod).requests


def _not_above(pod: core_pb2.Pod):
    """Pods of lower or equal priority: those a nomination of ``pod`` holds room against."""
    priority = pod_priority(pod)
    return lambda other: pod_priority(other) <= priority


class EventHandlers:
    def __init__(self, sched: "Scheduler"):
        self.sched = sched

    def responsible_for(self, pod: core_pb2.Pod) -> bool:
        return pod.spec.scheduler_name in self.sched.frameworks

    # ------------------------------------------------------------ pods

    def on_pod_add(self, pod: core_pb2.Pod) -> None:
        s = self.sched
        if pod.spec.node_name:
            s.cache.add_pod(pod)
            s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, pod)
        elif self.responsible_for(pod):
            s.queue.add(pod)

    def on_pod_update(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        s = self.sched
        if old.metadata.resource_version == new.metadata.resource_version:
            return  # a relist repeating what we have
        if new.spec.node_name:
            if not old.spec.node_name:
                # Just bound: out of the queue, into the cache.
                if self.responsible_for(old):
                    s.queue.delete(old)
                s.cache.add_pod(new)
                s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, new)
                return
            s.cache.update_pod(old, new)
            for event in pod_scheduling_property_changes(new, old, _requests):
                s.queue.move_all_to_active_or_backoff(event, old, new)
            return
        if not self.responsible_for(new):
            return
        if s.cache.is_assumed(new):
            return  # being bound: the queue no longer has it
        s.queue.update(old, new)
        nominated = old.status.nominated_node_name
        if nominated and nominated != new.status.nominated_node_name:
            s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, old, None, _not_above(new))

    def on_pod_delete(self, pod: core_pb2.Pod) -> None:
        s = self.sched
        if pod.spec.node_name:
            s.cache.remove_pod(pod)
            s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)
            return
        if self.responsible_for(pod):
            nominated = pod.status.nominated_node_name or s.queue.nominator.node_of(pod)
            s.queue.delete(pod)
            rejected = False
            for fw in s.frameworks.values():
                waiting = fw.handle.waiting_pods.get(pod.metadata.uid)
                if waiting is not None:
                    waiting.reject("", "removed")
                    rejected = True
            # A pod waiting at Permit held its node's room (assumed); a nominated one held it for
            # pods of lower or equal priority: either is now free.
            if rejected:
                s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)
            elif nominated:
                s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None, _not_above(pod))

    # ------------------------------------------------------------ nodes

    def on_node_add(self, node: core_pb2.Node) -> None:
        self.sched.cache.add_node(node)
        self.sched.queue.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node)

    def on_node_update(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        self.sched.cache.update_node(old, new)
        for event in node_scheduling_property_changes(new, old):
            self.sched.queue.move_all_to_active_or_backoff(event, old, new)

    def on_node_delete(self, node: core_pb2.Node) -> None:
        self.sched.cache.remove_node(node)
        self.sched.queue.move_all_to_active_or_backoff(EVENT_NODE_DELETE, node, None)
