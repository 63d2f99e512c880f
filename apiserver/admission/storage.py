"""What admission plugins use of the apiserver's storage, as a Protocol the Registry satisfies.

Kubernetes' admission plugins read through informers' listers and write through a client; here
they read the watch cache and write through the registry's compare-and-swap. Naming the narrow
view here, rather than the Registry, keeps the registry (which runs the plugins) and the plugins
from importing each other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from google.protobuf.message import Message

from apiserver.watchcache import WatchCache
from machinery.kinds import Kind

M = TypeVar("M", bound=Message)
L = TypeVar("L", bound=Message)


class AdmissionStorage(Protocol):
    @property
    def cache(self) -> WatchCache:
        """The watch cache: what the listers of Kubernetes' plugins would show."""
        ...

    async def caught_up(self, kind: Kind[Message, Message]) -> None:
        """Wait until the cache holds this apiserver's last write of ``kind``."""
        ...

    async def caught_up_with_etcd(self) -> None:
        """Wait until the cache holds everything etcd holds now (a read of all writes so far)."""
        ...

    async def read(self, kind: Kind[M, L], namespace: str, name: str, fresh: bool = False) -> M | None:
        """A private copy of the object, from the cache or, ``fresh``, from etcd."""
        ...

    async def guaranteed_update(self, kind: Kind[M, L], namespace: str, name: str, build: Callable[[M], M], *,
                                precondition_rv: str = "") -> M:
        """Read, ``build`` the new object from the current one, compare-and-swap; retried on races."""
        ...
