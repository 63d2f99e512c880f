"""The timeline's model: the history, read in revision order, as lanes of pod bars (phase
segments, resize spans, resize requests), preemption arrows and fault marks, laid out in rows.
No drawing here: ``svg`` draws a ``Timeline``.

A pod's bar (one per uid) goes in the lane of the node it was bound to, or in ``unscheduled`` when
it was never bound; it runs from its creation until it is DELETED or reaches a terminal phase
(Succeeded, Failed), through the phases ``PHASES`` as its revisions show them. Its resize spans
come from KEP-1287's conditions: ``PodResizePending`` (reason Deferred or Infeasible) and
``PodResizeInProgress``, from the revision one appears to the one it is gone. A preemption is a
``Preempted`` Event (involvedObject the victim, related the preemptor, as kube-scheduler's
DefaultPreemption writes it); a fault is a fault Event of ``cli/chaos/marks.py``, on its node's lane
for ``kubelet/NODE`` and ``runtime/NODE`` and on the ``control plane`` lane otherwise.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Final

from cli.chaos import marks
from cli.check.framework import Entry
from machinery.api import core_pb2

# The kinds the model reads; a reader may skip decoding the others.
KINDS: Final = frozenset({"Pod", "Event", "Node"})
CONTROL_PLANE: Final = "control plane"
UNSCHEDULED: Final = "unscheduled"
PHASES: Final = ("pending", "bound", "running", "terminating")
TERMINAL: Final = ("Succeeded", "Failed")
# PodResizePending's reasons (KEP-1287) and PodResizeInProgress, as the spans' states.
RESIZE_STATES: Final = ("deferred", "infeasible", "in-progress")
_PENDING_REASONS: Final = {"Deferred": "deferred", "Infeasible": "infeasible"}


class NoSuchPod(ValueError):
    """``pods`` names a pod the history does not have."""


@dataclass(frozen=True)
class Segment:
    """A phase of a pod, from revision ``start`` up to (not including) ``end``."""

    phase: str  # one of PHASES
    start: int
    end: int


@dataclass(frozen=True)
class ResizeSpan:
    """A resize condition held from ``start`` up to ``end``; ``message`` is the kubelet's."""

    state: str  # one of RESIZE_STATES
    start: int
    end: int
    message: str


@dataclass(frozen=True)
class ResizeRequest:
    """A change of a bound pod's container resources (a resize asked for) at ``rev``."""

    rev: int
    change: str  # "c1 requests cpu 1 -> 2"


@dataclass(frozen=True)
class PodEvent:
    """An Event about the pod, for its hover text."""

    rev: int
    reason: str
    message: str


@dataclass(eq=False)
class Bar:
    """One pod's life (one uid). ``end`` is the revision it ended at, or the timeline's ``end``
    when it was alive then (``ended`` empty)."""

    pod: str  # namespace/name
    uid: str
    start: int
    end: int = 0
    node: str = ""
    priority: int = 0
    ended: str = ""  # "deleted", "Succeeded", "Failed", or "" (alive at the end)
    reason: str = ""  # status.reason when it ended in a terminal phase (OutOfcpu, Evicted, ...)
    clipped: bool = False  # it began before the window
    segments: list[Segment] = field(default_factory=list)
    resizes: list[ResizeSpan] = field(default_factory=list)
    resize_requests: list[ResizeRequest] = field(default_factory=list)
    events: list[PodEvent] = field(default_factory=list)
    lane: str = ""
    row: int = 0

    @property
    def name(self) -> str:
        return self.pod.partition("/")[2]


@dataclass(frozen=True, eq=False)
class Preemption:
    """``preemptor`` had ``victim`` preempted; the Event was written at ``rev``."""

    rev: int
    preemptor: Bar
    victim: Bar
    message: str


@dataclass(frozen=True)
class Fault:
    """A fault a chaos run (or a test) made and recorded at ``rev``."""

    rev: int
    action: str  # kill, start, restart, pause, resume, failpoint, delay-watch
    component: str  # as ``kplane kill`` takes it: scheduler, kubelet/node-1, ...
    lane: str
    message: str


