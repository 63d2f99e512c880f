"""One admission chain for every write path (issue 21, point 1).

A second apiserver's storage is built in this process on the test cluster's etcd (as an
apiserver replica would be), with the apiserver's own chain plus one recording plugin at its
end. Every write path then goes through it: create, update, patch, server-side apply, status,
binding, resize, eviction and delete each reach the recorder, with the Attributes Kubernetes
would give them, mutating step first and validating step after.
"""

from __future__ import annotations

import pytest

from apiserver.admission.chain import new_chain
from apiserver.admission.interfaces import AdmissionChain, Attributes
from apiserver.auth import User
from apiserver.etcd import EtcdClient
from apiserver.pods import PodSubresources
from apiserver.registry import Registry
from apiserver.watchcache import WatchCache
from machinery import jsonconv
from machinery.api import core_pb2, meta_pb2
from machinery.featuregates import FeatureGates
from machinery.kinds import NODE, POD
from tests.harness.builders import MakeNode, MakePod

pytestmark = pytest.mark.integration

ADMIN = User("admin", groups=("system:masters",))
KUBERNETES_ORDER = ["NodeRestriction", "NamespaceLifecycle", "LimitRanger", "Priority", "PodResizeValidator",
                    "ResourceQuota"]


class Recorder:
    """A plugin added at the end of the chain: it remembers what each step saw."""

    name = "Recorder"

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, str, str]] = []

    def _note(self, step: str, a: Attributes) -> None:
        if a.kind is NODE:
            return  # the node the test makes for PodResizeValidator to read
        kinds = (type(a.object).__name__ if a.object is not None else "-",
                 type(a.old_object).__name__ if a.old_object is not None else "-")
        assert a.user.name == "admin" and a.kind is POD and a.name == "p" and a.namespace == "default", a
        self.seen.append((step, a.operation.value, a.subresource, "/".join(kinds)))

    async def admit(self, a: Attributes) -> None:
        self._note("admit", a)

    async def validate(self, a: Attributes) -> None:
        self._note("validate", a)


@pytest.fixture
async def storage(kcluster):
    argv = kcluster.process("apiserver").argv
    etcd = EtcdClient(argv[argv.index("--etcd-endpoints") + 1].split(","))
    etcd.connect()
    cache = WatchCache(etcd)
    await cache.start()
    recorder = Recorder()
    registry = Registry(etcd, cache, admission=lambda s: AdmissionChain([*new_chain(s).plugins, recorder]))
    try:
        yield registry, PodSubresources(registry, FeatureGates.parse("")), recorder
    finally:
        await cache.stop()
        await etcd.close()


async def test_the_chain_runs_its_plugins_in_kubernetes_order(storage):
    registry, _, _ = storage
    assert registry.admission.names == [*KUBERNETES_ORDER, "Recorder"]


async def test_a_plugin_added_to_the_chain_runs_on_every_write_path(storage):
    registry, pods, recorder = storage
    pod = MakePod().name("p").req(cpu="100m", memory="32Mi").obj()

    async def next_step() -> None:
        """The storage's cache has this storage's last write (else the write below would read a
        stale pod, lose its compare-and-swap and run the chain again: right, but not one run)."""
        await registry.caught_up(POD)
        recorder.seen.clear()

    created = await registry.create(POD, pod, ADMIN)
    assert recorder.seen == [("admit", "CREATE", "", "Pod/-"), ("validate", "CREATE", "", "Pod/-")]

    await next_step()
    created.metadata.labels["step"] = "update"
    await registry.update(POD, created, ADMIN)
    assert recorder.seen == [("admit", "UPDATE", "", "Pod/Pod"), ("validate", "UPDATE", "", "Pod/Pod")]

    await next_step()
    await registry.patch(POD, meta_pb2.PatchRequest(namespace="default", name="p", patch_type="merge",
                                                    patch='{"metadata": {"labels": {"step": "patch"}}}'), ADMIN)
    assert recorder.seen == [("admit", "UPDATE", "", "Pod/Pod"), ("validate", "UPDATE", "", "Pod/Pod")]

    await next_step()
    await registry.patch(POD, meta_pb2.PatchRequest(
        namespace="default", name="p", patch_type="apply", field_manager="test",
        patch='{"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"step": "apply"}}}'), ADMIN)
    assert recorder.seen == [("admit", "UPDATE", "", "Pod/Pod"), ("validate", "UPDATE", "", "Pod/Pod")]

    await next_step()
    current = await registry.get(POD, "default", "p")
    current.status.message = "status written"
    await registry.update(POD, current, ADMIN, subresource="status")
    assert recorder.seen == [("admit", "UPDATE", "status", "Pod/Pod"), ("validate", "UPDATE", "status", "Pod/Pod")]

    await next_step()
    binding = core_pb2.Binding()
    binding.metadata.name, binding.metadata.namespace, binding.target.name = "p", "default", "node-1"
    await pods.bind(binding, ADMIN)
    assert recorder.seen == [("admit", "CREATE", "binding", "Pod/Pod"), ("validate", "CREATE", "binding", "Pod/Pod")]

    await next_step()
    # PodResizeValidator reads the pod's node: one that can hold the resize
    await registry.create(NODE, MakeNode().name("node-1").allocatable(cpu="4", memory="8Gi").obj(), ADMIN)
    resized = await registry.get(POD, "default", "p")
    resized.spec.containers[0].resources.requests["cpu"] = "200m"
    await pods.resize(resized, ADMIN)
    assert recorder.seen == [("admit", "UPDATE", "resize", "Pod/Pod"), ("validate", "UPDATE", "resize", "Pod/Pod")]
    assert (await registry.get(POD, "default", "p")).spec.containers[0].resources.requests["cpu"] == "200m"

    await next_step()
    eviction = jsonconv.from_dict(core_pb2.Eviction, {"metadata": {"name": "p", "namespace": "default"},
                                                      "deleteOptions": {"gracePeriodSeconds": 0}})
    await pods.evict(eviction, ADMIN)
    assert recorder.seen == [("admit", "CREATE", "eviction", "Pod/Pod"), ("validate", "CREATE", "eviction", "Pod/Pod"),
                             ("admit", "DELETE", "eviction", "-/Pod"), ("validate", "DELETE", "eviction", "-/Pod")]

    await next_step()
    await registry.create(POD, MakePod().name("p").obj(), ADMIN)
    await next_step()
    await registry.delete(POD, meta_pb2.DeleteRequest(namespace="default", name="p", grace_period_seconds=0), ADMIN)
    assert recorder.seen == [("admit", "DELETE", "", "-/Pod"), ("validate", "DELETE", "", "-/Pod")]
