"""``kplane timeline``'s command line: what was asked for checked before anything is read, the
history from the cluster or from a file of ``kplane history`` lines, and the picture written whole
(a temporary file renamed into place) or not at all."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from cli.check.framework import Entry
from cli.check.runner import entry
from cli.timeline import FORMATS, draw, model, svg
from machinery import jsonconv
from machinery.client import Client
from machinery.kinds import UnknownKindError, lookup


class TimelineError(Exception):
    """Bad input to ``kplane timeline``: one line for the user; nothing was written."""


@dataclass(frozen=True)
class Request:
    """What ``kplane timeline`` was asked to draw, checked."""

    output: Path
    fmt: str
    since: int
    until: int | None
    pods: tuple[str, ...]

    @classmethod
    def parse(cls, output: str, since: int, until: int | None, pods: str | None) -> Request:
        path = Path(output)
        fmt = path.suffix[1:].lower()
        if fmt not in FORMATS:
            raise TimelineError(f"-o {output}: the file name must end in .html or .svg")
        if path.is_dir():
            raise TimelineError(f"-o {output}: is a directory")
        if not path.parent.is_dir():
            raise TimelineError(f"-o {output}: no directory {path.parent}")
        if since < 0:
            raise TimelineError("--since must be >= 0")
        if until is not None and until < since:
            raise TimelineError(f"--until {until} is before --since {since}")
        names = tuple(n.strip() for n in (pods or "").split(",")) if pods is not None else ()
        if any(not n for n in names):
            raise TimelineError(f"--pods {pods!r}: give pod names (or namespace/name) separated by commas")
        return cls(path, fmt, since, until, names)

    def write(self, history: History) -> str:
        """Draw ``history`` into the output file; what was written, in one line."""
        until = self.until if self.until is not None else history.last
        try:
            t = model.build(history.entries, since=self.since, until=until, pods=self.pods)
        except model.NoSuchPod as exc:
            raise TimelineError(f"--pods: {exc}") from None
        write_atomically(self.output, draw(t, self.fmt))
        return f"wrote {self.output}: revisions {t.first} to {t.last}, {svg.summary(t)}"


@dataclass
class History:
    """The entries of the kinds the timeline reads (``model.KINDS``; the others are not even
    decoded), and the last revision read of any kind."""

    entries: list[Entry] = field(default_factory=list)
    last: int = 0


async def from_cluster(client: Client) -> History:
    """The cluster's whole history. From the start even with ``--since``: what was going on at
    that revision began before it."""
    out = History()
    async for resp in client.history(0):
        out.entries.extend(entry(h) for h in resp.entries if h.kind in model.KINDS)
        out.last = max(out.last, resp.revision, *(h.rev for h in resp.entries[-1:]))
    return out


def from_file(name: str) -> History:
    """The history in a file of ``kplane history`` JSON lines (``-``: standard input)."""
    out = History()
    try:
        if name == "-":
            _read(sys.stdin, "-", out)
        else:
            with open(name, encoding="utf-8") as f:
                _read(f, name, out)
        return out
    except OSError as exc:
        raise TimelineError(f"--history {name}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise TimelineError(f"--history {name}: not UTF-8 text") from None


def _read(f: IO[str], name: str, out: History) -> None:
    last = 0
    for n, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            rev, kind = doc["rev"], doc["kind"]
            if not isinstance(rev, int) or isinstance(rev, bool) or not isinstance(kind, str):
                raise ValueError("rev must be a number and kind a string")
            if rev < last:
                raise ValueError(f"revision {rev} after {last}: not in revision order")
            out.last = last = rev
            if kind not in model.KINDS:
                continue
            obj = jsonconv.from_dict(lookup(kind).message, doc["object"])
            out.entries.append(Entry(rev, doc["type"], kind, doc.get("namespace", ""), doc["name"], obj))
        except (ValueError, KeyError, TypeError, UnknownKindError) as exc:
            what = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise TimelineError(f"--history {name} line {n}: not a `kplane history` line: {what}") from None


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file beside it, renamed over it once
    complete: a reader sees the old file or the new one, never half of one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
