"""KEP-5836 (Scheduler Preemption for In-Place Pod Resize), "Shifting Preemption Victims during
Scheduler Restart", as an acceptance test on real processes: etcd, the apiserver, one scheduler and
one node (kubelet + fake runtime) of 4 CPUs, the gate SchedulerPreemptionForPodResize on in every
component.

The KEP: "If a Deferred resize was mid-preemption when the scheduler crashed or restarted, the new
scheduler instance might select a different victim pod than the original instance did", among
others through "Non-deterministic tie-breaking when multiple low-priority pods satisfy the resource
requirement equally well", so that "'Victim A' (targeted by the first scheduler) and 'Victim B'
(targeted by the second scheduler) may both be terminated to satisfy a single resize request".
"Tracking Preemption Nominations to Avoid Double Preemption" weighs the remedies; kplane has two,
DefaultPreemption's ``deferredResizeNomination`` arg, one cluster each:

- Option 1, "Accept Double Preemption (Alpha Decision)" (the default config);
- Option 4, "Check Pod spec.nodeName in DefaultPreemption" (``deferredResizeNomination:
  SpecNodeName`` in a scheduler config file): it "naturally survives scheduler restarts since
  spec.nodeName and the Deferred resize state are persisted".

The node holds ``a`` (priority 1000, 1 CPU) and three victims ``p1``, ``p2``, ``p3`` (priority 10,
1 CPU each, grace period 30 s, a container that really takes 15 s to exit). ``a`` is resized to 3
CPUs: two victims must go. The victims tie on priority and on status.startTime (seconds), so the
scheduler breaks the tie by the order of the node's pods in its cache: the order of each pod's last
update as its informer saw it, and after a restart the order of the informer's first list (by
name). The test makes the last updates p3, p1, p2: the first scheduler reprieves p3 and chooses
[p1, p2], deleting p1 first. It dies at a failpoint (``panic``), is started again, and the
restarted scheduler sees p1, p2, p3:

- killed after the first victim (p1 going, p2 and p3 untouched): under Option 1 it reprieves p1
  (it is still there, still holding its CPU) and preempts p2 and p3 — three victims for a resize
  that needed two, and ``kplane check`` reports ``one-victim-set-per-resize`` naming the resize of
  default/a; under Option 4 it preempts nothing while p1 terminates, then p3 alone: two victims in
  all, and ``kplane check`` passes (a victim that finished holds nothing any more, for the
  scheduler as for the rule, even before its deletion lands);
- killed after the victims were chosen (nothing touched): the restarted scheduler chooses [p2, p3]
  afresh, two victims in all under either option, and ``kplane check`` passes.

In every case ``a``'s resize ends actuated (3 CPUs, no PodResizePending). The victims are read
from the cluster's history (who got the DisruptionTarget condition, who got a deletionTimestamp,
who finished, who was deleted, at which revisions) and from the schedulers'
``preemption_victims_chosen`` log lines; the assertions print them (``-s`` shows them for a test
that passes).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.error
from dataclasses import dataclass
from pathlib import Path

import pytest

from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods, ensure_priority_classes, resize
from tests.harness.cluster import start, wait_exited
from tests.harness.failpoints import failpoint
from tests.harness.history import pod_revisions
from tests.harness.resize_preemption import (
    OPTION_1,
    option_clusters,
    resizable_pod,
)
from tests.harness.wait import condition, eventually, wait_deleted, wait_running

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

PRIORITIES = {"shift-high": 1000, "shift-low": 10}
VICTIMS = ("p1", "p2", "p3")
# The order of the victims' last updates: the first scheduler's tie-break order.
UPDATE_ORDER = ("p3", "p1", "p2")
SHUTDOWN_SECONDS = "kplane.dev/shutdown-seconds"
GRACE = 30  # seconds; the container exits after 15 of them
TIE_ATTEMPTS = 5  # creations of the three victims until their start times tie
WAIT = 90  # a victim takes 15 s to go; under Option 4 two go one after the other
AFTER_CHOSEN = "scheduler/preemption-after-victims-chosen"
AFTER_FIRST = "scheduler/preemption-after-first-victim"
RULE = "one-victim-set-per-resize"

shift_cluster = option_clusters()


def _disarm(tc) -> None:
    """Both failpoints off, if the scheduler answers (a restarted one has none armed)."""
    for name in (AFTER_CHOSEN, AFTER_FIRST):
        try:
            failpoint(tc, "scheduler", name, "off")
        except (OSError, urllib.error.URLError):
            return


@pytest.fixture
async def api(shift_cluster):
    """A client on a clean cluster: the scheduler running with no failpoint armed, no pod; the same
    afterwards, whatever the test left."""
    c = shift_cluster.client()
    await ensure_priority_classes(c, **PRIORITIES)
    start(shift_cluster, "scheduler")  # a no-op unless an earlier test left it dead
    _disarm(shift_cluster)
    await delete_all_pods(c)
    try:
        yield c
    finally:
        try:
            _disarm(shift_cluster)
            start(shift_cluster, "scheduler")
            await delete_all_pods(c)
        finally:
            await c.close()


# ------------------------------------------------------------------------------------ building


async def _next_second() -> None:
    """Until just after a wall-clock second begins: pods created now start within that second."""
    await asyncio.sleep(1 - time.time() % 1 + 0.02)


async def _create_tied_victims(api) -> dict[str, core_pb2.Pod]:
    """p1, p2, p3 created (in the order p3, p1, p2), Running, with one status.startTime: "multiple
    low-priority pods satisfy the resource requirement equally well". Recreated while they do not
    tie (start times have seconds precision)."""
    tries: list[dict[str, str]] = []
    for attempt in range(1, TIE_ATTEMPTS + 1):
        await _next_second()
        for name in UPDATE_ORDER:
            # a deleted victim is really going 15 s
            await api.pods.create(resizable_pod(name, "1", "shift-low", GRACE).annotation(SHUTDOWN_SECONDS, "15").obj())
        running = await wait_running(api, *UPDATE_ORDER, timeout=WAIT)
        starts = {n: p.status.start_time for n, p in running.items()}
        if len(set(starts.values())) == 1:
            print(f"\nvictims started at {starts['p1']} (creation {attempt} of {TIE_ATTEMPTS})")
            return running
        tries.append(starts)
        for name in UPDATE_ORDER:
            await api.pods.delete(name, "default", grace_period_seconds=0)
        for name in UPDATE_ORDER:
            await wait_deleted(api, name, timeout=WAIT)
    raise AssertionError(f"the victims' start times never tied in {TIE_ATTEMPTS} tries: {tries}")


async def _set_update_order(api) -> None:
    """The victims' last updates in UPDATE_ORDER (a label each): the scheduler's cache puts an
    updated pod last among its node's pods."""
    for i, name in enumerate(UPDATE_ORDER):
        await api.pods.patch(name, {"metadata": {"labels": {"shift-order": str(i)}}}, patch_type="merge")


