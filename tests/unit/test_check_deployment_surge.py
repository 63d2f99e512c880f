"""``kplane check``'s deployment-surge-and-unavailability rule on synthetic histories.

Kubernetes docs, "Deployments", Rolling Update Deployment: "Deployment ensures that only a certain
number of Pods are down while they are being updated ... at least 75% of the desired number of
Pods are up (25% max unavailable)" and "only a certain number of Pods are created above the
desired number of Pods ... at most 125% of the desired number of Pods are up (25% max surge)".

The cast: Deployment ``web`` (replicas 3, maxSurge 1, maxUnavailable 0) rolled from ``v1`` to
``v2``; ReplicaSet ``web-old`` runs o1, o2, o3, all Ready; the rollout makes ``web-new`` and its
pods n1, n2, n3. With maxUnavailable 0 each new pod must be Ready before an old one goes.
"""

from __future__ import annotations

from cli import check
from machinery.api import apps_pb2, core_pb2
from tests.harness.builders import MakeDeployment, MakePod

RULE = check.DeploymentSurgeAndUnavailability
NAME = "deployment-surge-and-unavailability"
T0 = "2026-01-01T00:00:00Z"


def _deployment(image: str = "v1", replicas: int = 3, surge: str = "1", unavailable: str = "0",
                min_ready: int = 0, strategy: str = "RollingUpdate") -> apps_pb2.Deployment:
    b = MakeDeployment().name("web").replicas(replicas).image(image).min_ready_seconds(min_ready)
    d = (b.recreate() if strategy == "Recreate" else b.rolling_update(surge, unavailable)).obj()
    d.metadata.uid = "uid-web"
    return d


def _rs(name: str, image: str) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
    rs.metadata.name, rs.metadata.namespace, rs.metadata.uid = name, "default", f"uid-{name}"
    rs.metadata.owner_references.add(api_version="apps/v1", kind="Deployment", name="web", uid="uid-web",
                                      controller=True)
    rs.spec.template.CopyFrom(_deployment(image).spec.template)
    rs.spec.template.metadata.labels["pod-template-hash"] = name
    return rs


def _pod(name: str, rs: str, *, ready: str = "", deleting: bool = False, disrupted: bool = False) -> core_pb2.Pod:
    """Pod ``name`` of ReplicaSet ``rs``: Ready since ``ready`` (an RFC 3339 time) if given."""
    p = MakePod().name(name).uid(f"uid-{name}").label("app", "web").node("n1").phase("Running")
    if ready:
        p.condition("Ready", "True", last_transition_time=ready)
    if disrupted:
        p.condition("DisruptionTarget", "True", "PreemptionByScheduler")
    if deleting:
        p.deletion_timestamp("2026-01-01T00:10:00Z")
    pod = p.obj()
    pod.metadata.creation_timestamp = T0
    pod.metadata.owner_references.add(api_version="apps/v1", kind="ReplicaSet", name=rs, uid=f"uid-{rs}",
                                       controller=True)
    return pod


def _e(rev: int, type_: str, obj) -> check.Entry:
    kind = {apps_pb2.Deployment: "Deployment", apps_pb2.ReplicaSet: "ReplicaSet", core_pb2.Pod: "Pod"}[type(obj)]
    return check.Entry(rev, type_, kind, "default", obj.metadata.name, obj)


def _running_v1(**deployment) -> list[check.Entry]:
    """web at v1 with its three pods Ready (revs 1-8)."""
    return [_e(1, "ADDED", _deployment(**deployment)), _e(2, "ADDED", _rs("web-old", "v1")),
            *[_e(2 + i, "ADDED", _pod(f"o{i}", "web-old")) for i in (1, 2, 3)],
            *[_e(5 + i, "MODIFIED", _pod(f"o{i}", "web-old", ready=T0)) for i in (1, 2, 3)]]


def _step(rev: int, i: int) -> list[check.Entry]:
    """One step of the rollout done right: n<i> created, Ready, then o<i> deleted (3 revisions)."""
    return [_e(rev, "ADDED", _pod(f"n{i}", "web-new")),
            _e(rev + 1, "MODIFIED", _pod(f"n{i}", "web-new", ready=T0)),
            _e(rev + 2, "MODIFIED", _pod(f"o{i}", "web-old", ready=T0, deleting=True))]


