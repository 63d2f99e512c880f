"""``?watch=1``: newline-delimited JSON watch events streamed from the watch cache.

A REST watch is a watcher of the same cache the gRPC watches read (``requests.open_watch``), with
the JSON encoding (``{"type": "ADDED", "object": {...}}`` and a newline per event) or, for
``kubectl get -w``, the Table encoding (tables.py); either is encoded once per event and shared by
every watcher with the same filter and encoding, as the protobuf frames are. BOOKMARKs come with
``allowWatchBookmarks``; ``resourceVersion`` resumes after that version (replayed from the cache's
ring, then live), "" or "0" starts with the current objects as ADDED; ``timeoutSeconds`` ends the
stream (default: a random 30 to 60 minutes, as Kubernetes' --min-request-timeout gives).

A version older than the cache holds is answered as Kubernetes' watch cache answers it: status
200 and one ERROR event whose object is the 410 ``Expired`` Status ("too old resource version"),
which client-go's reflector and the Python client read as "relist".
"""

from __future__ import annotations

import asyncio
import json
import random

from aiohttp import web

from apiserver.requests import Authenticate, open_watch
from apiserver.rest import codec, tables
from apiserver.rest.verbs import Call
from apiserver.watchcache import JSON, WATCH_DELIVERY
from machinery import errors, failpoints

MIN_REQUEST_TIMEOUT = 1800.0
DISCONNECT_CHECK = 5.0  # seconds an idle watch waits before it looks whether its client is still there


def _timeout(call: Call) -> float:
    text = call.query.get("timeoutSeconds")
    if text:
        try:
            seconds = int(text)
        except ValueError:
            raise errors.BadRequest(f'timeoutSeconds: Invalid value: "{text}": must be an integer') from None
        if seconds > 0:
            return float(seconds)
    return MIN_REQUEST_TIMEOUT * (1 + random.random())


def _flag(call: Call, name: str) -> bool:
    return call.query.get(name).lower() in ("1", "true")


async def serve(request: web.Request, call: Call, authenticate: Authenticate) -> web.StreamResponse:
    """Open the watch (errors before it opens are the caller's to answer as a Status), then stream."""
    q, t = call.query, call.target
    if t.subresource:
        raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
    fields = q.get("fieldSelector")
    if t.name:  # a watch of one object is a watch of its collection by name, as Kubernetes serves it
        fields = ",".join(f for f in (fields, f"metadata.name={t.name}") if f)
    output = call.output
    encoding = (tables.watch_encoding(call.kind, output.version, output.include_object) if output.form == "table"
                else JSON)
    timeout = _timeout(call)
    try:
        watcher = open_watch(call.api, call.kind, authenticate, call.namespace, q.get("labelSelector"), fields,
                             q.get("resourceVersion"), _flag(call, "allowWatchBookmarks"),
                             _flag(call, "sendInitialEvents"), encoding)
    except errors.Gone as exc:
        resp = web.StreamResponse(status=200, headers={"Content-Type": codec.JSON})
        await resp.prepare(request)
        event = {"type": "ERROR", "object": codec.status(exc, call.kind)}
        await resp.write(json.dumps(event, separators=(",", ":")).encode() + b"\n")
        await resp.write_eof()
        return resp
    cache = call.api.cache[call.kind]
    try:
        resp = web.StreamResponse(status=200, headers={"Content-Type": codec.JSON,
                                                       "Cache-Control": "no-cache, private"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            async with asyncio.timeout(timeout):
                while True:
                    try:
                        async with asyncio.timeout(DISCONNECT_CHECK):
                            batch = await watcher.next_batch()
                    except TimeoutError:
                        # An idle watch notices a client gone (handlers are not cancelled on a
                        # disconnect, so a write is never cut off half done).
                        if request.transport is None or request.transport.is_closing():
                            break
                        continue
                    if batch is None:
                        break
                    await failpoints.hit(WATCH_DELIVERY)
                    await resp.write(batch)
        except (TimeoutError, ConnectionResetError):
            pass
        if request.transport is not None and not request.transport.is_closing():
            await resp.write_eof()
        return resp
    finally:
        cache.remove(watcher)
