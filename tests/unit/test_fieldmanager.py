"""Server-side apply's pure parts (apiserver.fieldmanager): the FieldsV1 encoding Kubernetes
writes in metadata.managedFields, merge by the schema's list types, the comparison an Update is
recorded from, and the conflicts, forcing and pruning of apply — as the Kubernetes docs page
"Server-Side Apply" describes them, with its examples' shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apiserver import strategy
from apiserver.auth import User
from apiserver.fieldmanager import FieldManager, Manager, manager_from_user_agent, schema, validate_manager
from apiserver.fieldmanager import manager as manager_module
from apiserver.fieldmanager.fieldpath import FieldSet, field, key, path_string, value
from apiserver.fieldmanager.typed import ABSENT, TypeError_, compare, field_set, merge, remove_items
from apiserver.registry import strategy_for_update
from machinery import errors, jsonconv
from machinery.api import core_pb2
from machinery.kinds import DEPLOYMENT, EVENT, NODE, POD
from tests.harness.builders import MakeDeployment, MakePod

ADMIN = User("admin", groups=("system:masters",))
POD_TYPE = schema.of_kind(POD)


def fields_v1(entry: core_pb2.Pod | Any, manager: str) -> dict[str, Any]:
    """The fieldsV1 object of ``manager``'s entry."""
    return next(json.loads(e.fields_v1) for e in entry.metadata.managed_fields if e.manager == manager)


def entries(obj: Any) -> list[tuple[str, str, str]]:
    return [(e.manager, e.operation, e.subresource) for e in obj.metadata.managed_fields]


# ---------------------------------------------------------------- schema, from the OpenAPI documents


def test_the_schema_is_the_served_openapi_documents_list_types():
    spec = POD_TYPE.of("spec")
    assert isinstance(spec, schema.MapType)
    containers = spec.of("containers")
    assert isinstance(containers, schema.ListType)
    assert (containers.relationship, containers.keys) == ("map", ("name",))
    container = containers.element
    assert isinstance(container, schema.MapType)
    ports = container.of("ports")
    assert isinstance(ports, schema.ListType)
    # +listMapKey=containerPort,protocol; protocol's default (TCP) keys a port that leaves it out
    assert ports.keys == ("containerPort", "protocol") and ports.defaults == {"protocol": "TCP"}
    assert isinstance(container.of("command"), schema.ListType) and container.of("command").relationship == "atomic"
    tolerations = spec.of("tolerations")
    assert isinstance(tolerations, schema.ListType) and tolerations.relationship == "atomic"
    node_selector = spec.of("nodeSelector")
    assert isinstance(node_selector, schema.MapType) and node_selector.atomic  # +mapType=atomic
    metadata = POD_TYPE.of("metadata")
    assert isinstance(metadata, schema.MapType)
    finalizers = metadata.of("finalizers")
    assert isinstance(finalizers, schema.ListType) and finalizers.relationship == "set"
    # kept as given (x-kubernetes-preserve-unknown-fields): deduced from the value
    assert container.of("livenessProbe") is schema.UNTYPED
    selector = schema.of_kind(DEPLOYMENT).of("spec")
    assert isinstance(selector, schema.MapType) and isinstance(selector.of("selector"), schema.MapType)
    assert selector.of("selector").atomic  # LabelSelector is +structType=atomic


# ---------------------------------------------------------------- FieldsV1


