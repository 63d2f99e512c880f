"""The resourceclaim controller without processes: the in-memory API of
fakes_replicaset_deployment.py, serving ResourceClaims and ResourceClaimTemplates too.

A claim with finalizers is marked for deletion by a delete and goes once an update takes its last
finalizer off, as the apiserver's generic store does; everything else is the base fake's.
"""

from __future__ import annotations

from typing import Any

from machinery.kinds import RESOURCE_CLAIM, RESOURCE_CLAIM_TEMPLATE, object_meta
from tests.unit import fakes_replicaset_deployment as base


class _Claims(base._Resource):
    """ResourceClaims: deletion honours finalizers (the scheduler's delete-protection)."""

    async def delete(self, name: str, namespace: str = "", **kw: Any) -> Any:
        old = self._stored(namespace, name)
        if not old.metadata.finalizers:
            return await super().delete(name, namespace, **kw)
        if old.metadata.deletion_timestamp:
            return base._copy(old)
        new = base._copy(old)
        new.metadata.deletion_timestamp = self.api.now()
        return self.api.store("MODIFIED", self._key(namespace, name), new)

    async def update(self, obj: Any, **kw: Any) -> Any:
        new = await super().update(obj, **kw)
        meta = object_meta(new)
        if meta.deletion_timestamp and not meta.finalizers:
            return await super().delete(meta.name, meta.namespace)
        return new


class FakeApi(base.FakeApi):
    def __init__(self) -> None:
        super().__init__()
        self.resource_claims = _Claims(self, RESOURCE_CLAIM)
        self.resource_claim_templates = base._Resource(self, RESOURCE_CLAIM_TEMPLATE)
        for kind, resource in ((RESOURCE_CLAIM, self.resource_claims),
                               (RESOURCE_CLAIM_TEMPLATE, self.resource_claim_templates)):
            self.kinds[kind.name] = kind
            self.resources[kind.name] = resource