async def _current_revision(api) -> int:
    rev = 0
    async for resp in api.history(since=2**62, follow=False):
        rev = max(rev, resp.revision)
    return rev


async def _last_updates(api, uids: dict[str, str]) -> list[tuple[int, str]]:
    """(revision, name) of each victim's last revision, oldest first."""
    history = await pod_revisions(api, set(uids.values()))
    names = {uid: name for name, uid in uids.items()}
    return sorted((revs[-1][0], names[uid]) for uid, revs in history.items())


# ------------------------------------------------------------------------------------ reading


def _log_size(tc) -> int:
    tc.reload()
    return Path(tc.process("scheduler").log).stat().st_size


def _log(tc, since: int, until: int | None = None) -> list[dict]:
    """The scheduler's log entries for a between two offsets of its log (JSON lines)."""
    tc.reload()
    text = Path(tc.process("scheduler").log).read_bytes()[since:until].decode(errors="replace")
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("pod") == "default/a":
            out.append(entry)
    return out


def _chosen(tc, since: int, until: int | None = None) -> list[list[str]]:
    """The victims of each ``preemption_victims_chosen`` for a's resize, by name."""
    return [[v.split("/", 1)[1] for v in e["victims"]] for e in _log(tc, since, until)
            if e.get("event") == "preemption_victims_chosen" and e.get("resize_request")]


