"""The async kplane client: one gRPC channel to the apiserver, a typed client per kind.

    client = Client("127.0.0.1:6443", token)
    pod = await client.pods.get("web", namespace="default")
    async for ev in client.pods.watch(resource_version=rv):
        ...

The target may name several apiservers, ``"127.0.0.1:6443,127.0.0.1:6444"``: the channel connects to
the first that answers and moves on along the list when it goes (``channel_target``).

Every call carries the bearer token and a timeout; gRPC errors come back as
``machinery.errors`` exceptions (``NotFound``, ``Conflict``, ``Gone``, ...). Reads are retried
while the apiserver is unavailable (up to the call's timeout); writes are not, because a write
that timed out may have happened — the caller decides.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from machinery import errors, jsonconv
from machinery.api import (
    api_pb2,
    apps_pb2,
    autoscaling_pb2,
    coordination_pb2,
    core_pb2,
    meta_pb2,
    policy_pb2,
    resource_pb2,
    scheduling_pb2,
)
from machinery.kinds import (
    DEPLOYMENT,
    DEVICE_CLASS,
    EVENT,
    LEASE,
    LIMIT_RANGE,
    NAMESPACE,
    NODE,
    POD,
    POD_DISRUPTION_BUDGET,
    PRIORITY_CLASS,
    REPLICA_SET,
    RESOURCE_CLAIM,
    RESOURCE_CLAIM_TEMPLATE,
    RESOURCE_QUOTA,
    RESOURCE_SLICE,
    Kind,
    L,
    M,
)

DEFAULT_TIMEOUT = 30.0
DRY_RUN_HEADER = "x-kplane-dry-run"
# The field manager a client's writes are recorded under in metadata.managedFields (the apiserver
# falls back to the user's name): what a Kubernetes component's User-Agent names it.
FIELD_MANAGER_HEADER = "x-kplane-field-manager"
TOO_MANY_REQUESTS = "Too many requests"  # the apiserver's overload answer (retryable: nothing was done)

CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    ("grpc.enable_retries", 0),
]


Metadata = tuple[tuple[str, str], ...]

Req = TypeVar("Req", bound=Message, contravariant=True)
Resp = TypeVar("Resp", covariant=True)
T_co = TypeVar("T_co", covariant=True)


class UnaryMethod(Protocol[Req, Resp]):
    """A unary gRPC method as ``channel.unary_unary(path, serializer, Resp.FromString)`` returns it
    (grpc ships no types: this is the part kplane calls)."""

    def __call__(self, request: Req, *, metadata: Metadata, timeout: float) -> Awaitable[Resp]: ...


class _StreamCall(Protocol[T_co]):
    """A server-streaming call in flight: iterate its responses, cancel it when done."""

    def __aiter__(self) -> AsyncIterator[T_co]: ...

    def cancel(self) -> bool: ...


class _StreamMethod(Protocol[Req, Resp]):
    def __call__(self, request: Req, *, metadata: Metadata) -> _StreamCall[Resp]: ...


class _WatchEventMessage(Protocol[T_co]):
    """A kind's ``<Kind>WatchEvent`` message (core_pb2.PodWatchEvent: type and object)."""

    @property
    def type(self) -> str: ...

    @property
    def object(self) -> T_co: ...


class _WatchResponse(Protocol[T_co]):
    """A kind's ``<Kind>WatchResponse`` message: a frame of watch events."""

    @property
    def events(self) -> Sequence[_WatchEventMessage[T_co]]: ...


@dataclass(frozen=True)
class WatchEvent(Generic[T_co]):
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: T_co


def _ser(m: Message) -> bytes:
    return m.SerializeToString()


