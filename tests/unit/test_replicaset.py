"""The ReplicaSet controller over an in-memory API (tests/unit/fakes_replicaset_deployment.py): what one sync
does, as Kubernetes' pkg/controller/replicaset does it — pods from the template with the
ReplicaSet as controller, expectations across a slow informer, slow-start batches, the pods it
deletes, adoption and release, status and its ReplicaFailure condition."""

from __future__ import annotations

import pytest

from controllers import replicaset
from controllers.replicaset import ReplicaSetController, slow_start_batch
from machinery import errors
from machinery.kinds import POD, REPLICA_SET
from tests.harness.builders import MakePod, MakeReplicaSet
from tests.unit.fakes_replicaset_deployment import FakeApi

KEY = "default/web"


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


def _pods(api: FakeApi, *, active: bool = True) -> list:
    return [p for p in api.list(POD) if not active or not p.metadata.deletion_timestamp]


async def test_pods_are_made_from_the_template_with_the_replicaset_as_controller(api):
    rsc = ReplicaSetController(api.context())
    rs = api.add(MakeReplicaSet().name("web").replicas(3).req(cpu="100m").obj())
    await rsc.sync(KEY)
    pods = _pods(api)
    assert len(pods) == 3
    for pod in pods:
        assert pod.metadata.generate_name == "web-" and pod.metadata.name.startswith("web-")
        assert dict(pod.metadata.labels) == {"app": "web"}
        [ref] = pod.metadata.owner_references
        assert (ref.api_version, ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == \
            ("apps/v1", "ReplicaSet", "web", rs.metadata.uid, True, True)
        assert pod.spec.containers[0].resources.requests["cpu"] == "100m"
    assert sorted(r[1:] for r in api.recorded) == sorted(
        ("Normal", "SuccessfulCreate", f"Created pod: {p.metadata.name}") for p in pods)
    assert all(name == "web" for name, *_ in api.recorded)


async def test_a_slow_informer_never_makes_it_create_twice(api):
    """Expectations: until the informer shows the 3 pods it made, syncs create nothing more."""
    rsc = ReplicaSetController(api.context())
    api.add(MakeReplicaSet().name("web").replicas(3).obj())
    await rsc.sync(KEY)
    assert len(_pods(api)) == 3
    assert not rsc.expectations.satisfied(KEY)
    for _ in range(3):  # synced again and again, the informer still empty
        await rsc.sync(KEY)
    assert len(_pods(api)) == 3
    api.deliver()
    assert rsc.expectations.satisfied(KEY)
    await rsc.sync(KEY)
    assert len(_pods(api)) == 3


async def test_a_restarted_controller_with_synced_caches_creates_nothing_twice(api):
    """What a controller-manager killed after its creates finds: the pods in its informer's list."""
    api.add(MakeReplicaSet().name("web").replicas(3).obj())
    await ReplicaSetController(api.context()).sync(KEY)
    fresh = FakeApi()
    for obj in api.objects.values():
        fresh.add(obj)  # the new process lists everything before its workers start
    await ReplicaSetController(fresh.context()).sync(KEY)
    assert len(_pods(fresh)) == 3


async def test_creates_go_in_slow_start_batches_and_a_failed_batch_ends_the_pass(api):
    calls: list[int] = []

    async def fn() -> None:
        calls.append(1)
        if len(calls) == 5:
            raise errors.Forbidden("exceeded quota")

    successes, failure = await slow_start_batch(10, 1, fn)
    assert (successes, len(calls)) == (6, 7)  # batches 1, 2, 4: the third batch has the failure
    assert isinstance(failure, errors.Forbidden)


async def test_a_refused_create_lowers_expectations_and_sets_replica_failure(api):
    """The pods never sent or refused are not expected; the status says FailedCreate."""
    refused = {"n": 0}

    def quota(name: str):
        refused["n"] += 1
        return errors.Forbidden('pods "web-x" is forbidden: exceeded quota') if refused["n"] >= 2 else None

    api.failures[("create", "Pod")] = quota
    rsc = ReplicaSetController(api.context())
    api.add(MakeReplicaSet().name("web").replicas(5).obj())
    with pytest.raises(errors.Forbidden):
        await rsc.sync(KEY)
    assert len(_pods(api)) == 1  # batch 1 made one, batch 2 (2 pods) failed
    assert rsc.expectations.pending(KEY) == (1, 0)  # only the one made is awaited
    api.deliver()
    rs = api.get(REPLICA_SET, "web")
    [cond] = rs.status.conditions
    assert (cond.type, cond.status, cond.reason) == ("ReplicaFailure", "True", "FailedCreate")
    assert "exceeded quota" in cond.message
    assert ("web", "Warning", "FailedCreate", 'Error creating: pods "web-x" is forbidden: exceeded quota') in \
        api.recorded
    del api.failures[("create", "Pod")]
    await rsc.sync(KEY)
    api.deliver()
    assert len(_pods(api)) == 5
    await rsc.sync(KEY)
    assert not api.get(REPLICA_SET, "web").status.conditions, "the condition goes once creates succeed"


async def test_burst_replicas_bounds_one_pass(api):
    rsc = ReplicaSetController(api.context(), burst_replicas=4)
    api.add(MakeReplicaSet().name("web").replicas(10).obj())
    await rsc.sync(KEY)
    assert len(_pods(api)) == 4


async def test_scale_down_deletes_the_pods_kubernetes_ranks_first(api):
    """Unassigned, then Pending, then not Ready go before Running Ready pods."""
    rsc = ReplicaSetController(api.context())
    rs = api.add(MakeReplicaSet().name("web").replicas(4).obj())
    await rsc.sync(KEY)
    api.deliver()
    pods = sorted(_pods(api), key=lambda p: p.metadata.name)
    names = [p.metadata.name for p in pods]

    def bind(node: str, phase: str, ready: bool):
        def fn(p):
            p.spec.node_name, p.status.phase = node, phase
            if ready:
                p.status.conditions.add(type="Ready", status="True", last_transition_time=api.now())
        return fn

    api.change(pods[0], bind("node-1", "Running", True))
    api.change(pods[1], bind("node-2", "Running", False))
    api.change(pods[2], bind("node-3", "Pending", False))
    # pods[3] stays unassigned
    api.change(rs, lambda r: setattr(r.spec, "replicas", 1))
    await rsc.sync(KEY)
    assert [p.metadata.name for p in _pods(api)] == [names[0]], "the Running Ready pod stays"
    deleted = [m.removeprefix("Deleted pod: ") for _, _, reason, m in api.recorded if reason == "SuccessfulDelete"]
    assert sorted(deleted) == sorted(names[1:])
    assert rsc.expectations.pending(KEY) == (0, 3)
    api.deliver()  # the unassigned one is gone, the bound ones are terminating: each counted once
    assert rsc.expectations.satisfied(KEY)


async def test_status_counts_active_ready_available_and_terminating_pods(api):
    rsc = ReplicaSetController(api.context())
    rs = api.add(MakeReplicaSet().name("web").replicas(3).min_ready_seconds(3600).obj())
    await rsc.sync(KEY)
    api.deliver()
    api.run_pods()
    await rsc.sync(KEY)
    api.deliver()
    st = api.get(REPLICA_SET, "web").status
    assert (st.replicas, st.fully_labeled_replicas, st.ready_replicas, st.available_replicas,
            st.terminating_replicas, st.observed_generation) == (3, 3, 3, 0, 0, 1)
    wait = replicaset.next_available_in(api.get(REPLICA_SET, "web"), _pods(api), api.clock)
    assert wait is not None and 3590 < wait <= 3600, "synced again when the first becomes available"
    api.change(rs, lambda r: setattr(r.spec, "replicas", 2))
    await rsc.sync(KEY)
    st = api.get(REPLICA_SET, "web").status
    assert (st.replicas, st.terminating_replicas, st.observed_generation) == (2, 1, 2), \
        "the pod it just deleted is counted terminating at once"


async def test_status_is_written_only_when_it_changed(api):
    rsc = ReplicaSetController(api.context())
    api.add(MakeReplicaSet().name("web").replicas(1).obj())
    await rsc.sync(KEY)
    api.deliver()
    await rsc.sync(KEY)
    api.deliver()
    before = len(api.writes)
    await rsc.sync(KEY)
    assert len(api.writes) == before


async def test_orphans_are_adopted_and_strays_released(api):
    rsc = ReplicaSetController(api.context())
    rs = api.add(MakeReplicaSet().name("web").replicas(2).obj())
    orphan = api.add(MakePod().name("orphan").label("app", "web").obj())
    stray = MakePod().name("stray").label("app", "other").obj()
    stray.metadata.owner_references.add(api_version="apps/v1", kind="ReplicaSet", name="web", uid=rs.metadata.uid,
                                        controller=True, block_owner_deletion=True)
    api.add(stray)
    other = MakePod().name("others").label("app", "web").obj()
    other.metadata.owner_references.add(api_version="apps/v1", kind="ReplicaSet", name="x", uid="uid-x",
                                        controller=True)
    api.add(other)
    await rsc.sync(KEY)
    adopted = api.get(POD, "orphan")
    [ref] = adopted.metadata.owner_references
    assert (ref.kind, ref.name, ref.uid, ref.controller, ref.block_owner_deletion) == \
        ("ReplicaSet", "web", rs.metadata.uid, True, True)
    assert not api.get(POD, "stray").metadata.owner_references, "released: no longer matches"
    assert [r.uid for r in api.get(POD, "others").metadata.owner_references] == ["uid-x"], "another's: left alone"
    assert len(_pods(api)) == 4  # orphan, stray, others, and one made: the orphan counts
    assert orphan.metadata.uid == adopted.metadata.uid


async def test_a_replicaset_being_deleted_adopts_nothing_and_makes_nothing(api):
    rsc = ReplicaSetController(api.context())
    rs = MakeReplicaSet().name("web").replicas(2).obj()
    rs.metadata.deletion_timestamp = api.now()
    rs.metadata.finalizers.append("foregroundDeletion")
    api.add(rs)
    api.add(MakePod().name("orphan").label("app", "web").obj())
    await rsc.sync(KEY)
    assert not api.get(POD, "orphan").metadata.owner_references
    assert len(api.list(POD)) == 1


async def test_terminal_and_terminating_pods_do_not_count(api):
    rsc = ReplicaSetController(api.context())
    api.add(MakeReplicaSet().name("web").replicas(2).obj())
    await rsc.sync(KEY)
    api.deliver()
    api.run_pods()
    first, second = sorted(_pods(api), key=lambda p: p.metadata.name)
    api.change(first, lambda p: setattr(p.status, "phase", "Failed"), status=True)
    api.change(second, lambda p: setattr(p.metadata, "deletion_timestamp", api.now()))
    await rsc.sync(KEY)
    active = [p for p in api.list(POD) if p.status.phase not in ("Failed", "Succeeded")
              and not p.metadata.deletion_timestamp]
    assert len(active) == 2
    api.deliver()
    st = api.get(REPLICA_SET, "web").status
    assert (st.replicas, st.terminating_replicas) == (0, 1)


async def test_a_deleted_replicaset_forgets_its_expectations(api):
    rsc = ReplicaSetController(api.context())
    rs = api.add(MakeReplicaSet().name("web").replicas(2).obj())
    await rsc.sync(KEY)
    assert not rsc.expectations.satisfied(KEY)
    del api.objects[("ReplicaSet", "default", "web")]
    api.emit(REPLICA_SET, "DELETED", rs)
    api.deliver()
    assert rsc.expectations.satisfied(KEY)


def test_failpoints_are_declared():
    from machinery import failpoints
    assert replicaset.FP_AFTER_CREATE == "controller-manager/replicaset-after-create"
    assert replicaset.FP_BEFORE_STATUS_UPDATE == "controller-manager/replicaset-before-status-update"
    assert {replicaset.FP_AFTER_CREATE, replicaset.FP_BEFORE_STATUS_UPDATE} <= set(failpoints.declared())


async def test_expectations_switched_off_by_their_failpoint_create_twice(api):
    """controller-manager/skip-replicaset-expectations=return (docs/chaos.md, "Proof that it finds
    races"): the slow informer above, and every sync creates the 3 pods again."""
    from controllers.replicaset import FP_SKIP_EXPECTATIONS
    from machinery import failpoints
    rsc = ReplicaSetController(api.context())
    api.add(MakeReplicaSet().name("web").replicas(3).obj())
    failpoints.arm(FP_SKIP_EXPECTATIONS, "return")
    try:
        await rsc.sync(KEY)
        await rsc.sync(KEY)
    finally:
        failpoints.reset()
    assert len(_pods(api)) == 6
