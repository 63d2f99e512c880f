"""Failpoints, after etcd's gofail: named points in the code where a fault can be injected.

A component declares its points once (``declare("scheduler/before-bind", "...")``) and calls
``await hit("scheduler/before-bind")`` where the fault belongs. Points are armed at start by
``KPLANE_FAILPOINTS="a=panic;b=sleep(200)"`` or at run time through the admin port
(``kplane failpoint COMPONENT NAME ACTION``).

Actions (gofail's terms): ``panic`` (the process dies at once, like SIGKILL), ``sleep(ms)``,
``error`` (raises FailpointError where the point sits), ``pause`` (the code reaching the point
waits there until the point is re-armed or turned ``off``: a test holds a component between two
steps, looks, then lets it go), ``return`` (gofail's term: the code at the point takes its
alternative path; the points that turn a safety check off are read with ``returns``), ``off``.
A term may be prefixed with a count ``N*`` (fire on the next N hits only) or a percentage ``P%``
(fire with that probability).

``pause`` only holds at points in async code (``hit``); at a synchronous point (``hit_sync``) it
would stop the event loop that serves the admin port, so there it does nothing but log.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass

from prometheus_client import Counter

ENV_VAR = "KPLANE_FAILPOINTS"

_HITS = Counter("kplane_failpoint_hits_total", "Times an armed failpoint fired.", ["name", "action"])
_TERM = re.compile(r"^(?:(?P<pct>\d+(?:\.\d+)?)%)?(?:(?P<count>\d+)\*)?(?P<action>panic|sleep|error|pause|return|off)"
                   r"(?:\((?P<arg>[^)]*)\))?$")


class FailpointError(Exception):
    """Raised where a failpoint armed with ``error`` sits."""

    def __init__(self, name: str):
        super().__init__(f"failpoint {name} injected an error")
        self.name = name


class UnknownFailpointError(LookupError):
    pass


class BadFailpointActionError(ValueError):
    pass


@dataclass
class _Armed:
    action: str
    arg: float = 0.0
    remaining: int | None = None
    percent: float | None = None
    text: str = ""


_declared: dict[str, str] = {}
_armed: dict[str, _Armed] = {}
_generation: dict[str, int] = {}  # bumped on every arm(): releases what a pause holds
_paused: dict[str, int] = {}  # how many callers a pause holds now, by point


def declare(name: str, doc: str) -> str:
    """Register a failpoint this process has; returns the name for use at the call site."""
    _declared[name] = doc
    return name


def declared() -> dict[str, str]:
    return dict(_declared)


def armed() -> dict[str, str]:
    return {name: a.text for name, a in _armed.items()}


def paused() -> dict[str, int]:
    """Points where a ``pause`` holds callers now, with how many (a test waits for this)."""
    return dict(_paused)


def is_armed(name: str) -> bool:
    """Whether ``name`` is armed: a hot path asks before awaiting :func:`hit`, which would
    otherwise make a coroutine object per call for nothing."""
    return name in _armed


def _parse(text: str) -> _Armed:
    m = _TERM.match(text.strip())
    if not m:
        raise BadFailpointActionError(
            f"bad failpoint action {text!r}: want panic, sleep(ms), error, pause, return or off, "
            "optionally N* or P% first")
    action, arg = m.group("action"), m.group("arg")
    value = 0.0
    if action == "sleep":
        try:
            value = float(arg or "")
        except ValueError:
            raise BadFailpointActionError(f"bad failpoint action {text!r}: sleep needs milliseconds") from None
    elif arg:
        raise BadFailpointActionError(f"bad failpoint action {text!r}: {action} takes no argument")
    return _Armed(action, value, int(m.group("count")) if m.group("count") else None,
                  float(m.group("pct")) if m.group("pct") else None, text.strip())


def arm(name: str, action: str) -> None:
    """Arm (or with ``off`` disarm) a declared failpoint."""
    if name not in _declared:
        known = ", ".join(sorted(_declared)) or "none"
        raise UnknownFailpointError(f"unknown failpoint {name!r} (this component has: {known})")
    parsed = _parse(action)
    _generation[name] = _generation.get(name, 0) + 1
    if parsed.action == "off":
        _armed.pop(name, None)
    else:
        _armed[name] = parsed


def arm_from_env(environ: dict[str, str] | None = None) -> None:
    """Arm what ``KPLANE_FAILPOINTS`` names; names of other components are ignored."""
    text = (environ if environ is not None else os.environ).get(ENV_VAR, "")
    for item in text.split(";"):
        if not item.strip():
            continue
        name, eq, action = item.partition("=")
        if not eq:
            raise BadFailpointActionError(f"bad {ENV_VAR} entry {item!r}: want NAME=ACTION")
        if name.strip() in _declared:
            arm(name.strip(), action)


def _fire(name: str) -> _Armed | None:
    a = _armed.get(name)
    if a is None:
        return None
    if a.percent is not None and random.random() * 100 >= a.percent:
        return None
    if a.remaining is not None:
        a.remaining -= 1
        if a.remaining <= 0:
            _armed.pop(name, None)
    _HITS.labels(name=name, action=a.action).inc()
    if a.action == "panic":
        sys.stderr.write(f'{{"level": "error", "event": "failpoint_panic", "failpoint": "{name}"}}\n')
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    if a.action == "error":
        raise FailpointError(name)
    return a


_PAUSE_POLL = 0.01


async def hit(name: str) -> None:
    """The failpoint ``name`` in async code. Costs one dict lookup when not armed."""
    if name not in _armed:
        return
    a = _fire(name)
    if a is None:
        return
    if a.action == "sleep":
        await asyncio.sleep(a.arg / 1000.0)
    elif a.action == "pause":
        # Held until the point is armed again (with anything, ``off`` included); a counted
        # ``1*pause`` is no longer armed once fired, and is released the same way.
        generation = _generation.get(name, 0)
        sys.stderr.write(f'{{"level": "info", "event": "failpoint_paused", "failpoint": "{name}"}}\n')
        _paused[name] = _paused.get(name, 0) + 1
        try:
            while _generation.get(name, 0) == generation:
                await asyncio.sleep(_PAUSE_POLL)
        finally:
            _paused[name] -= 1
            if not _paused[name]:
                del _paused[name]


def hit_sync(name: str) -> None:
    """The failpoint ``name`` in synchronous code (sleep blocks the thread)."""
    if name not in _armed:
        return
    a = _fire(name)
    if a is not None and a.action == "sleep":
        time.sleep(a.arg / 1000.0)
    elif a is not None and a.action == "pause":
        sys.stderr.write(f'{{"level": "warning", "event": "failpoint_pause_ignored", "failpoint": "{name}", '
                         f'"reason": "synchronous point"}}\n')


def returns(name: str) -> bool:
    """Whether the failpoint ``name`` fires now with ``return``: the caller then takes the point's
    alternative path (a safety check skipped). Other actions act as at any point (``sleep``
    blocks the thread, ``panic`` and ``error`` as always). One dict lookup when not armed."""
    if name not in _armed:
        return False
    a = _fire(name)
    if a is None:
        return False
    if a.action == "sleep":
        time.sleep(a.arg / 1000.0)
    return a.action == "return"


def reset() -> None:
    """Disarm everything and release what is paused (tests)."""
    _armed.clear()
    for name in list(_generation):
        _generation[name] += 1
