"""The timeline drawn: a ``Timeline`` as SVG text, or as one self-contained HTML page around it.

The x axis is the revision order: each revision at which something drawn starts, ends or happens
gets a column of its own, whatever the revisions between (lease renewals, node status) did, and the
ticks are labelled with revision numbers. Every element carries stable attributes for tests and
tools — ``class="pod" data-pod="ns/name"``, ``class="segment phase-running"``, ``class="resize
deferred"``, ``class="preemption" data-preemptor data-victim``, ``class="fault kill"
data-component`` — and a ``<title>`` that a browser shows on hover.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape
from typing import Final

from cli.timeline.model import CONTROL_PLANE, PHASES, Bar, Fault, Lane, Preemption, Timeline

MARGIN: Final = 12
LABEL_W: Final = 130  # the lane names' column
ROW_H: Final = 24  # a row of bars: the bar, under it its resize strip
BAR_Y: Final = 3  # a bar's top in its row
BAR_H: Final = 14
STRIP_Y: Final = 18  # its resize strip's
STRIP_H: Final = 4
FAULT_ROW_H: Final = 16
LANE_PAD: Final = 5
# px per revision column, at the most and at the least; the widest plot.
MAX_STEP: Final = 32.0
MIN_STEP: Final = 0.25
MAX_PLOT: Final = 16000.0
MIN_WIDTH: Final = 1000
CHAR_W: Final = 6.0  # a 10px sans-serif character, about
EVENTS_IN_TITLE: Final = 12

PHASE_TEXT: Final = {"pending": "pending (created, not bound)", "bound": "bound (not yet running)",
                     "running": "running", "terminating": "terminating (deletionTimestamp set)"}
RESIZE_TEXT: Final = {"deferred": "resize Deferred", "infeasible": "resize Infeasible",
                      "in-progress": "resize InProgress"}
FAULT_ACTIONS: Final = ("kill", "start", "restart", "pause", "resume", "failpoint", "delay-watch")

_CSS: Final = """
text { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; fill: #1f2328; }
.heading { font-size: 15px; font-weight: bold; }
.legend text { font-size: 11px; }
.lane-bg { fill: #f6f8fa; } .lane-bg.odd { fill: #eaeef2; }
.lane-label { font-size: 12px; font-weight: bold; } .lane-kind { font-size: 10px; fill: #656d76; }
.grid { stroke: #d0d7de; stroke-width: 0.6; } .tick text { font-size: 10px; fill: #57606a; }
.tick-mark { stroke: #8c959f; stroke-width: 0.6; } .axis-title { font-size: 10px; fill: #57606a; }
.segment { stroke: #ffffff; stroke-width: 0.5; }
.phase-pending { fill: #cfd6de; } .phase-bound { fill: #ffd166; }
.phase-running { fill: #7bd389; } .phase-terminating { fill: #f4a582; }
.resize.deferred { fill: #8250df; } .resize.infeasible { fill: #cf222e; } .resize.in-progress { fill: #0969da; }
.resize.request { fill: #0969da; stroke: #ffffff; stroke-width: 0.5; }
.pod-label { font-size: 10px; pointer-events: none; }
.end { stroke-width: 2.5; } .end.failed { stroke: #a40e26; } .end.succeeded { stroke: #1a7f37; }
.preemption-arrow { fill: none; stroke: #bf3989; stroke-width: 2; }
.arrowhead, .preemption-from { fill: #bf3989; stroke: #ffffff; stroke-width: 0.6; }
.fault-line { stroke: currentColor; stroke-width: 1; stroke-dasharray: 3 2; opacity: 0.7; }
.fault-symbol { stroke: currentColor; fill: currentColor; stroke-width: 1.6; }
.fault-label { font-size: 10px; fill: currentColor; }
.kill { color: #cf222e; } .start { color: #1a7f37; } .restart { color: #bc4c00; } .pause { color: #6e7781; }
.resume { color: #1a7f37; } .failpoint { color: #8250df; } .delay-watch { color: #0969da; }
"""


def render_svg(t: Timeline) -> str:
    """The timeline as an SVG document (UTF-8, no external references)."""
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + _Drawing(t).svg()


def render_html(t: Timeline) -> str:
    """One self-contained HTML page: the SVG inline, a little CSS, no script, no network."""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{escape(_heading(t))}</title>\n"
            "<style>body { margin: 0; padding: 8px; background: #ffffff; } .timeline { overflow: auto; }</style>\n"
            f"</head>\n<body>\n<div class=\"timeline\">\n{_Drawing(t).svg()}</div>\n</body>\n</html>\n")


def _heading(t: Timeline) -> str:
    return f"kplane timeline: revisions {t.first} to {t.last}: {summary(t)}"


def summary(t: Timeline) -> str:
    """``3 pods, 1 preemption, 2 faults``."""
    counts = ((len(t.bars), "pod"), (len(t.preemptions), "preemption"), (len(t.faults), "fault"))
    return ", ".join(f"{n} {what}{'' if n == 1 else 's'}" for n, what in counts)


@dataclass
class _LaneBox:
    lane: Lane
    top: float
    height: float
    fault_rows: dict[int, int]  # id(fault) -> its row in the lane's strip of marks
    strip: int  # rows in that strip


class _Drawing:
    """Positions (what ``x`` and the lane boxes say) and the elements drawn at them."""

    def __init__(self, t: Timeline) -> None:
        self.t = t
        n = len(t.revs) + 1  # the last column is the end: what was still going is cut off there
        self.step = min(MAX_STEP, max(MIN_STEP, MAX_PLOT / n))
        self.left = MARGIN + LABEL_W
        strips = {lane.name: self._fault_rows(lane) for lane in t.lanes}
        labels_end = max((end for _, _, end in strips.values()), default=0.0)
        self.width = max(MIN_WIDTH, self.left + n * self.step + 3 * MARGIN, labels_end + 2 * MARGIN)
        self.legend, legend_h = _legend(self.width)
        self.axis_y = MARGIN + 30 + legend_h + 14
        y = self.axis_y + 8
        self.boxes: dict[str, _LaneBox] = {}
        for lane in t.lanes:
            rows, strip, _ = strips[lane.name]
            bar_rows = lane.rows or (0 if strip else 1)
            height = 2 * LANE_PAD + strip * FAULT_ROW_H + bar_rows * ROW_H
            self.boxes[lane.name] = _LaneBox(lane, y, height, rows, strip)
            y += height
        self.height = y + MARGIN

    def x(self, rev: int) -> float:
        """The left edge of ``rev``'s column (of the column of the first revision after it)."""
        return self.left + bisect.bisect_left(self.t.revs, rev) * self.step

    def bar_y(self, bar: Bar) -> float:
        box = self.boxes[bar.lane]
        return box.top + LANE_PAD + box.strip * FAULT_ROW_H + bar.row * ROW_H + BAR_Y

    def _fault_rows(self, lane: Lane) -> tuple[dict[int, int], int, float]:
        """Rows for the lane's fault marks so that no label runs into another; the row count; where
        the last label ends."""
        rows: dict[int, int] = {}
        ends: list[tuple[float, int]] = []
        free: list[int] = []
        count, right = 0, 0.0
        for f in sorted(lane.faults, key=lambda f: f.rev):
            x = self.x(f.rev)
            while ends and ends[0][0] < x - 6:
                heapq.heappush(free, heapq.heappop(ends)[1])
            row = heapq.heappop(free) if free else count
            count = max(count, row + 1)
            rows[id(f)] = row
            label_end = x + 10 + len(_fault_label(f, lane)) * CHAR_W
            right = max(right, label_end)
            heapq.heappush(ends, (label_end, row))
        return rows, count, right

    # ------------------------------------------------------------------------------------ drawing

    def svg(self) -> str:
        w, h = _n(self.width), _n(self.height)
        out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="kplane-timeline" width="{w}" height="{h}" '
               f'viewBox="0 0 {w} {h}" data-first="{self.t.first}" data-last="{self.t.last}">\n',
               f"<style>{_CSS}</style>\n",
               '<defs><marker id="arrowhead" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
               'markerHeight="7" orient="auto-start-reverse"><path class="arrowhead" d="M 0 0 L 10 5 L 0 10 z"/>'
               "</marker></defs>\n",
               '<rect width="100%" height="100%" fill="#ffffff"/>\n',
               f'<text class="heading" x="{MARGIN}" y="{MARGIN + 14}">{escape(_heading(self.t))}</text>\n']
        out.extend(self.legend)
        out.extend(self._lanes())
        out.extend(self._axis())
        for lane in self.t.lanes:
            for bar in lane.bars:
                out.extend(self._bar(bar))
        for lane in self.t.lanes:
            for f in lane.faults:
                out.extend(self._fault(f, lane))
        for p in self.t.preemptions:
            out.extend(self._preemption(p))
        out.append("</svg>\n")
        return "".join(out)

    def _lanes(self) -> Iterator[str]:
        for i, box in enumerate(self.boxes.values()):
            lane = box.lane
            yield (f'<g class="lane" data-lane="{escape(lane.name)}" data-kind="{lane.kind}" data-rows="{lane.rows}">'
                   f'<rect class="lane-bg{" odd" if i % 2 else ""}" x="{MARGIN}" y="{_n(box.top)}" '
                   f'width="{_n(self.width - 2 * MARGIN)}" height="{_n(box.height)}"/>'
                   f'<text class="lane-label" x="{MARGIN + 6}" y="{_n(box.top + 16)}">{escape(lane.name)}</text>'
                   f'<text class="lane-kind" x="{MARGIN + 6}" y="{_n(box.top + 28)}">{_lane_kind(lane)}</text>'
                   "</g>\n")

    def _axis(self) -> Iterator[str]:
        revs = self.t.revs
        gap = len(str(revs[-1] if revs else 0)) * CHAR_W + 10  # px from one label to the next, at the least
        every = max(1, int(-(-gap // self.step)))
        top, bottom = self.axis_y + 4, self.height - MARGIN
        yield f'<g class="axis"><text class="axis-title" x="{MARGIN + 6}" y="{_n(self.axis_y)}">revision</text>\n'
        if len(revs) <= 400:
            marks = "".join(f"M {_n(self.x(r))} {_n(top)} v 4 " for r in revs)
            yield f'<path class="tick-mark" d="{marks}"/>\n'
        for i in range(0, len(revs), every):
            x = _n(self.x(revs[i]))
            yield (f'<g class="tick" data-rev="{revs[i]}"><line class="grid" x1="{x}" y1="{_n(top)}" x2="{x}" '
                   f'y2="{_n(bottom)}"/><text x="{x}" y="{_n(self.axis_y)}" text-anchor="middle">{revs[i]}</text>'
                   "</g>\n")
        yield "</g>\n"

    def _bar(self, bar: Bar) -> Iterator[str]:
        y = self.bar_y(bar)
        x0, x1 = self.x(bar.start), self.x(bar.end)
        yield (f'<g class="pod" data-pod="{escape(bar.pod)}" data-uid="{escape(bar.uid)}"'
               f' data-node="{escape(bar.node)}" data-lane="{escape(bar.lane)}" data-row="{bar.row}"'
               f' data-priority="{bar.priority}"'
               f' data-start="{bar.start}" data-end="{bar.end}" data-ended="{bar.ended}">'
               f"<title>{escape(_bar_title(bar, self.t))}</title>")
        for s in bar.segments:
            sx, ex = self.x(s.start), self.x(s.end)
            yield (f'<rect class="segment phase-{s.phase}" data-phase="{s.phase}" data-start="{s.start}" '
                   f'data-end="{s.end}" x="{_n(sx)}" y="{_n(y)}" width="{_n(max(ex - sx, 0.5))}" height="{BAR_H}">'
                   f"<title>{escape(bar.pod)}: {PHASE_TEXT[s.phase]}, {_span(s.start, s.end, self.t)}</title></rect>")
        for r in bar.resizes:
            sx, ex = self.x(r.start), self.x(r.end)
            yield (f'<rect class="resize {r.state}" data-state="{r.state}" data-start="{r.start}" data-end="{r.end}" '
                   f'x="{_n(sx)}" y="{_n(y - BAR_Y + STRIP_Y)}" width="{_n(max(ex - sx, 0.5))}" height="{STRIP_H}">'
                   f"<title>{escape(bar.pod)}: {RESIZE_TEXT[r.state]}, {_span(r.start, r.end, self.t)}: "
                   f"{escape(r.message)}</title></rect>")
        for q in bar.resize_requests:
            qx = self.x(q.rev)
            yield (f'<path class="resize request" data-rev="{q.rev}" d="M {_n(qx - 4)} {_n(y - 3)} h 8 l -4 6 z">'
                   f"<title>{escape(bar.pod)}: resize requested at revision {q.rev}: {escape(q.change)}</title></path>")
        if bar.ended in ("Failed", "Succeeded"):
            why = f" ({bar.reason})" if bar.reason else ""
            yield (f'<line class="end {bar.ended.lower()}" x1="{_n(x1)}" y1="{_n(y - 1)}" x2="{_n(x1)}" '
                   f'y2="{_n(y + BAR_H + 1)}"><title>{escape(bar.pod)}: {bar.ended}{escape(why)} at revision '
                   f"{bar.end}</title></line>")
        label = _fit(bar.name, x1 - x0 - 6)
        if label:
            yield f'<text class="pod-label" x="{_n(x0 + 3)}" y="{_n(y + 11)}">{escape(label)}</text>'
        yield "</g>\n"

    def _fault(self, f: Fault, lane: Lane) -> Iterator[str]:
        """A mark in the fault's lane, its line down through its lane (through every lane below
        for the control plane's: a scheduler's death touches every pod)."""
        box = self.boxes[lane.name]
        x = self.x(f.rev)
        bottom = self.height - MARGIN if lane.kind == "control-plane" else box.top + box.height
        cy = box.top + LANE_PAD + box.fault_rows[id(f)] * FAULT_ROW_H + FAULT_ROW_H / 2
        yield (f'<g class="fault {f.action}" data-action="{f.action}" data-component="{escape(f.component)}" '
               f'data-lane="{escape(f.lane)}" data-rev="{f.rev}"><title>revision {f.rev}: {f.action} '
               f"{escape(f.component)}: {escape(f.message)}</title>"
               f'<line class="fault-line" x1="{_n(x)}" y1="{_n(box.top)}" x2="{_n(x)}" '
               f'y2="{_n(bottom)}"/>'
               f'<path class="fault-symbol" d="{_symbol(f.action, x, cy)}"/>'
               f'<text class="fault-label" x="{_n(x + 8)}" y="{_n(cy + 3.5)}">{escape(_fault_label(f, lane))}</text>'
               "</g>\n")

    def _preemption(self, p: Preemption) -> Iterator[str]:
        """An arrow from the preemptor's bar to the victim's at the revision the Event was written,
        or, where a bar had ended by then, at its end: the scheduler writes the Event once it
        has asked the victims to go, and a victim with no grace period is gone by then."""
        x = self.x(p.rev)
        xp, xv = self._within(p.preemptor, x), self._within(p.victim, x)
        py, vy = self.bar_y(p.preemptor), self.bar_y(p.victim)
        if py == vy:  # one row: the victim had ended before the preemptor began; a hop over the gap
            y0 = y1 = py
            c0 = c1 = py - 22
        else:  # from the middle of one bar to the middle of the other, drawn over both
            y0, y1 = py + BAR_H / 2, vy + BAR_H / 2
            lift = 10 if vy > py else -10
            c0, c1 = y0 + lift, y1 - lift
        side = 20 if abs(xp - xv) < 8 else 0  # one above the other: bow out to the right, to be seen
        d = f"M {_n(xp)} {_n(y0)} C {_n(xp + side)} {_n(c0)}, {_n(xv + side)} {_n(c1)}, {_n(xv)} {_n(y1)}"
        yield (f'<g class="preemption" data-preemptor="{escape(p.preemptor.pod)}" '
               f'data-victim="{escape(p.victim.pod)}" data-rev="{p.rev}"><title>revision {p.rev}: '
               f"{escape(p.preemptor.pod)} preempted {escape(p.victim.pod)}: {escape(p.message)}</title>"
               f'<circle class="preemption-from" cx="{_n(xp)}" cy="{_n(y0)}" r="2.5"/>'
               f'<path class="preemption-arrow" d="{d}" marker-end="url(#arrowhead)"/></g>\n')

    def _within(self, bar: Bar, x: float) -> float:
        """``x``, or the nearest point of ``bar`` when it lies outside it."""
        lo, hi = self.x(bar.start), self.x(bar.end)
        return min(max(x, lo + 1), max(hi - 1, lo + 1))


# ------------------------------------------------------------------------------------ the legend


def _legend(width: float) -> tuple[list[str], float]:
    """The legend's elements, wrapped to ``width``; its height."""
    items: list[tuple[str, str, str]] = []  # (item, swatch markup at 0,0, text)
    for phase in PHASES:
        items.append((phase, f'<rect class="swatch phase-{phase}" x="0" y="-9" width="18" height="11"/>',
                      PHASE_TEXT[phase]))
    for state, text in RESIZE_TEXT.items():
        items.append((state, f'<rect class="swatch resize {state}" x="0" y="-4" width="18" height="4"/>', text))
    items.append(("resize-request", '<path class="swatch resize request" d="M 5 -8 h 8 l -4 6 z"/>',
                  "resize requested"))
    items.append(("ended", '<line class="end failed" x1="9" y1="-10" x2="9" y2="3"/>', "ended Failed"))
    items.append(("preemption", '<path class="preemption-arrow" d="M 0 -3 H 16" marker-end="url(#arrowhead)"/>',
                  "preemption (preemptor to victim)"))
    for action in FAULT_ACTIONS:
        items.append((action, f'<g class="{action}"><path class="fault-symbol" d="{_symbol(action, 9, -3)}"/></g>',
                      action))
    out = ['<g class="legend">\n']
    x, y = float(MARGIN), float(MARGIN + 36)
    for item, swatch, text in items:
        w = 26 + len(text) * 6.2 + 16
        if x + w > width - MARGIN:
            x, y = MARGIN, y + 18
        out.append(f'<g class="legend-item" data-item="{item}" transform="translate({_n(x)},{_n(y)})">'
                   f'{swatch}<text x="24" y="0">{escape(text)}</text></g>\n')
        x += w
    out.append("</g>\n")
    return out, y - MARGIN - 36 + 18


# ------------------------------------------------------------------------------------ helpers


def _symbol(action: str, x: float, y: float) -> str:
    """A fault's mark centred at (x, y): a cross for a kill, a triangle for a start or resume, a
    circle for a restart, two bars for a pause, a diamond for a failpoint, a square for a delay."""
    if action == "kill":
        return (f"M {_n(x - 4)} {_n(y - 4)} L {_n(x + 4)} {_n(y + 4)} "
                f"M {_n(x - 4)} {_n(y + 4)} L {_n(x + 4)} {_n(y - 4)}")
    if action in ("start", "resume"):
        return f"M {_n(x - 3)} {_n(y - 4.5)} L {_n(x + 4)} {_n(y)} L {_n(x - 3)} {_n(y + 4.5)} z"
    if action == "restart":
        return f"M {_n(x - 4)} {_n(y)} a 4 4 0 1 0 8 0 a 4 4 0 1 0 -8 0"
    if action == "pause":
        return f"M {_n(x - 3)} {_n(y - 4)} v 8 M {_n(x + 2)} {_n(y - 4)} v 8"
    if action == "failpoint":
        return f"M {_n(x)} {_n(y - 5)} L {_n(x + 4)} {_n(y)} L {_n(x)} {_n(y + 5)} L {_n(x - 4)} {_n(y)} z"
    return f"M {_n(x - 3.5)} {_n(y - 3.5)} h 7 v 7 h -7 z"


def _fault_label(f: Fault, lane: Lane) -> str:
    """``kill scheduler``; on a node's lane the node goes without saying (``kill kubelet``)."""
    who = f.component.partition("/")[0] if lane.name != CONTROL_PLANE else f.component
    return f"{f.action} {who}"


def _lane_kind(lane: Lane) -> str:
    if lane.kind == "node":
        return f"node, {len(lane.bars)} pod{'' if len(lane.bars) == 1 else 's'}"
    if lane.kind == "unscheduled":
        return f"never bound: {len(lane.bars)}"
    return f"faults: {len(lane.faults)}"


def _bar_title(bar: Bar, t: Timeline) -> str:
    lines = [f"{bar.pod} (priority {bar.priority})" + (f", uid {bar.uid}" if bar.uid else ""),
             f"{bar.node or 'never bound'}: {_span(bar.start, bar.end, t)}"
             + (" (began before)" if bar.clipped else "")
             + (f", {bar.ended}" if bar.ended else "") + (f" ({bar.reason})" if bar.reason else "")]
    events = bar.events[-EVENTS_IN_TITLE:]
    if len(bar.events) > len(events):
        lines.append(f"... {len(bar.events) - len(events)} earlier events")
    lines.extend(f"rev {ev.rev} {ev.reason}: {ev.message}" for ev in events)
    return "\n".join(lines)


def _span(start: int, end: int, t: Timeline) -> str:
    return f"revisions {start} to {end}" if end != t.end else f"revisions {start} to {t.last} and on"


def _fit(text: str, room: float) -> str:
    """``text``, or as much of it as fits in ``room`` px with an ellipsis, or nothing under 3 characters."""
    fits = int(room // CHAR_W)
    if fits >= len(text):
        return text
    return text[:fits - 1] + "\u2026" if fits >= 4 else ""


def _n(v: float) -> str:
    """A coordinate: one decimal at most."""
    return f"{v:.1f}".rstrip("0").rstrip(".")
