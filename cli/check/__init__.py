"""``kplane check``: replay the event log and check the cluster's invariants.

Shaped like etcd's robustness tests: run, record (the revision-ordered history is the record),
validate. Each rule sees every entry in revision order and reports the revisions that break it;
any violation makes the command exit 1. ``framework.py`` holds what a rule sees (an entry, the
world as of it) and reports (a violation); ``runner.py`` replays the history through every rule
and is the command; each group of rules has its module, ``victims.py`` what the preemption rules
share.

Rules:
- ``bound-at-most-once`` (``binding.py``): a pod's spec.nodeName goes from empty to a node once and
  never changes.
- ``allocated-within-allocatable`` (``allocation.py``): at no revision do the kubelet-allocated
  requests (status.containerStatuses[].allocatedResources) of a node's pods exceed its allocatable.
- ``bound-requests-within-allocatable`` (``binding.py``): no binding over-commits a node — when a
  pod goes from unbound to bound, the requests of the node's pods not finished (Succeeded/Failed)
  fit its allocatable. Checked at bindings, the only moment the scheduler adds load: a pod created
  with spec.nodeName bypasses the scheduler (the kubelet admits it or preempts for it, KEP-1287's
  critical pods) and a resize is the kubelet's to allocate (the rule above); both still count
  towards the node. A pod counts with the kubelet's allocation once reported (a Deferred resize has
  not taken room yet), with its spec's requests before.
- ``actuated-within-allocated`` (``allocation.py``): a container's actual resources
  (status...resources.requests) never show a value the kubelet had not allocated
  (KEP-1287: desired -> allocated -> actuated).
- ``preemption-victims-lower-priority`` (``preemption.py``): every pod a ``Preempted`` event names
  was of lower priority than the pod that preempted it (the event's related object).
- ``no-preemption-while-victims-going`` (``preemption.py``): a pod does not preempt again while a
  victim of its earlier preemption is still going — from the revision it got the DisruptionTarget
  condition (PreemptionByScheduler) or a deletionTimestamp until it finishes or is deleted
  (kube-scheduler DefaultPreemption's eligibility check, KEP-4832's victims in flight). See the
  rule's class.
- ``one-victim-set-per-resize`` (``resize_preemption.py``): a pod whose in-place resize is Deferred
  preempts on its own node once per resize request (its uid and metadata.generation): no new victim
  is chosen for the same request while a victim of an earlier preemption for it — named by a
  Preempted event, or marked on the node and never named (its scheduler died first) — is still
  going (KEP-5836 "Tracking Preemption Nominations to Avoid Double Preemption"). See the rule's
  class.
- ``deployment-surge-and-unavailability`` (``deployment.py``): a RollingUpdate Deployment's pod
  created never brings its pods (through its ReplicaSets; not finished, not being deleted) over
  replicas + maxSurge, and once a rollout started fully available no deletion of an available pod
  leaves fewer than replicas - maxUnavailable available (Kubernetes' deployment controller). See
  the rule's class.
- ``device-allocated-once`` (``devices.py``): at no revision do two ResourceClaims'
  ``status.allocation`` name the same device (driver, pool, device): a device is free for another
  claim only once its claim was deallocated or deleted (Kubernetes docs: Dynamic Resource
  Allocation, "tracking which of those resources have already been allocated to existing
  ResourceClaims").
"""

from cli.check.allocation import ActuatedWithinAllocated, AllocatedWithinAllocatable
from cli.check.binding import BoundAtMostOnce, BoundRequestsWithinAllocatable
from cli.check.deployment import DeploymentSurgeAndUnavailability
from cli.check.devices import DeviceAllocatedOnce
from cli.check.framework import Entry, Rule, Violation, World
from cli.check.preemption import NoPreemptionWhileVictimsGoing, PreemptionVictimsLowerPriority
from cli.check.resize_preemption import OneVictimSetPerResize
from cli.check.runner import check_entries, entries_of, rules, run

__all__ = [
    "ActuatedWithinAllocated",
    "AllocatedWithinAllocatable",
    "BoundAtMostOnce",
    "BoundRequestsWithinAllocatable",
    "DeploymentSurgeAndUnavailability",
    "DeviceAllocatedOnce",
    "Entry",
    "NoPreemptionWhileVictimsGoing",
    "OneVictimSetPerResize",
    "PreemptionVictimsLowerPriority",
    "Rule",
    "Violation",
    "World",
    "check_entries",
    "entries_of",
    "rules",
    "run",
]
