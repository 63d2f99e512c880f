"""The apiserver's server-side patch (registry.patched): a merge patch of some top-level fields
converts only those through JSON; the result must be exactly what patching the whole object
through JSON gives, for every patch type and for the patches that must fail."""

from __future__ import annotations

import pytest

from apiserver.defaults import default_pod
from apiserver.registry import patched
from machinery import errors, jsonconv, patch
from machinery.api import core_pb2
from machinery.kinds import POD
from tests.harness.builders import MakePod


def _stored_pod() -> core_pb2.Pod:
    p = (MakePod().name("web").label("app", "web").req(cpu="900m", memory="500Mi").lim(cpu="900m", memory="500Mi")
         .node("node-1").obj())
    p.spec.containers[0].ports.add(container_port=80)
    default_pod(p)
    p.metadata.uid, p.metadata.resource_version = "uid-1", "42"
    p.metadata.annotations["note"] = "kept"
    p.status.phase = "Running"
    for t in ("Initialized", "Ready", "PodScheduled"):
        p.status.conditions.add(type=t, status="True", last_transition_time="2026-01-01T00:00:00Z")
    cs = p.status.container_statuses.add(name="c1", ready=True, image="registry.k8s.io/pause:3.10", started=True)
    cs.allocated_resources.update({"cpu": "900m", "memory": "500Mi"})
    p.status.start_time = "2026-01-01T00:00:00Z"
    return p


def _through_whole_json(old: core_pb2.Pod, document, patch_type: str) -> core_pb2.Pod:
    new = jsonconv.from_dict(core_pb2.Pod, patch.apply_patch(jsonconv.to_dict(old), document, patch_type, "Pod"))
    new.metadata.resource_version = old.metadata.resource_version
    return new


CASES = [
    ("strategic", {"status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                              "reason": "PreemptionByScheduler"}]}}),
    ("strategic", {"status": {"nominatedNodeName": "node-2"}}),
    ("strategic", {"status": {"nominatedNodeName": None}}),
    ("strategic", {"metadata": {"labels": {"tier": "front", "app": None}}}),
    ("strategic", {"spec": {"containers": [{"name": "c1", "resources": {"requests": {"cpu": "1"}}}]}}),
    ("strategic", {"metadata": {"annotations": {"a": "b"}}, "status": {"phase": "Failed", "reason": "Evicted"}}),
    ("strategic", {"status": None}),
    ("strategic", {"status": {"conditions": [{"type": "Ready", "$patch": "delete"}]}}),
    ("strategic", {"$retainKeys": ["spec"], "spec": {"nodeName": "node-1"}}),
    ("merge", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
    ("merge", {"metadata": {"annotations": None}}),
    ("application/merge-patch+json", {"status": {"message": "hi"}}),
    ("json", [{"op": "replace", "path": "/status/phase", "value": "Succeeded"}]),
]


@pytest.mark.parametrize("patch_type,document", CASES)
def test_a_patch_gives_what_patching_the_whole_object_through_json_gives(patch_type, document):
    old = _stored_pod()
    before = old.SerializeToString()
    try:
        want = _through_whole_json(old, document, patch_type)
        refused = want.metadata.name != old.metadata.name  # a patch may not rename the object
    except (patch.PatchError, jsonconv.DecodeError):
        refused = True
    if refused:
        with pytest.raises(errors.BadRequest):
            patched(POD, old, document, patch_type)
        return
    got = patched(POD, old, document, patch_type)
    assert got == want
    assert old.SerializeToString() == before  # the stored object is never changed in place


@pytest.mark.parametrize("document,message", [
    ({"status": {"phase": 5}}, "cannot be handled as a Pod"),
    ({"status": {"nosuchfield": 1}}, 'unknown field "status.nosuchfield"'),
    ({"nosuchfield": {}}, 'unknown field "nosuchfield"'),
    ({"metadata": {"name": "other"}}, "may not change metadata.name"),
    ({"metadata": None}, "may not change metadata.name"),
])
def test_bad_patches_are_refused_with_the_field_named(document, message):
    with pytest.raises(errors.BadRequest) as exc:
        patched(POD, _stored_pod(), document, "strategic")
    assert message in str(exc.value)
