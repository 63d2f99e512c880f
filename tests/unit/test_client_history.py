"""Client.history is a read: opened again after Unavailable, from after what it delivered."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from machinery import errors
from machinery.api import api_pb2
from machinery.client import Client


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details)


class _Stream:
    """A fake server-streaming call: the responses, then (maybe) an error."""

    def __init__(self, responses: list[api_pb2.HistoryResponse], error: grpc.aio.AioRpcError | None = None):
        self.responses, self.error, self.cancelled = responses, error, False

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for r in self.responses:
            yield r
        if self.error is not None:
            raise self.error

    def cancel(self) -> None:
        self.cancelled = True


def _resp(*revs: int, revision: int) -> api_pb2.HistoryResponse:
    return api_pb2.HistoryResponse(entries=[api_pb2.HistoryEntry(rev=r) for r in revs], revision=revision)


async def test_a_stream_that_breaks_off_is_opened_again_after_what_it_delivered():
    unavailable = _rpc_error(grpc.StatusCode.UNAVAILABLE,
                             "connection attempt timed out before receiving SETTINGS frame")
    calls: list[int] = []
    streams = [_Stream([], unavailable), _Stream([_resp(1, 2, revision=2)], unavailable),
               _Stream([_resp(3, revision=3)])]

    def history(request: api_pb2.HistoryRequest, metadata: Any = None) -> _Stream:
        calls.append(request.since)
        return streams[len(calls) - 1]

    client = Client("127.0.0.1:1", "t", timeout=5)
    client._history = history  # type: ignore[assignment]
    try:
        got = [e.rev async for resp in client.history(since=0) for e in resp.entries]
    finally:
        await client.close()
    assert got == [1, 2, 3]
    assert calls == [0, 0, 3]
    assert all(s.cancelled for s in streams)


async def test_other_errors_and_a_spent_budget_are_raised():
    def forbidden(request: api_pb2.HistoryRequest, metadata: Any = None) -> _Stream:
        return _Stream([], _rpc_error(grpc.StatusCode.PERMISSION_DENIED, "nope"))

    def down(request: api_pb2.HistoryRequest, metadata: Any = None) -> _Stream:
        return _Stream([], _rpc_error(grpc.StatusCode.UNAVAILABLE, "down"))

    client = Client("127.0.0.1:1", "t", timeout=0.3)
    try:
        client._history = forbidden  # type: ignore[assignment]
        with pytest.raises(errors.Forbidden):
            [r async for r in client.history()]
        client._history = down  # type: ignore[assignment]
        with pytest.raises(errors.Unavailable):
            [r async for r in client.history()]
    finally:
        await client.close()
