"""The kubelet's status manager: the one writer of its pods' API status.

As Kubernetes' pkg/kubelet/status: a status is computed from the pod, the runtime's view and
the allocation (``kubelet.status``), merged with the conditions other components own, and
written with a retry on conflict. A pod that ended never goes back to a running phase, and a
write equal to what the API holds (but for probe times) is skipped. The manager remembers its
own last write per pod, so the next write is based on it while the informer lags behind.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubelet.allocation import conditions as cond
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import AllocationManager
from kubelet.eviction.manager import PodKill
from kubelet.runtime_ops import Observed
from kubelet.status import compute_status
from machinery import errors, timeutil
from machinery.api import core_pb2
from machinery.client import Client
from machinery.informer import Informer
from machinery.logging import get_logger
from machinery.retry import retry_update

log = get_logger()

TERMINAL_PHASES = ("Succeeded", "Failed")
MANAGED_CONDITIONS = frozenset({"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady",
                                *cond.RESIZE_CONDITION_TYPES})

StatusBuilder = Callable[[core_pb2.Pod], core_pb2.PodStatus]


@dataclass
class _Written:
    # The pod as our last status write left it, and the resourceVersions of the chain of our own
    # writes that led to it (with the one the first was based on): while the informer shows one
    # of those, our last write is the newer object (as the status manager's cache of what it
    # wrote), so the next write does not conflict with our own.
    pod: core_pb2.Pod
    chain: set[str] = field(default_factory=set)


class StatusManager:
    """Writes pod statuses for one node: Failed with a reason, computed, or killed."""

    def __init__(self, client: Client, pods: Informer, alloc: AllocationManager, *, report_resources: bool,
                 host_ip: str, container_restart_rules: bool = True):
        self._client = client
        self._container_rules = container_restart_rules  # KEP-5307: the phase by each container's policy
        self._pods = pods
        self._alloc = alloc
        self._report_resources = report_resources
        self._host_ip = host_ip
        self._written: dict[str, _Written] = {}

    def forget(self, uid: str) -> None:
        """The pod is gone: drop what we remember of our writes for it."""
        self._written.pop(uid, None)

    async def write_failed(self, pod: core_pb2.Pod, reason: str, message: str) -> None:
        def build(current: core_pb2.Pod) -> core_pb2.PodStatus:
            st = core_pb2.PodStatus()
            st.CopyFrom(current.status)
            st.phase, st.reason, st.message = "Failed", reason, message
            return st
        await self.update(pod, build)

    def _actuated(self, pod: core_pb2.Pod) -> dict[str, Resources]:
        """What the runtime was last given, by container (the actuated checkpoint)."""
        out = {}
        for c in list(pod.spec.init_containers) + list(pod.spec.containers):
            r = self._alloc.actuated_of(pod.metadata.uid, c.name)
            if r is not None:
                out[c.name] = r
        return out

    async def write(self, pod: core_pb2.Pod, observed: Observed, terminated: bool = False,
                    blocked: tuple[str, str] | None = None) -> None:
        """The computed status; ``blocked``: the (reason, message) the containers not started wait with."""
        uid = pod.metadata.uid
        allocation = self._alloc.allocation_of(uid)
        computed = compute_status(pod, observed.view, allocation, self._alloc.conditions_of(uid),
                                  report_resources=self._report_resources, host_ip=self._host_ip, blocked=blocked,
                                  actuated=self._actuated(pod), container_rules=self._container_rules)
        if terminated:
            # A deleted pod ends in a terminal phase (Kubernetes 1.27+): Failed unless all succeeded.
            views = [observed.view.containers.get(c.name) for c in pod.spec.containers]
            ok = all(v is None or (v.state == "exited" and v.exit_code == 0) for v in views)
            computed.phase = "Succeeded" if ok else "Failed"
        if pod.status.reason and pod.status.phase == "Failed":
            return

        def build(current: core_pb2.Pod) -> core_pb2.PodStatus:
            st = core_pb2.PodStatus()
            st.CopyFrom(computed)
            kept = [c for c in current.status.conditions if c.type not in MANAGED_CONDITIONS]
            present = {c.type for c in kept}
            # Ours, plus what the kubelet fills in when nobody has (PodScheduled of a bound pod).
            mine = [c for c in computed.conditions if c.type in MANAGED_CONDITIONS or c.type not in present]
            del st.conditions[:]
            st.conditions.extend(kept + mine)
            _keep_theirs(st, current)
            return st

        await self.update(pod, build)

    async def write_killed(self, pod: core_pb2.Pod, observed: Observed, kill: PodKill) -> None:
        """Failed with the kill's reason and message, plus its condition (DisruptionTarget)."""
        uid = pod.metadata.uid
        computed = compute_status(pod, observed.view, self._alloc.allocation_of(uid), self._alloc.conditions_of(uid),
                                  report_resources=self._report_resources, host_ip=self._host_ip,
                                  actuated=self._actuated(pod), container_rules=self._container_rules)
        computed.phase, computed.reason, computed.message = "Failed", kill.reason, kill.message
        now = timeutil.rfc3339()

        def build(current: core_pb2.Pod) -> core_pb2.PodStatus:
            st = core_pb2.PodStatus()
            st.CopyFrom(computed)
            kept = [c for c in current.status.conditions
                    if c.type not in MANAGED_CONDITIONS and c.type != kill.condition_type]
            present = {c.type for c in kept}
            mine = [c for c in computed.conditions if c.type != kill.condition_type
                    and (c.type in MANAGED_CONDITIONS or c.type not in present)]
            del st.conditions[:]
            st.conditions.extend(kept + mine)
            st.conditions.add(type=kill.condition_type, status="True", reason=kill.condition_reason,
                              message=kill.condition_message or kill.message, last_transition_time=now)
            _keep_theirs(st, current)
            return st

        await self.update(pod, build)

    async def update(self, pod: core_pb2.Pod, build: StatusBuilder) -> None:
        current = pod
        w = self._written.get(pod.metadata.uid)
        if w is not None and pod.metadata.resource_version in w.chain:
            current = w.pod  # the informer has not brought our last write back yet

        async def write(current: core_pb2.Pod) -> None:
            if current.metadata.uid != pod.metadata.uid:
                return  # a new pod of the same name: not ours
            desired = build(current)
            if _same_status(current.status, desired):
                return
            if current.status.phase in TERMINAL_PHASES and desired.phase not in TERMINAL_PHASES:
                # As Kubernetes' status manager: a pod that ended (Failed by preemption or
                # eviction, or Succeeded) never goes back to a running phase.
                return
            new = core_pb2.Pod()
            new.CopyFrom(current)
            new.status.CopyFrom(desired)
            written = await self._client.pods.update_status(new)
            self._remember_write(current, written)

        try:
            await retry_update(current, lambda: self._client.pods.get(pod.metadata.name, pod.metadata.namespace),
                               write)
        except errors.NotFound:
            return
        except errors.Conflict as exc:  # the next sync writes it
            log.info("pod_status_update_conflicts", pod=f"{pod.metadata.namespace}/{pod.metadata.name}",
                     error=str(exc))

    def _remember_write(self, based_on: core_pb2.Pod, written: core_pb2.Pod) -> None:
        known = self._pods.get(written.metadata.name, written.metadata.namespace)
        if known is None or known.metadata.uid != written.metadata.uid:
            return  # gone already: nothing to remember it for
        w = self._written.get(written.metadata.uid)
        if w is None or based_on.metadata.resource_version not in w.chain:
            w = self._written[written.metadata.uid] = _Written(written, {based_on.metadata.resource_version})
        w.chain.add(written.metadata.resource_version)
        w.pod = written


def _keep_theirs(st: core_pb2.PodStatus, current: core_pb2.Pod) -> None:
    """What others write in a pod's status, as the API has it now: the scheduler's nomination, the
    QoS class, the resourceclaim controller's ``resourceClaimStatuses``."""
    st.nominated_node_name = current.status.nominated_node_name
    st.qos_class = current.status.qos_class
    del st.resource_claim_statuses[:]
    st.resource_claim_statuses.extend(current.status.resource_claim_statuses)


def _same_status(a: core_pb2.PodStatus, b: core_pb2.PodStatus) -> bool:
    """Equal but for probe times (which change on every write)."""
    x, y = core_pb2.PodStatus(), core_pb2.PodStatus()
    x.CopyFrom(a)
    y.CopyFrom(b)
    for st in (x, y):
        for c in st.conditions:
            c.last_probe_time = ""
    return x.SerializeToString(deterministic=True) == y.SerializeToString(deterministic=True)
