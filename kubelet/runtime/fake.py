"""``FakeRuntime``: the whole CRI-like runtime as a pure asyncio object, without gRPC.

The gRPC server (``server.py``) serves one; a hollow kubelet process holds many (one per node,
through ``client.InProcessRuntime``). Every RPC of ``protos/kplane/cri/v1/cri.proto`` is an async
method of the same name in snake_case, taking and returning the ``cri_pb2`` messages, and failing
with ``errors.RuntimeCallError`` (gRPC status code included).

It simulates what containerd does for the kubelet (KEP-1287 "CRI Changes", "Actuating Resizes",
"Memory Limit Decreases"): the lifecycle and idempotency (``FakeRuntime``), graceful stop
(``FakeRuntime.stop_container``), applied resources (``applied_resources``), a usage model with
OOM kills (``MEMORY_USAGE_ANNOTATION``, ``FakeRuntime._check_oom``), failpoints (``_rpc``),
persistence (``FakeRuntime.start``) and the container events of KEP-3386's Evented PLEG
(``FakeRuntime.get_container_events``, ``EventStream``).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import random
import secrets
import time
import weakref
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Iterator, Mapping, TypeVar

import grpc
from google.protobuf.message import Message
from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily

from kubelet.runtime import statefile
from kubelet.runtime.errors import RuntimeCallError, call_error
from kubelet.runtime.methods import METHODS
from machinery import failpoints, wellknown
from machinery.api import cri_pb2
from machinery.logging import get_logger
from machinery.quantity import Quantity, QuantityError, parse_quantity

RUNTIME_NAME = "kplane-fake"
RUNTIME_VERSION = "0.1.0"
RUNTIME_API_VERSION = "v1"

# The usage model: memory bytes and cpu millicores per container, from the annotations
# kplane.dev/memory-usage / kplane.dev/cpu-usage (quantities) and SetContainerUsage; a running
# container whose memory usage exceeds its memory limit is OOM-killed (FakeRuntime._check_oom).
MEMORY_USAGE_ANNOTATION = wellknown.MEMORY_USAGE_ANNOTATION
CPU_USAGE_ANNOTATION = wellknown.CPU_USAGE_ANNOTATION
SHUTDOWN_SECONDS_ANNOTATION = wellknown.SHUTDOWN_SECONDS_ANNOTATION

EXIT_CODE_KILLED = 137  # 128 + SIGKILL, what containerd reports for a killed container
REASON_COMPLETED = "Completed"
REASON_ERROR = "Error"
REASON_OOM_KILLED = "OOMKilled"

# Linux's limits on what a cgroup accepts (the kernel raises smaller values to these).
MIN_CPU_SHARES = 2
MAX_CPU_SHARES = 262_144
MIN_CPU_QUOTA_US = 1_000
DEFAULT_CPU_PERIOD_US = 100_000
MIN_CPU_PERIOD_US = 1_000
MAX_CPU_PERIOD_US = 1_000_000

CREATED = cri_pb2.CONTAINER_CREATED
RUNNING = cri_pb2.CONTAINER_RUNNING
EXITED = cri_pb2.CONTAINER_EXITED
READY = cri_pb2.SANDBOX_READY
NOTREADY = cri_pb2.SANDBOX_NOTREADY

_OPS = Counter("kplane_runtime_operations", "Runtime calls, by operation.", ["operation_type"])
_OP_ERRORS = Counter("kplane_runtime_operations_errors", "Runtime calls that failed, by operation.",
                     ["operation_type"])
_OP_DURATION = Histogram("kplane_runtime_operations_duration_seconds", "Duration of runtime calls, by operation.",
                         ["operation_type"],
                         buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))

# Events a GetContainerEvents subscriber may have unread before the runtime cuts it off (its stream
# fails with RESOURCE_EXHAUSTED and the kubelet relists), as containerd's event channel is bounded.
EVENT_BUFFER = 1000
CREATED_EVENT = cri_pb2.CONTAINER_CREATED_EVENT
STARTED_EVENT = cri_pb2.CONTAINER_STARTED_EVENT
STOPPED_EVENT = cri_pb2.CONTAINER_STOPPED_EVENT
DELETED_EVENT = cri_pb2.CONTAINER_DELETED_EVENT

for _m in METHODS.values():
    if _m.failpoint:
        failpoints.declare(_m.failpoint,
                           f"start of {_m.name}: error fails the call (gRPC UNKNOWN), sleep(ms) delays it")

log = get_logger()


# --------------------------------------------------------------------------------------------
# Internal state


@dataclass
class _Sandbox:
    id: str
    config: cri_pb2.PodSandboxConfig
    runtime_handler: str
    created_at: int
    ip: str
    state: cri_pb2.PodSandboxState = READY
    overhead: cri_pb2.LinuxContainerResources = field(default_factory=cri_pb2.LinuxContainerResources)
    resources: cri_pb2.LinuxContainerResources = field(default_factory=cri_pb2.LinuxContainerResources)
    _listed: cri_pb2.PodSandbox | None = field(default=None, init=False, repr=False, compare=False)

    def listed(self) -> cri_pb2.PodSandbox:
        """The sandbox as ListPodSandbox reports it. Built once (its config never changes) with the
        state set at each call; a response copies it, so no caller holds this message."""
        if self._listed is None:
            self._listed = cri_pb2.PodSandbox(id=self.id, metadata=self.config.metadata, created_at=self.created_at,
                                              labels=self.config.labels, annotations=self.config.annotations,
                                              runtime_handler=self.runtime_handler)
        self._listed.state = self.state
        return self._listed

    @property
    def pod(self) -> str:
        md = self.config.metadata
        return f"{md.namespace}/{md.name}"

    @property
    def reserved_name(self) -> str:
        md = self.config.metadata
        return f"{md.name}_{md.namespace}_{md.uid}_{md.attempt}"


@dataclass
class _Container:
    id: str
    sandbox_id: str
    pod: str
    config: cri_pb2.ContainerConfig
    created_at: int
    requested: cri_pb2.LinuxContainerResources
    actual: cri_pb2.LinuxContainerResources
    memory_usage: int = 0
    cpu_millicores: int = 0
    state: cri_pb2.ContainerState = CREATED
    started_at: int = 0
    finished_at: int = 0
    exit_code: int = 0
    reason: str = ""
    message: str = ""
    cpu_ns: int = 0  # cumulative cpu time at cpu_sampled_at
    cpu_sampled_at: int = 0  # unix nanos
    # Not persisted: the first StopContainer's loop time (SIGTERM sent), and the exit signal.
    term_at: float | None = None
    exited: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _listed: cri_pb2.Container | None = field(default=None, init=False, repr=False, compare=False)

    def listed(self) -> cri_pb2.Container:
        """The container as ListContainers reports it. Built once (its config never changes) with the
        state set at each call; a response copies it, so no caller holds this message."""
        if self._listed is None:
            ref = _image_ref(self.config.image.image)
            self._listed = cri_pb2.Container(id=self.id, pod_sandbox_id=self.sandbox_id, metadata=self.config.metadata,
                                             image=self.config.image, image_ref=ref, image_id=ref,
                                             created_at=self.created_at, labels=self.config.labels,
                                             annotations=self.config.annotations)
        self._listed.state = self.state
        return self._listed

    @property
    def name(self) -> str:
        return self.config.metadata.name

    @property
    def reserved_name(self) -> str:
        return f"{self.sandbox_id}/{self.config.metadata.name}_{self.config.metadata.attempt}"

    def nano_cores(self) -> int:
        """CPU in use now (core-nanoseconds per second), capped by the cfs quota."""
        if self.state != RUNNING:
            return 0
        rate = self.cpu_millicores * 1_000_000
        if self.actual.cpu_quota > 0:
            period = self.actual.cpu_period or DEFAULT_CPU_PERIOD_US
            rate = min(rate, self.actual.cpu_quota * 1_000_000_000 // period)
        return rate

    def cpu_total(self, now: int) -> int:
        """Cumulative cpu nanoseconds at ``now``."""
        return self.cpu_ns + self.nano_cores() * max(0, now - self.cpu_sampled_at) // 1_000_000_000

    def fold_cpu(self, now: int) -> None:
        """Account the cpu used so far; call before anything that changes the rate."""
        self.cpu_ns = self.cpu_total(now)
        self.cpu_sampled_at = now


class _Failed(Exception):
    """Raised inside a call; the call's wrapper turns it into a RuntimeCallError for its method."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def _not_found(what: str, ident: str) -> _Failed:
    return _Failed(grpc.StatusCode.NOT_FOUND, f"{what} {ident!r} not found")