def test_fields_v1_encodes_fields_keys_values_and_the_node_itself():
    doc = {"metadata": {"labels": {"app": "web"}, "finalizers": ["example.com/a"]},
           "spec": {"containers": [{"name": "c1", "image": "nginx", "ports": [{"containerPort": 80}]}]}}
    fs = field_set(doc, POD_TYPE)
    assert fs.to_fields_v1() == {
        "f:metadata": {"f:finalizers": {'v:"example.com/a"': {}}, "f:labels": {"f:app": {}}},
        "f:spec": {"f:containers": {'k:{"name":"c1"}': {
            ".": {}, "f:image": {}, "f:name": {},
            "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}}}}}}
    assert FieldSet.from_fields_v1(json.loads(fs.to_json())) == fs


def test_printed_paths_are_kubernetes_conflict_paths():
    assert path_string((field("spec"), field("containers"), key({"name": "c1"}), field("image"))) == \
        '.spec.containers[name="c1"].image'
    assert path_string((field("spec"), field("containers"), key({"name": "c1"}), field("ports"),
                        key({"protocol": "TCP", "containerPort": 80}))) == \
        '.spec.containers[name="c1"].ports[containerPort=80,protocol="TCP"]'
    assert path_string((field("metadata"), field("finalizers"), value("x"))) == '.metadata.finalizers[="x"]'


def test_a_list_map_item_without_its_key_is_refused():
    with pytest.raises(TypeError_, match='omits key field "name"'):
        field_set({"spec": {"containers": [{"image": "nginx"}]}}, POD_TYPE)
    with pytest.raises(TypeError_, match=r'duplicate entries for key \[name="c1"\]'):
        field_set({"spec": {"containers": [{"name": "c1"}, {"name": "c1"}]}}, POD_TYPE, unique=True)


def test_set_algebra_shares_and_keeps_what_is_unchanged():
    a = FieldSet.of((field("a"),), (field("b"), field("c")))
    b = FieldSet.of((field("b"), field("c")))
    assert a.difference(FieldSet()) is a
    assert a.difference(b) == FieldSet.of((field("a"),))
    assert a.recursive_difference(FieldSet.of((field("b"),))) == FieldSet.of((field("a"),))
    assert a.intersection(b) == b and a.union(b) == a


# ---------------------------------------------------------------- merge, compare, remove


def test_merge_follows_the_list_types():
    live = {"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "1"}],
                     "tolerations": [{"key": "x"}], "nodeSelector": {"zone": "a", "disk": "ssd"}},
            "metadata": {"labels": {"app": "web"}}}
    applied = {"spec": {"containers": [{"name": "c", "image": "2"}, {"name": "a", "image": "2"}],
                        "tolerations": [{"key": "y"}], "nodeSelector": {"zone": "b"}},
               "metadata": {"labels": {"tier": "front"}}}
    out = merge(live, applied, POD_TYPE)
    # containers merge by name, the applied order first; the live-only item stays
    assert out["spec"]["containers"] == [{"name": "c", "image": "2"}, {"name": "a", "image": "2"},
                                         {"name": "b", "image": "1"}]
    assert out["spec"]["tolerations"] == [{"key": "y"}]  # atomic: replaced
    assert out["spec"]["nodeSelector"] == {"zone": "b"}  # +mapType=atomic: replaced
    assert out["metadata"]["labels"] == {"app": "web", "tier": "front"}  # granular map: merged
    assert live["spec"]["containers"][0]["image"] == "1"  # never mutated


def test_merge_keeps_an_item_the_applied_list_leaves_out_where_it_was():
    t = POD_TYPE.of("spec")
    assert isinstance(t, schema.MapType)
    live = {"containers": [{"name": "a"}, {"name": "x"}, {"name": "b"}]}
    out = merge(live, {"containers": [{"name": "b"}, {"name": "a"}]}, t)
    assert [c["name"] for c in out["containers"]] == ["x", "b", "a"]


def test_compare_finds_added_modified_removed_and_the_containers_that_appear():
    old = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c1", "image": "1"}]}}
    new = {"metadata": {}, "spec": {"containers": [{"name": "c1", "image": "2"}, {"name": "c2", "image": "1"}]}}
    c = compare(old, new, POD_TYPE)
    c2 = (field("spec"), field("containers"), key({"name": "c2"}))
    assert c.added == FieldSet.of(c2, (*c2, field("name")), (*c2, field("image")))
    assert c.modified == FieldSet.of((field("spec"), field("containers"), key({"name": "c1"}), field("image")))
    assert c.removed == FieldSet.of((field("metadata"), field("labels")), (field("metadata"), field("labels"),
                                                                          field("app")))
    assert compare(new, new, POD_TYPE).same()


def test_remove_items_takes_out_members_and_empties_become_null():
    doc = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c1", "image": "1"},
                                                                          {"name": "c2", "image": "1"}]}}
    gone = FieldSet.of((field("metadata"), field("labels"), field("app")),
                       (field("spec"), field("containers"), key({"name": "c2"})))
    out = remove_items(doc, gone, POD_TYPE)
    assert out == {"metadata": {"labels": None}, "spec": {"containers": [{"name": "c1", "image": "1"}]}}
    assert merge(ABSENT, {"a": 1}, POD_TYPE) == {"a": 1}


