"""The kubelet's runtime metrics, as Kubernetes' kuberuntime instruments its CRI client
(instrumented_services.go): every RuntimeService call counted and timed by operation type, its
errors counted, under the names upstream dashboards and KEP-1287's PRR read:

- ``kubelet_runtime_operations_total{operation_type}``
- ``kubelet_runtime_operations_duration_seconds{operation_type}``
- ``kubelet_runtime_operations_errors_total{operation_type}`` (e.g. ``update_container``: a
  resize the runtime refused)

The operation types are Kubernetes' (``update_container`` for UpdateContainerResources,
``run_podsandbox`` for RunPodSandbox, ...). FakeRuntimeControl, kplane's own test service, is not
counted.
"""

from __future__ import annotations

import functools

from prometheus_client import Counter, Histogram

from kubelet.runtime.methods import RUNTIME_SERVICE, Method

RUNTIME_OPERATIONS = Counter("kubelet_runtime_operations_total",
                             "Cumulative number of runtime operations by operation type.", ["operation_type"])
RUNTIME_OPERATIONS_DURATION = Histogram(
    "kubelet_runtime_operations_duration_seconds", "Duration in seconds of runtime operations. Broken down by "
    "operation type.", ["operation_type"], buckets=tuple(0.005 * 2.5 ** i for i in range(14)))
RUNTIME_OPERATIONS_ERRORS = Counter("kubelet_runtime_operations_errors_total",
                                    "Cumulative number of runtime operation errors by operation type.",
                                    ["operation_type"])

# Kubernetes' names where its rule (snake case, "pod_sandbox" written "podsandbox") does not give them.
_RENAMED = {"update_container_resources": "update_container"}


@functools.cache
def operation_type(method: Method) -> str | None:
    """The ``operation_type`` label of a RuntimeService method; None for kplane's control service."""
    if method.service != RUNTIME_SERVICE:
        return None
    return _RENAMED.get(method.attr, method.attr.replace("pod_sandbox", "podsandbox"))


@functools.cache
def _series(operation: str) -> tuple[Counter, Histogram, Counter]:
    """The three series of an operation type, looked up once (a hollow process makes thousands of
    calls a second)."""
    return (RUNTIME_OPERATIONS.labels(operation), RUNTIME_OPERATIONS_DURATION.labels(operation),
            RUNTIME_OPERATIONS_ERRORS.labels(operation))


def record(operation: str, seconds: float, failed: bool) -> None:
    operations, duration, errors = _series(operation)
    operations.inc()
    duration.observe(seconds)
    if failed:
        errors.inc()
