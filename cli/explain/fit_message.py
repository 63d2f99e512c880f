"""kube-scheduler's FailedScheduling message, parsed: ``0/3 nodes are available: 2 Insufficient
cpu, 1 node(s) had untolerated taint {a: b}. preemption: 0/3 nodes are available: 3 Preemption is
not helpful for scheduling.`` — the nodes counted per reason, and the same for preemption's dry
run (scheduler/framework/types.py ``fit_error_message`` writes it)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_HEAD = re.compile(r"^0/(\d+) nodes are available: ")
_PREEMPTION = ". preemption: "
_ITEM_SPLIT = re.compile(r", (?=\d+ )")
_ITEM = re.compile(r"^(\d+) (.+)$")


@dataclass(frozen=True)
class Verdicts:
    """``0/nodes`` nodes available; each reason with the number of nodes that gave it, in the
    message's order; ``text``: the message when it is no histogram (a PreFilter's reason)."""

    nodes: int
    reasons: list[tuple[int, str]] = field(default_factory=list)
    text: str = ""


@dataclass(frozen=True)
class FitMessage:
    filters: Verdicts
    preemption: Verdicts | None = None


def parse(message: str) -> FitMessage | None:
    """The message's verdicts; None when it is not a "0/N nodes are available" message."""
    head, _, tail = message.partition(_PREEMPTION)
    filters = _verdicts(head)
    if filters is None:
        return None
    return FitMessage(filters, _verdicts(tail) if tail else None)


def _verdicts(text: str) -> Verdicts | None:
    m = _HEAD.match(text.strip())
    if m is None:
        return None
    body = text.strip()[m.end():].removesuffix(".")
    items = [_ITEM.match(part) for part in _ITEM_SPLIT.split(body)]
    if not body or not all(items):
        return Verdicts(int(m.group(1)), text=body)
    return Verdicts(int(m.group(1)), [(int(i.group(1)), i.group(2)) for i in items if i is not None])


def describe(msg: FitMessage, plugins: dict[str, str]) -> str:
    """``0/2 nodes available: 2 Insufficient cpu (NodeResourcesFit); preemption: 2 Preemption is
    not helpful for scheduling`` — each reason with the plugin ``plugins`` names for it."""
    out = _describe(msg.filters, plugins)
    if msg.preemption is not None:
        out += f"; preemption: {_describe(msg.preemption, {})}"
    return out


def _describe(v: Verdicts, plugins: dict[str, str]) -> str:
    if not v.reasons:
        return f"0/{v.nodes} nodes available: {v.text}"
    parts = []
    for count, reason in v.reasons:
        plugin = plugins.get(reason)
        parts.append(f"{count} {reason}" + (f" ({plugin})" if plugin else ""))
    return f"0/{v.nodes} nodes available: " + ", ".join(parts)
