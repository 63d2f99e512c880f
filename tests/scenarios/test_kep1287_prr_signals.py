"""KEP-1287 "Production Readiness Review Questionnaire", Monitoring Requirements, on real
processes: the signals an operator reads are exported under Kubernetes' own names, so upstream
dashboards and alerts work against kplane —

- ``kubernetes_feature_enabled{name="InPlacePodVerticalScaling"}`` by every component;
- the kubelet's ``kubelet_pod_worker_duration_seconds{operation_type}``;
- its ``kubelet_runtime_operations_total`` / ``_duration_seconds`` / ``_errors_total`` with
  ``operation_type="update_container"``: a resize the runtime refuses once (a failpoint) is
  counted as an error, and the resize is still actuated by the retry.
"""

from __future__ import annotations

import pytest

from tests.harness.api import resize
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.failpoints import failpoint
from tests.harness.metrics import metric
from tests.harness.resize_preemption import resizable_pod, wait_actuated
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
KUBELET = f"kubelet/{NODE}"
UPDATE = 'operation_type="update_container"'

prr_cluster = cluster_fixture(nodes=1, schedulers=1, controller_managers=1, node_cpu="2", node_memory="4Gi",
                              kubelet_args=FAST_KUBELET)


@pytest.mark.parametrize("component", ["apiserver", "scheduler", "controller-manager", KUBELET])
def test_every_component_exports_its_feature_gates(prr_cluster, component):
    assert metric(prr_cluster, component, "kubernetes_feature_enabled",
                  '{name="InPlacePodVerticalScaling",stage=""}') == 1
    assert metric(prr_cluster, component, "kubernetes_feature_enabled",
                  '{name="SchedulerPreemptionForPodResize",stage="ALPHA"}') == 0


async def test_a_refused_container_update_is_counted_and_the_resize_still_lands(prr_cluster):
    api = prr_cluster.client()
    try:
        created = metric(prr_cluster, KUBELET, "kubelet_pod_worker_duration_seconds_count",
                         'operation_type="create"')
        await api.pods.create(resizable_pod("web", "500m", "").obj())
        await wait_running(api, "web")
        assert metric(prr_cluster, KUBELET, "kubelet_pod_worker_duration_seconds_count",
                      'operation_type="create"') > created
        assert metric(prr_cluster, KUBELET, "kubelet_runtime_operations_total", 'operation_type="run_podsandbox"') >= 1

        updates = metric(prr_cluster, KUBELET, "kubelet_runtime_operations_total", UPDATE)
        errors = metric(prr_cluster, KUBELET, "kubelet_runtime_operations_errors_total", UPDATE)
        failpoint(prr_cluster, f"runtime/{NODE}", "runtime/update-container-resources", "1*error")
        await resize(api, "web", cpu="700m")
        await eventually(lambda: metric(prr_cluster, KUBELET, "kubelet_runtime_operations_errors_total", UPDATE)
                         > errors, timeout=30, what="the refused UpdateContainerResources counted")
        await wait_actuated(api, "web", "700m")
        assert metric(prr_cluster, KUBELET, "kubelet_runtime_operations_total", UPDATE) >= updates + 2
        assert metric(prr_cluster, KUBELET, "kubelet_runtime_operations_duration_seconds_count", UPDATE) >= updates + 2
        assert metric(prr_cluster, KUBELET, "kubelet_runtime_operations_errors_total", UPDATE) == errors + 1
    finally:
        await api.pods.delete("web", "default")
        await api.close()
