"""KEP-5836: Scheduler Preemption for In-Place Pod Resize — a preemption victim whose grace period
exceeds the resizer's time window, on real processes: etcd, the apiserver, the scheduler and one
node (kubelet + fake runtime) of 4 CPUs, the gate SchedulerPreemptionForPodResize on in every
component.

The KEP's Beta criterion: "Address scenarios where a preemption victim's grace period exceeds the
time window allocated for executing the resize operation (such as VPA's fallback time limit)",
and "Tracking Preemption Nominations to Avoid Double Preemption", whose "Long Grace Periods"
scenario has "other node activity" make the scheduler re-evaluate the Deferred pod while its
victim terminates. kplane has two of the document's options, DefaultPreemption's
``deferredResizeNomination`` arg, one cluster each:

- Option 1, "Accept Double Preemption (Alpha Decision)" (the default config);
- Option 4, "Check Pod spec.nodeName in DefaultPreemption" (``deferredResizeNomination:
  SpecNodeName`` in a scheduler config file).

The case (docs/kep5836.md runs it at full scale: grace 60 s, revert after 10 s, trigger at 5 s,
re-request at 20 s; here every time is divided by five): ``a`` (priority 1000, 2 CPUs), ``b``
(priority 20, 1 CPU) and the victim ``v`` (priority 10, 1 CPU, terminationGracePeriodSeconds 12,
a container that really takes 12 s to exit after SIGTERM) fill the node. A VPA-like autoscaler
asks ``a`` for 3 CPUs; the kubelet Defers it; the scheduler preempts ``v`` (the lowest priority);
after 2 s the autoscaler gives up and reverts ``a`` to 2 CPUs. What the tests assert, as observed:

- under both options ``v`` is lost: evictions already issued are not rolled back, it is deleted
  once its grace period is over (not before) and it is the only victim; ``a``'s resize is never
  actuated (no revision of ``a`` shows 3 CPUs allocated or running), ``a`` ends with no
  PodResizePending and leaves the scheduler's queue after the revert
  (``scheduler_pending_resize_pods`` 0);
- with nothing else happening on the node the two options cannot be told apart: one preemption
  attempt;
- a trigger at 1 s (``b`` scaled down to 500m: NodeResourcesFit's hint "a pod scale-down may free
  resources" brings ``a`` back while ``v`` terminates): under Option 4 ``a`` gets the
  FailedScheduling "... preemption: not eligible due to a terminating pod on the nominated node."
  and no second preemption attempt happens; under Option 1 preemption runs again
  (``scheduler_resize_preemption_attempts_total{result="preempted"}`` counts a second one) and
  chooses ``v`` again — already going, so nobody new is marked or deleted and no second
  ``Preempted`` event is written (``b``, priority 20, is reprieved before ``v``);
- the autoscaler asking again at 4 s (a new request, a new generation) while ``v`` still goes:
  Option 4 refuses to preempt for it ("not eligible ..."), Option 1 preempts again and again
  chooses ``v``; under both the kubelet actuates 3 CPUs once ``v`` is gone, with ``v`` the only
  victim.

After each test ``kplane check`` over the whole history must pass (no ``one-victim-set-per-resize``
violation: Option 1's second choice names no new victim).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import resize
from tests.harness.history import pod_revisions
from tests.harness.metrics import metric
from tests.harness.resize_preemption import (
    OPTION_1,
    OPTION_4,
    WAIT,
    gone,
    option_clusters,
    resizable_pod,
    resize_api,
    resize_attempts,
    resize_state,
    run_pods,
    running_names,
    wait_actuated,
    wait_resize_conditions,
)
from tests.harness.wait import condition, eventually

pytestmark = pytest.mark.scenario

SHUTDOWN_SECONDS = "kplane.dev/shutdown-seconds"
GRACE = 12  # the document's case: 60 s
TRIGGER_AT = 1.0  # 5 s: b scaled down, a looked at again
REVERT_AT = 2.0  # 10 s: the autoscaler's fallback, a back to 2 CPUs
REREQUEST_AT = 4.0  # 20 s: the autoscaler asks again

NOT_ELIGIBLE = ("0/1 nodes are available: 1 Insufficient cpu. "
                "preemption: not eligible due to a terminating pod on the nominated node.")

grace_cluster = option_clusters()


@pytest.fixture
async def api(grace_cluster):
    async with resize_api(grace_cluster) as c:
        yield c


# ------------------------------------------------------------------------------------ reading


@dataclass(frozen=True)
class _Counts:
    """The scheduler's resize metrics at one moment."""

    preempted: float
    unschedulable: float
    victims: float  # observations of scheduler_resize_preemption_victims: one per victim set asked to go


