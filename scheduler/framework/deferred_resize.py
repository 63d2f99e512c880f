"""Deferred in-place resizes as the scheduler sees them (KEP-5836: Scheduler Preemption for In-Place
Pod Resize).

- ``is_deferred_resize``: what a deferred resize pod is;
- ``wants_resize_preemption``: whether the scheduler queues it, and what it then does with it;
- ``resize_preemption_disabled``: when it is left alone;
- ``resize_request``: one resize request, as events, metrics and ``kplane check`` speak of it;
- ``skipped_for_deferred_resize``: the plugins that Skip such a pod.
"""

from __future__ import annotations

from machinery.api import core_pb2
from machinery.featuregates import introduced
from machinery.version import Version, VersionError

POD_RESIZE_PENDING = "PodResizePending"
DEFERRED = "Deferred"
POD_RESIZE_PREEMPTION_DISABLED = "PodResizePreemptionDisabled"

# The first kubelet release that propagates the Node's podPreemptionPolicy to its pods: the one
# KEP-5836's gate came in at.
NODE_POLICY_KUBELET = introduced("SchedulerPreemptionForPodResize")
# The feature a kubelet that propagates it declares (KEP-5328), by its gate's name.
NODE_POLICY_FEATURE = "SchedulerPreemptionForPodResize"


def is_deferred_resize(pod: core_pb2.Pod) -> bool:
    """Bound, with ``PodResizePending=True`` reason ``Deferred`` (KEP-5836 "Identify Deferred Status"),
    as upstream's ``IsPodResizeDeferred`` reads it: the reason alone, whatever the condition's
    ``observedGeneration``. A request changed since the kubelet deferred the last one (resized
    again, or reverted) is still the pod's deferred resize, and NodeResourcesFit's hint for the
    pod's own update brings it back at once ("Failures and Reconsideration"): the cycle judges the
    new request without waiting for the kubelet to defer it again. That needs no generation check
    to be right: a reverted request fits and is parked (nothing is preempted for it), and a larger
    one would be deferred by the kubelet anyway.

    A *deferred resize pod* is a pod already bound to a node (``spec.nodeName``) whose kubelet
    reports ``PodResizePending=True`` with reason ``Deferred``: its new requests (KEP-1287's desired
    resources) do not fit the node now.
    """
    if not pod.spec.node_name:
        return False
    for c in pod.status.conditions:
        if c.type == POD_RESIZE_PENDING:
            return c.status == "True" and c.reason == DEFERRED
    return False


def preemption_disabled_by_condition(pod: core_pb2.Pod) -> bool:
    """The kubelet set ``PodResizePreemptionDisabled=True`` on the pod."""
    for c in pod.status.conditions:
        if c.type == POD_RESIZE_PREEMPTION_DISABLED:
            return c.status == "True"
    return False


def kubelet_knows_node_policy(node: core_pb2.Node) -> bool:
    """Whether the node's kubelet propagates the node's podPreemptionPolicy to pods itself: by
    what it declares (KEP-5328 Node Declared Features: ``status.declaredFeatures`` names
    SchedulerPreemptionForPodResize when its gate is on; a kubelet of the right version with the
    gate off propagates nothing), else by ``status.nodeInfo.kubeletVersion`` for a node that
    declares no features at all. An unparsable or missing version counts as new: the fallback is
    for kubelets known not to propagate."""
    declared = node.status.declared_features
    if declared:
        return NODE_POLICY_FEATURE in declared
    try:
        version = Version.parse(node.status.node_info.kubelet_version)
    except VersionError:
        return True
    return version >= NODE_POLICY_KUBELET


def node_disables_resize_preemption(node: core_pb2.Node | None) -> bool:
    """The scheduler's fallback for old kubelets: the Node's own policy, read directly."""
    if node is None or kubelet_knows_node_policy(node):
        return False
    return bool(node.spec.pod_preemption_policy.disable_resize_preemption)


def resize_preemption_disabled(pod: core_pb2.Pod, node: core_pb2.Node | None) -> bool:
    """A deferred resize pod is left alone (kept out of the queue) while preemption for its resize
    is disabled:

    - its kubelet says so with ``PodResizePreemptionDisabled=True`` (KEP-5836 "PodResizePreemptionDisabled
      Pod Condition"; the kubelet sets it from its Node's ``spec.podPreemptionPolicy``):
      ``preemption_disabled_by_condition``;
    - or, for a kubelet too old to know that policy (before 1.37, where its gate came in; "Version
      Skew Strategy"), the scheduler reads the Node's ``spec.podPreemptionPolicy.disableResizePreemption``
      itself: a non-empty list disables it (``node_disables_resize_preemption``).
    """
    return preemption_disabled_by_condition(pod) or node_disables_resize_preemption(node)


def wants_resize_preemption(pod: core_pb2.Pod, node: core_pb2.Node | None) -> bool:
    """A deferred resize pod the scheduler should hold in its queue: preemption is not disabled.

    With the SchedulerPreemptionForPodResize gate the scheduler queues such a pod, beside its copy in
    the cache, and runs it through a restricted cycle: its own node only, resource fit only, then
    DefaultPreemption ("Design Details").
    """
    return is_deferred_resize(pod) and not resize_preemption_disabled(pod, node)


def resize_request(pod: core_pb2.Pod) -> str:
    """``<uid>/<generation>``: one resize request of one pod.

    A resize *request* is the pod's uid and ``metadata.generation`` (the apiserver bumps the
    generation on every resize): events, metrics and ``kplane check`` speak of requests.
    """
    return f"{pod.metadata.uid}/{pod.metadata.generation}"


def skipped_for_deferred_resize(enabled: bool, pod: core_pb2.Pod) -> bool:
    """For a plugin's PreFilter: a deferred resize cycle checks resource fit only, so every plugin
    but NodeName and NodeResourcesFit answers Skip for such a pod ("Processing Deferred Resizes in
    the Scheduling Cycle": "All other plugins ... return Skip for Deferred pods"). ``enabled`` is
    the plugin's SchedulerPreemptionForPodResize feature."""
    return enabled and is_deferred_resize(pod)
