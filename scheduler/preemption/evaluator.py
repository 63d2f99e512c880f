"""Preemption: find the node where evicting lower-priority pods lets the pod fit, and evict them.

kube-scheduler's framework/preemption Evaluator, as the Kubernetes preemption design ("Pod
Preemption in Kubernetes") and Kubernetes docs: Pod Priority and Preemption describe it.

- ``Evaluator.preempt``: PostFilter, the steps of a preemption in order.
- ``Evaluator.prepare_candidate`` / ``prepare_candidate_async``: the evictions, in the cycle or in a
  background task (async preemption, KEP-4832).
- ``Evaluator.is_victim_in_flight``: the victims remembered until the informer shows them deleted.
- ``PreemptionPlugin``: what a preemption plugin (DefaultPreemption) supplies; ``current_pdbs``:
  the PodDisruptionBudgets as the evaluator reads them.
"""

from __future__ import annotations

import asyncio
import functools
import math
from dataclasses import dataclass, field
from typing import Callable, Protocol

from prometheus_client import Counter, Histogram

from machinery import disruption, errors, failpoints, podconditions, timeutil
from machinery.api import core_pb2, policy_pb2
from machinery.informer import key_of
from machinery.logging import get_logger
from scheduler.framework.deferred_resize import is_deferred_resize, resize_preemption_disabled, resize_request
from scheduler.framework.interfaces import Handle
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import pod_priority, start_time
from scheduler.framework.types import (
    Code,
    CycleState,
    Diagnosis,
    NominatingInfo,
    NominatingMode,
    PostFilterResult,
    Status,
    fit_error_message,
)
from scheduler.metrics import RESIZE_VICTIMS

log = get_logger()

# The failpoints sit between the steps of a preemption (``Evaluator.preempt``), so a chaos test can kill the
# scheduler there and check that the restarted one converges.
FP_AFTER_VICTIMS_CHOSEN = failpoints.declare(
    "scheduler/preemption-after-victims-chosen", "a node and its victims are chosen; no victim is touched yet")
FP_AFTER_FIRST_VICTIM = failpoints.declare(
    "scheduler/preemption-after-first-victim",
    "the victims but the last are being deleted; the last is not yet (only with two victims or more)")

VICTIMS = Histogram("scheduler_preemption_victims", "Number of selected preemption victims",
                    buckets=(1, 2, 4, 8, 16, 32, 64))
ATTEMPTS = Counter("scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now")

NOT_HELPFUL = "Preemption is not helpful for scheduling"
RESIZE_CHANGED = "the deferred resize changed during the scheduling cycle"
RESIZE_PREEMPTION_DISABLED = "preemption for the pod's resize is disabled"
RESIZE_POD_GONE = "the resizing pod is gone"


@dataclass
class Candidate:
    node: str
    victims: list[core_pb2.Pod]  # most important first
    num_pdb_violations: int = 0


