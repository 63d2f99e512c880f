"""Unit tests for machinery's small modules: JSON conversion, selectors, failpoints, feature gates,
PodDisruptionBudget arithmetic, watch frame encoding, kinds."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta, timezone

import pytest

from apiserver.watchcache import encode_frame
from machinery import disruption, failpoints, jsonconv, kinds, selectors, timeutil
from machinery.api import core_pb2, policy_pb2, resource_pb2
from machinery.featuregates import KNOWN_GATES, FeatureGateError, FeatureGates, Stage
from machinery.version import Version
from tests.harness.builders import MakePod, make_pdb

# ---------------------------------------------------------------- jsonconv


def test_jsonconv_round_trips_a_kubernetes_pod():
    doc = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "web", "labels": {"b": "2", "a": "1"}, "creationTimestamp": None, "generation": 3},
           "spec": {"terminationGracePeriodSeconds": 30, "hostPID": True,
                    "containers": [{"name": "c", "image": "nginx",
                                    "resources": {"requests": {"cpu": 1, "memory": "1Gi"}},
                                    "livenessProbe": {"httpGet": {"port": 8080, "path": "/"}}}]},
           "status": {"podIP": "10.0.0.1", "containerStatuses": [{"name": "c", "containerID": "x://1",
                                                                   "resources": {}}]}}
    pod = jsonconv.from_dict(core_pb2.Pod, doc)
    assert pod.spec.containers[0].resources.requests["cpu"] == "1"
    assert pod.status.container_statuses[0].HasField("resources")
    out = jsonconv.to_dict(pod)
    assert out["metadata"]["generation"] == 3 and out["spec"]["terminationGracePeriodSeconds"] == 30
    assert list(out["metadata"]["labels"]) == ["a", "b"]  # maps print sorted, as Kubernetes does
    assert out["spec"]["hostPID"] is True and out["status"]["podIP"] == "10.0.0.1"
    assert out["status"]["containerStatuses"][0]["containerID"] == "x://1"
    assert out["status"]["containerStatuses"][0]["resources"] == {}  # set-but-empty stays {}
    assert out["spec"]["containers"][0]["livenessProbe"] == {"httpGet": {"port": 8080, "path": "/"}}


def test_jsonconv_int_or_string_and_dra_json_names():
    pdb = jsonconv.from_dict(policy_pb2.PodDisruptionBudget, {"spec": {"minAvailable": 2}})
    assert pdb.spec.min_available == "2"
    assert jsonconv.to_dict(pdb) == {"spec": {"minAvailable": 2}}
    pdb = jsonconv.from_dict(policy_pb2.PodDisruptionBudget, {"spec": {"maxUnavailable": "50%"}})
    assert jsonconv.to_dict(pdb)["spec"]["maxUnavailable"] == "50%"
    d = jsonconv.from_dict(resource_pb2.Device, {"name": "gpu-0", "attributes": {"model": {"string": "a100"},
                                                                                 "cores": {"int": 7}}})
    assert d.attributes["model"].string_value == "a100" and d.attributes["cores"].int_value == 7
    assert jsonconv.to_dict(d)["attributes"]["cores"] == {"int": 7}


def test_jsonconv_prints_go_zero_values_raw_json_and_fields_in_proto_order():
    doc = {"metadata": {"name": "p", "managedFields": [{"manager": "m", "operation": "Update",
                                                         "fieldsV1": {"f:spec": {"f:nodeName": {}}}}]},
           "status": {"conditions": [{"type": "Ready", "status": "False"}],
                      "containerStatuses": [{"name": "c", "ready": False, "restartCount": 0}]}}
    pod = jsonconv.from_dict(core_pb2.Pod, doc)
    assert pod.metadata.managed_fields[0].fields_v1 == '{"f:spec":{"f:nodeName":{}}}'
    short = jsonconv.to_dict(pod)
    assert short["status"]["containerStatuses"] == [{"name": "c"}]  # protobuf leaves zeros out
    assert short["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:nodeName": {}}}
    full = jsonconv.to_dict(pod, jsonconv.KUBERNETES_ALWAYS)
    assert full["status"]["containerStatuses"] == [{"name": "c", "ready": False, "restartCount": 0, "image": "",
                                                    "imageID": ""}]
    assert list(full) == ["metadata", "status"] and list(full["metadata"]) == ["name", "managedFields"]
    assert jsonconv.from_dict(core_pb2.Pod, full) == pod


@pytest.mark.parametrize("doc,message", [
    ({"spec": {"priority": 2**40}}, 'field "spec.priority": Value out of range'),
    ({"spec": {"foo": 1}}, 'unknown field "spec.foo"'),
    ({"spec": {"containers": [{"name": "c", "colour": "red"}]}}, 'unknown field "spec.containers[0].colour"'),
    ({"spec": {"priority": "high"}}, 'field "spec.priority": expected an integer, got "high"'),
    ({"spec": {"containers": {}}}, 'field "spec.containers": expected an array, got an object'),
    ({"spec": {"hostNetwork": "yes"}}, 'field "spec.hostNetwork": expected a boolean'),
    ({"spec": {"nodeName": 5}}, 'field "spec.nodeName": expected a string, got 5'),
    ({"spec": {"livenessProbe": 3}}, 'unknown field "spec.livenessProbe"'),
])
def test_jsonconv_rejects_what_kubernetes_rejects_with_the_field_path(doc, message):
    with pytest.raises(jsonconv.DecodeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        jsonconv.from_dict(core_pb2.Pod, doc)


# ---------------------------------------------------------------- selectors


@pytest.mark.parametrize("text,labels,want", [
    ("", {}, True),
    ("app=web", {"app": "web"}, True),
    ("app==web", {"app": "db"}, False),
    ("app!=web", {}, True),
    ("app!=web", {"app": "web"}, False),
    ("tier in (a,b)", {"tier": "b"}, True),
    ("tier in (a,b)", {}, False),
    ("tier notin (a,b)", {}, True),
    ("tier notin (a,b)", {"tier": "a"}, False),
    ("canary", {"canary": ""}, True),
    ("!canary", {"canary": "x"}, False),
    ("app=web,!canary,tier in (a)", {"app": "web", "tier": "a"}, True),
    ("example.com/team=x", {"example.com/team": "x"}, True),
])
def test_label_selector_matches_as_kubernetes(text, labels, want):
    assert selectors.parse_label_selector(text).matches(labels) is want


@pytest.mark.parametrize("text", ["a in ()", "a b", "-a=b", "a=b c", "a in (x", "a=-b", "a>x"])
def test_label_selector_syntax_errors(text):
    with pytest.raises(selectors.SelectorError):
        selectors.parse_label_selector(text)


def test_label_selector_message_semantics():
    sel = policy_pb2.PodDisruptionBudget().spec.selector
    assert selectors.from_label_selector_message(sel, present=False).matches({}) is False  # null: nothing
    assert selectors.from_label_selector_message(sel, present=True).matches({"x": "y"}) is True  # {}: everything
    sel.match_expressions.add(key="app", operator="In", values=["a", "b"])
    assert selectors.from_label_selector_message(sel).matches({"app": "b"})
    sel.match_expressions.add(key="x", operator="Bogus")
    with pytest.raises(selectors.SelectorError, match='"Bogus" is not a valid label selector operator'):
        selectors.from_label_selector_message(sel)


def test_field_selector_on_pods_and_escapes():
    pod = core_pb2.Pod()
    pod.spec.node_name = "node-1"
    pod.spec.host_network = True
    pod.status.phase = "Running"
    d = core_pb2.Pod.DESCRIPTOR
    assert selectors.parse_field_selector("spec.nodeName=node-1,status.phase!=Failed", "Pod", d).matches(pod)
    assert not selectors.parse_field_selector("spec.nodeName=", "Pod", d).matches(pod)
    assert selectors.parse_field_selector("spec.hostNetwork=true", "Pod", d).matches(pod)
    assert selectors.parse_field_selector("spec.nodeName==node-1", "Pod", d).value_of("spec.nodeName") == "node-1"
    pod.metadata.name = "a,b"
    assert selectors.parse_field_selector(r"metadata.name=a\,b", "Pod", d).matches(pod)
    with pytest.raises(selectors.SelectorError, match="field label not supported: spec.foo"):
        selectors.parse_field_selector("spec.foo=1", "Pod", d)
    with pytest.raises(selectors.SelectorError, match="field label not supported: spec.nodeName"):
        selectors.parse_field_selector("spec.nodeName=x", "Lease", d)


# ---------------------------------------------------------------- failpoints


async def test_failpoints_sleep_error_count_and_off():
    failpoints.reset()
    name = failpoints.declare("test/point", "a test point")
    await failpoints.hit(name)  # not armed: nothing
    failpoints.arm(name, "error")
    with pytest.raises(failpoints.FailpointError):
        await failpoints.hit(name)
    failpoints.arm(name, "2*error")
    for _ in range(2):
        with pytest.raises(failpoints.FailpointError):
            await failpoints.hit(name)
    await failpoints.hit(name)  # the count is used up
    failpoints.arm(name, "sleep(30)")
    t = asyncio.get_running_loop().time()
    await failpoints.hit(name)
    assert asyncio.get_running_loop().time() - t >= 0.025
    failpoints.arm(name, "off")
    assert name not in failpoints.armed()


async def test_pause_holds_callers_until_the_point_is_armed_again():
    failpoints.reset()
    name = failpoints.declare("test/pause-point", "a test point")
    failpoints.arm(name, "pause")
    first = asyncio.create_task(failpoints.hit(name))
    second = asyncio.create_task(failpoints.hit(name))
    await asyncio.sleep(0.05)
    assert not first.done() and not second.done()
    assert failpoints.paused() == {name: 2}
    failpoints.arm(name, "off")
    await asyncio.wait_for(asyncio.gather(first, second), 1)
    assert failpoints.paused() == {}
    await failpoints.hit(name)  # off: passes

    failpoints.arm(name, "1*pause")  # holds the next caller only
    held = asyncio.create_task(failpoints.hit(name))
    await asyncio.sleep(0.05)
    assert name not in failpoints.armed() and failpoints.paused() == {name: 1}
    await asyncio.wait_for(failpoints.hit(name), 1)  # the count is used up: the next one passes
    assert not held.done()
    failpoints.arm(name, "off")  # releases the held one although nothing is armed
    await asyncio.wait_for(held, 1)


def test_pause_at_a_synchronous_point_does_not_block():
    failpoints.reset()
    name = failpoints.declare("test/sync-pause", "a test point")
    failpoints.arm(name, "pause")
    failpoints.hit_sync(name)  # would stop the event loop: ignored
    failpoints.reset()


def test_failpoint_arming_errors_and_env():
    failpoints.reset()
    name = failpoints.declare("test/env-point", "a test point")
    with pytest.raises(failpoints.UnknownFailpointError, match="unknown failpoint"):
        failpoints.arm("test/nope", "panic")
    for bad in ("explode", "sleep(x)", "panic(3)", "sleep"):
        with pytest.raises(failpoints.BadFailpointActionError):
            failpoints.arm(name, bad)
    failpoints.arm_from_env({failpoints.ENV_VAR: "other/component=panic;test/env-point=sleep(5)"})
    assert failpoints.armed() == {name: "sleep(5)"}
    failpoints.reset()


def test_panic_failpoint_kills_the_process_at_once():
    import subprocess
    import sys
    code = ("from machinery import failpoints as f; n=f.declare('x/y','d'); f.arm(n,'panic'); f.hit_sync(n); "
            "print('survived')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == -9 and "survived" not in out.stdout


# ---------------------------------------------------------------- feature gates


def test_feature_gates_defaults_overrides_and_errors():
    g = FeatureGates.parse("")
    assert g.enabled("InPlacePodVerticalScaling") and g.enabled("SchedulerPreQueueingHints")
    assert not g.enabled("SchedulerPreemptionForPodResize")
    g = FeatureGates.parse("SchedulerPreemptionForPodResize=true, SchedulerAsyncPreemption=false")
    assert g.enabled("SchedulerPreemptionForPodResize") and not g.enabled("SchedulerAsyncPreemption")
    with pytest.raises(FeatureGateError, match="unrecognized feature gate: Nope"):
        FeatureGates.parse("Nope=true")
    with pytest.raises(FeatureGateError, match="must be NAME=true or NAME=false"):
        FeatureGates.parse("InPlacePodVerticalScaling=maybe")


@pytest.mark.parametrize("release,gate,default,stage", [
    ("1.32", "InPlacePodVerticalScaling", False, Stage.ALPHA),
    ("1.33", "InPlacePodVerticalScaling", True, Stage.BETA),
    ("1.35", "InPlacePodVerticalScaling", True, Stage.GA),
    ("1.36", "SchedulerPreemptionForPodResize", False, Stage.PRE_ALPHA),
    ("1.37", "SchedulerPreemptionForPodResize", False, Stage.ALPHA),
    ("1.36", "SchedulerPreQueueingHints", False, Stage.PRE_ALPHA),
    ("1.37", "SchedulerPreQueueingHints", True, Stage.BETA),
    ("1.33", "SchedulerQueueingHints", True, Stage.BETA),
    ("1.34", "SchedulerQueueingHints", True, Stage.GA),
    ("1.33", "DynamicResourceAllocation", False, Stage.BETA),
    ("1.34", "DynamicResourceAllocation", True, Stage.GA),
])
def test_each_gate_defaults_as_its_release_had_it(release, gate, default, stage):
    g = FeatureGates.parse("", Version.parse(release))
    assert (g.enabled(gate), g.stage(gate)) == (default, stage)


def test_gates_refused_at_a_release_say_why_as_kubernetes_does():
    with pytest.raises(FeatureGateError) as info:
        FeatureGates.parse("SchedulerPreemptionForPodResize=true", Version(1, 36))
    assert str(info.value) == ("cannot set feature gate SchedulerPreemptionForPodResize to true, feature is PreAlpha "
                               "at emulated version 1.36, min compatibility version 1.35")
    with pytest.raises(FeatureGateError, match="^cannot set feature gate InPlacePodVerticalScaling to false, "
                                               "feature is locked to true$"):
        FeatureGates.parse("InPlacePodVerticalScaling=false")
    at_1_34 = FeatureGates.parse("InPlacePodVerticalScaling=false", Version(1, 34))
    assert not at_1_34.enabled("InPlacePodVerticalScaling")
    with pytest.raises(FeatureGateError) as info:  # every refusal at once, as Kubernetes' aggregate error
        FeatureGates.parse("InPlacePodVerticalScaling=false,SchedulerPreQueueingHints=true", Version(1, 36))
    assert str(info.value).startswith("[cannot set feature gate InPlacePodVerticalScaling to false, feature is "
                                      "locked to true, cannot set feature gate SchedulerPreQueueingHints to true")
    with pytest.raises(FeatureGateError, match="^invalid --emulated-version: emulation version 1.31 is not between "
                                               r"\[1.32, 1.37\]$"):
        FeatureGates.from_flags("", "1.31")
    assert FeatureGates.from_flags("", "v1.33.4").emulated_version == Version(1, 33)


def test_gate_histories_are_well_formed():
    """As Kubernetes' AddVersioned checks them: versions increase, each step changes something,
    stability never regresses, a lock is never lifted."""
    order = {Stage.ALPHA: 1, Stage.BETA: 2, Stage.GA: 3, Stage.DEPRECATED: 4}
    for name, specs in KNOWN_GATES.items():
        for before, after in zip(specs, specs[1:], strict=False):
            assert before.version < after.version, name
            assert (before.default, before.stage, before.locked) != (after.default, after.stage, after.locked), name
            assert order[after.stage] >= order[before.stage], name
            assert after.locked or not before.locked, name


# ---------------------------------------------------------------- PodDisruptionBudget arithmetic


def _web(name: str, ready: bool = True, deleting: bool = False) -> core_pb2.Pod:
    """A Running pod of the budget's app (``app=web``), Ready or not, being deleted or not."""
    p = MakePod().name(name).label("app", "web").phase("Running").condition("Ready", "True" if ready else "False")
    if deleting:
        p.deletion_timestamp(timeutil.rfc3339())
    return p.obj()