# ---------------------------------------------------------------- managers


def test_manager_names():
    assert manager_from_user_agent("kubectl/v1.32.4 (linux/amd64) kubernetes/e6c6e9c") == "kubectl"
    assert manager_from_user_agent("OpenAPI-Generator/33.1.0/python") == "OpenAPI-Generator"
    assert manager_from_user_agent("") == ""
    assert manager_from_user_agent("a\tb/1") == "ab"  # unprintable characters dropped
    assert manager_from_user_agent("x" * 200 + "/1") == "x" * 128
    assert manager_from_user_agent("é" * 100) == "é" * 64  # 128 bytes, not characters
    assert str(validate_manager("x" * 129)[0]) == "fieldManager: Too long: may not be more than 128 bytes"
    assert validate_manager("kubectl") == []


def _created(fm: FieldManager, pod: core_pb2.Pod, manager: str = "kubectl-create") -> core_pb2.Pod:
    obj = strategy.copy(pod)
    requested = strategy.copy(pod)
    strategy.prepare_for_create(POD, obj)
    obj.metadata.resource_version = "7"
    fm.created(POD, requested, obj, Manager(manager), strategy.defaulted_request)
    return obj


def _apply(fm: FieldManager, live: core_pb2.Pod, config: dict[str, Any], manager: str,
           force: bool = False) -> core_pb2.Pod:
    def prepare(new: core_pb2.Pod) -> core_pb2.Pod:
        new.metadata.resource_version = live.metadata.resource_version
        return strategy_for_update(POD, "")(new, live)
    return fm.apply(POD, live, config, Manager(manager), force, prepare)


def _config(image: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": labels},
            "spec": {"containers": [{"name": "c1", "image": image}]}}