@dataclass
class Lane:
    name: str
    kind: str  # "control-plane", "unscheduled" or "node"
    bars: list[Bar] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    rows: int = 0  # rows of bars


@dataclass
class Timeline:
    """What the history shows between revisions ``first`` and ``last``. ``revs`` are the
    revisions at which something drawn starts, ends or happens, in order (the axis); ``end``
    (``last`` + 1) is where what was still going at ``last`` is cut off."""

    first: int
    last: int
    end: int
    revs: list[int]
    lanes: list[Lane]
    preemptions: list[Preemption]

    @property
    def bars(self) -> list[Bar]:
        return [b for lane in self.lanes for b in lane.bars]

    @property
    def faults(self) -> list[Fault]:
        return [f for lane in self.lanes for f in lane.faults]


def build(entries: Iterable[Entry], since: int = 0, until: int | None = None,
          pods: Collection[str] = ()) -> Timeline:
    """The timeline of ``entries`` (revision order) from ``since`` to ``until`` (inclusive; the
    last entry when None). Entries before ``since`` are read too, so what was going on at
    ``since`` is drawn from there. ``pods`` (names or namespace/names) keeps only those pods and
    the preemptions between them; a name the history does not have raises ``NoSuchPod``."""
    b = _Builder()
    last = since
    for e in entries:
        if until is not None and e.rev > until:
            break
        last = max(last, e.rev)
        b.observe(e)
    if until is not None:
        last = max(until, since)
    return b.finish(since, last, pods)


# ------------------------------------------------------------------------------------- reading


@dataclass
class _Open:
    """What the builder tracks for a bar still going."""

    bar: Bar
    phase: str = ""
    phase_start: int = 0
    resizes: dict[str, tuple[int, str]] = field(default_factory=dict)  # state -> (start, message)
    resources: tuple[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], ...] = ()


