"""PodResizeValidator admission: a resize the pod's node can never hold is refused at once.

Kubernetes 1.36 (plugin/pkg/admission/podresize) moved two of the kubelet's Infeasible verdicts
(KEP-1287 "Resize Status") into the apiserver, so a client learns at once rather than from a
``PodResizePending=Infeasible`` condition later: on an update through the ``resize`` subresource
of a bound pod whose generation changed (its spec did), with InPlacePodVerticalScaling on,

1. a node labelled ``kubernetes.io/os`` other than linux: 403 "pod resize is only supported on
   linux nodes, node "N" is "windows"" (cause ``UnsupportedPlatform``);
2. the pod's requests (PodRequests of the spec, init containers and overhead counted) above the
   node's allocatable cpu or memory: 403 "node didn't have enough allocatable resources: cpu,
   requested: 5000, allocatable: 4000" (millicores, bytes; cause ``NodeCapacity``).

A node the apiserver does not know: 403 "node "N" not found". The kubelet keeps its own check
(kubelet/allocation/manager.py): an older apiserver, or a node whose allocatable shrank since,
still leaves the resize to it. kplane runs the plugin when the apiserver emulates 1.36 or later.
"""

from __future__ import annotations

from typing import Final

from apiserver.admission.interfaces import Attributes, Operation
from apiserver.admission.storage import AdmissionStorage
from machinery import errors, resources
from machinery.api import core_pb2
from machinery.kinds import NODE, POD
from machinery.quantity import Quantity, parse_quantity
from machinery.version import Version

NAME: Final = "PodResizeValidator"
SINCE: Final = Version(1, 36)
OS_LABEL: Final = "kubernetes.io/os"
REASON_NODE_CAPACITY: Final = "NodeCapacity"
REASON_UNSUPPORTED_PLATFORM: Final = "UnsupportedPlatform"


def unsupported_platform(node: core_pb2.Node) -> str | None:
    """A node labelled with an OS other than linux cannot resize (no label: let it try)."""
    os_name = node.metadata.labels.get(OS_LABEL)
    if os_name is None or os_name == "linux":
        return None
    return f'pod resize is only supported on linux nodes, node "{node.metadata.name}" is "{os_name}"'


def beyond_allocatable(pod: core_pb2.Pod, node: core_pb2.Node) -> str | None:
    """The cpu (millicores) and memory (bytes) the pod's spec requests beyond the node's
    allocatable, in Kubernetes' words; None when both fit."""
    requests = resources.pod_requests(pod, use_status_resources=False)
    allocatable = node.status.allocatable
    over = []
    for name, unit in (("cpu", Quantity.milli_value), ("memory", Quantity.value)):
        requested = requests.get(name, 0)
        have = unit(parse_quantity(allocatable[name])) if name in allocatable else 0
        if requested > have:
            over.append(f"{name}, requested: {requested}, allocatable: {have}")
    return "node didn't have enough allocatable resources: " + "; ".join(over) if over else None


class PodResizeValidator:
    """The plugin (validating only): see the module."""

    name = NAME

    def __init__(self, storage: AdmissionStorage, in_place_enabled: bool = True):
        self._storage = storage
        self._in_place_enabled = in_place_enabled

    async def validate(self, a: Attributes) -> None:
        if not self._in_place_enabled or a.operation is not Operation.UPDATE or a.kind is not POD \
                or a.subresource != "resize":
            return
        pod, old = a.object, a.old_object
        if not isinstance(pod, core_pb2.Pod) or not isinstance(old, core_pb2.Pod) or not pod.spec.node_name:
            return
        if pod.metadata.generation == old.metadata.generation:
            return  # the spec did not change
        node = await self._storage.read(NODE, "", pod.spec.node_name)
        prefix = f'pods "{pod.metadata.name}" is forbidden: '
        if node is None:
            raise errors.Forbidden(prefix + f'node "{pod.spec.node_name}" not found')
        for why, cause in ((unsupported_platform(node), REASON_UNSUPPORTED_PLATFORM),
                           (beyond_allocatable(pod, node), REASON_NODE_CAPACITY)):
            if why is not None:
                raise errors.Forbidden(prefix + why, causes=[cause])
