"""machinery.schema: the proto options are the one source of the merge keys, list types and map
keys; strategic merge patch, the OpenAPI documents and server-side apply agree on every list of
every kind."""

from __future__ import annotations

from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.descriptor import Descriptor

from apiserver.fieldmanager import schema as ssa
from apiserver.rest.openapi import openapi_v2
from machinery import patch, schema
from machinery.api import options_pb2
from machinery.kinds import KINDS, Kind

_REFS = "#/definitions/"


def _definition(document: dict[str, Any], kind: Kind[Any, Any]) -> dict[str, Any]:
    group, _, version = kind.api_version.rpartition("/")
    for definition in document["definitions"].values():
        if {"group": group, "version": version, "kind": kind.name} in definition.get(
                "x-kubernetes-group-version-kind", ()):
            return dict(definition)
    raise AssertionError(f"no definition for {kind.name}")


def _deref(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while True:
        if "$ref" in node:
            node = document["definitions"][node["$ref"].removeprefix(_REFS)]
        elif len(node.get("allOf", ())) == 1 and "properties" not in node:
            (node,) = node["allOf"]
        else:
            return node


def _openapi_at(document: dict[str, Any], root: dict[str, Any], path: str) -> dict[str, Any]:
    """The OpenAPI schema of the field at ``path`` (its own node, not its type's)."""
    node = root
    for part in path.split("."):
        node = _deref(document, node)["properties"][part.removesuffix("[]")]
        if part.endswith("[]"):
            node = _deref(document, node)["items"]
    return node


def _ssa_at(root: ssa.MapType, path: str) -> ssa.Atom:
    """The field manager's type of the value at ``path`` (an element's for a ``[]`` step)."""
    atom: ssa.Atom = root
    for part in path.split("."):
        assert isinstance(atom, ssa.MapType), path
        atom = atom.of(part.removesuffix("[]"))
        if part.endswith("[]"):
            assert isinstance(atom, ssa.ListType), path
            atom = atom.element
    return atom


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_list_of_a_kind_says_how_it_merges(kind: Kind[Any, Any]) -> None:
    assert schema.lists_without_a_type(kind.message.DESCRIPTOR) == []


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_strategic_merge_openapi_and_server_side_apply_agree_on_every_list(kind: Kind[Any, Any]) -> None:
    """The three views of each list, each against the proto options: the strategic merge patch
    table (its merge key), the OpenAPI document (its x-kubernetes-* extensions) and the field
    manager's type (its relationship and keys)."""
    document = openapi_v2()
    root = _definition(document, kind)
    ssa_root = ssa.of_kind(kind)
    lists = [f for f in schema.fields(kind.message.DESCRIPTOR) if f.is_list]
    assert lists, kind.name
    for f in lists:
        options = schema.field_schema(f.fd)
        smp = patch.merge_strategy(kind.name, f.path)
        assert (smp.merge_key if smp else None) == (options.patch_merge_key if options.merges else None), f.path
        if f.within_kept_as_given:
            continue  # kept as given: only strategic merge patch looks inside (merge_as)
        node = _openapi_at(document, root, f.path)
        assert node.get("x-kubernetes-patch-strategy", "") == options.patch_strategy, f.path
        assert node.get("x-kubernetes-patch-merge-key", "") == options.patch_merge_key, f.path
        assert node.get("x-kubernetes-list-type", "") == options.list_type, f.path
        assert tuple(node.get("x-kubernetes-list-map-keys", ())) == options.list_map_keys, f.path
        container = _ssa_at(ssa_root, f.path.rpartition(".")[0]) if "." in f.path else ssa_root
        assert isinstance(container, ssa.MapType)
        atom = container.of(f.fd.json_name)
        assert isinstance(atom, ssa.ListType), f.path
        if options.list_type:
            assert atom.relationship == options.list_type, f.path
            assert atom.keys == options.list_map_keys, f.path
        elif options.merges:  # no list type: server-side apply merges by the patch merge key
            assert atom.relationship == (schema.MAP if options.patch_merge_key else schema.SET), f.path
            assert atom.keys == ((options.patch_merge_key,) if options.patch_merge_key else ()), f.path
        else:
            assert atom.relationship == schema.ATOMIC, f.path


def test_the_tables_hold_kubernetes_markers() -> None:
    """Spot checks against Kubernetes' Go types (k8s.io/api core/v1, meta/v1)."""
    pod = patch.MERGE_LISTS["Pod"]
    assert pod["spec.containers"].merge_key == "name"
    assert pod["spec.containers[].ports"].merge_key == "containerPort"
    assert pod["spec.ephemeralContainers[].env"].merge_key == "name"  # merge_as Container
    assert pod["spec.volumes"] == schema.ListStrategy("name", retain_keys=True)
    assert pod["spec.volumes[].ephemeral.volumeClaimTemplate.metadata.ownerReferences"].merge_key == "uid"
    assert pod["metadata.finalizers"].merge_key == ""
    assert "spec.tolerations" not in pod
    ports = schema.field_schema(_field("kplane.v1.Container", "ports"))
    assert (ports.list_type, ports.list_map_keys) == ("map", ("containerPort", "protocol"))
    protocol = schema.field_schema(_field("kplane.v1.ContainerPort", "protocol"))
    assert (protocol.has_default, protocol.default) == (True, "TCP")
    assert schema.required_fields(_message("kplane.v1.Container")) == ("name",)
    assert schema.struct_type(_message("kplane.v1.LabelSelector")) == "atomic"
    assert schema.field_schema(_field("kplane.v1.PodSpec", "node_selector")).map_type == "atomic"


def _message(name: str) -> Descriptor:
    found: Descriptor = descriptor_pool.Default().FindMessageTypeByName(name)
    return found


def _field(message: str, name: str) -> Any:
    return _message(message).fields_by_name[name]


def _bad_field(**options: Any) -> Any:
    """A repeated string field in a throwaway file, with the given kplane.v1 options set."""
    pool = descriptor_pool.DescriptorPool()
    for file in (descriptor_pb2.DescriptorProto.DESCRIPTOR.file, options_pb2.DESCRIPTOR):
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pool.Add(proto)
    proto = descriptor_pb2.FileDescriptorProto(name="bad.proto", package="bad", syntax="proto3",
                                               dependency=["kplane/v1/options.proto"])
    message = proto.message_type.add(name="Bad")
    field = message.field.add(name="items", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                               label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED, json_name="items")
    for name, value in options.items():
        extension = getattr(options_pb2, name)
        if isinstance(value, list):
            field.options.Extensions[extension].extend(value)
        else:
            field.options.Extensions[extension] = value
    pool.Add(proto)
    return pool.FindMessageTypeByName("bad.Bad").fields_by_name["items"]


@pytest.mark.parametrize("options, message", [
    ({"list_type": "bag"}, "list_type 'bag' is none of atomic, set, map"),
    ({"list_type": "map"}, "list_map_keys are given exactly when list_type is map"),
    ({"list_type": "set", "list_map_keys": ["name"]}, "list_map_keys are given exactly"),
    ({"patch_strategy": "union"}, "patch_strategy 'union' is none of"),
    ({"patch_merge_key": "name"}, "patch_merge_key needs a merge patch strategy"),
    ({"list_type": "map", "list_map_keys": ["name"], "patch_strategy": "merge", "patch_merge_key": "id"},
     "the patch merge key 'id' is not one of the list map keys"),
    ({"merge_as": "kplane.v1.Container"}, "merge_as is for fields kept as given"),
], ids=lambda v: v if isinstance(v, str) else None)
def test_contradicting_options_are_refused(options: dict[str, Any], message: str) -> None:
    fd = _bad_field(**options)
    with pytest.raises(schema.SchemaOptionError, match=message):
        schema.field_schema(fd)


def test_consistent_options_are_read() -> None:
    fd = _bad_field(list_type="set", patch_strategy="merge")
    assert schema.field_schema(fd).merges
    assert schema.field_schema(fd).list_type == "set"
