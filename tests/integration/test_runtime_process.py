"""``python -m kubelet.runtime`` as a real process, driven through ``RuntimeClient`` on a unix socket:
it outlives a kill -9 with its containers running, takes failpoints at run time through its admin
port, and exits cleanly on SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Iterator

import grpc
import pytest

from cli.cluster import free_ports
from kubelet.runtime.client import RuntimeCallError, RuntimeClient, RuntimeUnavailable
from kubelet.runtime.fake import MEMORY_USAGE_ANNOTATION
from machinery.api import cri_pb2

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
Mi = 1024 * 1024


class _Runtime:
    """One runtime process on a unix socket in a temp dir; its stderr goes to a log file."""

    def __init__(self, directory: Path, *args: str, env: dict[str, str] | None = None):
        self.dir = directory
        self.socket = f"unix://{directory}/runtime.sock"
        self.admin = f"127.0.0.1:{free_ports(1)[0]}"
        self.log = directory / "runtime.log"
        self.args, self.env = list(args), env or {}
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        argv = [sys.executable, "-m", "kubelet.runtime", "--listen", self.socket, "--admin-listen", self.admin,
                "--state-file", str(self.dir / "state.json"), "--node-name", "node-1", *self.args]
        env = {k: v for k, v in os.environ.items() if k != "KPLANE_FAILPOINTS"} | self.env
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, cwd=ROOT, stdout=log, stderr=log, env=env)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def http(self, method: str, path: str, body: str | None = None) -> str:
        req = urllib.request.Request(f"http://{self.admin}{path}", method=method,
                                     data=body.encode() if body is not None else None)
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.read().decode()

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-8000:] if self.log.exists() else "(no log)"

    @contextlib.contextmanager
    def log_on_failure(self) -> Iterator[None]:
        """On failure, print the runtime's log (pytest shows it with the failure)."""
        try:
            yield
        except BaseException:
            print(f"----- runtime log ({self.log}) -----\n{self.tail()}")
            raise


@pytest.fixture
def runtime_dir():
    d = Path(tempfile.mkdtemp(prefix="kplane-rt-"))  # short: unix socket paths are limited to 107 bytes
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def runtime(runtime_dir):
    rt = _Runtime(runtime_dir, "--cpu-quota-rounding-us", "10000")
    try:
        yield rt
    finally:
        rt.kill()


@pytest.fixture
async def client(runtime):
    """The kubelet's view: a RuntimeClient on the runtime's socket (overrides conftest's apiserver client)."""
    c = RuntimeClient(runtime.socket, timeout=5)
    try:
        yield c
    finally:
        await c.close()


async def _start_sandbox_and_container(client: RuntimeClient) -> tuple[str, str]:
    sandbox = cri_pb2.PodSandboxConfig(metadata=cri_pb2.PodSandboxMetadata(name="web", uid="u1", namespace="default"))
    sid = (await client.run_pod_sandbox(cri_pb2.RunPodSandboxRequest(config=sandbox))).pod_sandbox_id
    config = cri_pb2.ContainerConfig(
        metadata=cri_pb2.ContainerMetadata(name="app"), image=cri_pb2.ImageSpec(image="nginx"),
        annotations={MEMORY_USAGE_ANNOTATION: "100Mi"},
        linux=cri_pb2.LinuxContainerConfig(resources=cri_pb2.LinuxContainerResources(
            cpu_shares=512, cpu_quota=25_000, cpu_period=100_000, memory_limit_in_bytes=256 * Mi)))
    cid = (await client.create_container(cri_pb2.CreateContainerRequest(pod_sandbox_id=sid, config=config,
                                                                        sandbox_config=sandbox))).container_id
    await client.start_container(cri_pb2.StartContainerRequest(container_id=cid))
    return sid, cid


async def _status(client: RuntimeClient, cid: str) -> cri_pb2.ContainerStatus:
    return (await client.container_status(cri_pb2.ContainerStatusRequest(container_id=cid))).status


async def test_running_container_survives_kill_9_of_the_runtime(runtime, client):
    runtime.start()
    with runtime.log_on_failure():
        version = await client.wait_ready(timeout=20)
        assert (version.runtime_name, version.runtime_api_version) == ("kplane-fake", "v1")
        sid, cid = await _start_sandbox_and_container(client)
        before = await _status(client, cid)
        # Actual != asked: the quota 25000 is rounded up to 30000 (--cpu-quota-rounding-us 10000).
        assert before.state == cri_pb2.CONTAINER_RUNNING and before.resources.linux.cpu_quota == 30_000

        runtime.kill()
        with pytest.raises(RuntimeUnavailable):
            await _status(client, cid)

        runtime.start()
        await client.wait_ready(timeout=20)
        after = await _status(client, cid)
        assert after == before  # still RUNNING, same times and applied resources
        assert after.resources.linux.memory_limit_in_bytes == 256 * Mi
        sandboxes = (await client.list_pod_sandbox()).items
        assert [(s.id, s.state) for s in sandboxes] == [(sid, cri_pb2.SANDBOX_READY)]

        # The usage model came back too: the KEP-1287 memory limit decrease below usage OOM-kills.
        await client.update_container_resources(cri_pb2.UpdateContainerResourcesRequest(
            container_id=cid, linux=cri_pb2.LinuxContainerResources(memory_limit_in_bytes=64 * Mi)))
        assert (await _status(client, cid)).reason == "OOMKilled"


async def test_failpoint_armed_through_admin_port_fails_update_container_resources(runtime, client):
    runtime.start()
    with runtime.log_on_failure():
        await client.wait_ready(timeout=20)
        _, cid = await _start_sandbox_and_container(client)
        declared = json.loads(runtime.http("GET", "/failpoints"))["declared"]
        assert "runtime/update-container-resources" in declared

        runtime.http("PUT", "/failpoints/runtime/update-container-resources", "error")
        update = cri_pb2.UpdateContainerResourcesRequest(
            container_id=cid, linux=cri_pb2.LinuxContainerResources(cpu_shares=1024, memory_limit_in_bytes=512 * Mi))
        with pytest.raises(RuntimeCallError, match="failpoint runtime/update-container-resources") as err:
            await client.update_container_resources(update)
        assert err.value.code == grpc.StatusCode.UNKNOWN and err.value.method == "UpdateContainerResources"
        assert (await _status(client, cid)).resources.linux.cpu_shares == 512  # nothing applied

        runtime.http("PUT", "/failpoints/runtime/update-container-resources", "off")
        await client.update_container_resources(update)
        assert (await _status(client, cid)).resources.linux.cpu_shares == 1024

        metrics = runtime.http("GET", "/metrics")
        assert 'kplane_runtime_operations_errors_total{operation_type="update_container_resources"} 1.0' in metrics
        assert 'kplane_runtime_containers{state="CONTAINER_RUNNING"} 1.0' in metrics
        assert runtime.http("GET", "/healthz").strip() == "ok"


async def test_failpoint_from_env_and_clean_exit_on_sigterm(runtime, client):
    runtime.env = {"KPLANE_FAILPOINTS": "runtime/run-pod-sandbox=error;scheduler/before-bind=panic"}
    runtime.start()
    with runtime.log_on_failure():
        await client.wait_ready(timeout=20)
        with pytest.raises(RuntimeCallError, match="failpoint runtime/run-pod-sandbox"):
            await _start_sandbox_and_container(client)
    runtime.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(runtime.proc.wait, 10) == 0
    assert not Path(runtime.socket[len("unix://"):]).exists()
    events = [json.loads(line)["event"] for line in runtime.tail().splitlines() if line.startswith("{")]
    assert "runtime_stopping" in events
