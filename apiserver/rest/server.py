"""The REST listener: an aiohttp application in the apiserver's event loop, over HTTPS (the
certificate ``kplane up`` makes, ``--tls-cert-file`` / ``--tls-private-key-file``) or plain HTTP
on a loopback address.

Every request is routed here: health (/healthz, /readyz, /livez: what the gRPC health service
says), /version, the OpenAPI documents (``openapi.py``), discovery
(discovery.py), the access reviews (access.py), and the resources (paths.py, verbs.py,
watch.py). Resource requests go through the shared request path (``requests.Endpoint``: ready,
inflight limits, authentication, metrics); every failure is answered with its metav1.Status.

Authentication is the gRPC API's: ``Authorization: Bearer <token>`` against the static token file.
A member of system:masters may impersonate (``Impersonate-User``, ``Impersonate-Group``:
``kubectl --as system:node:node-1 --as-group system:nodes``), so a review or a request can be
made as a node without its token.
"""

from __future__ import annotations

import ipaddress
import json
import ssl
from typing import Any, Callable

from aiohttp import web

from apiserver.auth import MASTERS_GROUP, User
from apiserver.requests import Api
from apiserver.rest import access, codec, discovery, openapi, paths, verbs, watch
from machinery import errors
from machinery.logging import get_logger
from machinery.version import BINARY, Version

log = get_logger()

HEALTH_PATHS = ("/healthz", "/readyz", "/livez")
_DISCOVERY_LEGACY = ("/api", "/api/")
_DISCOVERY_GROUPS = ("/apis", "/apis/")


OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def _openapi_v2_protobuf() -> bytes:
    """A gnostic openapi_v2.Document with swagger "2.0", its info, and no paths or definitions."""
    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2, len(payload)]) + payload
    info = field(1, b"Kubernetes") + field(2, BINARY.git_version.encode())
    return field(1, b"2.0") + field(2, info)


_EMPTY_OPENAPI_V2 = _openapi_v2_protobuf()


class RestError(SystemExit):
    """A REST listener that cannot be set up as asked: one line for the operator."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_listen(listen: str) -> tuple[str, int]:
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        raise RestError(f"--rest-listen {listen!r}: want HOST:PORT")
    return host.strip("[]") or "127.0.0.1", int(port)


def check_listen(listen: str, cert_file: str, key_file: str) -> None:
    """The flags' rules: HTTPS needs both files; plain HTTP only on a loopback address."""
    host, _ = split_listen(listen)
    if bool(cert_file) != bool(key_file):
        raise RestError("--tls-cert-file and --tls-private-key-file go together")
    if not cert_file and not is_loopback(host):
        raise RestError(f"--rest-listen {listen} would serve plain HTTP on a non-loopback address; give "
                        "--tls-cert-file and --tls-private-key-file (kplane up makes them) or listen on 127.0.0.1")


def _json(doc: Any, status: int = 200, content_type: str = codec.JSON) -> web.Response:
    return web.Response(body=codec.dump(doc), status=status, headers={"Content-Type": content_type})


def _failure(exc: errors.ApiError, kind: Any = None, name: str = "") -> web.Response:
    return _json(codec.status(exc, kind, name), exc.http)


