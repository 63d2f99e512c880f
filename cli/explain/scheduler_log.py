"""The scheduler's log records about one pod: what it decides but never writes to the API.

Every scheduler replica logs JSON lines to ``<data-dir>/logs/scheduler*.log`` (``scheduler.log``,
``scheduler-2.log``, ...). Read here: ``pod_requeued`` (a cluster event moved the pod on: which
event, which plugin's QueueingHint and PreQueueingHint, from which sub-queue to which),
``pod_unschedulable`` / ``resize_unschedulable`` (the plugin behind each reason of the
FailedScheduling message), ``preemption_victims_chosen``, ``resize_preemption_started``,
``scheduling_error`` and ``binding_failed``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from cli.explain import fit_message
from cli.explain.step import SCHEDULER_LOG, Step
from machinery import timeutil

REQUEUED: Final = "pod_requeued"
PARKED: Final = "parked"  # resize_unschedulable's outcome for a resize that fits (scheduler/metrics.py)
_VERDICTS: Final = ("pod_unschedulable", "resize_unschedulable")
_READ: Final = frozenset({REQUEUED, *_VERDICTS, "preemption_victims_chosen", "resize_preemption_started",
                          "scheduling_error", "binding_failed"})


@dataclass(frozen=True)
class LogRecord:
    time: datetime
    component: str  # the replica: the log file's name (scheduler, scheduler-2, ...)
    event: str
    fields: Mapping[str, Any]

    @property
    def ts(self) -> str:
        return str(self.fields.get("ts", ""))


def log_files(logs: Path) -> list[Path]:
    """Every scheduler replica's log in a cluster's log directory."""
    return sorted(logs.glob("scheduler*.log"))


def read(paths: Iterable[Path], pod: str) -> list[LogRecord]:
    """The records about pod ``pod`` (``namespace/name``) in these files, in time order. Lines that
    are no JSON record (a traceback, a torn last line) are passed over."""
    quoted = json.dumps(pod)
    out = []
    for path in paths:
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if quoted not in line:
                    continue  # cheap: most lines are about other pods
                try:
                    rec = json.loads(line)
                    when = timeutil.parse(rec.get("ts", ""))
                except (ValueError, AttributeError):
                    continue
                if not isinstance(rec, dict) or when is None or rec.get("event") not in _READ:
                    continue
                if rec.get("pod") == pod:
                    out.append(LogRecord(when, path.stem, rec["event"], rec))
    out.sort(key=lambda r: r.time)
    return out


def reason_plugins(records: Iterable[LogRecord]) -> dict[str, str]:
    """The plugin behind each reason the scheduler gave for rejecting the pod: ``reasons`` of
    its verdict records; for a record without them, a single rejecting plugin gave every reason."""
    out: dict[str, str] = {}
    for r in records:
        if r.event not in _VERDICTS:
            continue
        reasons, plugins = r.fields.get("reasons"), r.fields.get("plugins")
        if isinstance(reasons, dict) and reasons:
            out.update({str(k): str(v) for k, v in reasons.items()})
        elif isinstance(plugins, list) and len(plugins) == 1:
            parsed = fit_message.parse(str(r.fields.get("message", "")))
            out.update({reason: str(plugins[0]) for _, reason in parsed.filters.reasons} if parsed else {})
    return out


def trigger_rev(r: LogRecord) -> int:
    """The revision of the change a ``pod_requeued`` record names as what moved the pod (its
    object's resourceVersion); 0 when it names none (the queue's own events)."""
    rv = str(r.fields.get("trigger_rv") or "")
    return int(rv) if rv.isdigit() else 0


def step_of(rev: int, r: LogRecord) -> Step | None:
    """The step a record is, placed at revision ``rev``; None for the verdict records of a
    failure (they name the plugins of the FailedScheduling event's reasons, not a step of their
    own)."""
    f = r.fields
    if r.event == REQUEUED:
        what = f"requeued by {f.get('cluster_event')}"
        trigger = f.get("trigger")
        if trigger and trigger != f.get("pod"):
            what += f" of {trigger}"
        plugin = f.get("plugin")
        if plugin:
            said = f"{plugin} QueueingHint: {f.get('hint') or 'Queue'}"
            if f.get("pre_queueing_hint"):
                said += f", named by {plugin} PreQueueingHint"
            what += f" ({said})"
        what += f", {f.get('from_queue')} -> {f.get('to_queue')}"
    elif r.event == "preemption_victims_chosen":
        victims = ", ".join(f.get("victims") or [])
        what = f"preemption: victims chosen on {f.get('node')}: {victims}"
    elif r.event == "resize_preemption_started":
        what = f"preemption for the resize started on {f.get('node')}"
    elif r.event == "scheduling_error":
        what = f"scheduling error: {f.get('error')}"
    elif r.event == "binding_failed":
        what = f"binding to {f.get('node')} failed: {f.get('error')}"
    elif r.event == "resize_unschedulable" and f.get("outcome") == PARKED:
        what = "the resize fits its node now: parked until the kubelet actuates it"
    else:
        return None
    return Step(rev, r.component, what, SCHEDULER_LOG, r.ts)
