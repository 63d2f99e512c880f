"""Dynamic Resource Allocation's shared parts: which claim a pod names, the exact-value device
selectors kplane evaluates instead of CEL, and the structured-parameters allocator (Kubernetes
docs: Dynamic Resource Allocation, "With structured parameters")."""

from __future__ import annotations

import pytest

from kubelet.dra.driver import device_class, resource_slice
from machinery.api import core_pb2, resource_pb2
from machinery.dra import resourceclaim as rc
from machinery.dra.allocator import AllocationError, Allocator, DeviceID
from machinery.dra.selectors import SelectorError, compile_selector
from tests.harness.builders import MakePod

DRIVER = "dra.kplane.dev"


def node(name: str = "node-1", **labels: str) -> core_pb2.Node:
    n = core_pb2.Node()
    n.metadata.name = name
    n.metadata.labels.update(labels)
    return n


def claim(name: str, *requests: tuple[str, int, list[str]], mode: str = "ExactCount",
          class_name: str = "gpu.kplane.dev") -> resource_pb2.ResourceClaim:
    """A claim with ``requests`` as (name, count, selector expressions)."""
    c = resource_pb2.ResourceClaim()
    c.metadata.name, c.metadata.namespace, c.metadata.uid = name, "default", f"uid-{name}"
    for req_name, count, selectors in requests:
        r = c.spec.devices.requests.add(name=req_name)
        r.exactly.device_class_name = class_name
        r.exactly.allocation_mode = mode
        if mode == "ExactCount":
            r.exactly.count = count
        for expr in selectors:
            r.exactly.selectors.add().cel.expression = expr
    return c


def classes(name: str) -> resource_pb2.DeviceClass | None:
    return device_class() if name == "gpu.kplane.dev" else None


def allocate(claims: list[resource_pb2.ResourceClaim], slices: list[resource_pb2.ResourceSlice],
             allocated: set[DeviceID] = frozenset(), on: core_pb2.Node | None = None):  # type: ignore[assignment]
    return Allocator(claims, classes, lambda d: d in allocated).allocate(on or node(), slices)


def devices(result: resource_pb2.AllocationResult) -> list[str]:
    return [r.device for r in result.devices.results]


# ---------------------------------------------------------------- which claim a pod names


def test_a_template_claim_resolves_through_the_pods_status_and_must_be_the_pods_own():
    pod = MakePod().name("web").uid("u1").obj()
    pod.spec.resource_claims.add(name="gpu", resource_claim_template_name="gpu-template")
    pod.spec.resource_claims.add(name="shared", resource_claim_name="team-gpu")
    with pytest.raises(rc.ClaimNotCreated, match='pod "default/web": ResourceClaim not created yet'):
        rc.claim_name(pod, pod.spec.resource_claims[0])
    assert rc.claim_keys(pod) == ["default/team-gpu"]
    pod.status.resource_claim_statuses.add(name="gpu", resource_claim_name="web-gpu-x7k2p")
    assert rc.claim_name(pod, pod.spec.resource_claims[0]) == rc.ResolvedClaim("web-gpu-x7k2p", True)
    assert rc.claim_name(pod, pod.spec.resource_claims[1]) == rc.ResolvedClaim("team-gpu", False)
    assert rc.claim_keys(pod) == ["default/web-gpu-x7k2p", "default/team-gpu"]
    generated = claim("web-gpu-x7k2p")
    assert rc.is_for_pod(pod, generated) == ("ResourceClaim default/web-gpu-x7k2p was not created for pod "
                                             "default/web (pod is not owner)")
    generated.metadata.owner_references.add(api_version="v1", kind="Pod", name="web", uid="u1", controller=True)
    assert rc.is_for_pod(pod, generated) is None


def test_generated_names_keep_both_parts_when_cut():
    assert rc.generate_name("web", "gpu") == "web-gpu-"
    # 82 characters: each part cut to its share of 57 (Kubernetes leaves off the trailing dash then).
    assert rc.generate_name("p" * 50, "c" * 30) == "p" * 34 + "-" + "c" * 20


# ---------------------------------------------------------------- selectors: exact values, no CEL


@pytest.mark.parametrize("expression,matches", [
    ('device.driver == "dra.kplane.dev"', True),
    ('device.driver == "other.example.com"', False),
    ('device.attributes["dra.kplane.dev"].model == "kplane-gpu"', True),
    ('device.attributes["dra.kplane.dev"]["index"] == 2', True),
    ('device.attributes["dra.kplane.dev"].index == 3', False),
    ("2 == device.attributes['dra.kplane.dev'].index && device.driver == 'dra.kplane.dev'", True),
    ('(device.attributes["dra.kplane.dev"].model == "kplane-gpu") && true', True),
    ('device.attributes["dra.kplane.dev"].index == "2"', False),  # an int attribute, a string literal
    ('device.attributes["dra.kplane.dev"].missing == 1', False),
    ('device.attributes["example.com"].model == "kplane-gpu"', False),  # another domain: not unqualified
    ("true", True),
])
def test_exact_value_selectors(expression, matches):
    gpu2 = resource_slice("node-1", 3).spec.devices[2]
    assert compile_selector(expression).matches(DRIVER, gpu2) is matches


