"""kubelet.runtime.instrumented: the kubelet's runtime calls counted, timed and their errors
counted by Kubernetes' operation types."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from kubelet.runtime import instrumented
from kubelet.runtime.client import InProcessRuntime, RuntimeNotFound
from kubelet.runtime.fake import FakeRuntime
from kubelet.runtime.methods import METHODS
from machinery.api import cri_pb2


def _sample(name: str, operation: str) -> float:
    return REGISTRY.get_sample_value(name, {"operation_type": operation}) or 0.0


CALLS, ERRORS = "kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total"


def test_operation_types_are_kubernetes_names():
    assert instrumented.operation_type(METHODS["update_container_resources"]) == "update_container"
    assert instrumented.operation_type(METHODS["run_pod_sandbox"]) == "run_podsandbox"
    assert instrumented.operation_type(METHODS["pod_sandbox_status"]) == "podsandbox_status"
    assert instrumented.operation_type(METHODS["list_containers"]) == "list_containers"
    control = [m for m in METHODS.values() if m.service != "kplane.cri.v1.RuntimeService"]
    assert control and all(instrumented.operation_type(m) is None for m in control)


async def test_a_call_is_counted_and_a_failed_one_counted_as_an_error():
    runtime = InProcessRuntime(FakeRuntime("node-x"))
    calls = _sample(CALLS, "container_status")
    errors = _sample(ERRORS, "container_status")
    await runtime.list_containers()
    with pytest.raises(RuntimeNotFound):
        await runtime.container_status(cri_pb2.ContainerStatusRequest(container_id="no-such"))
    assert _sample(CALLS, "container_status") == calls + 1
    assert _sample(ERRORS, "container_status") == errors + 1
    assert _sample(ERRORS, "list_containers") == 0
