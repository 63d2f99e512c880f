"""A schedule's ``expect:``: what must hold once the cluster settled, checked against the final
state and the run's history.

- ``{pod: NAME, namespace: NS, phase: Running, node: node-1, bound: true, gone: false,
  resize: done|Deferred|Infeasible, requests: {cpu: 1500m}, actual: {cpu: 1}, restarts: 0}``: the pod
  as it ends (``gone: true``: deleted; ``requests``: the first container's allocated requests, as
  the kubelet reports them; ``actual``: the requests its container runs with, as the runtime
  reports them; ``restarts``: the first container's restart count);
- ``{event: REASON, pod: NAME, min: 1, max: 3}``: how many times the run's history shows the Event
  (its ``count`` summed over the Event objects; ``min`` defaults to 1, or to 0 when ``max`` is given:
  ``{event: OutOfcpu, max: 0}`` says it never happened);
- ``{pods: [NAME, ...], gone: N, running: N}``: how many of these pods are deleted, and how many
  Running, at the end (the victims of a preemption are some of a set, not named ones);
- ``{replicaset: NAME, ready: N}`` / ``{deployment: NAME, ready: N}``: its ready replicas at the end
  (pods a controller names at random cannot be named in a schedule).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cli.chaos.converge import pod_resize_state
from cli.check.framework import Entry
from machinery import errors, resources
from machinery.api import core_pb2
from machinery.client import Client


async def unmet(client: Client, expect: list[dict[str, Any]], entries: Iterable[Entry], since: int) -> list[str]:
    """Each expectation that does not hold, in words."""
    events = _event_counts(entries, since)
    out: list[str] = []
    for i, e in enumerate(expect, 1):
        where = f"expect {i}"
        if "event" in e:
            n = events.get((str(e["event"]), str(e.get("pod") or "")), 0)
            hi = e.get("max")
            lo = int(e.get("min", 1 if hi is None else 0))
            if n < lo or (hi is not None and n > int(hi)):
                bounds = f"at least {lo}" + (f" and at most {hi}" if hi is not None else "")
                out.append(f"{where}: {n} {e['event']} event(s)" + (f" for pod {e['pod']}" if e.get("pod") else "")
                           + f", want {bounds}")
            continue
        if "pod" in e:
            out.extend(f"{where}: {m}" for m in await _pod(client, e))
            continue
        if "pods" in e:
            out.extend(f"{where}: {m}" for m in await _pods(client, e))
            continue
        if "replicaset" in e or "deployment" in e:
            out.extend(f"{where}: {m}" for m in await _workload(client, e))
            continue
        out.append(f"{where}: says none of pod, pods, event, replicaset, deployment")
    return out


def _event_counts(entries: Iterable[Entry], since: int) -> dict[tuple[str, str], int]:
    latest: dict[tuple[str, str], core_pb2.Event] = {}
    for en in entries:
        ev = en.event
        if ev is not None and en.rev > since and en.type != "DELETED":
            latest[(en.namespace, en.name)] = ev
    counts: dict[tuple[str, str], int] = {}
    for ev in latest.values():
        n = max(ev.count, 1)
        for key in ((ev.reason, ev.involved_object.name), (ev.reason, "")):
            counts[key] = counts.get(key, 0) + n
    return counts


async def _pod(client: Client, e: dict[str, Any]) -> list[str]:
    name, ns = str(e["pod"]), str(e.get("namespace") or "default")
    try:
        pod: core_pb2.Pod | None = await client.pods.get(name, ns)
    except errors.NotFound:
        pod = None
    if e.get("gone"):
        return [] if pod is None else [f"pod {name} still exists ({pod.status.phase})"]
    if pod is None:
        return [f"pod {name} is gone"]
    out = []
    if "phase" in e and pod.status.phase != e["phase"]:
        out.append(f"pod {name} is {pod.status.phase or 'without a phase'}, want {e['phase']}"
                   + (f" ({pod.status.reason})" if pod.status.reason else ""))
    if "node" in e and pod.spec.node_name != e["node"]:
        out.append(f"pod {name} is on {pod.spec.node_name or 'no node'}, want {e['node']}")
    if "bound" in e and bool(pod.spec.node_name) != bool(e["bound"]):
        out.append(f"pod {name} is {'bound to ' + pod.spec.node_name if pod.spec.node_name else 'not bound'}, "
                   f"want {'bound' if e['bound'] else 'not bound'}")
    if "resize" in e and pod_resize_state(pod) != e["resize"]:
        out.append(f"pod {name}'s resize is {pod_resize_state(pod)}, want {e['resize']}")
    first = pod.status.container_statuses[0] if pod.status.container_statuses else None
    for key, said in (("requests", "pod {} has {} allocated"), ("actual", "pod {} runs with {}")):
        if key not in e:
            continue
        raw = {} if first is None else dict(first.allocated_resources if key == "requests"
                                            else first.resources.requests)
        got = resources.to_resource_list(raw)
        want = resources.to_resource_list({k: str(v) for k, v in dict(e[key]).items()})
        if any(got.get(k) != v for k, v in want.items()):
            out.append(f"{said.format(name, raw)}, want {e[key]}")
    if "restarts" in e and (first.restart_count if first is not None else 0) != int(e["restarts"]):
        out.append(f"pod {name}'s container restarted {first.restart_count if first is not None else 0} time(s), "
                   f"want {e['restarts']}")
    return out


async def _pods(client: Client, e: dict[str, Any]) -> list[str]:
    names, ns = [str(n) for n in e["pods"]], str(e.get("namespace") or "default")
    live = {p.metadata.name: p for p in (await client.pods.list(ns)).items}
    gone = [n for n in names if n not in live]
    running = [n for n in names if n in live and live[n].status.phase == "Running"]
    out = []
    if "gone" in e and len(gone) != int(e["gone"]):
        out.append(f"{len(gone)} of {len(names)} pods gone ({', '.join(gone) or 'none'}), want {e['gone']}")
    if "running" in e and len(running) != int(e["running"]):
        out.append(f"{len(running)} of {len(names)} pods Running ({', '.join(running) or 'none'}), want {e['running']}")
    return out


async def _workload(client: Client, e: dict[str, Any]) -> list[str]:
    kind, name = ("replicaset", str(e["replicaset"])) if "replicaset" in e else ("deployment", str(e["deployment"]))
    ns = str(e.get("namespace") or "default")
    rc = client.replica_sets if kind == "replicaset" else client.deployments
    try:
        obj = await rc.get(name, ns)
    except errors.NotFound:
        return [f"{kind} {name} is gone"]
    if "ready" in e and obj.status.ready_replicas != int(e["ready"]):
        return [f"{kind} {name} has {obj.status.ready_replicas} ready, want {e['ready']}"]
    return []
