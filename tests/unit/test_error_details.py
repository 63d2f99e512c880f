"""Error details that fit: field errors quote a bounded prefix of a value, status messages are cut
to what gRPC metadata carries, and a request over the size limit is Kubernetes' 413
("Request entity too large: limit is 3145728") on a code no client retries."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import grpc
import pytest

from apiserver import handlers
from apiserver.auth import User
from apiserver.validation._common import validate_labels
from machinery import errors
from machinery.api import core_pb2
from machinery.client import Client
from machinery.kinds import POD

LABEL_20KB = "x" * 20_000


def _wire(message: str) -> int:
    """The size of a grpc-message trailer: gRPC percent-encodes bytes outside printable ASCII and '%'."""
    return len(quote(message, safe="".join(chr(c) for c in range(0x20, 0x7F) if c != 0x25)))


# ---------------------------------------------------------------- field errors


def test_a_short_value_is_quoted_whole():
    assert errors.format_value("web") == '"web"'
    assert str(errors.invalid("metadata.name", "a" * 253, "x")) == f'metadata.name: Invalid value: "{"a" * 253}": x'


def test_a_long_value_is_quoted_as_a_bounded_prefix_with_its_length():
    text = errors.format_value(LABEL_20KB)
    assert text == f'"{"x" * errors.MAX_QUOTED_VALUE_CHARS}"...(truncated: 20000 characters)'
    assert errors.format_value("é" * 300, limit=4) == '"éééé"...(truncated: 300 characters)'
    # Non-strings (Go structs, lists) are bounded too, at four times as much.
    assert len(errors.format_value(list(range(10_000)))) < 4 * errors.MAX_QUOTED_VALUE_CHARS + 50


def test_label_value_of_20kb_gives_a_short_error_naming_the_field():
    errs = validate_labels({"app": LABEL_20KB}, "metadata.labels")
    message = errors.Invalid.of("Pod", "big", errs).message
    assert len(message) < 1024
    assert message.startswith('Pod "big" is invalid: metadata.labels: Invalid value: "xxxxxxxx')
    assert message.endswith("...(truncated: 20000 characters): must be no more than 63 characters")


def test_every_kind_of_field_error_bounds_its_value():
    long = "v" * 50_000
    for e in (errors.invalid("p", long), errors.not_supported("p", long, ["a"]), errors.duplicate("p", long)):
        assert len(str(e)) < 1024, e.type


# ---------------------------------------------------------------- status messages


def test_a_message_that_fits_is_unchanged():
    message = 'pods "web" not found'
    assert errors.fit_status_message(message) is message


@pytest.mark.parametrize("message", ["x" * 100_000, "é" * 30_000, "%" * 20_000, "日本" * 10_000 + "tail"])
def test_a_long_message_is_cut_to_the_limit_on_the_wire(message):
    fitted = errors.fit_status_message(message)
    assert _wire(fitted) <= errors.MAX_STATUS_MESSAGE_BYTES
    assert message.startswith(fitted.split("... (truncated;")[0])
    assert fitted.endswith(f"(truncated; the whole message is {len(message.encode())} bytes)")


def test_a_message_just_over_the_limit_is_cut_and_one_just_under_is_not():
    limit = errors.MAX_STATUS_MESSAGE_BYTES
    assert errors.fit_status_message("a" * limit) == "a" * limit
    assert errors.fit_status_message("a" * (limit + 1)) != "a" * (limit + 1)
    assert errors.fit_status_message("%" * (limit // 3)) == "%" * (limit // 3)  # 3 bytes each on the wire
    assert errors.fit_status_message("%" * (limit // 3 + 1)).endswith("bytes)")


# ---------------------------------------------------------------- the client's view


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str):
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize("code, details", [
    (grpc.StatusCode.INVALID_ARGUMENT, "Request entity too large: limit is 3145728"),
    (grpc.StatusCode.INVALID_ARGUMENT, "Request entity too large: etcdserver: request is too large"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max (70000000 vs. 67108864)"),
    (grpc.StatusCode.RESOURCE_EXHAUSTED, "CLIENT: Sent message larger than max (73400398 vs. 67108864)"),
])
def test_too_large_is_request_entity_too_large_whichever_side_refused(code, details):
    err = errors.from_rpc_error(_RpcError(code, details))
    assert type(err) is errors.RequestEntityTooLarge
    assert err.http == 413 and err.code is grpc.StatusCode.INVALID_ARGUMENT


def test_invalid_and_overload_keep_their_types():
    assert type(errors.from_rpc_error(_RpcError(grpc.StatusCode.INVALID_ARGUMENT, 'Pod "x" is invalid: a: b'))) \
        is errors.Invalid
    assert type(errors.from_rpc_error(_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, "Too many requests, please "
                                                "try again later."))) is errors.TooManyRequests


async def test_the_client_does_not_retry_request_entity_too_large():
    calls = 0

    async def method(request: Any, metadata: Any = None, timeout: float | None = None) -> Any:
        nonlocal calls
        calls += 1
        raise grpc.aio.AioRpcError(grpc.StatusCode.INVALID_ARGUMENT, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                   "Request entity too large: limit is 3145728")

    client = Client("127.0.0.1:1", "t", timeout=5)
    try:
        with pytest.raises(errors.RequestEntityTooLarge, match="limit is 3145728"):
            await client.call(method, core_pb2.Pod(), retry=True)
    finally:
        await client.close()
    assert calls == 1


# ---------------------------------------------------------------- the apiserver's boundary


class _Aborted(Exception):
    pass


class _Context:
    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def invocation_metadata(self) -> tuple:
        return (("authorization", "Bearer t"),)

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.code, self.details = code, details
        raise _Aborted


class _Authn:
    def authenticate(self, metadata: Any) -> User:
        return User("admin", groups=("system:masters",))


def _api(max_request_bytes: int = errors.MAX_REQUEST_BYTES) -> handlers.Api:
    api = handlers.Api(None, None, None, _Authn(), max_request_bytes=max_request_bytes)  # type: ignore[arg-type]
    api.ready = True
    return api


async def _call(handler: grpc.RpcMethodHandler, data: bytes) -> _Context:
    context = _Context()
    request = handler.request_deserializer(data)
    with pytest.raises(_Aborted):
        await handler.unary_unary(request, context)
    return context


async def test_a_request_over_the_limit_is_413_on_invalid_argument_before_it_is_decoded():
    reached = []

    async def create(api, kind, obj, caller):
        reached.append(obj)

    handler = handlers._unary(_api(max_request_bytes=1000), POD, create, "CREATE")
    pod = core_pb2.Pod()
    pod.metadata.annotations["a"] = "y" * 2000
    context = await _call(handler, pod.SerializeToString())
    assert context.code is grpc.StatusCode.INVALID_ARGUMENT
    assert context.details == "Request entity too large: limit is 1000"
    assert reached == []


async def test_the_default_limit_is_kubernetes_3_mib():
    assert errors.MAX_REQUEST_BYTES == 3145728
    assert _api().max_request_bytes == 3145728


async def test_an_error_message_too_big_for_grpc_metadata_is_cut_at_the_boundary():
    async def create(api, kind, obj, caller):
        raise errors.Invalid(f'Pod "x" is invalid: {"z" * 100_000}')

    async def crash(api, kind, obj, caller):
        raise RuntimeError("q" * 100_000)

    for fn, code in ((create, grpc.StatusCode.INVALID_ARGUMENT), (crash, grpc.StatusCode.INTERNAL)):
        context = await _call(handlers._unary(_api(), POD, fn, "CREATE"), core_pb2.Pod().SerializeToString())
        assert context.code is code
        assert _wire(context.details) <= errors.MAX_STATUS_MESSAGE_BYTES
        assert "truncated" in context.details
