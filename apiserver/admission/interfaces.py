"""The admission contract: what a request is to admission, what a plugin implements, and the chain.

Kubernetes' k8s.io/apiserver/pkg/admission: every write — create, update, patch, delete, and
each subresource (status, scale, binding, resize, eviction, finalize) — is described by one
``Attributes`` value and passes the same chain twice. First ``admit``: every plugin that
implements ``MutationInterface``, in the chain's order, may change the object or refuse it. Then
the kind's strategy defaults and validates it. Then ``validate``: every plugin that implements
``ValidationInterface``, in order, may only refuse (ResourceQuota charges the quota there, the
last step before the write). A refusal is an ApiError (Forbidden, NotFound, Invalid...), which
the request returns as is.

Each plugin run is measured as Kubernetes measures it:
``apiserver_admission_controller_admission_duration_seconds{name,operation,rejected,type}``.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from google.protobuf.message import Message
from prometheus_client import Histogram

from apiserver.auth import User
from machinery.kinds import Kind

_DURATION = Histogram("apiserver_admission_controller_admission_duration_seconds",
                      "Admission controller latency histogram in seconds, identified by name and broken out for "
                      "each operation and API resource and type (validate or admit).",
                      ["name", "operation", "rejected", "type"],
                      buckets=(0.005, 0.025, 0.1, 0.5, 1.0, 2.5))


class Operation(enum.Enum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"


_VERBS = {Operation.CREATE: "create", Operation.UPDATE: "update", Operation.DELETE: "delete"}


@dataclass
class Attributes:
    """One write as admission sees it (Kubernetes' admission.Attributes).

    ``object`` is the object to be stored (None for a delete; the pod being bound, resized or
    evicted for those subresources), ``old_object`` the stored one (None for a create).
    ``subresource`` is "" for the object itself, else "status", "scale", "binding", "resize",
    "eviction" or "finalize". ``admitted`` is where plugins leave what their validate step needs
    from their admit step (a plugin's own key)."""

    operation: Operation
    kind: Kind[Message, Message]
    subresource: str
    namespace: str
    name: str
    object: Message | None
    old_object: Message | None
    user: User
    dry_run: bool = False
    admitted: dict[str, Any] = field(default_factory=dict)

    @property
    def verb(self) -> str:
        """The authorizer's verb for this write: create, update, delete, or the subresource's."""
        return self.subresource or _VERBS[self.operation]


@runtime_checkable
class Plugin(Protocol):
    """Every admission plugin has the name Kubernetes knows it by (``--enable-admission-plugins``)."""

    name: str


@runtime_checkable
class MutationInterface(Plugin, Protocol):
    async def admit(self, a: Attributes) -> None:
        """May change ``a.object``; raises an ApiError to refuse the request."""
        ...


@runtime_checkable
class ValidationInterface(Plugin, Protocol):
    async def validate(self, a: Attributes) -> None:
        """May not change anything stored; raises an ApiError to refuse the request."""
        ...


class AdmissionChain:
    """The plugins, in the order they run, built once when the apiserver starts."""

    def __init__(self, plugins: Sequence[Plugin]):
        names = [p.name for p in plugins]
        if len(set(names)) != len(names):
            raise ValueError(f"admission plugins named twice: {names}")
        self.plugins: tuple[Plugin, ...] = tuple(plugins)
        self._mutating: list[_Step] = [(p.admit, _PluginTimer(p.name, "admit")) for p in plugins
                                       if isinstance(p, MutationInterface)]
        self._validating: list[_Step] = [(p.validate, _PluginTimer(p.name, "validate")) for p in plugins
                                         if isinstance(p, ValidationInterface)]

    @property
    def names(self) -> list[str]:
        return [p.name for p in self.plugins]

    async def admit(self, a: Attributes) -> None:
        """Every mutating plugin in turn (Kubernetes' chainAdmissionHandler.Admit)."""
        await _run(self._mutating, a)

    async def validate(self, a: Attributes) -> None:
        """Every validating plugin in turn (Kubernetes' chainAdmissionHandler.Validate)."""
        await _run(self._validating, a)


_Step = tuple[Callable[[Attributes], Awaitable[None]], "_PluginTimer"]


async def _run(steps: list[_Step], a: Attributes) -> None:
    """One pass of the chain: each plugin's step timed, a refusal (any exception) counted as
    rejected and raised at once."""
    for step, timer in steps:
        start = time.perf_counter()
        try:
            await step(a)
        except BaseException:
            timer.observe(a.operation, True, start)
            raise
        timer.observe(a.operation, False, start)


class _PluginTimer:
    """One plugin's step (admit or validate) in the duration histogram. Its labelled children are
    resolved once per (operation, rejected) and kept: ``labels()`` costs more than the observation,
    and a write runs five to eight plugin steps."""

    __slots__ = ("_name", "_step", "_children")

    def __init__(self, name: str, step: str):
        self._name = name
        self._step = step
        self._children: dict[tuple[Operation, bool], Any] = {}

    def observe(self, operation: Operation, rejected: bool, start: float) -> None:
        child = self._children.get((operation, rejected))
        if child is None:
            child = _DURATION.labels(self._name, operation.value, "true" if rejected else "false", self._step)
            self._children[(operation, rejected)] = child
        child.observe(time.perf_counter() - start)
