"""The apiserver's etcd client: the only code in kplane that talks to etcd.

Built on aetcd's generated etcd v3 stubs (KV, Watch, Maintenance) over one gRPC channel to every
endpoint (``pick_first`` fails over to the next member when one dies), with a timeout on every
call. It speaks in keys, values and revisions; the storage layer above gives them meaning.
"""

from __future__ import annotations

import asyncio
import socket
import time
from dataclasses import dataclass
from typing import AsyncIterator, TypeVar

import grpc
from aetcd import rpc
from prometheus_client import Histogram

from machinery import errors
from machinery.logging import get_logger

_Stub = TypeVar("_Stub")  # one of aetcd's gRPC stubs, once connect() made it

log = get_logger()

_REQUEST_DURATION = Histogram(
    "etcd_request_duration_seconds", "Etcd request latency in seconds for each operation and object type.",
    ["operation", "type"], buckets=(0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))

DEFAULT_TIMEOUT = 5.0
_COMPACTED = "required revision has been compacted"
_TOO_LARGE = ("etcdserver: request is too large", "received message larger than max")


class EtcdError(errors.Unavailable):
    """etcd could not answer (unreachable, timed out, no leader)."""


class CompactedError(Exception):
    """The requested revision was compacted away."""

    def __init__(self, compact_revision: int = 0):
        super().__init__(f"revision compacted (compact revision {compact_revision})")
        self.compact_revision = compact_revision


@dataclass(frozen=True)
class KV:
    key: str
    value: bytes
    mod_revision: int
    create_revision: int


