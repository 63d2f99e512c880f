"""Kubernetes time formats: metav1.Time (RFC 3339, seconds) and MicroTime (microseconds)."""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from fractions import Fraction


def now() -> datetime:
    return datetime.now(timezone.utc)


def rfc3339(t: datetime | None = None) -> str:
    """metav1.Time: ``2026-11-22T01:53:13Z``."""
    if t is None:
        g = time.gmtime()
        return (f"{g.tm_year:04d}-{g.tm_mon:02d}-{g.tm_mday:02d}T"
                f"{g.tm_hour:02d}:{g.tm_min:02d}:{g.tm_sec:02d}Z")
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(t: datetime | None = None) -> str:
    """metav1.MicroTime: ``2026-11-22T01:53:13.123456Z``."""
    return (t or now()).astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse(text: str) -> datetime | None:
    """Parse either format; None for an empty string."""
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def age(text: str, at: datetime | None = None) -> float:
    """Seconds since the time ``text`` (0 if unset)."""
    t = parse(text)
    return ((at or now()) - t).total_seconds() if t else 0.0


def human_duration(seconds: float) -> str:
    """kubectl's short age: 5s, 3m, 2m5s, 4h, 3d."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 48:
        return f"{h}h"
    return f"{h // 24}d"


_DURATION_UNITS = {"ns": Fraction(1, 10**9), "us": Fraction(1, 10**6), "µs": Fraction(1, 10**6),
                   "μs": Fraction(1, 10**6), "ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60),
                   "h": Fraction(3600)}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """Go's time.ParseDuration (``1m30s``, ``90s``, ``1.5h``, ``-2s``, ``0``) in seconds, as the
    components' duration flags take it; ValueError otherwise."""
    s = text.strip()
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return 0.0
    pos, total = 0, Fraction(0)
    while pos < len(s):
        m = _DURATION_PART.match(s, pos)
        if m is None:
            break
        total += Fraction(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    if not s or pos != len(s):
        raise ValueError(f"invalid duration {text!r}: want a duration like 90s, 1m30s or 5m")
    return float(sign * total)