def _waited_for_terminating_victims(tc, since: int) -> int:
    """How many of a's cycles DefaultPreemption found a not eligible: "a terminating pod on the
    nominated node" (Option 4: its spec.nodeName)."""
    return sum(1 for e in _log(tc, since) if e.get("event") == "resize_unschedulable"
               and "not eligible due to a terminating pod on the nominated node." in e.get("message", ""))


def _marked(pod: core_pb2.Pod) -> bool:
    c = condition(pod, "DisruptionTarget")
    return c is not None and c.status == "True" and c.reason == "PreemptionByScheduler"


@dataclass(frozen=True)
class _Life:
    """A victim's life in the history: the revisions it was marked (DisruptionTarget,
    PreemptionByScheduler), got a deletionTimestamp, finished (its containers stopped: phase
    Succeeded or Failed, which the scheduler's informer delivers as a deletion, the room freed) and
    was deleted. None: not (yet)."""

    marked: int | None
    deleting: int | None
    finished: int | None
    deleted: int | None

    @property
    def touched(self) -> bool:
        return self.marked is not None or self.deleting is not None

    def holding_room_while_going_at(self, rev: int) -> bool:
        """Going (marked or deleting) at ``rev`` and not finished: it still holds its CPU."""
        since = min(r for r in (self.marked, self.deleting) if r is not None) if self.touched else None
        end = min(r for r in (self.finished, self.deleted) if r is not None) if self.gone else None
        return since is not None and since <= rev and (end is None or rev < end)

    @property
    def gone(self) -> bool:
        return self.finished is not None or self.deleted is not None


async def _lives(api, uids: dict[str, str]) -> dict[str, _Life]:
    history = await pod_revisions(api, set(uids.values()))
    out = {}
    for name, uid in uids.items():
        revs = [(r, p) for r, t, p in history.get(uid, []) if t != "DELETED"]
        out[name] = _Life(marked=next((r for r, p in revs if _marked(p)), None),
                          deleting=next((r for r, p in revs if p.metadata.deletion_timestamp), None),
                          finished=next((r for r, p in revs if p.status.phase in ("Succeeded", "Failed")), None),
                          deleted=next((r for r, t, _ in history.get(uid, []) if t == "DELETED"), None))
    return out


def _touched(lives: dict[str, _Life]) -> set[str]:
    return {n for n, life in lives.items() if life.touched}


def _resize_state(pod: core_pb2.Pod) -> dict[str, str]:
    return {c.type: c.reason for c in pod.status.conditions
            if c.type in ("PodResizePending", "PodResizeInProgress", "PodResizePreemptionDisabled")}


async def _wait_deferred(api) -> None:
    async def deferred():
        return _resize_state(await api.pods.get("a")).get("PodResizePending") == "Deferred"

    await eventually(deferred, timeout=WAIT, what="a's resize Deferred by the kubelet")


async def _actuated(api, cpu: str = "3") -> core_pb2.Pod:
    """Until the kubelet actuated a's resize: no resize condition, the container runs with ``cpu``."""
    box: dict = {}

    async def check():
        box["pod"] = pod = await api.pods.get("a")
        cs = pod.status.container_statuses
        return (not _resize_state(pod) and bool(cs)
                and Quantity(cs[0].resources.requests.get("cpu", "0")) == Quantity(cpu))

    await eventually(check, timeout=WAIT, what=f"a's resize to {cpu} actuated")
    return box["pod"]


async def _settled(api, survivors: set[str]) -> None:
    """Until the node holds ``a`` and the survivors only, none of them going."""
    async def check():
        pods = (await api.pods.list("default")).items
        return {p.metadata.name for p in pods} == {"a"} | survivors and not any(
            p.metadata.deletion_timestamp for p in pods)

    await eventually(check, timeout=WAIT, interval=0.2, what=f"only a and {sorted(survivors)} left")


