"""Pod preemption as the Kubernetes preemption design ("Pod Preemption in Kubernetes") and Kubernetes docs:
Pod Priority and Preemption describe it, on real processes: etcd, the apiserver, the scheduler and two nodes
(kubelet + fake runtime each) of 10 CPUs.

The document's "units of resources" are CPUs; its priorities are PriorityClasses ``priority-<value>``.
Its grace periods are divided by six (pod A: 60 s -> 10 s, pod B: 30 s -> 5 s) and every victim's
container really takes its whole grace period to exit after SIGTERM (``kplane.dev/shutdown-seconds``),
so what the document says happens "while pods A and B are in their graceful termination period" has
that window to happen in. (Not by ten: the scheduler's back-off, 1 s after a first failure, flushed
every second, is not scaled, and must stay small beside B's grace period as it is beside 30 s.)
Examples set on "only 1 node" cordon node-2 (the scheduler's message then says so: "1 node(s) were
unschedulable").

The order of what happened is read from the cluster's history at the end of each test (the revision at
which a pod was nominated, bound, marked for deletion, deleted; the revisions of its events), so the
assertions state the document's sequence, never a duration. After each test ``kplane check`` must pass
(no pod bound twice, no node over-allocated, every preemption victim of lower priority than its
preemptor).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from machinery import timeutil
from machinery.api import core_pb2
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod, make_pdb, make_priority_class
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.wait import condition, eventually, wait_deleted

pytestmark = pytest.mark.scenario

NODE_1, NODE_2 = "node-1", "node-2"
SHUTDOWN_SECONDS = "kplane.dev/shutdown-seconds"
GRACE_A, GRACE_B = 10, 5  # the document's 60 s and 30 s
# How long a wait may take before the test gives up: the longest grace period plus the scheduler's
# maximum back-off (10 s), several times over, so a slow machine does not fail a test.
WAIT = 60

preemption_cluster = cluster_fixture(nodes=2, schedulers=1, node_cpu="10", node_memory="8Gi",
                                     kubelet_args=FAST_KUBELET)


# ------------------------------------------------------------------------------------------ fixtures


@pytest.fixture
async def api(preemption_cluster):
    """A client; afterwards every pod, budget and priority class goes, the nodes are uncordoned, and
    ``kplane check`` must find the whole history so far valid."""
    c = preemption_cluster.client()
    try:
        yield c
    finally:
        try:
            await delete_all_pods(c)
            for pdb in (await c.pod_disruption_budgets.list("default")).items:
                await c.pod_disruption_budgets.delete(pdb.metadata.name, "default")
            for pc in (await c.priority_classes.list()).items:
                if pc.metadata.name.startswith("priority-"):
                    await c.priority_classes.delete(pc.metadata.name)
            for node in (NODE_1, NODE_2):
                await c.nodes.patch(node, {"spec": {"unschedulable": None}}, patch_type="merge")
        finally:
            await c.close()
    check = preemption_cluster.kplane("check")
    assert check.returncode == 0, f"kplane check failed:\n{check.stdout}{check.stderr}"


# ------------------------------------------------------------------------------------------ building


async def _priority_classes(api, *values: int, never: tuple[int, ...] = ()) -> None:
    for v in values:
        await api.priority_classes.create(make_priority_class(f"priority-{v}", v))
    for v in never:
        await api.priority_classes.create(make_priority_class(f"priority-{v}-never", v, preemption_policy="Never"))


async def _cordon(api, node: str) -> None:
    await api.nodes.patch(node, {"spec": {"unschedulable": True}}, patch_type="merge")


# ------------------------------------------------------------------------------------------ waiting


async def _pod_until(api, name: str, pred, what: str, timeout: float = WAIT) -> core_pb2.Pod:
    box: dict = {}

    async def check():
        box["pod"] = pod = await api.pods.get(name)
        return pred(pod)

    try:
        await eventually(check, timeout=timeout, interval=0.1, what=what)
    except AssertionError:
        raise AssertionError(f"{what}; last seen: {_brief(box.get('pod'))}") from None
    return box["pod"]


def _brief(pod: core_pb2.Pod | None) -> str:
    if pod is None:
        return "nothing"
    sched = condition(pod, "PodScheduled")
    return (f"{pod.metadata.name} node={pod.spec.node_name!r} nominated={pod.status.nominated_node_name!r} "
            f"phase={pod.status.phase} deleting={bool(pod.metadata.deletion_timestamp)} "
            f"scheduled={(sched.status, sched.reason, sched.message) if sched else None}")


def _running(pod: core_pb2.Pod) -> bool:
    return pod.status.phase == "Running" and bool(pod.status.container_statuses) and \
        all(cs.ready for cs in pod.status.container_statuses)


async def _all_running(api, *names: str) -> None:
    for n in names:
        await _pod_until(api, n, _running, f"{n} running")


async def _nominated(api, name: str, node: str) -> core_pb2.Pod:
    return await _pod_until(api, name, lambda p: p.status.nominated_node_name == node, f"{name} nominated to {node}")


async def _bound_and_running(api, name: str, node: str) -> core_pb2.Pod:
    return await _pod_until(api, name, lambda p: p.spec.node_name == node and _running(p),
                            f"{name} bound to {node} and running")


async def _unschedulable(api, name: str, message: str | None = None) -> core_pb2.Pod:
    """Until the pod carries PodScheduled=False, reason Unschedulable (with ``message``, if given)."""
    def pred(p):
        c = condition(p, "PodScheduled")
        return (not p.spec.node_name and c is not None and c.status == "False" and c.reason == "Unschedulable"
                and (message is None or c.message == message))
    return await _pod_until(api, name, pred, f"{name} unschedulable" + (f" with {message!r}" if message else ""))


async def _gone(api, name: str, timeout: float = WAIT) -> None:
    await wait_deleted(api, name, timeout)


# ------------------------------------------------------------------------------------------ what happened


@dataclass
class Life:
    """One pod's life as the cluster's history recorded it (revisions)."""

    uid: str = ""
    nominations: list[tuple[int, str]] = field(default_factory=list)  # every change of nominatedNodeName
    bound: tuple[int, str] | None = None  # (rev, node) spec.nodeName first set
    terminating: int | None = None  # deletionTimestamp first set
    # Its containers all stopped: the kubelet reported a terminal phase (the scheduler, which watches only
    # pods not finished, counts its room free from then on), or, failing that, it was deleted.
    terminated: int | None = None
    deleted: int | None = None
    disruption_target: tuple[int, core_pb2.PodCondition] | None = None
    scheduled_conditions: list[tuple[int, str, str]] = field(default_factory=list)  # (rev, reason, message)
    events: list[tuple[int, core_pb2.Event]] = field(default_factory=list)  # every write of its events
    last: core_pb2.Pod | None = None

    def event_writes(self, reason: str) -> list[tuple[int, core_pb2.Event]]:
        return [(rev, e) for rev, e in self.events if e.reason == reason]

    def nominated_nodes(self) -> list[str]:
        return [n for _, n in self.nominations]


class Scene:
    """The pods one test created (by name, uid kept, as names repeat across tests) and their history."""

    def __init__(self, api):
        self.api = api
        self.uids: dict[str, str] = {}

    async def create(self, *pods: core_pb2.Pod) -> None:
        for pod in pods:
            created = await self.api.pods.create(pod)
            self.uids[pod.metadata.name] = created.metadata.uid

    async def lives(self) -> dict[str, Life]:
        by_uid = {uid: name for name, uid in self.uids.items()}
        lives = {name: Life(uid=uid) for name, uid in self.uids.items()}
        async for resp in self.api.history(since=0, follow=False):
            for e in resp.entries:
                if e.kind == "Pod" and e.namespace == "default":
                    pod = core_pb2.Pod()
                    e.object.Unpack(pod)
                    name = by_uid.get(pod.metadata.uid)
                    if name is not None:
                        _observe_pod(lives[name], e.rev, e.type, pod)
                elif e.kind == "Event" and e.type != "DELETED":
                    ev = core_pb2.Event()
                    e.object.Unpack(ev)
                    name = by_uid.get(ev.involved_object.uid)
                    if name is not None:
                        lives[name].events.append((e.rev, ev))
        return lives

    async def events(self, name: str, reason: str) -> list[core_pb2.Event]:
        got = await self.api.events.list("default", field_selector=f"involvedObject.name={name}")
        return [e for e in got.items if e.involved_object.uid == self.uids[name] and e.reason == reason]

    async def wait_event(self, name: str, reason: str) -> list[core_pb2.Event]:
        box: dict = {}

        async def check():
            box["events"] = await self.events(name, reason)
            return bool(box["events"])

        await eventually(check, timeout=WAIT, interval=0.1, what=f"a {reason} event for {name}")
        return box["events"]


def _observe_pod(life: Life, rev: int, type_: str, pod: core_pb2.Pod) -> None:
    if type_ == "DELETED":
        life.deleted = rev
        if life.terminated is None:
            life.terminated = rev
        return
    if life.terminated is None and pod.status.phase in ("Succeeded", "Failed"):
        life.terminated = rev
    life.last = pod
    nominated = pod.status.nominated_node_name
    if (life.nominations[-1][1] if life.nominations else "") != nominated:
        life.nominations.append((rev, nominated))
    if life.bound is None and pod.spec.node_name:
        life.bound = (rev, pod.spec.node_name)
    if life.terminating is None and pod.metadata.deletion_timestamp:
        life.terminating = rev
    target = condition(pod, "DisruptionTarget")
    if life.disruption_target is None and target is not None:
        life.disruption_target = (rev, target)
    sched = condition(pod, "PodScheduled")
    if sched is not None and sched.status == "False":
        if not life.scheduled_conditions or life.scheduled_conditions[-1][1:] != (sched.reason, sched.message):
            life.scheduled_conditions.append((rev, sched.reason, sched.message))


async def _assert_preempted_by(scene: Scene, victim: str, preemptor: str, node: str) -> None:
    """The preemption design, "Scheduler performs preemption": the victim is marked (DisruptionTarget, reason
    PreemptionByScheduler), then deleted gracefully, with a Preempted event naming its preemptor."""
    events = await scene.wait_event(victim, "Preempted")
    assert [(e.message, e.count) for e in events] == [(f"Preempted by pod {scene.uids[preemptor]} on node {node}", 1)]
    assert events[0].related.name == preemptor and events[0].type == "Normal"


def _assert_marked_then_deleted_gracefully(life: Life, grace: int) -> None:
    assert life.disruption_target is not None, "the victim never got the DisruptionTarget condition"
    rev, target = life.disruption_target
    assert (target.status, target.reason) == ("True", "PreemptionByScheduler")
    assert target.message == "default-scheduler: preempting to accommodate a higher priority pod"
    assert life.terminating is not None and rev <= life.terminating, "deleted before it was marked"
    assert life.deleted is not None
    last = life.last
    assert last.metadata.deletion_grace_period_seconds == grace, "not deleted with its own grace period"
    # Its container exited by itself within the grace period (SIGTERM honoured), not killed at its end.
    states = [cs.state.terminated for cs in last.status.container_statuses if cs.state.HasField("terminated")]
    assert states and all(t.exit_code == 0 for t in states), f"not a graceful exit: {last.status.container_statuses}"


# ------------------------------------------------------------------ the preemption design, "Preemption order"


async def test_001_preemption_order_preempts_only_the_priority_2_pod(api):
    """The preemption design, "Important notes": "if node capacity is 10, and pending pod is priority 10 and
    requires 5 units of resource, and the running pods are {priority 0 request 3, priority 1 request 1,
    priority 2 request 5, priority 3 request 1}, scheduler will preempt the priority 2 pod only and leaves
    priority 1 and priority 0 running."
    """
    s = Scene(api)
    await _cordon(api, NODE_2)
    await _priority_classes(api, 0, 1, 2, 3, 10)
    await s.create(MakePod().name("p0").req(cpu="3").priority_class("priority-0").node(NODE_1).grace(2)
                   .annotation(SHUTDOWN_SECONDS, "2").obj(),
                   MakePod().name("p1").req(cpu="1").priority_class("priority-1").node(NODE_1).grace(2)
                   .annotation(SHUTDOWN_SECONDS, "2").obj(),
                   MakePod().name("p2").req(cpu="5").priority_class("priority-2").node(NODE_1).grace(2)
                   .annotation(SHUTDOWN_SECONDS, "2").obj(),
                   MakePod().name("p3").req(cpu="1").priority_class("priority-3").node(NODE_1).grace(2)
                   .annotation(SHUTDOWN_SECONDS, "2").obj())
    await _all_running(api, "p0", "p1", "p2", "p3")

    await s.create(MakePod().name("pending").req(cpu="5").priority_class("priority-10").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _nominated(api, "pending", NODE_1)
    await _assert_preempted_by(s, "p2", "pending", NODE_1)
    await _bound_and_running(api, "pending", NODE_1)
    await s.wait_event("pending", "Scheduled")

    for name in ("p0", "p1", "p3"):
        pod = await api.pods.get(name)
        assert _running(pod) and not pod.metadata.deletion_timestamp, f"{name} was disturbed: {_brief(pod)}"
        assert not await s.events(name, "Preempted")
    lives = await s.lives()
    _assert_marked_then_deleted_gracefully(lives["p2"], 2)
    assert lives["pending"].bound[0] > lives["p2"].terminated, "bound before its victim was gone"
    assert lives["pending"].nominated_nodes() == [NODE_1]
    scheduled = await s.events("pending", "Scheduled")
    assert [e.message for e in scheduled] == [f"Successfully assigned default/pending to {NODE_1}"]
    # The attempt that preempted: PodScheduled=False, reason Unschedulable, kube-scheduler's message, and the
    # same in a FailedScheduling event.
    first = ("Unschedulable", "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable.")
    assert lives["pending"].scheduled_conditions[0][1:] == first
    failed = lives["pending"].event_writes("FailedScheduling")
    assert failed[0][1].message == first[1] and failed[0][1].type == "Warning"


# ------------------------------------------------------------------------ the preemption design, Examples 1-4

# The messages the scheduler gives C and D, kube-scheduler's "0/N nodes are available: ..." with the
# preemption's own verdict after "preemption: ".
ONE_NODE_FULL = "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were unschedulable."
C_WAITS_FOR_ITS_VICTIMS = ONE_NODE_FULL + " preemption: not eligible due to a terminating pod on the nominated node."
D_CANNOT_PREEMPT = ONE_NODE_FULL + (" preemption: 0/2 nodes are available: 1 No preemption victims found for incoming "
                                    "pod, 1 Preemption is not helpful for scheduling.")


async def _a_and_b_running_on_node_1(s: Scene) -> None:
    """"There are two pods, A and B, running on the node. Both have priority 100 and each use 5 units of
    resources. Pod A has 60 seconds of graceful termination period and pod B has 30 seconds." """
    await s.create(MakePod().name("a").req(cpu="5").priority_class("priority-100").node(NODE_1).grace(GRACE_A)
                   .annotation(SHUTDOWN_SECONDS, str(GRACE_A)).obj(),
                   MakePod().name("b").req(cpu="5").priority_class("priority-100").node(NODE_1).grace(GRACE_B)
                   .annotation(SHUTDOWN_SECONDS, str(GRACE_B)).obj())
    await _all_running(s.api, "a", "b")


