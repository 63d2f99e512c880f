"""Preemption: find the node where evicting lower-priority pods lets the pod fit, and evict them.

kube-scheduler's framework/preemption Evaluator, with the preemption design (001) and 004 §11:

1. The latest version of the pod must be eligible (``PodEligibleToPreemptOthers``): not
   ``preemptionPolicy: Never``; not while lower-priority victims on its nominated node are
   still terminating (no new preemption before the last one took effect).
2. Candidates: only nodes the filters found ``Unschedulable`` (not Unresolvable) — removing pods
   can only help there. From a random offset, each is dry-run (``select_victims_on_node`` on a
   copy of the node and the cycle state) until enough candidates are found (10% of the nodes,
   at least 100), candidates that violate no PodDisruptionBudget first.
3. The best candidate, by the criteria in order: fewest PDB violations, lowest highest-victim
   priority, smallest sum of victim priorities, fewest victims, latest start of the
   highest-priority victims, then the first.
4. The victims get the ``DisruptionTarget`` condition (PreemptionByScheduler) and a graceful
   delete with their own grace period, and a ``Preempted`` event; lower-priority pods nominated
   to that node lose their nomination so they can look elsewhere.
5. The pod is nominated to the node (``status.nominatedNodeName``) and waits for the victims.

Victims are evicted one after the other, most important first (kube-scheduler deletes them in
parallel); the failpoints ``scheduler/preemption-after-victims-chosen`` and
``scheduler/preemption-after-first-victim`` sit between the steps, so a chaos test can kill the
scheduler there and check that the restarted one converges.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Protocol

from prometheus_client import Counter, Histogram

from machinery import disruption, errors, failpoints, timeutil
from machinery.api import core_pb2, policy_pb2
from machinery.logging import get_logger
from scheduler.framework.interfaces import Handle
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import pod_priority, start_time
from scheduler.framework.types import (Code, CycleState, Diagnosis, NominatingInfo, NominatingMode, PostFilterResult,
                                       Status, fit_error_message)

log = get_logger()

FP_AFTER_VICTIMS_CHOSEN = failpoints.declare(
    "scheduler/preemption-after-victims-chosen", "a node and its victims are chosen; no victim is touched yet")
FP_AFTER_FIRST_VICTIM = failpoints.declare(
    "scheduler/preemption-after-first-victim", "the first victim is being deleted; the others are not yet")

VICTIMS = Histogram("scheduler_preemption_victims", "Number of selected preemption victims",
                    buckets=(1, 2, 4, 8, 16, 32, 64))
ATTEMPTS = Counter("scheduler_preemption_attempts_total", "Total preemption attempts in the cluster till now")

NOT_HELPFUL = "Preemption is not helpful for scheduling"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"


@dataclass
class Candidate:
    node: str
    victims: list[core_pb2.Pod]  # most important first
    num_pdb_violations: int = 0


class PreemptionPlugin(Protocol):
    """What a preemption plugin supplies to the evaluator (kube-scheduler's preemption.Interface)."""

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]: ...

    def pod_eligible_to_preempt_others(self, pod: core_pb2.Pod, nominated_status: Status | None) -> tuple[bool, str]: ...

    def select_victims_on_node(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo,
                               pdbs: list[policy_pb2.PodDisruptionBudget]) -> tuple[list[core_pb2.Pod], int, Status | None]: ...


@dataclass
class PDB:
    """A budget with the disruptions it allows now (computed from the pods the scheduler knows)."""

    pdb: policy_pb2.PodDisruptionBudget
    allowed: int
    disrupted: set[str] = field(default_factory=set)


def current_pdbs(handle: Handle) -> list[PDB]:
    """Every PodDisruptionBudget with its disruptionsAllowed computed now, as the disruption
    controller would (kplane has no such controller yet, so the status on the object may be stale)."""
    budgets = list(handle.pdbs())
    if not budgets:
        return []
    pods = list(handle.pods())
    out = []
    for pdb in budgets:
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
    for c in pod.status.conditions:
        if c.type == DISRUPTION_TARGET:
            return c.status == "True" and c.reason == PREEMPTION_BY_SCHEDULER
    return False


