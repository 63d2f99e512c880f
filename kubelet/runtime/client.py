"""The kubelet's side of the runtime: one async interface, over gRPC or over an in-process object.

    runtime = RuntimeClient("unix:///var/run/kplane/node-1.sock")      # python -m kubelet.runtime
    runtime = InProcessRuntime(FakeRuntime("node-1"))                   # hollow nodes
    resp = await runtime.create_container(cri_pb2.CreateContainerRequest(...))
    status = (await runtime.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))).status

Every method takes a ``cri_pb2`` request and returns the ``cri_pb2`` response of the RPC of the
same name (CRI's, in snake_case), with a timeout (``StopContainer`` gets its grace period on top).
Failures raise ``RuntimeCallError`` (method, message, gRPC code); ``RuntimeNotFound`` for a
sandbox or container that does not exist; ``RuntimeUnavailable`` when the runtime cannot be
reached. Both implementations behave alike, timeouts included.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar, cast

import grpc
from google.protobuf.message import Message

from kubelet.runtime import instrumented
from kubelet.runtime.errors import RuntimeCallError, RuntimeNotFound, RuntimeUnavailable, call_error
from kubelet.runtime.fake import FakeRuntime, reads_from_memory
from kubelet.runtime.methods import METHODS, Method
from machinery import failpoints
from machinery.api import cri_pb2

__all__ = ["DEFAULT_TIMEOUT", "RuntimeApi", "RuntimeClient", "InProcessRuntime", "RuntimeCallError",
           "RuntimeNotFound", "RuntimeUnavailable"]

DEFAULT_TIMEOUT = 10.0
R = TypeVar("R", bound=Message)

_CHANNEL_OPTIONS = [
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.enable_retries", 0),
]


class ContainerEvents(Protocol):
    """A ``GetContainerEvents`` stream: the runtime's events in order. Iterating fails with
    ``RuntimeCallError`` when the stream breaks (and ends if the runtime closes it); ``close`` ends
    the subscription."""

    def __aiter__(self) -> ContainerEvents: ...

    async def __anext__(self) -> cri_pb2.ContainerEventResponse: ...

    def close(self) -> None: ...


class RuntimeApi:
    """The runtime's calls, each counted and timed (``kubelet.runtime.instrumented``); subclasses
    provide ``_rpc`` and ``_subscribe``."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT):
        self.timeout = timeout

    async def _rpc(self, method: Method, request: Message, timeout: float) -> Message:
        raise NotImplementedError

    async def _subscribe(self, method: Method) -> ContainerEvents:
        raise NotImplementedError

    async def container_events(self) -> ContainerEvents:
        """Subscribe to the runtime's container events (``GetContainerEvents``, KEP-3386): returns
        once the stream is established, RuntimeCallError if it cannot be. Counted as one operation."""
        method = METHODS["get_container_events"]
        operation = instrumented.operation_type(method)
        start, failed = time.perf_counter(), True
        try:
            stream = await self._subscribe(method)
            failed = False
            return stream
        finally:
            if operation is not None:
                instrumented.record(operation, time.perf_counter() - start, failed)

    async def _call(self, method: Method, request: Message, timeout: float) -> Message:
        operation = instrumented.operation_type(method)
        if operation is None:
            return await self._rpc(method, request, timeout)
        start, failed = time.perf_counter(), True
        try:
            response = await self._rpc(method, request, timeout)
            failed = False
            return response
        finally:
            instrumented.record(operation, time.perf_counter() - start, failed)

    async def _do(self, attr: str, request: Message, timeout: float | None, response: type[R]) -> R:
        """Call the method named ``attr``; its answer is a ``response`` (the RPC's response type)."""
        return cast(R, await self._call(METHODS[attr], request, self.timeout if timeout is None else timeout))

    # RuntimeService

    async def version(self, request: cri_pb2.VersionRequest | None = None, *,
                      timeout: float | None = None) -> cri_pb2.VersionResponse:
        return await self._do("version", request or cri_pb2.VersionRequest(version="v1"),
                              timeout, cri_pb2.VersionResponse)

    async def status(self, request: cri_pb2.StatusRequest | None = None, *,
                     timeout: float | None = None) -> cri_pb2.StatusResponse:
        return await self._do("status", request or cri_pb2.StatusRequest(), timeout, cri_pb2.StatusResponse)

    async def run_pod_sandbox(self, request: cri_pb2.RunPodSandboxRequest, *,
                              timeout: float | None = None) -> cri_pb2.RunPodSandboxResponse:
        return await self._do("run_pod_sandbox", request, timeout, cri_pb2.RunPodSandboxResponse)

    async def stop_pod_sandbox(self, request: cri_pb2.StopPodSandboxRequest, *,
                               timeout: float | None = None) -> cri_pb2.StopPodSandboxResponse:
        return await self._do("stop_pod_sandbox", request, timeout, cri_pb2.StopPodSandboxResponse)

    async def remove_pod_sandbox(self, request: cri_pb2.RemovePodSandboxRequest, *,
                                 timeout: float | None = None) -> cri_pb2.RemovePodSandboxResponse:
        return await self._do("remove_pod_sandbox", request, timeout, cri_pb2.RemovePodSandboxResponse)

    async def pod_sandbox_status(self, request: cri_pb2.PodSandboxStatusRequest, *,
                                 timeout: float | None = None) -> cri_pb2.PodSandboxStatusResponse:
        return await self._do("pod_sandbox_status", request, timeout, cri_pb2.PodSandboxStatusResponse)

    async def list_pod_sandbox(self, request: cri_pb2.ListPodSandboxRequest | None = None, *,
                               timeout: float | None = None) -> cri_pb2.ListPodSandboxResponse:
        return await self._do("list_pod_sandbox", request or cri_pb2.ListPodSandboxRequest(),
                              timeout, cri_pb2.ListPodSandboxResponse)

    async def create_container(self, request: cri_pb2.CreateContainerRequest, *,
                               timeout: float | None = None) -> cri_pb2.CreateContainerResponse:
        return await self._do("create_container", request, timeout, cri_pb2.CreateContainerResponse)

    async def start_container(self, request: cri_pb2.StartContainerRequest, *,
                              timeout: float | None = None) -> cri_pb2.StartContainerResponse:
        return await self._do("start_container", request, timeout, cri_pb2.StartContainerResponse)

    async def stop_container(self, request: cri_pb2.StopContainerRequest, *,
                             timeout: float | None = None) -> cri_pb2.StopContainerResponse:
        """Waits up to the grace period (``request.timeout``) plus the call timeout, as the kubelet does."""
        extra = self.timeout if timeout is None else timeout
        response = await self._call(METHODS["stop_container"], request, max(0, request.timeout) + extra)
        return cast(cri_pb2.StopContainerResponse, response)

    async def remove_container(self, request: cri_pb2.RemoveContainerRequest, *,
                               timeout: float | None = None) -> cri_pb2.RemoveContainerResponse:
        return await self._do("remove_container", request, timeout, cri_pb2.RemoveContainerResponse)

    async def list_containers(self, request: cri_pb2.ListContainersRequest | None = None, *,
                              timeout: float | None = None) -> cri_pb2.ListContainersResponse:
        return await self._do("list_containers", request or cri_pb2.ListContainersRequest(),
                              timeout, cri_pb2.ListContainersResponse)

    async def container_status(self, request: cri_pb2.ContainerStatusRequest, *,
                               timeout: float | None = None) -> cri_pb2.ContainerStatusResponse:
        return await self._do("container_status", request, timeout, cri_pb2.ContainerStatusResponse)

    async def update_container_resources(self, request: cri_pb2.UpdateContainerResourcesRequest, *,
                                         timeout: float | None = None) -> cri_pb2.UpdateContainerResourcesResponse:
        return await self._do("update_container_resources", request, timeout, cri_pb2.UpdateContainerResourcesResponse)

    async def update_pod_sandbox_resources(
            self, request: cri_pb2.UpdatePodSandboxResourcesRequest, *,
            timeout: float | None = None) -> cri_pb2.UpdatePodSandboxResourcesResponse:
        return await self._do("update_pod_sandbox_resources", request,
                              timeout, cri_pb2.UpdatePodSandboxResourcesResponse)

    async def container_stats(self, request: cri_pb2.ContainerStatsRequest, *,
                              timeout: float | None = None) -> cri_pb2.ContainerStatsResponse:
        return await self._do("container_stats", request, timeout, cri_pb2.ContainerStatsResponse)

    async def list_container_stats(self, request: cri_pb2.ListContainerStatsRequest | None = None, *,
                                   timeout: float | None = None) -> cri_pb2.ListContainerStatsResponse:
        return await self._do("list_container_stats", request or cri_pb2.ListContainerStatsRequest(),
                              timeout, cri_pb2.ListContainerStatsResponse)

    # FakeRuntimeControl

    async def set_container_usage(self, request: cri_pb2.SetContainerUsageRequest, *,
                                  timeout: float | None = None) -> cri_pb2.SetContainerUsageResponse:
        return await self._do("set_container_usage", request, timeout, cri_pb2.SetContainerUsageResponse)

    async def exit_container(self, request: cri_pb2.ExitContainerRequest, *,
                             timeout: float | None = None) -> cri_pb2.ExitContainerResponse:
        return await self._do("exit_container", request, timeout, cri_pb2.ExitContainerResponse)

    async def get_state(self, request: cri_pb2.GetStateRequest | None = None, *,
                        timeout: float | None = None) -> cri_pb2.GetStateResponse:
        return await self._do("get_state", request or cri_pb2.GetStateRequest(), timeout, cri_pb2.GetStateResponse)

    # Helpers

    async def wait_ready(self, timeout: float = 30.0) -> cri_pb2.VersionResponse:
        """Call Version until the runtime answers; RuntimeUnavailable if it does not within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                return await self.version(timeout=max(0.1, min(left, self.timeout)))
            except RuntimeCallError as exc:
                if time.monotonic() + 0.1 >= deadline:
                    raise RuntimeUnavailable("Version", f"runtime not ready after {timeout:g}s: {exc.message}",
                                             grpc.StatusCode.UNAVAILABLE) from None
            await asyncio.sleep(0.1)

    async def close(self) -> None:
        pass


class RuntimeClient(RuntimeApi):
    """The runtime over gRPC: ``address`` is ``unix:///path/runtime.sock`` or ``HOST:PORT``."""

    def __init__(self, address: str, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.address = address
        self.channel = grpc.aio.insecure_channel(address, options=_CHANNEL_OPTIONS)
        self._stubs = {m.attr: self.channel.unary_unary(m.path, request_serializer=m.request.SerializeToString,
                                                        response_deserializer=m.response.FromString)
                       for m in METHODS.values() if not m.streaming}
        self._streams = {m.attr: self.channel.unary_stream(m.path, request_serializer=m.request.SerializeToString,
                                                           response_deserializer=m.response.FromString)
                         for m in METHODS.values() if m.streaming}

    async def _rpc(self, method: Method, request: Message, timeout: float) -> Message:
        try:
            return await self._stubs[method.attr](request, timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise call_error(method.name, exc.code(), exc.details() or exc.code().name) from None

    async def _subscribe(self, method: Method) -> ContainerEvents:
        """The call, once the runtime sent its headers (it does on subscribing); a call that failed
        at once (the runtime is down, the failpoint) raises here."""
        call = self._streams[method.attr](method.request())
        try:
            await call.initial_metadata()
            if call.done():
                code = await call.code()
                if code != grpc.StatusCode.OK:
                    raise call_error(method.name, code, await call.details() or code.name)
        except grpc.aio.AioRpcError as exc:
            raise call_error(method.name, exc.code(), exc.details() or exc.code().name) from None
        return _GrpcEvents(method.name, call)

    async def close(self) -> None:
        await self.channel.close()


class _GrpcEvents:
    """``ContainerEvents`` over a gRPC server stream."""

    def __init__(self, name: str, call: Any):
        self._name = name
        self._call = call

    def __aiter__(self) -> _GrpcEvents:
        return self

    async def __anext__(self) -> cri_pb2.ContainerEventResponse:
        try:
            event = await self._call.read()
        except grpc.aio.AioRpcError as exc:
            raise call_error(self._name, exc.code(), exc.details() or exc.code().name) from None
        if event is grpc.aio.EOF:
            code = await self._call.code()
            raise call_error(self._name, code if code != grpc.StatusCode.OK else grpc.StatusCode.UNAVAILABLE,
                             await self._call.details() or "the runtime ended the event stream")
        return cast(cri_pb2.ContainerEventResponse, event)

    def close(self) -> None:
        self._call.cancel()


class InProcessRuntime(RuntimeApi):
    """A ``FakeRuntime`` in this process behind the same interface (hollow nodes)."""

    def __init__(self, runtime: FakeRuntime, *, timeout: float = DEFAULT_TIMEOUT):
        super().__init__(timeout)
        self.runtime = runtime

    async def _subscribe(self, method: Method) -> ContainerEvents:
        return await self.runtime.get_container_events(cri_pb2.GetEventsRequest())

    async def _rpc(self, method: Method, request: Message, timeout: float) -> Message:
        """The call, under its timeout — but for a read of the runtime's memory, which never waits
        unless its failpoint is armed: that one runs with no timer armed (a hollow node's PLEG lists
        every second; a timer that cannot fire is most of such a call's cost)."""
        fn = getattr(self.runtime, method.attr)
        call: Coroutine[Any, Any, Message] = fn(request)
        if reads_from_memory(fn) and not (method.failpoint and failpoints.is_armed(method.failpoint)):
            return await call
        try:
            async with asyncio.timeout(timeout):
                return await call
        except TimeoutError:
            raise RuntimeCallError(method.name, "Deadline Exceeded", grpc.StatusCode.DEADLINE_EXCEEDED) from None
