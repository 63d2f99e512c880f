"""What changed between two versions of a pod, as steps: created, queued, nominated, bound,
admitted or rejected, each resize's request, decision and actuation (KEP-1287's conditions and
``allocatedResources``), marked for disruption, deleted."""

from __future__ import annotations

from collections.abc import Mapping

from cli.explain.step import SCHEDULER, Step, component_of
from machinery.api import core_pb2, meta_pb2
from machinery.podconditions import DISRUPTION_TARGET, POD_SCHEDULED

RESIZE_PENDING = "PodResizePending"
RESIZE_IN_PROGRESS = "PodResizeInProgress"
SCHEDULING_GATED = "SchedulingGated"


def pod_steps(rev: int, type_: str, prev: core_pb2.Pod | None, cur: core_pb2.Pod) -> list[Step]:
    """The steps one version of the pod shows; ``prev``: its version before (None: created)."""
    node = cur.spec.node_name
    if type_ == "DELETED":
        return [Step(rev, _writer(prev, cur) or "apiserver", "deleted")]
    if prev is None:
        return _created(rev, cur)
    who = _writer(prev, cur)
    kubelet = component_of("kubelet", node)
    steps: list[Step] = []

    def add(component: str, what: str) -> None:
        steps.append(Step(rev, component, what))

    if prev.status.nominated_node_name != cur.status.nominated_node_name:
        if cur.status.nominated_node_name:
            add(SCHEDULER, f"nominated to {cur.status.nominated_node_name}")
        elif not node:
            add(who or SCHEDULER, f"nomination to {prev.status.nominated_node_name} cleared")
    gated, was_gated = _condition(cur, POD_SCHEDULED), _condition(prev, POD_SCHEDULED)
    if gated is not None and gated.reason == SCHEDULING_GATED and (was_gated is None or
                                                                   was_gated.reason != SCHEDULING_GATED):
        add(SCHEDULER, f"gated: {gated.message}")
    if not prev.spec.node_name and node:
        add(SCHEDULER, f"bound to {node}")
    for what in _claim_statuses(prev, cur):
        add(who or "controller-manager", what)
    for what in _resize_requests(prev, cur):
        add(who or "apiserver", what)
    steps.extend(Step(rev, kubelet, what) for what in _kubelet_changes(prev, cur))
    disruption = _condition(cur, DISRUPTION_TARGET)
    if disruption is not None and disruption.status == "True" and _condition(prev, DISRUPTION_TARGET) is None:
        add(who or "apiserver", f"marked for disruption: {disruption.reason}"
            + (f" ({disruption.message})" if disruption.message else ""))
    if cur.metadata.deletion_timestamp and not prev.metadata.deletion_timestamp:
        grace = cur.metadata.deletion_grace_period_seconds
        add(who or "apiserver", f"deletion requested (grace period {grace}s)")
    return steps


def _created(rev: int, pod: core_pb2.Pod) -> list[Step]:
    who = _writer(None, pod) or "apiserver"
    details = []
    if pod.spec.priority_class_name or pod.spec.priority:
        details.append(f"priority {pod.spec.priority}"
                       + (f" ({pod.spec.priority_class_name})" if pod.spec.priority_class_name else ""))
    requests = _requests(pod)
    if requests:
        details.append(f"requests {requests}")
    claims = [c.name for c in pod.spec.resource_claims]
    if claims:
        details.append(f"claims {', '.join(claims)}")
    steps = [Step(rev, who, "created" + (f": {'; '.join(details)}" if details else ""))]
    if pod.spec.node_name:
        steps.append(Step(rev, who, f"bound to {pod.spec.node_name} by spec.nodeName (no scheduling)"))
    elif pod.spec.scheduling_gates:
        gates = ", ".join(g.name for g in pod.spec.scheduling_gates)
        steps.append(Step(rev, SCHEDULER, f"queued: gated by schedulingGates {gates}"))
    else:
        steps.append(Step(rev, SCHEDULER, f"queued ({pod.spec.scheduler_name or 'default-scheduler'})"))
    return steps


def _requests(pod: core_pb2.Pod) -> str:
    parts = []
    for c in pod.spec.containers:
        rs = ", ".join(f"{k} {v}" for k, v in sorted(c.resources.requests.items()))
        if rs:
            parts.append(rs if len(pod.spec.containers) == 1 else f"{c.name}: {rs}")
    return "; ".join(parts)


def _claim_statuses(prev: core_pb2.Pod, cur: core_pb2.Pod) -> list[str]:
    before = {s.name: s.resource_claim_name for s in prev.status.resource_claim_statuses}
    return [f"pod claim {s.name}: ResourceClaim {s.resource_claim_name}"
            for s in cur.status.resource_claim_statuses if s.resource_claim_name and
            before.get(s.name) != s.resource_claim_name]


