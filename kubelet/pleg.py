"""The pod lifecycle event generator: notice what changed in the runtime, as Kubernetes' generic PLEG.

The runtime does not call the kubelet back. Every relist period (1 s, like Kubernetes) the PLEG
lists all sandboxes and containers in two calls, compares their states with the previous relist
and reports the pods where something changed — a container started, exited (OOM-killed, or
finished), was removed, a sandbox stopped — so that pod is synced at once instead of at the next
periodic resync. The kubelet's own status writes therefore need not trigger syncs: the API
telling the kubelet what it just wrote is no news.
"""

from __future__ import annotations

from prometheus_client import Counter, Histogram

from kubelet.runtime.client import RuntimeApi
from kubelet.runtime_ops import LABEL_POD_UID
from machinery import failpoints
from machinery.api import cri_pb2

RELIST_DURATION = Histogram("kubelet_pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.",
                            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
FP_RELIST = failpoints.declare("kubelet/pleg-relist", "the PLEG is about to list the runtime's pods "
                               "(error: the relist loop fails, and its supervisor restarts it)")
EVENTS = Counter("kplane_kubelet_pleg_events_total", "Pods the PLEG found changed in the runtime.")


class GenericPLEG:
    def __init__(self, runtime: RuntimeApi):
        self.rt = runtime
        self._last: dict[str, tuple[str, int]] | None = None  # container/sandbox id -> (pod uid, state)

    async def relist(self) -> set[str]:
        """The uids of pods whose sandboxes or containers changed since the last relist (none the first time)."""
        if failpoints.is_armed(FP_RELIST):
            await failpoints.hit(FP_RELIST)
        with RELIST_DURATION.time():
            sandboxes = await self.rt.list_pod_sandbox(cri_pb2.ListPodSandboxRequest())
            containers = await self.rt.list_containers(cri_pb2.ListContainersRequest())
        now: dict[str, tuple[str, int]] = {}
        for s in sandboxes.items:
            now["s:" + s.id] = (s.labels.get(LABEL_POD_UID) or s.metadata.uid, s.state)
        for c in containers.containers:
            now["c:" + c.id] = (c.labels.get(LABEL_POD_UID, ""), c.state)
        last, self._last = self._last, now
        if last is None:
            return set()
        changed = {uid for key, (uid, state) in now.items() if last.get(key, (uid, None))[1] != state}
        changed |= {uid for key, (uid, _) in last.items() if key not in now}
        changed.discard("")
        if changed:
            EVENTS.inc(len(changed))
        return changed