class _Builder:
    def __init__(self) -> None:
        self.bars: list[Bar] = []
        self.open: dict[str, _Open] = {}  # uid (or namespace/name) -> its bar, while going
        self.by_uid: dict[str, Bar] = {}
        self.by_name: dict[str, Bar] = {}  # namespace/name -> its latest bar
        self.nodes: set[str] = set()
        self.faults: list[Fault] = []
        self.preemptions: list[Preemption] = []
        self.preempted: set[tuple[int, int]] = set()

    def observe(self, e: Entry) -> None:
        if isinstance(e.obj, core_pb2.Pod):
            self._pod(e, e.obj)
        elif isinstance(e.obj, core_pb2.Event) and e.type != "DELETED":
            self._event(e, e.obj)
        elif isinstance(e.obj, core_pb2.Node) and e.type != "DELETED":
            self.nodes.add(e.name)

    def _pod(self, e: Entry, pod: core_pb2.Pod) -> None:
        key = pod.metadata.uid or f"{e.namespace}/{e.name}"
        st = self.open.get(key)
        if e.type == "DELETED":
            if st is not None:
                self._close(st, e.rev, "deleted")
            return
        if st is None:
            done = self.by_uid.get(key)
            if done is not None and done.ended != "deleted":  # terminal: later writes change nothing drawn
                return
            bar = Bar(pod=f"{e.namespace}/{e.name}", uid=pod.metadata.uid, start=e.rev)
            st = self.open[key] = _Open(bar)
            self.bars.append(bar)
            self.by_uid[key] = self.by_name[bar.pod] = bar
        else:
            self._resize_request(st, pod, e.rev)
        bar = st.bar
        bar.node = pod.spec.node_name or bar.node
        bar.priority = pod.spec.priority
        st.resources = _resources(pod)
        if pod.status.phase in TERMINAL:
            bar.reason = pod.status.reason
            self._close(st, e.rev, pod.status.phase)
            return
        phase = _phase(pod)
        if phase != st.phase:
            if st.phase:
                bar.segments.append(Segment(st.phase, st.phase_start, e.rev))
            st.phase, st.phase_start = phase, e.rev
        self._resize_spans(st, _resize_states(pod), e.rev)

    def _resize_request(self, st: _Open, pod: core_pb2.Pod, rev: int) -> None:
        now = _resources(pod)
        if st.bar.node and now != st.resources:
            st.bar.resize_requests.append(ResizeRequest(rev, _change(st.resources, now)))

    def _resize_spans(self, st: _Open, states: dict[str, str], rev: int) -> None:
        for state in [s for s in st.resizes if s not in states]:
            start, message = st.resizes.pop(state)
            st.bar.resizes.append(ResizeSpan(state, start, rev, message))
        for state, message in states.items():
            st.resizes.setdefault(state, (rev, message))

    def _close(self, st: _Open, rev: int, how: str) -> None:
        bar = st.bar
        if st.phase:
            bar.segments.append(Segment(st.phase, st.phase_start, rev))
        self._resize_spans(st, {}, rev)
        bar.end, bar.ended = rev, how
        del self.open[bar.uid or bar.pod]

    def _event(self, e: Entry, ev: core_pb2.Event) -> None:
        if marks.is_fault(ev):
            if e.type == "ADDED":
                component = marks.fault_component(ev)
                role, _, node = component.partition("/")
                lane = node if role in ("kubelet", "runtime") and node else CONTROL_PLANE
                self.faults.append(Fault(e.rev, marks.fault_action(ev), component, lane, ev.message))
            return
        ref = ev.involved_object
        if ref.kind != "Pod":
            return
        subject = self._find(ref.uid, ref.namespace, ref.name)
        if subject is None:
            return
        if e.type == "ADDED":
            subject.events.append(PodEvent(e.rev, ev.reason, ev.message))
        if ev.reason == "Preempted" and ev.related.name:
            preemptor = self._find(ev.related.uid, ev.related.namespace, ev.related.name)
            pair = (id(preemptor), id(subject))
            if preemptor is not None and pair not in self.preempted:
                self.preempted.add(pair)
                self.preemptions.append(Preemption(e.rev, preemptor, subject, ev.message))

    def _find(self, uid: str, namespace: str, name: str) -> Bar | None:
        return (self.by_uid.get(uid) if uid else None) or self.by_name.get(f"{namespace or 'default'}/{name}")

    # ---------------------------------------------------------------------------------- finishing

    def finish(self, since: int, last: int, pods: Collection[str]) -> Timeline:
        end = last + 1
        for st in list(self.open.values()):
            bar = st.bar
            if st.phase:
                bar.segments.append(Segment(st.phase, st.phase_start, end))
            self._resize_spans(st, {}, end)
            bar.end = end
        keep = _selected(self.bars, pods)
        bars = [_clip(b, since) for b in self.bars if b.end > since and b in keep]
        kept = set(map(id, bars))
        preemptions = [p for p in self.preemptions
                       if since <= p.rev and id(p.preemptor) in kept and id(p.victim) in kept]
        faults = [f for f in self.faults if since <= f.rev]
        lanes = _lanes(bars, faults, self.nodes)
        revs = sorted(set(_revs(bars, preemptions, faults)) - {end})
        return Timeline(since, last, end, revs, lanes, preemptions)


def _selected(bars: list[Bar], pods: Collection[str]) -> Collection[Bar]:
    if not pods:
        return bars
    keep: list[Bar] = []
    for want in pods:
        hits = [b for b in bars if want in (b.pod, b.name)]
        if not hits:
            raise NoSuchPod(f"no pod {want!r} in the history")
        keep.extend(hits)
    return keep


def _clip(bar: Bar, since: int) -> Bar:
    """The bar as seen from ``since`` on."""
    if bar.start >= since:
        return bar
    bar.start, bar.clipped = since, True
    bar.segments = [Segment(s.phase, max(s.start, since), s.end) for s in bar.segments if s.end > since]
    bar.resizes = [ResizeSpan(r.state, max(r.start, since), r.end, r.message) for r in bar.resizes if r.end > since]
    bar.resize_requests = [r for r in bar.resize_requests if r.rev >= since]
    bar.events = [ev for ev in bar.events if ev.rev >= since]
    return bar