class RestServer:
    def __init__(self, api: Api, listen: str, cert_file: str = "", key_file: str = "",
                 health: Callable[[], str | None] | None = None, release: Version = BINARY):
        check_listen(listen, cert_file, key_file)
        self.api = api
        self.release = release  # the apiserver's emulated version: what /version says
        self.host, self._port = split_listen(listen)
        self.cert_file, self.key_file = cert_file, key_file
        self.health = health or (lambda: None)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def scheme(self) -> str:
        return "https" if self.cert_file else "http"

    def _ssl(self) -> ssl.SSLContext | None:
        if not self.cert_file:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        except (OSError, ssl.SSLError) as exc:
            raise RestError(f"cannot load --tls-cert-file {self.cert_file} / --tls-private-key-file "
                            f"{self.key_file}: {exc}") from None
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    async def start(self) -> None:
        ctx = self._ssl()
        # 64 MiB as gRPC's receive limit: above the API's own limit, so an oversized body is read
        # and answered with Kubernetes' 413 Status rather than cut off by aiohttp.
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A client's disconnect does not cancel its request (a write is never cut off between
        # its admission and its etcd transaction); watches notice it themselves (watch.py). At
        # shutdown open watches are cancelled after a second, so SIGTERM still exits promptly.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._port, ssl_context=ctx, reuse_address=True)
        try:
            await site.start()
        except OSError as exc:
            raise RestError(f"cannot listen on --rest-listen {self.host}:{self._port}: {exc}") from None
        server = site._server
        sockets = getattr(server, "sockets", None) or []
        self.port = sockets[0].getsockname()[1] if sockets else self._port
        log.info("rest_listening", address=f"{self.scheme}://{self.host}:{self.port}")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # ------------------------------------------------------------ requests

    def _authenticate(self, request: web.Request) -> User:
        header = request.headers.get("Authorization", "")
        user = self.api.authn.authenticate([("authorization", header)] if header else [])
        impersonate = request.headers.get("Impersonate-User")
        if not impersonate:
            return user
        if MASTERS_GROUP not in user.groups:
            raise errors.Forbidden(f'users "{impersonate}" is forbidden: User "{user.name}" cannot impersonate '
                                   'resource "users" in API group "" at the cluster scope')
        return User(impersonate, request.headers.get("Impersonate-Uid", ""),
                    tuple(request.headers.getall("Impersonate-Group", ())))

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        try:
            if path in HEALTH_PATHS or path.startswith(tuple(p + "/" for p in HEALTH_PATHS)):
                return self._health()
            if path.rstrip("/") == "/version":
                return _json(discovery.version(self.release))
            if path == "/openapi" or path.startswith("/openapi/"):
                self._authenticate(request)
                return self._openapi(request, path)
            if path in _DISCOVERY_LEGACY or path in _DISCOVERY_GROUPS:
                self.api.check_ready()
                self._authenticate(request)
                return self._root_discovery(request, legacy=path in _DISCOVERY_LEGACY)
            extra = self._extra(path)
            if extra is not None:
                return await self._review(request, extra)
            try:
                target = paths.parse(path)
            except paths.NotAResource:
                self.api.check_ready()
                self._authenticate(request)
                return self._group_discovery(path)
            return await self._resource(request, target)
        except errors.ApiError as exc:
            return _failure(exc)
        except Exception as exc:  # a bug: report it, keep serving
            log.exception("rest_request_failed", method=request.method, path=path)
            return _failure(errors.InternalError(f"internal error: {type(exc).__name__}: {exc}"))

    def _health(self) -> web.Response:
        reason = self.health()
        if reason is None:
            return web.Response(text="ok", content_type="text/plain")
        return web.Response(text=reason, status=503, content_type="text/plain")

    def _openapi(self, request: web.Request, path: str) -> web.Response:
        accept = request.headers.get("Accept", "")
        json_ok = not accept or any(r.matches(codec.JSON) for r in codec.parse_accept(accept))
        if path.rstrip("/") == "/openapi/v2" and not json_ok and OPENAPI_V2_PROTOBUF in accept:
            # client-go reads /openapi/v2 as protobuf only, and kubectl 1.32 only to validate a kind
            # the v3 documents do not describe: a document describing no kind lets kubectl skip that
            # check and report the unknown kind itself, as it does against Kubernetes.
            return web.Response(body=_EMPTY_OPENAPI_V2, headers={"Content-Type": "application/octet-stream"})
        if not json_ok:
            raise codec.NotAcceptable("only application/json is served for the OpenAPI documents")
        if path.rstrip("/") == "/openapi/v2":
            return _json(openapi.openapi_v2())
        if path.rstrip("/") == "/openapi/v3":
            return _json(openapi.openapi_v3_paths())
        if path.startswith("/openapi/v3/"):
            doc = openapi.openapi_v3(path[len("/openapi/v3/"):].strip("/"))
            if doc is not None:
                return _json(doc)
        raise errors.NotFound("the server could not find the requested resource")

    def _root_discovery(self, request: web.Request, legacy: bool) -> web.Response:
        output = codec.negotiate(request.headers.get("Accept", ""), discovery=True)
        if output.form == "discovery":
            return _json(discovery.aggregated(legacy, output.version), content_type=output.content_type)
        if legacy:
            return _json(discovery.api_versions(f"{request.host}"))
        return _json(discovery.api_group_list())

    def _group_discovery(self, path: str) -> web.Response:
        parts = [p for p in path.split("/") if p]
        if parts == ["api", "v1"]:
            return _json(discovery.resource_list("", "v1"))
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in discovery.groups():
            return _json(discovery.api_group(parts[1]))
        if len(parts) == 3 and parts[0] == "apis" and discovery.served(parts[1], parts[2]):
            return _json(discovery.resource_list(parts[1], parts[2]))
        raise errors.NotFound("the server could not find the requested resource")

    @staticmethod
    def _extra(path: str) -> discovery.Extra | None:
        parts = [p for p in path.split("/") if p]
        for e in discovery.EXTRAS:
            if parts == ["apis", e.group, e.version, e.plural]:
                return e
        return None

    async def _review(self, request: web.Request, extra: discovery.Extra) -> web.Response:
        if request.method != "POST":
            raise errors.MethodNotAllowed("the server does not allow this method on the requested resource")
        endpoint = self.api.endpoint("CREATE", extra.plural)
        body = await request.read()

        async def answer(user: User) -> dict[str, Any]:
            if extra.kind == "SelfSubjectReview":
                return access.whoami(user)
            return access.review(extra.kind, codec.read_document(body, request.content_type), user, self.api.cache)

        return _json(await endpoint.call(lambda: self._authenticate(request), answer), 201)

    async def _resource(self, request: web.Request, target: paths.Target) -> web.StreamResponse:
        api = self.api
        query = verbs.Query(list(request.query.items()))
        verb = verbs.verb_of(request.method, target, query)
        refuse: errors.ApiError | None = None
        body = b""
        if request.method in ("POST", "PUT", "PATCH", "DELETE"):
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                body = b""
                refuse = errors.RequestEntityTooLarge.of(api.max_request_bytes)
            if len(body) > api.max_request_bytes:
                body, refuse = b"", errors.RequestEntityTooLarge.of(api.max_request_bytes)
        reading = verb in ("GET", "LIST", "WATCH")
        try:
            output = codec.negotiate(request.headers.get("Accept", ""), table=reading,
                                     include_object=query.get("includeObject"))
            call = verbs.Call(api, target, request.method, query, body, request.headers.get("Content-Type", ""),
                              output, user_agent=request.headers.get("User-Agent", ""))
            if verb == "WATCH":
                return await watch.serve(request, call, lambda: self._authenticate(request))
            handler = verbs.HANDLERS[verb]

            async def run(user: User) -> verbs.Reply:
                call.user = user
                return await handler(call)

            reply = await api.endpoint(verb, target.kind.plural, target.subresource).call(
                lambda: self._authenticate(request), run, refuse)
        except errors.ApiError as exc:
            return _failure(exc, target.kind, target.name)
        status_doc = isinstance(reply.body, dict) and reply.body.get("kind") == "Status"
        media = codec.JSON if status_doc or output.form != "object" else output.media
        content_type = codec.JSON if status_doc else output.content_type
        resp = web.Response(body=codec.dump(reply.body, media), status=reply.code,
                            headers={"Content-Type": content_type})
        for w in call.warnings:
            resp.headers.add("Warning", f"299 - {json.dumps(w)}")
        return resp
