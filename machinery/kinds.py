"""The kinds kplane serves: names, API groups, storage keys and their protobuf messages.

One table that the apiserver, the client, the CLI and the JSON converter all read, so a kind is
described once. Lookup accepts what kubectl accepts: the kind ("Pod"), the plural ("pods"),
the singular ("pod") and the short names ("po").
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Generic, Protocol, TypeVar, cast

from google.protobuf.message import Message

from machinery.api import apps_pb2, coordination_pb2, core_pb2, meta_pb2, policy_pb2, resource_pb2, scheduling_pb2

REGISTRY_PREFIX = "/registry/"

M = TypeVar("M", bound=Message)  # a kind's object message (core_pb2.Pod)
L = TypeVar("L", bound=Message)  # its list message (core_pb2.PodList)
M_co = TypeVar("M_co", bound=Message, covariant=True)
L_co = TypeVar("L_co", bound=Message, covariant=True)


class Object(Protocol):
    """What every served kind's message has: Kubernetes' TypeMeta and ObjectMeta (runtime.Object
    with metav1.Object). The generated classes have these fields without naming a common base;
    ``accessor`` reaches them on a message known only as ``Message``."""

    api_version: str
    kind: str

    @property
    def metadata(self) -> meta_pb2.ObjectMeta: ...


def accessor(obj: Message) -> Object:
    """apimachinery's meta.Accessor: ``obj``, a served kind's message, as the ``Object`` it is."""
    return cast(Object, obj)


def object_meta(obj: Message) -> meta_pb2.ObjectMeta:
    """The ObjectMeta of a served kind's message (``accessor(obj).metadata``)."""
    return cast(Object, obj).metadata


class _WithSpec(Protocol):
    @property
    def spec(self) -> Message: ...


def spec_of(obj: Message) -> Message | None:
    """The ``spec`` of a served kind's message; None for kinds without one (Event, PriorityClass)."""
    if "spec" not in obj.DESCRIPTOR.fields_by_name:
        return None
    return cast(_WithSpec, obj).spec


class ObjectList(Protocol[M]):
    """What every served kind's list message has (``core_pb2.PodList``): ListMeta and the items."""

    @property
    def metadata(self) -> meta_pb2.ListMeta: ...

    @property
    def items(self) -> MutableSequence[M]: ...


def list_accessor(kind: Kind[M, L], lst: L) -> ObjectList[M]:
    """``lst``, a list message of ``kind``, as the ``ObjectList`` of ``kind``'s objects it is."""
    return cast(ObjectList[M], lst)


@dataclass(frozen=True)
class Kind(Generic[M_co, L_co]):
    """One served kind; typed by its object and list messages (``Kind[core_pb2.Pod, core_pb2.PodList]``)."""

    name: str
    plural: str
    api_version: str
    namespaced: bool
    message: type[M_co]
    list_message: type[L_co]
    watch_event: type[Message]
    watch_response: type[Message]
    has_status: bool
    short_names: tuple[str, ...] = ()
    # Subresources beyond status, e.g. ("binding", "resize", "eviction") for pods, ("scale",) for
    # the apps kinds, ("finalize",) for namespaces.
    subresources: tuple[str, ...] = field(default=())

    @property
    def service(self) -> str:
        """The fully qualified gRPC service name, e.g. ``kplane.v1.Pods``."""
        return f"kplane.v1.{_SERVICE_NAMES[self.name]}"

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def key(self, namespace: str, name: str) -> str:
        """The etcd key: ``/registry/<plural>/<namespace>/<name>`` (no namespace if cluster-scoped)."""
        if self.namespaced:
            return f"{REGISTRY_PREFIX}{self.plural}/{namespace}/{name}"
        return f"{REGISTRY_PREFIX}{self.plural}/{name}"

    def prefix(self, namespace: str = "") -> str:
        """The etcd key prefix holding every object of this kind (in ``namespace`` if given)."""
        if self.namespaced and namespace:
            return f"{REGISTRY_PREFIX}{self.plural}/{namespace}/"
        return f"{REGISTRY_PREFIX}{self.plural}/"

    def new(self) -> M_co:
        return self.message(api_version=self.api_version, kind=self.name)


def _kind(module: ModuleType, message: type[M], list_message: type[L], plural: str, api_version: str,
          namespaced: bool, has_status: bool, short_names: tuple[str, ...] = (),
          subresources: tuple[str, ...] = ()) -> Kind[M, L]:
    """The kind of ``message`` (its name); its watch messages are ``<name>WatchEvent`` and
    ``<name>WatchResponse`` in ``module``."""
    name = message.__name__
    return Kind(
        name=name,
        plural=plural,
        api_version=api_version,
        namespaced=namespaced,
        message=message,
        list_message=list_message,
        watch_event=getattr(module, f"{name}WatchEvent"),
        watch_response=getattr(module, f"{name}WatchResponse"),
        has_status=has_status,
        short_names=short_names,
        subresources=subresources,
    )


POD = _kind(core_pb2, core_pb2.Pod, core_pb2.PodList, "pods", "v1", True, True, ("po",),
            ("binding", "resize", "eviction"))
NODE = _kind(core_pb2, core_pb2.Node, core_pb2.NodeList, "nodes", "v1", False, True, ("no",))
EVENT = _kind(core_pb2, core_pb2.Event, core_pb2.EventList, "events", "v1", True, False, ("ev",))
PRIORITY_CLASS = _kind(scheduling_pb2, scheduling_pb2.PriorityClass, scheduling_pb2.PriorityClassList,
                       "priorityclasses", "scheduling.k8s.io/v1", False, False, ("pc",))
