"""Faults as Events in the cluster's history, so a timeline, ``kplane explain`` and ``kplane
record`` read a run's kills, restarts, pauses and failpoints at the revision they happened,
beside the objects they disturbed.

A fault Event is a core/v1 Event in namespace ``default`` reported by ``kplane``: its
``involvedObject`` is the Node for ``kubelet/NODE`` and ``runtime/NODE`` (as the kubelet's own
"Starting" events are) and otherwise ``{kind: Component, name: <component>}``; its ``action`` is the
schedule step (``kill``, ``start``, ``restart``, ``pause``, ``resume``, ``failpoint``,
``delay-watch``), its ``reason`` one of ``FAULT_REASONS``, and its message the whole step in words.
A kill is written before the process dies (a lone etcd or apiserver cannot write it afterwards), a
start once the process is healthy again.
"""

from __future__ import annotations

from typing import Final

from machinery import timeutil
from machinery.api import core_pb2

REPORTER: Final = "kplane"
COMPONENT_KIND: Final = "Component"
FAULT_REASONS: Final = {
    "kill": "ComponentKilled",
    "start": "ComponentStarted",
    "restart": "ComponentRestarted",
    "pause": "ComponentPaused",
    "resume": "ComponentResumed",
    "failpoint": "FailpointArmed",
    "delay-watch": "WatchDelayed",
}
_BY_REASON: Final = {reason: action for action, reason in FAULT_REASONS.items()}


def fault_event(action: str, component: str, message: str) -> core_pb2.Event:
    """The Event recording fault ``action`` on ``component`` (``scheduler``, ``etcd-2``,
    ``kubelet/node-1``, ...)."""
    now = timeutil.rfc3339()
    ev = core_pb2.Event(api_version="v1", kind="Event", reason=FAULT_REASONS[action], message=message,
                        type="Warning", count=1, first_timestamp=now, last_timestamp=now,
                        reporting_component=REPORTER, reporting_instance=REPORTER, action=action)
    ev.metadata.namespace = "default"
    ev.metadata.generate_name = "kplane-fault."
    role, _, node = component.partition("/")
    if role in ("kubelet", "runtime") and node:
        ev.involved_object.kind, ev.involved_object.name, ev.involved_object.api_version = "Node", node, "v1"
    else:
        ev.involved_object.kind, ev.involved_object.name = COMPONENT_KIND, component
    ev.source.component = REPORTER
    return ev


def is_fault(ev: core_pb2.Event) -> bool:
    return ev.reporting_component == REPORTER and ev.reason in _BY_REASON


def fault_action(ev: core_pb2.Event) -> str:
    """The step a fault Event records (``kill``, ``failpoint``, ...)."""
    return _BY_REASON.get(ev.reason, "")


def fault_component(ev: core_pb2.Event) -> str:
    """The component a fault Event names, as ``kplane kill`` takes it. The message starts with it."""
    if ev.involved_object.kind == COMPONENT_KIND:
        return ev.involved_object.name
    return ev.message.split(" ", 1)[0]


# The arguments a fault step's message carries after its component, in this order (``kplane
# record`` reads them back into the step).
_MESSAGE_ARGS: Final = {"failpoint": ("name", "action"), "delay-watch": ("ms",)}


def fault_message(action: str, component: str, args: dict[str, object] | None = None) -> str:
    """The message of the fault Event for schedule step ``action`` on ``component``: the component,
    the action and the step's other arguments as ``key=value``, one word each —
    ``scheduler kill``, ``kubelet/node-1 failpoint name=kubelet-before-admit action=sleep(200)``,
    ``apiserver delay-watch ms=500``. ``parse_fault_message`` reads it back.
    Raises ValueError for an unknown action, a missing argument or a value with whitespace."""
    if action not in FAULT_REASONS:
        raise ValueError(f"not a fault: {action!r} (faults: {', '.join(FAULT_REASONS)})")
    words = [component, action]
    for key in _MESSAGE_ARGS.get(action, ()):
        value = (args or {}).get(key)
        if value is None:
            raise ValueError(f"fault {action} needs {key}")
        words.append(f"{key}={value}")
    if any(not w or any(ch.isspace() for ch in w) for w in words):
        raise ValueError(f"fault message words may not be empty or hold whitespace: {words!r}")
    return " ".join(words)


def parse_fault_message(ev: core_pb2.Event) -> tuple[str, dict[str, str]] | None:
    """The step a fault Event records, as ``(action, arguments)`` with ``component`` among the
    arguments (``("failpoint", {"component": "scheduler", "name": "...", "action": "panic"})``);
    None when it is no fault Event or its message is not ``fault_message``'s (a hand-written
    Event, or one written by an older kplane)."""
    action = fault_action(ev) if is_fault(ev) else ""
    words = ev.message.split()
    if not action or len(words) < 2 or words[1] != action:
        return None
    args = {"component": words[0]}
    for word in words[2:]:
        key, eq, value = word.partition("=")
        if not eq or key not in _MESSAGE_ARGS.get(action, ()):
            return None
        args[key] = value
    if set(args) != {"component", *_MESSAGE_ARGS.get(action, ())}:
        return None
    return action, args
