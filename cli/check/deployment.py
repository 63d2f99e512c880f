"""The rule on rolling Deployments (Kubernetes' deployment controller):
``deployment-surge-and-unavailability``."""

from __future__ import annotations

from dataclasses import dataclass

from cli.check.framework import Entry, Rule, Violation, World
from controllers.deploymentutil import resolve_fenceposts
from machinery import timeutil, wellknown
from machinery.api import apps_pb2, coordination_pb2, core_pb2
from machinery.kinds import object_meta


@dataclass
class _Workload:
    """A Deployment as the rule follows it: its bounds at the last revision seen."""

    key: str  # namespace/name
    rolling: bool
    replicas: int
    surge: int
    unavailable: int
    min_ready: int
    template: bytes
    armed: bool = False  # a rollout that started fully available is under way


@dataclass
class _OwnedPod:
    """A pod as the rule follows it: its ReplicaSet (controller uid) and what it holds."""

    name: str  # namespace/name
    rs: str  # its controller's uid ("" if none)
    live: bool  # neither Succeeded/Failed nor being deleted
    ready_since: float | None  # when it became Ready (None if not Ready)
    disrupted: bool  # a DisruptionTarget condition: evicted or preempted, not a controller's choice


def _timestamp(text: str) -> float | None:
    try:
        t = timeutil.parse(text)
    except ValueError:
        return None
    return t.timestamp() if t is not None else None


def _template_bytes(template: core_pb2.PodTemplateSpec) -> bytes:
    """A pod template to compare, its pod-template-hash label left out (Kubernetes' EqualIgnoreHash)."""
    copy = core_pb2.PodTemplateSpec()
    copy.CopyFrom(template)
    copy.metadata.labels.pop(wellknown.LABEL_POD_TEMPLATE_HASH, None)
    return copy.SerializeToString(deterministic=True)


def _entry_times(e: Entry) -> list[str]:
    """The wall-clock times an entry shows were already past when it was written (never
    deletionTimestamp: a graceful delete sets it in the future)."""
    obj = e.obj
    out = [object_meta(obj).creation_timestamp] if e.type == "ADDED" else []
    if isinstance(obj, core_pb2.Pod):
        out += [c.last_transition_time for c in obj.status.conditions]
    elif isinstance(obj, core_pb2.Node):
        out += [c.last_heartbeat_time for c in obj.status.conditions]
    elif isinstance(obj, core_pb2.Event):
        out.append(obj.last_timestamp)
    elif isinstance(obj, coordination_pb2.Lease):
        out.append(obj.spec.renew_time)
    elif isinstance(obj, apps_pb2.Deployment):
        out += [c.last_update_time for c in obj.status.conditions]
    return [t for t in out if t]