class PreemptionPlugin(Protocol):
    """What a preemption plugin supplies to the evaluator (kube-scheduler's preemption.Interface)."""

    def offset_and_num_candidates(self, pod: core_pb2.Pod, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(self, pod: core_pb2.Pod,
                                       nominated_status: Status | None) -> tuple[bool, str]: ...

    def select_victims_on_node(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo,
                               pdbs: list["PDB"]) -> tuple[list[core_pb2.Pod], int, Status | None]: ...


@dataclass(frozen=True)
class InFlightVictim:
    """A pod this scheduler asked to go for a preemption, until its informer shows it deleted."""

    namespace: str
    name: str
    uid: str


@dataclass
class PDB:
    """A budget with the disruptions it allows now and the pods already evicted under it."""

    pdb: policy_pb2.PodDisruptionBudget
    allowed: int
    disrupted: set[str] = field(default_factory=set)


def current_pdbs(handle: Handle) -> list[PDB]:
    """Every PodDisruptionBudget with the disruptions its status allows, as kube-scheduler reads
    them (``status.disruptionsAllowed``, ``status.disruptedPods``, kept by the disruption
    controller). A budget whose status no controller ever wrote — a cluster run without a
    controller-manager — is computed from the pods the scheduler knows, as the apiserver's
    eviction does for it (machinery.disruption.compute_status); Kubernetes would read 0 there."""
    budgets = list(handle.pdbs())
    if not budgets:
        return []
    pods: list[core_pb2.Pod] | None = None
    out = []
    for pdb in budgets:
        if disruption.computed_by_controller(pdb):
            out.append(PDB(pdb, pdb.status.disruptions_allowed, set(pdb.status.disrupted_pods)))
            continue
        if pods is None:
            pods = list(handle.pods())
        selected = [p for p in pods if disruption.selects(pdb, p)]
        try:
            st = disruption.compute_status(pdb, selected)
        except disruption.IntOrPercentError:
            continue
        out.append(PDB(pdb, st.disruptions_allowed, set(st.disrupted_pods)))
    return out


def pod_terminating_by_preemption(pod: core_pb2.Pod) -> bool:
    if not pod.metadata.deletion_timestamp:
        return False
    return podconditions.is_disruption_target(pod, podconditions.PREEMPTION_BY_SCHEDULER)


# A candidate and its victims' priorities, most important first (pick_one_node).
Scored = tuple[Candidate, list[int]]


def pick_one_node(candidates: list[Candidate]) -> Candidate:
    """kube-scheduler's pickOneNodeForPreemption: the criteria in order until one node is left —
    fewest PDB violations, lowest highest-victim priority, smallest sum of victim priorities, fewest
    victims, latest start of the highest-priority victims, then the first. Each candidate's victim
    priorities are read once (in PreemptionBasic every candidate ties to the last criterion)."""
    def earliest_start_of_highest(cp: Scored) -> float:
        c, prios = cp
        # A victim not started yet counts as starting now, the latest time there is.
        return min(start_time(v) for v, p in zip(c.victims, prios, strict=True) if p == prios[0])

    score_funcs: list[Callable[[Scored], float]] = [
        lambda cp: -cp[0].num_pdb_violations,
        lambda cp: -cp[1][0],
        lambda cp: -(sum(cp[1]) + 2**31 * len(cp[1])),  # each priority + MaxInt32 + 1, as Go sums them
        lambda cp: -len(cp[1]),
        earliest_start_of_highest,
    ]
    remaining: list[Scored] = [(c, [pod_priority(v) for v in c.victims]) for c in candidates]
    for f in score_funcs:
        best, chosen = -math.inf, []
        for cp in remaining:
            s = f(cp)
            if s > best:
                best, chosen = s, [cp]
            elif s == best:
                chosen.append(cp)
        if len(chosen) == 1:
            return chosen[0][0]
        remaining = chosen
    return remaining[0][0]


class Evaluator:
    def __init__(self, plugin_name: str, handle: Handle, plugin: PreemptionPlugin, async_preemption: bool = True,
                 resize_preemption: bool = False):
        self.plugin_name = plugin_name
        self.handle = handle
        self.plugin = plugin
        self.async_preemption = async_preemption
        self.resize_preemption = resize_preemption  # KEP-5836: deferred resizes preempt too
        self._preempting: set[str] = set()  # preemptors whose victims are being evicted
        self._last_victim: dict[str, tuple[str, str]] = {}  # preemptor uid -> its last victim (ns, name)
        self._in_flight: dict[str, InFlightVictim] = {}  # victim uid -> asked to go, not yet seen deleted
        self._in_flight_pruned = 0  # how many were left at the last prune
        self._tasks: set[asyncio.Task] = set()

    async def drain(self, timeout: float = 5.0) -> None:
        """Let evictions in flight finish (a scheduler stepping down: the Lease guards them too)."""
        for t in list(self._tasks):
            try:
                async with asyncio.timeout(timeout):
                    await asyncio.shield(t)
            except (TimeoutError, asyncio.CancelledError, Exception):
                t.cancel()

    def is_pod_running_preemption(self, uid: str) -> bool:
        """Whether this preemptor's victims are still being asked to go (async preemption).

        Once the last victim's deletion has been sent (the pod has a deletionTimestamp, or is
        gone), the preemption is done even if its task has not returned yet."""
        if uid not in self._preempting:
            return False
        last = self._last_victim.get(uid)
        if last is None:
            return True
        victim = self.handle.get_pod(*last)
        return victim is not None and not victim.metadata.deletion_timestamp

    # ------------------------------------------------------------ victims in flight

    def is_victim_in_flight(self, pod: core_pb2.Pod) -> bool:
        """Whether this scheduler asked ``pod`` to go for a preemption and its informer has not
        shown it deleted yet: for the scheduler's decisions it is terminating by preemption,
        whatever its cached copy says (the informer may be behind the eviction's replies).

        The eviction task can have finished (so PreEnqueue lets the pod in again) while the cache
        still shows every victim running, with no deletionTimestamp — and a victim with grace period
        0 never shows one at all, it is simply removed. The eligibility check alone would then let
        the pod preempt a second time, for room that is already being freed (the same victims again,
        or others: over-preemption). So the evaluator remembers every pod it asked to go, from the
        moment it chose it until the informer shows it deleted (kube-scheduler's "preemptor ->
        victims in flight", kept until the victims are seen gone rather than until the calls
        return), and the eligibility check counts such a pod on the nominated node as terminating
        by preemption. A victim whose eviction failed, or that was spared, is forgotten at once."""
        return pod.metadata.uid in self._in_flight

    def _start_in_flight(self, victims: list[core_pb2.Pod]) -> None:
        for v in victims:
            self._in_flight[v.metadata.uid] = InFlightVictim(v.metadata.namespace, v.metadata.name, v.metadata.uid)
        if len(self._in_flight) > 2 * self._in_flight_pruned + 16:
            self._prune_in_flight()

    def _end_in_flight(self, victim: core_pb2.Pod) -> None:
        self._in_flight.pop(victim.metadata.uid, None)

    def _prune_in_flight(self) -> None:
        """Forget the victims the informer shows deleted (or replaced, or no longer bound). Only
        memory is at stake: a victim the cache no longer has is on no node, so the decisions
        never look it up; pruning runs when the map has doubled since the last time."""
        for uid, v in list(self._in_flight.items()):
            live = self.handle.get_pod(v.namespace, v.name)
            if live is None or live.metadata.uid != uid or not live.spec.node_name:
                del self._in_flight[uid]
        self._in_flight_pruned = len(self._in_flight)

    # ------------------------------------------------------------ PostFilter

    async def preempt(self, state: CycleState, pod: core_pb2.Pod,
                      diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """PostFilter: preempt for ``pod``.

        1. The latest version of the pod must be eligible (``PodEligibleToPreemptOthers``): not
           ``preemptionPolicy: Never``; not while lower-priority victims on its nominated node are
           still terminating (no new preemption before the last one took effect).
        2. Candidates: ``find_candidates``.
        3. The best candidate: ``pick_one_node``; then the failpoint
           ``scheduler/preemption-after-victims-chosen``.
        4. The victims are evicted (``prepare_candidate``); with async preemption (KEP-4832, the
           ``SchedulerAsyncPreemption`` gate, on by default as in Kubernetes 1.33+) in a background
           task (``prepare_candidate_async``), and the pod is nominated at once.
        5. The pod is nominated to the node (``status.nominatedNodeName``) and waits for the victims.
        """
        resize = self.resize_preemption and is_deferred_resize(pod)
        if not resize:
            ATTEMPTS.inc()  # deferred resizes have their own (scheduler_resize_preemption_attempts_total)
        latest = self.handle.get_pod(pod.metadata.namespace, pod.metadata.name)
        if latest is None:
            return None, Status(Code.ERROR, f'pod "{pod.metadata.namespace}/{pod.metadata.name}" not found')
        if resize:
            withdrawn = self._resize_withdrawn(pod)
            if withdrawn:
                return None, Status(Code.UNSCHEDULABLE, withdrawn)
        pod = latest
        nominated = self.handle.nominated_node(pod)
        ok, msg = self.plugin.pod_eligible_to_preempt_others(pod, diagnosis.status_of(nominated) if nominated else None)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, msg)
        snapshot = self.handle.snapshot
        all_nodes = snapshot.node_infos() if snapshot is not None else []
        if not all_nodes:
            return None, Status(Code.ERROR, "no nodes available")
        candidates, statuses = self.find_candidates(state, all_nodes, pod, diagnosis)
        errs = [s.message() for s in statuses.values() if s.code == Code.ERROR]
        if errs and not candidates:
            return None, Status(Code.ERROR, "; ".join(errs))  # a failing simulation is not "not helpful"
        if not candidates:
            if resize:  # its own node was the only candidate: the message speaks of it alone
                message = fit_error_message(1, Diagnosis(node_to_status=statuses, absent_nodes_status=Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NOT_HELPFUL)))
            else:
                message = fit_error_message(len(all_nodes), Diagnosis(
                    node_to_status=statuses, absent_nodes_status=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                                        NOT_HELPFUL)))
            return PostFilterResult(NominatingInfo("", NominatingMode.OVERRIDE)), Status(Code.UNSCHEDULABLE, message)
        best = pick_one_node(candidates)
        log.info("preemption_victims_chosen", pod=key_of(pod), node=best.node,
                 victims=[key_of(v) for v in best.victims], pdb_violations=best.num_pdb_violations,
                 **({"resize_request": resize_request(pod)} if resize else {}))
        if resize and (asked := sum(1 for v in best.victims if not v.metadata.deletion_timestamp)):
            RESIZE_VICTIMS.observe(asked)  # the pods asked to go now, not those going already
        await failpoints.hit(FP_AFTER_VICTIMS_CHOSEN)
        if self.async_preemption:
            self.prepare_candidate_async(best, pod)
        else:
            status = await self.prepare_candidate(best, pod)
            if status is not None:
                return None, status
        return PostFilterResult(NominatingInfo(best.node, NominatingMode.OVERRIDE)), None

    def find_candidates(self, state: CycleState, all_nodes: list[NodeInfo], pod: core_pb2.Pod,
                        diagnosis: Diagnosis) -> tuple[list[Candidate], dict[str, Status]]:
        """Only nodes the filters found ``Unschedulable`` (not Unresolvable) are candidates — removing
        pods can only help there; they are dry-run (``dry_run``)."""
        potential = [ni for ni in all_nodes
                     if (st := diagnosis.status_of(ni.name)) is not None and st.code == Code.UNSCHEDULABLE]
        if not potential:
            log.info("preemption_not_helpful", pod=key_of(pod))
            return [], {}
        pdbs = current_pdbs(self.handle)
        offset, wanted = self.plugin.offset_and_num_candidates(pod, len(potential))
        return self.dry_run(state, pod, potential, pdbs, offset, wanted)

    def dry_run(self, state: CycleState, pod: core_pb2.Pod, potential: list[NodeInfo], pdbs: list[PDB], offset: int,
                wanted: int) -> tuple[list[Candidate], dict[str, Status]]:
        """From a random offset, each node is dry-run (``select_victims_on_node`` on a copy of the node,
        and of the cycle state when PreFilter extensions will write to it) until enough candidates are
        found (10% of the nodes, at least 100: ``offset_and_num_candidates``), candidates that violate
        no PodDisruptionBudget first."""
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        n = len(potential)
        # Each node's simulation gets its own state when PreFilter extensions will write to it.
        private_state = self.handle.pre_filter_extensions_active(state)
        for i in range(n):
            ni = potential[(offset + i) % n].clone()
            victims, violations, status = self.plugin.select_victims_on_node(
                state.clone() if private_state else state, pod, ni, pdbs)
            if status is None and victims:
                found = violating if violations else non_violating
                if len(found) < wanted:  # kube-scheduler keeps at most that many of each kind
                    found.append(Candidate(ni.name, victims, violations))
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    break
                continue
            if status is None:
                status = Status(Code.ERROR, f'expected at least one victim pod on node "{ni.name}"')
            statuses[ni.name] = status
        return non_violating + violating, statuses

    def _resize_withdrawn(self, pod: core_pb2.Pod) -> str:
        """Why a deferred resize no longer preempts, "" if it still does, from the informers' latest
        pod and node: the kubelet actuated it, or it was reverted or resized again (a request that
        no longer stands), or preemption for it was disabled — the kubelet's PodResizePreemptionDisabled
        condition, or the node's policy for a kubelet too old to set it. Asked when the cycle
        starts preempting and again just before the first eviction: a policy that appears between
        the two stops the evictions (KEP-5836 "Node-level Preemption Policy for In-Place Pod Resize")."""
        latest = self.handle.get_pod(pod.metadata.namespace, pod.metadata.name)
        if latest is None:
            return RESIZE_POD_GONE
        if not is_deferred_resize(latest) or latest.metadata.generation != pod.metadata.generation:
            return RESIZE_CHANGED
        if resize_preemption_disabled(latest, self.handle.get_node(latest.spec.node_name)):
            return RESIZE_PREEMPTION_DISABLED
        return ""

    def _withdrawn_before_evicting(self, c: Candidate, pod: core_pb2.Pod, victims: list[core_pb2.Pod]) -> str:
        """For a deferred resize, ``_resize_withdrawn`` once more before any victim is touched; if it
        is, the victims are spared (no longer in flight)."""
        if not (self.resize_preemption and is_deferred_resize(pod)):
            return ""
        withdrawn = self._resize_withdrawn(pod)
        if withdrawn:
            for v in victims:
                self._end_in_flight(v)
            log.info("resize_preemption_withdrawn", pod=key_of(pod), node=c.node, reason=withdrawn,
                     resize_request=resize_request(pod), spared=[key_of(v) for v in victims])
        return withdrawn

    def _victims_to_evict(self, c: Candidate, pod: core_pb2.Pod) -> list[core_pb2.Pod]:
        if not (self.resize_preemption and is_deferred_resize(pod)):
            VICTIMS.observe(len(c.victims))
        return [v for v in c.victims if not v.metadata.deletion_timestamp]  # others are going already

    async def prepare_candidate(self, c: Candidate, pod: core_pb2.Pod) -> Status | None:
        """Evict the victims and clear the nominations of lower-priority pods on the node (in the cycle)."""
        victims = self._victims_to_evict(c, pod)
        self._start_in_flight(victims)
        withdrawn = self._withdrawn_before_evicting(c, pod, victims)
        if withdrawn:
            return Status(Code.UNSCHEDULABLE, withdrawn)
        err = await self._evict(c, pod, victims)
        if err is not None:
            return Status(Code.ERROR, err)
        await self._clear_lower_nominations(c, pod)
        return None

    def prepare_candidate_async(self, c: Candidate, pod: core_pb2.Pod) -> None:
        """Evict the victims in a background task; the pod is gated at PreEnqueue meanwhile: until the
        task has asked for the last victim's deletion, the pod's PreEnqueue (DefaultPreemption,
        through ``is_pod_running_preemption``) keeps it out of activeQ, so it cannot preempt again for
        the same room."""
        victims = self._victims_to_evict(c, pod)
        uid = pod.metadata.uid
        self._start_in_flight(victims)
        if victims:
            self._preempting.add(uid)
        task = asyncio.create_task(self._evict_async(c, pod, victims), name=f"preempt-for-{pod.metadata.name}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _evict_async(self, c: Candidate, pod: core_pb2.Pod, victims: list[core_pb2.Pod]) -> None:
        uid = pod.metadata.uid
        err: str | None = None
        evicting = False
        if self._withdrawn_before_evicting(c, pod, victims):
            self._preempting.discard(uid)
            return
        try:
            # Lower-priority pods nominated here lose their nomination even when every victim is
            # going already (another preemptor's): the preemption design's Example 4, and Kubernetes
            # docs: Pod Priority and Preemption, "scheduler clears nominatedNodeName of Pod P"; as
            # the synchronous path does (kube-scheduler's async path returns early there).
            await self._clear_lower_nominations(c, pod)
            evicting = True
            err = await self._evict(c, pod, victims, on_last=lambda v: self._last_victim.__setitem__(
                uid, (v.metadata.namespace, v.metadata.name)))
        except Exception as exc:  # never leave the preemptor gated
            log.exception("async_preemption_crashed", preemptor=key_of(pod))
            err = str(exc)
            if not evicting:  # none was asked to go
                for v in victims:
                    self._end_in_flight(v)
        finally:
            self._preempting.discard(uid)
            self._last_victim.pop(uid, None)
        if err is not None:
            # The pod could be stuck in the unschedulable pool otherwise: let it try again.
            self.handle.activate([pod])

    async def _evict(self, c: Candidate, pod: core_pb2.Pod, victims: list[core_pb2.Pod],
                     on_last: Callable[[core_pb2.Pod], None] | None = None) -> str | None:
        """Evict ``victims``: all but the last concurrently, then — if they all went — the last,
        ``on_last`` told first (from its deletion on the preemption counts as done). The first
        error is returned and the last victim is spared. Each victim gets the ``DisruptionTarget``
        condition (PreemptionByScheduler) and a graceful delete with its own grace period
        (``_evict_one``).

        That order is kube-scheduler's async path; the synchronous path (``prepare_candidate``) uses
        it too (kube-scheduler sends them all at once there; one order for both keeps the failpoints
        meaningful on both paths). The failpoint ``scheduler/preemption-after-first-victim`` sits
        where all victims but the last are being deleted.

        The ``Preempted`` events of the victims that went are recorded at the end, once every victim
        was asked to go, so in the history all of one preemption's ``DisruptionTarget`` marks come
        before its events (``kplane check``'s ``no-preemption-while-victims-going`` tells preemptions
        apart by that)."""
        if not victims:
            return None
        *others, last = victims
        went: list[core_pb2.Pod] = []
        last_tried = False
        try:
            if others:
                outcomes = await asyncio.gather(*(self._evict_one(c, pod, v) for v in others))
                went += [v for v, (evicted, _) in zip(others, outcomes, strict=True) if evicted]
                err = next((e for _, e in outcomes if e is not None), None)
                if err is not None:
                    return err
                await failpoints.hit(FP_AFTER_FIRST_VICTIM)
            if on_last is not None:
                on_last(last)
            last_tried = True
            evicted, err = await self._evict_one(c, pod, last)
            if evicted:
                went.append(last)
            return err
        finally:
            if not last_tried:
                self._end_in_flight(last)  # spared
            self._record_preempted(c, pod, went)

    async def _evict_one(self, c: Candidate, pod: core_pb2.Pod, victim: core_pb2.Pod) -> tuple[bool, str | None]:
        """(whether the victim was evicted, the error if the eviction failed). A victim that is
        gone already, or was replaced, or was waiting at Permit (rejected: it goes back to the
        queue, not away) is not in flight."""
        waiting = self.handle.waiting_pods.get(victim.metadata.uid)
        if waiting is not None:
            self._end_in_flight(victim)
            waiting.reject(self.plugin_name, "preempted")
            return True, None
        try:
            await self._mark_disruption_target(victim, pod)
            await self.handle.require_client().pods.delete(victim.metadata.name, victim.metadata.namespace,
                                                 uid=victim.metadata.uid)
        except errors.NotFound:
            self._end_in_flight(victim)
            log.info("victim_already_gone", preemptor=key_of(pod), victim=key_of(victim), node=c.node)
            return False, None
        except errors.Conflict:
            self._end_in_flight(victim)
            return False, None  # a pod of the same name replaced it: that one is not ours to delete
        except errors.ApiError as exc:
            self._end_in_flight(victim)
            log.warning("preemption_failed", preemptor=key_of(pod), victim=key_of(victim), error=exc.message)
            return False, f"preempting {key_of(victim)}: {exc.message}"
        except Exception:
            self._end_in_flight(victim)
            raise
        log.info("pod_preempted", preemptor=key_of(pod), victim=key_of(victim), node=c.node)
        return True, None

    def _record_preempted(self, c: Candidate, pod: core_pb2.Pod, victims: list[core_pb2.Pod]) -> None:
        if self.handle.recorder is None:
            return
        for victim in victims:
            self.handle.recorder.event(victim, "Normal", "Preempted",
                                       f"Preempted by pod {pod.metadata.uid} on node {c.node}", related=pod,
                                       action="Preempting")

    async def _clear_lower_nominations(self, c: Candidate, pod: core_pb2.Pod) -> None:
        """Lower-priority pods nominated to this node may no longer fit there: let them look
        elsewhere. The scheduler's own nominations count, written yet or not: with async status
        writes each clear is queued behind the pod's own writes (a nomination still waiting
        there lands first), without them it is sent now."""
        priority = pod_priority(pod)
        writer = self.handle.status_writer
        for pi in self.handle.nominated_pods_for_node(c.node):
            if pi.priority >= priority:
                continue
            if writer is not None:
                writer.submit(pi.pod.metadata.uid, functools.partial(self._clear_nomination, pi.pod, c, pod))
            elif pi.pod.status.nominated_node_name:
                await self._clear_nomination(pi.pod, c, pod)

    async def _clear_nomination(self, lower: core_pb2.Pod, c: Candidate, pod: core_pb2.Pod) -> None:
        try:
            await self.handle.require_client().pods.patch(lower.metadata.name, {"status": {"nominatedNodeName": ""}},
                                                namespace=lower.metadata.namespace, subresource="status")
            log.info("nomination_cleared", pod=key_of(lower), node=c.node, by=key_of(pod))
        except errors.NotFound:
            pass
        except errors.ApiError as exc:
            log.warning("nomination_clear_failed", pod=key_of(lower), error=exc.message)

    async def _mark_disruption_target(self, victim: core_pb2.Pod, preemptor: core_pb2.Pod) -> None:
        scheduler_name = preemptor.spec.scheduler_name or "default-scheduler"
        cond = {"type": podconditions.DISRUPTION_TARGET, "status": "True",
                "reason": podconditions.PREEMPTION_BY_SCHEDULER,
                "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": timeutil.rfc3339()}
        if podconditions.is_disruption_target(victim, podconditions.PREEMPTION_BY_SCHEDULER):
            return
        await self.handle.require_client().pods.patch(victim.metadata.name, {"status": {"conditions": [cond]}},
                                            namespace=victim.metadata.namespace, subresource="status")
