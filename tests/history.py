"""Synthetic history entries for ``kplane check``'s rules (unit tests): a pod's revision and the
scheduler's ``Preempted`` event, as the apiserver's history would carry them."""

from __future__ import annotations

from cli import check
from machinery.api import core_pb2


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