class ResourceClient(Generic[M, L]):
    """Kubernetes' verbs for one kind (its object messages ``M``, its list message ``L``)."""

    def __init__(self, client: "Client", kind: Kind[M, L]):
        self._client = client
        self.kind = kind
        ch, svc = client.channel, kind.service
        self._create: UnaryMethod[M, M] = ch.unary_unary(f"/{svc}/Create", _ser, kind.message.FromString)
        self._get: UnaryMethod[meta_pb2.GetRequest, M] = ch.unary_unary(f"/{svc}/Get", _ser,
                                                                         kind.message.FromString)
        self._list: UnaryMethod[meta_pb2.ListRequest, L] = ch.unary_unary(f"/{svc}/List", _ser,
                                                                           kind.list_message.FromString)
        self._update: UnaryMethod[M, M] = ch.unary_unary(f"/{svc}/Update", _ser, kind.message.FromString)
        self._update_status: UnaryMethod[M, M] = ch.unary_unary(f"/{svc}/UpdateStatus", _ser,
                                                                kind.message.FromString)
        self._patch: UnaryMethod[meta_pb2.PatchRequest, M] = ch.unary_unary(f"/{svc}/Patch", _ser,
                                                                             kind.message.FromString)
        self._delete: UnaryMethod[meta_pb2.DeleteRequest, M] = ch.unary_unary(f"/{svc}/Delete", _ser,
                                                                               kind.message.FromString)
        self._watch: _StreamMethod[meta_pb2.WatchRequest, _WatchResponse[M]] = ch.unary_stream(
            f"/{svc}/Watch", _ser, kind.watch_response.FromString)

    def _ns(self, namespace: str) -> str:
        return (namespace or self._client.namespace) if self.kind.namespaced else ""

    async def create(self, obj: M, *, dry_run: bool = False, timeout: float | None = None) -> M:
        return await self._client.call(self._create, obj, dry_run=dry_run, timeout=timeout)

    async def get(self, name: str, namespace: str = "", *, timeout: float | None = None) -> M:
        req = meta_pb2.GetRequest(namespace=self._ns(namespace), name=name)
        return await self._client.call(self._get, req, timeout=timeout, retry=True)

    async def list(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                   resource_version: str = "", limit: int = 0, continue_token: str = "",
                   timeout: float | None = None) -> L:
        """The list message (``.items``, ``.metadata.resource_version``). ``namespace`` "" = all."""
        req = meta_pb2.ListRequest(namespace=namespace if self.kind.namespaced else "", label_selector=label_selector,
                                   field_selector=field_selector, resource_version=resource_version, limit=limit,
                                   continue_token=continue_token)
        return await self._client.call(self._list, req, timeout=timeout, retry=True)

    async def update(self, obj: M, *, dry_run: bool = False, timeout: float | None = None) -> M:
        return await self._client.call(self._update, obj, dry_run=dry_run, timeout=timeout)

    async def update_status(self, obj: M, *, dry_run: bool = False, timeout: float | None = None) -> M:
        if not self.kind.has_status:
            raise errors.MethodNotAllowed(f"{self.kind.plural} have no status subresource")
        return await self._client.call(self._update_status, obj, dry_run=dry_run, timeout=timeout)

    async def patch(self, name: str, patch: Any, *, namespace: str = "", patch_type: str = "strategic",
                    subresource: str = "", field_manager: str = "", force: bool | None = None,
                    dry_run: bool = False, timeout: float | None = None) -> M:
        """Patch the object: ``patch_type`` "strategic", "merge", "json" or "apply" (server-side
        apply of the configuration ``patch``, which needs ``field_manager``; ``force`` takes the
        fields other managers own instead of failing with a Conflict)."""
        body = patch if isinstance(patch, str) else json.dumps(patch)
        req = meta_pb2.PatchRequest(namespace=self._ns(namespace), name=name, patch_type=patch_type, patch=body,
                                    subresource=subresource, field_manager=field_manager)
        if force is not None:
            req.force = force
        return await self._client.call(self._patch, req, dry_run=dry_run, timeout=timeout)

    async def apply(self, config: M | dict[str, Any], *, field_manager: str, force: bool = False,
                    subresource: str = "", dry_run: bool = False, timeout: float | None = None) -> M:
        """Server-side apply of ``config`` (its Kubernetes JSON, or an object of the kind — whose
        zero values protobuf cannot tell from unset, so a dict says ``replicas: 0``) as
        ``field_manager``: the object is created if absent."""
        doc = config if isinstance(config, dict) else jsonconv.to_dict(config)
        doc = {"apiVersion": self.kind.api_version, "kind": self.kind.name, **doc}
        meta = doc.get("metadata") or {}
        return await self.patch(meta.get("name", ""), doc, namespace=meta.get("namespace", ""), patch_type="apply",
                                subresource=subresource, field_manager=field_manager, force=force, dry_run=dry_run,
                                timeout=timeout)

    async def delete(self, name: str, namespace: str = "", *, grace_period_seconds: int | None = None,
                     uid: str | None = None, resource_version: str | None = None,
                     propagation_policy: str | None = None, dry_run: bool = False,
                     timeout: float | None = None) -> M:
        """Delete the object; ``propagation_policy`` is DeleteOptions' ("Orphan", "Background",
        "Foreground"; None: the object's deletion finalizers decide, else Background). The answer
        is the object's last state: marked for deletion (finalizers, grace period) or removed."""
        req = meta_pb2.DeleteRequest(namespace=self._ns(namespace), name=name)
        if grace_period_seconds is not None:
            req.grace_period_seconds = grace_period_seconds
        if propagation_policy is not None:
            req.propagation_policy = propagation_policy
        if uid is not None:
            req.preconditions.uid = uid
        if resource_version is not None:
            req.preconditions.resource_version = resource_version
        return await self._client.call(self._delete, req, dry_run=dry_run, timeout=timeout)

    async def watch(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                    resource_version: str = "", allow_bookmarks: bool = True,
                    send_initial_events: bool = False) -> AsyncIterator[WatchEvent[M]]:
        """Events after ``resource_version`` ("" or "0": the current objects as ADDED first).

        Ends when the server closes the stream; raises ``Gone`` if the version is too old.
        """
        req = meta_pb2.WatchRequest(namespace=namespace if self.kind.namespaced else "", label_selector=label_selector,
                                    field_selector=field_selector, resource_version=resource_version,
                                    allow_watch_bookmarks=allow_bookmarks, send_initial_events=send_initial_events)
        call = self._watch(req, metadata=self._client.metadata())
        try:
            async for resp in call:
                for ev in resp.events:
                    yield WatchEvent(ev.type, ev.object)
        except grpc.aio.AioRpcError as exc:
            raise errors.from_rpc_error(exc) from None
        finally:
            call.cancel()


