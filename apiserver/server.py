"""Assemble and run the apiserver: gRPC API, the Kubernetes REST API (``rest/``, with
``--rest-listen``), watch cache, admin HTTP, etcd health and compaction.

Start-up order: the admin port first (so /healthz can say "waiting for etcd"), then the gRPC
port and the REST port (answering UNAVAILABLE / 503 with the reason until ready), then etcd (retried and logged until it
answers: never a silent crash loop), the watch cache, the system namespaces and the built-in
PriorityClasses, and ready.
While running, etcd is probed every second; an unreachable etcd makes /healthz and the gRPC
health service report unhealthy until it answers again.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from apiserver import handlers
from apiserver.admission.chain import new_chain
from apiserver.admission.namespacelifecycle import system_namespaces
from apiserver.admission.priority import system_priority_classes
from apiserver.auth import MASTERS_GROUP, TokenAuthenticator, User
from apiserver.compactor import DEFAULT_HISTORY_BUDGET, Compactor
from apiserver.etcd import EtcdClient, EtcdError, wait_for_etcd
from apiserver.namespaces import NamespaceDeletion
from apiserver.pods import PodSubresources
from apiserver.registry import Registry
from apiserver.rest import server as rest
from apiserver.watchcache import DEFAULT_BOOKMARK_FREQUENCY, WatchCache
from machinery import errors, failpoints, process
from machinery.admin import AdminServer
from machinery.featuregates import FeatureGateError, FeatureGates
from machinery.files import wait_for_files
from machinery.kinds import KINDS, NAMESPACE, PRIORITY_CLASS
from machinery.logging import get_logger, setup_logging
from machinery.quantity import parse_quantity
from machinery.version import BINARY

log = get_logger()
SYSTEM_USER = User("system:apiserver", groups=(MASTERS_GROUP,))


@dataclass
class Options:
    etcd_endpoints: list[str]
    listen: str = "127.0.0.1:6443"
    admin_listen: str = "127.0.0.1:0"
    token_auth_file: str = ""
    feature_gates: str = ""
    emulated_version: str = str(BINARY)
    watch_cache_size: int = 20_000
    history_window: int = 20_000
    bookmark_interval: float = DEFAULT_BOOKMARK_FREQUENCY
    watch_batch_interval: float = 0.025
    compaction_retention: int = 0
    compaction_interval: float = 60.0
    history_budget: int = DEFAULT_HISTORY_BUDGET
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    enable_priority_and_fairness: bool = True
    rest_listen: str = ""
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    log_level: str = "info"


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(prog="python -m apiserver", description="kplane API server (etcd-backed, gRPC)")
    p.add_argument("--etcd-endpoints", required=True, help="comma-separated host:port of etcd members")
    p.add_argument("--listen", default="127.0.0.1:6443", help="gRPC address (host:port)")
    p.add_argument("--admin-listen", default="127.0.0.1:0", help="HTTP address for /metrics, /healthz, /failpoints")
    p.add_argument("--token-auth-file", required=True, help="static token file (token,user,uid,\"groups\")")
    p.add_argument("--feature-gates", default="", help="A=true,B=false")
    p.add_argument("--emulated-version", default=str(BINARY),
                   help=f"behave as this Kubernetes release (its feature gates' defaults, what it serves); "
                        f"default {BINARY}")
    p.add_argument("--watch-cache-size", type=int, default=20_000, help="events kept per kind for watch resumes")
    p.add_argument("--history-window", type=int, default=20_000,
                   help="revisions of etcd history replayed into the watch cache at start")
    p.add_argument("--bookmark-interval", type=float, default=DEFAULT_BOOKMARK_FREQUENCY,
                   help="seconds between two BOOKMARKs to one watcher (Kubernetes' cacher: a minute)")
    p.add_argument("--watch-batch-interval", type=float, default=0.025,
                   help="seconds a busy watch waits between stream messages, so one message carries many events")
    p.add_argument("--compaction-retention", type=int, default=0,
                   help="compact etcd history older than this many revisions (0: keep all history the budget allows)")
    p.add_argument("--history-budget", default="1Gi",
                   help="etcd data in use (a quantity: 1Gi, 512Mi, bytes) past which the older half of the kept "
                        "history is compacted; 0: no budget")
    p.add_argument("--compaction-interval", type=float, default=60.0,
                   help="seconds between two looks at etcd's size (and compactions)")
    p.add_argument("--max-requests-inflight", type=int, default=400,
                   help="read requests served at once (with API Priority and Fairness: this plus the next are "
                        "the seats its priority levels share; 0 and 0: no limit)")
    p.add_argument("--max-mutating-requests-inflight", type=int, default=200,
                   help="write requests served at once, more refused with 429 (without API Priority and Fairness)")
    p.add_argument("--enable-priority-and-fairness", default="true", choices=["true", "false"],
                   help="share the seats between API Priority and Fairness' bootstrap priority levels, queueing "
                        "beyond them; false: the legacy limits, refusing at once")
    p.add_argument("--rest-listen", default="",
                   help="HOST:PORT of the Kubernetes REST API (HTTPS with --tls-cert-file; plain HTTP on a loopback "
                        "address only); empty: no REST listener")
    p.add_argument("--tls-cert-file", default="", help="PEM certificate (chain) the REST API serves")
    p.add_argument("--tls-private-key-file", default="", help="PEM private key of --tls-cert-file")
    p.add_argument("--log-level", default="info")
    a = p.parse_args(argv)
    try:
        budget = parse_quantity(a.history_budget).value()
    except ValueError as exc:
        raise SystemExit(f"--history-budget: {exc}") from None
    if budget < 0 or a.compaction_retention < 0 or a.compaction_interval <= 0:
        raise SystemExit("--history-budget and --compaction-retention must be >= 0, --compaction-interval > 0")
    if a.max_requests_inflight < 0 or a.max_mutating_requests_inflight < 0:
        raise SystemExit("--max-requests-inflight and --max-mutating-requests-inflight must be >= 0")
    if a.rest_listen:
        rest.check_listen(a.rest_listen, a.tls_cert_file, a.tls_private_key_file)
    try:
        FeatureGates.from_flags(a.feature_gates, a.emulated_version)
    except FeatureGateError as exc:
        raise SystemExit(str(exc)) from None
    return Options(
        etcd_endpoints=[e.strip() for e in a.etcd_endpoints.split(",") if e.strip()], listen=a.listen,
        admin_listen=a.admin_listen, token_auth_file=a.token_auth_file, feature_gates=a.feature_gates,
        emulated_version=a.emulated_version,
        watch_cache_size=a.watch_cache_size, history_window=a.history_window, bookmark_interval=a.bookmark_interval,
        watch_batch_interval=a.watch_batch_interval, compaction_retention=a.compaction_retention,
        compaction_interval=a.compaction_interval, history_budget=budget, max_requests_inflight=a.max_requests_inflight,
        max_mutating_requests_inflight=a.max_mutating_requests_inflight,
        enable_priority_and_fairness=a.enable_priority_and_fairness == "true", rest_listen=a.rest_listen,
        tls_cert_file=a.tls_cert_file, tls_private_key_file=a.tls_private_key_file, log_level=a.log_level)


def _split(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host or "127.0.0.1", int(port)


class ApiServer:
    def __init__(self, opts: Options):
        self.opts = opts
        self.gates = FeatureGates.from_flags(opts.feature_gates, opts.emulated_version)
        self.etcd = EtcdClient(opts.etcd_endpoints)
        self.cache = WatchCache(self.etcd, capacity=opts.watch_cache_size, window=opts.history_window,
                                bookmark_interval=opts.bookmark_interval,
                                watch_batch_interval=opts.watch_batch_interval)
        self.registry = Registry(self.etcd, self.cache, admission=lambda storage: new_chain(storage, self.gates),
                                 gates=self.gates)
        self.registry.deletion_rules[NAMESPACE.name] = NamespaceDeletion()
        self.pods = PodSubresources(self.registry, self.gates)
        self.api = handlers.Api(self.registry, self.pods, self.cache, TokenAuthenticator(opts.token_auth_file),
                                max_inflight=opts.max_requests_inflight,
                                max_mutating_inflight=opts.max_mutating_requests_inflight,
                                priority_and_fairness=opts.enable_priority_and_fairness)
        self.health = health.aio.HealthServicer()
        self.grpc: grpc.aio.Server | None = None
        self.admin = AdminServer(*_split(opts.admin_listen), health=self._health_reason)
        self.grpc_port = 0
        self.rest: rest.RestServer | None = None
        if opts.rest_listen:
            self.rest = rest.RestServer(self.api, opts.rest_listen, opts.tls_cert_file, opts.tls_private_key_file,
                                        health=self._health_reason, release=self.gates.emulated_version)
        self._etcd_error: str | None = "not yet contacted"
        self._tasks: list[asyncio.Task] = []

    def _health_reason(self) -> str | None:
        if not self.api.ready:
            return self.api.not_ready_reason
        if self._etcd_error:
            return f"etcd: {self._etcd_error}"
        if not self.cache.healthy:
            return f"watch cache: {self.cache.last_error}"
        return None

    async def start(self) -> None:
        self.gates.export()
        await self.admin.start()
        self.grpc = grpc.aio.server(options=[
            # Above the API's own limit (errors.MAX_REQUEST_BYTES, 3 MiB), so the handlers see an
            # oversized request and answer it as Kubernetes does (413, INVALID_ARGUMENT); beyond
            # this gRPC refuses it itself (RESOURCE_EXHAUSTED "Received message larger than max",
            # which the client also reads as RequestEntityTooLarge).
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 256 * 1024 * 1024),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
            # Clients' BDP and keepalive pings must never get a long watch cut off (GOAWAY
            # "too_many_pings"): no strike limit.
            ("grpc.http2.max_ping_strikes", 0),
            ("grpc.max_concurrent_streams", 100_000),
            # gRPC core cancels calls beyond 1,000 waiting for the application (an ambiguous
            # CANCELLED); let them reach the handlers, which shed load explicitly (429) instead.
            ("grpc.server.max_pending_requests", 20_000),
            ("grpc.server.max_pending_requests_hard_limit", 40_000),
            ("grpc.so_reuseport", 0),
        ])
        self.grpc.add_generic_rpc_handlers(handlers.build(self.api))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.grpc)
        names = [k.service for k in KINDS] + ["kplane.v1.Cluster", health.SERVICE_NAME, reflection.SERVICE_NAME]
        reflection.enable_server_reflection(names, self.grpc)
        self.grpc_port = self.grpc.add_insecure_port(self.opts.listen)
        if not self.grpc_port:
            raise SystemExit(f"cannot listen on {self.opts.listen}")
        await self.grpc.start()
        await self._set_serving(False)
        if self.rest is not None:
            await self.rest.start()
        log.info("apiserver_listening", grpc=self.opts.listen, admin_port=self.admin.port,
                 rest=f"{self.rest.scheme}://{self.rest.host}:{self.rest.port}" if self.rest else "")

        self.etcd.connect()
        self.api.not_ready_reason = f"waiting for etcd at {','.join(self.opts.etcd_endpoints)}"
        await wait_for_etcd(self.etcd)
        self._etcd_error = None
        self.api.not_ready_reason = "loading the watch cache"
        await self.cache.start()
        await self._bootstrap()
        self.api.ready = True
        await self._set_serving(True)
        self._tasks.append(process.supervise("etcd-probe", self._probe_etcd))
        compactor = Compactor(self.etcd, budget=self.opts.history_budget, retention=self.opts.compaction_retention,
                              interval=self.opts.compaction_interval)
        if compactor.enabled:
            self._tasks.append(process.supervise("compaction", compactor.run))
        log.info("apiserver_ready", revision=self.cache.rev)

    async def _set_serving(self, serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        await self.health.set("", status)
        for k in KINDS:
            await self.health.set(k.service, status)

    async def _bootstrap(self) -> None:
        """Create the system namespaces (Kubernetes' system namespaces controller) and the built-in
        PriorityClasses, as Kubernetes' apiserver does at start."""
        for ns in system_namespaces():
            if self.cache[NAMESPACE].get("", ns.metadata.name) is not None:
                continue
            try:
                await self.registry.create(NAMESPACE, ns, SYSTEM_USER)
                log.info("namespace_bootstrapped", name=ns.metadata.name)
            except errors.AlreadyExists:
                pass
        for pc in system_priority_classes():
            if self.cache[PRIORITY_CLASS].get("", pc.metadata.name) is not None:
                continue
            try:
                await self.registry.create(PRIORITY_CLASS, pc, SYSTEM_USER)
                log.info("priority_class_bootstrapped", name=pc.metadata.name)
            except errors.AlreadyExists:
                pass

    async def _probe_etcd(self) -> None:
        serving = True
        while True:
            await asyncio.sleep(1.0)
            try:
                async with asyncio.timeout(2.0):
                    await self.etcd.current_revision()
                if self._etcd_error:
                    log.info("etcd_reachable_again", endpoints=self.opts.etcd_endpoints)
                self._etcd_error = None
            except (EtcdError, TimeoutError) as exc:
                reason = str(exc) or "timed out"
                if self._etcd_error is None:
                    log.warning("etcd_unreachable", endpoints=self.opts.etcd_endpoints, error=reason)
                self._etcd_error = reason
            healthy = self._health_reason() is None
            if healthy != serving:
                serving = healthy
                await self._set_serving(healthy)

    async def stop(self) -> None:
        await process.cancel_and_wait(self._tasks)
        if self.rest is not None:
            await self.rest.stop()
        if self.grpc is not None:
            await self.grpc.stop(grace=1.0)
        await self.cache.stop()
        await self.admin.stop()
        await self.etcd.close()


def main(argv: list[str] | None = None) -> None:
    opts = parse_args(argv)
    setup_logging("apiserver", opts.log_level)
    failpoints.arm_from_env()
    wait_for_files(opts.token_auth_file, opts.tls_cert_file, opts.tls_private_key_file)
    process.main("apiserver", lambda: ApiServer(opts))
