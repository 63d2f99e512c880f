"""The controller-manager's flags, as kube-controller-manager names them and with its defaults.

``--controllers`` picks controllers as Kubernetes does: ``*`` (every one), ``name`` (this one),
``-name`` (not this one), comma-separated. Durations are Go durations (``40s``, ``1m``). A bad
flag ends the process before it connects, with one line naming the flag. ``--pod-gc-period`` and
``--pod-gc-quarantine`` are kplane's: Kubernetes fixes them at 20 s and 40 s (its integration tests
set them through NewPodGCInternal), kplane's tests set them by flag.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from machinery import timeutil

# kube-controller-manager's controllers kplane has (controllers.main.REGISTRY builds them), by its names.
CONTROLLERS = ("podgc", "nodelifecycle", "taint-eviction-controller", "replicaset", "deployment",
               "garbagecollector", "namespace", "resourcequota", "disruption", "resourceclaim")


@dataclass(frozen=True)
class ControllerOptions:
    enabled: frozenset[str]
    concurrent_replicaset_syncs: int = 5
    concurrent_deployment_syncs: int = 5
    concurrent_gc_syncs: int = 20
    concurrent_namespace_syncs: int = 10
    concurrent_resource_quota_syncs: int = 5
    # nodelifecycle: how often node health is checked, how long a node may stay silent.
    node_monitor_period: float = 5.0
    node_monitor_grace_period: float = 50.0  # 40 s until Kubernetes 1.32
    node_startup_grace_period: float = 60.0
    # podgc: terminated pods kept before the oldest are deleted (0: never by count).
    terminated_pod_gc_threshold: int = 12500
    pod_gc_period: float = 20.0  # Kubernetes' gcCheckPeriod (fixed there; a flag here, for tests)
    pod_gc_quarantine: float = 40.0  # how long a node absent from the informer may take to show up
    # resourcequota: a full recount of every quota this often.
    resource_quota_sync_period: float = 300.0


def add_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--controllers", default="*",
                   help=f"controllers to run: '*', 'name' or '-name', comma-separated; known: {', '.join(CONTROLLERS)}")
    for flag, count in (("--concurrent-replicaset-syncs", 5), ("--concurrent-deployment-syncs", 5),
                        ("--concurrent-gc-syncs", 20), ("--concurrent-namespace-syncs", 10),
                        ("--concurrent-resource-quota-syncs", 5), ("--terminated-pod-gc-threshold", 12500)):
        p.add_argument(flag, type=int, default=count)
    for flag, duration in (("--node-monitor-period", "5s"), ("--node-monitor-grace-period", "50s"),
                           ("--node-startup-grace-period", "1m"), ("--pod-gc-period", "20s"),
                           ("--pod-gc-quarantine", "40s"), ("--resource-quota-sync-period", "5m")):
        p.add_argument(flag, default=duration)


def enabled_controllers(spec: str) -> frozenset[str]:
    """Kubernetes' --controllers: '*' turns on every controller, '-name' turns one off, 'name' one on."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    for item in items:
        name = item.removeprefix("-")
        if item != "*" and name not in CONTROLLERS:
            raise ValueError(f'"{name}" is not in the list of known controllers ({", ".join(CONTROLLERS)})')
    chosen = set(CONTROLLERS) if "*" in items else set()
    for item in items:
        if item.startswith("-"):
            chosen.discard(item[1:])
        elif item != "*":
            chosen.add(item)
    return frozenset(chosen)


def from_args(a: argparse.Namespace) -> ControllerOptions:
    """The options from the flags; SystemExit with one line on bad input."""
    try:
        enabled = enabled_controllers(a.controllers)
    except ValueError as exc:
        raise SystemExit(f"invalid --controllers: {exc}") from None
    durations: dict[str, float] = {}
    for attr in ("node_monitor_period", "node_monitor_grace_period", "node_startup_grace_period", "pod_gc_period",
                 "pod_gc_quarantine", "resource_quota_sync_period"):
        flag = "--" + attr.replace("_", "-")
        try:
            durations[attr] = timeutil.parse_duration(getattr(a, attr))
        except ValueError as exc:
            raise SystemExit(f"invalid {flag}: {exc}") from None
        if durations[attr] <= 0:
            raise SystemExit(f"invalid {flag} {getattr(a, attr)!r}: must be positive")
    for attr in ("concurrent_replicaset_syncs", "concurrent_deployment_syncs", "concurrent_gc_syncs",
                 "concurrent_namespace_syncs", "concurrent_resource_quota_syncs"):
        if getattr(a, attr) < 1:
            raise SystemExit(f"invalid --{attr.replace('_', '-')} {getattr(a, attr)}: must be at least 1")
    if a.terminated_pod_gc_threshold < 0:
        raise SystemExit(f"invalid --terminated-pod-gc-threshold {a.terminated_pod_gc_threshold}: "
                         "must not be negative")
    return ControllerOptions(enabled=enabled, concurrent_replicaset_syncs=a.concurrent_replicaset_syncs,
                             concurrent_deployment_syncs=a.concurrent_deployment_syncs,
                             concurrent_gc_syncs=a.concurrent_gc_syncs,
                             concurrent_namespace_syncs=a.concurrent_namespace_syncs,
                             concurrent_resource_quota_syncs=a.concurrent_resource_quota_syncs,
                             terminated_pod_gc_threshold=a.terminated_pod_gc_threshold, **durations)
