"""A Docker engine and a compose cluster for the tests that run compose.yaml for real.

``engine()``: the docker command and a running engine — Debian's docker.io installed with apt if
missing, ``dockerd`` started if not running (and stopped again by ``release()`` if this started
it). Where it cannot be had, the test fails with one line saying why: it does not skip.

``ComposeCluster``: compose.yaml brought up under a project of its own (its bind-mounted
``.kplane/compose`` in a temporary project directory), driven from the host as a user would —
``kplane --data-dir <that directory>``, kubectl with its kubeconfig — and brought down with
``down -v`` whatever happened, after which nothing of the project is left.
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

    def __init__(self) -> None:
        self.project = f"kplanetest{uuid.uuid4().hex[:8]}"
        self.dir = Path(tempfile.mkdtemp(prefix="kplane-compose-"))
        self.data_dir = self.dir / ".kplane" / "compose"
        self.tc: TestCluster | None = None

    def compose(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "COMPOSE_PROJECT_NAME": self.project}
        return subprocess.run([*compose_command(), "--project-directory", str(self.dir), "-f",
                               str(ROOT / "compose.yaml"), *args], cwd=self.dir, env=env, capture_output=True,
                              text=True, timeout=timeout)

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