def test_a_create_is_an_update_that_owns_the_request_and_its_defaults_not_admissions():
    fm = FieldManager(now=lambda: "2026-01-01T00:00:00Z")
    pod = _created(fm, MakePod().name("web").label("app", "web").obj())
    [entry] = pod.metadata.managed_fields
    assert (entry.manager, entry.operation, entry.api_version, entry.fields_type, entry.time) == (
        "kubectl-create", "Update", "v1", "FieldsV1", "2026-01-01T00:00:00Z")
    owned = json.loads(entry.fields_v1)
    assert owned["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert "f:dnsPolicy" in owned["f:spec"] and "f:restartPolicy" in owned["f:spec"]  # the decoder's defaults
    assert "f:tolerations" not in owned["f:spec"]  # DefaultTolerationSeconds is admission
    assert "f:status" not in owned  # the strategy's
    assert list(owned["f:spec"]["f:containers"]) == ['k:{"name":"c1"}']  # the list Go had: no "."
    # Kubernetes JSON prints fieldsV1 as the object it is, and reads it back
    doc = jsonconv.to_dict(pod)
    assert doc["metadata"]["managedFields"][0]["fieldsV1"] == owned
    assert jsonconv.from_dict(core_pb2.Pod, doc).metadata.managed_fields[0].fields_v1 == entry.fields_v1


def test_two_appliers_setting_one_field_differently_conflict():
    fm = FieldManager()
    live = _created(fm, MakePod().name("web").obj())
    live = _apply(fm, live, _config("nginx:1"), "a", force=True)  # a takes the image from its creator
    with pytest.raises(errors.ApplyConflict) as raised:
        _apply(fm, live, _config("nginx:2"), "b")
    assert raised.value.message == 'Apply failed with 1 conflict: conflict with "a": .spec.containers[name="c1"].image'
    assert raised.value.causes == [('conflict with "a"', '.spec.containers[name="c1"].image')]
    assert raised.value.http == 409


def test_a_conflict_with_an_update_names_its_api_version_and_several_are_grouped():
    fm = FieldManager()
    live = _created(fm, MakePod().name("web").label("app", "web").obj())
    with pytest.raises(errors.ApplyConflict) as raised:
        _apply(fm, live, _config("nginx:2", app="other"), "b")
    assert raised.value.message == (
        'Apply failed with 2 conflicts: conflicts with "kubectl-create" using v1:\n'
        "- .metadata.labels.app\n"
        '- .spec.containers[name="c1"].image')


def test_force_takes_the_field_and_the_same_value_is_shared():
    fm = FieldManager()
    live = _apply(fm, _created(fm, MakePod().name("web").obj()), _config("nginx:1"), "a", force=True)
    moved = _apply(fm, live, _config("nginx:2"), "b", force=True)
    assert moved.spec.containers[0].image == "nginx:2"
    image = {"f:image": {}}
    assert fields_v1(moved, "b")["f:spec"]["f:containers"]['k:{"name":"c1"}'].items() >= image.items()
    assert "f:image" not in fields_v1(moved, "a")["f:spec"]["f:containers"]['k:{"name":"c1"}']
    # a applying the value b set: no conflict, both own it
    shared = _apply(fm, moved, _config("nginx:2"), "a")
    assert "f:image" in fields_v1(shared, "a")["f:spec"]["f:containers"]['k:{"name":"c1"}']
    assert "f:image" in fields_v1(shared, "b")["f:spec"]["f:containers"]['k:{"name":"c1"}']
    assert [m for m, op, _ in entries(shared) if op == "Apply"] == ["a", "b"]


def test_a_field_the_applier_drops_goes_unless_another_manager_owns_it():
    fm = FieldManager()
    live = _apply(fm, _created(fm, MakePod().name("web").obj()), _config("nginx:1", team="x", tier="web"), "a",
                  force=True)
    live = _apply(fm, live, _config("nginx:1", tier="web"), "b")  # b co-owns tier
    dropped = _apply(fm, live, _config("nginx:1"), "a")
    assert dict(dropped.metadata.labels) == {"tier": "web"}  # team was a's alone; b still applies tier


def test_an_update_takes_the_fields_it_changes_and_a_no_op_moves_nothing():
    fm = FieldManager(now=lambda: "2026-01-01T00:00:00Z")
    live = _apply(fm, _created(fm, MakePod().name("web").obj()), _config("nginx:1"), "a", force=True)
    edited = strategy.copy(live)
    edited.spec.containers[0].image = "nginx:3"
    fm.update(POD, live, edited, Manager("kubectl-edit"))
    assert '"f:image"' in next(e.fields_v1 for e in edited.metadata.managed_fields if e.manager == "kubectl-edit")
    assert "f:image" not in fields_v1(edited, "a")["f:spec"]["f:containers"]['k:{"name":"c1"}']
    again = strategy.copy(edited)
    fm.update(POD, edited, again, Manager("someone"))
    assert again.metadata.managed_fields == edited.metadata.managed_fields  # nothing changed: nothing moves
    # a status write is recorded as its subresource's
    status = strategy.copy(edited)
    status.status.phase = "Running"
    fm.update(POD, edited, status, Manager("system:node:node-1", "status"))
    assert ("system:node:node-1", "Update", "status") in entries(status)
    assert fields_v1(status, "system:node:node-1") == {"f:status": {"f:phase": {}}}


def test_a_request_clears_managed_fields_with_one_empty_entry():
    fm = FieldManager()
    live = _created(fm, MakePod().name("web").obj())
    cleared = strategy.copy(live)
    del cleared.metadata.managed_fields[:]
    cleared.metadata.managed_fields.add()
    fm.update(POD, live, cleared, Manager("kubectl-patch"))
    assert list(cleared.metadata.managed_fields) == []


def test_bad_managed_fields_are_invalid():
    fm = FieldManager()
    live = _created(fm, MakePod().name("web").obj())
    bad = strategy.copy(live)
    bad.metadata.managed_fields[0].operation = "Patch"
    with pytest.raises(errors.Invalid, match="metadata.managedFields\\[0\\].operation: Invalid value: \"Patch\": "
                                             "must be `Apply` or `Update`"):
        fm.update(POD, live, bad, Manager("x"))


def test_an_apply_to_the_object_never_owns_its_status():
    fm = FieldManager()
    live = _created(fm, MakePod().name("web").obj())
    config = {**_config("nginx:1"), "status": {"phase": "Failed"}}
    applied = _apply(fm, live, config, "a", force=True)
    assert applied.status.phase == "Pending" and "f:status" not in fields_v1(applied, "a")


def test_more_than_ten_update_managers_fold_the_oldest_into_ancient_changes():
    clock = iter(f"2026-01-01T00:00:{i:02d}Z" for i in range(60))
    fm = FieldManager(now=lambda: next(clock))
    node = core_pb2.Node()
    node.metadata.name = "n"
    for i in range(12):
        new = strategy.copy(node)
        new.metadata.labels[f"l{i}"] = "x"
        fm.update(NODE, node, new, Manager(f"m{i}"))
        node = new
    managers = [m for m, _, _ in entries(node)]
    assert len(managers) == 10 and "ancient-changes" in managers and "m0" not in managers and "m11" in managers


def test_a_deployment_applied_twice_by_two_managers():
    fm = FieldManager()
    d = MakeDeployment().name("web").replicas(2).obj()
    obj = strategy.copy(d)
    strategy.prepare_for_create(DEPLOYMENT, obj)
    obj.metadata.resource_version = "3"
    config = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c1", "image": "nginx:1"}]}}}}

    def apply(live: Any, cfg: dict[str, Any], manager: str, force: bool = False) -> Any:
        return fm.apply(DEPLOYMENT, live, cfg, Manager(manager), force,
                        lambda new: strategy_for_update(DEPLOYMENT, "")(new, live))

    first = apply(obj, config, "a")
    assert first.spec.replicas == 3 and first.metadata.generation == 2
    second = json.loads(json.dumps(config))
    second["spec"]["replicas"] = 5
    with pytest.raises(errors.ApplyConflict, match=r'conflict with "a": \.spec\.replicas$'):
        apply(first, second, "b")
    assert apply(first, second, "b", force=True).spec.replicas == 5


def _fields_v1_uncached(pod: core_pb2.Pod, manager: str = "kubectl-create") -> str:
    manager_module._CREATED.clear()
    return _created(FieldManager(), pod, manager).metadata.managed_fields[0].fields_v1


def test_creates_of_one_shape_share_what_they_own_and_other_shapes_do_not():
    """The create memo: names, label and annotation values differ and the owned fields are what a
    fresh computation gives; a new label key, a second container, another manager are new shapes."""
    fm = FieldManager(now=lambda: "2026-01-01T00:00:00Z")
    manager_module._CREATED.clear()

    def pod(i: int, *, labels: dict[str, str] | None = None, containers: int = 1) -> core_pb2.Pod:
        b = MakePod().name(f"web-{i}").labels(labels or {"app": f"v{i}"}).annotation("sent", str(i))
        for c in range(1, containers):
            b = b.container(f"side-{c}", "busybox")
        return b.obj()

    first = _created(fm, pod(1)).metadata.managed_fields[0]
    assert len(manager_module._CREATED) == 1
    second = _created(fm, pod(2)).metadata.managed_fields[0]
    assert len(manager_module._CREATED) == 1, "a pod of the same shape is a hit"
    assert second.fields_v1 == first.fields_v1 == _fields_v1_uncached(pod(2))
    assert second.time == "2026-01-01T00:00:00Z" and second.manager == "kubectl-create"

    fm = FieldManager()
    for variant, fragment in ((pod(3, labels={"app": "x", "tier": "web"}), '"f:tier"'),
                              (pod(4, containers=2), 'k:{\\"name\\":\\"side-1\\"}')):
        got = _created(fm, variant).metadata.managed_fields[0].fields_v1
        assert fragment in got and fragment not in first.fields_v1
        assert got == _fields_v1_uncached(variant)
    other = _created(FieldManager(), pod(5), "helm").metadata.managed_fields[0]
    assert (other.manager, other.fields_v1) == ("helm", first.fields_v1)


def test_a_union_that_adds_nothing_is_the_set_itself_and_text_follows_inserts():
    """What lets an update reuse an entry's fieldsV1 text: the union that adds nothing returns the
    set itself; a node's kept text is dropped when a path is inserted below it."""
    a = FieldSet.of((field("spec"), field("nodeName")), (field("metadata"), field("labels"), field("app")))
    assert a.union(FieldSet.of((field("spec"), field("nodeName")))) is a
    grown = a.union(FieldSet.of((field("spec"), field("priority"))))
    assert grown is not a and grown.has((field("spec"), field("priority"))) and not a.has((field("spec"),
                                                                                             field("priority")))
    before = a.to_json()
    assert before == '{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:nodeName":{}}}'
    a.insert((field("metadata"), field("labels"), field("tier")))
    assert a.to_json() == json.dumps(a.to_fields_v1(), separators=(",", ":"))
    assert '"f:tier":{}' in a.to_json()
    b = FieldSet.of((field("spec"),), (field("spec"), field("nodeName")))
    assert b.to_json() == '{"f:spec":{".":{},"f:nodeName":{}}}'
    # Elements' texts are remembered, but True and 1 (one dict key to Python) stay two elements.
    assert FieldSet.of((field("s"), value(1))).to_json() == '{"f:s":{"v:1":{}}}'
    assert FieldSet.of((field("s"), value(True))).to_json() == '{"f:s":{"v:true":{}}}'
    assert FieldSet.of((field("s"), key({"a": 1}))).to_json() == '{"f:s":{"k:{\\"a\\":1}":{}}}'
    assert FieldSet.of((field("s"), key({"a": True}))).to_json() == '{"f:s":{"k:{\\"a\\":true}":{}}}'


def _made_fields(kind, obj, manager: str = "m", fm: FieldManager | None = None) -> str:
    stored, requested = strategy.copy(obj), strategy.copy(obj)
    strategy.prepare_for_create(kind, stored)
    (fm or FieldManager()).created(kind, requested, stored, Manager(manager), strategy.defaulted_request)
    return stored.metadata.managed_fields[0].fields_v1


def _uncached_fields(kind, obj, manager: str = "m") -> str:
    manager_module._CREATED.clear()
    return _made_fields(kind, obj, manager)


def test_the_create_shape_blanks_values_but_not_what_a_default_or_a_list_key_depends_on():
    """Events of one reason with other messages, objects and counts share a shape; a
    Deployment's strategy type, which its defaults follow, and a container's name, its list key,
    do not; every cached answer is the uncached one."""
    fm = FieldManager()
    manager_module._CREATED.clear()

    def event(i: int, reason: str) -> core_pb2.Event:
        ev = core_pb2.Event()
        ev.metadata.name, ev.metadata.namespace = f"web-{i}.{i:x}", "default"
        ev.involved_object.kind, ev.involved_object.name, ev.involved_object.uid = "Pod", f"web-{i}", f"u{i}"
        ev.reason, ev.message, ev.type, ev.count = reason, f"Successfully assigned default/web-{i} to n{i}", \
            "Normal", i + 1
        return ev

    first = _made_fields(EVENT, event(1, "Scheduled"), fm=fm)
    for i in range(2, 6):
        assert _made_fields(EVENT, event(i, "Preempted"), fm=fm) == first
    assert len(manager_module._CREATED) == 1
    assert first == _uncached_fields(EVENT, event(9, "Scheduled"))

    def deployment(name: str, strategy_type: str):
        d = MakeDeployment().name(name).obj()
        d.spec.ClearField("strategy")
        d.spec.strategy.type = strategy_type  # defaulting adds rollingUpdate to a RollingUpdate one only
        return d

    manager_module._CREATED.clear()
    rolling = _made_fields(DEPLOYMENT, deployment("a", "RollingUpdate"), fm=fm)
    recreate = _made_fields(DEPLOYMENT, deployment("b", "Recreate"), fm=fm)
    assert len(manager_module._CREATED) == 2 and rolling != recreate
    assert recreate == _uncached_fields(DEPLOYMENT, deployment("c", "Recreate"))
    assert "f:rollingUpdate" in rolling and "f:rollingUpdate" not in recreate

    manager_module._CREATED.clear()
    one = _made_fields(POD, MakePod().name("p").container("a", "busybox").obj(), fm=fm)
    other = _made_fields(POD, MakePod().name("q").container("b", "busybox").obj(), fm=fm)
    assert one != other and other == _uncached_fields(POD, MakePod().name("r").container("b", "busybox").obj())
