"""Informer events into the cache and the queue (kube-scheduler's eventhandlers.go).

``EventHandlers`` has one handler per informer event: pods (``on_pod_add``, ``on_pod_update``,
``on_pod_delete``), nodes (``on_node_*``) and the Dynamic Resource Allocation objects
(``on_claim_*``, ``on_slice_*``, ``on_device_class_*``). A bound pod whose resize is Deferred
(KEP-5836) is in the queue too: ``EventHandlers.wants_queue``. Which pods are watched:
``POD_FIELD_SELECTOR``.
"""

from __future__ import annotations

from machinery.api import core_pb2, resource_pb2
from machinery.informer import key_of
from machinery.logging import get_logger
from scheduler import metrics
from scheduler.context import EventContext
from scheduler.framework.deferred_resize import (
    is_deferred_resize,
    node_disables_resize_preemption,
    preemption_disabled_by_condition,
)
from scheduler.framework.pod_info import PodInfo, pod_priority
from scheduler.framework.types import (
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_DEVICE_CLASS_ADD,
    EVENT_DEVICE_CLASS_UPDATE,
    EVENT_NODE_ADD,
    EVENT_NODE_DELETE,
    EVENT_RESOURCE_CLAIM_ADD,
    EVENT_RESOURCE_CLAIM_DELETE,
    EVENT_RESOURCE_CLAIM_UPDATE,
    EVENT_RESOURCE_SLICE_ADD,
    EVENT_RESOURCE_SLICE_UPDATE,
    node_scheduling_property_changes,
    pod_scheduling_property_changes,
)

log = get_logger()

# Pods the scheduler watches are those not finished (``status.phase`` neither Succeeded nor Failed;
# a pod that finishes leaves the watch as a deletion, freeing its room).
POD_FIELD_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"
# scheduler_queue_incoming_pods_total's event label for a deferred resize entering the queue.
DEFERRED_RESIZE_EVENT = "AssignedPodResize"


def _requests(pod: core_pb2.Pod) -> dict[str, int]:
    return PodInfo(pod).requests


def _not_above(pod: core_pb2.Pod):
    """Pods of lower or equal priority: those a nomination of ``pod`` holds room against."""
    priority = pod_priority(pod)
    return lambda other: pod_priority(other) <= priority


