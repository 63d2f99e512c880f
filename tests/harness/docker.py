"""A Docker engine and a compose cluster for the tests that run compose.yaml for real.

``engine()``: the docker command and a running engine — Debian's docker.io installed with apt if
missing, ``dockerd`` started if not running (and stopped again by ``release()`` if this started
it). Where it cannot be had, the test fails with one line saying why: it does not skip.

``ComposeCluster``: compose.yaml brought up under a project of its own (its bind-mounted
``.kplane/compose`` in a temporary project directory), driven from the host as a user would —
``kplane --data-dir <that directory>``, kubectl with its kubeconfig — and brought down with
``down -v`` whatever happened, after which nothing of the project is left.

``StackCluster``: the same compose.yaml deployed with ``docker stack deploy`` on a one-node swarm
(``swarm()`` makes one on 127.0.0.1 if the engine is in none, and ``leave_swarm()`` leaves it
again); it publishes no port, so it is driven from inside: ``kplane`` run in the apiserver's
container.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from cli import cluster
from tests.harness.cluster import ROOT, TestCluster

ENGINE_WAIT = 90.0  # seconds for a dockerd this started to answer


class _Engine:
    def __init__(self) -> None:
        self.started: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.gettempdir()) / "kplane-test-dockerd.log"


_engine = _Engine()


def _answers(docker: str) -> bool:
    return subprocess.run([docker, "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                          timeout=30).returncode == 0


def engine() -> str:
    """The docker command, with an engine answering it."""
    if shutil.which("dockerd") is None:
        subprocess.run(["sh", str(ROOT / "tools" / "apt_install.sh"), "docker.io"], check=False)
    docker = shutil.which("docker")
    assert docker is not None and shutil.which("dockerd") is not None, \
        "no Docker engine: `apt-get install docker.io` failed on this machine"
    if _answers(docker):
        return docker
    if _engine.started is None:
        out = open(_engine.log, "ab")
        _engine.started = subprocess.Popen(["dockerd"], stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + ENGINE_WAIT
    while time.monotonic() < deadline:
        if _answers(docker):
            return docker
        if _engine.started.poll() is not None:
            break
        time.sleep(0.5)
    tail = _engine.log.read_text(errors="replace").strip().splitlines()[-1:] if _engine.log.exists() else []
    raise AssertionError(f"dockerd did not start on this machine: {tail[0] if tail else 'no log'}")


def release() -> None:
    """Stop the dockerd ``engine()`` started, if it did."""
    proc, _engine.started = _engine.started, None
    if proc is not None and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def compose_command() -> list[str]:
    """Compose v2 where the machine has it, else Debian's docker-compose (1.29)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise AssertionError("no Compose implementation: `make install` installs Debian's docker-compose")


def build_image() -> None:
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "image.py")], cwd=ROOT,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, f"make image failed:\n{out.stdout}{out.stderr}"


class ComposeCluster:
    """compose.yaml up under project ``kplane-test-<random>`` in a temporary project directory."""

    def __init__(self, hollow_per_shard: int = 250) -> None:
        self.hollow_per_shard = hollow_per_shard
        self.project = f"kplanetest{uuid.uuid4().hex[:8]}"
        self.dir = Path(tempfile.mkdtemp(prefix="kplane-compose-"))
        self.data_dir = self.dir / ".kplane" / "compose"
        self.tc: TestCluster | None = None

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "COMPOSE_PROJECT_NAME": self.project,
               "KPLANE_HOLLOW_NODES_PER_SHARD": str(self.hollow_per_shard)}
        files = ["-f", str(ROOT / "compose.yaml"), "-f", str(ROOT / "compose.override.yaml")]
        return subprocess.run([*compose_command(), "--project-directory", str(self.dir), *files, *args], cwd=self.dir,
                              env=env, capture_output=True, text=True, timeout=timeout)

    def up(self, *args: str) -> TestCluster:
        out = self.compose("up", "-d", *args)
        assert out.returncode == 0, f"compose up failed:\n{out.stdout}{out.stderr}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not cluster.ClusterState.path(self.data_dir).exists():
            time.sleep(0.2)
        state = cluster.ClusterState.load(self.data_dir)
        assert state is not None, f"the tokens service wrote no {cluster.ClusterState.path(self.data_dir)}"
        self.tc = TestCluster(state)
        return self.tc

    def logs(self) -> str:
        return self.compose("logs", "--no-color", "--tail", "40", timeout=120).stdout

    def down(self) -> None:
        self.compose("down", "-v", "--remove-orphans", timeout=300)
        shutil.rmtree(self.dir, ignore_errors=True)

    def leftovers(self, docker: str) -> list[str]:
        """The project's containers, networks and volumes still there."""
        label = f"label=com.docker.compose.project={self.project}"
        out = []
        for what in (["ps", "-aq"], ["network", "ls", "-q"], ["volume", "ls", "-q"]):
            ids = subprocess.run([docker, *what, "--filter", label], capture_output=True, text=True).stdout.split()
            out += [f"{what[0]} {i}" for i in ids]
        return out