async def _c_and_d_queued(s: Scene) -> None:
    """"Scheduler has two pods, C and D, in its queue. Pod C needs 10 units of resources and its priority is
    1000. Pod D needs 2 units of resources and its priority is 50." """
    await s.create(MakePod().name("c").req(cpu="10").priority_class("priority-1000").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj(),
                   MakePod().name("d").req(cpu="2").priority_class("priority-50").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())


def _writes_between(life: Life, reason: str, after: int, before: int) -> list[int]:
    return [rev for rev, _ in life.event_writes(reason) if after < rev < before]


async def test_001_example_1_c_nominated_to_node_1_and_d_pending_behind_the_nomination(api):
    """The preemption design's Example 1: one node of 10 runs A and B (priority 100, 5 each); C (1000, needs
    10) preempts both and is nominated; D (50, needs 2) waits behind C's nomination even once B is gone, and
    after C."""
    s = Scene(api)
    await _cordon(api, NODE_2)  # "There is only 1 node (other than the master) in the cluster."
    await _priority_classes(api, 50, 100, 1000)
    await _a_and_b_running_on_node_1(s)
    await _c_and_d_queued(s)

    # "scheduler preempts both of pods A and B and sets the nominated node name of C to Node 1. Pod D cannot
    # be scheduled anywhere."
    await _nominated(api, "c", NODE_1)
    await _assert_preempted_by(s, "a", "c", NODE_1)
    await _assert_preempted_by(s, "b", "c", NODE_1)
    await _unschedulable(api, "d", D_CANNOT_PREEMPT)

    # "After 60 seconds (or less) pod A also terminates and scheduler schedules pod C on the node. Scheduler
    # then looks at pod D, but it cannot be scheduled."
    await _gone(api, "a")
    await _bound_and_running(api, "c", NODE_1)
    d = await _unschedulable(api, "d", D_CANNOT_PREEMPT)
    assert d.status.nominated_node_name == ""

    lives = await s.lives()
    a, b, c, d = (lives[n] for n in "abcd")
    _assert_marked_then_deleted_gracefully(a, GRACE_A)
    _assert_marked_then_deleted_gracefully(b, GRACE_B)
    # "After 30 seconds (or less) pod B terminates and 5 units of resources become available."
    assert b.terminated < a.terminated
    # "Scheduler looks at pod C, but it cannot be scheduled yet. Pod C has a nominated node name so it won't
    # cause more preemption." C is bound only once A is gone too, keeps its nomination, and preempts no one else.
    assert c.bound[0] > a.terminated
    assert c.nominated_nodes() == [NODE_1]
    assert any(m == C_WAITS_FOR_ITS_VICTIMS and rev < a.terminated for rev, _, m in c.scheduled_conditions), \
        c.scheduled_conditions
    assert [n for n, life in lives.items() if life.event_writes("Preempted")] == ["a", "b"]
    # "Scheduler tries to schedule pod D, but since pod C in unschedulable list has higher priority than D,
    # scheduler assumes that it is bound to Node 1 when it evaluates feasibility of pod D." D was tried again
    # after B had freed 5 units and before A was gone, and did not fit; it never ran anywhere.
    assert _writes_between(d, "FailedScheduling", b.terminated, a.terminated), \
        "D was not tried while only C's nomination held node 1"
    # "Scheduler then looks at pod D, but it cannot be scheduled": once A is gone, D is tried again.
    assert [rev for rev, _ in d.event_writes("FailedScheduling") if rev > a.terminated], \
        "D was not tried again once A was gone"
    assert d.bound is None and d.nominated_nodes() == []


