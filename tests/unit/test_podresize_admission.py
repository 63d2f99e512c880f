"""apiserver/admission/podresize.py: Kubernetes' PodResizeValidator (1.36) refuses a resize the
pod's node can never hold, or a resize on a node that is not linux, at the apiserver."""

from __future__ import annotations

import pytest

from apiserver.admission.chain import new_chain
from apiserver.admission.interfaces import Attributes, Operation
from apiserver.admission.podresize import PodResizeValidator
from apiserver.auth import User
from apiserver.rest.codec import status
from machinery import errors
from machinery.featuregates import FeatureGates
from machinery.kinds import NODE, POD
from machinery.version import Version
from tests.harness.builders import MakeNode, MakePod


class Nodes:
    def __init__(self, *nodes):
        self.nodes = {n.metadata.name: n for n in nodes}

    async def read(self, kind, namespace, name, fresh=False):
        assert kind is NODE
        return self.nodes.get(name)


NODE_1 = MakeNode().name("node-1").label("kubernetes.io/os", "linux").allocatable(cpu="4", memory="8Gi").obj()


def resize(cpu: str, memory: str = "1Gi", *, node: str = "node-1", generation: int = 2, subresource: str = "resize",
           init_cpu: str = "") -> Attributes:
    def pod(c: str, gen: int):
        p = MakePod().name("p").node(node).container("c", cpu=c, memory=memory)
        if init_cpu:
            p = p.init_container("init", cpu=init_cpu)
        obj = p.obj()
        obj.metadata.generation = gen
        return obj
    return Attributes(Operation.UPDATE, POD, subresource, "default", "p", pod(cpu, generation), pod("1", 1),
                      User("someone"))


async def refusal(a: Attributes, *nodes) -> errors.Forbidden | None:
    try:
        await PodResizeValidator(Nodes(*(nodes or (NODE_1,)))).validate(a)  # type: ignore[arg-type]
    except errors.Forbidden as exc:
        return exc
    return None


async def test_a_resize_beyond_the_nodes_allocatable_is_refused_with_kubernetes_words():
    exc = await refusal(resize("5"))
    assert exc is not None
    assert exc.message == ('pods "p" is forbidden: node didn\'t have enough allocatable resources: cpu, '
                           'requested: 5000, allocatable: 4000')
    body = status(exc, POD, "p")
    assert body["code"] == 403 and body["reason"] == "Forbidden"
    assert body["details"]["causes"] == [{"reason": "NodeCapacity"}]
    both = await refusal(resize("5", "9Gi"))
    assert both is not None and both.message.endswith(
        "cpu, requested: 5000, allocatable: 4000; memory, requested: 9663676416, allocatable: 8589934592")


async def test_what_fits_or_is_not_a_spec_change_of_a_bound_pod_is_let_through():
    assert await refusal(resize("4")) is None  # exactly the allocatable
    assert await refusal(resize("5", generation=1)) is None  # the spec did not change
    assert await refusal(resize("5", node="")) is None  # not bound
    assert await refusal(resize("5", subresource="")) is None  # not the resize subresource
    assert await refusal(resize("5", subresource="status")) is None


async def test_init_containers_count_as_pod_requests_count_them():
    """PodRequests: the largest init container counts when it is above the containers' sum."""
    exc = await refusal(resize("2", init_cpu="6"))
    assert exc is not None and "cpu, requested: 6000, allocatable: 4000" in exc.message


async def test_a_node_not_linux_or_unknown_is_refused():
    windows = MakeNode().name("node-1").label("kubernetes.io/os", "windows").allocatable(cpu="4", memory="8Gi").obj()
    exc = await refusal(resize("2"), windows)
    assert exc is not None and exc.message == ('pods "p" is forbidden: pod resize is only supported on linux nodes, '
                                               'node "node-1" is "windows"')
    assert exc.causes == ["UnsupportedPlatform"]
    unlabelled = MakeNode().name("node-1").allocatable(cpu="4", memory="8Gi").obj()
    assert await refusal(resize("2"), unlabelled) is None
    gone = await refusal(resize("2"), MakeNode().name("node-2").obj())
    assert gone is not None and gone.message == 'pods "p" is forbidden: node "node-1" not found'


@pytest.mark.parametrize("version,present", [("1.35", False), ("1.36", True), ("1.37", True)])
def test_the_chain_has_the_plugin_from_kubernetes_1_36(version, present):
    gates = FeatureGates(emulated_version=Version.parse(version))
    assert ("PodResizeValidator" in new_chain(Nodes(), gates).names) is present  # type: ignore[arg-type]
    assert new_chain(Nodes(), gates).names[-1] == "ResourceQuota"  # type: ignore[arg-type]


async def test_with_in_place_resize_off_it_refuses_nothing():
    plugin = PodResizeValidator(Nodes(NODE_1), in_place_enabled=False)  # type: ignore[arg-type]
    await plugin.validate(resize("64"))
