"""The cluster's history of pods: every revision of a pod as a running cluster recorded it, and
synthetic entries for ``kplane check``'s rules (unit tests) — a pod's revision and the scheduler's
``Preempted`` event, as the apiserver's history would carry them."""

from __future__ import annotations

from cli import check
from machinery.api import core_pb2


async def pod_history(api, name: str, namespace: str = "default") -> list[core_pb2.Pod]:
    """Every revision of pod ``name`` the cluster's history holds, oldest first."""
    out = []
    async for resp in api.history(since=0, follow=False):
        for e in resp.entries:
            if e.kind == "Pod" and e.name == name and e.namespace == namespace:
                pod = core_pb2.Pod()
                e.object.Unpack(pod)
                out.append(pod)
    return out


async def pod_revisions(api, uids: set[str]) -> dict[str, list[tuple[int, str, core_pb2.Pod]]]:
    """Every revision of the pods with these uids the cluster's history holds, per uid, oldest
    first: (rev, type, pod)."""
    out: dict[str, list[tuple[int, str, core_pb2.Pod]]] = {}
    async for resp in api.history(since=0, follow=False):
        for e in resp.entries:
            if e.kind != "Pod":
                continue
            pod = core_pb2.Pod()
            e.object.Unpack(pod)
            if pod.metadata.uid in uids:
                out.setdefault(pod.metadata.uid, []).append((e.rev, e.type, pod))
    return out


def pod_entry(rev: int, type_: str, pod: core_pb2.Pod) -> check.Entry:
    return check.Entry(rev, type_, "Pod", "default", pod.metadata.name, pod)


def preempted_event(rev: int, victim: str, preemptor: str, count: int = 1) -> check.Entry:
    """The scheduler's Preempted event on ``victim``, related: ``preemptor`` (ADDED, or MODIFIED
    with its count bumped). Pods are in "default", their uids ``uid-<name>``."""
    ev = core_pb2.Event(reason="Preempted", type="Normal", count=count, action="Preempting",
                        message=f"Preempted by pod uid-{preemptor} on node n1")
    ev.metadata.name, ev.metadata.namespace = f"{victim}.preempted", "default"
    ref = ev.involved_object
    ref.kind, ref.namespace, ref.name, ref.uid = "Pod", "default", victim, f"uid-{victim}"
    rel = ev.related
    rel.kind, rel.namespace, rel.name, rel.uid = "Pod", "default", preemptor, f"uid-{preemptor}"
    return check.Entry(rev, "ADDED" if count == 1 else "MODIFIED", "Event", "default", ev.metadata.name, ev)
