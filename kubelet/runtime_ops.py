"""What the kubelet asks of its runtime, in the kubelet's terms (Kubernetes' kuberuntime manager).

Sandboxes and containers carry Kubernetes' labels (``io.kubernetes.pod.uid``, ``...pod.name``,
``...pod.namespace``, ``io.kubernetes.container.name``), so after a kubelet restart the runtime
alone says which pods run here. ``observe`` reads a pod's sandbox and containers into the
``PodView`` the status code understands; the other methods create, start, stop and resize.
"""

from __future__ import annotations

from dataclasses import dataclass

from kubelet.allocation.checkpoint import Resources
from kubelet.runtime.errors import RuntimeNotFound
from kubelet.status import ContainerView, LinuxResources, PodView, to_linux
from machinery import timeutil
from machinery.api import core_pb2, cri_pb2
from machinery.logging import get_logger

LABEL_POD_UID = "io.kubernetes.pod.uid"
LABEL_POD_NAME = "io.kubernetes.pod.name"
LABEL_POD_NAMESPACE = "io.kubernetes.pod.namespace"
LABEL_CONTAINER_NAME = "io.kubernetes.container.name"
USAGE_ANNOTATIONS = ("kplane.dev/memory-usage", "kplane.dev/cpu-usage", "kplane.dev/shutdown-seconds")

log = get_logger()

# How a simulated init container exits on its successive runs: "1,1,0" fails twice, then succeeds
# (the last code repeats); none: exit 0 at once.
INIT_EXIT_CODES_ANNOTATION = "kplane.dev/init-exit-codes"


def init_exit_code(pod: core_pb2.Pod, container: str, attempt: int) -> int:
    """The exit code of run ``attempt`` (0-based) of an init container, from the pod's
    ``kplane.dev/init-exit-codes.<container>`` annotation (a bad one: 0, logged)."""
    text = pod.metadata.annotations.get(f"{INIT_EXIT_CODES_ANNOTATION}.{container}")
    if not text:
        return 0
    try:
        codes = [int(part) for part in text.split(",")]
    except ValueError:
        log.warning("bad_init_exit_codes_annotation", container=container, value=text)
        return 0
    return codes[min(attempt, len(codes) - 1)]


_STATE = {cri_pb2.CONTAINER_CREATED: "created", cri_pb2.CONTAINER_RUNNING: "running",
          cri_pb2.CONTAINER_EXITED: "exited", cri_pb2.CONTAINER_UNKNOWN: "unknown"}


def _time(nanos: int) -> str:
    if not nanos:
        return ""
    from datetime import datetime, timezone
    return timeutil.rfc3339(datetime.fromtimestamp(nanos / 1e9, tz=timezone.utc))


@dataclass
class Observed:
    """A pod's runtime objects: the newest sandbox, the view, and every container id per name."""

    sandbox_id: str | None
    sandbox_ready: bool
    sandbox_attempt: int
    view: PodView
    ids: dict[str, list[tuple[int, str, str]]]  # name -> [(attempt, id, state)], newest last


def _applied(r: cri_pb2.ContainerResources | None) -> LinuxResources | None:
    if r is None or not r.HasField("linux"):
        return None
    lx = r.linux
    return LinuxResources(cpu_shares=lx.cpu_shares, cpu_quota=lx.cpu_quota, cpu_period=lx.cpu_period or 100_000,
                          memory_limit_in_bytes=lx.memory_limit_in_bytes)


def _linux_message(linux: LinuxResources) -> cri_pb2.LinuxContainerResources:
    return cri_pb2.LinuxContainerResources(cpu_shares=linux.cpu_shares, cpu_quota=linux.cpu_quota,
                                           cpu_period=linux.cpu_period,
                                           memory_limit_in_bytes=linux.memory_limit_in_bytes)


