"""Assemble and run one node's runtime process: a ``FakeRuntime`` behind gRPC, admin HTTP, logs.

``python -m kubelet.runtime --listen unix:///path/runtime.sock --admin-listen 127.0.0.1:0
--state-file PATH --node-name N``. Start-up order: the admin port (so /healthz can say "loading
state"), the state file, then the gRPC port (RuntimeService, FakeRuntimeControl, the standard
health service and reflection). SIGTERM or SIGINT: stop serving, finish the state write in
flight, exit 0 — the containers' state stays in the file, as containerd's containers outlive it.
"""

from __future__ import annotations

import argparse
import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from kubelet.runtime.errors import RuntimeCallError
from kubelet.runtime.fake import FakeRuntime
from kubelet.runtime.methods import CONTROL_SERVICE, METHODS, RUNTIME_SERVICE, Method
from machinery import failpoints, process
from machinery.admin import AdminServer
from machinery.logging import get_logger, setup_logging

log = get_logger()


@dataclass
class Options:
    listen: str
    node_name: str
    admin_listen: str = "127.0.0.1:0"
    state_file: str = ""
    cpu_quota_rounding_us: int = 0
    log_level: str = "info"


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(prog="python -m kubelet.runtime",
                                description="kplane's CRI-like fake container runtime (one per node)")
    p.add_argument("--listen", required=True, help="gRPC address: unix:///path/runtime.sock or HOST:PORT")
    p.add_argument("--admin-listen", default="127.0.0.1:0", help="HTTP address for /metrics, /healthz, /failpoints")
    p.add_argument("--state-file", default="",
                   help="persist sandboxes and containers here (atomic writes) and reload them at start")
    p.add_argument("--node-name", default="", help="the node this runtime serves (default: the host name)")
    p.add_argument("--cpu-quota-rounding-us", type=int, default=0,
                   help="round applied cpu quotas up to a multiple of this many microseconds "
                        "(systemd rounds to 10000), so actual resources can differ from those asked for")
    p.add_argument("--log-level", default="info")
    a = p.parse_args(argv)
    if a.cpu_quota_rounding_us < 0:
        p.error("--cpu-quota-rounding-us must not be negative")
    return Options(listen=a.listen, admin_listen=a.admin_listen, state_file=a.state_file,
                   node_name=a.node_name or socket.gethostname(), cpu_quota_rounding_us=a.cpu_quota_rounding_us,
                   log_level=a.log_level)


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host or "127.0.0.1", int(port)


def unix_socket_path(address: str) -> str | None:
    """The file of a ``unix:`` address (``unix:///abs/path`` or ``unix:path``), else None."""
    if address.startswith("unix://"):
        return address[len("unix://"):]
    if address.startswith("unix:"):
        return address[len("unix:"):]
    return None


def _prepare_socket(path: str) -> None:
    """Make the socket's directory; remove a socket file left by a killed runtime (as containerd does)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    try:
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)
    except FileNotFoundError:
        pass


def build_handlers(runtime: FakeRuntime) -> list[grpc.GenericRpcHandler]:
    """gRPC handlers for RuntimeService and FakeRuntimeControl, each RPC served by ``runtime``."""
    by_service: dict[str, dict[str, grpc.RpcMethodHandler]] = {RUNTIME_SERVICE: {}, CONTROL_SERVICE: {}}
    for m in METHODS.values():
        if m.streaming:
            by_service[m.service][m.name] = grpc.unary_stream_rpc_method_handler(
                _stream_handler(runtime, m), request_deserializer=m.request.FromString,
                response_serializer=m.response.SerializeToString)
            continue
        by_service[m.service][m.name] = grpc.unary_unary_rpc_method_handler(
            _handler(runtime, m), request_deserializer=m.request.FromString,
            response_serializer=m.response.SerializeToString)
    return [grpc.method_handlers_generic_handler(svc, methods) for svc, methods in by_service.items()]


def _handler(runtime: FakeRuntime, method: Method):
    fn = getattr(runtime, method.attr)

    async def handle(request, context: grpc.aio.ServicerContext):
        try:
            return await fn(request)
        except RuntimeCallError as exc:
            await context.abort(exc.code, exc.message)
    return handle


def _stream_handler(runtime: FakeRuntime, method: Method):
    """A streaming call (GetContainerEvents): subscribed, the headers are sent at once (the client
    knows the stream is there), then every event until the client goes or the stream fails."""
    subscribe = getattr(runtime, method.attr)

    async def handle(request, context: grpc.aio.ServicerContext):
        try:
            stream = await subscribe(request)
        except RuntimeCallError as exc:
            await context.abort(exc.code, exc.message)
        try:
            await context.send_initial_metadata(())
            async for event in stream:
                yield event
        except RuntimeCallError as exc:
            await context.abort(exc.code, exc.message)
        finally:
            stream.close()
    return handle


class RuntimeServer:
    def __init__(self, opts: Options):
        self.opts = opts
        self.runtime = FakeRuntime(opts.node_name, state_file=opts.state_file or None,
                                   cpu_quota_rounding_us=opts.cpu_quota_rounding_us)
        self.admin = AdminServer(*_split(opts.admin_listen), health=self._health_reason)
        self.health = health.aio.HealthServicer()
        self.grpc: grpc.aio.Server | None = None
        self.grpc_port = 0

    def _health_reason(self) -> str | None:
        if not self.runtime.started:
            return "loading state"
        if self.grpc is None:
            return "not serving yet"
        return None

    async def start(self) -> None:
        await self.admin.start()
        log.info("runtime_admin_listening", admin_port=self.admin.port)
        await self.runtime.start()
        self.grpc = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        self.grpc.add_generic_rpc_handlers(build_handlers(self.runtime))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        reflection.enable_server_reflection([RUNTIME_SERVICE, CONTROL_SERVICE, health.SERVICE_NAME,
                                             reflection.SERVICE_NAME], self.grpc)
        path = unix_socket_path(self.opts.listen)
        if path is not None:
            _prepare_socket(path)
        self.grpc_port = self.grpc.add_insecure_port(self.opts.listen)
        if path is None and not self.grpc_port:
            raise SystemExit(f"cannot listen on {self.opts.listen}")
        await self.grpc.start()
        for svc in ("", RUNTIME_SERVICE, CONTROL_SERVICE):
            await self.health.set(svc, health_pb2.HealthCheckResponse.SERVING)
        log.info("runtime_listening", grpc=self.opts.listen, grpc_port=None if path else self.grpc_port,
                 admin_port=self.admin.port)

    async def stop(self) -> None:
        if self.grpc is not None:
            await self.grpc.stop(grace=1.0)
            path = unix_socket_path(self.opts.listen)
            if path is not None:
                _prepare_socket(path)  # removes it: no stale socket for the kubelet to dial
        await self.runtime.close()
        await self.admin.stop()


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    setup_logging("runtime", opts.log_level)
    structlog.contextvars.bind_contextvars(node=opts.node_name)
    try:
        failpoints.arm_from_env()
    except failpoints.BadFailpointActionError as exc:
        raise SystemExit(str(exc)) from None
    process.main("runtime", lambda: RuntimeServer(opts))