class _Swarm:
    made = False


def swarm(docker: str) -> None:
    """A swarm this engine manages: a one-node swarm on 127.0.0.1 unless it is in one already."""
    state = subprocess.run([docker, "info", "--format", "{{.Swarm.LocalNodeState}}"], capture_output=True,
                           text=True).stdout.strip()
    if state == "active":
        return
    out = subprocess.run([docker, "swarm", "init", "--advertise-addr", "127.0.0.1"], capture_output=True, text=True)
    assert out.returncode == 0, f"docker swarm init failed: {out.stderr.strip()}"
    _Swarm.made = True


def leave_swarm(docker: str) -> None:
    if _Swarm.made:
        subprocess.run([docker, "swarm", "leave", "--force"], capture_output=True)
        _Swarm.made = False


class StackCluster:
    """compose.yaml deployed as stack ``kplanestack<random>`` from a temporary directory."""

    def __init__(self, docker: str, hollow_per_shard: int):
        self.docker = docker
        self.stack = f"kplanestack{uuid.uuid4().hex[:6]}"
        self.dir = Path(tempfile.mkdtemp(prefix="kplane-stack-"))
        self.data_dir = self.dir / ".kplane" / "compose"
        self.data_dir.mkdir(parents=True)  # a swarm does not make a bind mount's source
        shutil.copy(ROOT / "compose.yaml", self.dir / "compose.yaml")
        self.env = {**os.environ, "COMPOSE_PROJECT_NAME": self.stack,
                    "KPLANE_HOLLOW_NODES_PER_SHARD": str(hollow_per_shard)}

    def _run(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.docker, *args], cwd=self.dir, env=self.env, capture_output=True, text=True,
                              timeout=timeout)

    def deploy(self) -> None:
        out = self._run("stack", "deploy", "-c", "compose.yaml", self.stack)
        assert out.returncode == 0, f"docker stack deploy failed:\n{out.stdout}{out.stderr}"

    def scale(self, service: str, replicas: int) -> None:
        out = self._run("service", "scale", "--detach", f"{self.stack}_{service}={replicas}")
        assert out.returncode == 0, out.stderr

    def kplane(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        """``kplane`` in the apiserver's container, against its own 127.0.0.1:6443, as admin."""
        ids = self._run("ps", "-q", "--filter", f"label=com.docker.swarm.service.name={self.stack}_apiserver").stdout
        token = cluster.read_token(self.data_dir, "admin")
        return subprocess.run([self.docker, "exec", "-i", ids.split()[0], "python", "-m", "cli", "--server",
                               "127.0.0.1:6443", "--token", token, *args], input=input, capture_output=True,
                              text=True, timeout=120)

    def logs(self, service: str) -> str:
        return self._run("service", "logs", "--tail", "30", f"{self.stack}_{service}", timeout=60).stdout

    def remove(self) -> list[str]:
        """``docker stack rm``, then its volume; what of the stack is left."""
        self._run("stack", "rm", self.stack)
        label = f"label=com.docker.stack.namespace={self.stack}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and (self._run("ps", "-aq", "--filter", label).stdout.split()
                                               or self._run("network", "ls", "-q", "--filter", label).stdout.split()):
            time.sleep(1)
        for _ in range(30):  # the volume goes once its last container has
            if self._run("volume", "rm", f"{self.stack}_kplane-data").returncode == 0 or not self._run(
                    "volume", "ls", "-q", "--filter", f"name={self.stack}_").stdout.split():
                break
            time.sleep(1)
        left = [f"{what} {i}" for what, cmd in (("container", ["ps", "-aq", "--filter", label]),
                                                ("network", ["network", "ls", "-q", "--filter", label]),
                                                ("volume", ["volume", "ls", "-q", "--filter", f"name={self.stack}_"]))
                for i in self._run(*cmd).stdout.split()]
        shutil.rmtree(self.dir, ignore_errors=True)
        return left
