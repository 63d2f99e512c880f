"""The runtime's state file: atomic, coalesced saves, and a recovery that never crashes.

The file holds one ``RuntimeState`` message (the document ``GetState`` returns) in protobuf's
binary form after a header line and its sha256 — binary because the state is saved after every
change and grows with the containers: encoding it as JSON cost the runtime most of its CPU at a
few hundred containers. A file in the older protobuf-JSON form is still read. A save writes a
temporary file, fsyncs it, renames it over the old one and fsyncs the directory, in a thread, so a
kill at any moment leaves the old or the new state, never a torn one. Saves coalesce:
``await save()`` returns once a write that began after the call has finished, and every caller
waiting meanwhile shares that one write. A corrupt or unreadable file is moved aside
(``<file>.corrupt-<timestamp>``) and the runtime starts empty.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path
from typing import Callable

from google.protobuf import json_format

from machinery.api import cri_pb2
from machinery.logging import get_logger

log = get_logger()


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


MAGIC = b"KPLANE-RUNTIME-STATE 1\n"


class CorruptState(ValueError):
    pass


def encode(state: cri_pb2.RuntimeState) -> bytes:
    payload = state.SerializeToString(deterministic=True)
    return MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload


def decode(data: bytes) -> cri_pb2.RuntimeState:
    """A state file's content; CorruptState if it is neither our binary form nor protobuf JSON."""
    if data.startswith(MAGIC):
        digest, sep, payload = data[len(MAGIC):].partition(b"\n")
        if not sep or hashlib.sha256(payload).hexdigest().encode() != digest:
            raise CorruptState("checksum mismatch")
        return cri_pb2.RuntimeState.FromString(payload)
    if data.lstrip().startswith(b"{"):  # the earlier protobuf-JSON form
        return json_format.Parse(data.decode("utf-8"), cri_pb2.RuntimeState(), ignore_unknown_fields=True)
    raise CorruptState("not a runtime state file")


def _read(path: Path) -> cri_pb2.RuntimeState | None:
    """The state in ``path``; None if there is no file; raises on a corrupt or unreadable one."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return decode(data)


def _move_aside(path: Path) -> Path | None:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{time.time_ns() % 1_000_000_000:09d}"
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, aside)
        return aside
    except OSError:
        return None


def load(path: Path) -> cri_pb2.RuntimeState:
    """The saved state, or an empty one (no file, or a corrupt one moved aside). Blocking."""
    try:
        state = _read(path)
    except Exception as exc:  # any failure to read or parse: recover, never crash
        aside = _move_aside(path)
        log.error("state_file_corrupt", path=str(path), error=f"{type(exc).__name__}: {exc}",
                  moved_to=str(aside) if aside else None)
        return cri_pb2.RuntimeState()
    return state if state is not None else cri_pb2.RuntimeState()


class StateFile:
    """Saves ``snapshot()`` to ``path`` when asked, coalescing concurrent requests."""

    def __init__(self, path: str | os.PathLike, snapshot: Callable[[], cri_pb2.RuntimeState]):
        self.path = Path(path)
        self._snapshot = snapshot
        self._requested = 0  # generation of the latest save() call
        self._written = 0  # generation covered by the last finished write
        self._writer: asyncio.Task | None = None
        self._cond = asyncio.Condition()
        self.writes = 0  # finished writes (tests: coalescing)

    async def load(self) -> cri_pb2.RuntimeState:
        return await asyncio.to_thread(load, self.path)

    async def save(self) -> None:
        """Return once the state as it is now is on disk (or its write failed and was logged)."""
        self._requested += 1
        target = self._requested
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_loop(), name="runtime-state-save")
        async with self._cond:
            await self._cond.wait_for(lambda: self._written >= target)

    async def _write_loop(self) -> None:
        while self._written < self._requested:
            target = self._requested
            data = encode(self._snapshot())  # every change up to ``target`` is in memory already
            try:
                await asyncio.to_thread(_write_atomic, self.path, data)
                self.writes += 1
            except OSError as exc:
                # The state stays in memory; the next change writes all of it again.
                log.error("state_save_failed", path=str(self.path), error=str(exc))
            self._written = target
            async with self._cond:
                self._cond.notify_all()

    async def close(self) -> None:
        """Finish the write in flight, if any."""
        if self._writer is not None:
            await asyncio.shield(self._writer)
