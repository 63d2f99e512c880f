"""The namespace controller without processes: its conditions (Kubernetes' namespaceConditionUpdater,
reasons and messages word for word) and one deletion pass after another over an API played in
memory — content deleted, what remains said in the conditions, the namespace finalized once empty."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controllers.namespace import (
    ConditionUpdater,
    ContentError,
    NamespaceController,
    ResourcesRemaining,
    gvr_string,
    resource_name,
)
from machinery import timeutil
from machinery.api import apps_pb2, core_pb2
from machinery.kinds import NAMESPACE, POD, POD_DISRUPTION_BUDGET, REPLICA_SET
from tests.harness.builders import MakePod, make_pdb
from tests.unit.fakes_gc_namespace_disruption import FakeApi


def _conditions(ns: core_pb2.Namespace) -> dict[str, tuple[str, str, str]]:
    return {c.type: (c.status, c.reason, c.message) for c in ns.status.conditions}


ALL_WELL = {
    "NamespaceDeletionDiscoveryFailure": ("False", "ResourcesDiscovered", "All resources successfully discovered"),
    "NamespaceDeletionGroupVersionParsingFailure": ("False", "ParsedGroupVersions",
                                                    "All legacy kube types successfully parsed"),
    "NamespaceDeletionContentFailure": ("False", "ContentDeleted",
                                        "All content successfully deleted, may be waiting on finalization"),
    "NamespaceContentRemaining": ("False", "ContentRemoved", "All content successfully removed"),
    "NamespaceFinalizersRemaining": ("False", "ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}


def test_a_pass_with_nothing_wrong_sets_every_condition_to_its_all_is_well_variant():
    status = core_pb2.NamespaceStatus()
    assert ConditionUpdater().update(status)
    assert {c.type: (c.status, c.reason, c.message) for c in status.conditions} == ALL_WELL
    assert [c.type for c in status.conditions] == list(ALL_WELL), "in Kubernetes' order"
    assert not ConditionUpdater().update(status), "the same conditions again: nothing to write"


def test_what_remains_is_said_sorted_and_a_condition_keeps_its_transition_time_while_its_status_holds():
    status = core_pb2.NamespaceStatus()
    u = ConditionUpdater()
    u.content_totals({"pods.": 2, "poddisruptionbudgets.policy": 1}, {"example.com/hold": 1, "b/x": 3})
    u.delete_content_failed("z failed")
    u.delete_content_failed("a failed")
    assert u.update(status)
    got = {c.type: (c.status, c.reason, c.message) for c in status.conditions}
    assert got["NamespaceContentRemaining"] == (
        "True", "SomeResourcesRemain",
        "Some resources are remaining: poddisruptionbudgets.policy has 1 resource instances, pods. has 2 resource "
        "instances")
    assert got["NamespaceFinalizersRemaining"] == (
        "True", "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: b/x in 3 resource instances, example.com/hold in 1 "
        "resource instances")
    assert got["NamespaceDeletionContentFailure"] == (
        "True", "ContentDeletionFailed", "Failed to delete all resource types, 2 remaining: a failed, z failed")
    for c in status.conditions:
        c.last_transition_time = "2020-01-01T00:00:00Z"
    u = ConditionUpdater()
    u.content_totals({"pods.": 1}, {})
    assert u.update(status)
    remaining = next(c for c in status.conditions if c.type == "NamespaceContentRemaining")
    assert remaining.message == "Some resources are remaining: pods. has 1 resource instances"
    assert remaining.last_transition_time == "2020-01-01T00:00:00Z", "still True: same transition"
    finalizers = next(c for c in status.conditions if c.type == "NamespaceFinalizersRemaining")
    assert finalizers.status == "False" and finalizers.last_transition_time != "2020-01-01T00:00:00Z"


def test_kinds_are_named_as_kubernetes_prints_them():
    assert resource_name(POD) == "pods." and resource_name(POD_DISRUPTION_BUDGET) == "poddisruptionbudgets.policy"
    assert gvr_string(POD) == "{ v1 pods}" and gvr_string(REPLICA_SET) == "{apps v1 replicasets}"


# ---------------------------------------------------------------- passes over an API in memory


def _namespace(name: str) -> core_pb2.Namespace:
    ns = core_pb2.Namespace(api_version="v1", kind="Namespace")
    ns.metadata.name = name
    return ns


@pytest.fixture
async def doomed():
    """team-a, deleted, holding a running pod (30 s grace), a budget held by a finalizer and a ReplicaSet."""
    api = FakeApi()
    controller = NamespaceController(api.context())
    api.seed(_namespace("team-a"))
    held = make_pdb("held", {"app": "web"}, min_available="1", namespace="team-a")
    held.metadata.finalizers.append("example.com/hold")
    rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace = "web", "team-a"
    api.seed(MakePod().name("web-0").namespace("team-a").node("node-1").grace(30).obj(), held, rs)
    await api.namespaces.delete("team-a")
    yield api, controller
    await controller.stop()


async def test_content_is_deleted_and_the_namespace_waits_for_what_remains(doomed):
    api, controller = doomed
    with pytest.raises(ResourcesRemaining) as exc:
        await controller.delete("team-a")
    assert exc.value.estimate == 30, "the pod's grace period, counted from the namespace's deletion"
    assert api.get(REPLICA_SET, "web", "team-a") is None
    pod = api.get(POD, "web-0", "team-a")
    assert pod is not None and pod.metadata.deletion_timestamp, "pods go gracefully"
    ns = api.get(NAMESPACE, "team-a", "")
    assert isinstance(ns, core_pb2.Namespace) and list(ns.spec.finalizers) == ["kubernetes"]
    conds = _conditions(ns)
    assert conds["NamespaceContentRemaining"] == (
        "True", "SomeResourcesRemain",
        "Some resources are remaining: poddisruptionbudgets.policy has 1 resource instances, pods. has 1 resource "
        "instances")
    assert conds["NamespaceFinalizersRemaining"] == (
        "True", "SomeFinalizersRemain",
        "Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances")
    assert conds["NamespaceDeletionContentFailure"] == ALL_WELL["NamespaceDeletionContentFailure"]
    assert ("Pod", "team-a", "web-0", "Background") in api.deletes, "content is deleted with Background"

    api.remove(POD, "team-a", "web-0")  # its kubelet is done
    with pytest.raises(ResourcesRemaining) as exc:
        await controller.delete("team-a")
    assert exc.value.estimate == 15, "objects held by finalizers: Kubernetes' finalizerEstimateSeconds"

    await api.pod_disruption_budgets.patch("held", {"metadata": {"finalizers": None}}, namespace="team-a",
                                           patch_type="merge")
    await controller.delete("team-a")
    assert api.finalized == ["team-a"] and api.get(NAMESPACE, "team-a", "") is None, \
        "empty: the kubernetes finalizer removed through finalize, and the namespace with it"


async def test_a_pod_still_there_after_its_grace_period_is_a_content_failure(doomed):
    api, controller = doomed
    ns = api.get(NAMESPACE, "team-a", "")
    assert isinstance(ns, core_pb2.Namespace)
    ns.metadata.deletion_timestamp = timeutil.rfc3339(timeutil.now() - timedelta(minutes=5))
    api.objects[("namespaces", "", "team-a")] = ns
    await api.pod_disruption_budgets.patch("held", {"metadata": {"finalizers": None}}, namespace="team-a",
                                           patch_type="merge")
    with pytest.raises(ContentError, match=r"unexpected items still remain in namespace: team-a for gvr: \{ v1 pods\}"):
        await controller.delete("team-a")
    got = api.get(NAMESPACE, "team-a", "")
    assert isinstance(got, core_pb2.Namespace)
    assert _conditions(got)["NamespaceDeletionContentFailure"] == (
        "True", "ContentDeletionFailed", "Failed to delete all resource types, 1 remaining: unexpected items still "
        "remain in namespace: team-a for gvr: { v1 pods}")
    assert not api.finalized


async def test_a_namespace_not_being_deleted_is_left_alone():
    api = FakeApi()
    controller = NamespaceController(api.context())
    api.seed(_namespace("calm"), MakePod().name("p").namespace("calm").obj())
    await controller.delete("calm")
    assert api.get(POD, "p", "calm") is not None and not api.deletes
    await controller.stop()
