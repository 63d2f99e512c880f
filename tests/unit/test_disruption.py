"""PodDisruptionBudgets without processes: the disruption controller's arithmetic as Kubernetes'
(expected pods from the controllers' scale, disrupted pods expiring after two minutes, the status
written only when it changes, its DisruptionAllowed condition, the failSafe), the controller over
an API played in memory, the eviction subresource's check-and-decrement of the status, and the
scheduler's reading of it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from apiserver.pods import check_and_decrement
from controllers.disruption import DisruptionController, stale_disruption_wait
from machinery import disruption, errors, timeutil
from machinery.api import apps_pb2, core_pb2, policy_pb2
from machinery.kinds import POD_DISRUPTION_BUDGET
from scheduler.preemption.evaluator import current_pdbs
from tests.harness.builders import MakePod, make_pdb
from tests.unit.fakes_gc_namespace_disruption import FakeApi

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def _pod(name: str, *, ready: bool = True, owner: tuple[str, str] | None = None, deleting: bool = False,
         app: str = "web") -> core_pb2.Pod:
    b = MakePod().name(name).label("app", app).phase("Running").condition("Ready", "True" if ready else "False")
    if owner is not None:
        b.owner("ReplicaSet", owner[0], owner[1])
    if deleting:
        b.deletion_timestamp(timeutil.rfc3339(NOW))
    return b.obj()


def _pdb(generation: int = 1, **spec: str) -> policy_pb2.PodDisruptionBudget:
    b = make_pdb("web", {"app": "web"}, **spec)
    b.metadata.generation = generation
    return b


def _finder(scales: dict[str, tuple[str, int]]) -> disruption.ScaleFinder:
    """A ScaleFinder over {controller uid: (the uid it resolves to, scale)}."""
    return lambda ref, namespace: scales.get(ref.uid)


# ---------------------------------------------------------------- expected pods


def test_an_integer_min_available_expects_the_pods_selected():
    pods = [_pod("a"), _pod("b"), _pod("c", owner=("rs", "r1"))]
    assert disruption.expected_pod_count(_pdb(min_available="2"), pods, _finder({})) == (3, 2, [])


def test_a_percentage_is_of_the_sum_of_the_controllers_scale_each_counted_once():
    pods = [_pod("a", owner=("rs", "r1")), _pod("b", owner=("rs", "r1")), _pod("c", owner=("other", "r2")),
            _pod("bare")]
    finder = _finder({"r1": ("r1", 4), "r2": ("d1", 3)})  # r2's pods count at their Deployment's scale
    assert disruption.expected_pod_count(_pdb(min_available="50%"), pods, finder) == (7, 4, ["bare"])
    assert disruption.expected_pod_count(_pdb(max_unavailable="1"), pods, finder) == (7, 6, ["bare"])
    assert disruption.expected_pod_count(_pdb(max_unavailable="30%"), pods, finder) == (7, 4, ["bare"]), \
        "30% of 7 is 2.1 unavailable, rounded up to 3"


def test_a_controller_reference_leading_nowhere_fails_the_count():
    with pytest.raises(disruption.NoControllerError, match='found no controllers for pod "a"'):
        disruption.expected_pod_count(_pdb(min_available="50%"), [_pod("a", owner=("gone", "r9"))], _finder({}))


def test_a_budget_with_neither_field_expects_nothing():
    assert disruption.expected_pod_count(_pdb(), [_pod("a")], _finder({})) == (0, 0, [])


# ---------------------------------------------------------------- disrupted pods, healthy pods, the status


def test_disrupted_pods_count_until_their_pod_is_deleted_or_two_minutes_pass():
    pdb = _pdb(min_available="1")
    pdb.status.disrupted_pods["fresh"] = timeutil.rfc3339(NOW - timedelta(seconds=30))
    pdb.status.disrupted_pods["old"] = timeutil.rfc3339(NOW - timedelta(minutes=3))
    pdb.status.disrupted_pods["going"] = timeutil.rfc3339(NOW - timedelta(seconds=5))
    pdb.status.disrupted_pods["absent"] = timeutil.rfc3339(NOW)
    pods = [_pod("fresh"), _pod("old"), _pod("going", deleting=True), _pod("other")]
    kept, recheck, expired = disruption.disrupted_pod_map(pdb, pods, NOW)
    assert kept == {"fresh": pdb.status.disrupted_pods["fresh"]}
    assert recheck == NOW + timedelta(seconds=90), "looked at again when the entry would expire"
    assert [p.metadata.name for p in expired] == ["old"]
    assert disruption.count_healthy(pods, kept, NOW) == 2, "not the evicted one, not the one being deleted"


def test_no_disruption_is_allowed_while_no_pod_is_expected():
    status = disruption.budget_status(_pdb(max_unavailable="1"), current_healthy=0, desired_healthy=0, expected=0,
                                      disrupted={}, at=NOW)
    assert status is not None and status.disruptions_allowed == 0


def test_the_status_is_written_only_when_it_changes_and_its_condition_keeps_its_transition_time():
    pdb = _pdb(generation=3, min_available="2")
    status = disruption.budget_status(pdb, 3, 2, 3, {}, NOW)
    assert status is not None
    assert (status.expected_pods, status.current_healthy, status.desired_healthy, status.disruptions_allowed,
            status.observed_generation) == (3, 3, 2, 1, 3)
    cond = status.conditions[0]
    assert (cond.type, cond.status, cond.reason, cond.observed_generation) == ("DisruptionAllowed", "True",
                                                                               "SufficientPods", 3)
    pdb.status.CopyFrom(status)
    assert disruption.budget_status(pdb, 3, 2, 3, {}, NOW + timedelta(seconds=5)) is None, "up to date"
    later = disruption.budget_status(pdb, 2, 2, 3, {}, NOW + timedelta(seconds=9))
    assert later is not None
    assert (later.conditions[0].status, later.conditions[0].reason) == ("False", "InsufficientPods")
    assert later.conditions[0].last_transition_time == timeutil.rfc3339(NOW + timedelta(seconds=9))
    pdb.status.CopyFrom(later)
    again = disruption.budget_status(pdb, 1, 2, 3, {}, NOW + timedelta(seconds=20))
    assert again is not None and again.conditions[0].last_transition_time == later.conditions[0].last_transition_time


def test_the_fail_safe_allows_no_disruption_and_says_why():
    pdb = _pdb(generation=2, min_available="50%")
    pdb.status.observed_generation, pdb.status.disruptions_allowed = 1, 3
    st = disruption.sync_failed_status(pdb, 'found no controllers for pod "a"', NOW)
    assert st.disruptions_allowed == 0 and st.observed_generation == 1, "observedGeneration stays"
    c = st.conditions[0]
    assert (c.type, c.status, c.reason, c.message) == ("DisruptionAllowed", "False", "SyncFailed",
                                                       'found no controllers for pod "a"')


def test_a_status_no_controller_wrote_is_told_apart():
    assert not disruption.computed_by_controller(_pdb(min_available="1"))
    written = _pdb(min_available="1")
    written.status.conditions.add(type="DisruptionAllowed", status="False", reason="SyncFailed")
    assert disruption.computed_by_controller(written), "a failSafe write at observedGeneration 0 counts"


# ---------------------------------------------------------------- the eviction subresource's check


def _computed(allowed: int, *, generation: int = 1, observed: int = 1) -> policy_pb2.PodDisruptionBudget:
    pdb = _pdb(generation=generation, min_available="2")
    pdb.status.observed_generation = observed
    pdb.status.disruptions_allowed, pdb.status.desired_healthy, pdb.status.current_healthy = allowed, 2, 2 + allowed
    pdb.status.conditions.add(type="DisruptionAllowed", status="True" if allowed else "False",
                              reason="SufficientPods" if allowed else "InsufficientPods", observed_generation=observed)
    return pdb


def test_an_eviction_takes_one_disruption_and_records_its_pod_in_one_status():
    st = check_and_decrement(_computed(1), "web-0")
    assert st.disruptions_allowed == 0 and "web-0" in st.disrupted_pods
    c = st.conditions[0]
    assert (c.status, c.reason) == ("False", "InsufficientPods"), "no disruption left: the condition says so"
    st = check_and_decrement(_computed(2), "web-0")
    assert st.disruptions_allowed == 1 and st.conditions[0].reason == "SufficientPods"


@pytest.mark.parametrize("pdb, error, message", [
    (_computed(0), errors.TooManyRequests,
     "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web needs 2 healthy "
     "pods and has 2 currently"),
    (_computed(1, generation=2, observed=1), errors.TooManyRequests,
     "Cannot evict pod as it would violate the pod's disruption budget. The disruption budget web is still being "
     "processed by the server."),
    (_computed(-1), errors.Forbidden,
     'poddisruptionbudget.policy "web" is forbidden: pdb disruptions allowed is negative'),
])
def test_an_eviction_is_refused_as_kubernetes_refuses_it(pdb, error, message):
    with pytest.raises(error) as exc:
        check_and_decrement(pdb, "web-0")
    assert exc.value.message == message


def test_too_many_unconfirmed_evictions_are_refused():
    pdb = _computed(5)
    for i in range(disruption.MAX_DISRUPTED_PODS + 1):
        pdb.status.disrupted_pods[f"p{i}"] = timeutil.rfc3339(NOW)
    with pytest.raises(errors.Forbidden, match="DisruptedPods map too big - too many evictions not confirmed by PDB "
                                               "controller"):
        check_and_decrement(pdb, "web-0")


# ---------------------------------------------------------------- the scheduler's reading


def test_preemption_reads_the_controllers_status_and_computes_only_a_budget_it_never_wrote():
    pods = [_pod("a"), _pod("b"), _pod("c")]
    fresh = _pdb(min_available="2")  # never computed: 3 healthy, 2 needed, 1 allowed on the spot
    fresh.metadata.name = "fresh"
    kept = _computed(0)  # the controller says 0, whatever the pods say
    kept.metadata.name = "kept"
    kept.status.disrupted_pods["b"] = timeutil.rfc3339(NOW)
    handle = SimpleNamespace(pdbs=lambda: [fresh, kept], pods=lambda: pods)
    got = {p.pdb.metadata.name: (p.allowed, p.disrupted) for p in current_pdbs(handle)}  # type: ignore[arg-type]
    assert got == {"fresh": (1, set()), "kept": (0, {"b"})}


# ---------------------------------------------------------------- the controller over an API in memory


def _replica_set(name: str, replicas: int, uid: str = "") -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace, rs.metadata.uid = name, "default", uid
    rs.spec.replicas = replicas
    return rs


async def test_the_controller_writes_the_status_from_the_controllers_scale_and_fails_safe():
    api = FakeApi()
    dc = DisruptionController(api.context())
    api.seed(_replica_set("web", 4, uid="r1"), _pod("web-0", owner=("web", "r1")), _pod("web-1", owner=("web", "r1")),
             _pdb(min_available="50%"))
    await dc.sync("default/web")
    pdb = api.get(POD_DISRUPTION_BUDGET, "web")
    assert isinstance(pdb, policy_pb2.PodDisruptionBudget)
    st = pdb.status
    assert (st.expected_pods, st.desired_healthy, st.current_healthy, st.disruptions_allowed,
            st.observed_generation) == (4, 2, 2, 0, 1)
    assert (st.conditions[0].status, st.conditions[0].reason) == ("False", "InsufficientPods")
    rv = pdb.metadata.resource_version
    await dc.sync("default/web")
    assert api.get(POD_DISRUPTION_BUDGET, "web").metadata.resource_version == rv, "unchanged: not written again"

    # A pod whose controller is gone: the count cannot be made, so no disruption is allowed.
    api.seed(_pod("web-2", owner=("lost", "r9")))
    await dc.sync("default/web")
    st = api.get(POD_DISRUPTION_BUDGET, "web").status
    assert st.disruptions_allowed == 0 and st.observed_generation == 1
    assert (st.conditions[0].reason, st.conditions[0].message) == ("SyncFailed", 'found no controllers for pod "web-2"')
    await dc.stop()


def test_a_stale_disruption_target_is_reset_after_two_minutes_unless_the_kubelet_set_it():
    pod = MakePod().name("p").phase("Running").condition(
        "DisruptionTarget", "True", reason="PreemptionByScheduler",
        last_transition_time=timeutil.rfc3339(NOW - timedelta(seconds=90))).obj()
    assert stale_disruption_wait(pod, NOW) == 30
    assert stale_disruption_wait(pod, NOW + timedelta(minutes=5)) == 0
    by_kubelet = MakePod().name("k").phase("Running").condition("DisruptionTarget", "True",
                                                                reason="TerminationByKubelet").obj()
    assert stale_disruption_wait(by_kubelet, NOW) is None
    going = MakePod().name("g").phase("Running").condition("DisruptionTarget", "True").deletion_timestamp(
        timeutil.rfc3339(NOW)).obj()
    assert stale_disruption_wait(going, NOW) is None
