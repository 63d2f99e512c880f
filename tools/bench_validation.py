"""Micro-benchmark of the pod admission hot path: defaulting and validation.

Builds a typical pod (one container with cpu/memory requests and limits, two labels, the
DefaultTolerationSeconds tolerations added by defaulting) and prints microseconds per call of

- ``default_pod``: copying the template into a fresh message plus ``defaults.default_object``
  (the copy alone is printed too);
- ``validate_create("Pod")``;
- ``validate_update("Pod")`` and ``validate_status_update("Pod")`` of an identical pod.

``--cold`` empties the caches keyed by whole serialized messages (pod specs, containers, container
statuses) before every call: what a pod whose spec was not seen before costs. The caches of small
values (names, quantities, ...) stay warm.

Each figure is CPU time (time.process_time), the best of several rounds, so that other
processes on a shared machine disturb it little.

Usage: ``.venv/bin/python tools/bench_validation.py [-n 20000]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from apiserver import defaults, strategy  # noqa: E402
from apiserver.validation import pod as pod_validation  # noqa: E402
from machinery.api import core_pb2  # noqa: E402
from machinery.kinds import POD  # noqa: E402


def make_pod() -> core_pb2.Pod:
    pod = core_pb2.Pod(api_version="v1", kind="Pod")
    pod.metadata.name = "web-7d9f8c6b5-x2x4z"
    pod.metadata.namespace = "default"
    pod.metadata.labels.update({"app": "web", "pod-template-hash": "7d9f8c6b5"})
    c = pod.spec.containers.add(name="c1", image="registry.k8s.io/pause:3.10")
    c.resources.requests.update({"cpu": "100m", "memory": "128Mi"})
    c.resources.limits.update({"cpu": "200m", "memory": "256Mi"})
    return pod


def stored_pod() -> core_pb2.Pod:
    """The template after create: defaulted, with the registry's metadata and a running status."""
    pod = make_pod()
    defaults.default_object("Pod", pod)
    pod.metadata.uid = "6f1f4b8e-2b6a-4a53-9d55-0d7c2c3a1e11"
    pod.metadata.creation_timestamp = "2026-01-01T00:00:00Z"
    pod.metadata.generation = 1
    pod.metadata.resource_version = "42"
    pod.spec.node_name = "node-1"
    pod.status.phase = "Running"
    pod.status.qos_class = "Burstable"
    pod.status.conditions.add(type="Ready", status="True")
    cs = pod.status.container_statuses.add(name="c1", ready=True, image="registry.k8s.io/pause:3.10")
    cs.state.running.started_at = "2026-01-01T00:00:01Z"
    cs.allocated_resources.update(pod.spec.containers[0].resources.requests)
    cs.resources.requests.update(pod.spec.containers[0].resources.requests)
    cs.resources.limits.update(pod.spec.containers[0].resources.limits)
    pod.status.pod_ips.add(ip="10.0.0.5")
    pod.status.host_ip = "192.168.0.1"
    pod.status.host_ips.add(ip="192.168.0.1")
    return pod


def _cold(fn):
    """``fn`` run after emptying the caches keyed by whole serialized specs and containers."""
    names = ((pod_validation, "_VALID_SPECS"), (pod_validation, "_OK_STATUS_RESOURCES"),
             (defaults, "_POD_SPEC_MERGES"), (defaults, "_CONTAINER_MERGES"))
    caches = [c for c in (getattr(module, name, None) for module, name in names) if c is not None]

    def run():
        for c in caches:
            c.clear()
        return fn()
    return run


def bench(label: str, fn, n: int, rounds: int = 5) -> float:
    """Microseconds per call: ``n`` calls in ``rounds`` rounds, the best round counted (the
    others absorb noise from other processes)."""
    for _ in range(min(n, 500)):  # warm caches
        fn()
    per_round = max(1, n // rounds)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(per_round):
            fn()
        best = min(best, (time.process_time() - t0) / per_round)
    us = best * 1e6
    print(f"{label:<34} {us:8.2f} us/call")
    return us


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20000, help="calls per operation")
    ap.add_argument("--rounds", type=int, default=5, help="rounds the calls are split into (best counted)")
    ap.add_argument("--cold", action="store_true", help="empty the spec/container caches before every call")
    args = ap.parse_args()
    n = args.n

    template = make_pod()

    def copy_only() -> core_pb2.Pod:
        pod = core_pb2.Pod()
        pod.CopyFrom(template)
        return pod

    def copy_and_default() -> None:
        pod = core_pb2.Pod()
        pod.CopyFrom(template)
        defaults.default_object("Pod", pod)

    created = make_pod()
    defaults.default_object("Pod", created)
    assert strategy.for_kind(POD).validate(created) == [], strategy.for_kind(POD).validate(created)

    old = stored_pod()
    new = core_pb2.Pod()
    new.CopyFrom(old)
    assert strategy.for_kind(POD).validate_update(new, old) == []
    assert strategy.for_kind(POD).validate_status_update(new, old) == []

    r = args.rounds
    wrap = _cold if args.cold else (lambda fn: fn)
    bench("proto copy only", copy_only, n, r)
    bench("default_pod (incl. copy)", wrap(copy_and_default), n, r)
    bench("validate_create(Pod)", wrap(lambda: strategy.for_kind(POD).validate(created)), n, r)
    bench("validate_update(Pod), unchanged", wrap(lambda: strategy.for_kind(POD).validate_update(new, old)), n, r)
    bench("validate_status_update(Pod)", wrap(lambda: strategy.for_kind(POD).validate_status_update(new, old)), n, r)


if __name__ == "__main__":
    main()
