"""The admin HTTP server every kplane process runs: /metrics, /healthz, /readyz, /failpoints.

- ``GET /metrics``: Prometheus text format (prometheus-client's default registry).
- ``GET /healthz`` and ``GET /readyz``: 200 ``ok``, or 503 with the reason from the health check.
- ``GET /failpoints``: JSON ``{"declared": {name: doc}, "armed": {name: action}, "paused": {name: held}}``.
- ``PUT /failpoints/NAME`` with the action as body (``panic``, ``sleep(200)``, ``error``, ``pause``, ``off``).

A tiny HTTP/1.1 server on asyncio streams: one request per connection, no keep-alive. It runs on
the process's own event loop and needs no thread.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from machinery import failpoints

# Returns None when healthy, else the reason.
HealthCheck = Callable[[], Awaitable[str | None] | str | None]

_MAX_BODY = 64 * 1024


class AdminServer:
    def __init__(self, host: str, port: int, health: HealthCheck | None = None,
                 ready: HealthCheck | None = None):
        self._host, self._port = host, port
        self._health = health
        self._ready = ready or health
        self._server: asyncio.base_events.Server | None = None

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]  # (host, port) of a TCP socket
        return port

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self._host, self._port, reuse_address=True)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _check(self, check: HealthCheck | None) -> str | None:
        if check is None:
            return None
        result = check()
        if inspect.isawaitable(result):
            return await result
        return result

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                status, ctype, body = await self._respond(reader)
        except (TimeoutError, ConnectionError, ValueError):
            status, ctype, body = 400, "text/plain", b"bad request\n"
        try:
            writer.write(f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {ctype}\r\n"
                         f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[int, str, bytes]:
        request_line = (await reader.readline()).decode("latin-1").strip()
        parts = request_line.split()
        if len(parts) < 2:
            raise ValueError("bad request line")
        method, path = parts[0], parts[1].split("?", 1)[0]
        length = 0
        while True:
            line = (await reader.readline()).decode("latin-1")
            if line in ("\r\n", "\n", ""):
                break
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = min(int(value.strip()), _MAX_BODY)
        body = await reader.readexactly(length) if length else b""

        if path == "/metrics" and method == "GET":
            return 200, CONTENT_TYPE_LATEST, generate_latest()
        if path in ("/healthz", "/livez", "/readyz") and method == "GET":
            reason = await self._check(self._ready if path == "/readyz" else self._health)
            if reason:
                return 503, "text/plain", f"unhealthy: {reason}\n".encode()
            return 200, "text/plain", b"ok\n"
        if path == "/failpoints" and method == "GET":
            doc = {"declared": failpoints.declared(), "armed": failpoints.armed(), "paused": failpoints.paused()}
            return 200, "application/json", json.dumps(doc, indent=2).encode() + b"\n"
        if path.startswith("/failpoints/") and method in ("PUT", "POST", "DELETE"):
            name = path[len("/failpoints/"):]
            action = "off" if method == "DELETE" else body.decode().strip()
            try:
                failpoints.arm(name, action)
            except failpoints.UnknownFailpointError as exc:
                return 404, "text/plain", f"{exc}\n".encode()
            except failpoints.BadFailpointActionError as exc:
                return 400, "text/plain", f"{exc}\n".encode()
            return 200, "text/plain", f"{name}={action}\n".encode()
        return 404, "text/plain", b"not found\n"


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}
