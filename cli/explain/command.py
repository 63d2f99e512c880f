"""``kplane explain pod NAME [-n NS] [--uid UID] [-o text|json] [--history FILE] [--logs DIR]``:
the input (a saved history file, or entries the caller read from the cluster; the scheduler's
logs) and the output (one line per step, or the steps as JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from cli.check.framework import Entry
from cli.explain import scheduler_log
from cli.explain.story import PodNotFound, Story, build
from machinery import jsonconv
from machinery.kinds import UnknownKindError, lookup

POD_KINDS = ("pod", "pods", "po")


class ExplainError(Exception):
    """Bad input: a missing or malformed file, an unknown pod. One line for the user."""


def read_history(path: Path) -> Iterator[Entry]:
    """The entries of a saved ``kplane history`` (JSON lines ``{rev, type, kind, namespace, name,
    object}``), each object decoded into its message."""
    try:
        f = path.open(encoding="utf-8")
    except OSError as exc:
        raise ExplainError(f"cannot read --history {path}: {exc.strerror or exc}") from None
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                kind = lookup(d["kind"])
                obj = jsonconv.from_dict(kind.message, d["object"])
                yield Entry(int(d["rev"]), str(d["type"]), kind.name, d.get("namespace", ""), d.get("name", ""), obj)
            except (ValueError, KeyError, TypeError, UnknownKindError, jsonconv.DecodeError) as exc:
                raise ExplainError(f"{path} line {n}: not a kplane history entry ({exc})") from None


def scheduler_records(logs: Path | None, pod: str) -> list[scheduler_log.LogRecord]:
    """The scheduler's records about ``pod`` in the log directory ``logs`` (none without one)."""
    if logs is None:
        return []
    if not logs.is_dir():
        raise ExplainError(f"--logs {logs}: no such directory")
    return scheduler_log.read(scheduler_log.log_files(logs), pod)


def explain(entries: Sequence[Entry], namespace: str, name: str, uid: str,
            logs: Path | None) -> Story:
    try:
        return build(entries, namespace, name, uid, scheduler_records(logs, f"{namespace}/{name}"))
    except PodNotFound as exc:
        raise ExplainError(str(exc)) from None


def print_story(story: Story, output: str, out: TextIO) -> None:
    """``text``: a header, then ``rev <N>  <component>  <what>`` per step; ``json``: the steps as a
    list of objects."""
    if output == "json":
        json.dump([s.as_dict() for s in story.steps], out, indent=2)
        out.write("\n")
        return
    others = len(story.uids) - 1
    out.write(f"pod {story.namespace}/{story.name} (uid {story.uid})"
              + (f"; {others} other pod(s) of this name in the history: --uid picks one" if others else "") + "\n")
    rev_width = max((len(str(s.rev)) for s in story.steps), default=1)
    comp_width = max((len(s.component) for s in story.steps), default=1)
    for s in story.steps:
        out.write(f"rev {s.rev:<{rev_width}}  {s.component:<{comp_width}}  {s.what}\n")
