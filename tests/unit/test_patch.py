"""Tests for machinery.patch: the three Kubernetes patch types.

Strategic merge patch cases are ported from apimachinery's strategicpatch/patch_test.go
(applying a patch to the "current" object must give "result"); they run against a test kind
``MergeItem`` with the same fields as the Go test struct. Then come kplane's real kinds, the
appendix examples of RFC 7386 (merge patch) and RFC 6902 (JSON patch), errors, and dispatch.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from machinery.patch import (
    MERGE_LISTS,
    ListStrategy,
    PatchError,
    apply_patch,
    json_merge_patch,
    json_patch,
    merge_strategy,
    strategic_merge_patch,
)


def Y(text: str):
    """YAML is how the Go tests write their cases; it keeps these readable too."""
    return yaml.safe_load(text)


# The Go test struct MergeItem: mergingList (merge on name), nonMergingList, mergingIntList
# (primitive merge), nonMergingIntList, simpleMap, retainKeysMap, retainKeysMergingList.
_MERGE_ITEM = {
    "mergingList": ListStrategy("name"),
    "mergingList[].mergingList": ListStrategy("name"),
    "mergingList[].mergingIntList": ListStrategy(""),
    "mergingIntList": ListStrategy(""),
    "retainKeysMap.mergingList": ListStrategy("name"),
    "retainKeysMap.mergingIntList": ListStrategy(""),
    "retainKeysMergingList": ListStrategy("name", retain_keys=True),
}


@pytest.fixture
def merge_item(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setitem(MERGE_LISTS, "MergeItem", _MERGE_ITEM)
    return "MergeItem"


# ---------------------------------------------------------------------------------------------
# Strategic merge patch: semantics, ported from patch_test.go.
# ---------------------------------------------------------------------------------------------

SMP_CASES = [
    pytest.param("{}", "{name: 1, value: 1}", "{name: 1, value: 1}", id="nil original"),
    pytest.param("{name: 1}", "{}", "{name: 1}", id="nil patch"),
    pytest.param("{name: 1, other: a}", "{value: 1}", "{name: 1, value: 1, other: a}",
                 id="add field to map"),
    pytest.param("{name: 1, other: a}", "{name: null, value: 1}", "{value: 1, other: a}",
                 id="add field and delete field from map"),
    pytest.param("{name: 1, value: 1, other: a}", "{name: null, value: null}", "{other: a}",
                 id="delete all fields from map"),
    pytest.param("{name: 2, other: a}", "{name: 1, value: 1, other: null}", "{name: 1, value: 1}",
                 id="defined null values remove fields"),
    pytest.param("{simpleMap: {key1: 1, key2: 1, other: a}}", "{simpleMap: {key2: null}}",
                 "{simpleMap: {key1: 1, other: a}}", id="delete field from nested map"),
    pytest.param("{simpleMap: {key1: 1, key2: 1}}", "{simpleMap: {$patch: delete}}",
                 "{simpleMap: {}}", id="delete map from nested map"),
    pytest.param("{name: 1, value: 1}", "{$patch: replace}", "{}", id="delete all keys from map"),
    pytest.param("{name: 1, value: 1}", "{other: a, $patch: replace}", "{other: a}",
                 id="add key and delete all keys from map"),
    pytest.param("{simpleMap: {key1: 1}, name: x}", "{simpleMap: {key2: 2, $patch: replace}}",
                 "{simpleMap: {key2: 2}, name: x}", id="replace directive in nested map"),
    pytest.param("{nonMergingIntList: [1, 4]}", "{nonMergingIntList: [2, 3]}",
                 "{nonMergingIntList: [2, 3]}", id="replace list of scalars"),
    pytest.param("{mergingIntList: [1, 2]}", "{mergingIntList: [2, 3]}",
                 "{mergingIntList: [1, 2, 3]}", id="unique scalars when merging lists"),
    # Without $setElementOrder a new scalar lands before the remaining server-only ones.
    pytest.param("{mergingIntList: [1, 2, 4]}", "{mergingIntList: [3]}",
                 "{mergingIntList: [3, 1, 2, 4]}", id="merge lists of scalars"),
    pytest.param("{mergingIntList: [1, 2, 3]}", "{mergingIntList: [3, 1, 2]}",
                 "{mergingIntList: [3, 1, 2]}", id="preserve the order from the patch in an int list"),
    pytest.param("{mergingIntList: [1, 2, 3]}", "{mergingIntList: [3, 1]}",
                 "{mergingIntList: [2, 3, 1]}", id="preserve the order from the patch in an int list 2"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]}",
        "{mergingList: [{name: 3, value: c}, {name: 1, value: a}, {name: 2, other: x}]}",
        "{mergingList: [{name: 3, value: c}, {name: 1, value: a}, {name: 2, value: b, other: x}]}",
        id="preserve the order from the patch in a merging list"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 2, value: b}, {name: 3}]}",
        "{mergingList: [{name: 3, value: c}, {name: 1, value: a}]}",
        "{mergingList: [{name: 2, value: b}, {name: 3, value: c}, {name: 1, value: a}]}",
        id="preserve the order from the patch in a merging list 2"),
    pytest.param(
        "{mergingList: [{name: 1, other: a}, {name: 2, value: 2, other: b}]}",
        "{mergingList: [{name: 1, value: 1}]}",
        "{mergingList: [{name: 1, other: a, value: 1}, {name: 2, value: 2, other: b}]}",
        id="add field to map in merging list"),
    pytest.param(
        "{mergingList: [{name: 1, value: 1, other: a}, {name: 2, value: 2}]}",
        "{mergingList: [{name: 1, value: null}]}",
        "{mergingList: [{name: 1, other: a}, {name: 2, value: 2}]}",
        id="delete field from map in merging list"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 2, other: b}]}",
        "{mergingList: [{name: 1, $patch: delete}]}",
        "{mergingList: [{name: 2, other: b}]}", id="delete map from merging list"),
    pytest.param(
        "{mergingList: [{name: 2, other: b}]}",
        "{mergingList: [{name: 1, $patch: delete}]}",
        "{mergingList: [{name: 2, other: b}]}", id="delete missing map from merging list"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 2}]}",
        "{mergingList: [{name: 1, $patch: delete}, {name: 2, $patch: delete}]}",
        "{mergingList: []}", id="delete all maps from merging list"),
    pytest.param("{mergingList: [{name: 1}, {name: 2}]}", "{mergingList: [{$patch: replace}]}",
                 "{mergingList: []}", id="delete all items from merging list"),
    pytest.param(
        "{mergingList: [{name: 1, value: a}, {name: 2}]}",
        "{mergingList: [{$patch: replace}, {name: 3, value: c}]}",
        "{mergingList: [{name: 3, value: c}]}", id="replace directive in merging list"),
    pytest.param("{mergingList: []}", "{mergingList: []}", "{mergingList: []}",
                 id="merge empty merging lists"),
    pytest.param("{mergingList: [{name: 1}], name: x}", "{mergingList: null}", "{name: x}",
                 id="null deletes a merging list"),
    # A delete directive removes one matching element, so duplicates can be trimmed.
    pytest.param(
        "{mergingList: [{name: 1}, {name: 1}, {name: 2, value: a}, {name: 3}, {name: 3}]}",
        "{mergingList: [{name: 1, $patch: delete}, {name: 3, $patch: delete}]}",
        "{mergingList: [{name: 1}, {name: 2, value: a}, {name: 3}]}",
        id="de-duplicate entries in a merging list"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 1}, {name: 2, value: a}, {name: 3}, {name: 3}]}",
        """{mergingList: [{name: 1, $patch: delete}, {name: 1, $patch: delete},
                          {name: 3, $patch: delete}, {name: 3, $patch: delete}]}""",
        "{mergingList: [{name: 2, value: a}]}", id="delete all duplicate entries in a merging list"),
    pytest.param(
        "{mergingList: [{name: 1, other: a, nonMergingList: [{name: 1}, {name: 2, value: 2}]}, "
        "{name: 2, other: b}]}",
        "{mergingList: [{name: 1, nonMergingList: [{name: 1, value: 1}]}]}",
        "{mergingList: [{name: 1, other: a, nonMergingList: [{name: 1, value: 1}]}, "
        "{name: 2, other: b}]}",
        id="replace non merging list nested in merging list"),
    pytest.param(
        "{mergingList: [{name: 1, other: a, mergingList: [{name: 1}, {name: 2, value: 2}]}, "
        "{name: 2, other: b}]}",
        """{$setElementOrder/mergingList: [{name: 1}, {name: 2}],
            mergingList: [{$setElementOrder/mergingList: [{name: 1}, {name: 2}], name: 1,
                           mergingList: [{name: 1, value: 1}]}]}""",
        "{mergingList: [{name: 1, other: a, mergingList: [{name: 1, value: 1}, "
        "{name: 2, value: 2}]}, {name: 2, other: b}]}",
        id="add field to map in merging list nested in merging list"),
    # $setElementOrder cases (the raw test cases, applied to "current").
    pytest.param(
        "{mergingList: [{name: 1, other: a}, {name: 2, value: 2, other: b}]}",
        """{$setElementOrder/mergingList: [{name: 4}, {name: 1}, {name: 2}, {name: 3}],
            mergingList: [{name: 4, value: 4}, {name: 3, value: 3}]}""",
        """{mergingList: [{name: 4, value: 4}, {name: 1, other: a},
                          {name: 2, value: 2, other: b}, {name: 3, value: 3}]}""",
        id="merge lists of maps with setElementOrder"),
    pytest.param(
        "{mergingList: [{name: 1, other: a}, {name: 3, value: 2, other: b}]}",
        """{$setElementOrder/mergingList: [{name: 1}, {name: 2}],
            mergingList: [{name: 1, value: 1}, {name: 2, value: 2}]}""",
        """{mergingList: [{name: 1, other: a, value: 1}, {name: 2, value: 2},
                          {name: 3, value: 2, other: b}]}""",
        id="add field to map in merging list with conflict"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 2, other: b}, {name: 4, other: c}]}",
        """{$setElementOrder/mergingList: [{name: 2}, {name: 3}],
            mergingList: [{name: 3}, {name: 1, $patch: delete}]}""",
        "{mergingList: [{name: 2, other: b}, {name: 4, other: c}, {name: 3}]}",
        id="add map and delete map from merging list"),
    pytest.param(
        "{mergingList: [{name: 1, other: a}, {name: 4, other: c}]}",
        """{$setElementOrder/mergingList: [{name: 2}, {name: 3}],
            mergingList: [{name: 2}, {name: 3}, {name: 1, $patch: delete}]}""",
        "{mergingList: [{name: 4, other: c}, {name: 2}, {name: 3}]}",
        id="add map and delete map from merging list with conflict"),
    pytest.param(
        "{mergingList: [{name: 3, other: a}]}",
        """{$setElementOrder/mergingList: [{name: 2}],
            mergingList: [{name: 2}, {name: 1, $patch: delete}]}""",
        "{mergingList: [{name: 2}, {name: 3, other: a}]}",
        id="delete missing map from merging list with conflict"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 1}]}",
        "{$setElementOrder/mergingList: [{name: 1}], mergingList: [{$patch: delete, name: 1}]}",
        "{mergingList: [{name: 1}]}", id="de-duplicate field in merging list"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 3}]}",
        """{$setElementOrder/mergingList: [{name: 3}, {name: 2}, {name: 1}],
            mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}""",
        "{mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}",
        id="setElementOrder contains item not in the list"),
    pytest.param("{name: a}",
                 """{$setElementOrder/mergingList: [{name: 2}, {name: 1}],
                     mergingList: [{name: 2}, {name: 3, $patch: delete}, {name: 1}]}""",
                 "{name: a, mergingList: [{name: 2}, {name: 1}]}",
                 id="setElementOrder for a list the target lacks"),
    pytest.param("{mergingIntList: [1, 3]}", "{$setElementOrder/mergingIntList: [3, 2, 1]}",
                 "{mergingIntList: [3, 1]}", id="setElementOrder reorders an int list"),
    pytest.param("{mergingIntList: [1, 2, 3, 4]}",
                 "{$setElementOrder/mergingIntList: [1, 2], $deleteFromPrimitiveList/mergingIntList: [3]}",
                 "{mergingIntList: [1, 2, 4]}", id="delete items in lists of scalars"),
    pytest.param("{mergingIntList: [1, 2, 3, 3, 4]}",
                 "{$setElementOrder/mergingIntList: [1, 2], $deleteFromPrimitiveList/mergingIntList: [3]}",
                 "{mergingIntList: [1, 2, 4]}", id="delete all duplicate items in lists of scalars"),
    pytest.param("{mergingIntList: [1, 2, 3]}",
                 """{$setElementOrder/mergingIntList: [1, 2, 4],
                     $deleteFromPrimitiveList/mergingIntList: [3], mergingIntList: [4]}""",
                 "{mergingIntList: [1, 2, 4]}", id="add and delete items in lists of scalars"),
    pytest.param("{name: a}", "{$deleteFromPrimitiveList/mergingIntList: [3]}", "{name: a}",
                 id="delete from a missing primitive list is a no-op"),
    # $retainKeys.
    pytest.param("{retainKeysMap: {name: foo}}", "{retainKeysMap: {value: bar}}",
                 "{retainKeysMap: {name: foo, value: bar}}",
                 id="retainKeys map can add a field when no retainKeys directive present"),
    pytest.param("{retainKeysMap: {name: foo, value: a}}", "{retainKeysMap: {value: null}}",
                 "{retainKeysMap: {name: foo}}",
                 id="retainKeys map can delete a field when no retainKeys directive present"),
    pytest.param("{retainKeysMap: {name: foo, value: a}}", "{retainKeysMap: {}}",
                 "{retainKeysMap: {name: foo, value: a}}", id="retainKeys map merge an empty map"),
    pytest.param("{retainKeysMap: {name: foo, value: a, other: b}}",
                 "{retainKeysMap: {$retainKeys: [name, value], value: c}}",
                 "{retainKeysMap: {name: foo, value: c}}", id="retainKeys directive clears fields"),
    pytest.param("{retainKeysMergingList: [{name: bar}, {name: foo, value: a, other: x}]}",
                 "{retainKeysMergingList: [{name: foo, $retainKeys: [name, other], other: y}]}",
                 "{retainKeysMergingList: [{name: bar}, {name: foo, other: y}]}",
                 id="retainKeys directive in a merging list element"),
    # kplane resolves directives in content the target lacks (Go copies them verbatim and
    # relies on decoding into a struct to drop them).
    pytest.param("{}",
                 "{mergingList: [{name: 1, simpleMap: {a: null, b: 1}, "
                 "mergingList: [{name: x, $patch: delete}, {name: y}]}]}",
                 "{mergingList: [{name: 1, simpleMap: {b: 1}, mergingList: [{name: y}]}]}",
                 id="directives resolved in new content"),
    # Fields the schema doesn't know: maps merge, lists are replaced.
    pytest.param("{unknownMap: {a: 1, b: 2}, unknownList: [{name: 1, v: 1}]}",
                 "{unknownMap: {b: 3}, unknownList: [{name: 1, w: 2}]}",
                 "{unknownMap: {a: 1, b: 3}, unknownList: [{name: 1, w: 2}]}",
                 id="unknown fields: maps merge, lists replace"),
    pytest.param("{name: {a: 1}}", "{name: [1]}", "{name: [1]}",
                 id="type change of an unknown field replaces"),
]


@pytest.mark.parametrize("original, patch, expected", SMP_CASES)
def test_strategic_merge_patch(merge_item: str, original: str, patch: str, expected: str) -> None:
    assert strategic_merge_patch(Y(original), Y(patch), merge_item) == Y(expected)


SMP_ERRORS = [
    pytest.param("{mergingList: [{name: 1, value: a}]}", "{mergingList: [{value: b}]}",
                 "does not contain declared merge key", id="missing merge key"),
    pytest.param("{mergingList: [{name: 1}]}", "{mergingList: [{$patch: delete, value: b}]}",
                 "does not contain declared merge key", id="delete directive without merge key"),
    pytest.param(
        "{mergingList: [{name: 1}, {name: 3}, {name: 2}]}",
        """{$setElementOrder/mergingList: [{name: 1}, {name: 2}, {name: 3}],
            mergingList: [{name: 3, value: 3}, {name: 1, value: 1}]}""",
        "doesn't match", id="setElementOrder and patch list order differ"),
    pytest.param("{mergingIntList: [1, 3, 2]}",
                 "{$setElementOrder/mergingIntList: [1, 2, 3], mergingIntList: [3, 1]}",
                 "doesn't match", id="setElementOrder and int patch list order differ"),
    pytest.param("{mergingList: [{name: 1}]}", "{mergingList: [{name: 2, $patch: merge}]}",
                 "cannot yet be specified", id="merge directive in a list"),
    pytest.param("{mergingList: [{name: 1}]}", "{mergingList: [{name: 2, $patch: frobnicate}]}",
                 "unknown $patch directive", id="unknown directive in a list"),
    pytest.param("{simpleMap: {a: 1}}", "{simpleMap: {$patch: frobnicate}}",
                 "unknown $patch directive", id="unknown directive in a map"),
    pytest.param("{name: 1}", "{$frobnicate: 1}", "unknown patch directive",
                 id="unknown $ key"),
    pytest.param("{name: 1}", "{$deleteFromPrimitiveList: [1]}", "malformed directive",
                 id="deleteFromPrimitiveList without field"),
    pytest.param("{mergingIntList: [1]}", "{$deleteFromPrimitiveList/mergingIntList: 1}",
                 "must be a list", id="deleteFromPrimitiveList not a list"),
    pytest.param("{mergingList: [{name: 1}, {name: 1}]}", "{mergingList: {}}",
                 "expected a list", id="object patch for a merging list"),
    pytest.param("{mergingIntList: [1, 2]}", "{mergingIntList: [a, {b: 1}]}",
                 "not identical", id="mixed element types"),
    pytest.param("{mergingIntList: [1]}", "{mergingIntList: [[1]]}", "lists of lists",
                 id="list of lists"),
    pytest.param("{retainKeysMap: {name: a}}", "{retainKeysMap: {$retainKeys: name}}",
                 "$retainKeys must be a list", id="retainKeys not a list"),
    pytest.param("{retainKeysMap: {name: a}}",
                 "{retainKeysMap: {$retainKeys: [name], value: b}}",
                 "missing from $retainKeys", id="patched field missing from retainKeys"),
    pytest.param("{mergingList: [{name: 1}]}", "{$setElementOrder/mergingList: {name: 1}}",
                 "must be a list", id="setElementOrder not a list"),
]


@pytest.mark.parametrize("original, patch, message", SMP_ERRORS)
def test_strategic_merge_patch_errors(merge_item: str, original: str, patch: str,
                                      message: str) -> None:
    with pytest.raises(PatchError, match=message.replace("$", r"\$")) as info:
        strategic_merge_patch(Y(original), Y(patch), merge_item)
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------------------------------------
# Strategic merge patch on kplane's kinds.
# ---------------------------------------------------------------------------------------------

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p",
        "namespace": "default",
        "labels": {"app": "web"},
        "finalizers": ["a.example/x", "b.example/y"],
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                             "uid": "u1", "controller": True}],
    },
    "spec": {
        "containers": [
            {
                "name": "c1",
                "image": "nginx:1",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"},
                              "limits": {"cpu": "1", "memory": "128Mi"}},
                "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                 {"resourceName": "memory", "restartPolicy": "NotRequired"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            },
            {
                "name": "c2",
                "image": "busybox",
                "resources": {"requests": {"cpu": "100m", "memory": "32Mi"}},
            },
        ],
        "tolerations": [{"key": "k1", "operator": "Exists"}, {"key": "k2", "operator": "Exists"}],
        "volumes": [{"name": "data", "emptyDir": {}}],
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"},
                       {"type": "Ready", "status": "False", "reason": "Starting"}],
        "containerStatuses": [{"name": "c1", "ready": False}, {"name": "c2", "ready": False}],
        "podIPs": [{"ip": "10.0.0.1"}],
    },
}


def test_pod_patch_changes_one_container_request() -> None:
    patch = {"spec": {"containers": [{"name": "c2", "resources": {"requests": {"cpu": "200m"}}}]}}
    got = strategic_merge_patch(POD, patch, "Pod")
    expected = copy.deepcopy(POD)
    expected["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "200m"
    assert got == expected
    assert [c["name"] for c in got["spec"]["containers"]] == ["c1", "c2"]


def test_pod_patch_deletes_one_container_limit() -> None:
    patch = {"spec": {"containers": [{"name": "c1", "resources": {"limits": {"memory": None}}}]}}
    got = strategic_merge_patch(POD, patch, "Pod")
    expected = copy.deepcopy(POD)
    del expected["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert got == expected


POD_CASES = [
    pytest.param(
        {"spec": {"containers": [{"name": "c1", "env": [{"name": "B", "value": "3"},
                                                        {"name": "C", "value": "4"}]}]}},
        lambda pod: pod["spec"]["containers"][0].__setitem__(
            "env", [{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                    {"name": "C", "value": "4"}]),
        id="env merges by name"),
    pytest.param(
        {"spec": {"containers": [{"name": "c1", "env": [{"name": "A", "$patch": "delete"}]}]}},
        lambda pod: pod["spec"]["containers"][0].__setitem__("env", [{"name": "B", "value": "2"}]),
        id="env element deleted by directive"),
    pytest.param(
        {"spec": {"containers": [{"name": "c1", "ports": [{"containerPort": 80, "name": "http"}]}]}},
        lambda pod: pod["spec"]["containers"][0]["ports"][0].__setitem__("name", "http"),
        id="ports merge by containerPort"),
    pytest.param(
        {"spec": {"containers": [{"name": "c1", "volumeMounts": [
            {"mountPath": "/data", "readOnly": True}]}]}},
        lambda pod: pod["spec"]["containers"][0]["volumeMounts"][0].__setitem__("readOnly", True),
        id="volumeMounts merge by mountPath"),
    pytest.param(
        {"spec": {"containers": [{"name": "c1", "resizePolicy": [
            {"resourceName": "cpu", "restartPolicy": "RestartContainer"}]}]}},
        lambda pod: pod["spec"]["containers"][0].__setitem__(
            "resizePolicy", [{"resourceName": "cpu", "restartPolicy": "RestartContainer"}]),
        id="resizePolicy is atomic"),
    pytest.param(
        {"spec": {"tolerations": [{"key": "k3", "operator": "Exists"}]}},
        lambda pod: pod["spec"].__setitem__("tolerations", [{"key": "k3", "operator": "Exists"}]),
        id="tolerations are atomic"),
    pytest.param(
        {"spec": {"containers": [{"name": "c0", "image": "sidecar"}]}},
        lambda pod: pod["spec"]["containers"].insert(0, {"name": "c0", "image": "sidecar"}),
        id="new container goes first as in Go"),
    pytest.param(
        {"spec": {"$setElementOrder/containers": [{"name": "c1"}, {"name": "c2"}, {"name": "c3"}],
                  "containers": [{"name": "c3", "image": "x"}]}},
        lambda pod: pod["spec"]["containers"].append({"name": "c3", "image": "x"}),
        id="setElementOrder appends a container"),
    pytest.param(
        {"spec": {"volumes": [{"name": "data", "$retainKeys": ["name", "configMap"],
                               "configMap": {"name": "cm"}}]}},
        lambda pod: pod["spec"].__setitem__("volumes", [{"name": "data",
                                                         "configMap": {"name": "cm"}}]),
        id="volume source switched with retainKeys"),
    pytest.param(
        {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": None}]}},
        lambda pod: pod["status"]["conditions"].__setitem__(1, {"type": "Ready", "status": "True"}),
        id="status conditions merge by type"),
    pytest.param(
        {"status": {"containerStatuses": [{"name": "c1", "ready": True}]}},
        lambda pod: pod["status"].__setitem__("containerStatuses", [{"name": "c1", "ready": True}]),
        id="containerStatuses are atomic"),
    pytest.param(
        {"status": {"podIPs": [{"ip": "fd00::1"}]}},
        lambda pod: pod["status"].__setitem__("podIPs", [{"ip": "fd00::1"}, {"ip": "10.0.0.1"}]),
        id="podIPs merge by ip"),
    pytest.param(
        {"metadata": {"finalizers": ["c.example/z", "a.example/x"]}},
        lambda pod: pod["metadata"].__setitem__(
            "finalizers", ["c.example/z", "a.example/x", "b.example/y"]),
        id="finalizers merge as a set"),
    pytest.param(
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example/x"]}},
        lambda pod: pod["metadata"].__setitem__("finalizers", ["b.example/y"]),
        id="finalizer removed by deleteFromPrimitiveList"),
    pytest.param(
        {"metadata": {"ownerReferences": [{"uid": "u1", "blockOwnerDeletion": True}],
                      "labels": {"app": None, "tier": "fe"}}},
        lambda pod: (pod["metadata"]["ownerReferences"][0].__setitem__("blockOwnerDeletion", True),
                     pod["metadata"].__setitem__("labels", {"tier": "fe"})),
        id="ownerReferences merge by uid, labels merge"),
]


@pytest.mark.parametrize("patch, change", POD_CASES)
def test_pod_strategic_merge_patch(patch: dict, change) -> None:
    expected = copy.deepcopy(POD)
    change(expected)
    assert strategic_merge_patch(POD, patch, "Pod") == expected


KIND_CASES = [
    pytest.param(
        "Node",
        """{spec: {podCIDRs: [10.0.0.0/24], taints: [{key: a, effect: NoSchedule}]},
            status: {conditions: [{type: Ready, status: 'True'}, {type: DiskPressure, status: 'False'}],
                     addresses: [{type: InternalIP, address: 10.1.0.1}, {type: Hostname, address: n1}]}}""",
        """{spec: {podCIDRs: ['fd00::/64'], taints: [{key: b, effect: NoExecute}]},
            status: {conditions: [{type: Ready, status: 'False'}],
                     addresses: [{type: InternalIP, address: 10.1.0.2}]}}""",
        """{spec: {podCIDRs: ['fd00::/64', 10.0.0.0/24], taints: [{key: b, effect: NoExecute}]},
            status: {conditions: [{type: Ready, status: 'False'}, {type: DiskPressure, status: 'False'}],
                     addresses: [{type: InternalIP, address: 10.1.0.2}, {type: Hostname, address: n1}]}}""",
        id="Node: taints atomic, conditions and addresses by type, podCIDRs as a set"),
    pytest.param(
        "PodDisruptionBudget",
        """{spec: {minAvailable: 1}, status: {disruptedPods: {a: x},
            conditions: [{type: DisruptionAllowed, status: 'True'}]}}""",
        "{status: {disruptedPods: {a: null}, conditions: [{type: DisruptionAllowed, status: 'False'}]}}",
        """{spec: {minAvailable: 1}, status: {disruptedPods: {},
            conditions: [{type: DisruptionAllowed, status: 'False'}]}}""",
        id="PodDisruptionBudget: conditions by type"),
    pytest.param(
        "ResourceClaim",
        "{status: {reservedFor: [{resource: pods, name: a, uid: '1'}, {resource: pods, name: b, uid: '2'}]}}",
        "{status: {reservedFor: [{uid: '1', $patch: delete}]}}",
        "{status: {reservedFor: [{resource: pods, name: b, uid: '2'}]}}",
        id="ResourceClaim: reservedFor by uid"),
    pytest.param(
        "ResourceClaimTemplate",
        "{spec: {metadata: {finalizers: [a]}, spec: {devices: {requests: [{name: r1}]}}}}",
        "{spec: {metadata: {finalizers: [b]}, spec: {devices: {requests: [{name: r2}]}}}}",
        "{spec: {metadata: {finalizers: [b, a]}, spec: {devices: {requests: [{name: r2}]}}}}",
        id="ResourceClaimTemplate: template metadata merges, requests atomic"),
    pytest.param(
        "Lease",
        "{spec: {holderIdentity: a, leaseDurationSeconds: 40}}",
        "{spec: {holderIdentity: b}}",
        "{spec: {holderIdentity: b, leaseDurationSeconds: 40}}", id="Lease: plain map merge"),
    pytest.param(
        "pod",
        "{metadata: {finalizers: [x]}}", "{metadata: {finalizers: [y]}}",
        "{metadata: {finalizers: [y, x]}}", id="kind names are case-insensitive"),
]


@pytest.mark.parametrize("kind, original, patch, expected", KIND_CASES)
def test_kinds_strategic_merge_patch(kind: str, original: str, patch: str, expected: str) -> None:
    assert strategic_merge_patch(Y(original), Y(patch), kind) == Y(expected)


@pytest.mark.parametrize("kind, path, key", [
    ("Pod", "spec.containers", "name"),
    ("Pod", "spec.initContainers", "name"),
    ("Pod", "spec.ephemeralContainers", "name"),
    ("Pod", "spec.containers[].env", "name"),
    ("Pod", "spec.containers[].ports", "containerPort"),
    ("Pod", "spec.initContainers[].volumeMounts", "mountPath"),
    ("Pod", "spec.ephemeralContainers[].volumeDevices", "devicePath"),
    ("Pod", "spec.volumes", "name"),
    ("Pod", "spec.imagePullSecrets", "name"),
    ("Pod", "spec.hostAliases", "ip"),
    ("Pod", "spec.topologySpreadConstraints", "topologyKey"),
    ("Pod", "spec.schedulingGates", "name"),
    ("Pod", "spec.resourceClaims", "name"),
    ("Pod", "status.conditions", "type"),
    ("Pod", "status.podIPs", "ip"),
    ("Pod", "status.hostIPs", "ip"),
    ("Pod", "status.resourceClaimStatuses", "name"),
    ("Pod", "metadata.ownerReferences", "uid"),
    ("Pod", "metadata.finalizers", ""),
    ("Node", "spec.podCIDRs", ""),
    ("Node", "status.conditions", "type"),
    ("Node", "status.addresses", "type"),
    ("PodDisruptionBudget", "status.conditions", "type"),
    ("ResourceClaim", "status.reservedFor", "uid"),
    ("Event", "metadata.finalizers", ""),
    ("Pod", "spec.tolerations", None),
    ("Pod", "spec.readinessGates", None),
    ("Pod", "spec.containers[].resizePolicy", None),
    ("Pod", "spec.containers[].resources.claims", None),
    ("Pod", "status.containerStatuses", None),
    ("Pod", "status.initContainerStatuses", None),
    ("Node", "spec.taints", None),
    ("ResourceClaim", "status.devices", None),
])
def test_merge_strategy_table(kind: str, path: str, key: str | None) -> None:
    strategy = merge_strategy(kind, path)
    assert (strategy.merge_key if strategy else None) == key


def test_merge_strategy_unknown_kind() -> None:
    with pytest.raises(PatchError, match="not supported for kind 'Widget'"):
        merge_strategy("Widget", "spec")


def test_retain_keys_strategies_are_recorded() -> None:
    assert merge_strategy("Pod", "spec.volumes").retain_keys
    assert merge_strategy("Pod", "spec.resourceClaims").retain_keys
    assert not merge_strategy("Pod", "spec.containers").retain_keys


@pytest.mark.parametrize("target, patch, kind, message", [
    pytest.param({"kind": "Widget"}, {}, "Widget", "not supported for kind", id="unknown kind"),
    pytest.param(POD, [], "Pod", "must be a JSON object", id="patch not an object"),
    pytest.param([], {}, "Pod", "target must be a JSON object", id="target not an object"),
    pytest.param(POD, {"spec": {"containers": {"name": "c1"}}}, "Pod", "expected a list",
                 id="containers given as an object"),
    pytest.param(POD, {"spec": {"containers": [{"image": "x"}]}}, "Pod",
                 "does not contain declared merge key 'name'", id="container without name"),
    pytest.param(POD, {"metadata": {"finalizers": [{"name": "x"}]}}, "Pod",
                 "not identical", id="object in finalizers"),
    pytest.param(POD, {"spec": {"nodeName": {1, 2}}}, "Pod", "not a JSON value",
                 id="non-JSON value in patch"),
])
def test_strategic_merge_patch_kind_errors(target, patch, kind: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        strategic_merge_patch(target, patch, kind)


# ---------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch: the examples of Appendix A.
# ---------------------------------------------------------------------------------------------

RFC7386_CASES = [
    ('{"a":"b"}', '{"a":"c"}', '{"a":"c"}'),
    ('{"a":"b"}', '{"b":"c"}', '{"a":"b","b":"c"}'),
    ('{"a":"b"}', '{"a":null}', "{}"),
    ('{"a":"b","b":"c"}', '{"a":null}', '{"b":"c"}'),
    ('{"a":["b"]}', '{"a":"c"}', '{"a":"c"}'),
    ('{"a":"c"}', '{"a":["b"]}', '{"a":["b"]}'),
    ('{"a":{"b":"c"}}', '{"a":{"b":"d","c":null}}', '{"a":{"b":"d"}}'),
    ('{"a":[{"b":"c"}]}', '{"a":[1]}', '{"a":[1]}'),
    ('["a","b"]', '["c","d"]', '["c","d"]'),
    ('{"a":"b"}', '["c"]', '["c"]'),
    ('{"a":"foo"}', "null", "null"),
    ('{"a":"foo"}', '"bar"', '"bar"'),
    ('{"e":null}', '{"a":1}', '{"e":null,"a":1}'),
    ("[1,2]", '{"a":"b","c":null}', '{"a":"b"}'),
    ("{}", '{"a":{"bb":{"ccc":null}}}', '{"a":{"bb":{}}}'),
]


@pytest.mark.parametrize("target, patch, expected", RFC7386_CASES,
                         ids=[f"rfc7386-{i + 1}" for i in range(len(RFC7386_CASES))])
def test_json_merge_patch_rfc7386(target: str, patch: str, expected: str) -> None:
    assert json_merge_patch(json.loads(target), json.loads(patch)) == json.loads(expected)


def test_json_merge_patch_replaces_lists_that_strategic_merges() -> None:
    patch = {"spec": {"containers": [{"name": "c2", "image": "x"}]}}
    assert json_merge_patch(POD, patch)["spec"]["containers"] == [{"name": "c2", "image": "x"}]


# ---------------------------------------------------------------------------------------------
# RFC 6902 JSON patch: the examples of Appendix A, plus RFC 6901 pointers.
# ---------------------------------------------------------------------------------------------

RFC6902_CASES = [
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
                 {"baz": "qux", "foo": "bar"}, id="A.1 adding an object member"),
    pytest.param({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
                 {"foo": ["bar", "qux", "baz"]}, id="A.2 adding an array element"),
    pytest.param({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}],
                 {"foo": "bar"}, id="A.3 removing an object member"),
    pytest.param({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
                 {"foo": ["bar", "baz"]}, id="A.4 removing an array element"),
    pytest.param({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}],
                 {"baz": "boo", "foo": "bar"}, id="A.5 replacing a value"),
    pytest.param({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
                 [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
                 {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
                 id="A.6 moving a value"),
    pytest.param({"foo": ["all", "grass", "cows", "eat"]},
                 [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
                 {"foo": ["all", "cows", "eat", "grass"]}, id="A.7 moving an array element"),
    pytest.param({"baz": "qux", "foo": ["a", 2, "c"]},
                 [{"op": "test", "path": "/baz", "value": "qux"},
                  {"op": "test", "path": "/foo/1", "value": 2}],
                 {"baz": "qux", "foo": ["a", 2, "c"]}, id="A.8 testing a value: success"),
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
                 {"foo": "bar", "child": {"grandchild": {}}}, id="A.10 adding a nested member"),
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}],
                 {"foo": "bar", "baz": "qux"}, id="A.11 ignoring unrecognized elements"),
    pytest.param({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
                 {"/": 9, "~1": 10}, id="A.14 ~ escape ordering"),
    pytest.param({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}],
                 {"foo": ["bar", ["abc", "def"]]}, id="A.16 adding an array value"),
    pytest.param({"a/b": 1, "m~n": 2}, [{"op": "replace", "path": "/a~1b", "value": 3},
                                        {"op": "remove", "path": "/m~0n"}],
                 {"a/b": 3}, id="RFC 6901 escapes"),
    pytest.param({"a": {"b": [1, 2]}}, [{"op": "copy", "from": "/a/b", "path": "/c"},
                                        {"op": "add", "path": "/c/0", "value": 0}],
                 {"a": {"b": [1, 2]}, "c": [0, 1, 2]}, id="copy makes an independent value"),
    pytest.param({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}], {"b": 2},
                 id="replace the whole document"),
    pytest.param({"a": {"x": 1, "y": [1.0, True]}},
                 [{"op": "test", "path": "/a", "value": {"y": [1, True], "x": 1}}],
                 {"a": {"x": 1, "y": [1.0, True]}}, id="test compares JSON values"),
    pytest.param({"a": 1}, [{"op": "move", "from": "/a", "path": "/a"}], {"a": 1},
                 id="move onto itself"),
    pytest.param({"metadata": {"labels": {"app": "web"}}},
                 [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "x"}],
                 {"metadata": {"labels": {"app": "web", "app.kubernetes.io/name": "x"}}},
                 id="label key with a slash"),
]


@pytest.mark.parametrize("target, ops, expected", RFC6902_CASES)
def test_json_patch(target, ops, expected) -> None:
    assert json_patch(target, ops) == expected


RFC6902_ERRORS = [
    pytest.param({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}],
                 "test failed", id="A.9 testing a value: error"),
    pytest.param({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}],
                 "does not exist", id="A.12 adding to a nonexistent target"),
    pytest.param({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}],
                 "test failed", id="A.15 comparing strings and numbers"),
    pytest.param({"a": True}, [{"op": "test", "path": "/a", "value": 1}], "test failed",
                 id="booleans are not numbers"),
    pytest.param({"a": 1}, [{"op": "remove", "path": "/b"}], "does not exist",
                 id="remove a missing member"),
    pytest.param({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}], "does not exist",
                 id="replace a missing member"),
    pytest.param({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 2}], "out of range",
                 id="array index past the end"),
    pytest.param({"a": [1, 2]}, [{"op": "remove", "path": "/a/01"}], "not a valid array index",
                 id="leading zero index"),
    pytest.param({"a": [1]}, [{"op": "remove", "path": "/a/-"}], "no existing array element",
                 id="dash names no element"),
    pytest.param({"a": 1}, [{"op": "add", "path": "a", "value": 2}], "must be empty or start",
                 id="pointer without leading slash"),
    pytest.param({"a": 1}, [{"op": "add", "path": "/a~2", "value": 2}], "invalid '~' escape",
                 id="bad escape"),
    pytest.param({"a": 1}, [{"op": "frob", "path": "/a"}], "unknown op", id="unknown op"),
    pytest.param({"a": 1}, [{"op": "add", "path": "/b"}], "missing 'value'", id="missing value"),
    pytest.param({"a": 1}, [{"op": "move", "path": "/b"}], "missing 'from'", id="missing from"),
    pytest.param({"a": 1}, [{"op": "remove"}], "missing 'path'", id="missing path"),
    pytest.param({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}],
                 "own child", id="move into own child"),
    pytest.param({"a": 1}, [{"op": "remove", "path": ""}], "whole document", id="remove root"),
    pytest.param({"a": "s"}, [{"op": "add", "path": "/a/b", "value": 1}], "goes through a string",
                 id="path through a scalar"),
    pytest.param({"a": 1}, {"op": "add", "path": "/b", "value": 1}, "array of operations",
                 id="ops not a list"),
    pytest.param({"a": 1}, ["add"], "must be an object", id="op not an object"),
]


@pytest.mark.parametrize("target, ops, message", RFC6902_ERRORS)
def test_json_patch_errors(target, ops, message: str) -> None:
    before = copy.deepcopy(target)
    with pytest.raises(PatchError, match=message):
        json_patch(target, ops)
    assert target == before


def test_json_patch_replace_keeps_key_order() -> None:
    got = json_patch({"a": 1, "b": 2, "c": 3}, [{"op": "replace", "path": "/a", "value": 9}])
    assert list(got) == ["a", "b", "c"]


def test_json_patch_is_all_or_nothing() -> None:
    target = {"a": 1}
    ops = [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/a", "value": 9}]
    with pytest.raises(PatchError, match="operation 1"):
        json_patch(target, ops)
    assert target == {"a": 1}


# ---------------------------------------------------------------------------------------------
# apply_patch: dispatch, raw bodies, immutability.
# ---------------------------------------------------------------------------------------------

_STRATEGIC = {"spec": {"containers": [{"name": "c2", "image": "busybox:2"}]}}
_MERGE = {"spec": {"containers": [{"name": "c2", "image": "busybox:2"}]}}
_JSON = [{"op": "replace", "path": "/spec/containers/1/image", "value": "busybox:2"}]


@pytest.mark.parametrize("patch_type, patch, containers", [
    ("strategic", _STRATEGIC, ["c1", "c2"]),
    ("application/strategic-merge-patch+json", _STRATEGIC, ["c1", "c2"]),
    ("merge", _MERGE, ["c2"]),
    ("application/merge-patch+json; charset=utf-8", _MERGE, ["c2"]),
    ("json", _JSON, ["c1", "c2"]),
    ("application/json-patch+json", json.dumps(_JSON), ["c1", "c2"]),
    ("json", json.dumps(_JSON).encode(), ["c1", "c2"]),
])
def test_apply_patch_dispatch(patch_type: str, patch, containers: list[str]) -> None:
    target = copy.deepcopy(POD)
    patch_before = copy.deepcopy(patch)
    got = apply_patch(target, patch, patch_type)  # kind defaults to target["kind"]
    assert [c["name"] for c in got["spec"]["containers"]] == containers
    assert got["spec"]["containers"][-1]["image"] == "busybox:2"
    assert target == POD, "the target must not be mutated"
    assert patch == patch_before, "the patch must not be mutated"
    got["metadata"]["labels"]["x"] = "y"
    assert "x" not in target["metadata"]["labels"], "the result must not share the target"


@pytest.mark.parametrize("patch_type, patch, message", [
    ("application/apply-patch+yaml", {}, "unsupported patch type"),
    (None, {}, "unsupported patch type"),
    ("merge", [1], "must be a JSON object"),
    ("merge", "{not json", "not valid JSON"),
    ("json", [{"op": "replace", "path": "", "value": 3}], "patched document must be a JSON object"),
    ("strategic", {"spec": {"containers": [{"$patch": "delete"}]}}, "merge key 'name'"),
])
def test_apply_patch_errors(patch_type: str, patch, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        apply_patch(POD, patch, patch_type)


def test_apply_patch_explicit_kind_and_error_is_value_error() -> None:
    node = {"kind": "Node", "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}
    got = apply_patch(node, {"spec": {"taints": []}}, "strategic", kind="Node")
    assert got == {"kind": "Node", "spec": {"taints": []}}
    assert issubclass(PatchError, ValueError)
    with pytest.raises(ValueError):
        apply_patch({"metadata": {}}, {}, "strategic")  # no kind anywhere


def test_strategic_merge_patch_does_not_mutate_inputs(merge_item: str) -> None:
    original = Y("{mergingList: [{name: 1}, {name: 2, value: b}], simpleMap: {a: 1}}")
    patch = Y("""{$setElementOrder/mergingList: [{name: 2}, {name: 3}],
                  mergingList: [{name: 3}, {name: 1, $patch: delete}],
                  simpleMap: {$patch: replace, b: 2}, $retainKeys: [mergingList, simpleMap]}""")
    original_before, patch_before = copy.deepcopy(original), copy.deepcopy(patch)
    got = strategic_merge_patch(original, patch, merge_item)
    assert got == Y("{mergingList: [{name: 2, value: b}, {name: 3}], simpleMap: {b: 2}}")
    assert original == original_before
    assert patch == patch_before
