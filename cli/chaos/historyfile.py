"""A saved ``kplane history``: its JSON lines read back into the entries ``kplane check`` replays,
for ``kplane record --history FILE`` and ``kplane diff HISTORY_A HISTORY_B``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cli.check.framework import Entry
from machinery import jsonconv
from machinery.kinds import UnknownKindError, lookup

TYPES = ("ADDED", "MODIFIED", "DELETED")


class HistoryFileError(ValueError):
    """A file that is no ``kplane history`` output; the message names the file and line."""


def read(path: Path | str) -> list[Entry]:
    """Every entry of the file, in its order (``kplane history`` writes them by revision)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise HistoryFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    entries: list[Entry] = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            entries.append(entry_of(line, f"{path}:{n}"))
    return entries


def entry_of(line: str, where: str) -> Entry:
    """One JSON line ``{rev, type, kind, namespace, name, object}``; ``where`` names it in errors."""
    try:
        doc: Any = json.loads(line)
    except ValueError as exc:
        raise HistoryFileError(f"{where}: not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise HistoryFileError(f"{where}: want a JSON object with rev, type, kind, name and object")
    missing = [k for k in ("rev", "type", "kind", "name", "object") if k not in doc]
    if missing:
        raise HistoryFileError(f"{where}: not a kplane history line: no {', '.join(missing)}")
    rev, type_ = doc["rev"], doc["type"]
    if isinstance(rev, bool) or not isinstance(rev, int) or rev < 0:
        raise HistoryFileError(f"{where}: rev must be a whole number, got {rev!r}")
    if type_ not in TYPES:
        raise HistoryFileError(f"{where}: type must be one of {', '.join(TYPES)}, got {type_!r}")
    try:
        kind = lookup(str(doc["kind"]))
    except UnknownKindError:
        raise HistoryFileError(f"{where}: unknown kind {doc['kind']!r}") from None
    try:
        obj = jsonconv.from_dict(kind.message, doc["object"])
    except ValueError as exc:
        raise HistoryFileError(f"{where}: {kind.name} {doc['name']}: {exc}") from None
    return Entry(rev, type_, kind.name, str(doc.get("namespace") or ""), str(doc["name"]), obj)