POD_DISRUPTION_BUDGET = _kind(policy_pb2, policy_pb2.PodDisruptionBudget, policy_pb2.PodDisruptionBudgetList,
                              "poddisruptionbudgets", "policy/v1", True, True, ("pdb",))
LEASE = _kind(coordination_pb2, coordination_pb2.Lease, coordination_pb2.LeaseList, "leases",
              "coordination.k8s.io/v1", True, False)
RESOURCE_CLAIM = _kind(resource_pb2, resource_pb2.ResourceClaim, resource_pb2.ResourceClaimList,
                       "resourceclaims", "resource.k8s.io/v1", True, True)
RESOURCE_CLAIM_TEMPLATE = _kind(resource_pb2, resource_pb2.ResourceClaimTemplate,
                                resource_pb2.ResourceClaimTemplateList, "resourceclaimtemplates",
                                "resource.k8s.io/v1", True, False)
RESOURCE_SLICE = _kind(resource_pb2, resource_pb2.ResourceSlice, resource_pb2.ResourceSliceList,
                       "resourceslices", "resource.k8s.io/v1", False, False)
DEVICE_CLASS = _kind(resource_pb2, resource_pb2.DeviceClass, resource_pb2.DeviceClassList, "deviceclasses",
                     "resource.k8s.io/v1", False, False)
NAMESPACE = _kind(core_pb2, core_pb2.Namespace, core_pb2.NamespaceList, "namespaces", "v1", False, True, ("ns",),
                  ("finalize",))
RESOURCE_QUOTA = _kind(core_pb2, core_pb2.ResourceQuota, core_pb2.ResourceQuotaList, "resourcequotas", "v1", True,
                       True, ("quota",))
LIMIT_RANGE = _kind(core_pb2, core_pb2.LimitRange, core_pb2.LimitRangeList, "limitranges", "v1", True, False,
                    ("limits",))
REPLICA_SET = _kind(apps_pb2, apps_pb2.ReplicaSet, apps_pb2.ReplicaSetList, "replicasets", "apps/v1", True, True,
                    ("rs",), ("scale",))
DEPLOYMENT = _kind(apps_pb2, apps_pb2.Deployment, apps_pb2.DeploymentList, "deployments", "apps/v1", True, True,
                   ("deploy",), ("scale",))

KINDS: tuple[Kind[Message, Message], ...] = (
    POD, NODE, EVENT, PRIORITY_CLASS, POD_DISRUPTION_BUDGET, LEASE,
    RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, RESOURCE_SLICE, DEVICE_CLASS,
    NAMESPACE, RESOURCE_QUOTA, LIMIT_RANGE, REPLICA_SET, DEPLOYMENT,
)

_SERVICE_NAMES = {
    "Pod": "Pods", "Node": "Nodes", "Event": "Events", "PriorityClass": "PriorityClasses",
    "PodDisruptionBudget": "PodDisruptionBudgets", "Lease": "Leases", "ResourceClaim": "ResourceClaims",
    "ResourceClaimTemplate": "ResourceClaimTemplates", "ResourceSlice": "ResourceSlices",
    "DeviceClass": "DeviceClasses", "Namespace": "Namespaces", "ResourceQuota": "ResourceQuotas",
    "LimitRange": "LimitRanges", "ReplicaSet": "ReplicaSets", "Deployment": "Deployments",
}

_BY_NAME: dict[str, Kind[Message, Message]] = {}
for _k in KINDS:
    for _alias in (_k.name, _k.plural, _k.name.lower(), *_k.short_names):
        _BY_NAME[_alias.lower()] = _k
_BY_PLURAL = {k.plural: k for k in KINDS}
_BY_MESSAGE = {k.message.DESCRIPTOR.full_name: k for k in KINDS}


class UnknownKindError(LookupError):
    """The name is not a kind kplane serves."""


def lookup(name: str) -> Kind[Message, Message]:
    """The kind for a kind name, plural, singular or short name (case-insensitive)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise UnknownKindError(
            f'the server doesn\'t have a resource type "{name}"') from None


def of_message(obj: Message) -> Kind[Message, Message]:
    """The kind of a message instance (``Pod()`` -> POD)."""
    return _BY_MESSAGE[obj.DESCRIPTOR.full_name]


def for_api_kind(api_version: str, kind: str) -> Kind[Message, Message]:
    """The kind named by a document's ``apiVersion`` and ``kind``, as ``kplane apply`` reads them."""
    k = _BY_NAME.get(kind.lower())
    if k is None or k.name != kind:
        raise UnknownKindError(f'no matches for kind "{kind}" in version "{api_version}"')
    if api_version and api_version != k.api_version:
        raise UnknownKindError(f'no matches for kind "{kind}" in version "{api_version}"')
    return k


def split_key(key: str) -> tuple[Kind[Message, Message], str, str] | None:
    """``/registry/pods/ns/name`` -> (POD, "ns", "name"); None for keys that are not objects."""
    if not key.startswith(REGISTRY_PREFIX):
        return None
    parts = key[len(REGISTRY_PREFIX):].split("/")
    kind = _BY_PLURAL.get(parts[0])
    if kind is None:
        return None
    if kind.namespaced and len(parts) == 3:
        return kind, parts[1], parts[2]
    if not kind.namespaced and len(parts) == 2:
        return kind, "", parts[1]
    return None