def _rollout(**deployment) -> list[check.Entry]:
    """The template changed to v2 (rev 10), the new ReplicaSet made (11)."""
    return [_e(10, "MODIFIED", _deployment("v2", **deployment)), _e(11, "ADDED", _rs("web-new", "v2"))]


def _rollout_start(**deployment) -> list[check.Entry]:
    return _running_v1(**deployment) + _rollout(**deployment)


def test_a_rollout_within_max_surge_and_max_unavailable_passes():
    entries = _rollout_start() + _step(20, 1) + _step(30, 2) + _step(40, 3) + [
        _e(50 + i, "DELETED", _pod(f"o{i}", "web-old", ready=T0, deleting=True)) for i in (1, 2, 3)]
    assert check.check_entries(entries, [RULE()]) == []


def test_a_second_new_pod_before_an_old_one_goes_is_over_max_surge():
    """n2 created while o1..o3 and n1 all still run: 5 pods, over 3 + maxSurge 1."""
    entries = _rollout_start() + [_e(20, "ADDED", _pod("n1", "web-new")), _e(21, "ADDED", _pod("n2", "web-new"))]
    [v] = check.check_entries(entries, [RULE()])
    assert (v.rule, v.rev) == (NAME, 21)
    assert v.message == ("deployment default/web: pod default/n2 created with 5 pods of it neither finished nor "
                         "being deleted, over replicas 3 + maxSurge 1")


def test_an_old_pod_deleted_before_its_replacement_is_ready_is_under_max_unavailable():
    """o1 deleted while n1 is not Ready yet: 2 available, under 3 - maxUnavailable 0."""
    entries = _rollout_start() + [_e(20, "ADDED", _pod("n1", "web-new")),
                                  _e(21, "MODIFIED", _pod("o1", "web-old", ready=T0, deleting=True))]
    [v] = check.check_entries(entries, [RULE()])
    assert (v.rule, v.rev) == (NAME, 21)
    assert v.message == ("deployment default/web: pod default/o1 deleted leaving 2 available, under replicas 3 - "
                         "maxUnavailable 0")


def test_percentages_resolve_as_kubernetes_resolve_fenceposts():
    """4 replicas at 25%/25%: surge rounds up to 1, unavailable down to 1 — one old pod may go at once."""
    d = {"replicas": 4, "surge": "25%", "unavailable": "25%"}
    entries = _running_v1(**d) + [_e(9, "ADDED", _pod("o4", "web-old", ready=T0)),
                                  _e(10, "MODIFIED", _deployment("v2", **d)), _e(11, "ADDED", _rs("web-new", "v2")),
                                  _e(20, "MODIFIED", _pod("o1", "web-old", ready=T0, deleting=True)),
                                  _e(21, "ADDED", _pod("n1", "web-new")), _e(22, "ADDED", _pod("n2", "web-new"))]
    assert check.check_entries(entries, [RULE()]) == []
    [v] = check.check_entries(entries + [_e(23, "ADDED", _pod("n3", "web-new"))], [RULE()])
    assert "created with 6 pods" in v.message and "over replicas 4 + maxSurge 1" in v.message
    [v] = check.check_entries(entries + [_e(23, "MODIFIED", _pod("o2", "web-old", ready=T0, deleting=True))],
                              [RULE()])
    assert "leaving 2 available, under replicas 4 - maxUnavailable 1" in v.message


def test_pods_over_the_bound_after_a_scale_down_are_not_a_surge():
    """Scaled from 3 to 1: the three pods stay until deleted; nothing was created over the bound."""
    entries = _running_v1() + [_e(10, "MODIFIED", _deployment(replicas=1)),
                               _e(11, "MODIFIED", _pod("o1", "web-old", ready=T0, deleting=True))]
    assert check.check_entries(entries, [RULE()]) == []


def test_evictions_preemptions_and_readiness_lost_are_not_the_controllers_doing():
    entries = _rollout_start() + [
        _e(20, "MODIFIED", _pod("o1", "web-old", ready=T0, disrupted=True)),
        _e(21, "MODIFIED", _pod("o1", "web-old", ready=T0, disrupted=True, deleting=True)),
        _e(22, "MODIFIED", _pod("o2", "web-old"))]  # no longer Ready: its kubelet says so
    assert check.check_entries(entries, [RULE()]) == []


def test_a_rollout_that_started_short_of_available_pods_is_not_held_to_the_bound():
    entries = _running_v1()[:-1] + [_e(10, "MODIFIED", _deployment("v2")), _e(11, "ADDED", _rs("web-new", "v2")),
                                    _e(20, "MODIFIED", _pod("o1", "web-old", ready=T0, deleting=True))]
    assert check.check_entries(entries, [RULE()]) == []


