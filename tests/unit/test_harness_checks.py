"""The harness's own guards: a metric the component does not export is an error, never a 0; a
skipped test not on the allow-list fails the run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tests.harness.cluster import ROOT
from tests.harness.metrics import MetricNotExported, label, metric, series


@pytest.fixture
def component():
    """A fake component's admin port serving a registry's /metrics, and a test cluster naming it."""
    reg = CollectorRegistry()
    requests = Counter("apiserver_request", "requests", ["code", "verb"], registry=reg)
    requests.labels("201", "CREATE").inc(3)
    requests.labels("404", "GET").inc()
    Counter("kubelet_evictions", "evictions", ["eviction_signal"], registry=reg)  # no series yet
    Gauge("scheduler_pending_pods", "pending", ["queue"], registry=reg).labels("gated").set(2)
    Histogram("kubelet_pleg_relist_duration_seconds", "relists", registry=reg).observe(0.01)
    body = generate_latest(reg)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    proc = SimpleNamespace(admin=f"127.0.0.1:{server.server_address[1]}")
    tc = SimpleNamespace(reload=lambda: None, process=lambda name: proc)
    yield tc
    server.shutdown()


def test_metric_sums_the_series_selected_in_any_label_order(component):
    assert metric(component, "c", "apiserver_request_total") == 4
    assert metric(component, "c", "apiserver_request_total", 'verb="CREATE"') == 3
    assert metric(component, "c", "apiserver_request_total", 'verb="CREATE",code="201"}') == 3
    assert metric(component, "c", "apiserver_request_total", 'code="201"}') == 0  # exact: a label more
    assert metric(component, "c", "scheduler_pending_pods", 'queue="gated"}') == 2
    assert metric(component, "c", "kubelet_pleg_relist_duration_seconds_count") == 1
    assert {label(k, "verb"): v for k, v in series(component, "c", "apiserver_request_total").items()} == \
        {"CREATE": 3, "GET": 1}


def test_a_metric_exported_without_series_is_0(component):
    assert metric(component, "c", "kubelet_evictions_total", 'eviction_signal="memory.available"}') == 0


def test_a_metric_not_exported_raises_rather_than_reads_0(component):
    with pytest.raises(MetricNotExported, match="exports no metric 'apiserver_requests_total'"):
        metric(component, "c", "apiserver_requests_total")
    with pytest.raises(MetricNotExported):
        metric(component, "c", "scheduler_pending_pod")


def test_a_skip_not_on_the_allow_list_fails_the_run(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from tests.harness.skips import pytest_runtest_logreport, pytest_sessionfinish, pytest_terminal_summary\n")
    (tmp_path / "test_probe.py").write_text(
        "import pytest\n\ndef test_skips():\n    pytest.skip('no tool')\n\ndef test_passes():\n    pass\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
                          str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "test_probe.py::test_skips: Skipped: no tool" in run.stdout
    assert "1 passed, 1 skipped" in run.stdout
    (tmp_path / "test_probe.py").write_text("def test_passes():\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:asyncio",
                          str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
