"""An autoscaler's in-place resize, written on the generated gRPC stubs alone (docs/resize-clients.md).

What any client of the kplane API — in any language with protoc — does to resize a pod and learn
how the resize went (KEP-1287: In-place Update of Pod Resources): ``Pods/Get`` the pod, send it
back with new container resources to ``Pods/Resize``, then ``Pods/Watch`` it from the
resourceVersion the resize returned and report each change of its resize conditions.
It does not use ``machinery.client`` or the ``kplane`` command, only ``machinery.api`` (the code
protoc generated from ``protos/kplane/v1/``) and ``machinery.quantity`` to compare quantities.

    python examples/resize_client.py [--server HOST:PORT] [--token-file F] [--namespace NS]
        POD --cpu Q [--memory Q] [--container NAME] [--timeout SECONDS] [--json]

The cluster is found as ``kplane`` finds it: ``--server``, else ``$KPLANE_SERVER``, else the
``server`` of ``<data-dir>/cluster.json``; the token from ``--token-file``, else ``$KPLANE_TOKEN``,
else ``<data-dir>/tokens/admin.token`` (``--data-dir``, default ``$KPLANE_HOME`` or ``./.kplane``).

One line per change of the resize's state, ``<elapsed seconds> <state> <detail>`` (``--json``: one
JSON object per line). States: ``requested`` (the resize is stored, the kubelet has not answered),
``Deferred`` / ``Infeasible`` (PodResizePending), ``InProgress`` (PodResizeInProgress),
``+PreemptionDisabled`` added while PodResizePreemptionDisabled is on (KEP-5836: Scheduler
Preemption for In-Place Pod Resize), ``actuated``, and ``timeout`` with the last state.

A resize the apiserver refuses because the node can never hold it (Kubernetes 1.36's
PodResizeValidator: "node didn't have enough allocatable resources", or a node that is not linux)
is reported as ``Infeasible`` with the apiserver's message, nothing written: what the kubelet
would have said later, said at once.

Exit status: 0 actuated; 1 an error (one line on stderr); 2 Infeasible; 3 timed out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NoReturn, Sequence

import grpc

from machinery.api import api_pb2_grpc, core_pb2, meta_pb2
from machinery.quantity import Quantity, QuantityError

PROG = "resize_client"
EXIT_ACTUATED, EXIT_ERROR, EXIT_INFEASIBLE, EXIT_TIMEOUT = 0, 1, 2, 3

PENDING = "PodResizePending"
IN_PROGRESS = "PodResizeInProgress"
PREEMPTION_DISABLED = "PodResizePreemptionDisabled"
RESIZE_CONDITIONS = (PENDING, IN_PROGRESS, PREEMPTION_DISABLED)

CALL_TIMEOUT = 10.0  # seconds per unary call
CONFLICT_RETRIES = 5  # Get + Resize again when the pod changed in between (ABORTED)
REWATCH_DELAY = 0.5  # seconds before reopening a watch the apiserver dropped


class ResizeClientError(Exception):
    """A failure the user sees as one line."""


# ---------------------------------------------------------------- finding the cluster


@dataclass(frozen=True)
class Target:
    server: str
    token: str


def _discover(server: str | None, token_file: str | None, data_dir: str | None) -> Target:
    """The apiserver and token, found as ``kplane`` finds them (see the module docstring)."""
    home = Path(data_dir or os.environ.get("KPLANE_HOME") or ".kplane")
    server = server or os.environ.get("KPLANE_SERVER")
    if not server:
        state = home / "cluster.json"
        try:
            server = json.loads(state.read_text()).get("server", "")
        except FileNotFoundError:
            raise ResizeClientError(f"no cluster found: no {state} (run `kplane up`, or give --server)") from None
        except ValueError as exc:
            raise ResizeClientError(f"{state} is not a kplane cluster state file: {exc}") from None
        if not server:
            raise ResizeClientError(f"{state} names no apiserver: is the cluster up?")
    if token_file:
        path = Path(token_file)
    elif os.environ.get("KPLANE_TOKEN"):
        return Target(server, os.environ["KPLANE_TOKEN"])
    else:
        path = home / "tokens" / "admin.token"
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ResizeClientError(f"cannot read the token file {path}: {exc.strerror}") from None
    if not token:
        raise ResizeClientError(f"the token file {path} is empty")
    return Target(server, token)


# ---------------------------------------------------------------- the resize request


@dataclass(frozen=True)
class Wanted:
    """The new requests of one container (quantities as the user gave them)."""

    container: str
    requests: tuple[tuple[str, str], ...]  # (resource, quantity), cpu and/or memory


def _container(pod: core_pb2.Pod, name: str) -> core_pb2.Container:
    """The named resizable container: a regular one, or a sidecar (restartable init container)."""
    for c in pod.spec.containers:
        if c.name == name:
            return c
    for c in pod.spec.init_containers:
        if c.name == name and c.restart_policy == "Always":
            return c
    raise KeyError(name)


def _pick_container(pod: core_pb2.Pod, name: str) -> str:
    key = f"{pod.metadata.namespace}/{pod.metadata.name}"
    names = [c.name for c in pod.spec.containers] + [c.name for c in pod.spec.init_containers
                                                      if c.restart_policy == "Always"]
    if not name:
        if len(pod.spec.containers) != 1:
            raise ResizeClientError(f"pod {key} has {len(pod.spec.containers)} containers; choose one with "
                                    f"--container ({', '.join(names)})")
        return pod.spec.containers[0].name
    if name not in names:
        raise ResizeClientError(f"container {name} is not resizable in pod {key} (resizable: {', '.join(names)})")
    return name


def build_resized(pod: core_pb2.Pod, wanted: Wanted) -> core_pb2.Pod:
    """The Resize request: the pod as read, with the container's new requests.

    The apiserver takes only ``resources`` and ``resizePolicy`` of every container from the body
    (containers matched by position and name, so all of them are sent, in order), and
    ``metadata.resourceVersion`` as a precondition. Limits follow the requests as an autoscaler
    keeps them consistent: a limit that equalled its request (a Guaranteed container stays
    Guaranteed — the QoS class may not change on resize) moves with it, and a limit below the new
    request is raised to it; other limits are kept.
    """
    body = core_pb2.Pod()
    body.CopyFrom(pod)
    c = _container(body, wanted.container)
    for resource, value in wanted.requests:
        old_request = c.resources.requests.get(resource)
        c.resources.requests[resource] = value
        old_limit = c.resources.limits.get(resource)
        if old_limit is None:
            continue
        follows = old_request is not None and Quantity(old_limit) == Quantity(old_request)
        if follows or Quantity(old_limit) < Quantity(value):
            c.resources.limits[resource] = value
    return body


# ---------------------------------------------------------------- the resize's state


@dataclass(frozen=True)
class Condition:
    type: str
    reason: str
    message: str


@dataclass(frozen=True)
class ResizeState:
    """What the pod says about this resize. Equal states (same state and conditions) print once:
    the container's actual requests move while InProgress without making a new line."""

    state: str  # requested, Deferred, Infeasible, InProgress (each maybe +PreemptionDisabled), actuated
    generation: int
    conditions: tuple[Condition, ...]
    desired: tuple[tuple[str, str], ...] = field(compare=False)  # the container's spec requests
    actual: tuple[tuple[str, str], ...] = field(compare=False)  # its status.resources.requests
    refused: str = ""  # the apiserver's refusal of a resize no node of this kind can hold

    @property
    def detail(self) -> str:
        if self.refused:
            return self.refused
        if self.state == "requested":
            return f"generation {self.generation}: " + " ".join(f"{k}={v}" for k, v in self.desired)
        if self.state == "actuated":
            return " ".join(f"{k}={v}" for k, v in self.actual)
        parts = []
        for c in self.conditions:
            if c.type == PENDING:
                parts.append(c.message or "-")
            elif c.reason or c.message:
                parts.append(f"{c.reason}: {c.message}" if c.message else c.reason)
        return " | ".join(parts) or "-"

    def to_dict(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "state": self.state, "generation": self.generation,
            "conditions": [{"type": c.type, "reason": c.reason, "message": c.message} for c in self.conditions],
            "desired": dict(self.desired), "actual": dict(self.actual)}
        if self.refused:
            doc["refused"] = self.refused
        return doc


