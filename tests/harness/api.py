"""What tests do through a cluster's API in more than one call: resize a pod through its
``resize`` subresource, delete every pod and wait until none is left, create the priority classes
a module's tests share; ``api_fixture``, a client of a module's cluster that leaves no pod behind."""

from __future__ import annotations

import pytest

from machinery import errors
from machinery.api import core_pb2
from tests.harness.builders import make_priority_class
from tests.harness.wait import eventually


async def resize(api, name: str, container: str = "c1", **requests: str) -> core_pb2.Pod:
    """Change a container's requests through the ``resize`` subresource; the stored pod."""
    return await api.pods.patch(name, {"spec": {"containers": [{"name": container, "resources": {
        "requests": requests}}]}}, subresource="resize")


async def delete_all_pods(c, namespace: str = "default") -> None:
    """Delete every pod at once (grace 0) and wait until the API has none left."""
    for p in (await c.pods.list(namespace)).items:
        try:
            await c.pods.delete(p.metadata.name, namespace, grace_period_seconds=0)
        except errors.NotFound:
            pass

    async def empty():
        return not (await c.pods.list(namespace)).items

    await eventually(empty, timeout=20, what="pods gone")


async def ensure_priority_classes(api, **values: int) -> None:
    """Create the PriorityClasses ``name=value`` that do not exist yet (a module's tests share them)."""
    for name, value in values.items():
        try:
            await api.priority_classes.create(make_priority_class(name, value))
        except errors.AlreadyExists:
            pass


def api_fixture(cluster: str):
    """A function-scoped fixture: a client of the module's cluster fixture named ``cluster``; every
    pod is deleted after each test."""
    @pytest.fixture
    async def fixture(request):
        c = request.getfixturevalue(cluster).client()
        try:
            yield c
        finally:
            await delete_all_pods(c)
            await c.close()
    return fixture