def _precondition(message: str) -> _Failed:
    return _Failed(grpc.StatusCode.FAILED_PRECONDITION, message)


def _invalid(message: str) -> _Failed:
    return _Failed(grpc.StatusCode.INVALID_ARGUMENT, message)


# --------------------------------------------------------------------------------------------
# Helpers


def _now() -> int:
    return time.time_ns()


def _new_id() -> str:
    return secrets.token_hex(32)  # 64 hex characters, as containerd's ids


def _image_ref(image: str) -> str:
    return "sha256:" + hashlib.sha256(image.encode()).hexdigest()


def _copy(msg: _M) -> _M:
    out = type(msg)()
    out.CopyFrom(msg)
    return out


def applied_resources(requested: cri_pb2.LinuxContainerResources,
                      cpu_quota_rounding_us: int = 0) -> cri_pb2.LinuxContainerResources:
    """What a Linux cgroup ends up with when asked for ``requested`` (KEP-1287 "Actuating Resizes").

    ``ContainerStatus.resources`` is what the "kernel" applied: cpu shares at least 2, cpu quota at
    least 1000us (period 100000us when unset), optionally rounded up to a multiple of
    ``cpu_quota_rounding_us`` (systemd rounds to 10ms) — so actual can differ from asked."""
    actual = _copy(requested)
    if actual.cpu_shares > 0:
        actual.cpu_shares = min(max(actual.cpu_shares, MIN_CPU_SHARES), MAX_CPU_SHARES)
    if actual.cpu_quota > 0:
        period = actual.cpu_period or DEFAULT_CPU_PERIOD_US
        actual.cpu_period = min(max(period, MIN_CPU_PERIOD_US), MAX_CPU_PERIOD_US)
        quota = max(actual.cpu_quota, MIN_CPU_QUOTA_US)
        if cpu_quota_rounding_us > 0:
            quota = -(-quota // cpu_quota_rounding_us) * cpu_quota_rounding_us
        actual.cpu_quota = quota
    return actual


def _annotation_quantity(annotations: Mapping[str, str], key: str, convert: Callable[[Quantity], int],
                         container: str) -> int:
    text = annotations.get(key)
    if not text:
        return 0
    try:
        return max(0, convert(parse_quantity(text)))
    except (QuantityError, ValueError) as exc:
        log.warning("bad_usage_annotation", container=container, annotation=key, value=text, error=str(exc))
        return 0


def _shutdown_seconds(c: _Container) -> float:
    text = c.config.annotations.get(SHUTDOWN_SECONDS_ANNOTATION, "")
    if not text:
        return 0.0
    try:
        return max(0.0, float(text))
    except ValueError:
        log.warning("bad_shutdown_annotation", container=c.name, pod=c.pod, value=text)
        return 0.0


POD_UID_LABEL = "io.kubernetes.pod.uid"  # what kubelets label sandboxes and containers with


def _pod_uid(labels: Mapping[str, str]) -> str:
    return labels.get(POD_UID_LABEL, "")


def _drop_from(index: dict[str, dict], key: str, ident: str) -> None:
    bucket = index.get(key)
    if bucket is not None:
        bucket.pop(ident, None)
        if not bucket:
            del index[key]


def _labels_match(labels: Mapping[str, str], selector: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _resources_fields(r: cri_pb2.LinuxContainerResources) -> dict[str, int | str]:
    """The set fields, for logs."""
    return {f.name: v for f, v in r.ListFields()}


_T = TypeVar("_T", bound=Message)
_M = TypeVar("_M", bound=Message)


def _rpc(attr: str, *, from_memory: bool = False) -> Callable[[Callable[..., Awaitable[_T]]],
                                                             Callable[..., Awaitable[_T]]]:
    """Wrap a call: its failpoint, its metrics, and its errors as RuntimeCallError for its method.

    Failpoints ``runtime/<rpc>`` (``runtime/update-container-resources``, ...) at the start of every
    RuntimeService call: ``error`` fails it (gRPC UNKNOWN), ``sleep(ms)`` delays it.
    ``from_memory``: the call answers from the runtime's memory and awaits nothing but its armed
    failpoint (``reads_from_memory``; an in-process caller runs it without a timer)."""
    method = METHODS[attr]
    failpoint = method.failpoint
    # The method's series, looked up once (a hollow node makes hundreds of thousands of calls).
    ops, op_errors, op_duration = _OPS.labels(attr), _OP_ERRORS.labels(attr), _OP_DURATION.labels(attr)

    def wrap(fn: Callable[..., Awaitable[_T]]) -> Callable[..., Awaitable[_T]]:
        @functools.wraps(fn)
        async def call(self: "FakeRuntime", request: Message) -> _T:
            start = time.perf_counter()
            ops.inc()
            try:
                if failpoint is not None and failpoints.is_armed(failpoint):
                    await failpoints.hit(failpoint)
                return await fn(self, request)
            except failpoints.FailpointError as exc:
                op_errors.inc()
                raise RuntimeCallError(method.name, str(exc), grpc.StatusCode.UNKNOWN) from None
            except _Failed as exc:
                op_errors.inc()
                raise call_error(method.name, exc.code, exc.message) from None
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug: one clear line to the caller, the traceback in the log
                op_errors.inc()
                self._log.exception("runtime_internal_error", method=method.name)
                raise RuntimeCallError(method.name, f"internal error: {exc}", grpc.StatusCode.INTERNAL) from None
            finally:
                op_duration.observe(time.perf_counter() - start)
        call.from_memory = from_memory  # type: ignore[attr-defined]
        return call
    return wrap


def reads_from_memory(call: Callable[..., Awaitable[Message]]) -> bool:
    """Whether a runtime call was declared ``from_memory`` (``_rpc``)."""
    return getattr(call, "from_memory", False)


class EventStream:
    """One ``GetContainerEvents`` subscriber: every event of the runtime from its subscription on,
    in order. Iterating fails with ``RuntimeCallError`` (RESOURCE_EXHAUSTED) once it fell
    ``EVENT_BUFFER`` events behind, and ends when ``close``d."""

    def __init__(self, runtime: "FakeRuntime"):
        self._runtime = runtime
        self._queue: asyncio.Queue[cri_pb2.ContainerEventResponse | None] = asyncio.Queue()
        self._overflowed = False

    def put(self, event: cri_pb2.ContainerEventResponse) -> None:
        if self._queue.qsize() >= EVENT_BUFFER:
            self._overflowed = True
            self.close()
            return
        self._queue.put_nowait(event)

    def close(self) -> None:
        streams = self._runtime._streams
        if self in streams:
            del streams[self]
            self._queue.put_nowait(None)

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> cri_pb2.ContainerEventResponse:
        event = await self._queue.get()
        if event is not None:
            return event
        if self._overflowed:
            raise RuntimeCallError(METHODS["get_container_events"].name,
                                   f"the subscriber fell {EVENT_BUFFER} events behind",
                                   grpc.StatusCode.RESOURCE_EXHAUSTED)
        raise StopAsyncIteration


# --------------------------------------------------------------------------------------------
# The runtime


class FakeRuntime:
    """One node's runtime. ``await start()`` before use (loads the state file), ``await close()`` after.

    Lifecycle: sandboxes READY -> NOTREADY -> removed; containers CREATED -> RUNNING -> EXITED ->
    removed, with unix-nanosecond times, exit codes and reasons (``Completed``, ``Error``,
    ``OOMKilled``). ``(name, attempt)`` is reserved per sandbox as containerd reserves names
    (``_reserve``). Idempotency: stopping what is stopped and removing what is gone succeed; the same
    ``UpdateContainerResources`` twice changes nothing the second time.
    """

    def __init__(self, node_name: str, *, state_file: str | None = None, cpu_quota_rounding_us: int = 0):
        self.node_name = node_name
        self.cpu_quota_rounding_us = cpu_quota_rounding_us
        self._sandboxes: dict[str, _Sandbox] = {}
        self._containers: dict[str, _Container] = {}
        self._names: dict[str, str] = {}  # reserved name -> sandbox or container id
        # Indexes, so a kubelet's per-pod calls do not scan every container of the node.
        self._by_sandbox: dict[str, dict[str, _Container]] = {}  # sandbox id -> its containers
        self._sandboxes_of_pod: dict[str, dict[str, _Sandbox]] = {}  # pod uid label -> sandboxes
        self._containers_of_pod: dict[str, dict[str, _Container]] = {}  # pod uid label -> containers
        self._state_file = statefile.StateFile(state_file, self._snapshot) if state_file else None
        self._streams: dict[EventStream, None] = {}  # GetContainerEvents subscribers, in order
        self._log = get_logger(node=node_name)
        self.started = False
        _RUNTIMES.add(self)

    # ---- lifecycle of the object ------------------------------------------------------------

    async def start(self) -> None:
        """Persistence: with a state file every change is on disk before the call returns (``_save``),
        and the state is loaded here, at start: running containers stay running across a runtime
        restart, as containerd's shims keep them."""
        if self._state_file is not None:
            self._restore(await self._state_file.load())
        self.started = True
        running = sum(1 for c in self._containers.values() if c.state == RUNNING)
        self._log.info("runtime_started", sandboxes=len(self._sandboxes), containers=len(self._containers),
                       running=running, state_file=str(self._state_file.path) if self._state_file else None)

    async def close(self) -> None:
        for stream in list(self._streams):
            stream.close()
        if self._state_file is not None:
            await self._state_file.close()

    # ---- RuntimeService ---------------------------------------------------------------------

    @_rpc("version", from_memory=True)
    async def version(self, request: cri_pb2.VersionRequest) -> cri_pb2.VersionResponse:
        return cri_pb2.VersionResponse(version="0.1.0", runtime_name=RUNTIME_NAME, runtime_version=RUNTIME_VERSION,
                                       runtime_api_version=RUNTIME_API_VERSION)

    @_rpc("status", from_memory=True)
    async def status(self, request: cri_pb2.StatusRequest) -> cri_pb2.StatusResponse:
        conditions = [cri_pb2.RuntimeCondition(type="RuntimeReady", status=True),
                      cri_pb2.RuntimeCondition(type="NetworkReady", status=True)]
        return cri_pb2.StatusResponse(status=cri_pb2.RuntimeStatus(conditions=conditions))

    @_rpc("run_pod_sandbox")
    async def run_pod_sandbox(self, request: cri_pb2.RunPodSandboxRequest) -> cri_pb2.RunPodSandboxResponse:
        md = request.config.metadata
        if not (md.name and md.uid and md.namespace):
            raise _invalid("sandbox config metadata must have a name, uid and namespace")
        if request.runtime_handler:
            raise _invalid(f"no runtime for {request.runtime_handler!r} is configured")
        sb = _Sandbox(id=_new_id(), config=_copy(request.config), runtime_handler=request.runtime_handler,
                      created_at=_now(), ip=self._new_ip())
        self._reserve(sb.reserved_name, sb.id, "sandbox")
        sb.overhead.CopyFrom(request.config.linux.overhead)
        sb.resources.CopyFrom(request.config.linux.resources)
        self._add_sandbox(sb)
        self._event(sb, sb.id, CREATED_EVENT)
        self._event(sb, sb.id, STARTED_EVENT)
        self._log.info("sandbox_started", pod=sb.pod, sandbox=sb.id, attempt=md.attempt)
        await self._save()
        return cri_pb2.RunPodSandboxResponse(pod_sandbox_id=sb.id)

    @_rpc("stop_pod_sandbox")
    async def stop_pod_sandbox(self, request: cri_pb2.StopPodSandboxRequest) -> cri_pb2.StopPodSandboxResponse:
        sb = self._sandbox(request.pod_sandbox_id)
        changed = False
        for c in self._containers_of(sb.id):
            if c.state == RUNNING:  # "must be forcibly terminated"
                self._exit(c, EXIT_CODE_KILLED, REASON_ERROR)
                changed = True
        if sb.state != NOTREADY:
            sb.state = NOTREADY
            self._event(sb, sb.id, STOPPED_EVENT)
            self._log.info("sandbox_stopped", pod=sb.pod, sandbox=sb.id)
            changed = True
        if changed:
            await self._save()
        return cri_pb2.StopPodSandboxResponse()

    @_rpc("remove_pod_sandbox")
    async def remove_pod_sandbox(self, request: cri_pb2.RemovePodSandboxRequest) -> cri_pb2.RemovePodSandboxResponse:
        sb = self._sandboxes.get(request.pod_sandbox_id)
        if sb is None:
            return cri_pb2.RemovePodSandboxResponse()
        for c in list(self._containers_of(sb.id)):
            self._remove_container(c)
        self._drop_sandbox(sb)
        self._event(sb, sb.id, DELETED_EVENT)
        self._log.info("sandbox_removed", pod=sb.pod, sandbox=sb.id)
        await self._save()
        return cri_pb2.RemovePodSandboxResponse()

    @_rpc("pod_sandbox_status", from_memory=True)
    async def pod_sandbox_status(self, request: cri_pb2.PodSandboxStatusRequest) -> cri_pb2.PodSandboxStatusResponse:
        sb = self._sandbox(request.pod_sandbox_id)
        return cri_pb2.PodSandboxStatusResponse(
            status=self._sandbox_status(sb), timestamp=_now(),
            containers_statuses=[self._container_status(c) for c in self._containers_of(sb.id)])

    @_rpc("list_pod_sandbox", from_memory=True)
    async def list_pod_sandbox(self, request: cri_pb2.ListPodSandboxRequest) -> cri_pb2.ListPodSandboxResponse:
        f = request.filter
        items = []
        uid = f.label_selector.get(POD_UID_LABEL)
        candidates = self._sandboxes_of_pod.get(uid, {}) if uid is not None else self._sandboxes
        for sb in candidates.values():
            if f.id and sb.id != f.id:
                continue
            if f.HasField("state") and sb.state != f.state.state:
                continue
            if not _labels_match(sb.config.labels, f.label_selector):
                continue
            items.append(sb.listed())
        return cri_pb2.ListPodSandboxResponse(items=items)

    @_rpc("create_container")
    async def create_container(self, request: cri_pb2.CreateContainerRequest) -> cri_pb2.CreateContainerResponse:
        sb = self._sandbox(request.pod_sandbox_id)
        if sb.state != READY:
            raise _precondition(f"sandbox {sb.id!r} is not ready: cannot create a container in it")
        if not request.config.metadata.name:
            raise _invalid("container config metadata must have a name")
        config = _copy(request.config)
        requested = _copy(config.linux.resources)
        c = _Container(id=_new_id(), sandbox_id=sb.id, pod=sb.pod, config=config, created_at=_now(),
                       requested=requested, actual=applied_resources(requested, self.cpu_quota_rounding_us))
        self._reserve(c.reserved_name, c.id, "container")
        c.memory_usage = _annotation_quantity(config.annotations, MEMORY_USAGE_ANNOTATION, Quantity.value, c.name)
        c.cpu_millicores = _annotation_quantity(config.annotations, CPU_USAGE_ANNOTATION, Quantity.milli_value,
                                                c.name)
        self._add_container(c)
        self._event(sb, c.id, CREATED_EVENT)
        self._log.info("container_created", pod=c.pod, container=c.name, container_id=c.id,
                       attempt=config.metadata.attempt, resources=_resources_fields(c.actual))
        await self._save()
        return cri_pb2.CreateContainerResponse(container_id=c.id)

    @_rpc("start_container")
    async def start_container(self, request: cri_pb2.StartContainerRequest) -> cri_pb2.StartContainerResponse:
        c = self._container(request.container_id)
        if c.state == RUNNING:
            raise _precondition(f"failed to start container {c.id!r}: container is already running")
        if c.state != CREATED:
            raise _precondition(f"failed to start container {c.id!r}: container is in "
                                f"{cri_pb2.ContainerState.Name(c.state)} state")
        sb = self._sandboxes.get(c.sandbox_id)
        if sb is None or sb.state != READY:
            raise _precondition(f"failed to start container {c.id!r}: its sandbox is not ready")
        now = _now()
        c.state, c.started_at, c.cpu_sampled_at = RUNNING, now, now
        self._event(sb, c.id, STARTED_EVENT)
        self._log.info("container_started", pod=c.pod, container=c.name, container_id=c.id)
        self._check_oom(c)
        await self._save()
        return cri_pb2.StartContainerResponse()

    @_rpc("stop_container")
    async def stop_container(self, request: cri_pb2.StopContainerRequest) -> cri_pb2.StopContainerResponse:
        """Graceful stop: ``StopContainer(timeout)`` "sends SIGTERM" and returns once the container has
        exited: after its shutdown time (annotation ``kplane.dev/shutdown-seconds``, default 0) with
        exit code 0 if that is within the timeout, else at the timeout, killed: 137, reason ``Error``."""
        c = self._container(request.container_id)
        if c.state != RUNNING:
            return cri_pb2.StopContainerResponse()  # idempotent: already stopped (or never started)
        loop = asyncio.get_running_loop()
        if request.timeout <= 0:  # no grace: SIGKILL at once
            self._exit(c, EXIT_CODE_KILLED, REASON_ERROR)
            await self._save()
            return cri_pb2.StopContainerResponse()
        if c.term_at is None:
            c.term_at = loop.time()
            self._log.info("container_stopping", pod=c.pod, container=c.name, container_id=c.id,
                           timeout=request.timeout, shutdown_seconds=_shutdown_seconds(c))
        graceful_at = c.term_at + _shutdown_seconds(c)
        kill_at = loop.time() + request.timeout
        try:
            async with asyncio.timeout_at(min(graceful_at, kill_at)):
                await c.exited.wait()
        except TimeoutError:
            pass
        if c.state == RUNNING:  # not exited meanwhile (another stop, an OOM kill, a removal)
            if graceful_at <= kill_at:
                self._exit(c, 0, REASON_COMPLETED)
            else:
                self._exit(c, EXIT_CODE_KILLED, REASON_ERROR)
            await self._save()
        return cri_pb2.StopContainerResponse()

    @_rpc("remove_container")
    async def remove_container(self, request: cri_pb2.RemoveContainerRequest) -> cri_pb2.RemoveContainerResponse:
        c = self._containers.get(request.container_id)
        if c is None:
            return cri_pb2.RemoveContainerResponse()
        self._remove_container(c)
        await self._save()
        return cri_pb2.RemoveContainerResponse()

    @_rpc("list_containers", from_memory=True)
    async def list_containers(self, request: cri_pb2.ListContainersRequest) -> cri_pb2.ListContainersResponse:
        f = request.filter
        out = []
        uid = f.label_selector.get(POD_UID_LABEL)
        if f.pod_sandbox_id:
            candidates = self._by_sandbox.get(f.pod_sandbox_id, {})
        elif uid is not None:
            candidates = self._containers_of_pod.get(uid, {})
        else:
            candidates = self._containers
        for c in candidates.values():
            if f.id and c.id != f.id:
                continue
            if f.pod_sandbox_id and c.sandbox_id != f.pod_sandbox_id:
                continue
            if f.HasField("state") and c.state != f.state.state:
                continue
            if not _labels_match(c.config.labels, f.label_selector):
                continue
            out.append(c.listed())
        return cri_pb2.ListContainersResponse(containers=out)

    @_rpc("container_status", from_memory=True)
    async def container_status(self, request: cri_pb2.ContainerStatusRequest) -> cri_pb2.ContainerStatusResponse:
        return cri_pb2.ContainerStatusResponse(status=self._container_status(self._container(request.container_id)))

    @_rpc("update_container_resources")
    async def update_container_resources(
            self, request: cri_pb2.UpdateContainerResourcesRequest) -> cri_pb2.UpdateContainerResourcesResponse:
        c = self._container(request.container_id)
        if not request.HasField("linux"):
            raise _invalid("linux resources are required")
        actual = applied_resources(request.linux, self.cpu_quota_rounding_us)
        if request.linux == c.requested and actual == c.actual:
            return cri_pb2.UpdateContainerResourcesResponse()  # idempotent: nothing to change
        if c.state == RUNNING:
            self._check_pod_limits(c, request.linux)
        # As containerd: a container that is not running only has its spec updated; either way the
        # update succeeds, and a running one is OOM-killed if its usage is above the new limit.
        c.fold_cpu(_now())
        before = c.actual
        c.requested, c.actual = _copy(request.linux), actual
        self._log.info("container_resources_updated", pod=c.pod, container=c.name, container_id=c.id,
                       state=cri_pb2.ContainerState.Name(c.state), before=_resources_fields(before),
                       requested=_resources_fields(c.requested), applied=_resources_fields(actual))
        self._check_oom(c)
        await self._save()
        return cri_pb2.UpdateContainerResourcesResponse()

    def _check_pod_limits(self, c: _Container, linux: cri_pb2.LinuxContainerResources) -> None:
        """Refuse an update that would take the sandbox's running containers over its pod-level
        limit, as a real pod cgroup does (a child cgroup's limit cannot be raised past its
        parent's, and the kernel refuses the write): KEP-1287's ordering rule — the pod limit
        raised before the containers grow, lowered after they shrink — is checked by its outcome.
        A resource with no pod-level limit (0), or a container without a limit, is not checked."""
        sb = self._sandboxes.get(c.sandbox_id)
        if sb is None:
            return
        others = [x.requested for x in self._by_sandbox.get(sb.id, {}).values() if x.state == RUNNING and x.id != c.id]
        for what, field_, pod_limit, overhead in (
                ("memory limits", "memory_limit_in_bytes", sb.resources.memory_limit_in_bytes,
                 sb.overhead.memory_limit_in_bytes),
                ("cpu quotas", "cpu_quota", sb.resources.cpu_quota, sb.overhead.cpu_quota)):
            values = [getattr(r, field_) for r in (*others, linux)]
            if pod_limit <= 0 or not all(v > 0 for v in values):
                continue
            total = sum(values) + max(overhead, 0)
            if total > pod_limit:
                raise _precondition(f"container {c.name}: the containers' {what} ({total}) would exceed the "
                                    f"pod's ({pod_limit})")

    @_rpc("update_pod_sandbox_resources")
    async def update_pod_sandbox_resources(
            self, request: cri_pb2.UpdatePodSandboxResourcesRequest) -> cri_pb2.UpdatePodSandboxResourcesResponse:
        sb = self._sandbox(request.pod_sandbox_id)
        changed = False
        if request.HasField("overhead") and request.overhead != sb.overhead:
            sb.overhead.CopyFrom(request.overhead)
            changed = True
        if request.HasField("resources") and request.resources != sb.resources:
            sb.resources.CopyFrom(request.resources)
            changed = True
        if changed:
            self._log.info("sandbox_resources_updated", pod=sb.pod, sandbox=sb.id,
                           overhead=_resources_fields(sb.overhead), resources=_resources_fields(sb.resources))
            await self._save()
        return cri_pb2.UpdatePodSandboxResourcesResponse()

    @_rpc("container_stats", from_memory=True)
    async def container_stats(self, request: cri_pb2.ContainerStatsRequest) -> cri_pb2.ContainerStatsResponse:
        return cri_pb2.ContainerStatsResponse(stats=self._stats(self._container(request.container_id), _now()))

    @_rpc("list_container_stats", from_memory=True)
    async def list_container_stats(
            self, request: cri_pb2.ListContainerStatsRequest) -> cri_pb2.ListContainerStatsResponse:
        f, now = request.filter, _now()
        stats = [self._stats(c, now) for c in self._containers.values()
                 if c.state == RUNNING and (not f.id or c.id == f.id)
                 and (not f.pod_sandbox_id or c.sandbox_id == f.pod_sandbox_id)
                 and _labels_match(c.config.labels, f.label_selector)]
        return cri_pb2.ListContainerStatsResponse(stats=stats)

    # ---- FakeRuntimeControl -----------------------------------------------------------------

    @_rpc("set_container_usage")
    async def set_container_usage(self, request: cri_pb2.SetContainerUsageRequest) -> cri_pb2.SetContainerUsageResponse:
        c = self._container(request.container_id)
        if request.memory_bytes < 0 or request.cpu_millicores < 0:
            raise _invalid("usage cannot be negative")
        c.fold_cpu(_now())
        if request.HasField("memory_bytes"):
            c.memory_usage = request.memory_bytes
        if request.HasField("cpu_millicores"):
            c.cpu_millicores = request.cpu_millicores
        self._log.info("container_usage_set", pod=c.pod, container=c.name, container_id=c.id,
                       memory_bytes=c.memory_usage, cpu_millicores=c.cpu_millicores)
        self._check_oom(c)
        await self._save()
        return cri_pb2.SetContainerUsageResponse(status=self._container_status(c))

    @_rpc("exit_container")
    async def exit_container(self, request: cri_pb2.ExitContainerRequest) -> cri_pb2.ExitContainerResponse:
        c = self._container(request.container_id)
        if c.state != RUNNING:
            raise _precondition(f"container {c.id!r} is not running")
        reason = request.reason or (REASON_COMPLETED if request.exit_code == 0 else REASON_ERROR)
        self._exit(c, request.exit_code, reason, request.message)
        await self._save()
        return cri_pb2.ExitContainerResponse(status=self._container_status(c))

    @_rpc("get_state", from_memory=True)
    async def get_state(self, request: cri_pb2.GetStateRequest) -> cri_pb2.GetStateResponse:
        return cri_pb2.GetStateResponse(state=self._snapshot())

    # ---- internals --------------------------------------------------------------------------

    def _sandbox(self, sandbox_id: str) -> _Sandbox:
        sb = self._sandboxes.get(sandbox_id)
        if sb is None:
            raise _not_found("sandbox", sandbox_id)
        return sb

    def _container(self, container_id: str) -> _Container:
        c = self._containers.get(container_id)
        if c is None:
            raise _not_found("container", container_id)
        return c

    def _containers_of(self, sandbox_id: str) -> Iterator[_Container]:
        return iter(self._by_sandbox.get(sandbox_id, {}).values())

    def _add_sandbox(self, sb: _Sandbox) -> None:
        self._sandboxes[sb.id] = sb
        self._names[sb.reserved_name] = sb.id
        self._by_sandbox.setdefault(sb.id, {})
        self._sandboxes_of_pod.setdefault(_pod_uid(sb.config.labels), {})[sb.id] = sb

    def _drop_sandbox(self, sb: _Sandbox) -> None:
        del self._sandboxes[sb.id]
        self._names.pop(sb.reserved_name, None)
        self._by_sandbox.pop(sb.id, None)
        _drop_from(self._sandboxes_of_pod, _pod_uid(sb.config.labels), sb.id)

    def _add_container(self, c: _Container) -> None:
        self._containers[c.id] = c
        self._names[c.reserved_name] = c.id
        self._by_sandbox.setdefault(c.sandbox_id, {})[c.id] = c
        self._containers_of_pod.setdefault(_pod_uid(c.config.labels), {})[c.id] = c

    def _drop_container(self, c: _Container) -> None:
        del self._containers[c.id]
        self._names.pop(c.reserved_name, None)
        _drop_from(self._by_sandbox, c.sandbox_id, c.id)
        _drop_from(self._containers_of_pod, _pod_uid(c.config.labels), c.id)

    def _reserve(self, name: str, ident: str, what: str) -> None:
        holder = self._names.get(name)
        if holder is not None:
            raise _Failed(grpc.StatusCode.ALREADY_EXISTS,
                          f"failed to reserve {what} name {name!r}: name {name!r} is reserved for {holder!r}")
        self._names[name] = ident

    def _new_ip(self) -> str:
        used = {sb.ip for sb in self._sandboxes.values()}
        while True:
            ip = f"10.88.{random.randint(0, 255)}.{random.randint(2, 254)}"
            if ip not in used:
                return ip

    def _exit(self, c: _Container, code: int, reason: str, message: str = "") -> None:
        now = _now()
        c.fold_cpu(now)
        c.state, c.finished_at, c.exit_code, c.reason, c.message = EXITED, now, code, reason, message
        c.exited.set()
        self._container_event(c, STOPPED_EVENT)
        self._log.info("container_exited", pod=c.pod, container=c.name, container_id=c.id, exit_code=code,
                       reason=reason)

    def _check_oom(self, c: _Container) -> None:
        """cgroups v2: a running container above its memory limit is OOM-killed by the kernel, be it at
        start, on a limit decrease or on usage growth."""
        limit = c.actual.memory_limit_in_bytes
        if c.state == RUNNING and limit > 0 and c.memory_usage > limit:
            self._log.warning("container_oom_killed", pod=c.pod, container=c.name, container_id=c.id,
                              memory_usage=c.memory_usage, memory_limit=limit)
            self._exit(c, EXIT_CODE_KILLED, REASON_OOM_KILLED,
                       f"memory usage {c.memory_usage} bytes above the limit {limit} bytes")

    def _remove_container(self, c: _Container) -> None:
        if c.state == RUNNING:  # "must be forcibly removed"
            self._exit(c, EXIT_CODE_KILLED, REASON_ERROR)
        self._drop_container(c)
        self._container_event(c, DELETED_EVENT)
        self._log.info("container_removed", pod=c.pod, container=c.name, container_id=c.id)

    async def _save(self) -> None:
        if self._state_file is not None:
            await self._state_file.save()

    # ---- events (KEP-3386) ----------------------------------------------------------------------

    async def get_container_events(self, request: cri_pb2.GetEventsRequest) -> EventStream:
        """Subscribe to the events of every change from now on (CRI's GetContainerEvents; a stream,
        so not one of the ``_rpc`` calls). Its failpoint fails or delays the subscription."""
        method = METHODS["get_container_events"]
        if method.failpoint is not None and failpoints.is_armed(method.failpoint):
            try:
                await failpoints.hit(method.failpoint)
            except failpoints.FailpointError as exc:
                raise RuntimeCallError(method.name, str(exc), grpc.StatusCode.UNKNOWN) from None
        stream = EventStream(self)
        self._streams[stream] = None
        return stream

    def _event(self, sb: _Sandbox, container_id: str, type_: cri_pb2.ContainerEventType) -> None:
        """Tell every subscriber that ``container_id`` (a container of ``sb``, or ``sb`` itself)
        changed, with the sandbox's status and its containers' as they are now."""
        if not self._streams:
            return
        event = cri_pb2.ContainerEventResponse(
            container_id=container_id, container_event_type=type_, created_at=_now(),
            pod_sandbox_status=self._sandbox_status(sb),
            containers_statuses=[self._container_status(c) for c in self._containers_of(sb.id)])
        for stream in list(self._streams):
            stream.put(event)

    def _container_event(self, c: _Container, type_: cri_pb2.ContainerEventType) -> None:
        if not self._streams:
            return
        sb = self._sandboxes.get(c.sandbox_id)
        if sb is not None:
            self._event(sb, c.id, type_)

    def _sandbox_status(self, sb: _Sandbox) -> cri_pb2.PodSandboxStatus:
        return cri_pb2.PodSandboxStatus(id=sb.id, metadata=sb.config.metadata, state=sb.state,
                                        created_at=sb.created_at, network=cri_pb2.PodSandboxNetworkStatus(ip=sb.ip),
                                        labels=sb.config.labels, annotations=sb.config.annotations,
                                        runtime_handler=sb.runtime_handler)

    def _container_status(self, c: _Container) -> cri_pb2.ContainerStatus:
        ref = _image_ref(c.config.image.image)
        return cri_pb2.ContainerStatus(
            id=c.id, metadata=c.config.metadata, state=c.state, created_at=c.created_at, started_at=c.started_at,
            finished_at=c.finished_at, exit_code=c.exit_code, image=c.config.image, image_ref=ref, image_id=ref,
            reason=c.reason, message=c.message, labels=c.config.labels, annotations=c.config.annotations,
            log_path=c.config.log_path, resources=cri_pb2.ContainerResources(linux=c.actual))

    def _stats(self, c: _Container, now: int) -> cri_pb2.ContainerStats:
        running = c.state == RUNNING
        usage = c.memory_usage if running else 0
        memory = cri_pb2.MemoryUsage(timestamp=now, working_set_bytes=cri_pb2.UInt64Value(value=usage),
                                     usage_bytes=cri_pb2.UInt64Value(value=usage),
                                     rss_bytes=cri_pb2.UInt64Value(value=usage))
        if c.actual.memory_limit_in_bytes > 0:
            memory.available_bytes.value = max(0, c.actual.memory_limit_in_bytes - usage)
        return cri_pb2.ContainerStats(
            attributes=cri_pb2.ContainerAttributes(id=c.id, metadata=c.config.metadata, labels=c.config.labels,
                                                   annotations=c.config.annotations),
            cpu=cri_pb2.CpuUsage(timestamp=now, usage_core_nano_seconds=cri_pb2.UInt64Value(value=c.cpu_total(now)),
                                 usage_nano_cores=cri_pb2.UInt64Value(value=c.nano_cores())),
            memory=memory)

    # ---- persistence --------------------------------------------------------------------------

    def _snapshot(self) -> cri_pb2.RuntimeState:
        state = cri_pb2.RuntimeState(node_name=self.node_name)
        for sb in self._sandboxes.values():
            state.sandboxes.append(cri_pb2.SandboxRecord(status=self._sandbox_status(sb), config=sb.config,
                                                         overhead=sb.overhead, resources=sb.resources))
        for c in self._containers.values():
            state.containers.append(cri_pb2.ContainerRecord(
                status=self._container_status(c), pod_sandbox_id=c.sandbox_id, config=c.config,
                requested=c.requested, memory_usage_bytes=c.memory_usage, cpu_usage_millicores=c.cpu_millicores,
                usage_core_nano_seconds=c.cpu_ns, usage_sampled_at=c.cpu_sampled_at))
        return state

    def _restore(self, state: cri_pb2.RuntimeState) -> None:
        if state.node_name and state.node_name != self.node_name:
            self._log.warning("state_file_of_other_node", state_node=state.node_name)
        for rec in state.sandboxes:
            st = rec.status
            if not st.id:
                continue
            sb = _Sandbox(id=st.id, config=_copy(rec.config), runtime_handler=st.runtime_handler,
                          created_at=st.created_at, ip=st.network.ip, state=st.state)
            sb.overhead.CopyFrom(rec.overhead)
            sb.resources.CopyFrom(rec.resources)
            self._add_sandbox(sb)
        for crec in state.containers:
            cst = crec.status
            if not cst.id:
                continue
            owner = self._sandboxes.get(crec.pod_sandbox_id)
            c = _Container(id=cst.id, sandbox_id=crec.pod_sandbox_id, pod=owner.pod if owner else "",
                           config=_copy(crec.config), created_at=cst.created_at, requested=_copy(crec.requested),
                           actual=_copy(cst.resources.linux), memory_usage=crec.memory_usage_bytes,
                           cpu_millicores=crec.cpu_usage_millicores, state=cst.state, started_at=cst.started_at,
                           finished_at=cst.finished_at, exit_code=cst.exit_code, reason=cst.reason,
                           message=cst.message, cpu_ns=crec.usage_core_nano_seconds,
                           cpu_sampled_at=crec.usage_sampled_at)
            if c.state == EXITED:
                c.exited.set()
            self._add_container(c)

    def count_by_state(self) -> dict[str, int]:
        counts = {name: 0 for name in cri_pb2.ContainerState.keys()}
        for c in self._containers.values():
            counts[cri_pb2.ContainerState.Name(c.state)] += 1
        return counts


# --------------------------------------------------------------------------------------------
# kplane_runtime_containers{state}: summed over the runtimes of this process at scrape time.

_RUNTIMES: "weakref.WeakSet[FakeRuntime]" = weakref.WeakSet()


class _ContainersCollector:
    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("kplane_runtime_containers", "Containers the runtime holds, by state.",
                              labels=["state"])
        totals: dict[str, int] = {name: 0 for name in cri_pb2.ContainerState.keys()}
        for rt in list(_RUNTIMES):
            for state, n in rt.count_by_state().items():
                totals[state] += n
        for state, n in totals.items():
            g.add_metric([state], n)
        yield g

    def describe(self) -> list:
        return []


REGISTRY.register(_ContainersCollector())