class PodClient(ResourceClient[core_pb2.Pod, core_pb2.PodList]):
    def __init__(self, client: "Client"):
        super().__init__(client, POD)
        ch = client.channel
        self._bind: UnaryMethod[core_pb2.Binding, core_pb2.Pod] = ch.unary_unary(
            "/kplane.v1.Pods/Bind", _ser, core_pb2.Pod.FromString)
        self._resize: UnaryMethod[core_pb2.Pod, core_pb2.Pod] = ch.unary_unary(
            "/kplane.v1.Pods/Resize", _ser, core_pb2.Pod.FromString)
        self._evict: UnaryMethod[core_pb2.Eviction, core_pb2.Pod] = ch.unary_unary(
            "/kplane.v1.Pods/Evict", _ser, core_pb2.Pod.FromString)

    async def bind(self, name: str, node: str, namespace: str = "", *, uid: str = "",
                   timeout: float | None = None) -> core_pb2.Pod:
        b = core_pb2.Binding(api_version="v1", kind="Binding")
        b.metadata.name, b.metadata.namespace, b.metadata.uid = name, self._ns(namespace), uid
        b.target.kind, b.target.name = "Node", node
        return await self._client.call(self._bind, b, timeout=timeout)

    async def resize(self, pod: core_pb2.Pod, *, dry_run: bool = False, timeout: float | None = None) -> core_pb2.Pod:
        return await self._client.call(self._resize, pod, dry_run=dry_run, timeout=timeout)

    async def evict(self, name: str, namespace: str = "", *, grace_period_seconds: int | None = None,
                    dry_run: bool = False, timeout: float | None = None) -> core_pb2.Pod:
        ev = core_pb2.Eviction(api_version="policy/v1", kind="Eviction")
        ev.metadata.name, ev.metadata.namespace = name, self._ns(namespace)
        if grace_period_seconds is not None:
            ev.delete_options.grace_period_seconds = grace_period_seconds
        return await self._client.call(self._evict, ev, dry_run=dry_run, timeout=timeout)