def prefix_end(prefix: bytes) -> bytes:
    """The range end selecting every key starting with ``prefix``."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"


def _target(endpoints: list[str]) -> str:
    """A gRPC target for all endpoints: ``ipv4:a:p,b:p`` so pick_first can fail over."""
    addrs: list[str] = []
    for ep in endpoints:
        ep = ep.strip().removeprefix("http://").removeprefix("https://")
        host, _, port = ep.rpartition(":")
        try:
            infos = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)
            addrs.extend(f"{info[4][0]}:{port}" for info in infos[:1])
        except (socket.gaierror, ValueError):
            addrs.append(ep)
    if len(addrs) == 1:
        return addrs[0]
    return "ipv4:" + ",".join(addrs)


class EtcdClient:
    def __init__(self, endpoints: list[str], timeout: float = DEFAULT_TIMEOUT):
        self.endpoints = endpoints
        self.timeout = timeout
        self._channel: grpc.aio.Channel | None = None
        self._kv: rpc.KVStub | None = None
        self._watch: rpc.WatchStub | None = None
        self._maint: rpc.MaintenanceStub | None = None

    def connect(self) -> None:
        target = _target(self.endpoints)
        self._channel = grpc.aio.insecure_channel(target, options=[
            ("grpc.max_receive_message_length", 256 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.keepalive_time_ms", 10_000),
            ("grpc.keepalive_timeout_ms", 5_000),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.initial_reconnect_backoff_ms", 200),
            ("grpc.max_reconnect_backoff_ms", 2_000),
        ])
        self._kv = rpc.KVStub(self._channel)
        self._watch = rpc.WatchStub(self._channel)
        self._maint = rpc.MaintenanceStub(self._channel)

    def _stub(self, stub: _Stub | None) -> _Stub:
        if stub is None:
            raise RuntimeError("EtcdClient.connect() was not called")
        return stub

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close()
            self._channel = None

    # ------------------------------------------------------------ plumbing

    async def _call(self, operation: str, type_: str, method, request, timeout: float | None = None):
        start = time.perf_counter()
        try:
            return await method(request, timeout=timeout or self.timeout)
        except grpc.aio.AioRpcError as exc:
            if _COMPACTED in (exc.details() or ""):
                raise CompactedError() from None
            if any(t in (exc.details() or "") for t in _TOO_LARGE):
                # Over etcd's --max-request-bytes (1.5 MiB by default; its gRPC server takes 512 KiB
                # more, then refuses by itself): no retry can succeed. Kubernetes answers this 500
                # (kubernetes#112152); kplane answers 413.
                raise errors.RequestEntityTooLarge(f"Request entity too large: etcd: {exc.details()}") from None
            raise EtcdError(f"etcd {operation} failed: {exc.code().name}: {exc.details()}") from None
        finally:
            _REQUEST_DURATION.labels(operation=operation, type=type_).observe(time.perf_counter() - start)

    # ------------------------------------------------------------ reads

    async def get(self, key: str, type_: str = "") -> tuple[KV | None, int]:
        """The key's current value (or None) and the store revision of the read."""
        resp = await self._call("get", type_, self._stub(self._kv).Range, rpc.RangeRequest(key=key.encode()))
        kv = resp.kvs[0] if resp.kvs else None
        return (KV(key, kv.value, kv.mod_revision, kv.create_revision) if kv else None), resp.header.revision

    async def list(self, prefix: str, revision: int = 0, type_: str = "",
                   limit: int = 0, start_key: str | None = None) -> tuple[list[KV], int, bool]:
        """Every key under ``prefix`` (at ``revision`` if given): (kvs, revision, more)."""
        p = prefix.encode()
        req = rpc.RangeRequest(key=start_key.encode() if start_key else p, range_end=prefix_end(p),
                               revision=revision, limit=limit,
                               sort_order=rpc.RangeRequest.ASCEND, sort_target=rpc.RangeRequest.KEY)
        resp = await self._call("list", type_, self._stub(self._kv).Range, req)
        kvs = [KV(kv.key.decode(), kv.value, kv.mod_revision, kv.create_revision) for kv in resp.kvs]
        return kvs, resp.header.revision, resp.more

    async def current_revision(self) -> int:
        """The store's current revision (a one-key read of a key that never exists)."""
        resp = await self._call("revision", "", self._stub(self._kv).Range,
                                rpc.RangeRequest(key=b"/kplane/revision-probe", count_only=True))
        return resp.header.revision

    async def compact_revision(self) -> int:
        """The revision etcd's history begins at: the last compaction's (0: never compacted).

        etcd says it only by refusing older reads, so this finds the oldest revision a read is
        served at (~20 one-key reads for a million revisions)."""
        async def readable(rev: int) -> bool:
            try:
                await self._call("revision", "", self._stub(self._kv).Range,
                                 rpc.RangeRequest(key=b"/kplane/revision-probe", count_only=True, revision=rev))
                return True
            except CompactedError:
                return False

        lo, hi = 1, await self.current_revision()
        if await readable(lo):
            return 0
        while hi - lo > 1:  # lo is compacted away, hi is readable
            mid = (lo + hi) // 2
            if await readable(mid):
                hi = mid
            else:
                lo = mid
        return hi

    # ------------------------------------------------------------ writes

    async def create(self, key: str, value: bytes, type_: str = "") -> int | None:
        """Put ``key`` only if absent; the new revision, or None if it exists."""
        k = key.encode()
        req = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value))],
        )
        resp = await self._call("create", type_, self._stub(self._kv).Txn, req)
        return resp.header.revision if resp.succeeded else None

    async def update(self, key: str, value: bytes, mod_revision: int, type_: str = "") -> tuple[bool, int]:
        """Put ``key`` only if its mod_revision is ``mod_revision``: (succeeded, revision)."""
        k = key.encode()
        req = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=mod_revision)],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=k, value=value))],
        )
        resp = await self._call("update", type_, self._stub(self._kv).Txn, req)
        return resp.succeeded, resp.header.revision

    async def delete(self, key: str, mod_revision: int, type_: str = "") -> tuple[bool, int]:
        """Delete ``key`` only if its mod_revision is ``mod_revision``: (succeeded, revision)."""
        k = key.encode()
        req = rpc.TxnRequest(
            compare=[rpc.Compare(key=k, target=rpc.Compare.MOD, result=rpc.Compare.EQUAL, mod_revision=mod_revision)],
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k))],
        )
        resp = await self._call("delete", type_, self._stub(self._kv).Txn, req)
        return resp.succeeded, resp.header.revision

    async def compact(self, revision: int, physical: bool = False, timeout: float | None = None) -> None:
        """Compact the history before ``revision``; ``physical``: return once etcd has applied it.
        Raises CompactedError if the history was compacted at or past ``revision`` already."""
        await self._call("compact", "", self._stub(self._kv).Compact,
                         rpc.CompactionRequest(revision=revision, physical=physical), timeout)

    async def status(self) -> rpc.StatusResponse:
        return await self._call("status", "", self._stub(self._maint).Status, rpc.StatusRequest())

    # ------------------------------------------------------------ watch

    async def watch(self, prefix: str, start_revision: int, prev_kv: bool = True,
                    progress_notify: bool = True) -> AsyncIterator[rpc.WatchResponse]:
        """Stream watch responses for every key under ``prefix`` from ``start_revision``.

        Raises CompactedError if ``start_revision`` is compacted, EtcdError if the stream
        breaks (the caller resumes from the last revision it saw).
        """
        p = prefix.encode()
        create = rpc.WatchRequest(create_request=rpc.WatchCreateRequest(
            key=p, range_end=prefix_end(p), start_revision=start_revision, prev_kv=prev_kv,
            progress_notify=progress_notify))
        closed = asyncio.Event()

        async def requests():
            yield create
            await closed.wait()

        call = self._stub(self._watch).Watch(requests())
        try:
            async for resp in call:
                if resp.compact_revision:
                    raise CompactedError(resp.compact_revision)
                if resp.canceled:
                    raise EtcdError(f"etcd canceled the watch: {resp.cancel_reason}")
                yield resp
            raise EtcdError("etcd closed the watch stream")
        except grpc.aio.AioRpcError as exc:
            raise EtcdError(f"etcd watch failed: {exc.code().name}: {exc.details()}") from None
        finally:
            closed.set()
            call.cancel()


async def wait_for_etcd(client: EtcdClient, *, interval: float = 1.0, max_interval: float = 5.0) -> int:
    """Block until etcd answers; log each failure (never crash-loop silently). Returns the revision."""
    delay, attempt = interval, 0
    while True:
        try:
            return await client.current_revision()
        except EtcdError as exc:
            attempt += 1
            log.warning("etcd_unreachable", endpoints=client.endpoints, attempt=attempt, error=str(exc),
                        retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_interval)
