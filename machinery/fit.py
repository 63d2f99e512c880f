"""Does a pod fit on a node: Kubernetes' ``noderesources.Fits``, the one check behind both the
scheduler's NodeResourcesFit filter and the kubelet's admission (which in Kubernetes calls the
scheduler's function for the same reason: a pod the scheduler placed is one the kubelet admits).

``Resource`` holds amounts as integers: ``milli_cpu``, bytes of ``memory`` and
``ephemeral_storage``, ``allowed_pod_number``, and any other resource (extended, hugepages) in
``scalar``.
"""

from __future__ import annotations

from typing import Mapping, NamedTuple

from machinery.resources import is_scalar_resource


class Resource:
    __slots__ = ("milli_cpu", "memory", "ephemeral_storage", "allowed_pod_number", "scalar")

    def __init__(self, milli_cpu: int = 0, memory: int = 0, ephemeral_storage: int = 0, allowed_pod_number: int = 0,
                 scalar: dict[str, int] | None = None):
        self.milli_cpu = milli_cpu
        self.memory = memory
        self.ephemeral_storage = ephemeral_storage
        self.allowed_pod_number = allowed_pod_number
        self.scalar = scalar if scalar is not None else {}

    @classmethod
    def of(cls, rl: Mapping[str, int]) -> "Resource":
        r = cls()
        r.add(rl)
        return r

    def add(self, rl: Mapping[str, int], sign: int = 1) -> None:
        for name, amount in rl.items():
            if name == "cpu":
                self.milli_cpu += sign * amount
            elif name == "memory":
                self.memory += sign * amount
            elif name == "pods":
                self.allowed_pod_number += sign * amount
            elif name == "ephemeral-storage":
                self.ephemeral_storage += sign * amount
            elif is_scalar_resource(name):
                self.scalar[name] = self.scalar.get(name, 0) + sign * amount

    def get(self, name: str) -> int:
        if name == "cpu":
            return self.milli_cpu
        if name == "memory":
            return self.memory
        if name == "pods":
            return self.allowed_pod_number
        if name == "ephemeral-storage":
            return self.ephemeral_storage
        return self.scalar.get(name, 0)

    def clone(self) -> "Resource":
        return Resource(self.milli_cpu, self.memory, self.ephemeral_storage, self.allowed_pod_number,
                        dict(self.scalar) if self.scalar else None)

    def as_dict(self) -> dict[str, int]:
        out = {"cpu": self.milli_cpu, "memory": self.memory, "ephemeral-storage": self.ephemeral_storage,
               "pods": self.allowed_pod_number}
        out.update(self.scalar)
        return out

    def __repr__(self) -> str:
        return f"Resource({self.as_dict()})"


class Insufficient(NamedTuple):
    """One resource a node lacks for a pod (Kubernetes' InsufficientResource)."""

    resource: str
    reason: str
    requested: int
    used: int
    capacity: int
    unresolvable: bool  # more than the node has at all: no preemption can make room

    @property
    def short(self) -> int:
        """How much is missing: requested - (capacity - used)."""
        return self.requested - (self.capacity - self.used)


_new = tuple.__new__  # Insufficient without its keyword-handling __new__: this runs for every unfit node


def fits_request(request: Resource, allocatable: Resource, requested: Resource, pods: int | None,
                 ignored: frozenset[str] = frozenset(), ignored_groups: frozenset[str] = frozenset()
                 ) -> list[Insufficient]:
    """Kubernetes' fitsRequest: every resource a pod asking ``request`` lacks on a node with
    ``allocatable``, of which ``requested`` is taken by ``pods`` pods; in Kubernetes' order (the
    pod count, cpu, memory, ephemeral-storage, then the scalars). ``pods`` None leaves the pod
    count out (a pod already on the node, resized). Scalars named in ``ignored``, or in a group
    (the part before "/") in ``ignored_groups``, are not checked."""
    out: list[Insufficient] = []
    a, u, r = allocatable, requested, request
    if pods is not None and pods + 1 > a.allowed_pod_number:
        out.append(_new(Insufficient, ("pods", "Too many pods", 1, pods, a.allowed_pod_number, False)))
    if not (r.milli_cpu or r.memory or r.ephemeral_storage or r.scalar):
        return out
    if r.milli_cpu > 0 and r.milli_cpu > a.milli_cpu - u.milli_cpu:
        out.append(_new(Insufficient, ("cpu", "Insufficient cpu", r.milli_cpu, u.milli_cpu, a.milli_cpu,
                                       r.milli_cpu > a.milli_cpu)))
    if r.memory > 0 and r.memory > a.memory - u.memory:
        out.append(_new(Insufficient, ("memory", "Insufficient memory", r.memory, u.memory, a.memory,
                                       r.memory > a.memory)))
    if r.ephemeral_storage > 0 and r.ephemeral_storage > a.ephemeral_storage - u.ephemeral_storage:
        out.append(_new(Insufficient, ("ephemeral-storage", "Insufficient ephemeral-storage", r.ephemeral_storage,
                                       u.ephemeral_storage, a.ephemeral_storage,
                                       r.ephemeral_storage > a.ephemeral_storage)))
    for name, amount in r.scalar.items():
        if amount == 0 or name in ignored or (ignored_groups and name.split("/", 1)[0] in ignored_groups):
            continue
        capacity, used = a.scalar.get(name, 0), u.scalar.get(name, 0)
        if amount > capacity - used:
            out.append(_new(Insufficient, (name, f"Insufficient {name}", amount, used, capacity, amount > capacity)))
    return out