async def test_001_example_2_c_lands_on_node_2_ignoring_its_nomination_and_d_later_on_node_1(api):
    """The preemption design's Example 2: as Example 1 with a second node, full with E (priority 2000, 10
    units); E terminates while A and B do, and C goes to node 2 instead of its nominated node 1; D then takes
    node 1."""
    s = Scene(api)
    await _priority_classes(api, 50, 100, 1000, 2000)
    # "Node 2 is running pod E with priority 2000 and request of 10 units." (It exits as soon as asked to.)
    await s.create(MakePod().name("e").req(cpu="10").priority_class("priority-2000").node(NODE_2).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _a_and_b_running_on_node_1(s)
    await _all_running(api, "e")
    await _c_and_d_queued(s)

    # "scheduler preempts pods A and B on Node 1 and sets the nominated node name of pod C to Node 1. Pod D
    # cannot be scheduled anywhere."
    await _nominated(api, "c", NODE_1)
    await _assert_preempted_by(s, "a", "c", NODE_1)
    await _assert_preempted_by(s, "b", "c", NODE_1)
    await _unschedulable(api, "d")

    # "While waiting for the graceful termination of pods A and B, pod E terminates on Node 2."
    await api.pods.delete("e")
    # "scheduler finds Node 2 available for pod C. It schedules pod C on Node 2 (ignoring its nominated node
    # name)."
    await _bound_and_running(api, "c", NODE_2)
    # "After 30 seconds (or less) pod B terminates. A scheduler pass is triggered and scheduler schedules pod D
    # on Node 1."
    await _bound_and_running(api, "d", NODE_1)
    await _gone(api, "a")

    lives = await s.lives()
    a, b, c, d, e = (lives[n] for n in "abcde")
    assert e.terminated < b.terminated, "E did not terminate while A and B were terminating"
    assert c.bound[0] < b.terminated, "C was not bound to node 2 while A and B were still terminating"
    assert c.nominated_nodes() == [NODE_1]
    # "D cannot be scheduled. It goes back to unschedulable list." — E's termination brought it back
    # (as it did C), it failed again, and it waited until B was gone.
    assert _writes_between(d, "FailedScheduling", e.terminated, b.terminated), "D was not tried when E went"
    assert d.bound[0] > b.terminated
    # "Important note: This may make an observer think that scheduler preempted pod B to schedule pod D which
    # has a lower priority. Looking at the sequence of events and the fact that pod D's nominated node name is
    # not set to Node 1 may help remove the confusion." The Preempted events name C, and D was never nominated.
    assert d.nominated_nodes() == []
    for victim in (a, b):
        assert [ev.related.name for _, ev in victim.event_writes("Preempted")] == ["c"]
    assert not d.event_writes("Preempted") and not c.event_writes("Preempted")
    assert [ev.message for _, ev in d.event_writes("Scheduled")] == [f"Successfully assigned default/d to {NODE_1}"]


async def test_001_example_3_d_binds_on_node_2_while_a_and_b_terminate(api):
    """The preemption design's Example 3: as Example 2 but E uses 8 units: D fits node 2 at once, while C
    waits for A and B."""
    s = Scene(api)
    await _priority_classes(api, 50, 100, 1000, 2000)
    # "pod E uses 8 units of resources. So, 2 units of resources are available on Node 2."
    await s.create(MakePod().name("e").req(cpu="8").priority_class("priority-2000").node(NODE_2).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj())
    await _a_and_b_running_on_node_1(s)
    await _all_running(api, "e")
    await _c_and_d_queued(s)

    # "scheduler preempts pods A and B and sets the future node of pod C to Node 1."
    await _nominated(api, "c", NODE_1)
    await _assert_preempted_by(s, "a", "c", NODE_1)
    await _assert_preempted_by(s, "b", "c", NODE_1)
    # "Scheduler looks at pod D in the queue. Pod D can fit on Node 2."
    await _bound_and_running(api, "d", NODE_2)
    await _bound_and_running(api, "c", NODE_1)

    lives = await s.lives()
    a, b, c, d = (lives[n] for n in "abcd")
    # "Scheduler goes ahead and binds pod D to Node 2 while pods A and B are in their graceful termination
    # period and pod C is not bound yet." D's turn came once C was nominated, and it did not wait for A or B
    # (the scheduler evicts victims in the background, KEP-4832, so their deletion and D's binding may
    # land in either order).
    assert c.nominations[0][0] < d.bound[0] < b.terminated < a.terminated
    assert d.bound[0] < c.bound[0]
    assert c.bound[0] > a.terminated
    assert d.nominated_nodes() == [] and c.nominated_nodes() == [NODE_1]
    assert _running(await api.pods.get("e"))


async def test_001_example_4_f_takes_node_1_and_c_loses_its_nomination(api):
    """The preemption design's Example 4 (and Kubernetes docs: Pod Priority and Preemption, "User exposed
    information"): as Example 1, then F of higher priority arrives while A and B terminate; F takes node 1's
    nomination, C loses its own; F binds, C and D wait."""
    s = Scene(api)
    await _cordon(api, NODE_2)
    await _priority_classes(api, 50, 100, 1000, 2000)
    await _a_and_b_running_on_node_1(s)
    await _c_and_d_queued(s)
    await _nominated(api, "c", NODE_1)
    await _assert_preempted_by(s, "a", "c", NODE_1)
    await _assert_preempted_by(s, "b", "c", NODE_1)

    # "while scheduler is waiting for pods A and B to gracefully terminate, a new higher priority pod F is
    # created and goes to the head of the queue."
    await s.create(MakePod().name("f").req(cpu="10").priority_class("priority-2000").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    # "Scheduler evaluates the feasibility of pod F and determines that it can be scheduled on Node 1. So, it
    # sets the nominated node name of pod F to Node 1 ... Scheduler clears nominated node name of C"
    await _nominated(api, "f", NODE_1)
    await _nominated(api, "c", "")
    # "Eventually when pods A and B terminate, pod F is bound to Node 1 and pods C and D remain unschedulable."
    await _bound_and_running(api, "f", NODE_1)
    await _gone(api, "a")
    await _unschedulable(api, "d")

    lives = await s.lives()
    a, b, c, d, f = (lives[n] for n in "abcdf")
    assert b.terminating < f.nominations[0][0] < b.terminated, "F was not nominated while A and B were terminating"
    # C's nomination went while A and B were terminating: F's preemption cleared it (not C's own later
    # failure to find a node).
    assert [n for _, n in c.nominations] == [NODE_1, ""]
    assert c.nominations[1][0] < b.terminated
    # "C is evaluated for scheduling, but it cannot be scheduled as pod F's nominated node name is set to Node
    # 1." Even removing every pod of lower priority than C from node 1 leaves no room: F holds it.
    f_holds_node_1 = ONE_NODE_FULL + (" preemption: 0/2 nodes are available: 1 Insufficient cpu, 1 Preemption is "
                                      "not helpful for scheduling.")
    assert any(m == f_holds_node_1 and rev < f.bound[0] for rev, _, m in c.scheduled_conditions), \
        c.scheduled_conditions
    # "When B terminates, scheduler brings F, C, and D back to the scheduling queue. F is evaluated first. They
    # cannot be scheduled."
    retried = [min(_writes_between(life, "FailedScheduling", b.terminated, a.terminated), default=None)
               for life in (f, c, d)]
    assert None not in retried and retried == sorted(retried), f"F, C, D retried after B at revisions {retried}"
    assert f.nominated_nodes() == [NODE_1]
    assert f.bound[0] > a.terminated and f.bound[0] > b.terminated
    # F's victims were already terminating: no one else was preempted, and no one twice.
    assert [n for n, life in lives.items() if life.event_writes("Preempted")] == ["a", "b"]
    assert all(len(lives[n].event_writes("Preempted")) == 1 for n in "ab")
    assert c.bound is None and d.bound is None
    for name in "cd":
        pod = await api.pods.get(name)
        assert not pod.spec.node_name and pod.status.nominated_node_name == "", _brief(pod)


# --------------------------------------------- Kubernetes docs: Pod Priority and Preemption, preemptionPolicy


async def _back_off_over(s: Scene, *names: str) -> None:
    """Until each pod's back-off after its last attempt has passed (1 s doubling per attempt, at most
    10 s: kube-scheduler's podInitialBackoffSeconds/podMaxBackoffSeconds), as its FailedScheduling
    events tell (count: attempts; lastTimestamp: the last one, to the second)."""
    async def over():
        for name in names:
            events = await s.events(name, "FailedScheduling")
            if not events:
                return False
            attempts = sum(e.count for e in events)
            last = max(timeutil.parse(e.last_timestamp) for e in events)
            wait = min(2 ** (attempts - 1), 10) + 1  # + 1: lastTimestamp is truncated to the second
            if (timeutil.now() - last).total_seconds() <= wait:
                return False
        return True

    await eventually(over, timeout=WAIT, interval=0.2, what=f"back-off of {', '.join(names)} over")


async def test_004_preemption_policy_never_queued_ahead_but_never_preempts(api):
    """Kubernetes docs: Pod Priority and Preemption, "Non-preempting PriorityClass": "Pods with
    preemptionPolicy: Never will be placed in the scheduling queue ahead of lower-priority pods, but they
    cannot preempt other pods. A non-preempting pod waiting to be scheduled will stay in the scheduling queue,
    until sufficient resources are free, and it can be scheduled." """
    s = Scene(api)
    await _cordon(api, NODE_2)
    await _priority_classes(api, 0, never=(1000,))
    await s.create(MakePod().name("running-1").req(cpu="5").priority_class("priority-0").node(NODE_1).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj(),
                   MakePod().name("running-2").req(cpu="5").priority_class("priority-0").node(NODE_1).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj())
    await _all_running(api, "running-1", "running-2")
    # A lower-priority pod queued first, then the non-preempting one.
    await s.create(MakePod().name("low").req(cpu="5").priority_class("priority-0").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _unschedulable(api, "low", D_CANNOT_PREEMPT)
    await s.create(MakePod().name("never").req(cpu="5").priority_class("priority-1000-never").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    not_eligible = ONE_NODE_FULL + " preemption: not eligible due to preemptionPolicy=Never."
    never = await _unschedulable(api, "never", not_eligible)
    assert never.spec.priority == 1000 and never.spec.preemption_policy == "Never"
    assert never.status.nominated_node_name == ""
    failed = await s.wait_event("never", "FailedScheduling")
    assert failed[0].message == not_eligible

    # Both wait, neither has preempted anything.
    await _back_off_over(s, "low", "never")
    for name in ("running-1", "running-2"):
        pod = await api.pods.get(name)
        assert _running(pod) and not pod.metadata.deletion_timestamp, _brief(pod)

    # "as soon as sufficient cluster resources "naturally" become free": the non-preempting pod is scheduled
    # ahead of the lower-priority pod that was queued before it.
    await api.pods.delete("running-1")
    await _bound_and_running(api, "never", NODE_1)
    low = await _unschedulable(api, "low")
    assert low.status.nominated_node_name == ""

    lives = await s.lives()
    assert not any(life.event_writes("Preempted") for life in lives.values())
    assert lives["never"].nominated_nodes() == []
    assert lives["low"].bound is None
    assert lives["never"].bound[0] > lives["running-1"].terminated


# -------------------------------------------------------------------------- the preemption design, BestEffort


async def test_001_a_best_effort_pod_is_never_a_victim_for_resources(api):
    """The preemption design, "Important notes": "scheduler will never preempt a Best Effort pod to make more
    resources available. That's because the requests of Best Effort pods is zero". Its "Preemption - Eviction
    workflow" example, in CPUs: a node of 10 runs a burstable pod requesting a quarter of it and a best effort
    pod, both of priority 100; a pod of priority 200 asks for the whole node. "Scheduler preempts the
    burstable pod and schedules the high priority pending pod on the node." """
    s = Scene(api)
    await _cordon(api, NODE_2)
    await _priority_classes(api, 100, 200)
    await s.create(MakePod().name("best-effort").priority_class("priority-100").node(NODE_1).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj(),
                   MakePod().name("burstable").req(cpu="2500m").priority_class("priority-100").node(NODE_1).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj())
    await _all_running(api, "best-effort", "burstable")
    assert (await api.pods.get("best-effort")).status.qos_class == "BestEffort"
    assert (await api.pods.get("burstable")).status.qos_class == "Burstable"

    await s.create(MakePod().name("high").req(cpu="10").priority_class("priority-200").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _assert_preempted_by(s, "burstable", "high", NODE_1)
    await _bound_and_running(api, "high", NODE_1)

    be = await api.pods.get("best-effort")
    assert _running(be) and not be.metadata.deletion_timestamp, _brief(be)
    lives = await s.lives()
    assert not lives["best-effort"].event_writes("Preempted")
    assert lives["best-effort"].disruption_target is None
    _assert_marked_then_deleted_gracefully(lives["burstable"], 1)


# ----------------------------------------------------------------- the preemption design, PodDisruptionBudget


async def _guarded(api, s: Scene, cpu: str, priority: int, node: str) -> None:
    """A pod whose PodDisruptionBudget (minAvailable 1 of 1) allows no disruption."""
    await api.pod_disruption_budgets.create(make_pdb("guarded", {"app": "guarded"}, min_available="1"))
    await s.create(MakePod().name("guarded").labels({"app": "guarded"}).req(cpu=cpu)
                   .priority_class(f"priority-{priority}").node(node).grace(1).annotation(SHUTDOWN_SECONDS, "1").obj())


async def test_001_pdb_a_protected_pod_is_spared_when_another_node_works(api):
    """The preemption design, "Supporting PodDisruptionBudget": "In scoring nodes and choosing one for
    preemption, the number of pods whose PDBs are violated will be the most significant metric." Node 1's only
    pod is of the lowest priority (the node the scheduler would pick without budgets) but protected; node 2's
    is not."""
    s = Scene(api)
    await _priority_classes(api, 1, 2, 10)
    await _guarded(api, s, "10", 1, NODE_1)
    await s.create(MakePod().name("plain").req(cpu="10").priority_class("priority-2").node(NODE_2).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj())
    await _all_running(api, "guarded", "plain")

    await s.create(MakePod().name("preemptor").req(cpu="10").priority_class("priority-10").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _nominated(api, "preemptor", NODE_2)
    await _assert_preempted_by(s, "plain", "preemptor", NODE_2)
    await _bound_and_running(api, "preemptor", NODE_2)

    guarded = await api.pods.get("guarded")
    assert _running(guarded) and not guarded.metadata.deletion_timestamp, _brief(guarded)
    lives = await s.lives()
    assert not lives["guarded"].event_writes("Preempted")
    assert lives["preemptor"].nominated_nodes() == [NODE_2]


async def test_001_pdb_a_protected_pod_is_preempted_when_nothing_else_works(api):
    """The preemption design, "Supporting PodDisruptionBudget": "When choosing victims on any evaluated node,
    preemption logic will try to reprieve pods whose PDBs are violated first" — and "if it doesn't find any
    lower priority pod to preempt without violating PDB, it goes ahead and preempts victims despite violating
    PDB." (Kubernetes docs: Pod Priority and Preemption: "respecting PDB is best effort".)"""
    s = Scene(api)
    await _cordon(api, NODE_2)
    await _priority_classes(api, 1, 2, 10, 20)
    await _guarded(api, s, "5", 1, NODE_1)
    await s.create(MakePod().name("plain").req(cpu="5").priority_class("priority-2").node(NODE_1).grace(1)
                   .annotation(SHUTDOWN_SECONDS, "1").obj())
    await _all_running(api, "guarded", "plain")

    # 5 units are needed: the protected pod, of lower priority, is reprieved first; the other one goes.
    await s.create(MakePod().name("first").req(cpu="5").priority_class("priority-10").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _assert_preempted_by(s, "plain", "first", NODE_1)
    await _bound_and_running(api, "first", NODE_1)
    assert not await s.events("guarded", "Preempted")

    # 10 units are needed: nothing can be spared, the budget is violated.
    await s.create(MakePod().name("second").req(cpu="10").priority_class("priority-20").grace(0)
                   .annotation(SHUTDOWN_SECONDS, "0").obj())
    await _assert_preempted_by(s, "guarded", "second", NODE_1)
    await _assert_preempted_by(s, "first", "second", NODE_1)
    await _bound_and_running(api, "second", NODE_1)

    lives = await s.lives()
    _assert_marked_then_deleted_gracefully(lives["guarded"], 1)
    assert lives["second"].bound[0] > max(lives["guarded"].terminated, lives["first"].terminated)