def _heartbeat(rev: int, at: str) -> check.Entry:
    """A node's heartbeat at ``at``: the history's clock is past it from ``rev`` on."""
    node = core_pb2.Node()
    node.metadata.name = "n1"
    node.status.conditions.add(type="Ready", status="True", last_heartbeat_time=at)
    return check.Entry(rev, "MODIFIED", "Node", "", "n1", node)


def test_min_ready_seconds_counts_a_pod_available_only_once_they_have_passed():
    """minReadySeconds 30: n1, Ready at 00:01:00, is available from 00:01:30 — a second early at
    the earliest, times being cut to the second. The history's clock is the latest time it shows."""
    d = {"min_ready": 30}
    running = _running_v1(**d) + [_heartbeat(9, "2026-01-01T00:00:40Z")]  # o1..o3 available by then
    start = running + _rollout(**d) + [_e(20, "ADDED", _pod("n1", "web-new")),
                                   _e(21, "MODIFIED", _pod("n1", "web-new", ready="2026-01-01T00:01:00Z"))]
    delete_o1 = _e(30, "MODIFIED", _pod("o1", "web-old", ready=T0, deleting=True))
    [v] = check.check_entries(start + [delete_o1], [RULE()])
    assert v.rev == 30 and "leaving 2 available" in v.message
    [v] = check.check_entries(start + [_heartbeat(25, "2026-01-01T00:01:28Z"), delete_o1], [RULE()])
    assert v.rev == 30 and "leaving 2 available" in v.message
    assert check.check_entries(start + [_heartbeat(25, "2026-01-01T00:01:29Z"), delete_o1], [RULE()]) == []


def test_recreate_deployments_are_not_checked():
    d = {"strategy": "Recreate"}
    entries = _running_v1(**d) + [_e(10, "MODIFIED", _deployment("v2", **d)), _e(11, "ADDED", _rs("web-new", "v2")),
                                  *[_e(20 + i, "MODIFIED", _pod(f"o{i}", "web-old", ready=T0, deleting=True))
                                    for i in (1, 2, 3)],
                                  *[_e(30 + i, "ADDED", _pod(f"n{i}", "web-new")) for i in (1, 2, 3, 4, 5)]]
    assert check.check_entries(entries, [RULE()]) == []


def test_the_rule_is_one_of_kplane_checks_rules():
    assert NAME in [r.name for r in check.rules()]


def _rs_at(generation: int, replicas: int, observed: int) -> apps_pb2.ReplicaSet:
    rs = _rs("web-old", "v1")
    rs.metadata.generation, rs.spec.replicas, rs.status.observed_generation = generation, replicas, observed
    return rs


def test_a_creation_toward_replicas_its_controller_saw_before_a_scale_down_is_no_violation():
    """Scaled to 0 right after it was made: the ReplicaSet controller's batch still creates toward
    the 3 it saw (its observedGeneration behind the generation that says 0)."""
    entries = [_e(1, "ADDED", _deployment()), _e(2, "ADDED", _rs_at(1, 3, 0)),
               _e(3, "ADDED", _pod("o1", "web-old")),
               _e(4, "MODIFIED", _deployment(replicas=0)), _e(5, "MODIFIED", _rs_at(2, 0, 0)),
               _e(6, "ADDED", _pod("o2", "web-old")), _e(7, "ADDED", _pod("o3", "web-old"))]
    assert check.check_entries(entries, [RULE()]) == []
    # Once its controller observed the 0, a creation is one too many.
    late = entries + [_e(8, "MODIFIED", _rs_at(2, 0, 2)), _e(9, "ADDED", _pod("o4", "web-old"))]
    assert [v.rev for v in check.check_entries(late, [RULE()])] == [9]


def test_a_replicaset_creating_twice_toward_the_same_replicas_is_a_violation():
    """The ReplicaSet controller without its expectations: 3 wanted, 5 created, nothing scaled."""
    entries = [_e(1, "ADDED", _deployment()), _e(2, "ADDED", _rs_at(1, 3, 0))]
    entries += [_e(2 + i, "ADDED", _pod(f"o{i}", "web-old")) for i in range(1, 6)]
    assert [v.rev for v in check.check_entries(entries, [RULE()])] == [7]
