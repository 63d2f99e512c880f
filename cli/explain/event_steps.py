"""The Events of the pod's story as steps: those about the pod (``involvedObject``), the
scheduler's ``Preempted`` events naming it as the preemptor (``related``), and the fault marks of
a chaos run (cli/chaos/marks.py). A FailedScheduling message gets, per reason, the plugin the
scheduler's log names for it."""

from __future__ import annotations

import re
from typing import Final

from cli.chaos import marks
from cli.explain import fit_message
from cli.explain.step import EVENT, SCHEDULER, Step, component_of
from machinery.api import core_pb2

# Said by the pod's own versions already (the binding, the resize conditions): not repeated.
SAID_BY_THE_POD: Final = frozenset({"Scheduled", "ResizeDeferred", "ResizeInfeasible", "ResizeStarted"})
_ON_NODE = re.compile(r" on node (\S+)$")


def reporter(ev: core_pb2.Event) -> str:
    """The component that wrote the Event (``kubelet/node-1``, ``scheduler``, ``kplane``)."""
    name = ev.reporting_component or ev.source.component
    return component_of(name, ev.source.host or ev.reporting_instance)


def about_pod(rev: int, type_: str, ev: core_pb2.Event, plugins: dict[str, str]) -> Step | None:
    """The step an Event about the pod is (None: its versions say it already). ``plugins``: the
    plugin behind each reason of a FailedScheduling message (the scheduler's log)."""
    if ev.reason in SAID_BY_THE_POD:
        return None
    again = f" (#{ev.count})" if type_ == "MODIFIED" and ev.count > 1 else ""
    if ev.reason == "FailedScheduling":
        parsed = fit_message.parse(ev.message)
        text = fit_message.describe(parsed, plugins) if parsed is not None else ev.message
        return Step(rev, reporter(ev), f"FailedScheduling{again}: {text}", EVENT, _time(ev))
    if ev.reason == "Preempted" and ev.related.name:
        node = _ON_NODE.search(ev.message)
        return Step(rev, reporter(ev), f"preempted by {ev.related.namespace}/{ev.related.name}"
                    + (f" on {node.group(1)}" if node else "") + again, EVENT, _time(ev))
    return Step(rev, reporter(ev), f"{ev.reason}{again}: {ev.message}", EVENT, _time(ev))


def preempted_by_pod(rev: int, type_: str, ev: core_pb2.Event) -> Step | None:
    """A ``Preempted`` event on a victim whose ``related`` is the pod: the pod preempted it. The
    same victim preempted again by the pod bumps the event's count (the recorder's series), and
    says so: "(#2)" is the double preemption a race makes."""
    again = type_ == "MODIFIED" and ev.count > 1
    if ev.reason != "Preempted" or not (type_ == "ADDED" or again):
        return None
    node = _ON_NODE.search(ev.message)
    victim = ev.involved_object
    return Step(rev, SCHEDULER, f"preempted pod {victim.namespace}/{victim.name}"
                + (f" on {node.group(1)}" if node else "") + (f" (#{ev.count})" if again else ""), EVENT, _time(ev))


def fault(rev: int, ev: core_pb2.Event) -> Step:
    """A fault a chaos run made (kill, restart, failpoint, ...), in the pod's lifetime."""
    return Step(rev, marks.REPORTER, f"fault: {ev.message or marks.fault_action(ev)}", EVENT, _time(ev))


def _time(ev: core_pb2.Event) -> str:
    return ev.last_timestamp or ev.first_timestamp or ev.event_time