_VIOLATION = re.compile(r"^rev (\d+): ([a-z-]+): (.*)$")
_DOUBLE = re.compile(r"^resize of default/a \(request (\S+)\) preempted (\S+) at rev (\d+) while ([^\s,]+), ")


def _doubles(violations: list[tuple[str, str]]) -> set[tuple[str, str, int, str]]:
    """(request, victim, revision it started, earlier victim still going) of each double preemption
    ``kplane check`` reported for a's resize."""
    return {(m.group(1), m.group(2), int(m.group(3)), m.group(4))
            for m in (_DOUBLE.match(msg) for rule, msg in violations if rule == RULE) if m}


async def _check(tc, since: int) -> tuple[int, list[tuple[str, str]], str]:
    """``kplane check`` over the history from ``since``: (exit code, (rule, message) per
    violation, its whole output)."""
    out = await asyncio.to_thread(tc.kplane, "check", "--since", str(since))
    violations = [(m.group(2), m.group(3)) for m in map(_VIOLATION.match, out.stderr.splitlines()) if m]
    return out.returncode, violations, out.stdout + out.stderr


# ------------------------------------------------------------------------------------ the scenario


@dataclass
class _Killed:
    """What the first scheduler did before it died."""

    since: int  # the history revision before the test's pods
    uids: dict[str, str]  # victim name -> uid
    request: str  # a's resize request: uid/generation
    chosen: list[list[str]]  # the first scheduler's victim choices
    log_at_restart: int  # the scheduler log's size when the second one started


async def _kill_mid_preemption(tc, api, point: str) -> _Killed:
    """Fill the node, resize a to 3 CPUs with ``point`` armed with ``panic``; start the scheduler
    again once it died there."""
    since = await _current_revision(api) + 1
    await api.pods.create(resizable_pod("a", "1", "shift-high", GRACE).obj())
    await wait_running(api, "a", timeout=WAIT)
    running = await _create_tied_victims(api)
    uids = {n: running[n].metadata.uid for n in VICTIMS}
    await _set_update_order(api)

    async def ordered():
        return [n for _, n in await _last_updates(api, uids)] == list(UPDATE_ORDER)

    try:
        await eventually(ordered, timeout=10, what="the victims' last updates in the order p3, p1, p2")
    except AssertionError:
        raise AssertionError(f"last updates (rev, pod): {await _last_updates(api, uids)}") from None
    starts = {n: p.status.start_time for n, p in running.items()}

    log_from = _log_size(tc)
    failpoint(tc, "scheduler", point, "panic")
    a = await resize(api, "a", cpu="3")  # 3 + 1 + 1 + 1 > 4: two victims must go
    request = f"{a.metadata.uid}/{a.metadata.generation}"
    await wait_exited(tc, "scheduler", timeout=WAIT)
    log_at_restart = _log_size(tc)
    text = Path(tc.process("scheduler").log).read_bytes()[log_from:].decode(errors="replace")
    assert f'"failpoint": "{point}"' in text and "failpoint_panic" in text, text[-2000:]

    # Scheduler 1's tie-break went by the order of the last updates: p3 reprieved, [p1, p2] chosen.
    chosen = _chosen(tc, log_from, log_at_restart)
    assert chosen == [["p1", "p2"]], (f"scheduler 1 chose {chosen}; start times {starts}, last updates "
                                      f"{await _last_updates(api, uids)}")
    lives = await _lives(api, uids)
    if point == AFTER_FIRST:
        # p1 is being deleted (marked, then deleted with its grace period); p2 and p3 untouched.
        assert _touched(lives) == {"p1"}, lives
        assert lives["p1"].marked is not None and lives["p1"].deleting is not None, lives
        assert lives["p1"].marked < lives["p1"].deleting and lives["p1"].deleted is None, lives
    else:
        assert _touched(lives) == set(), lives
    assert _resize_state(await api.pods.get("a")) == {"PodResizePending": "Deferred"}

    start(tc, "scheduler")
    return _Killed(since, uids, request, chosen, log_at_restart)