@pytest.mark.parametrize("expression,detail", [
    ('device.attributes["dra.kplane.dev"].index > 1', "'>' is not supported, only =="),
    ('device.driver == "a" || device.driver == "b"', "unexpected '||'"),
    ('device.capacity["dra.kplane.dev"].memory == "16Gi"', "device.capacity is not supported"),
    ('device.attributes["dra.kplane.dev"].model.matches("gpu")', "methods and fields of an attribute"),
    ('device.driver == device.driver', "one device reference and one literal"),
    ("device.driver ==", "the expression ends too early"),
])
def test_anything_else_is_refused_naming_the_expression_and_the_syntax(expression, detail):
    with pytest.raises(SelectorError) as err:
        compile_selector(expression)
    assert detail in str(err.value) and repr(expression) in str(err.value)
    assert 'device.attributes["DOMAIN"].NAME == VALUE' in str(err.value)


# ---------------------------------------------------------------- the allocator


def test_counts_take_free_devices_of_the_class_on_the_node():
    slices = [resource_slice("node-1", 3), resource_slice("node-2", 3)]
    [result] = allocate([claim("c", ("gpu", 2, []))], slices)
    assert devices(result) == ["gpu-0", "gpu-1"]
    assert {r.pool for r in result.devices.results} == {"node-1"}  # node-2's slice is not on node-1
    term = result.node_selector.node_selector_terms[0]
    assert (term.match_fields[0].key, term.match_fields[0].operator, list(term.match_fields[0].values)) == \
        ("metadata.name", "In", ["node-1"])
    taken = {DeviceID(DRIVER, "node-1", "gpu-0"), DeviceID(DRIVER, "node-1", "gpu-2")}
    [result] = allocate([claim("c", ("gpu", 1, []))], slices, taken)
    assert devices(result) == ["gpu-1"]
    assert allocate([claim("c", ("gpu", 2, []))], slices, taken) is None  # one free, two asked for


def test_several_claims_never_share_a_device():
    slices = [resource_slice("node-1", 3)]
    results = allocate([claim("a", ("gpu", 2, [])), claim("b", ("gpu", 1, []))], slices)
    assert [devices(r) for r in results] == [["gpu-0", "gpu-1"], ["gpu-2"]]
    assert allocate([claim("a", ("gpu", 2, [])), claim("b", ("gpu", 2, []))], slices) is None


def test_attribute_matching_and_backtracking_give_the_particular_request_its_device():
    slices = [resource_slice("node-1", 2)]
    # "any" comes first and could take gpu-0; "first" only takes index 0: the search backtracks.
    any_gpu = claim("c", ("any", 1, []), ("first", 1, ['device.attributes["dra.kplane.dev"].index == 0']))
    [result] = allocate([any_gpu], slices)
    assert [(r.request, r.device) for r in result.devices.results] == [("any", "gpu-1"), ("first", "gpu-0")]
    other_model = claim("c", ("gpu", 1, ['device.attributes["dra.kplane.dev"].model == "h100"']))
    assert allocate([other_model], slices) is None


def test_all_mode_takes_every_matching_device_and_only_when_all_are_free():
    slices = [resource_slice("node-1", 3)]
    [result] = allocate([claim("c", ("all", 0, []), mode="All")], slices)
    assert devices(result) == ["gpu-0", "gpu-1", "gpu-2"]
    assert allocate([claim("c", ("all", 0, []), mode="All")], slices, {DeviceID(DRIVER, "node-1", "gpu-1")}) is None


def test_an_incomplete_or_superseded_pool_is_not_used():
    old = resource_slice("node-1", 2)
    newer = resource_slice("node-1", 1, generation=2)
    newer.metadata.name = "node-1-b"
    [result] = allocate([claim("c", ("gpu", 1, []))], [old, newer])
    assert devices(result) == ["gpu-0"] and len(result.devices.results) == 1
    assert allocate([claim("c", ("gpu", 2, []))], [old, newer]) is None  # generation 1 is superseded
    newer.spec.pool.resource_slice_count = 2  # generation 2 still being published
    assert allocate([claim("c", ("gpu", 1, []))], [old, newer]) is None


def test_a_slice_for_nodes_by_selector_matches_the_nodes_labels():
    s = resource_slice("node-1", 1)
    s.spec.ClearField("node_name")
    s.spec.node_selector.node_selector_terms.add().match_expressions.add(key="zone", operator="In", values=["a"])
    [result] = allocate([claim("c", ("gpu", 1, []))], [s], on=node("node-9", zone="a"))
    assert devices(result) == ["gpu-0"]
    assert result.node_selector.node_selector_terms[0].match_expressions[0].key == "zone"
    assert allocate([claim("c", ("gpu", 1, []))], [s], on=node("node-9", zone="b")) is None


