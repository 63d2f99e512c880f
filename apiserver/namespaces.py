"""What namespaces have beyond the common verbs: their deletion rules and the finalize subresource.

Kubernetes' namespace storage (pkg/registry/core/namespace/storage): the first delete only marks
the namespace — deletionTimestamp and phase Terminating — and keeps it while its
``spec.finalizers`` are not empty (``NamespaceDeletion``, which the registry's delete follows).
``finalize`` is how the namespace controller, once the namespace's content is gone, takes its
finalizer out of ``spec.finalizers``. A Terminating namespace whose spec.finalizers and
metadata.finalizers are then empty is removed by that write (Kubernetes'
ShouldDeleteNamespaceDuringUpdate), and the answer is its last state.
"""

from __future__ import annotations

from apiserver import strategy
from apiserver.auth import User
from apiserver.fieldmanager import Manager
from apiserver.registry import Registry
from machinery import errors
from machinery.api import core_pb2
from machinery.kinds import NAMESPACE


class NamespaceDeletion:
    """A namespace's deletion rules (registry.DeletionRules)."""

    @staticmethod
    def marks_only(ns: core_pb2.Namespace) -> bool:
        return not ns.metadata.deletion_timestamp or bool(ns.spec.finalizers)

    @staticmethod
    def mark(ns: core_pb2.Namespace) -> None:
        ns.status.phase = "Terminating"

    @staticmethod
    def removable(ns: core_pb2.Namespace) -> bool:
        return not ns.spec.finalizers


class NamespaceSubresources:
    def __init__(self, registry: Registry):
        self.registry = registry

    async def finalize(self, ns: core_pb2.Namespace, user: User, dry_run: bool = False,
                       field_manager: str | None = None) -> core_pb2.Namespace:
        name = ns.metadata.name

        def build(old: core_pb2.Namespace) -> core_pb2.Namespace:
            new = strategy.copy(ns)
            new.metadata.namespace = ""
            return new

        if not name:
            raise errors.Invalid.of(NAMESPACE.name, "", [errors.required("metadata.name", "name is required")])
        return await self.registry.guaranteed_update(
            NAMESPACE, "", name, build, precondition_rv=ns.metadata.resource_version, dry_run=dry_run,
            attributes=self.registry.writes(NAMESPACE, "finalize", user, dry_run),
            prepare=strategy.prepare_for_finalize,
            manager=Manager(field_manager, "finalize") if field_manager is not None else None)
