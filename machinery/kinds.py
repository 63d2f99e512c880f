"""The kinds kplane serves: names, API groups, storage keys and their protobuf messages.

One table that the apiserver, the client, the CLI and the JSON converter all read, so a kind is
described once. Lookup accepts what kubectl accepts: the kind ("Pod"), the plural ("pods"),
the singular ("pod") and the short names ("po").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from google.protobuf.message import Message

from machinery.api import coordination_pb2, core_pb2, policy_pb2, resource_pb2, scheduling_pb2

REGISTRY_PREFIX = "/registry/"


@dataclass(frozen=True)
class Kind:
    name: str
    plural: str
    api_version: str
    namespaced: bool
    message: type[Message]
    list_message: type[Message]
    watch_event: type[Message]
    watch_response: type[Message]
    has_status: bool
    short_names: tuple[str, ...] = ()
    # Subresources beyond status, e.g. ("binding", "resize", "eviction") for pods.
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

    def new(self) -> Message:
        obj = self.message()
        obj.api_version = self.api_version
        obj.kind = self.name
        return obj


def _kind(name: str, plural: str, api_version: str, namespaced: bool, module, has_status: bool,
          short_names: tuple[str, ...] = (), subresources: tuple[str, ...] = ()) -> Kind:
    return Kind(
        name=name,
        plural=plural,
        api_version=api_version,
        namespaced=namespaced,
        message=getattr(module, name),
        list_message=getattr(module, f"{name}List"),
        watch_event=getattr(module, f"{name}WatchEvent"),
        watch_response=getattr(module, f"{name}WatchResponse"),
        has_status=has_status,
        short_names=short_names,
        subresources=subresources,
    )


POD = _kind("Pod", "pods", "v1", True, core_pb2, True, ("po",), ("binding", "resize", "eviction"))
NODE = _kind("Node", "nodes", "v1", False, core_pb2, True, ("no",))
EVENT = _kind("Event", "events", "v1", True, core_pb2, False, ("ev",))
PRIORITY_CLASS = _kind("PriorityClass", "priorityclasses", "scheduling.k8s.io/v1", False, scheduling_pb2,
                       False, ("pc",))
POD_DISRUPTION_BUDGET = _kind("PodDisruptionBudget", "poddisruptionbudgets", "policy/v1", True, policy_pb2,
                              True, ("pdb",))
LEASE = _kind("Lease", "leases", "coordination.k8s.io/v1", True, coordination_pb2, False)
RESOURCE_CLAIM = _kind("ResourceClaim", "resourceclaims", "resource.k8s.io/v1", True, resource_pb2, True)
RESOURCE_CLAIM_TEMPLATE = _kind("ResourceClaimTemplate", "resourceclaimtemplates", "resource.k8s.io/v1", True,
                                resource_pb2, False)
RESOURCE_SLICE = _kind("ResourceSlice", "resourceslices", "resource.k8s.io/v1", False, resource_pb2, False)
DEVICE_CLASS = _kind("DeviceClass", "deviceclasses", "resource.k8s.io/v1", False, resource_pb2, False)

KINDS: tuple[Kind, ...] = (
    POD, NODE, EVENT, PRIORITY_CLASS, POD_DISRUPTION_BUDGET, LEASE,
    RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, RESOURCE_SLICE, DEVICE_CLASS,
)

_SERVICE_NAMES = {
    "Pod": "Pods", "Node": "Nodes", "Event": "Events", "PriorityClass": "PriorityClasses",
    "PodDisruptionBudget": "PodDisruptionBudgets", "Lease": "Leases", "ResourceClaim": "ResourceClaims",
    "ResourceClaimTemplate": "ResourceClaimTemplates", "ResourceSlice": "ResourceSlices",
    "DeviceClass": "DeviceClasses",
}

_BY_NAME: dict[str, Kind] = {}
for _k in KINDS:
    for _alias in (_k.name, _k.plural, _k.name.lower(), *_k.short_names):
        _BY_NAME[_alias.lower()] = _k
_BY_PLURAL = {k.plural: k for k in KINDS}
_BY_MESSAGE = {k.message.DESCRIPTOR.full_name: k for k in KINDS}


class UnknownKindError(LookupError):
    """The name is not a kind kplane serves."""


def lookup(name: str) -> Kind:
    """The kind for a kind name, plural, singular or short name (case-insensitive)."""
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise UnknownKindError(
            f'the server doesn\'t have a resource type "{name}"') from None


def of_message(obj: Message) -> Kind:
    """The kind of a message instance (``Pod()`` -> POD)."""
    return _BY_MESSAGE[obj.DESCRIPTOR.full_name]


def for_api_kind(api_version: str, kind: str) -> Kind:
    """The kind named by a document's ``apiVersion`` and ``kind``, as ``kplane apply`` reads them."""
    k = _BY_NAME.get(kind.lower())
    if k is None or k.name != kind:
        raise UnknownKindError(f'no matches for kind "{kind}" in version "{api_version}"')
    if api_version and api_version != k.api_version:
        raise UnknownKindError(f'no matches for kind "{kind}" in version "{api_version}"')
    return k


def split_key(key: str) -> tuple[Kind, str, str] | None:
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
