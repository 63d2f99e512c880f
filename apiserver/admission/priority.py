"""Priority admission: resolve a pod's priorityClassName to spec.priority and preemptionPolicy.

As Kubernetes' Priority admission plugin: on pod create, the named PriorityClass (or the
globalDefault one when no name is given) sets ``spec.priority`` and ``spec.preemptionPolicy``;
an unknown name is rejected; a pod may not give a priority that differs from its class. Also
guards PriorityClass creation: only one globalDefault may exist. The two system classes are
built in, as Kubernetes creates them at start.
"""

from __future__ import annotations

from typing import Mapping

from apiserver.admission.interfaces import Attributes, Operation
from apiserver.admission.storage import AdmissionStorage
from machinery import errors
from machinery.api import core_pb2, scheduling_pb2
from machinery.kinds import POD, PRIORITY_CLASS

SYSTEM_CLUSTER_CRITICAL = "system-cluster-critical"
SYSTEM_NODE_CRITICAL = "system-node-critical"
SYSTEM_PRIORITY_CLASSES = {SYSTEM_CLUSTER_CRITICAL: 2000000000, SYSTEM_NODE_CRITICAL: 2000001000}
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"


def system_priority_classes() -> list[scheduling_pb2.PriorityClass]:
    out = []
    for name, value in SYSTEM_PRIORITY_CLASSES.items():
        pc = scheduling_pb2.PriorityClass(api_version="scheduling.k8s.io/v1", kind="PriorityClass", value=value,
                                          description="Used for system critical pods that must run in the cluster, "
                                                      "but can be moved to another node if necessary."
                                          if name == SYSTEM_CLUSTER_CRITICAL else
                                          "Used for system critical pods that must not be moved from their current "
                                          "node.")
        pc.metadata.name = name
        pc.preemption_policy = DEFAULT_PREEMPTION_POLICY
        out.append(pc)
    return out


def admit_pod(pod: core_pb2.Pod, classes: Mapping[str, scheduling_pb2.PriorityClass]) -> None:
    """Set spec.priority / spec.preemptionPolicy from the pod's PriorityClass (create only)."""
    name = pod.spec.priority_class_name
    pc = None
    if name:
        pc = classes.get(name)
        if pc is None:
            raise errors.Forbidden(f'pods "{pod.metadata.name}" is forbidden: '
                                   f'no PriorityClass with name {name} was found')
    else:
        defaults = [c for c in classes.values() if c.global_default]
        if defaults:
            # The lowest-valued default wins if several slipped in (as Kubernetes does).
            pc = min(defaults, key=lambda c: c.value)
            pod.spec.priority_class_name = pc.metadata.name
    value = pc.value if pc is not None else 0
    policy = (pc.preemption_policy if pc is not None and pc.HasField("preemption_policy")
              else DEFAULT_PREEMPTION_POLICY)
    if pod.spec.HasField("priority") and pod.spec.priority != value:
        raise errors.Forbidden(
            f'pods "{pod.metadata.name}" is forbidden: the integer value of priority ({pod.spec.priority}) must not be '
            f'provided in pod spec; priority admission controller computed {value} from the given PriorityClass name')
    if pod.spec.HasField("preemption_policy") and pod.spec.preemption_policy != policy:
        raise errors.Forbidden(
            f'pods "{pod.metadata.name}" is forbidden: the string value of PreemptionPolicy '
            f'({pod.spec.preemption_policy}) must not be provided in pod spec; priority admission controller computed '
            f'{policy} from the given PriorityClass name')
    pod.spec.priority = value
    pod.spec.preemption_policy = policy


def admit_priority_class(pc: scheduling_pb2.PriorityClass, classes: Mapping[str, scheduling_pb2.PriorityClass]) -> None:
    """Only one PriorityClass may be the globalDefault."""
    if not pc.global_default:
        return
    for other in classes.values():
        if other.global_default and other.metadata.name != pc.metadata.name:
            raise errors.Forbidden(
                f'priorityclasses "{pc.metadata.name}" is forbidden: PriorityClass {other.metadata.name} is already '
                f'marked as default. Only one default can exist')


class Priority:
    """The plugin: a pod's create gets its class's priority; a PriorityClass's create is checked."""

    name = "Priority"

    def __init__(self, storage: AdmissionStorage):
        self._storage = storage

    async def admit(self, a: Attributes) -> None:
        if a.operation is not Operation.CREATE or a.subresource or a.kind not in (POD, PRIORITY_CLASS):
            return
        classes = self._storage.cache[PRIORITY_CLASS].store
        obj = a.object
        if isinstance(obj, core_pb2.Pod) and obj.spec.priority_class_name and obj.spec.priority_class_name not in {
                pc.metadata.name for pc in classes.values()}:
            # A class created a moment ago may not have reached the watch cache yet: read the
            # cache at etcd's current revision before refusing the pod (read-your-writes).
            await self._storage.caught_up_with_etcd()
        by_name = {pc.metadata.name: pc for pc in classes.values()}
        if isinstance(obj, core_pb2.Pod):
            admit_pod(obj, by_name)
        elif isinstance(obj, scheduling_pb2.PriorityClass):
            admit_priority_class(obj, by_name)