def _status_of(pod: core_pb2.Pod, container: str) -> core_pb2.ContainerStatus | None:
    for cs in list(pod.status.container_statuses) + list(pod.status.init_container_statuses):
        if cs.name == container:
            return cs
    return None


def observe(pod: core_pb2.Pod, container: str, generation: int) -> ResizeState:
    """The resize's state in ``pod``, for the resize that made ``generation``.

    A condition whose observedGeneration is older speaks of an earlier resize and is left out
    (0: a kubelet that does not say, taken as current). Actuated: the container's
    status.resources.requests equal its spec requests and no PodResizePending or
    PodResizeInProgress condition is on, whatever its generation.
    """
    on = [c for c in pod.status.conditions if c.type in RESIZE_CONDITIONS and c.status == "True"]
    current = tuple(Condition(c.type, c.reason, c.message)
                    for t in RESIZE_CONDITIONS for c in on
                    if c.type == t and (c.observed_generation == 0 or c.observed_generation >= generation))
    desired = {k: v for k, v in _container(pod, container).resources.requests.items() if k in ("cpu", "memory")}
    cs = _status_of(pod, container)
    actual = dict(cs.resources.requests) if cs is not None and cs.HasField("resources") else {}
    settled = not any(c.type in (PENDING, IN_PROGRESS) for c in on)
    if settled and desired and all(k in actual and Quantity(actual[k]) == Quantity(v) for k, v in desired.items()):
        state = "actuated"
    else:
        names = [c.reason if c.type == PENDING else "InProgress" for c in current if c.type != PREEMPTION_DISABLED]
        state = "+".join(names) or "requested"
        if any(c.type == PREEMPTION_DISABLED for c in current):
            state += "+PreemptionDisabled"
    return ResizeState(state, generation, current, tuple(sorted(desired.items())), tuple(sorted(actual.items())))