@pytest.mark.parametrize("bad,message", [
    (claim("c", ("gpu", 1, []), class_name="tpu.example.com"),
     "request gpu: device class tpu.example.com does not exist"),
    (claim("c", ("gpu", 1, ['device.attributes["dra.kplane.dev"].index >= 1'])), "is not supported"),
])
def test_claims_kplane_cannot_evaluate_are_an_allocation_error(bad, message):
    with pytest.raises(AllocationError, match=message):
        Allocator([bad], classes, lambda d: False)


def test_first_available_is_an_allocation_error():
    c = resource_pb2.ResourceClaim()
    c.metadata.name = "c"
    c.spec.devices.requests.add(name="gpu").first_available.add(name="big", device_class_name="gpu.kplane.dev")
    with pytest.raises(AllocationError, match="firstAvailable is not supported"):
        Allocator([c], classes, lambda d: False)


# ---------------------------------------------------------------- the usable devices, remembered


def _stored(obj, uid: str, rv: str):
    obj.metadata.uid, obj.metadata.resource_version = uid, rv
    return obj


def test_usable_devices_are_remembered_per_node_and_slice_version_and_only_for_stored_objects():
    from machinery.dra.allocator import UsableDevices
    usable = UsableDevices()
    n = _stored(node("cache-node"), "n1", "5")
    s1 = _stored(resource_slice("cache-node", 2), "s1", "7")
    first = usable.get(n, [s1])
    assert [c.id.device for c in first.candidates] == ["gpu-0", "gpu-1"]
    assert usable.get(n, [s1]) is first, "the same versions: remembered"
    s2 = _stored(resource_slice("cache-node", 3), "s1", "8")  # the driver republished the slice
    assert [c.id.device for c in usable.get(n, [s2]).candidates] == ["gpu-0", "gpu-1", "gpu-2"]
    relabelled = _stored(node("cache-node", zone="b"), "n1", "6")
    assert usable.get(relabelled, [s1]) is not first, "the node changed: asked again"
    assert len(usable) == 1, "one entry per node: the latest versions"
    unstored = resource_slice("cache-node", 1)
    a = usable.get(node("cache-node"), [unstored])
    b = usable.get(node("cache-node"), [unstored])
    assert a is not b and [c.id.device for c in a.candidates] == ["gpu-0"], "never stored: never remembered"


def test_usable_devices_forget_a_node():
    from machinery.dra.allocator import UsableDevices
    usable = UsableDevices()
    nodes = [_stored(node(f"gone-{i}"), f"n{i}", "1") for i in range(2)]
    slices = [_stored(resource_slice(f"gone-{i}", 1), f"s{i}", "1") for i in range(2)]
    kept = [usable.get(n, [s]) for n, s in zip(nodes, slices, strict=True)]
    usable.forget("gone-0")
    usable.forget("never-there")
    assert len(usable) == 1
    assert usable.get(nodes[1], [slices[1]]) is kept[1]
    assert usable.get(nodes[0], [slices[0]]) is not kept[0], "forgotten: asked again"


class _NoApi:
    def resource(self, kind):
        return kind


def test_the_schedulers_dra_manager_forgets_a_nodes_devices_when_the_node_or_its_slice_goes():
    from machinery.informer import Informer
    from machinery.kinds import NODE
    from scheduler.dra_manager import DRAManager
    nodes: Informer[core_pb2.Node] = Informer(_NoApi(), NODE)  # type: ignore[arg-type]
    dra = DRAManager(_NoApi(), nodes)  # type: ignore[arg-type]
    a, b = _stored(node("dra-a"), "na", "1"), _stored(node("dra-b"), "nb", "1")
    nodes._apply("ADDED", a)
    nodes._apply("ADDED", b)
    slice_a, slice_b = _stored(resource_slice("dra-a", 2), "sa", "3"), _stored(resource_slice("dra-b", 1), "sb", "4")
    dra.slices._apply("ADDED", slice_a)
    dra.slices._apply("ADDED", slice_b)
    seen = dra.usable_devices(a)
    assert [c.id.device for c in seen.candidates] == ["gpu-0", "gpu-1"]
    assert dra.usable_devices(a) is seen
    dra.usable_devices(b)
    assert len(dra._usable) == 2
    nodes._apply("DELETED", b)
    assert len(dra._usable) == 1, "the node's entry went with the node"
    dra.slices._apply("DELETED", slice_a)
    assert len(dra._usable) == 0, "the node's entry went with its slice"
    assert dra.usable_devices(a).candidates == [], "no slice left: no devices"


def test_the_devices_a_set_of_selectors_matches_are_remembered_with_the_node():
    from machinery.dra.allocator import usable_devices
    offered = usable_devices(node("match-node"), [resource_slice("match-node", 3)])
    index_one = (compile_selector('device.attributes["dra.kplane.dev"].index == 1'),)
    assert [c.id.device for c in offered.matching(index_one)] == ["gpu-1"]
    assert offered.matching(index_one) is offered.matching((compile_selector(index_one[0].expression),))
    assert [c.id.device for c in offered.matching(())] == ["gpu-0", "gpu-1", "gpu-2"]