class DeploymentSurgeAndUnavailability(Rule):
    """A rolling Deployment's pods stay within replicas + maxSurge, its available pods within
    replicas - maxUnavailable of the replicas, as Kubernetes' deployment controller guarantees.

    The pods of a Deployment are those whose controller (ownerReference with ``controller:
    true``) is a ReplicaSet controlled by it; a pod counts while it is neither Succeeded/Failed nor
    being deleted. maxSurge and maxUnavailable are resolved as the controller resolves them
    (Kubernetes' ResolveFenceposts: a percentage of the replicas, surge rounded up, unavailable
    rounded down, both 0 making unavailable 1), from the Deployment as the history shows it then.
    What Kubernetes guarantees, and so what the rule checks, for ``strategy: RollingUpdate`` only:

    - *surge*: a pod created (ADDED) for the Deployment never brings its counted pods over
      replicas + maxSurge. Only creations are checked: pods over the bound after a scale-down of
      the Deployment are fine until the ReplicaSet controller deletes them, and an orphan adopted
      is not a pod the controllers made. Nor is a creation by a ReplicaSet scaled down since its
      controller last observed it (``status.observedGeneration`` behind, a larger ``replicas`` at
      a generation it may still be acting on): its controller creates toward the replicas it saw;
    - *unavailability*: from the start of a rollout that started fully available (the pod template
      changed while at least ``replicas`` pods were available) until it is done (every pod left of
      the new template, ``replicas`` of them available), no deletion of an available pod (a
      deletionTimestamp set, or DELETED at once) leaves fewer than replicas - maxUnavailable
      available. Not counted, as Kubernetes does not promise them: pods that stop being Ready by
      themselves, pods evicted or preempted (their DisruptionTarget condition), and everything
      after the Deployment's replicas or strategy changed (a scaling event is proportional, blind
      to availability) until the next rollout. A pod someone deletes by hand during a rollout
      reads as the controllers' deletion.

    A pod is available when Ready for ``minReadySeconds`` (the Ready condition's
    lastTransitionTime). The history has no clock of its own: the time of a revision is the
    latest time it and the revisions before it show (creations, condition transitions, lease
    renewals, node heartbeats, events), and a pod counts as available one second early, since
    those times are cut to the second.
    """

    name = "deployment-surge-and-unavailability"
    deciders = ("controller-manager",)

    def __init__(self) -> None:
        self.deployments: dict[str, _Workload] = {}  # uid -> workload
        self.rs_owner: dict[str, str] = {}  # ReplicaSet uid -> its Deployment's uid
        self.rs_template: dict[str, bytes] = {}  # ReplicaSet uid -> its template, no pod-template-hash
        # ReplicaSet uid -> spec.replicas by generation, from the one its controller observed on
        self.rs_replicas: dict[str, dict[int, int]] = {}
        self.pods: dict[str, _OwnedPod] = {}  # pod uid -> pod
        self.clock = 0.0

    def observe(self, e: Entry, world: World) -> list[Violation]:
        for t in _entry_times(e):
            ts = _timestamp(t)
            if ts is not None and ts > self.clock:
                self.clock = ts
        obj = e.obj
        if isinstance(obj, apps_pb2.Deployment):
            self._deployment(e, obj)
        elif isinstance(obj, apps_pb2.ReplicaSet):
            ref = next((r for r in obj.metadata.owner_references if r.controller), None)
            if e.type == "DELETED":
                self.rs_owner.pop(obj.metadata.uid, None)
                self.rs_template.pop(obj.metadata.uid, None)
                self.rs_replicas.pop(obj.metadata.uid, None)
            else:
                self.rs_owner[obj.metadata.uid] = ref.uid if ref is not None and ref.kind == "Deployment" else ""
                self.rs_template[obj.metadata.uid] = _template_bytes(obj.spec.template)
                seen = self.rs_replicas.setdefault(obj.metadata.uid, {})
                seen[obj.metadata.generation] = obj.spec.replicas if obj.spec.HasField("replicas") else 1
                for gen in [g for g in seen if g < obj.status.observed_generation]:
                    del seen[gen]
        elif isinstance(obj, core_pb2.Pod):
            return self._pod(e, obj)
        return []

    def _deployment(self, e: Entry, d: apps_pb2.Deployment) -> None:
        uid = d.metadata.uid
        if e.type == "DELETED":
            self.deployments.pop(uid, None)
            return
        want = d.spec.replicas if d.spec.HasField("replicas") else 1
        rolling = d.spec.strategy.type == "RollingUpdate"
        surge = unavailable = 0
        if rolling:
            ru = d.spec.strategy.rolling_update
            try:
                surge, unavailable = resolve_fenceposts(ru.max_surge if ru.HasField("max_surge") else None,
                                                        ru.max_unavailable if ru.HasField("max_unavailable")
                                                        else None, want)
            except ValueError:
                rolling = False
            unavailable = min(unavailable, want)
        template = _template_bytes(d.spec.template)
        new = _Workload(f"{e.namespace}/{e.name}", rolling, want, surge, unavailable, d.spec.min_ready_seconds,
                        template)
        old = self.deployments.get(uid)
        if old is not None:
            if (old.replicas, old.surge, old.unavailable, old.rolling) != (want, surge, unavailable, rolling):
                new.armed = False  # a scaling event: proportional, not bound by availability
            elif old.template != template:
                new.armed = self._available(uid, new) >= want  # a rollout, started fully available or not
            else:
                new.armed = old.armed
        self.deployments[uid] = new

    def _owner(self, pod: _OwnedPod) -> str:
        return self.rs_owner.get(pod.rs, "")

    def _available(self, deployment_uid: str, w: _Workload, without: str = "") -> int:
        return sum(1 for uid, p in self.pods.items()
                   if uid != without and p.live and self._owner(p) == deployment_uid and p.ready_since is not None
                   and p.ready_since + w.min_ready <= self.clock + 1)

    def _pod(self, e: Entry, pod: core_pb2.Pod) -> list[Violation]:
        uid = pod.metadata.uid
        before = self.pods.get(uid)
        ref = next((r for r in pod.metadata.owner_references if r.controller), None)
        ready = next((c for c in pod.status.conditions if c.type == "Ready" and c.status == "True"), None)
        now = _OwnedPod(f"{e.namespace}/{e.name}", ref.uid if ref is not None and ref.kind == "ReplicaSet" else "",
                        e.type != "DELETED" and not pod.metadata.deletion_timestamp
                        and pod.status.phase not in ("Succeeded", "Failed"),
                        _timestamp(ready.last_transition_time) if ready is not None else None,
                        any(c.type == "DisruptionTarget" and c.status == "True" for c in pod.status.conditions))
        if e.type == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = now
        owner = self._owner(now)
        w = self.deployments.get(owner) if owner else None
        if w is None or not w.rolling:
            return []
        out: list[Violation] = []
        if e.type == "ADDED" and now.live and not self._scaled_down_unseen(now.rs):
            count = sum(1 for p in self.pods.values() if p.live and self._owner(p) == owner)
            if count > w.replicas + w.surge:
                out.append(Violation(self.name, e.rev, f"deployment {w.key}: pod {now.name} created with {count} "
                                                       f"pods of it neither finished nor being deleted, over "
                                                       f"replicas {w.replicas} + maxSurge {w.surge}"))
        was_available = before is not None and before.live and self._owner(before) == owner and \
            before.ready_since is not None and before.ready_since + w.min_ready <= self.clock + 1
        if w.armed and was_available and not now.live and not now.disrupted:
            available = self._available(owner, w)
            if available < w.replicas - w.unavailable:
                out.append(Violation(self.name, e.rev, f"deployment {w.key}: pod {now.name} deleted leaving "
                                                       f"{available} available, under replicas {w.replicas} - "
                                                       f"maxUnavailable {w.unavailable}"))
        if w.armed and self._rolled_out(owner, w):
            w.armed = False
        return out

    def _scaled_down_unseen(self, rs_uid: str) -> bool:
        """The ReplicaSet's replicas went down at a generation its controller has not observed yet."""
        seen = self.rs_replicas.get(rs_uid, {})
        return bool(seen) and max(seen.values()) > seen[max(seen)]

    def _rolled_out(self, deployment_uid: str, w: _Workload) -> bool:
        """Every pod left is of the Deployment's template, and ``replicas`` of them are available."""
        live = [p for p in self.pods.values() if p.live and self._owner(p) == deployment_uid]
        return all(self.rs_template.get(p.rs) == w.template for p in live) and \
            self._available(deployment_uid, w) >= w.replicas