def _infeasible(s: ResizeState) -> bool:
    return bool(s.refused) or any(c.type == PENDING and c.reason == "Infeasible" for c in s.conditions)


# What the apiserver's PodResizeValidator says of a resize no node of that kind can hold.
_NEVER_FITS = ("didn't have enough allocatable resources", "pod resize is only supported on linux nodes")


class Refused(Exception):
    """The apiserver refused the resize as one the node can never hold (PodResizeValidator)."""

    def __init__(self, pod: core_pb2.Pod, container: str, message: str):  # pod: as the resize would leave it
        super().__init__(message)
        self.pod, self.container, self.message = pod, container, message


# ---------------------------------------------------------------- the calls


def _rpc_error(exc: grpc.aio.AioRpcError, what: str, key: str, server: str) -> ResizeClientError:
    code = exc.code()
    if code == grpc.StatusCode.NOT_FOUND:
        return ResizeClientError(f"pod {key} not found")
    if code == grpc.StatusCode.UNAVAILABLE:
        return ResizeClientError(f"cannot reach the apiserver at {server}: {exc.details()}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ResizeClientError(f"{what} {key}: no answer within {CALL_TIMEOUT:g}s")
    return ResizeClientError(f"{what} {key}: {code.name}: {exc.details()}")


class Session:
    """The Pods stub with this program's identity and per-call timeout."""

    def __init__(self, channel: grpc.aio.Channel, target: Target, namespace: str, name: str):
        self.pods = api_pb2_grpc.PodsStub(channel)
        self.server = target.server
        self.metadata = (("authorization", f"Bearer {target.token}"),)
        self.namespace, self.name = namespace, name
        self.key = f"{namespace}/{name}"

    async def get(self) -> core_pb2.Pod:
        req = meta_pb2.GetRequest(namespace=self.namespace, name=self.name)
        try:
            return await self.pods.Get(req, metadata=self.metadata, timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            raise _rpc_error(exc, "get", self.key, self.server) from None

    async def resize(self, container: str, requests: tuple[tuple[str, str], ...]) -> core_pb2.Pod:
        """Get, build, Resize; again from a fresh Get when the pod changed in between."""
        for attempt in range(CONFLICT_RETRIES):
            pod = await self.get()
            wanted = Wanted(_pick_container(pod, container), requests)
            resized = build_resized(pod, wanted)
            try:
                return await self.pods.Resize(resized, metadata=self.metadata, timeout=CALL_TIMEOUT)
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.PERMISSION_DENIED and any(
                        text in (exc.details() or "") for text in _NEVER_FITS):
                    raise Refused(resized, wanted.container, exc.details() or "") from None
                if exc.code() != grpc.StatusCode.ABORTED or attempt == CONFLICT_RETRIES - 1:
                    raise _rpc_error(exc, "resize", self.key, self.server) from None
        raise AssertionError("unreachable")

    async def follow(self, pod: core_pb2.Pod, container: str, emit: Callable[[ResizeState], None]) -> ResizeState:
        """Watch the pod from ``pod``'s resourceVersion, emitting each new state, until the resize
        is actuated or Infeasible; the last state. The caller bounds it with a timeout."""
        uid, generation = pod.metadata.uid, pod.metadata.generation
        state = observe(pod, container, generation)
        emit(state)
        rv = pod.metadata.resource_version
        while state.state != "actuated" and not _infeasible(state):
            req = meta_pb2.WatchRequest(namespace=self.namespace, field_selector=f"metadata.name={self.name}",
                                        resource_version=rv, allow_watch_bookmarks=True)
            call = self.pods.Watch(req, metadata=self.metadata)
            try:
                async for resp in call:
                    for ev in resp.events:
                        rv = ev.object.metadata.resource_version or rv
                        if ev.type == "BOOKMARK":
                            continue
                        if ev.type == "DELETED" or ev.object.metadata.uid != uid:
                            raise ResizeClientError(f"pod {self.key} was deleted while resizing")
                        new = observe(ev.object, container, generation)
                        if new != state:
                            state = new
                            emit(state)
                    if state.state == "actuated" or _infeasible(state):
                        break
            except grpc.aio.AioRpcError as exc:
                if exc.code() == grpc.StatusCode.OUT_OF_RANGE:  # too old a version: read the pod again
                    fresh = await self.get()
                    if fresh.metadata.uid != uid:
                        raise ResizeClientError(f"pod {self.key} was deleted while resizing") from None
                    rv = fresh.metadata.resource_version
                    new = observe(fresh, container, generation)
                    if new != state:
                        state = new
                        emit(state)
                elif exc.code() == grpc.StatusCode.UNAVAILABLE:
                    await asyncio.sleep(REWATCH_DELAY)
                else:
                    raise _rpc_error(exc, "watch", self.key, self.server) from None
            finally:
                call.cancel()
        return state


# ---------------------------------------------------------------- the program


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, and exit 1: 2 means Infeasible here
        sys.stderr.write(f"{PROG}: {message}\n")
        sys.exit(EXIT_ERROR)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Resize a pod's container in place over the Pods/Resize gRPC method "
                "and follow the resize until it is actuated.")
    p.add_argument("pod", metavar="POD")
    p.add_argument("--server", help="apiserver HOST:PORT (default: $KPLANE_SERVER or the data dir's cluster)")
    p.add_argument("--token-file", help="file holding the bearer token (default: $KPLANE_TOKEN or "
                   "<data-dir>/tokens/admin.token)")
    p.add_argument("--data-dir", help="a `kplane up` data dir (default: $KPLANE_HOME or ./.kplane)")
    p.add_argument("-n", "--namespace", default="default")
    p.add_argument("-c", "--container", default="", help="the container (default: the pod's only one)")
    p.add_argument("--cpu", help="the new cpu request, e.g. 3 or 1500m")
    p.add_argument("--memory", help="the new memory request, e.g. 1Gi")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the resize (default 60)")
    p.add_argument("--json", action="store_true", help="print JSON lines")
    return p


def _requests(args: argparse.Namespace) -> tuple[tuple[str, str], ...]:
    out = []
    for resource, value in (("cpu", args.cpu), ("memory", args.memory)):
        if value is None:
            continue
        try:
            q = Quantity(value)
        except QuantityError as exc:
            raise ResizeClientError(f"invalid --{resource} {value!r}: {exc}") from None
        if q.sign() <= 0:
            raise ResizeClientError(f"invalid --{resource} {value!r}: must be greater than zero")
        out.append((resource, value))
    if not out:
        raise ResizeClientError("nothing to resize: give --cpu and/or --memory")
    return tuple(out)


class Reporter:
    """Prints each state as it comes (text or JSON lines) and remembers the last one."""

    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.start = time.monotonic()
        self.last: ResizeState | None = None

    def __call__(self, state: ResizeState) -> None:
        self.last = state
        self._print(state.state, state)

    def timed_out(self, fallback: ResizeState) -> None:
        self._print("timeout", self.last or fallback)

    def _print(self, label: str, state: ResizeState) -> None:
        elapsed = time.monotonic() - self.start
        if self.as_json:
            doc = state.to_dict() if label == state.state else {"state": label, "last": state.to_dict()}
            print(json.dumps({"elapsed": round(elapsed, 2), **doc}), flush=True)
        else:
            head = state.state if label == state.state else f"{label} {state.state}"
            print(f"{elapsed:.2f} {head} {state.detail}", flush=True)


async def run(args: argparse.Namespace, target: Target, requests: tuple[tuple[str, str], ...]) -> int:
    report = Reporter(args.json)
    async with grpc.aio.insecure_channel(target.server) as channel:
        session = Session(channel, target, args.namespace, args.pod)
        try:
            resized = await session.resize(args.container, requests)
        except Refused as refused:
            # what was asked (desired) beside what runs (actual), and the apiserver's words
            state = observe(refused.pod, refused.container, refused.pod.metadata.generation)
            report(ResizeState("Infeasible", state.generation, (), state.desired, state.actual,
                               refused=refused.message))
            return EXIT_INFEASIBLE
        container = _pick_container(resized, args.container)
        try:
            async with asyncio.timeout(max(args.timeout - (time.monotonic() - report.start), 0)):
                final = await session.follow(resized, container, report)
        except TimeoutError:
            report.timed_out(observe(resized, container, resized.metadata.generation))
            return EXIT_TIMEOUT
    return EXIT_INFEASIBLE if _infeasible(final) else EXIT_ACTUATED


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.timeout <= 0:
            raise ResizeClientError("--timeout must be greater than zero")
        requests = _requests(args)
        target = _discover(args.server, args.token_file, args.data_dir)
        return asyncio.run(run(args, target, requests))
    except ResizeClientError as exc:
        sys.stderr.write(f"{PROG}: {exc}\n")
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