async def _outcome(tc, api, k: _Killed, survivors: set[str]) -> tuple[dict[str, _Life], list[list[str]]]:
    """a's resize actuated, only a and ``survivors`` left; each victim's life, scheduler 2's choices."""
    a = await _actuated(api)
    assert Quantity(a.status.container_statuses[0].allocated_resources["cpu"]) == Quantity("3"), a.status
    await _settled(api, survivors)
    lives = await _lives(api, k.uids)
    chosen = _chosen(tc, k.log_at_restart)
    print(f"\n[{tc.option}] scheduler 1 chose {k.chosen}, scheduler 2 chose {chosen}; since rev {k.since}: "
          + ", ".join(f"{n}: marked {v.marked}, deleting {v.deleting}, finished {v.finished}, deleted {v.deleted}"
                      for n, v in lives.items()))
    return lives, chosen


async def test_restart_after_the_first_victim_shifts_the_victims_under_option_1_not_option_4(shift_cluster, api):
    """Killed with p1 going and p2, p3 untouched: the restarted scheduler, breaking the tie by
    name, reprieves p1. Option 1 preempts p2 and p3 at once (three victims); Option 4 waits for p1,
    then preempts p3 (two)."""
    k = await _kill_mid_preemption(shift_cluster, api, AFTER_FIRST)

    if shift_cluster.option == OPTION_1:
        # "Accept Double Preemption": the restarted scheduler reprieves p1 — still there, still
        # holding its CPU — and preempts p2 and p3: "Victim A" and "Victim B" both go.
        lives, chosen = await _outcome(shift_cluster, api, k, survivors=set())
        record = f"scheduler 2 chose {chosen}; lives {lives}"
        assert chosen and chosen[0] == ["p2", "p3"], record
        assert _waited_for_terminating_victims(shift_cluster, k.log_at_restart) == 0, record
        assert _touched(lives) == {"p1", "p2", "p3"}, record
        assert all(lives[n].gone for n in VICTIMS), record
        # Three victims for a resize that needed two: p2 and p3 marked while p1 still held its CPU.
        for n in ("p2", "p3"):
            assert lives["p1"].holding_room_while_going_at(lives[n].marked), record
        code, violations, output = await _check(shift_cluster, k.since)
        assert code == 1, output
        assert {rule for rule, _ in violations} == {RULE}, output
        assert _doubles(violations) == {(k.request, "default/p2", lives["p2"].marked, "default/p1"),
                                        (k.request, "default/p3", lives["p3"].marked, "default/p1")}, output
    else:
        # Option 4: spec.nodeName is a's nomination; p1 terminates by preemption there, so a is
        # not eligible to preempt until p1 is gone; then one more victim, p3 (p2 is reprieved).
        lives, chosen = await _outcome(shift_cluster, api, k, survivors={"p2"})
        record = f"scheduler 2 chose {chosen}; lives {lives}"
        assert chosen == [["p3"]], record
        assert _waited_for_terminating_victims(shift_cluster, k.log_at_restart) >= 1, record
        assert _touched(lives) == {"p1", "p3"}, record
        assert lives["p1"].gone and lives["p3"].gone, record
        # No new victim while p1 held its CPU: p3 was marked once p1 had finished.
        p1_gone = min(r for r in (lives["p1"].finished, lives["p1"].deleted) if r is not None)
        assert lives["p3"].marked > p1_gone, record
        code, violations, output = await _check(shift_cluster, k.since)
        assert code == 0 and not violations, output


async def test_restart_after_the_victims_were_chosen_preempts_two(shift_cluster, api):
    """Nothing was touched when the scheduler died: the restarted one chooses afresh (by name:
    p1 reprieved, [p2, p3]), and two victims go, as the resize needs, under either option."""
    k = await _kill_mid_preemption(shift_cluster, api, AFTER_CHOSEN)
    lives, chosen = await _outcome(shift_cluster, api, k, survivors={"p1"})
    record = f"scheduler 2 chose {chosen}; lives {lives}"
    assert chosen and chosen[0] == ["p2", "p3"], record
    assert _touched(lives) == {"p2", "p3"}, record
    assert lives["p2"].gone and lives["p3"].gone, record
    code, violations, output = await _check(shift_cluster, k.since)
    assert code == 0 and not violations, output
    assert RULE in output, output