def _resize_requests(prev: core_pb2.Pod, cur: core_pb2.Pod) -> list[str]:
    """A new resize request: a container's requests or limits changed in the spec."""
    if prev.spec.node_name != cur.spec.node_name or not cur.spec.node_name:
        return []
    before = {c.name: c.resources for c in prev.spec.containers}
    out = []
    for c in cur.spec.containers:
        old = before.get(c.name)
        if old is None:
            continue
        changes = _changed("", old.requests, c.resources.requests) + _changed("limit ", old.limits, c.resources.limits)
        if changes:
            out.append(f"resize requested: {c.name} {', '.join(changes)}"
                       + (f" (generation {cur.metadata.generation})" if cur.metadata.generation else ""))
    return out


def _changed(prefix: str, old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    return [f"{prefix}{k} {old.get(k, '-')} -> {new.get(k, '-')}" for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)]


def _kubelet_changes(prev: core_pb2.Pod, cur: core_pb2.Pod) -> list[str]:
    """Admission, phases, restarts and each resize's decision and actuation."""
    out = []
    if prev.status.phase != cur.status.phase:
        out.append(_phase(prev, cur))
    out.extend(_restarts(prev, cur))
    out.extend(_resize_conditions(prev, cur))
    prev_cs = {cs.name: cs for cs in prev.status.container_statuses}
    for cs in cur.status.container_statuses:
        old = prev_cs.get(cs.name)
        if old is None or not old.allocated_resources:
            continue  # admitted now: the phase says it
        if dict(old.allocated_resources) != dict(cs.allocated_resources):
            out.append(f"allocated {cs.name} {_resources(cs.allocated_resources)}")
        if old.HasField("resources") and cs.HasField("resources") and \
                (dict(old.resources.requests), dict(old.resources.limits)) != \
                (dict(cs.resources.requests), dict(cs.resources.limits)):
            limits = _resources(cs.resources.limits)
            out.append(f"actuated {cs.name} {_resources(cs.resources.requests)}"
                       + (f", limits {limits}" if limits else ""))
    return out


def _phase(prev: core_pb2.Pod, cur: core_pb2.Pod) -> str:
    st = cur.status
    why = f": {st.reason}" + (f": {st.message}" if st.message else "") if st.reason else ""
    if st.phase == "Failed" and prev.status.phase in ("", "Pending") and not prev.status.container_statuses:
        return f"rejected at admission{why}"
    if st.phase == "Running" and prev.status.phase in ("", "Pending"):
        return "admitted; running"
    return f"phase {prev.status.phase or 'Pending'} -> {st.phase}{why}"


def _restarts(prev: core_pb2.Pod, cur: core_pb2.Pod) -> list[str]:
    before = {cs.name: cs.restart_count for cs in prev.status.container_statuses}
    return [f"container {cs.name} restarted ({cs.restart_count} restarts)" for cs in cur.status.container_statuses
            if cs.restart_count > before.get(cs.name, 0)]


def _resize_conditions(prev: core_pb2.Pod, cur: core_pb2.Pod) -> list[str]:
    out = []
    pending, was_pending = _condition(cur, RESIZE_PENDING), _condition(prev, RESIZE_PENDING)
    if pending is not None and (was_pending is None or (was_pending.reason, was_pending.message) !=
                                (pending.reason, pending.message)):
        why = f": {pending.message}" if pending.message else ""
        out.append(f"resize {pending.reason.lower() or 'pending'}{why}")
    elif pending is None and was_pending is not None:
        out.append(f"resize no longer {was_pending.reason.lower() or 'pending'}")
    progress, was_progress = _condition(cur, RESIZE_IN_PROGRESS), _condition(prev, RESIZE_IN_PROGRESS)
    if progress is not None and (was_progress is None or (was_progress.reason, was_progress.message) !=
                                 (progress.reason, progress.message)):
        out.append("resize in progress" + (f": {progress.reason} {progress.message}".rstrip()
                                           if progress.reason else ""))
    elif progress is None and was_progress is not None:
        out.append("resize done (no longer in progress)")
    return out


def _resources(m: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(m.items()))


def _condition(pod: core_pb2.Pod, type_: str) -> core_pb2.PodCondition | None:
    return next((c for c in pod.status.conditions if c.type == type_), None)


def _writer(prev: core_pb2.Pod | None, cur: core_pb2.Pod) -> str:
    """The component that wrote ``cur``: the field manager whose entry is new or was stamped
    anew (the latest if several), "" when managedFields do not tell."""
    before = {_manager_key(e): (e.time, e.fields_v1) for e in (prev.metadata.managed_fields if prev else ())}
    changed = [e for e in cur.metadata.managed_fields if before.get(_manager_key(e)) != (e.time, e.fields_v1)]
    if not changed:
        return ""
    latest = max(changed, key=lambda e: e.time)
    return component_of(latest.manager, cur.spec.node_name)


def _manager_key(e: meta_pb2.ManagedFieldsEntry) -> tuple[str, str, str]:
    return e.manager, e.operation, e.subresource
