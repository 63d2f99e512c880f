"""Node restriction (Kubernetes' NodeRestriction admission plugin and Node authorizer, in one).

A kubelet (user ``system:node:N``) may read anything, but may only write: its own Node, its own
Lease (``kube-node-lease/N``), the status of pods bound to N, deletion/eviction of pods bound to
N, Events, ResourceSlices of N and ResourceClaim status. Everyone else may do everything except
write ``status.containerStatuses[*].allocatedResources``, which only kubelets report (KEP-1287).
"""

from __future__ import annotations

from google.protobuf.message import Message

from apiserver.admission.interfaces import Attributes
from apiserver.auth import User
from machinery import errors
from machinery.api import core_pb2, resource_pb2
from machinery.kinds import EVENT, LEASE, NODE, POD, RESOURCE_CLAIM, RESOURCE_SLICE, Kind

NODE_LEASE_NAMESPACE = "kube-node-lease"
READ_VERBS = frozenset({"get", "list", "watch"})


def _forbidden(kind: Kind, name: str, user: User, why: str) -> errors.Forbidden:
    target = f'{kind.plural} "{name}"' if name else kind.plural
    return errors.Forbidden(f'{target} is forbidden: User "{user.name}" cannot do this: {why}')


def authorize(user: User, verb: str, kind: Kind, namespace: str, name: str,
              obj: Message | None = None, old: Message | None = None) -> None:
    """Raise Forbidden if ``user`` may not do ``verb`` on the object.

    ``verb``: get, list, watch, create, update, patch, delete, status, binding, resize, eviction.
    ``obj`` is the new object (create/update), ``old`` the stored one.
    """
    node = user.node_name
    if node is None or verb in READ_VERBS:
        return
    if kind is POD:
        stored = old if old is not None else obj
        bound = stored.spec.node_name if isinstance(stored, core_pb2.Pod) else ""
        if verb == "create":
            raise _forbidden(kind, name, user, f'node "{node}" can only create mirror pods, which kplane does not run')
        if verb == "status":
            if bound != node:
                raise _forbidden(kind, name, user,
                                 f'node "{node}" can only update pod status for pods with spec.nodeName set to itself')
            return
        if verb in ("delete", "eviction"):
            if bound != node:
                raise _forbidden(kind, name, user,
                                 f'node "{node}" can only {"evict" if verb == "eviction" else "delete"} pods '
                                 f'with spec.nodeName set to itself')
            return
        raise _forbidden(kind, name, user, f'node "{node}" can only update pod status')
    if kind is NODE:
        if name != node:
            raise _forbidden(kind, name, user, f'node "{node}" is not allowed to modify node "{name}"')
        return
    if kind is LEASE:
        if namespace != NODE_LEASE_NAMESPACE or name != node:
            raise _forbidden(kind, name, user, "can only access node lease with the same name as the requesting node")
        return
    if kind is EVENT:
        return
    if kind is RESOURCE_SLICE:
        slice_node = None
        for o in (obj, old):
            if isinstance(o, resource_pb2.ResourceSlice):
                slice_node = o.spec.node_name if o.spec.HasField("node_name") else ""
                if slice_node != node:
                    raise _forbidden(kind, name, user,
                                     f'node "{node}" can only write ResourceSlices with spec.nodeName set to itself')
        return
    if kind is RESOURCE_CLAIM and verb == "status":
        return
    raise _forbidden(kind, name, user, f'node "{node}" is not allowed to {verb} {kind.plural}')


def check_allocated_resources(user: User, new: core_pb2.Pod, old: core_pb2.Pod) -> None:
    """Only kubelets may write allocatedResources (KEP-1287, "Backward Compatibility and Negative Tests")."""
    if user.is_node:
        return
    old_by_name = {s.name: s for s in old.status.container_statuses}
    old_by_name.update({f"init:{s.name}": s for s in old.status.init_container_statuses})
    pairs = [(s, old_by_name.get(s.name)) for s in new.status.container_statuses]
    pairs += [(s, old_by_name.get(f"init:{s.name}")) for s in new.status.init_container_statuses]
    for s, o in pairs:
        before = dict(o.allocated_resources) if o is not None else {}
        if dict(s.allocated_resources) != before:
            raise errors.Forbidden(
                f'pods "{new.metadata.name}" is forbidden: User "{user.name}" cannot do this: only kubelets may '
                f'set status.containerStatuses[*].allocatedResources')


class NodeRestriction:
    """The plugin: Kubernetes' NodeRestriction admission together with the Node authorizer's rules
    for writes, so it runs first in the chain (authorization comes before admission). The verb is
    the write's (``Attributes.verb``); a pod status write is also checked for allocatedResources."""

    name = "NodeRestriction"

    async def admit(self, a: Attributes) -> None:
        authorize(a.user, a.verb, a.kind, a.namespace, a.name, obj=a.object, old=a.old_object)
        if a.kind is POD and a.subresource == "status" and isinstance(a.object, core_pb2.Pod) \
                and isinstance(a.old_object, core_pb2.Pod):
            check_allocated_resources(a.user, a.object, a.old_object)
