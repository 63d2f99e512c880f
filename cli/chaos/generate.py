"""Seeded random schedules, by profile: the same seed and profile give the same schedule.

A generator keeps a small model of what its steps made (pods, Deployments, killed components,
armed failpoints) so each step names something that can exist, and a fault it starts it also
ends: a kill is followed by a start, a pause by a resume, an armed failpoint by ``off``, within a
few seconds. Gaps between steps are exponential (mean ``GAP``), so bursts and lulls both happen.

Profiles (``PROFILES``) weigh the kinds of step:

- ``resize-preemption``: pods of two priorities filling nodes, in-place resizes up and down
  (KEP-1287), the preemptions a resize makes (KEP-5836), the scheduler and kubelets killed and
  their preemption and resize failpoints armed;
- ``rollout``: Deployments created, scaled and rolled, the controller-manager killed, its
  ReplicaSet and Deployment failpoints armed, its watch delayed;
- ``node-failure``: kubelets and runtimes killed and paused, nodes drained, added and removed;
- ``dra``: pods with ResourceClaims from a template, the scheduler and controller-manager killed;
- ``everything``: all of them at once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from cli.chaos.schedule import Schedule, Step
from machinery.wellknown import SHUTDOWN_SECONDS_ANNOTATION

GAP: Final = 0.6  # mean seconds between steps
FAST_KUBELET: Final = ["--sync-frequency=1", "--resize-retry-initial=1", "--resize-retry-interval=1",
                       "--restart-backoff=0.2", "--node-status-interval=1"]
PROFILES: Final = ("resize-preemption", "rollout", "node-failure", "dra", "everything")
_MAX_PODS: Final = 24
_CPUS: Final = ("250m", "500m", "750m", "1", "1500m")


@dataclass
class _Model:
    rng: random.Random
    nodes: list[str]
    pods: list[str] = field(default_factory=list)
    deployments: dict[str, int] = field(default_factory=dict)
    added_nodes: list[str] = field(default_factory=list)
    cordoned: list[str] = field(default_factory=list)
    n: int = 0

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n}"


def _pod(name: str, cpu: str, priority: str, shutdown: str, *, claim: bool = False) -> dict[str, Any]:
    """A pod whose container takes ``shutdown`` seconds to stop after SIGTERM (the fake runtime's
    annotation): victims and deleted pods hold their room for a while, as real ones do."""
    container: dict[str, Any] = {"name": "c", "image": "app",
                                 "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
    spec: dict[str, Any] = {"priorityClassName": priority, "terminationGracePeriodSeconds": 6,
                            "containers": [container]}
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
        container["resources"]["claims"] = [{"name": "gpu"}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": {SHUTDOWN_SECONDS_ANNOTATION: shutdown}}, "spec": spec}


def _deployment(name: str, replicas: int, cpu: str, version: int) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 1}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"terminationGracePeriodSeconds": 1, "priorityClassName": "low",
                                           "containers": [{"name": "c", "image": f"app:v{version}",
                                                           "resources": {"requests": {"cpu": cpu}}}]}}}}


_PREAMBLE: Final = [
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": 100},
    {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
]
_GPU_TEMPLATE: Final = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "gpu"},
    "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.kplane.dev"}}]}}}}

# A step maker: appends steps (with their own gaps) to ``out``; the model says what exists.
Maker = Callable[[_Model, list[Step]], None]


def _gap(m: _Model) -> float:
    return round(min(m.rng.expovariate(1 / GAP), 4 * GAP), 2)


def _create_pod(m: _Model, out: list[Step], claim: bool = False) -> None:
    if len(m.pods) >= _MAX_PODS:
        _delete_pod(m, out)
        return
    name = m.name("pod")
    m.pods.append(name)
    pod = _pod(name, m.rng.choice(_CPUS), m.rng.choice(("low", "low", "high")), m.rng.choice(("0", "1", "5")),
               claim=claim)
    out.append(Step("apply", pod, _gap(m)))


def _burst(m: _Model, out: list[Step]) -> None:
    """Three pods at once: the scheduler decides on several before the kubelets answer."""
    for i in range(3):
        _create_pod(m, out)
        if i:
            out[-1] = Step(out[-1].op, out[-1].args, round(m.rng.uniform(0, 0.1), 2))


def _claim_pod(m: _Model, out: list[Step]) -> None:
    _create_pod(m, out, claim=True)


def _delete_pod(m: _Model, out: list[Step]) -> None:
    if not m.pods:
        return _create_pod(m, out)
    name = m.pods.pop(m.rng.randrange(len(m.pods)))
    args: dict[str, Any] = {"kind": "pod", "name": name}
    if m.rng.random() < 0.3:
        args["grace_period"] = 0
    out.append(Step("delete", args, _gap(m)))


def _resize(m: _Model, out: list[Step]) -> None:
    if not m.pods:
        return _create_pod(m, out)
    out.append(Step("resize", {"pod": m.rng.choice(m.pods), "cpu": m.rng.choice(_CPUS + ("2",))}, _gap(m)))


def _evict(m: _Model, out: list[Step]) -> None:
    if not m.pods:
        return _create_pod(m, out)
    out.append(Step("evict", {"pod": m.pods.pop(m.rng.randrange(len(m.pods)))}, _gap(m)))


def _deploy(m: _Model, out: list[Step]) -> None:
    if len(m.deployments) >= 3:
        return _roll(m, out)
    name = m.name("web")
    m.deployments[name] = 1
    out.append(Step("apply", _deployment(name, m.rng.randint(2, 5), m.rng.choice(_CPUS[:3]), 1), _gap(m)))


def _scale(m: _Model, out: list[Step]) -> None:
    if not m.deployments:
        return _deploy(m, out)
    out.append(Step("scale", {"kind": "deployment", "name": m.rng.choice(sorted(m.deployments)),
                              "replicas": m.rng.randint(0, 6)}, _gap(m)))


def _roll(m: _Model, out: list[Step]) -> None:
    if not m.deployments:
        return _deploy(m, out)
    name = m.rng.choice(sorted(m.deployments))
    m.deployments[name] += 1
    out.append(Step("apply", _deployment(name, m.rng.randint(2, 5), m.rng.choice(_CPUS[:3]), m.deployments[name]),
                    _gap(m)))


def _outage(component: str, how: str) -> Maker:
    """Kill (or pause) ``component``, then start (resume) it a moment later."""
    def make(m: _Model, out: list[Step]) -> None:
        target = component.replace("NODE", m.rng.choice(m.nodes))
        down, up = ("kill", "start") if how == "kill" else ("pause", "resume") if how == "pause" else ("restart", "")
        out.append(Step(down, target, _gap(m)))
        if up:
            out.append(Step(up, target, round(m.rng.uniform(0.2, 3.0), 2)))
    return make


def _failpoint(component: str, points: tuple[str, ...], actions: tuple[str, ...]) -> Maker:
    """Arm one of ``points`` with one of ``actions``; disarm it a moment later."""
    def make(m: _Model, out: list[Step]) -> None:
        target = component.replace("NODE", m.rng.choice(m.nodes))
        point = m.rng.choice(points)
        out.append(Step("failpoint", {"component": target, "name": point, "action": m.rng.choice(actions)}, _gap(m)))
        out.append(Step("failpoint", {"component": target, "name": point, "action": "off"},
                        round(m.rng.uniform(0.5, 4.0), 2)))
    return make


def _delay_watch(component: str) -> Maker:
    def make(m: _Model, out: list[Step]) -> None:
        out.append(Step("delay-watch", {"component": component, "ms": m.rng.choice((50, 200, 500))}, _gap(m)))
        out.append(Step("delay-watch", {"component": component, "ms": 0}, round(m.rng.uniform(1.0, 5.0), 2)))
    return make


def _drain(m: _Model, out: list[Step]) -> None:
    node = m.rng.choice(m.nodes)
    out.append(Step("drain", node, _gap(m)))
    out.append(Step("uncordon", node, round(m.rng.uniform(0.5, 4.0), 2)))


def _node_churn(m: _Model, out: list[Step]) -> None:
    if m.added_nodes and m.rng.random() < 0.5:
        out.append(Step("node-remove", m.added_nodes.pop(), _gap(m)))
        return
    name = m.name("extra")
    m.added_nodes.append(name)
    out.append(Step("node-add", {"name": name, "cpu": "2", "memory": "4Gi"}, _gap(m)))


_SCHED_POINTS: Final = ("scheduler/preemption-after-victims-chosen", "scheduler/preemption-after-first-victim",
                        "scheduler/before-nominate", "scheduler/before-bind")
_KUBELET_POINTS: Final = ("kubelet/resize-before-allocate", "kubelet/resize-after-allocate", "kubelet/resize-after-cri",
                          "kubelet/resize-after-actuated", "kubelet/admit-before-checkpoint",
                          "kubelet/admit-after-checkpoint")
_CM_POINTS: Final = ("controller-manager/replicaset-after-create", "controller-manager/replicaset-before-status-update",
                     "controller-manager/deployment-after-scale")

_PROFILE_MAKERS: Final[dict[str, list[tuple[Maker, int]]]] = {
    "resize-preemption": [(_create_pod, 8), (_burst, 3), (_resize, 8), (_delete_pod, 3), (_evict, 1),
                          (_outage("scheduler", "kill"), 1), (_outage("kubelet/NODE", "kill"), 1),
                          (_outage("scheduler", "pause"), 1),
                          (_failpoint("scheduler", _SCHED_POINTS, ("1*panic", "sleep(300)", "1*error")), 2),
                          (_failpoint("kubelet/NODE", _KUBELET_POINTS, ("1*panic", "sleep(300)")), 2),
                          (_delay_watch("scheduler"), 1)],
    "rollout": [(_deploy, 3), (_scale, 5), (_roll, 4), (_create_pod, 1),
                (_outage("controller-manager", "kill"), 1), (_outage("controller-manager", "pause"), 1),
                (_failpoint("controller-manager", _CM_POINTS, ("1*panic", "sleep(300)", "1*error")), 2),
                (_delay_watch("controller-manager"), 1), (_outage("scheduler", "kill"), 1)],
    "node-failure": [(_create_pod, 4), (_deploy, 2), (_scale, 2), (_delete_pod, 2),
                     (_outage("kubelet/NODE", "kill"), 2), (_outage("runtime/NODE", "kill"), 1),
                     (_outage("kubelet/NODE", "pause"), 1), (_drain, 1), (_node_churn, 1),
                     (_outage("kubelet/NODE", "restart"), 1)],
    "dra": [(_claim_pod, 5), (_create_pod, 1), (_delete_pod, 4),
            (_outage("scheduler", "kill"), 1), (_outage("controller-manager", "kill"), 1),
            (_failpoint("scheduler", ("scheduler/dra-pre-queueing-hint-skip", "scheduler/before-bind"),
                        ("sleep(300)", "1*panic")), 1),
            (_outage("kubelet/NODE", "kill"), 1)],
}
_CLUSTERS: Final[dict[str, dict[str, Any]]] = {
    "resize-preemption": {"nodes": 3, "node_cpu": "2", "node_memory": "8Gi",
                          "feature_gates": "SchedulerPreemptionForPodResize=true"},
    "rollout": {"nodes": 3, "node_cpu": "4", "node_memory": "8Gi"},
    "node-failure": {"nodes": 3, "node_cpu": "4", "node_memory": "8Gi"},
    "dra": {"nodes": 2, "node_cpu": "4", "node_memory": "8Gi", "dra_devices": 2},
    "everything": {"nodes": 3, "node_cpu": "4", "node_memory": "8Gi", "dra_devices": 2,
                   "feature_gates": "SchedulerPreemptionForPodResize=true"},
}


def makers(profile: str) -> list[tuple[Maker, int]]:
    if profile == "everything":
        return [mw for p in PROFILES if p != "everything" for mw in _PROFILE_MAKERS[p]]
    return _PROFILE_MAKERS[profile]


def generate(seed: int, duration: float, profile: str = "everything", nodes: Sequence[str] = ()) -> Schedule:
    """A schedule of about ``duration`` seconds of steps (gaps summed), then a wait for the
    cluster to settle, for ``profile``. ``nodes`` are the nodes of the cluster it will run on
    (their kubelets and runtimes are the faults' targets); none: the profile's own cluster's."""
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r} (known: {', '.join(PROFILES)})")
    rng = random.Random(f"{profile}:{seed}")
    cluster = dict(_CLUSTERS[profile])
    cluster["kubelet_args"] = list(FAST_KUBELET)
    # Each pod's choice among equal nodes pinned to the seed (scheduler/framework/tiebreaks.py): a
    # race found on a placement is replayed on it.
    cluster["scheduler_args"] = [f"--tie-break-seed={seed}"]
    if nodes:
        cluster["nodes"] = len(nodes)
    m = _Model(rng, list(nodes) or [f"node-{i}" for i in range(1, int(cluster["nodes"]) + 1)])
    steps: list[Step] = [Step("apply", list(_PREAMBLE))]
    if cluster.get("dra_devices"):
        steps.append(Step("apply", dict(_GPU_TEMPLATE)))
    options = makers(profile)
    weights = [w for _, w in options]
    while sum(s.after for s in steps) < duration:
        make = rng.choices([mk for mk, _ in options], weights)[0]
        make(m, steps)
    return Schedule(steps, name=f"chaos-{profile}-{seed}", seed=seed, profile=profile, cluster=cluster,
                    description=f"kplane chaos --seed {seed} --profile {profile} --duration {duration:g}")
