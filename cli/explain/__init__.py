"""``kplane explain pod NAME``: a pod's whole story across the processes, in revision order.

Read from the cluster's history (the pod's versions, the Events about it or naming it, its
ResourceClaims, the fault marks of a chaos run) and from what the scheduler logs but never writes
to the API (which event and QueueingHint requeued the pod, which plugin gave each reason of a
FailedScheduling message) — kept in the scheduler's log, never in the pod (kube-scheduler-simulator
keeps its per-plugin results in pod annotations and hits the object size limit).

- ``step.py``: a step of the story and the component names it shows;
- ``fit_message.py``: kube-scheduler's "0/N nodes are available: ..." message, parsed;
- ``pod_changes.py``: what changed between two versions of the pod;
- ``event_steps.py``: the Events about the pod, and the Preempted events naming it;
- ``claims.py``: the pod's ResourceClaims: created, allocated, reserved, deallocated;
- ``scheduler_log.py``: the scheduler's JSON log records about the pod;
- ``placement.py``: where a log record goes among revisions (by wall clock);
- ``story.py``: the story itself, built from all of the above (pure: tests build it by hand);
- ``command.py``: reading a saved history file, and printing the story.
"""
