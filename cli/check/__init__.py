"""``kplane check``: replay the event log and check the cluster's invariants.

Shaped like etcd's robustness tests: run, record (the revision-ordered history is the record),
validate. Each rule sees every entry in revision order and reports the revisions that break it;
any violation makes the command exit 1. ``framework.py`` holds what a rule sees (an entry, the
world as of it) and reports (a violation); ``runner.py`` replays the history through every rule
and is the command. Each group of rules has its module, and each rule's class says what it checks:
``binding.py`` (bound-at-most-once, bound-requests-within-allocatable), ``allocation.py``
(allocated-within-allocatable, actuated-within-allocated), ``preemption.py``
(preemption-victims-lower-priority, no-preemption-while-victims-going), ``resize_preemption.py``
(one-victim-set-per-resize), ``deployment.py`` (deployment-surge-and-unavailability),
``devices.py`` (device-allocated-once); ``victims.py`` holds what the preemption rules share.
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