def _pdb(**spec: str) -> policy_pb2.PodDisruptionBudget:
    """The budget of app ``web`` at generation 4."""
    b = make_pdb("web", {"app": "web"}, **spec)
    b.metadata.generation = 4
    return b


@pytest.mark.parametrize("spec,pods,want", [
    ({"min_available": "2"}, [_web("a"), _web("b"), _web("c")], (3, 3, 2, 1)),
    ({"min_available": "50%"}, [_web("a"), _web("b"), _web("c")], (3, 3, 2, 1)),  # 1.5 rounds up
    ({"max_unavailable": "1"}, [_web("a"), _web("b"), _web("c")], (3, 3, 2, 1)),
    ({"max_unavailable": "34%"}, [_web("a"), _web("b"), _web("c")], (3, 3, 1, 2)),  # ceil(1.02) = 2 unavailable
    ({"min_available": "2"}, [_web("a"), _web("b", ready=False), _web("c", deleting=True)], (3, 1, 2, 0)),
    ({"min_available": "100%"}, [_web("a")], (1, 1, 1, 0)),
])
def test_pdb_status_counts_expected_healthy_desired_allowed(spec, pods, want):
    s = disruption.compute_status(_pdb(**spec), pods)
    assert (s.expected_pods, s.current_healthy, s.desired_healthy, s.disruptions_allowed) == want
    assert s.observed_generation == 4
    assert s.conditions[0].type == "DisruptionAllowed"
    assert s.conditions[0].status == ("True" if want[3] > 0 else "False")


