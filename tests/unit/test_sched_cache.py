"""The scheduler cache: assumed pods (confirmed, forgotten, expired), KEP-1287 requests of bound
pods changing on update, incremental snapshots, and the zone-interleaved node order."""

from __future__ import annotations

from machinery.api import core_pb2
from scheduler.cache.cache import Cache
from scheduler.cache.snapshot import Snapshot
from tests.harness.builders import MakeNode, MakePod


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def cpu_used(c: Cache, name: str) -> int:
    return c.node_infos()[name].requested.milli_cpu


def test_an_assumed_pod_counts_at_once_and_its_binding_event_confirms_it():
    c = Cache()
    c.add_node(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    p = MakePod().name("a").uid("uid-a").req(cpu="1").node("n1").obj()
    c.assume_pod(p)
    assert cpu_used(c, "n1") == 1000 and c.is_assumed(p)
    c.finish_binding(p)
    c.add_pod(p)  # the informer shows it bound
    assert not c.is_assumed(p) and cpu_used(c, "n1") == 1000 and c.pod_count() == 1


def test_a_failed_binding_forgets_the_assumed_pod():
    c = Cache()
    c.add_node(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    p = MakePod().name("a").uid("uid-a").req(cpu="1").node("n1").obj()
    c.assume_pod(p)
    c.forget_pod(p)
    assert cpu_used(c, "n1") == 0 and c.pod_count() == 0


def test_an_assumption_whose_binding_never_shows_up_expires_after_the_ttl():
    clock = Clock()
    c = Cache(ttl=30, clock=clock)
    c.add_node(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    p = MakePod().name("a").uid("uid-a").req(cpu="1").node("n1").obj()
    c.assume_pod(p)
    clock.t = 100
    assert c.cleanup_assumed_pods() == []  # binding not finished: never expires
    c.finish_binding(p)
    clock.t = 120
    assert c.cleanup_assumed_pods() == []
    clock.t = 131
    assert [x.metadata.name for x in c.cleanup_assumed_pods()] == ["a"]
    assert cpu_used(c, "n1") == 0


def test_a_resize_reported_by_the_kubelet_changes_what_the_pod_holds_kep1287():
    c = Cache()
    c.add_node(MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    before = MakePod().name("a").uid("uid-a").req(cpu="2").node("n1").obj()
    c.add_pod(before)
    after = core_pb2.Pod()
    after.CopyFrom(before)
    after.spec.containers[0].resources.requests["cpu"] = "1"  # desired down...
    cs = after.status.container_statuses.add(name="c1")
    cs.allocated_resources["cpu"] = "2"  # ...not yet allocated
    cs.resources.requests["cpu"] = "2"
    c.update_pod(before, after)
    assert cpu_used(c, "n1") == 2000
    done = core_pb2.Pod()
    done.CopyFrom(after)
    done.status.container_statuses[0].allocated_resources["cpu"] = "1"
    done.status.container_statuses[0].resources.requests["cpu"] = "1"
    c.update_pod(after, done)
    assert cpu_used(c, "n1") == 1000


def test_snapshots_copy_only_what_changed_and_keep_the_old_copies_intact():
    c = Cache()
    for n in ("n1", "n2"):
        c.add_node(MakeNode().name(n).allocatable(cpu="4", memory="8Gi", pods="110").obj())
    snap = Snapshot()
    c.update_snapshot(snap)
    n2_before = snap.get("n2")
    c.add_pod(MakePod().name("a").uid("uid-a").req(cpu="1").node("n1").obj())
    c.update_snapshot(snap)
    assert snap.get("n2") is n2_before, "an unchanged node is not copied again"
    assert snap.get("n1").requested.milli_cpu == 1000
    old_n1 = snap.get("n1")
    c.add_pod(MakePod().name("b").uid("uid-b").req(cpu="1").node("n1").obj())
    c.update_snapshot(snap)
    assert old_n1.requested.milli_cpu == 1000 and snap.get("n1").requested.milli_cpu == 2000
    c.remove_node(MakeNode().name("n2").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    c.update_snapshot(snap)
    assert [ni.name for ni in snap.node_infos()] == ["n1"] and snap.get("n2") is None


def test_nodes_are_walked_with_zones_interleaved():
    """Zones {1,2,3,4} and {5,6} are walked "Node 1, Node 5, Node 2, Node 6, Node 3, Node 4"
    (Kubernetes docs: Scheduler Performance Tuning)."""
    c = Cache()
    for i in (1, 2, 3, 4):
        c.add_node(MakeNode().name(f"node-{i}").allocatable(cpu="4", memory="8Gi", pods="110")
                   .label("topology.kubernetes.io/zone", "zone-1").obj())
    for i in (5, 6):
        c.add_node(MakeNode().name(f"node-{i}").allocatable(cpu="4", memory="8Gi", pods="110")
                   .label("topology.kubernetes.io/zone", "zone-2").obj())
    snap = Snapshot()
    c.update_snapshot(snap)
    assert [ni.name for ni in snap.node_infos()] == ["node-1", "node-5", "node-2", "node-6", "node-3", "node-4"]


def test_pods_of_a_node_not_seen_yet_wait_for_it():
    c = Cache()
    c.add_pod(MakePod().name("early").uid("uid-early").req(cpu="1").node("late-node").obj())
    snap = Snapshot()
    c.update_snapshot(snap)
    assert snap.num_nodes() == 0
    c.add_node(MakeNode().name("late-node").allocatable(cpu="4", memory="8Gi", pods="110").obj())
    c.update_snapshot(snap)
    assert snap.get("late-node").requested.milli_cpu == 1000