class EventHandlers:
    """One handler per informer event. A bound pod goes to the cache; its arrival, update or
    deletion is a cluster event that may requeue unschedulable pods, through the rejecting plugins'
    QueueingHints. Node adds, updates (split into allocatable / label / taint / condition changes)
    and deletes go to the cache and are cluster events too. So are ResourceClaim adds, updates and
    deletes, ResourceSlice and DeviceClass adds and updates (Dynamic Resource Allocation: the
    DynamicResources plugin's hints decide; ``scheduler.dra_manager`` has already taken the change
    into its view)."""

    def __init__(self, sched: EventContext):
        self.sched = sched
        self._resize_disabled: set[str] = set()  # uids of deferred pods kept out: preemption disabled

    def responsible_for(self, pod: core_pb2.Pod) -> bool:
        return pod.spec.scheduler_name in self.sched.frameworks

    # ------------------------------------------------------------ deferred resizes (KEP-5836)

    def wants_queue(self, pod: core_pb2.Pod) -> bool:
        """A bound pod the queue should hold: its resize is Deferred and may preempt. One kept out
        because preemption is disabled for it is counted once, when it starts being kept out.

        With SchedulerPreemptionForPodResize (KEP-5836 "Detecting Deferred Resizes in UpdatePod"), a
        bound pod of one of this scheduler's profiles whose resize is Deferred is also in the queue:
        put there when the condition appears (or at start, from the informer's first list: "Cold-Start
        Re-Queueing"), updated in the cache first and then in the queue, taken out of whichever
        sub-queue holds it when the condition goes (the resize was actuated or reverted), when
        PodResizePreemptionDisabled appears, or when it is deleted.

        A pod in its graceful shutdown is not held (nor one whose deletion starts while it is
        held): its resize is actuated best-effort by the kubelet (KEP-1287 "Lifecycle Nuances"),
        and evicting other pods to make room for a pod that is going would disrupt them for
        nothing."""
        s = self.sched
        uid = pod.metadata.uid
        if not (s.resize_preemption and is_deferred_resize(pod) and self.responsible_for(pod)
                and not pod.metadata.deletion_timestamp):
            self._resize_disabled.discard(uid)
            return False
        if preemption_disabled_by_condition(pod):
            reason = "PodResizePreemptionDisabled"
        elif node_disables_resize_preemption(s.cache.node(pod.spec.node_name)):
            reason = "NodePodPreemptionPolicy"
        else:
            self._resize_disabled.discard(uid)
            return True
        if uid not in self._resize_disabled:
            self._resize_disabled.add(uid)
            metrics.RESIZE_SKIPPED.labels(reason).inc()
            log.info("resize_preemption_disabled", pod=key_of(pod),
                     node=pod.spec.node_name, reason=reason)
        return False

    def _sync_deferred(self, old: core_pb2.Pod | None, new: core_pb2.Pod) -> None:
        """Put the bound pod in the queue, update it there, or take it out (the cache is updated already)."""
        q = self.sched.queue
        if not self.wants_queue(new):
            q.delete(new)
        elif q.where(new):
            q.update(old, new)
        else:
            q.add(new, DEFERRED_RESIZE_EVENT)

    # ------------------------------------------------------------ pods

    def on_pod_add(self, pod: core_pb2.Pod) -> None:
        """A bound pod to the cache (its arrival a cluster event); an unbound pod of one of this
        scheduler's profiles to the queue."""
        s = self.sched
        if pod.spec.node_name:
            s.cache.add_pod(pod)
            s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD, None, pod)
            if s.resize_preemption and self.wants_queue(pod):
                s.queue.add(pod, DEFERRED_RESIZE_EVENT)
        elif self.responsible_for(pod):
            s.queue.add(pod)

    def on_pod_update(self, old: core_pb2.Pod, new: core_pb2.Pod) -> None:
        """A bound pod's update (labels, a KEP-1287 scale-down) is a cluster event. An unbound pod of
        one of this scheduler's profiles is updated in the queue; one that gets bound (by us or
        anyone) leaves the queue for the cache. A nominated pod holds room on its node for pods of
        lower or equal priority: when its nomination moves, that room is freed as if a bound pod had
        gone (an AssignedPod delete for them)."""
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
            s.cache.update_pod(old, new)  # the cache first, then the queue (KEP-5836)
            uid = new.metadata.uid
            if s.resize_preemption and (is_deferred_resize(new) or is_deferred_resize(old)):
                self._sync_deferred(old, new)
                others = lambda pod: pod.metadata.uid != uid  # noqa: E731 (its own update was the queue's)
            else:
                others = None
            for event in pod_scheduling_property_changes(new, old, _requests):
                s.queue.move_all_to_active_or_backoff(event, old, new, others)
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
        """A bound pod leaves the cache (a cluster event); an unbound one leaves the queue, and the
        room a nominated one held on its node for pods of lower or equal priority is freed as if a
        bound pod had gone (an AssignedPod delete for them)."""
        s = self.sched
        if pod.spec.node_name:
            s.cache.remove_pod(pod)
            if s.resize_preemption:
                s.queue.delete(pod)
                self._resize_disabled.discard(pod.metadata.uid)
            s.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE, pod, None)
            return
        if self.responsible_for(pod):
            nominated = pod.status.nominated_node_name or s.queue.nominator.node_of(pod)
            s.queue.delete(pod)
            rejected = False
            for fw in s.frameworks.values():
                waiting = fw.waiting_pods.get(pod.metadata.uid)
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
        s = self.sched
        s.cache.add_node(node)
        if s.resize_preemption:
            # Its deferred pods may have been listed before it (the informers list concurrently):
            # an old kubelet's node policy is only known now.
            self._resync_deferred_on(node.metadata.name)
        s.queue.move_all_to_active_or_backoff(EVENT_NODE_ADD, None, node)

    def _resync_deferred_on(self, node_name: str) -> None:
        for pod in self.sched.cache.pods_on(node_name):
            if is_deferred_resize(pod):
                self._sync_deferred(None, pod)

    def on_node_update(self, old: core_pb2.Node, new: core_pb2.Node) -> None:
        """For a kubelet too old to set the deferred pods' condition, a change of its Node's
        podPreemptionPolicy re-decides its deferred pods (KEP-5836)."""
        s = self.sched
        s.cache.update_node(old, new)
        if s.resize_preemption and (
                old.spec.pod_preemption_policy.disable_resize_preemption
                != new.spec.pod_preemption_policy.disable_resize_preemption
                or old.status.node_info.kubelet_version != new.status.node_info.kubelet_version):
            # An old kubelet does not tell its pods about the policy: the scheduler reads it here.
            self._resync_deferred_on(new.metadata.name)
        for event in node_scheduling_property_changes(new, old):
            s.queue.move_all_to_active_or_backoff(event, old, new)

    def on_node_delete(self, node: core_pb2.Node) -> None:
        self.sched.cache.remove_node(node)
        self.sched.queue.move_all_to_active_or_backoff(EVENT_NODE_DELETE, node, None)

    # ------------------------------------------------------------ Dynamic Resource Allocation

    def on_claim_add(self, claim: resource_pb2.ResourceClaim) -> None:
        self.sched.queue.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_ADD, None, claim)

    def on_claim_update(self, old: resource_pb2.ResourceClaim, new: resource_pb2.ResourceClaim) -> None:
        if old.metadata.resource_version == new.metadata.resource_version:
            return  # a relist repeating what we have
        self.sched.queue.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_UPDATE, old, new)

    def on_claim_delete(self, claim: resource_pb2.ResourceClaim) -> None:
        self.sched.queue.move_all_to_active_or_backoff(EVENT_RESOURCE_CLAIM_DELETE, claim, None)

    def on_slice_add(self, slice_: resource_pb2.ResourceSlice) -> None:
        self.sched.queue.move_all_to_active_or_backoff(EVENT_RESOURCE_SLICE_ADD, None, slice_)

    def on_slice_update(self, old: resource_pb2.ResourceSlice, new: resource_pb2.ResourceSlice) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self.sched.queue.move_all_to_active_or_backoff(EVENT_RESOURCE_SLICE_UPDATE, old, new)

    def on_device_class_add(self, device_class: resource_pb2.DeviceClass) -> None:
        self.sched.queue.move_all_to_active_or_backoff(EVENT_DEVICE_CLASS_ADD, None, device_class)

    def on_device_class_update(self, old: resource_pb2.DeviceClass, new: resource_pb2.DeviceClass) -> None:
        if old.metadata.resource_version != new.metadata.resource_version:
            self.sched.queue.move_all_to_active_or_backoff(EVENT_DEVICE_CLASS_UPDATE, old, new)
