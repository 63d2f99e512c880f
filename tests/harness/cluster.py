"""A real cluster in a test: etcd, an apiserver and the components a test asks for, started by
``cli.cluster.up`` — the code ``kplane up`` runs — on free ports in a temporary data dir, always
stopped afterwards; the module fixtures that hold one; one component killed or started again.

When a test fails, the tail of every running cluster's component logs is attached to its report
(``pytest_runtest_makereport``, registered by tests/conftest.py), so the failure explains itself.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from cli import cluster, topology
from machinery.client import Client
from tests.harness.wait import DEADLINE_SCALE, eventually

ROOT = Path(__file__).resolve().parents[2]
_LOG_LINES = int(os.environ.get("KPLANE_TEST_LOG_LINES", "60"))
# Clusters whose logs go with a failing test's report.
_ACTIVE: list[cluster.ClusterState] = []

# Kubelet flags that make a test's kubelet react in about a second instead of Kubernetes' minutes.
FAST_KUBELET = ["--sync-frequency=1", "--resize-retry-initial=1", "--resize-retry-interval=1",
                "--restart-backoff=0.2", "--node-status-interval=1"]


class TestCluster:
    """A running cluster and helpers to drive it."""

    def __init__(self, state: cluster.ClusterState):
        self.state = state
        self.data_dir = state.data_dir

    @property
    def server(self) -> str:
        return self.state.server

    @property
    def rest(self) -> str:
        """host:port of the Kubernetes REST API (HTTPS, the cluster CA's certificate)."""
        return self.state.rest

    @property
    def kubeconfig(self) -> str:
        """The kubeconfig ``kplane up`` wrote (user admin), for kubectl and the official clients."""
        return str(self.state.kubeconfig)

    @property
    def token(self) -> str:
        return self.state.admin_token()

    def token_for(self, user: str) -> str:
        return cluster.read_token(Path(self.data_dir), user)

    def client(self, user: str = "admin", **kw) -> Client:
        return Client(self.server, self.token_for(user), **kw)

    def kplane(self, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
        """Run the kplane command against this cluster."""
        return subprocess.run([sys.executable, "-m", "cli", "--data-dir", self.data_dir, *args], input=input,
                              capture_output=True, text=True, timeout=timeout, cwd=ROOT)

    def process(self, name: str) -> cluster.Process:
        return self.state.processes[name]

    def reload(self) -> None:
        fresh = cluster.ClusterState.load(self.data_dir)
        if fresh is not None:
            self.state.processes = fresh.processes

    def logs(self) -> str:
        out = []
        for p in self.state.processes.values():
            text = cluster.tail(p.log, _LOG_LINES)
            if text:
                out.append(f"----- {p.name} ({p.log}) -----\n{text}")
        return "\n".join(out)


def start_cluster(**overrides) -> TestCluster:
    tmp = tempfile.mkdtemp(prefix="kplane-test-")
    # Tokens for kubelets of node-1..node-3, so tests can act as kubelets without running them.
    cluster.write_tokens(Path(tmp), ["node-1", "node-2", "node-3"])
    # A test gets the components it asks for: no nodes, no scheduler, no controller-manager unless it
    # says so (a controller-manager's podgc and node lifecycle act on pods and nodes tests make by hand).
    cfg = topology.ClusterConfig(data_dir=tmp, nodes=overrides.pop("nodes", 0),
                                 schedulers=overrides.pop("schedulers", 0),
                                 controller_managers=overrides.pop("controller_managers", 0), **overrides)
    try:
        state = cluster.up(cfg, timeout=60 * DEADLINE_SCALE, echo=lambda *_: None)
    except cluster.ClusterError:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    tc = TestCluster(state)
    _ACTIVE.append(state)
    return tc


def stop_cluster(tc: TestCluster) -> None:
    tc.reload()
    cluster.down(tc.state)
    if tc.state in _ACTIVE:
        _ACTIVE.remove(tc.state)
    shutil.rmtree(tc.data_dir, ignore_errors=True)


def cluster_fixture(**overrides):
    """A module-scoped fixture: a cluster started with ``start_cluster(**overrides)``, stopped after."""
    @pytest.fixture(scope="module")
    def fixture():
        tc = start_cluster(**overrides)
        try:
            yield tc
        finally:
            stop_cluster(tc)
    return fixture


# The default cluster of a module (apiserver and etcd only); a module names its own to get more.
kcluster = cluster_fixture()


@pytest.fixture
async def client(kcluster):
    c = kcluster.client()
    try:
        yield c
    finally:
        await c.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed and _ACTIVE:
        for i, state in enumerate(list(_ACTIVE)):
            tc = TestCluster(state)
            tc.reload()
            report.sections.append((f"component logs ({state.data_dir})", tc.logs()))
            if _ARTIFACTS:
                _keep_artifacts(tc, Path(_ARTIFACTS) / f"{item.nodeid.replace('/', '_').replace('::', '__')}-{i}")


# KPLANE_TEST_ARTIFACTS=DIR: a failing test's clusters leave their whole logs and their history
# (``kplane history``) in DIR, for a failure that the logs' tails do not explain.
_ARTIFACTS = os.environ.get("KPLANE_TEST_ARTIFACTS", "")


def _keep_artifacts(tc: TestCluster, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for p in tc.state.processes.values():
        if p.log and Path(p.log).exists():
            shutil.copy(p.log, out / Path(p.log).name)
    try:
        run = tc.kplane("history", timeout=120)
        (out / "history.jsonl").write_text(run.stdout + run.stderr)
    except subprocess.TimeoutExpired:
        (out / "history.jsonl").write_text("kplane history timed out\n")


# --- one component of a running cluster ---------------------------------------------------------


def admin(tc, component: str) -> str:
    """``host:port`` of ``component``'s admin HTTP server (failpoints, metrics)."""
    tc.reload()
    return tc.process(component).admin


def kill(tc, component: str) -> None:
    tc.reload()
    cluster.kill(tc.process(component))
    tc.state.save()


def start(tc, component: str) -> None:
    tc.reload()
    ok, reason = cluster.start(tc.state, tc.process(component), 30 * DEADLINE_SCALE)
    tc.state.save()
    assert ok, f"{component} did not start: {reason}"


async def wait_exited(tc, component: str, timeout: float = 20) -> None:
    """Until ``component`` is gone (a failpoint panicked it)."""
    def gone() -> bool:
        tc.reload()
        return not cluster.alive(tc.process(component).pid)
    await eventually(gone, timeout=timeout, what=f"{component} exited")