def _counts(tc) -> _Counts:
    return _Counts(resize_attempts(tc, "preempted"), resize_attempts(tc, "unschedulable"),
                   metric(tc, "scheduler", "scheduler_resize_preemption_victims_count"))


def _pending(tc) -> float:
    """Pods the scheduler's queue holds for a deferred resize, in any sub-queue."""
    return metric(tc, "scheduler", "scheduler_pending_resize_pods")


def _log_size(tc) -> int:
    tc.reload()
    return Path(tc.process("scheduler").log).stat().st_size


def _chosen(tc, since: int) -> list[list[str]]:
    """The victims, by name, of each ``preemption_victims_chosen`` the scheduler logged for a's
    resize since an offset of its log."""
    tc.reload()
    out = []
    for line in Path(tc.process("scheduler").log).read_bytes()[since:].decode(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "preemption_victims_chosen" and entry.get("pod") == "default/a":
            out.append([v.split("/", 1)[1] for v in entry["victims"]])
    return out


async def _failed_scheduling(api, a_uid: str) -> list[str]:
    """The messages of a's FailedScheduling events (this pod's, not an earlier test's ``a``)."""
    evs = await api.events.list("default", field_selector="involvedObject.name=a")
    return [e.message for e in evs.items if e.reason == "FailedScheduling" and e.involved_object.uid == a_uid]


async def _preempted_events(api, uids: set[str]) -> list[core_pb2.Event]:
    return [e for e in (await api.events.list("default")).items
            if e.reason == "Preempted" and e.involved_object.uid in uids]


def _marked(pod: core_pb2.Pod) -> bool:
    c = condition(pod, "DisruptionTarget")
    return c is not None and c.status == "True" and c.reason == "PreemptionByScheduler"


def _cpu(values) -> Quantity | None:
    return Quantity(values["cpu"]) if "cpu" in values else None


# ------------------------------------------------------------------------------------ the case


@dataclass
class _Case:
    uids: dict[str, str]  # name -> uid
    t0: float  # monotonic, just before a's first resize request
    log_from: int  # the scheduler's log offset before it
    start: _Counts  # before it
    first: _Counts  # once v was chosen


async def _until(t0: float, at: float) -> None:
    await asyncio.sleep(max(0.0, t0 + at - time.monotonic()))


async def _grow(api, tc) -> _Case:
    """Fill the node, ask a for 3 CPUs: Deferred, v preempted (marked, deleted with its 12 s)."""
    await run_pods(api,
                   resizable_pod("a", "2", "p-high").obj(),
                   # v really takes its whole grace period
                   resizable_pod("v", "1", "p-lowest", GRACE).annotation(SHUTDOWN_SECONDS, str(GRACE)).obj(),
                   resizable_pod("b", "1", "p-low").obj())
    uids = {p.metadata.name: p.metadata.uid for p in (await api.pods.list("default")).items}
    start, log_from = _counts(tc), _log_size(tc)
    t0 = time.monotonic()
    await resize(api, "a", cpu="3")  # 3 + 1 + 1 > 4: the lowest, v, must go
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a's resize Deferred")

    async def v_going():
        v = await api.pods.get("v")
        return _marked(v) and bool(v.metadata.deletion_timestamp)

    await eventually(v_going, timeout=WAIT, what="v marked DisruptionTarget and being deleted")
    v = await api.pods.get("v")
    assert v.metadata.deletion_grace_period_seconds == GRACE, v.metadata
    await eventually(lambda: resize_attempts(tc, "preempted") == start.preempted + 1, timeout=WAIT,
                     what="one preemption attempt for a")
    first = _counts(tc)
    assert first == _Counts(start.preempted + 1, start.unschedulable, start.victims + 1), (start, first)
    return _Case(uids, t0, log_from, start, first)


async def _revert(api, tc, case: _Case) -> None:
    """The autoscaler's fallback: a back to 2 CPUs. The kubelet drops PodResizePending, a leaves
    the scheduler's queue; v is still going (its grace period outlasts the resizer's window)."""
    await _until(case.t0, REVERT_AT)
    await resize(api, "a", cpu="2")
    await wait_resize_conditions(api, "a", {}, "a's reverted resize: no PodResizePending")
    await eventually(lambda: _pending(tc) == 0, timeout=WAIT, what="a left the scheduler's queue")
    v = await api.pods.get("v")
    assert _marked(v) and v.metadata.deletion_timestamp, "v is still going when the autoscaler gave up"


async def _trigger(api, case: _Case) -> None:
    """b scaled down on a's node: NodeResourcesFit's hint brings a back while v terminates."""
    await _until(case.t0, TRIGGER_AT)
    await resize(api, "b", cpu="500m")
    await wait_actuated(api, "b", "500m")


async def _v_lost(api, case: _Case) -> None:
    """v deleted, not before its grace period; the only pod marked, deleted or named Preempted."""
    await gone(api, "v", timeout=WAIT)
    elapsed = time.monotonic() - case.t0
    assert elapsed >= GRACE, f"v was gone {elapsed:.1f}s after a's resize, before its {GRACE}s grace period"
    history = await pod_revisions(api, set(case.uids.values()))
    names = {uid: name for name, uid in case.uids.items()}
    marked = {names[uid] for uid, revs in history.items() if any(_marked(p) for _, _, p in revs)}
    deleting = {names[uid] for uid, revs in history.items() if any(p.metadata.deletion_timestamp for _, _, p in revs)}
    deleted = {names[uid] for uid, revs in history.items() if any(t == "DELETED" for _, t, _ in revs)}
    assert (marked, deleting, deleted) == ({"v"}, {"v"}, {"v"}), (marked, deleting, deleted)
    events = await _preempted_events(api, set(case.uids.values()))
    assert [(e.involved_object.name, e.related.name, e.count) for e in events] == [("v", "a", 1)], events


async def _a_never_actuated(api, case: _Case) -> None:
    """No revision of a shows 3 CPUs allocated or running; it ends at 2, no resize condition."""
    history = await pod_revisions(api, {case.uids["a"]})
    seen = [(rev, _cpu(cs.allocated_resources), _cpu(cs.resources.requests))
            for rev, _, p in history[case.uids["a"]] for cs in p.status.container_statuses]
    assert seen and all(q is None or q == Quantity("2") for _, *qs in seen for q in qs), seen
    a = await api.pods.get("a")
    assert resize_state(a) == {} and _cpu(a.spec.containers[0].resources.requests) == Quantity("2"), a.status


# ------------------------------------------------------------------------------------ the tests


async def test_kep5836_grace_revert_the_victim_is_lost_and_the_resize_never_actuated(api, grace_cluster):
    tc = grace_cluster
    case = await _grow(api, tc)
    await _revert(api, tc, case)
    await _v_lost(api, case)
    await _a_never_actuated(api, case)
    # Nothing else happened on the node: a was looked at again only for its revert (parked, if
    # the scheduler saw the spec before the kubelet dropped the condition), under either option.
    assert resize_attempts(tc, "preempted") == case.first.preempted
    assert resize_attempts(tc, "unschedulable") == case.first.unschedulable
    assert not [m for m in await _failed_scheduling(api, case.uids["a"]) if "not eligible" in m]
    assert _chosen(tc, case.log_from) == [["v"]]
    assert _pending(tc) == 0
    assert await running_names(api) == {"a", "b"}


async def test_kep5836_grace_revert_a_trigger_while_the_victim_goes(api, grace_cluster):
    tc = grace_cluster
    case = await _grow(api, tc)
    assert NOT_ELIGIBLE not in await _failed_scheduling(api, case.uids["a"])
    await _trigger(api, case)
    if tc.option == OPTION_4:
        # spec.nodeName is a's nomination: lower-priority v is terminating there by preemption.
        async def refused():
            return NOT_ELIGIBLE in await _failed_scheduling(api, case.uids["a"])

        await eventually(refused, timeout=WAIT, what=f"a's FailedScheduling {NOT_ELIGIBLE!r}")
        assert _counts(tc) == _Counts(case.first.preempted, case.first.unschedulable + 1, case.first.victims)
    else:
        # Option 1 runs preemption again; it chooses v again (b, priority 20, is reprieved first),
        # which is going already: nobody new is marked or deleted.
        await eventually(lambda: resize_attempts(tc, "preempted") == case.first.preempted + 1, timeout=WAIT,
                         what="a second preemption attempt for a")
        # (scheduler_resize_preemption_victims counts the pods asked to go: none new here.)
        assert _counts(tc) == _Counts(case.first.preempted + 1, case.first.unschedulable, case.first.victims)
        assert _chosen(tc, case.log_from) == [["v"], ["v"]]
    await _revert(api, tc, case)
    await _v_lost(api, case)
    await _a_never_actuated(api, case)
    # No further preemption attempt after the trigger's, under either option.
    assert resize_attempts(tc, "preempted") == case.first.preempted + (tc.option == OPTION_1)
    messages = await _failed_scheduling(api, case.uids["a"])
    assert (NOT_ELIGIBLE in messages) == (tc.option == OPTION_4), messages
    assert _pending(tc) == 0
    assert await running_names(api) == {"a", "b"}


async def test_kep5836_grace_revert_the_autoscaler_asks_again_while_the_victim_goes(api, grace_cluster):
    tc = grace_cluster
    case = await _grow(api, tc)
    await _revert(api, tc, case)
    reverted = _counts(tc)
    await _until(case.t0, REREQUEST_AT)
    a = await resize(api, "a", cpu="3")  # a new request: a new generation
    assert a.metadata.generation == 4, a.metadata  # 2: the first request, 3: the revert
    pending = await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "the new request Deferred")
    assert condition(pending, "PodResizePending").observed_generation == 4
    if tc.option == OPTION_4:
        async def refused():
            return NOT_ELIGIBLE in await _failed_scheduling(api, case.uids["a"])

        await eventually(refused, timeout=WAIT, what=f"a's FailedScheduling {NOT_ELIGIBLE!r}")
        assert resize_attempts(tc, "preempted") == reverted.preempted
        assert _chosen(tc, case.log_from) == [["v"]]
    else:
        await eventually(lambda: resize_attempts(tc, "preempted") == reverted.preempted + 1, timeout=WAIT,
                         what="a preemption attempt for the new request")
        assert _chosen(tc, case.log_from) == [["v"], ["v"]]
    # v's room, freed at the end of its grace period, goes to the new request.
    await _v_lost(api, case)
    await wait_actuated(api, "a", "3")
    await eventually(lambda: _pending(tc) == 0, timeout=WAIT, what="a left the scheduler's queue")
    assert resize_attempts(tc, "preempted") == reverted.preempted + (tc.option == OPTION_1)
    assert metric(tc, "scheduler", "scheduler_resize_preemption_victims_count") == reverted.victims  # v went already
    assert await running_names(api) == {"a", "b"}
