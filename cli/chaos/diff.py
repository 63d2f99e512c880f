"""``kplane diff HISTORY_A HISTORY_B``: two runs' outcomes (``outcome.py``) compared, pod by pod
and in total, so a scheduler change shows as a difference on the same workload. Only differences
are printed, one line each (``pod default/web-1: node node-1 -> node-2``), then a summary line;
like diff(1), the exit status is 0 when they are the same, 1 when they differ, 2 on bad input.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from cli.chaos.outcome import Outcome, PodOutcome


@dataclass(frozen=True)
class Difference:
    subject: str  # "pod default/web-1" or "total"
    what: str  # "node", "bindings", "preempted", "end", "allocated", "resize 1", "resizes", "scheduled", ...
    a: str
    b: str

    def line(self) -> str:
        """``pod default/web-1: node node-1 -> node-2``; for ``preempted`` and ``end`` the values
        say it without the field's name (``pod default/low: preempted by default/high -> not
        preempted``)."""
        if self.what in ("preempted", "end"):
            return f"{self.subject}: {self.a} -> {self.b}"
        return f"{self.subject}: {self.what} {self.a} -> {self.b}"


def compare(a: Outcome, b: Outcome) -> list[Difference]:
    """Every difference: the pods' (in key order), then the totals'."""
    out: list[Difference] = []
    for key in sorted(set(a.pods) | set(b.pods)):
        pa, pb = a.pods.get(key), b.pods.get(key)
        subject = f"pod {key}"
        if pa is None or pb is None:
            out.append(Difference(subject, "present", "yes" if pa else "no", "yes" if pb else "no"))
            continue
        out.extend(_pod(subject, pa, pb))
    ta, tb = a.totals(), b.totals()
    for name in ta:
        if ta[name] != tb[name]:
            out.append(Difference("total", name, str(ta[name]), str(tb[name])))
    return out


def _pod(subject: str, a: PodOutcome, b: PodOutcome) -> list[Difference]:
    out = []

    def differ(what: str, x: str, y: str) -> None:
        if x != y:
            out.append(Difference(subject, what, x, y))

    differ("node", a.node or "(none)", b.node or "(none)")
    if a.node == b.node:
        differ("bindings", str(a.bindings), str(b.bindings))
    differ("preempted", _preempted(a), _preempted(b))
    differ("end", a.end, b.end)
    differ("resizes", str(len(a.resizes)), str(len(b.resizes)))
    for i, (ra, rb) in enumerate(zip(a.resizes, b.resizes, strict=False), 1):
        label = f"resize {i} ({ra.requested})" if ra.requested == rb.requested else f"resize {i}"
        differ(label, ra.result if ra.requested == rb.requested else f"{ra.requested}: {ra.result}",
               rb.result if ra.requested == rb.requested else f"{rb.requested}: {rb.result}")
    differ("allocated", a.allocated or "(none)", b.allocated or "(none)")
    return out


def _preempted(p: PodOutcome) -> str:
    return f"preempted by {p.preempted_by}" if p.preempted_by else "not preempted"


def summary(a: Outcome, b: Outcome, diffs: list[Difference], names: tuple[str, str]) -> str:
    if not diffs:
        return f"same outcomes: {len(a.pods)} pods in {names[0]} and {names[1]}"
    pods = len({d.subject for d in diffs if d.subject != "total"})
    return (f"{len(diffs)} difference(s) between {names[0]} and {names[1]}: {pods} of "
            f"{len(set(a.pods) | set(b.pods))} pods differ")


def to_json(a: Outcome, b: Outcome, diffs: list[Difference], names: tuple[str, str]) -> str:
    doc: dict[str, Any] = {
        "a": names[0], "b": names[1], "same": not diffs,
        "differences": [asdict(d) for d in diffs],
        "totals": {"a": a.totals(), "b": b.totals()},
    }
    return json.dumps(doc, indent=2)
