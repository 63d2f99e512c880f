"""A running component's Prometheus metrics, through its admin port: one metric summed over its
series, the scheduling queue's requeues by cluster event, a runtime's calls by operation."""

from __future__ import annotations

import urllib.request

from tests.harness.cluster import admin


def metric(tc, component: str, name: str, labels: str = "") -> float:
    """``name`` from ``component``'s /metrics, summed over the series whose labels start with
    ``labels`` (e.g. ``'queue="active"'``; every series when empty); 0 when there is none."""
    with urllib.request.urlopen(f"http://{admin(tc, component)}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    prefixes = (f"{name}{{{labels}",) if labels else (f"{name} ", f"{name}{{")
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefixes))


def requeued_by(tc, event: str) -> float:
    """Pods the scheduling queue moved on cluster event ``event`` (to activeQ or backoffQ)."""
    return sum(metric(tc, "scheduler", "scheduler_queue_incoming_pods_total", f'event="{event}",queue="{q}"}}')
               for q in ("active", "backoff"))


async def runtime_calls(tc, node: str, operation: str) -> float:
    """``kplane_runtime_operations_total`` of ``node``'s runtime for one operation."""
    return metric(tc, f"runtime/{node}", "kplane_runtime_operations_total", f'operation_type="{operation}"}}')
