"""Informers shared by every controller of the process, one per kind (client-go's SharedInformerFactory).

A controller asks ``factory.informer(POD)`` while it is built; the factory starts each informer once
and ``wait_for_sync`` returns when every one of them has listed. Two controllers watching pods
therefore share one watch and one cache, as in kube-controller-manager.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar, cast

from google.protobuf.message import Message

from machinery.client import Client
from machinery.informer import Informer
from machinery.kinds import Kind

M = TypeVar("M", bound=Message)


class SharedInformerFactory:
    def __init__(self, client: Client):
        self._client = client
        self._informers: dict[str, Informer[Any]] = {}

    def informer(self, kind: Kind[M, Any]) -> Informer[M]:
        """The process's informer of ``kind`` (every namespace, no selector), made on first use."""
        inf = self._informers.get(kind.plural)
        if inf is None:
            inf = self._informers[kind.plural] = Informer(self._client, kind)
        return cast(Informer[M], inf)

    async def start(self) -> None:
        for inf in self._informers.values():
            await inf.start()

    async def wait_for_sync(self, timeout: float | None = None) -> None:
        await asyncio.gather(*(inf.wait_for_sync(timeout) for inf in self._informers.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(inf.stop() for inf in self._informers.values()))