def test_pdb_disrupted_pods_count_until_deleted_or_expired():
    b = _pdb(min_available="1")
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    b.status.disrupted_pods["a"] = timeutil.rfc3339(now - timedelta(seconds=10))
    b.status.disrupted_pods["b"] = timeutil.rfc3339(now - timedelta(minutes=5))  # expired
    s = disruption.compute_status(b, [_web("a"), _web("b"), _web("c")], at=now)
    assert dict(s.disrupted_pods) == {"a": b.status.disrupted_pods["a"]}
    assert s.current_healthy == 2 and s.disruptions_allowed == 1


# ---------------------------------------------------------------- watch frames and kinds


def test_encoded_watch_frames_are_valid_watch_responses():
    pod = core_pb2.Pod()
    pod.metadata.name, pod.metadata.resource_version = "p", "7"
    data = encode_frame("ADDED", pod.SerializeToString()) + encode_frame("BOOKMARK", core_pb2.Pod().SerializeToString())
    resp = core_pb2.PodWatchResponse.FromString(data)
    assert [e.type for e in resp.events] == ["ADDED", "BOOKMARK"]
    assert resp.events[0].object.metadata.name == "p"
    big = core_pb2.Pod()
    big.metadata.annotations["x"] = "y" * 300_000  # multi-byte varint lengths
    frame = encode_frame("MODIFIED", big.SerializeToString())
    assert core_pb2.PodWatchResponse.FromString(frame).events[0].object == big


def test_kind_lookup_and_keys():
    assert kinds.lookup("po") is kinds.POD and kinds.lookup("PriorityClasses") is kinds.PRIORITY_CLASS
    assert kinds.lookup("pdb").group == "policy"
    assert kinds.POD.key("ns", "a") == "/registry/pods/ns/a" and kinds.NODE.key("", "n") == "/registry/nodes/n"
    assert kinds.split_key("/registry/pods/ns/a") == (kinds.POD, "ns", "a")
    assert kinds.split_key("/registry/nodes/n") == (kinds.NODE, "", "n")
    assert kinds.split_key("/other/x") is None
    with pytest.raises(kinds.UnknownKindError):
        kinds.lookup("potato")
    with pytest.raises(kinds.UnknownKindError, match='no matches for kind "Pod" in version "apps/v1"'):
        kinds.for_api_kind("apps/v1", "Pod")
