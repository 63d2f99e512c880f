"""What a controller expects to see before it acts again: Kubernetes' ControllerExpectations and
UIDTrackingControllerExpectations (pkg/controller/controller_utils.go).

A ReplicaSet that just asked for 3 pods must not ask again before its informer shows them,
however often it is synced meanwhile — else a slow watch makes it create 6. So before its creates
it records ``expect_creations(key, 3)``, and each pod the informer then shows for it calls
``creation_observed(key)``; ``satisfied(key)`` is True again once every one was seen. Deletions
are tracked by pod key (``namespace/name``), so the update that sets a pod's deletionTimestamp and
the delete that removes it count once (``deletion_observed``). A create or delete that failed is
lowered at once (the informer will never show it). Expectations expire after 5 minutes
(ExpectationsTimeout): a watch event lost for good cannot keep a controller asleep for ever.

A restarted controller-manager starts with none, which is safe because its informers have listed
every pod before any worker runs, at resourceVersion "" (a consistent read, never older than a
write acknowledged before it, even when the apiserver's watch cache lags): what the dead process
created is in the cache. (A create still in flight when it died may land after that list, as in
Kubernetes.)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from machinery.logging import get_logger

log = get_logger()

EXPECTATIONS_TIMEOUT = 300.0  # seconds (Kubernetes' ExpectationsTimeout, 5 minutes)


@dataclass
class _Expectation:
    add: int
    delete: int
    at: float  # monotonic: when they were set
    pending_deletes: set[str] = field(default_factory=set)  # pod keys still to be seen going

    def fulfilled(self) -> bool:
        return self.add <= 0 and self.delete <= 0


class Expectations:
    """Per controller key (a ReplicaSet's ``namespace/name``): the creates and deletes still to be observed."""

    def __init__(self, timeout: float = EXPECTATIONS_TIMEOUT, clock: Callable[[], float] = time.monotonic):
        self._timeout = timeout
        self._clock = clock
        self._store: dict[str, _Expectation] = {}

    def satisfied(self, key: str) -> bool:
        """True when the controller may act: nothing expected, everything expected seen, or expired."""
        exp = self._store.get(key)
        if exp is None or exp.fulfilled():
            return True
        if self._clock() - exp.at > self._timeout:
            log.info("expectations_expired", key=key, add=exp.add, delete=exp.delete)
            return True
        return False

    def pending(self, key: str) -> tuple[int, int]:
        """(creates, deletes) still expected for ``key``."""
        exp = self._store.get(key)
        return (exp.add, exp.delete) if exp is not None else (0, 0)

    def expect_creations(self, key: str, count: int) -> None:
        """SetExpectations(key, count, 0): forget what was expected, expect ``count`` creates."""
        old = self._store.get(key)
        self._store[key] = _Expectation(count, 0, self._clock(),
                                        old.pending_deletes if old is not None else set())

    def expect_deletions(self, key: str, pod_keys: Iterable[str]) -> None:
        """Expect these pods (``namespace/name``) to go; forgets what was expected before."""
        keys = set(pod_keys)
        self._store[key] = _Expectation(0, len(keys), self._clock(), keys)

    def creation_observed(self, key: str) -> None:
        """A pod of ``key`` appeared in the informer, or a create we expected will never happen."""
        self.lower(key, adds=1)

    def deletion_observed(self, key: str, pod_key: str) -> None:
        """Pod ``pod_key`` of ``key`` is going (deletionTimestamp) or gone; counted once per pod."""
        exp = self._store.get(key)
        if exp is not None and pod_key in exp.pending_deletes:
            exp.pending_deletes.discard(pod_key)
            exp.delete -= 1

    def lower(self, key: str, adds: int = 0) -> None:
        exp = self._store.get(key)
        if exp is not None:
            exp.add -= adds

    def delete(self, key: str) -> None:
        """The controller's object is gone: a new one of the same name starts clean."""
        self._store.pop(key, None)