def _lanes(bars: list[Bar], faults: list[Fault], nodes: set[str]) -> list[Lane]:
    """The control plane lane, the unscheduled lane, then one lane per node (node-2 before
    node-10); bars packed in rows."""
    by_name: dict[str, Lane] = {CONTROL_PLANE: Lane(CONTROL_PLANE, "control-plane"),
                                UNSCHEDULED: Lane(UNSCHEDULED, "unscheduled")}
    named = nodes | {b.node for b in bars if b.node} | {f.lane for f in faults}
    for name in sorted(named - set(by_name), key=_natural):
        by_name.setdefault(name, Lane(name, "node"))
    for bar in bars:
        bar.lane = bar.node or UNSCHEDULED
        by_name[bar.lane].bars.append(bar)
    for f in faults:
        by_name[f.lane].faults.append(f)
    for lane in by_name.values():
        lane.rows = _pack(lane.bars)
    return list(by_name.values())


def _pack(bars: list[Bar]) -> int:
    """Give each bar a row, the first one free (a bar ends before the next in its row starts);
    the number of rows. Bars keep their start order."""
    bars.sort(key=lambda b: (b.start, b.pod))
    ends: list[tuple[int, int]] = []  # (end of the row's last bar, row), a heap
    free: list[int] = []  # rows whose last bar ended, a heap: the lowest is taken first
    rows = 0
    for bar in bars:
        while ends and ends[0][0] < bar.start:
            heapq.heappush(free, heapq.heappop(ends)[1])
        if free:
            bar.row = heapq.heappop(free)
        else:
            bar.row, rows = rows, rows + 1
        heapq.heappush(ends, (bar.end, bar.row))
    return rows


def _revs(bars: list[Bar], preemptions: list[Preemption], faults: list[Fault]) -> Iterable[int]:
    for b in bars:
        yield b.start
        yield b.end
        for s in b.segments:
            yield s.start
        for r in b.resizes:
            yield r.start
            yield r.end
        for q in b.resize_requests:
            yield q.rev
    for p in preemptions:
        yield p.rev
    for f in faults:
        yield f.rev


# ------------------------------------------------------------------------------------- a pod


def _phase(pod: core_pb2.Pod) -> str:
    """The pod's phase on the timeline (its status phase not terminal)."""
    if pod.metadata.deletion_timestamp:
        return "terminating"
    if pod.status.phase == "Running":
        return "running"
    return "bound" if pod.spec.node_name else "pending"


def _resize_states(pod: core_pb2.Pod) -> dict[str, str]:
    """The resize conditions the pod holds: state -> message."""
    out: dict[str, str] = {}
    for c in pod.status.conditions:
        if c.status != "True":
            continue
        if c.type == "PodResizePending":
            out[_PENDING_REASONS.get(c.reason, "deferred")] = c.message or c.reason
        elif c.type == "PodResizeInProgress":
            out["in-progress"] = c.message or "in progress"
    return out


_Resources = tuple[tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], ...]


def _resources(pod: core_pb2.Pod) -> _Resources:
    return tuple((c.name, tuple(sorted(c.resources.requests.items())), tuple(sorted(c.resources.limits.items())))
                 for c in pod.spec.containers)


def _change(before: _Resources, after: _Resources) -> str:
    """``c1 requests cpu 1 -> 2, limits cpu 1 -> 2``: what a resize asked for."""
    was = {name: (dict(req), dict(lim)) for name, req, lim in before}
    out = []
    for name, req, lim in after:
        old_req, old_lim = was.get(name, ({}, {}))
        for what, old, new in (("requests", old_req, dict(req)), ("limits", old_lim, dict(lim))):
            for res in sorted(old.keys() | new.keys()):
                if old.get(res) != new.get(res):
                    out.append(f"{name} {what} {res} {old.get(res, '-')} -> {new.get(res, '-')}")
    return ", ".join(out) or "resources changed"


def _natural(name: str) -> list[object]:
    """node-2 before node-10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]