class RuntimeOps:
    def __init__(self, runtime):
        self.rt = runtime

    async def pod_uids(self) -> dict[str, list[str]]:
        """Every pod uid the runtime has sandboxes for, with their sandbox ids."""
        resp = await self.rt.list_pod_sandbox(cri_pb2.ListPodSandboxRequest())
        out: dict[str, list[str]] = {}
        for s in resp.items:
            uid = s.labels.get(LABEL_POD_UID) or s.metadata.uid
            out.setdefault(uid, []).append(s.id)
        return out

    async def observe(self, uid: str) -> Observed:
        resp = await self.rt.list_pod_sandbox(cri_pb2.ListPodSandboxRequest(
            filter=cri_pb2.PodSandboxFilter(label_selector={LABEL_POD_UID: uid})))
        sandboxes = sorted(resp.items, key=lambda s: (s.metadata.attempt, s.created_at))
        view = PodView()
        ids: dict[str, list[tuple[int, str, str]]] = {}
        if not sandboxes:
            return Observed(None, False, -1, view, ids)
        newest = sandboxes[-1]
        status = await self.rt.pod_sandbox_status(cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=newest.id))
        ready = status.status.state == cri_pb2.SANDBOX_READY
        view.sandbox_ready = ready
        view.ip = status.status.network.ip
        # Containers of every sandbox of the pod (a recreated sandbox's containers restart).
        statuses: list[cri_pb2.ContainerStatus] = list(status.containers_statuses)
        for s in sandboxes[:-1]:
            older = await self.rt.pod_sandbox_status(cri_pb2.PodSandboxStatusRequest(pod_sandbox_id=s.id))
            statuses += list(older.containers_statuses)
        by_name: dict[str, list[cri_pb2.ContainerStatus]] = {}
        for cs in statuses:
            name = cs.labels.get(LABEL_CONTAINER_NAME) or cs.metadata.name
            by_name.setdefault(name, []).append(cs)
        for name, instances in by_name.items():
            instances.sort(key=lambda c: (c.metadata.attempt, c.created_at))
            ids[name] = [(c.metadata.attempt, c.id, _STATE.get(c.state, "unknown")) for c in instances]
            latest = instances[-1]
            view.containers[name] = self._container_view(name, latest)
            if len(instances) > 1:
                view.previous[name] = self._container_view(name, instances[-2])
            view.restarts[name] = latest.metadata.attempt
        return Observed(newest.id, ready, newest.metadata.attempt, view, ids)

    @staticmethod
    def _container_view(name: str, cs: cri_pb2.ContainerStatus) -> ContainerView:
        return ContainerView(name=name, id=cs.id, state=_STATE.get(cs.state, "unknown"), attempt=cs.metadata.attempt,
                             started_at=_time(cs.started_at), finished_at=_time(cs.finished_at),
                             exit_code=cs.exit_code, reason=cs.reason, message=cs.message, image=cs.image.image,
                             applied=_applied(cs.resources if cs.HasField("resources") else None))

    async def run_sandbox(self, pod: core_pb2.Pod, attempt: int, record: LinuxResources | None = None,
                          overhead: Resources | None = None) -> str:
        """Run the pod's sandbox with its pod-level ``record`` (kubelet.resize.sandbox_record) and
        its overhead, as the kubelet's LinuxPodSandboxConfig carries them."""
        labels = {LABEL_POD_UID: pod.metadata.uid, LABEL_POD_NAME: pod.metadata.name,
                  LABEL_POD_NAMESPACE: pod.metadata.namespace}
        linux = cri_pb2.LinuxPodSandboxConfig()
        if record is not None:
            linux.resources.CopyFrom(_linux_message(record))
        if overhead is not None:
            linux.overhead.CopyFrom(_linux_message(to_linux(overhead)))
        config = cri_pb2.PodSandboxConfig(
            metadata=cri_pb2.PodSandboxMetadata(name=pod.metadata.name, uid=pod.metadata.uid,
                                                namespace=pod.metadata.namespace, attempt=attempt),
            hostname=pod.spec.hostname or pod.metadata.name, labels=labels,
            annotations={k: v for k, v in pod.metadata.annotations.items()}, linux=linux)
        resp = await self.rt.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=config))
        return resp.pod_sandbox_id

    async def start_container(self, pod: core_pb2.Pod, sandbox_id: str, c: core_pb2.Container, attempt: int,
                              allocated: Resources) -> str:
        """Create and start one container instance with the allocated resources."""
        labels = {LABEL_POD_UID: pod.metadata.uid, LABEL_POD_NAME: pod.metadata.name,
                  LABEL_POD_NAMESPACE: pod.metadata.namespace, LABEL_CONTAINER_NAME: c.name}
        annotations = {}
        for key in USAGE_ANNOTATIONS:  # pod-wide usage annotations, or per container (<key>.<container>)
            value = pod.metadata.annotations.get(f"{key}.{c.name}", pod.metadata.annotations.get(key))
            if value is not None:
                annotations[key] = value
        config = cri_pb2.ContainerConfig(
            metadata=cri_pb2.ContainerMetadata(name=c.name, attempt=attempt), image=cri_pb2.ImageSpec(image=c.image),
            command=list(c.command), args=list(c.args), labels=labels, annotations=annotations,
            linux=cri_pb2.LinuxContainerConfig(resources=_linux_message(to_linux(allocated))))
        created = await self.rt.create_container(cri_pb2.CreateContainerRequest(pod_sandbox_id=sandbox_id,
                                                                                config=config))
        await self.rt.start_container(cri_pb2.StartContainerRequest(container_id=created.container_id))
        return created.container_id

    async def stop_container(self, container_id: str, timeout: int) -> None:
        try:
            await self.rt.stop_container(cri_pb2.StopContainerRequest(container_id=container_id, timeout=timeout),
                                         timeout=timeout + 10)
        except RuntimeNotFound:
            pass

    async def remove_container(self, container_id: str) -> None:
        try:
            await self.rt.remove_container(cri_pb2.RemoveContainerRequest(container_id=container_id))
        except RuntimeNotFound:
            pass

    async def finish_init_container(self, container_id: str, exit_code: int = 0) -> None:
        """Simulated init containers complete as soon as they start, with ``exit_code``
        (``init_exit_code``)."""
        await self.rt.exit_container(cri_pb2.ExitContainerRequest(container_id=container_id, exit_code=exit_code))

    async def remove_sandbox(self, sandbox_id: str) -> None:
        try:
            await self.rt.stop_pod_sandbox(cri_pb2.StopPodSandboxRequest(pod_sandbox_id=sandbox_id))
        except RuntimeNotFound:
            pass
        try:
            await self.rt.remove_pod_sandbox(cri_pb2.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id))
        except RuntimeNotFound:
            pass

    # ------------------------------------------------------------ resize.ResizeRuntime

    def for_sandbox(self, sandbox_id: str) -> "SandboxResizer":
        return SandboxResizer(self, sandbox_id)


class SandboxResizer:
    """The runtime as kubelet.resize.actuate needs it, for one sandbox."""

    def __init__(self, ops: RuntimeOps, sandbox_id: str):
        self.ops, self.sandbox_id = ops, sandbox_id

    async def update_container(self, container_id: str, linux: LinuxResources) -> None:
        await self.ops.rt.update_container_resources(cri_pb2.UpdateContainerResourcesRequest(
            container_id=container_id, linux=_linux_message(linux)))

    async def update_sandbox(self, total: LinuxResources) -> None:
        await self.ops.rt.update_pod_sandbox_resources(cri_pb2.UpdatePodSandboxResourcesRequest(
            pod_sandbox_id=self.sandbox_id, resources=_linux_message(total)))

    async def memory_usage(self, container_id: str) -> int:
        stats = await self.ops.rt.container_stats(cri_pb2.ContainerStatsRequest(container_id=container_id))
        return stats.stats.memory.working_set_bytes.value

