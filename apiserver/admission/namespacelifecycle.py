"""Namespace lifecycle admission (Kubernetes' NamespaceLifecycle plugin) and the system namespaces.

- A namespaced object may only be created in a namespace that exists (``namespaces "NS" not
  found``) and is not being deleted (Forbidden: ``unable to create new content in namespace NS
  because it is being terminated``). Updates, patches and deletes of existing objects are let
  through (see docs/api.md: kplane checks creates only).
- The system namespaces may not be deleted (Forbidden: ``this namespace may not be deleted``):
  Kubernetes' immortal three (default, kube-system, kube-public), and kube-node-lease too, because
  kplane has no namespace controller yet to finish a deletion, and a kube-node-lease left
  Terminating would refuse every new node's Lease.
- The apiserver creates the system namespaces at start when absent, as Kubernetes' system
  namespaces controller does (``system_namespaces``).

The namespace is read from the watch cache; when the cache does not have it, or it was deleted
through this apiserver in the last 30 s and the cache still says Active, it is read from etcd
(Kubernetes' live lookup), so a create right after the namespace's create or delete sees it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Final

from apiserver.admission.interfaces import Attributes, Operation
from apiserver.admission.storage import AdmissionStorage
from machinery import errors
from machinery.api import core_pb2
from machinery.kinds import NAMESPACE, Kind

NAMESPACE_DEFAULT: Final = "default"
NAMESPACE_SYSTEM: Final = "kube-system"
NAMESPACE_PUBLIC: Final = "kube-public"
NAMESPACE_NODE_LEASE: Final = "kube-node-lease"
SYSTEM_NAMESPACES: Final = (NAMESPACE_DEFAULT, NAMESPACE_SYSTEM, NAMESPACE_PUBLIC, NAMESPACE_NODE_LEASE)
IMMORTAL_NAMESPACES: Final = frozenset(SYSTEM_NAMESPACES)
# Kubernetes' forceLiveLookupTTL.
LIVE_LOOKUP_SECONDS: Final = 30.0

# (name, fresh): the namespace from the watch cache (from etcd when the cache lacks it, or when
# ``fresh``); None if it does not exist.
NamespaceLookup = Callable[[str, bool], Awaitable[core_pb2.Namespace | None]]


def system_namespaces() -> list[core_pb2.Namespace]:
    """The namespaces the apiserver makes sure exist."""
    out = []
    for name in SYSTEM_NAMESPACES:
        ns = core_pb2.Namespace(api_version=NAMESPACE.api_version, kind=NAMESPACE.name)
        ns.metadata.name = name
        out.append(ns)
    return out


class NamespaceLifecycle:
    """The admission plugin; it remembers the namespaces deleted through this apiserver lately."""

    name = "NamespaceLifecycle"

    def __init__(self, storage: AdmissionStorage | None = None, clock: Callable[[], float] = time.monotonic):
        self._storage = storage
        self._clock = clock
        self._live_lookup: dict[str, float] = {}  # namespace -> until when to read it from etcd

    async def admit(self, a: Attributes) -> None:
        """Creates of namespaced objects need a live namespace; a namespace's delete is checked
        and remembered (Kubernetes' forceLiveLookupCache)."""
        if a.operation is Operation.CREATE and not a.subresource:
            await self.admit_create(a.kind, a.namespace, a.name, self._lookup)
        elif a.operation is Operation.DELETE and a.kind is NAMESPACE:
            self.admit_delete(a.kind, a.name)
            self.deleting(a.name)

    async def _lookup(self, name: str, fresh: bool) -> core_pb2.Namespace | None:
        assert self._storage is not None, "NamespaceLifecycle admits only with the apiserver's storage"
        return await self._storage.read(NAMESPACE, "", name, fresh)

    def deleting(self, name: str) -> None:
        """A delete of namespace ``name`` is under way: read it live for a while."""
        now = self._clock()
        self._live_lookup = {n: t for n, t in self._live_lookup.items() if t > now}
        self._live_lookup[name] = now + LIVE_LOOKUP_SECONDS

    def _live(self, name: str) -> bool:
        until = self._live_lookup.get(name)
        return until is not None and until > self._clock()

    async def admit_create(self, kind: Kind, namespace: str, name: str, lookup: NamespaceLookup) -> None:
        """Raise NotFound or Forbidden unless ``namespace`` exists and is not being deleted."""
        if not kind.namespaced:
            return
        ns = await lookup(namespace, False)
        if ns is not None and ns.status.phase != "Terminating" and self._live(namespace):
            ns = await lookup(namespace, True)
        if ns is None:
            raise errors.not_found(NAMESPACE.plural, namespace)
        if ns.status.phase == "Terminating":
            raise errors.Forbidden(f'{kind.plural} "{name}" is forbidden: unable to create new content in namespace '
                                   f'{namespace} because it is being terminated')

    @staticmethod
    def admit_delete(kind: Kind, name: str) -> None:
        """Raise Forbidden for the deletion of a system namespace."""
        if kind is NAMESPACE and name in IMMORTAL_NAMESPACES:
            raise errors.Forbidden(f'{NAMESPACE.plural} "{name}" is forbidden: this namespace may not be deleted')