class ScalableClient(ResourceClient[M, L]):
    """A kind with the scale subresource (ReplicaSets, Deployments): autoscaling/v1 Scale."""

    def __init__(self, client: "Client", kind: Kind[M, L]):
        super().__init__(client, kind)
        ch, svc = client.channel, kind.service
        self._get_scale: UnaryMethod[meta_pb2.GetRequest, autoscaling_pb2.Scale] = ch.unary_unary(
            f"/{svc}/GetScale", _ser, autoscaling_pb2.Scale.FromString)
        self._update_scale: UnaryMethod[autoscaling_pb2.Scale, autoscaling_pb2.Scale] = ch.unary_unary(
            f"/{svc}/UpdateScale", _ser, autoscaling_pb2.Scale.FromString)

    async def get_scale(self, name: str, namespace: str = "", *,
                        timeout: float | None = None) -> autoscaling_pb2.Scale:
        req = meta_pb2.GetRequest(namespace=self._ns(namespace), name=name)
        return await self._client.call(self._get_scale, req, timeout=timeout, retry=True)

    async def update_scale(self, scale: autoscaling_pb2.Scale, *, dry_run: bool = False,
                           timeout: float | None = None) -> autoscaling_pb2.Scale:
        """Set ``spec.replicas`` to ``scale.spec.replicas``; with ``scale.metadata.resource_version``
        the object must still be at that version (``Conflict`` otherwise)."""
        return await self._client.call(self._update_scale, scale, dry_run=dry_run, timeout=timeout)

    async def scale(self, name: str, replicas: int, namespace: str = "", *, resource_version: str = "",
                    dry_run: bool = False, timeout: float | None = None) -> autoscaling_pb2.Scale:
        """``update_scale`` of the object ``name`` to ``replicas``."""
        s = autoscaling_pb2.Scale(api_version="autoscaling/v1", kind="Scale")
        s.metadata.name, s.metadata.namespace = name, self._ns(namespace)
        s.metadata.resource_version = resource_version
        s.spec.replicas = replicas
        return await self.update_scale(s, dry_run=dry_run, timeout=timeout)


class NamespaceClient(ResourceClient[core_pb2.Namespace, core_pb2.NamespaceList]):
    def __init__(self, client: "Client"):
        super().__init__(client, NAMESPACE)
        self._finalize: UnaryMethod[core_pb2.Namespace, core_pb2.Namespace] = client.channel.unary_unary(
            "/kplane.v1.Namespaces/Finalize", _ser, core_pb2.Namespace.FromString)

    async def finalize(self, ns: core_pb2.Namespace, *, dry_run: bool = False,
                       timeout: float | None = None) -> core_pb2.Namespace:
        """The finalize subresource: store ``ns.spec.finalizers`` (nothing else). A Terminating
        namespace left with no finalizer is removed (the answer is its last state)."""
        return await self._client.call(self._finalize, ns, dry_run=dry_run, timeout=timeout)


def channel_target(server: str) -> str:
    """The gRPC target for ``--server``: one ``host:port`` as given; several, comma-separated, as
    one ``ipv4:`` (or ``ipv6:``) address list, which gRPC's pick_first policy walks in order — the
    first apiserver that accepts the connection serves every call and watch, and when it goes,
    the next call reconnects to the next one that answers (a watch broken on the way is
    re-established by its informer, as client-go's reflector does). Several apiservers need
    literal addresses (gRPC resolves no list of names); ValueError otherwise."""
    addresses = [a.strip() for a in server.split(",") if a.strip()]
    if len(addresses) <= 1:
        return addresses[0] if addresses else server
    families = set()
    out = []
    for address in addresses:
        host, _, port = address.rpartition(":")
        host = host.strip("[]")
        if host == "localhost":
            host = "127.0.0.1"
        try:
            family = ipaddress.ip_address(host).version
        except ValueError:
            raise ValueError(f"invalid server list {server!r}: several apiservers need IP addresses, "
                             f"not {host!r}") from None
        families.add(family)
        out.append(f"[{host}]:{port}" if family == 6 else f"{host}:{port}")
    if len(families) > 1:
        raise ValueError(f"invalid server list {server!r}: IPv4 and IPv6 addresses mixed")
    return f"ipv{families.pop()}:" + ",".join(out)


