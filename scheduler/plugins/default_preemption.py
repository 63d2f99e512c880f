"""DefaultPreemption: when a pod fits nowhere, evict lower-priority pods so that it fits somewhere.

kube-scheduler's defaultpreemption plugin, a PostFilter over the shared preemption Evaluator
(``scheduler/preemption/evaluator.py``). This module supplies the policy:

- ``DefaultPreemption.pod_eligible_to_preempt_others``: whether the pod may preempt now;
- ``DefaultPreemption.select_victims_on_node``: which pods on a node are its victims;
- ``DefaultPreemption.offset_and_num_candidates``: how many nodes to dry-run (``DefaultPreemptionArgs``);
- ``DefaultPreemption.pre_enqueue``: async preemption (KEP-4832) holds the pod while its victims go.

Deferred in-place resizes (KEP-5836) preempt through the same code (``DefaultPreemption.post_filter``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from machinery import disruption, failpoints
from machinery.api import core_pb2
from scheduler.framework import plugin_args as pa
from scheduler.framework.deferred_resize import is_deferred_resize
from scheduler.framework.features import Features, features_of
from scheduler.framework.interfaces import Handle
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo, importance_key, pod_priority
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import (
    ASSIGNED_POD,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    Code,
    CycleState,
    Diagnosis,
    PostFilterResult,
    QueueingHint,
    Status,
)
from scheduler.preemption.evaluator import PDB, Evaluator, PreemptionPlugin, pod_terminating_by_preemption

NAME = "DefaultPreemption"
# A safety check switched off, for chaos to find (docs/chaos.md, "Proof that it finds races").
FP_SKIP_VICTIMS_GUARD = failpoints.declare(
    "scheduler/skip-victims-in-flight-guard",
    "return: a pod may preempt again while the victims of its last preemption are still going "
    "(no-preemption-while-victims-going must catch it)")
NO_VICTIMS = "No preemption victims found for incoming pod"

NOMINATION_NONE = "None"  # KEP-5836 Option 1: accept double preemption (alpha)
NOMINATION_SPEC_NODE_NAME = "SpecNodeName"  # Option 4: spec.nodeName is the resizing pod's nomination
DEFERRED_RESIZE_NOMINATIONS = (NOMINATION_NONE, NOMINATION_SPEC_NODE_NAME)


ArgsError = pa.ArgsError


@dataclass(frozen=True)
class DefaultPreemptionArgs:
    """kube-scheduler's DefaultPreemptionArgs, with its v1 defaults: ``minCandidateNodesPercentage``
    (10) and ``minCandidateNodesAbsolute`` (100) say how many nodes to dry-run
    (``DefaultPreemption.offset_and_num_candidates``).

    ``deferredResizeNomination`` (kplane's) says how a deferred resize avoids preempting twice for
    one resize (KEP-5836 "Tracking Preemption Nominations to Avoid Double Preemption"):

    - ``None`` (default, Option 1, the alpha behaviour): nothing — while a victim with a long grace
      period terminates, or after a scheduler restart, the resize may preempt again (the API's
      idempotent deletes and the priority model accept the waste);
    - ``SpecNodeName`` (Option 4): the pod's ``spec.nodeName`` is its nomination — the eligibility
      check (``DefaultPreemption.pod_eligible_to_preempt_others``) applies on that node, so no new
      victims while lower-priority pods there are still terminating by preemption; as the state is
      in the API objects, it survives scheduler restarts.
    """

    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    # kplane's: how a deferred resize avoids double preemption (KEP-5836 Option 1 or 4).
    deferred_resize_nomination: str = NOMINATION_NONE


def decode_args(raw: Any, path: str = "") -> DefaultPreemptionArgs:
    """DefaultPreemptionArgs from a pluginConfig entry's ``args``, decoded strictly with
    validation_pluginargs.go's checks; ArgsError names the bad field."""
    fields = pa.fields(raw, path, NAME, ("minCandidateNodesPercentage", "minCandidateNodesAbsolute",
                                         "deferredResizeNomination"))
    pct_path = pa.join(path, "minCandidateNodesPercentage")
    abs_path = pa.join(path, "minCandidateNodesAbsolute")
    pct = pa.integer(fields.get("minCandidateNodesPercentage", 10), pct_path)
    absolute = pa.integer(fields.get("minCandidateNodesAbsolute", 100), abs_path)
    if not 0 <= pct <= 100:
        raise ArgsError(f"{pct_path}: Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        raise ArgsError(f"{abs_path}: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        raise ArgsError(f"{pct_path}: Invalid value: 0: cannot be zero at the same time as "
                        f"minCandidateNodesAbsolute")
    nomination_path = pa.join(path, "deferredResizeNomination")
    nomination = pa.string(fields.get("deferredResizeNomination", NOMINATION_NONE), nomination_path)
    if nomination not in DEFERRED_RESIZE_NOMINATIONS:
        raise ArgsError(f'{nomination_path}: Unsupported value: "{nomination}": supported values: '
                        + ", ".join(f'"{n}"' for n in DEFERRED_RESIZE_NOMINATIONS))
    return DefaultPreemptionArgs(pct, absolute, nomination)


def _skip(pod, old, new) -> QueueingHint:
    return QueueingHint.QUEUE_SKIP


def _most_important_first(pods: list[PodInfo]) -> list[PodInfo]:
    return sorted(pods, key=importance_key)


def filter_pods_with_pdb_violation(pods: list[PodInfo], pdbs: list[PDB]) -> tuple[list[PodInfo], list[PodInfo]]:
    """kube-scheduler's filterPodsWithPDBViolation: (violating, non-violating), order kept."""
    allowed = [p.allowed for p in pdbs]
    violating: list[PodInfo] = []
    ok: list[PodInfo] = []
    for pi in pods:
        pod = pi.pod
        violated = False
        if pod.metadata.labels:
            for i, p in enumerate(pdbs):
                if p.pdb.metadata.namespace != pod.metadata.namespace:
                    continue
                selector = disruption.selector_of(p.pdb)
                if selector.empty or not selector.matches(pod.metadata.labels):
                    continue
                if pod.metadata.name in p.disrupted:
                    continue  # already counted by the apiserver's eviction
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else ok).append(pi)
    return violating, ok


class DefaultPreemption(PreemptionPlugin):
    """PreEnqueue, PostFilter, EnqueueExtensions and Closer by shape; the evaluator's
    PreemptionPlugin by name (its base), so its three public methods are a contract, not strays."""

    name = NAME

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle, features: Features = Features(),
                 tie_breaks: TieBreaks | None = None):
        self.handle = handle
        self.min_percentage = args.min_candidate_nodes_percentage
        self.min_absolute = args.min_candidate_nodes_absolute
        self.tie_breaks = tie_breaks or TieBreaks()  # where the dry runs start
        self.async_preemption = features.enable_async_preemption
        self.deferred_resizes = features.enable_scheduler_preemption_for_pod_resize
        self.spec_node_name_nomination = args.deferred_resize_nomination == NOMINATION_SPEC_NODE_NAME
        self.evaluator = Evaluator(NAME, handle, self, async_preemption=self.async_preemption,
                                   resize_preemption=self.deferred_resizes)

    # ------------------------------------------------------------ async preemption (KEP-4832)

    async def close(self) -> None:
        """The scheduler stops scheduling: evictions in flight finish first (or are cancelled)."""
        await self.evaluator.drain()

    def pre_enqueue(self, pod: core_pb2.Pod) -> Status | None:
        """A pod whose victims are still being asked to go waits: it must not preempt again. With async
        preemption (the SchedulerAsyncPreemption gate, default on, through ``Features``) the victims
        are evicted in the background and the pod is held here until the last victim's deletion was
        sent."""
        if self.evaluator.is_pod_running_preemption(pod.metadata.uid):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "waiting for the preemption for this pod to be finished")
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        if not self.async_preemption:
            return []
        # A gated preemptor is looked at again when a victim is deleted; whether it can then be
        # scheduled is for the plugins that rejected it to say (their hints), not for this one.
        return [ClusterEventWithHint(ClusterEvent(ASSIGNED_POD, ActionType.DELETE), _skip)]

    async def post_filter(self, state: CycleState, pod: core_pb2.Pod,
                          diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """Preempt through the evaluator. The message is prefixed "preemption: " and ends up in the
        pod's FailedScheduling event and PodScheduled condition, after the filters' reasons.

        Deferred in-place resizes (KEP-5836, the SchedulerPreemptionForPodResize gate) preempt
        through the same code: their cycle reaches only their own node and only resource fit, so the
        victims are lower-priority pods on that node, chosen as for a new pod (priority, PDBs best
        effort, grace periods honoured, ``preemptionPolicy: Never`` preempts nothing). Such a pod is
        never nominated; ``deferredResizeNomination`` (``DefaultPreemptionArgs``) says how it avoids
        preempting twice."""
        result, status = await self.evaluator.preempt(state, pod, diagnosis)
        if status is not None and status.message():
            return result, Status(status.code, "preemption: " + status.message(), plugin=NAME, error=status.error)
        return result, status

    # ------------------------------------------------------------ the evaluator's policy

    def offset_and_num_candidates(self, pod: core_pb2.Pod, num_nodes: int) -> tuple[int, int]:
        """How many nodes to dry-run: ``minCandidateNodesPercentage`` of the candidates, at least
        ``minCandidateNodesAbsolute``, from a random offset (the pod's tie-break source)."""
        n = num_nodes * self.min_percentage // 100
        n = max(n, self.min_absolute)
        return self.tie_breaks.for_pod(pod).randrange(num_nodes) if num_nodes else 0, min(n, num_nodes)

    def pod_eligible_to_preempt_others(self, pod: core_pb2.Pod, nominated_status: Status | None) -> tuple[bool, str]:
        """``preemptionPolicy: Never`` never preempts ("not eligible due to preemptionPolicy=Never."); a
        pod whose nominated node still has lower-priority pods terminating because of a preemption
        waits for them ("not eligible due to a terminating pod on the nominated node."), unless that
        node became UnschedulableAndUnresolvable for it. Terminating are the pods the informer shows
        so (deletionTimestamp and DisruptionTarget) and those this scheduler asked to go that the
        informer does not show deleted yet (the evaluator's victims in flight): whatever order the
        eviction's replies and the informer's events come in, a pod preempts once per nomination."""
        if pod.spec.HasField("preemption_policy") and pod.spec.preemption_policy == "Never":
            return False, "not eligible due to preemptionPolicy=Never."
        node = self.handle.nominated_node(pod)
        if not node and self.spec_node_name_nomination and self.deferred_resizes and is_deferred_resize(pod):
            node = pod.spec.node_name  # Option 4: the node it runs on is its nomination
        if node and not failpoints.returns(FP_SKIP_VICTIMS_GUARD):
            if nominated_status is not None and nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            snapshot = self.handle.snapshot
            ni = snapshot.get(node) if snapshot is not None else None
            if ni is not None:
                priority = pod_priority(pod)
                for pi in ni.pods:
                    # A victim this scheduler asked to go counts as terminating before the
                    # informer shows it (with grace period 0 it never shows a deletionTimestamp):
                    # the eviction's replies may come back before its events.
                    if pi.priority < priority and (pod_terminating_by_preemption(pi.pod)
                                                   or self.evaluator.is_victim_in_flight(pi.pod)):
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def select_victims_on_node(self, state: CycleState, pod: core_pb2.Pod, ni: NodeInfo,
                               pdbs: list[PDB]) -> tuple[list[core_pb2.Pod], int, Status | None]:
        """Remove every pod of lower priority; if the pod still does not fit (the filters, with
        nominated pods), the node cannot help; otherwise add pods back, most important first
        (priority, then earliest start) — PDB-violating ones before the others — keeping each that
        still lets the pod fit. What is not reprieved is a victim.

        So, as the preemption design says, "if node capacity is 10, and pending pod is priority 10
        and requires 5 units of resource, and the running pods are {priority 0 request 3, priority 1
        request 1, priority 2 request 5, priority 3 request 1}, scheduler will preempt the priority 2
        pod only". A BestEffort pod frees no requests, so it is never a victim for resources.
        """
        fw = self.handle
        priority = pod_priority(pod)
        potential = [pi for pi in ni.pods if pi.priority < priority]
        if not potential:
            return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, NO_VICTIMS)
        # Computed once for the many filter runs below (a node's dry run is the preemption hot path).
        filters = fw.filters_for(state)
        extensions = fw.pre_filter_extensions_active(state)
        ni.remove_pods(potential)
        if extensions:
            for pi in potential:
                s = fw.run_pre_filter_extension_remove_pod(state, pod, pi, ni)
                if s is not None:
                    return [], 0, s
        s = fw.run_filter_plugins_with_nominated_pods(state, pod, ni, filters)
        if s is not None:
            return [], 0, s
        potential = _most_important_first(potential)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[PodInfo] = []
        num_violating = 0

        def reprieve(pi: PodInfo) -> tuple[bool, Status | None]:
            ni.add_pod_info(pi)
            if extensions and (s := fw.run_pre_filter_extension_add_pod(state, pod, pi, ni)) is not None:
                return False, s
            fits = fw.run_filter_plugins_with_nominated_pods(state, pod, ni, filters) is None
            if not fits:
                ni.remove_pod(pi.pod)
                if extensions and (s := fw.run_pre_filter_extension_remove_pod(state, pod, pi, ni)) is not None:
                    return False, s
                victims.append(pi)
            return fits, None

        for pi in violating:
            fits, err = reprieve(pi)
            if err is not None:
                return [], 0, err
            if not fits:
                num_violating += 1
        for pi in non_violating:
            _, err = reprieve(pi)
            if err is not None:
                return [], 0, err
        if violating and non_violating:
            victims = _most_important_first(victims)
        return [pi.pod for pi in victims], num_violating, None


def new(args: DefaultPreemptionArgs | Mapping[str, Any] | None, handle: Any) -> DefaultPreemption:
    tie_breaks = getattr(handle, "tie_breaks", None)
    return DefaultPreemption(pa.typed(args, DefaultPreemptionArgs, decode_args, NAME), handle, features_of(handle),
                             tie_breaks if isinstance(tie_breaks, TieBreaks) else None)
