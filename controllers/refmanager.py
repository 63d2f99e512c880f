"""Adoption and release: Kubernetes' ControllerRefManager (pkg/controller/controller_ref_manager.go).

A controller claims the objects it should own (a ReplicaSet its pods, a Deployment its
ReplicaSets) from the objects of its namespace:

- owned by another controller (another uid in the ownerReference with ``controller: true``): left alone;
- owned by it and matching its selector: claimed;
- owned by it and no longer matching: released — its ownerReference patched away (not while the
  controller itself is being deleted: the garbage collector may be waiting on those objects);
- an orphan matching the selector, not being deleted, in the same namespace: adopted — an
  ownerReference with ``controller: true`` and ``blockOwnerDeletion: true`` patched in — unless
  the controller is being deleted. Before the first adoption the controller is read fresh from the
  API (not the cache): one deleted a moment ago must not adopt.

Both patches are strategic merge patches carrying the object's uid, so a new object that took the
old one's name is not touched (the apiserver refuses a uid change). Errors are collected and raised
together after every object was looked at (``ClaimError``), so one failing patch does not stop the rest.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from google.protobuf.message import Message

from controllers.podcontrol import controller_of
from machinery import errors, selectors
from machinery.api import meta_pb2
from machinery.informer import Informer
from machinery.kinds import accessor, object_meta
from machinery.logging import get_logger
from machinery.selectors import LabelSelector

log = get_logger()

M = TypeVar("M", bound=Message)

PatchFn = Callable[[str, str, str], Awaitable[Any]]  # (namespace, name, JSON patch)


S = TypeVar("S", bound=Message)


def resolve_controller(owners: Informer[S], kind: str, meta: meta_pb2.ObjectMeta) -> S | None:
    """resolveControllerRef: the owner of ``kind`` that the object's controller reference names —
    looked up by name in the object's namespace, then checked by uid (a new owner of the same name
    is not it)."""
    ref = controller_of(meta)
    if ref is None or ref.kind != kind:
        return None
    owner = owners.get(ref.name, meta.namespace)
    return owner if owner is not None and object_meta(owner).uid == ref.uid else None


def selecting(owners: Iterable[S], labels: Mapping[str, str]) -> list[S]:
    """The owners whose selector — valid and not empty: an empty one selects nothing here —
    selects these labels (GetPodReplicaSets, getDeploymentsForReplicaSet)."""
    out = []
    for owner in owners:
        try:
            sel = selectors.label_selector_as_selector(_spec_selector(owner))
        except selectors.SelectorError:
            continue
        if not sel.empty and sel.matches(labels):
            out.append(owner)
    return out


def _spec_selector(owner: Message) -> meta_pb2.LabelSelector:
    """``spec.selector`` of a ReplicaSet or Deployment."""
    selector: meta_pb2.LabelSelector = owner.spec.selector  # type: ignore[attr-defined]
    return selector


class ClaimError(Exception):
    """Some adoptions or releases failed; the controller retries (they may succeed then)."""


def adopt_patch(owner: Message, uid: str) -> dict[str, Any]:
    """ownerRefControllerPatch: the owner as controller of the object whose uid is ``uid``."""
    typed = accessor(owner)
    ref = {"apiVersion": typed.api_version, "kind": typed.kind, "name": typed.metadata.name,
           "uid": typed.metadata.uid, "controller": True, "blockOwnerDeletion": True}
    return {"metadata": {"ownerReferences": [ref], "uid": uid}}


def release_patch(owner_uid: str, uid: str) -> dict[str, Any]:
    """deleteOwnerRefStrategicMergePatch: the owner's reference taken out of the object whose uid is ``uid``."""
    return {"metadata": {"ownerReferences": [{"$patch": "delete", "uid": owner_uid}], "uid": uid}}


class ControllerRefManager(Generic[M]):
    """Claims objects of one kind for ``controller`` (a ReplicaSet's pods, a Deployment's ReplicaSets)."""

    def __init__(self, controller: Message, selector: LabelSelector, patch: PatchFn,
                 recheck: Callable[[], Awaitable[Message]], kind_name: str):
        self._controller = controller
        self._meta = object_meta(controller)
        self._selector = selector
        self._patch = patch
        self._recheck = recheck
        self._kind_name = kind_name
        self._can_adopt: Exception | None | bool = False  # False: not checked yet; None: may adopt

    async def claim(self, objects: Sequence[M]) -> list[M]:
        """The objects the controller owns once claimed (ClaimPods/ClaimReplicaSets)."""
        claimed: list[M] = []
        failures: list[str] = []
        for obj in objects:
            try:
                if await self._claim_one(obj):
                    claimed.append(obj)
            except (errors.ApiError, ClaimError) as exc:
                failures.append(str(exc))
        if failures:
            raise ClaimError("; ".join(failures))
        return claimed

    async def _claim_one(self, obj: M) -> bool:
        meta = object_meta(obj)
        ref = controller_of(meta)
        matches = self._selector.matches(meta.labels)
        if ref is not None:
            if ref.uid != self._meta.uid:
                return False  # another controller's
            if matches:
                return True
            if self._meta.deletion_timestamp:
                return False  # being deleted: keep what we own for the garbage collector
            await self._release(obj)
            return False
        if self._meta.deletion_timestamp or not matches or meta.deletion_timestamp:
            return False
        if self._meta.namespace and self._meta.namespace != meta.namespace:
            return False
        return await self._adopt(obj)

    async def _check_can_adopt(self) -> None:
        """RecheckDeletionTimestamp, once per claim pass: the controller read fresh from the API."""
        if self._can_adopt is False:
            try:
                fresh = object_meta(await self._recheck())
                if fresh.uid != self._meta.uid:
                    raise ClaimError(f"original {self._kind_name} {self._meta.namespace}/{self._meta.name} is gone: "
                                     f"got uid {fresh.uid}, wanted {self._meta.uid}")
                if fresh.deletion_timestamp:
                    raise ClaimError(f"{self._meta.namespace}/{self._meta.name} has just been deleted at "
                                     f"{fresh.deletion_timestamp}")
                self._can_adopt = None
            except (errors.ApiError, ClaimError) as exc:
                self._can_adopt = exc
        if isinstance(self._can_adopt, Exception):
            raise self._can_adopt

    async def _adopt(self, obj: M) -> bool:
        meta = object_meta(obj)
        try:
            await self._check_can_adopt()
        except (errors.ApiError, ClaimError) as exc:
            raise ClaimError(f"can't adopt {meta.namespace}/{meta.name}: {exc}") from None
        try:
            await self._patch(meta.namespace, meta.name, json.dumps(adopt_patch(self._controller, meta.uid)))
        except errors.NotFound:
            return False
        log.info("controller_adopted", controller=f"{self._meta.namespace}/{self._meta.name}",
                 object=f"{meta.namespace}/{meta.name}")
        return True

    async def _release(self, obj: M) -> None:
        meta = object_meta(obj)
        try:
            await self._patch(meta.namespace, meta.name, json.dumps(release_patch(self._meta.uid, meta.uid)))
        except (errors.NotFound, errors.Invalid):
            return  # gone, or no longer ours (Kubernetes takes the apiserver's refusal as released)
        log.info("controller_released", controller=f"{self._meta.namespace}/{self._meta.name}",
                 object=f"{meta.namespace}/{meta.name}")
