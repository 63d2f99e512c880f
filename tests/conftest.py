"""Shared fixtures: a real cluster (etcd + apiserver + what exists) per test module.

Clusters are started by ``cli.cluster.up`` — the code ``kplane up`` runs — on free ports in a
temporary data dir, and always stopped afterwards. When a test fails, the tail of every
component's log is attached to the report, so the failure explains itself.
"""

from __future__ import annotations

import asyncio
import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
import pytest_timeout

from cli import cluster, topology
from machinery.client import Client

ROOT = Path(__file__).resolve().parent.parent
_LOG_LINES = int(os.environ.get("KPLANE_TEST_LOG_LINES", "60"))
# Clusters whose logs go with a failing test's report.
_ACTIVE: list[cluster.ClusterState] = []


class TestCluster:
    """A running cluster and helpers to drive it."""

    def __init__(self, state: cluster.ClusterState):
        self.state = state
        self.data_dir = state.data_dir

    @property
    def server(self) -> str:
        return self.state.server

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
    # A test gets the components it asks for: no nodes and no scheduler unless it says so.
    cfg = topology.ClusterConfig(data_dir=tmp, nodes=overrides.pop("nodes", 0),
                                 schedulers=overrides.pop("schedulers", 0), **overrides)
    try:
        state = cluster.up(cfg, timeout=60, echo=lambda *_: None)
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
        for state in list(_ACTIVE):
            tc = TestCluster(state)
            tc.reload()
            report.sections.append((f"component logs ({state.data_dir})", tc.logs()))


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item, settings):
    """pytest-timeout's signal method, with the stack of every asyncio task added to its dump of
    every thread: a test that hangs in the event loop shows which await it hangs in."""
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        __tracebackhide__ = True
        _dump_tasks(item.config.get_terminal_writer())
        pytest_timeout.timeout_sigalrm(item, settings)

    def cancel():
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)

    item.cancel_timeout = cancel
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    return True


def _dump_tasks(terminal) -> None:
    loop = asyncio._get_running_loop()
    if loop is None:
        return
    terminal.sep("+", title="asyncio tasks at the timeout")
    for task in asyncio.all_tasks(loop):
        out = io.StringIO()
        task.print_stack(limit=10, file=out)
        terminal.write(f"task {task.get_name()}:\n{out.getvalue()}")
    terminal.sep("+", title="asyncio tasks")
