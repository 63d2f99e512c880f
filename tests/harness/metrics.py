"""A running component's Prometheus metrics, through its admin port: one metric summed over its
series, the scheduling queue's requeues by cluster event, a runtime's calls by operation, how
far a component's informers of a kind have come."""

from __future__ import annotations

import re
import urllib.request

from tests.harness.cluster import admin

# The samples a metric family of each type exports besides the family's own name (Prometheus'
# text format: a counter ``foo`` is sampled as ``foo_total``, a histogram as ``foo_count`` ...).
_SUFFIXES = ("_total", "_created", "_count", "_sum", "_bucket", "_info")


class MetricNotExported(AssertionError):
    """The component exports no metric of that name: a typo or a renamed metric, never a 0."""


def _families(text: str) -> set[str]:
    """The metric families the exposition declares (``# TYPE name type``)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def _family_of(name: str, families: set[str]) -> str | None:
    if name in families:
        return name
    for suffix in _SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in families:
            return name[: -len(suffix)]
    return None


def series(tc, component: str, name: str) -> dict[str, float]:
    """Every sample of ``name`` in ``component``'s /metrics: its label text (``'{queue="active"}'``,
    ``''`` without labels) -> value; empty when the metric is exported with no series yet (a
    labelled counter nothing has counted). A name the component does not export at all raises
    ``MetricNotExported``, so "equals 0" cannot pass on a renamed metric."""
    with urllib.request.urlopen(f"http://{admin(tc, component)}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    if _family_of(name, _families(text)) is None:
        raise MetricNotExported(f"{component} exports no metric {name!r} (its /metrics has no '# TYPE' for it)")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith((f"{name} ", f"{name}{{")):
            sample, _, value = line.rpartition(" ")
            out[sample[len(name):]] = float(value)
    return out


_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')


def labels_of(text: str) -> dict[str, str]:
    """The label pairs of a ``series`` key or of a selection (``'{a="x",b="y"}'``, ``'b="y"'``)."""
    return dict(_PAIR.findall(text))


def metric(tc, component: str, name: str, labels: str = "") -> float:
    """``name`` from ``component``'s /metrics (``series``), summed over the series that have every
    label pair of ``labels`` (e.g. ``'queue="active"'``; every series when empty). A selection
    that ends with ``}`` takes only the series with exactly those labels."""
    want = labels_of(labels)
    exact = labels.rstrip().endswith("}")
    total = 0.0
    for key, value in series(tc, component, name).items():
        have = labels_of(key)
        if (have == want) if exact else all(have.get(k) == v for k, v in want.items()):
            total += value
    return total


def label(key: str, name: str) -> str:
    """One label's value of a ``series`` key (``label('{a="x",b="y"}', "b")`` is ``"y"``)."""
    pairs = labels_of(key)
    if name not in pairs:
        raise KeyError(f"no label {name!r} in {key!r}")
    return pairs[name]


def requeued_by(tc, event: str) -> float:
    """Pods the scheduling queue moved on cluster event ``event`` (to activeQ or backoffQ)."""
    return sum(metric(tc, "scheduler", "scheduler_queue_incoming_pods_total", f'event="{event}",queue="{q}"}}')
               for q in ("active", "backoff"))


async def runtime_calls(tc, node: str, operation: str) -> float:
    """``kplane_runtime_operations_total`` of ``node``'s runtime for one operation."""
    return metric(tc, f"runtime/{node}", "kplane_runtime_operations_total", f'operation_type="{operation}"}}')


async def informers_reach(tc, component: str, kind: str, resource_version: str | int) -> None:
    """Until ``component``'s informers of ``kind`` have seen ``resource_version`` (their
    ``reflector_last_resource_version``): every change up to it is in their caches."""
    from tests.harness.wait import eventually

    await eventually(lambda: metric(tc, component, "reflector_last_resource_version", f'kind="{kind}"}}')
                     >= int(resource_version), timeout=20,
                     what=f"{component}'s {kind} informers at resourceVersion {resource_version}")