def pick_one_node(candidates: list[Candidate]) -> Candidate:
    """kube-scheduler's pickOneNodeForPreemption: the criteria in order until one node is left."""
    def earliest_start_of_highest(c: Candidate) -> float:
        top = pod_priority(c.victims[0])
        return min(start_time(v) for v in c.victims if pod_priority(v) == top)

    score_funcs = [
        lambda c: -c.num_pdb_violations,
        lambda c: -pod_priority(c.victims[0]),
        lambda c: -sum(pod_priority(v) + 2**31 for v in c.victims),
        lambda c: -len(c.victims),
        earliest_start_of_highest,
    ]
    remaining = candidates
    for f in score_funcs:
        best, chosen = -math.inf, []
        for c in remaining:
            s = f(c)
            if s > best:
                best, chosen = s, [c]
            elif s == best:
                chosen.append(c)
        if len(chosen) == 1:
            return chosen[0]
        remaining = chosen
    return remaining[0]


class Evaluator:
    def __init__(self, plugin_name: str, handle: Handle, plugin: PreemptionPlugin,
                 rand: random.Random | None = None):
        self.plugin_name = plugin_name
        self.handle = handle
        self.plugin = plugin
        self._rand = rand or random.Random()

    async def preempt(self, state: CycleState, pod: core_pb2.Pod,
                      diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        ATTEMPTS.inc()
        latest = self.handle.get_pod(pod.metadata.namespace, pod.metadata.name)
        if latest is None:
            return None, Status(Code.ERROR, f'pod "{pod.metadata.namespace}/{pod.metadata.name}" not found')
        pod = latest
        nominated = pod.status.nominated_node_name
        ok, msg = self.plugin.pod_eligible_to_preempt_others(pod, diagnosis.status_of(nominated) if nominated else None)
        if not ok:
            return None, Status(Code.UNSCHEDULABLE, msg)
        snapshot = self.handle.snapshot
        all_nodes = snapshot.list() if snapshot is not None else []
        if not all_nodes:
            return None, Status(Code.ERROR, "no nodes available")
        candidates, statuses = self.find_candidates(state, all_nodes, pod, diagnosis)
        if not candidates:
            d = Diagnosis(node_to_status=statuses, absent_nodes_status=Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                                             NOT_HELPFUL))
            return (PostFilterResult(NominatingInfo("", NominatingMode.OVERRIDE)),
                    Status(Code.UNSCHEDULABLE, fit_error_message(len(all_nodes), d)))
        best = pick_one_node(candidates) if len(candidates) > 1 else candidates[0]
        log.info("preemption_victims_chosen", pod=_key(pod), node=best.node, victims=[_key(v) for v in best.victims],
                 pdb_violations=best.num_pdb_violations)
        await failpoints.hit(FP_AFTER_VICTIMS_CHOSEN)
        status = await self.prepare_candidate(best, pod)
        if status is not None:
            return None, status
        return PostFilterResult(NominatingInfo(best.node, NominatingMode.OVERRIDE)), None

    def find_candidates(self, state: CycleState, all_nodes: list[NodeInfo], pod: core_pb2.Pod,
                        diagnosis: Diagnosis) -> tuple[list[Candidate], dict[str, Status]]:
        potential = [ni for ni in all_nodes
                     if (st := diagnosis.status_of(ni.name)) is not None and st.code == Code.UNSCHEDULABLE]
        if not potential:
            log.info("preemption_not_helpful", pod=_key(pod))
            return [], {}
        pdbs = current_pdbs(self.handle)
        offset, wanted = self.plugin.offset_and_num_candidates(len(potential))
        return self.dry_run(state, pod, potential, pdbs, offset, wanted)

    def dry_run(self, state: CycleState, pod: core_pb2.Pod, potential: list[NodeInfo], pdbs: list[PDB], offset: int,
                wanted: int) -> tuple[list[Candidate], dict[str, Status]]:
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: dict[str, Status] = {}
        n = len(potential)
        for i in range(n):
            ni = potential[(offset + i) % n].clone()
            victims, violations, status = self.plugin.select_victims_on_node(state.clone(), pod, ni, pdbs)
            if status is None and victims:
                c = Candidate(ni.name, victims, violations)
                (violating if violations else non_violating).append(c)
                if non_violating and len(non_violating) + len(violating) >= wanted:
                    break
                continue
            if status is None:
                status = Status(Code.ERROR, f'expected at least one victim pod on node "{ni.name}"')
            statuses[ni.name] = status
        return non_violating + violating, statuses

    async def prepare_candidate(self, c: Candidate, pod: core_pb2.Pod) -> Status | None:
        """Evict the victims and clear the nominations of lower-priority pods on the node."""
        client = self.handle.client
        for i, victim in enumerate(c.victims):
            if victim.metadata.deletion_timestamp:
                continue  # its graceful deletion has started already
            waiting = self.handle.waiting_pods.get(victim.metadata.uid)
            if waiting is not None:
                waiting.reject(self.plugin_name, "preempted")
            else:
                try:
                    await self._mark_disruption_target(victim, pod)
                    await client.pods.delete(victim.metadata.name, victim.metadata.namespace, uid=victim.metadata.uid)
                except errors.NotFound:
                    log.info("victim_already_gone", preemptor=_key(pod), victim=_key(victim), node=c.node)
                    continue
                except errors.Conflict:
                    continue  # a pod of the same name replaced it: that one is not ours to delete
                except errors.ApiError as exc:
                    log.warning("preemption_failed", preemptor=_key(pod), victim=_key(victim), error=exc.message)
                    return Status(Code.ERROR, f"preempting {_key(victim)}: {exc.message}")
                log.info("pod_preempted", preemptor=_key(pod), victim=_key(victim), node=c.node)
            if self.handle.recorder is not None:
                self.handle.recorder.event(victim, "Normal", "Preempted",
                                           f"Preempted by pod {pod.metadata.uid} on node {c.node}", related=pod,
                                           action="Preempting")
            if i == 0:
                await failpoints.hit(FP_AFTER_FIRST_VICTIM)
        VICTIMS.observe(len(c.victims))
        priority = pod_priority(pod)
        for pi in self.handle.nominated_pods_for_node(c.node):
            if pi.priority < priority and pi.pod.status.nominated_node_name:
                try:
                    await client.pods.patch(pi.pod.metadata.name, {"status": {"nominatedNodeName": ""}},
                                            namespace=pi.pod.metadata.namespace, subresource="status")
                    log.info("nomination_cleared", pod=_key(pi.pod), node=c.node, by=_key(pod))
                except errors.ApiError as exc:
                    log.warning("nomination_clear_failed", pod=_key(pi.pod), error=exc.message)
        return None

    async def _mark_disruption_target(self, victim: core_pb2.Pod, preemptor: core_pb2.Pod) -> None:
        scheduler_name = preemptor.spec.scheduler_name or "default-scheduler"
        cond = {"type": DISRUPTION_TARGET, "status": "True", "reason": PREEMPTION_BY_SCHEDULER,
                "message": f"{scheduler_name}: preempting to accommodate a higher priority pod",
                "lastTransitionTime": timeutil.rfc3339()}
        for c in victim.status.conditions:
            if c.type == DISRUPTION_TARGET and c.status == "True" and c.reason == PREEMPTION_BY_SCHEDULER:
                return
        await self.handle.client.pods.patch(victim.metadata.name, {"status": {"conditions": [cond]}},
                                            namespace=victim.metadata.namespace, subresource="status")


def _key(pod: core_pb2.Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"
