"""Kubernetes time formats: metav1.Time (RFC 3339, seconds) and MicroTime (microseconds)."""

from __future__ import annotations

import time
from datetime import datetime, timezone


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
