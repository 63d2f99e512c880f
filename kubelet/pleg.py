"""The pod lifecycle event generator: notice what changed in the runtime, as Kubernetes' PLEGs.

``GenericPLEG``: every relist period (1 s, like Kubernetes) it lists all sandboxes and containers
in two calls, compares their states with the previous relist and reports the pods where something
changed — a container started, exited (OOM-killed, or finished), was removed, a sandbox stopped —
so that pod is synced at once instead of at the next periodic resync. The kubelet's own status
writes therefore need not trigger syncs: the API telling the kubelet what it just wrote is no news.

``EventedPLEG`` (KEP-3386, the ``EventedPLEG`` gate, alpha and off by default as in Kubernetes):
the runtime tells the kubelet each change as it happens (``GetContainerEvents``), and the generic
relist runs only every ``EVENTED_RELIST_PERIOD`` (5 min) to catch what a stream could miss. A
failed stream forces a relist and is tried again; after ``MAX_STREAM_RETRIES`` failures the kubelet
falls back to the generic relist at its own period, as Kubernetes' does.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from prometheus_client import Counter, Histogram

from kubelet.runtime.client import RuntimeApi
from kubelet.runtime.errors import RuntimeCallError
from kubelet.runtime_ops import LABEL_POD_UID
from machinery import failpoints
from machinery.api import cri_pb2
from machinery.logging import get_logger

log = get_logger()

# Kubernetes' eventedPlegRelistPeriod and eventedPlegMaxStreamRetries (pkg/kubelet/kubelet.go).
EVENTED_RELIST_PERIOD = 300.0
MAX_STREAM_RETRIES = 5

RELIST_DURATION = Histogram("kubelet_pleg_relist_duration_seconds", "Duration in seconds for relisting pods in PLEG.",
                            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5))
FP_RELIST = failpoints.declare("kubelet/pleg-relist", "the PLEG is about to list the runtime's pods "
                               "(error: the relist loop fails, and its supervisor restarts it)")
EVENTS = Counter("kplane_kubelet_pleg_events_total", "Changes the PLEG passed on to the pod workers: each pod a "
                 "relist found changed, each event of the Evented PLEG's stream that names a pod.")
# Kubernetes' Evented PLEG metrics (pkg/kubelet/metrics); prometheus_client adds _total to counters.
STREAM_CONNECTIONS = Counter("kubelet_evented_pleg_connection_success_count",
                             "The number of times a streaming client was obtained to receive CRI Events.")
STREAM_ERRORS = Counter("kubelet_evented_pleg_connection_error_count",
                        "The number of errors encountered during the establishment of streaming connection with "
                        "the CRI runtime.")
STREAM_LATENCY = Histogram("kubelet_evented_pleg_connection_latency_seconds",
                           "The latency of streaming connection with the CRI runtime, measured in seconds.")


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


def _pod_uid(event: cri_pb2.ContainerEventResponse) -> str:
    sandbox = event.pod_sandbox_status
    return sandbox.labels.get(LABEL_POD_UID) or sandbox.metadata.uid


class EventedPLEG:
    """Pods changed in the runtime, as the runtime tells them (KEP-3386).

    ``run`` subscribes to the runtime's events and reports the pod of each container (or sandbox)
    that started, stopped or was deleted to ``on_changed``; a created one is no news (the kubelet
    created it), as in Kubernetes' processCRIEvent. When the stream fails (the runtime restarted,
    it cut off a subscriber that fell behind) it counts the error, asks ``relist`` for a relist at
    once (what happened in between is found there) and subscribes again; after
    ``MAX_STREAM_RETRIES`` failures it calls ``fall_back`` (the generic relist at its own period)
    and returns.
    """

    def __init__(self, runtime: RuntimeApi, *, on_changed: Callable[[set[str]], None],
                 relist: Callable[[], None], fall_back: Callable[[], None], node: str = ""):
        self.rt = runtime
        self._on_changed = on_changed
        self._relist = relist
        self._fall_back = fall_back
        self._node = node
        self.failures = 0

    async def run(self) -> None:
        while self.failures < MAX_STREAM_RETRIES:
            try:
                stream = await self.rt.container_events()
            except RuntimeCallError as exc:
                self._failed(exc)
                continue
            STREAM_CONNECTIONS.inc()
            try:
                async for event in stream:
                    self._handle(event)
                self._failed(None)
            except RuntimeCallError as exc:
                self._failed(exc)
            finally:
                stream.close()
        log.warning("evented_pleg_fell_back", node=self._node, failures=self.failures,
                    reason="the runtime's event stream failed; relisting at the generic PLEG's period")
        self._fall_back()

    def _failed(self, exc: RuntimeCallError | None) -> None:
        STREAM_ERRORS.inc()
        self.failures += 1
        log.info("evented_pleg_stream_failed", node=self._node, failures=self.failures,
                 error=str(exc) if exc is not None else "the runtime ended the stream")
        self._relist()

    def _handle(self, event: cri_pb2.ContainerEventResponse) -> None:
        if event.created_at:
            STREAM_LATENCY.observe(max(0.0, time.time() - event.created_at / 1e9))
        if event.container_event_type == cri_pb2.CONTAINER_CREATED_EVENT:
            return
        uid = _pod_uid(event)
        if uid:
            EVENTS.inc()
            self._on_changed({uid})