class Client:
    def __init__(self, target: str, token: str | None = None, *, namespace: str = "default",
                 timeout: float = DEFAULT_TIMEOUT, channel: grpc.aio.Channel | None = None, field_manager: str = ""):
        """``field_manager``: the name this client's writes are recorded under in managedFields
        (``kubelet``, ``kube-scheduler``, ``kube-controller-manager``, as Kubernetes names its
        components by their User-Agent); "" leaves it to the apiserver: the user's name."""
        self.target = target
        self.token = token if token is not None else os.environ.get("KPLANE_TOKEN", "")
        self.namespace = namespace
        self.timeout = timeout
        self.field_manager = field_manager
        self._owns_channel = channel is None
        self.channel = channel if channel is not None else grpc.aio.insecure_channel(channel_target(target),
                                                                                     options=CHANNEL_OPTIONS)
        self._metadata: Metadata = (("authorization", f"Bearer {self.token}"),)
        if field_manager:
            self._metadata += ((FIELD_MANAGER_HEADER, field_manager),)
        self._dry_metadata = self._metadata + ((DRY_RUN_HEADER, "All"),)
        self._resources: dict[str, ResourceClient[Any, Any]] = {}
        self._history: _StreamMethod[api_pb2.HistoryRequest, api_pb2.HistoryResponse] = self.channel.unary_stream(
            "/kplane.v1.Cluster/History", _ser, api_pb2.HistoryResponse.FromString)

    def share(self, token: str, *, timeout: float | None = None) -> "Client":
        """A client with another identity on this client's channel (many kubelets in one process
        share one connection); closing it leaves the channel to its owner."""
        return Client(self.target, token, namespace=self.namespace,
                      timeout=self.timeout if timeout is None else timeout, channel=self.channel,
                      field_manager=self.field_manager)

    async def close(self) -> None:
        if self._owns_channel:
            await self.channel.close()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def metadata(self, dry_run: bool = False) -> Metadata:
        return self._dry_metadata if dry_run else self._metadata

    async def call(self, method: UnaryMethod[Req, Resp], request: Req, *, dry_run: bool = False,
                   timeout: float | None = None, retry: bool = False) -> Resp:
        """One unary call.

        Any call refused because the apiserver is overloaded (429 "Too many requests", nothing was
        done) is retried with backoff, as client-go does; reads (``retry``) are also retried while
        the apiserver is unavailable. Everything else is the caller's to decide.
        """
        budget = timeout if timeout is not None else self.timeout
        deadline = time.monotonic() + budget
        delay = 0.1
        while True:
            remaining = deadline - time.monotonic()
            try:
                return await method(request, metadata=self.metadata(dry_run), timeout=max(remaining, 0.01))
            except grpc.aio.AioRpcError as exc:
                err = errors.from_rpc_error(exc)
                overloaded = isinstance(err, errors.TooManyRequests) and err.message.startswith(TOO_MANY_REQUESTS)
                if (overloaded or (retry and isinstance(err, errors.Unavailable))) and \
                        time.monotonic() + delay < deadline:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 1.0)
                    continue
                raise err from None

    def resource(self, kind: Kind[M, L]) -> ResourceClient[M, L]:
        rc = self._resources.get(kind.name)
        if rc is None:
            rc = self._resources[kind.name] = self._new_resource(kind)
        return rc

    def _new_resource(self, kind: Kind[Any, Any]) -> ResourceClient[Any, Any]:
        if kind is POD:
            return PodClient(self)
        if kind is NAMESPACE:
            return NamespaceClient(self)
        if "scale" in kind.subresources:
            return ScalableClient(self, kind)
        return ResourceClient(self, kind)

    @property
    def pods(self) -> PodClient:
        rc = self.resource(POD)
        assert isinstance(rc, PodClient)  # resource() makes POD's client a PodClient
        return rc

    @property
    def nodes(self) -> ResourceClient[core_pb2.Node, core_pb2.NodeList]:
        return self.resource(NODE)

    @property
    def events(self) -> ResourceClient[core_pb2.Event, core_pb2.EventList]:
        return self.resource(EVENT)

    @property
    def priority_classes(self) -> ResourceClient[scheduling_pb2.PriorityClass, scheduling_pb2.PriorityClassList]:
        return self.resource(PRIORITY_CLASS)

    @property
    def pod_disruption_budgets(self) -> ResourceClient[policy_pb2.PodDisruptionBudget,
                                                       policy_pb2.PodDisruptionBudgetList]:
        return self.resource(POD_DISRUPTION_BUDGET)

    @property
    def leases(self) -> ResourceClient[coordination_pb2.Lease, coordination_pb2.LeaseList]:
        return self.resource(LEASE)

    @property
    def resource_claims(self) -> ResourceClient[resource_pb2.ResourceClaim, resource_pb2.ResourceClaimList]:
        return self.resource(RESOURCE_CLAIM)

    @property
    def resource_claim_templates(self) -> ResourceClient[resource_pb2.ResourceClaimTemplate,
                                                         resource_pb2.ResourceClaimTemplateList]:
        return self.resource(RESOURCE_CLAIM_TEMPLATE)

    @property
    def resource_slices(self) -> ResourceClient[resource_pb2.ResourceSlice, resource_pb2.ResourceSliceList]:
        return self.resource(RESOURCE_SLICE)

    @property
    def device_classes(self) -> ResourceClient[resource_pb2.DeviceClass, resource_pb2.DeviceClassList]:
        return self.resource(DEVICE_CLASS)

    @property
    def namespaces(self) -> NamespaceClient:
        rc = self.resource(NAMESPACE)
        assert isinstance(rc, NamespaceClient)  # resource() makes NAMESPACE's client a NamespaceClient
        return rc

    @property
    def resource_quotas(self) -> ResourceClient[core_pb2.ResourceQuota, core_pb2.ResourceQuotaList]:
        return self.resource(RESOURCE_QUOTA)

    @property
    def limit_ranges(self) -> ResourceClient[core_pb2.LimitRange, core_pb2.LimitRangeList]:
        return self.resource(LIMIT_RANGE)

    @property
    def replica_sets(self) -> ScalableClient[apps_pb2.ReplicaSet, apps_pb2.ReplicaSetList]:
        rc = self.resource(REPLICA_SET)
        assert isinstance(rc, ScalableClient)  # resource() makes a kind with "scale" a ScalableClient
        return rc

    @property
    def deployments(self) -> ScalableClient[apps_pb2.Deployment, apps_pb2.DeploymentList]:
        rc = self.resource(DEPLOYMENT)
        assert isinstance(rc, ScalableClient)
        return rc

    async def history(self, since: int = 0, follow: bool = False) -> AsyncIterator[api_pb2.HistoryResponse]:
        """The cluster's event log from revision ``since`` (``apiserver/history.py``). A read: a
        stream the apiserver could not open or that broke off (Unavailable) is opened again from
        the revision after the last one it delivered, with backoff, for up to the client's timeout
        since the last progress — as ``call`` retries reads. Without ``follow``, a stream opened
        again ends at the revision current then."""
        delay = 0.1
        deadline: float | None = None
        while True:
            call = self._history(api_pb2.HistoryRequest(since=since, follow=follow), metadata=self.metadata())
            try:
                async for resp in call:
                    deadline, delay = None, 0.1  # progress: a later failure has the whole budget again
                    since = max(since, resp.revision + 1)
                    yield resp
                return
            except grpc.aio.AioRpcError as exc:
                err = errors.from_rpc_error(exc)
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self.timeout
                if not isinstance(err, errors.Unavailable) or now + delay >= deadline:
                    raise err from None
            finally:
                call.cancel()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

