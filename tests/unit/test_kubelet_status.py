"""The pod status a kubelet reports (KEP-1287 allocatedResources / resources, phase, conditions)."""

from __future__ import annotations

import pytest

from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.conditions import ResizeCondition
from kubelet.status import (
    ContainerView,
    LinuxResources,
    PodView,
    actual_requirements,
    compute_status,
    milli_to_quota,
    milli_to_shares,
    phase,
    shares_to_milli,
    to_linux,
)
from tests.harness.builders import MakePod


def test_cri_unit_conversions_match_kubernetes():
    assert milli_to_shares(1000) == 1024 and milli_to_shares(1500) == 1536 and milli_to_shares(1) == 2
    assert milli_to_shares(0) == 2
    assert shares_to_milli(1536) == 1500 and shares_to_milli(2) == 0
    assert milli_to_quota(1500) == 150000 and milli_to_quota(5) == 1000 and milli_to_quota(0) == 0


def test_actual_resources_keep_the_allocated_quantities_when_the_runtime_applied_them():
    alloc = Resources({"cpu": "1.5", "memory": "64Mi"}, {"cpu": "2", "memory": "128Mi"})
    assert actual_requirements(alloc, to_linux(alloc)) == alloc


def test_actual_resources_show_what_the_runtime_really_applied():
    alloc = Resources({"cpu": "1500m"}, {"cpu": "1234m", "memory": "100Mi"})
    # A runtime that rounds quota up to 10 ms and set a different memory limit.
    applied = LinuxResources(cpu_shares=1536, cpu_quota=130000, memory_limit_in_bytes=200 << 20)
    actual = actual_requirements(alloc, applied)
    assert actual.requests == {"cpu": "1500m"}
    assert actual.limits == {"cpu": "1300m", "memory": "200Mi"}


def test_the_actual_memory_request_is_the_actuated_one():
    # KEP-1287 "Memory Limit Decreases": a downsize below the usage is allocated, never sent to
    # the runtime; the pod still holds its old memory request, as the kubelet counts it.
    alloc = Resources({"cpu": "100m", "memory": "300Mi"}, {"memory": "300Mi"})
    actuated = Resources({"cpu": "100m", "memory": "1Gi"}, {"memory": "1Gi"})
    actual = actual_requirements(alloc, to_linux(actuated), actuated)
    assert actual.requests == {"cpu": "100m", "memory": "1Gi"} and actual.limits == {"memory": "1Gi"}
    assert actual_requirements(alloc, to_linux(alloc), alloc) == alloc


def _flow_pod(cpu: str):
    pod = MakePod().name("flow").req(cpu=cpu).obj()
    pod.metadata.generation = 3
    pod.status.qos_class = "Burstable"
    pod.status.conditions.add(type="PodScheduled", status="True", last_transition_time="2020-01-01T00:00:00Z")
    return pod


def test_kep1287_flow_control_step_8_status_shows_allocated_and_actual_separately():
    """Step 8: spec 2, allocated 1.5, the runtime still at 1 (1024 shares): status reports
    allocatedResources cpu 1.5 and resources.requests cpu 1."""
    pod = _flow_pod("2")
    view = PodView(sandbox_ready=True, ip="10.0.0.2", containers={
        "c1": ContainerView("c1", "abc", "running", started_at="2020-01-01T00:00:01Z",
                            applied=LinuxResources(cpu_shares=1024))})
    st = compute_status(pod, view, {"c1": Resources({"cpu": "1.5"})},
                        {"PodResizeInProgress": ResizeCondition("PodResizeInProgress", observed_generation=3,
                                                                last_transition_time="2020-01-01T00:00:02Z")})
    cs = st.container_statuses[0]
    assert dict(cs.allocated_resources) == {"cpu": "1.5"}
    assert dict(cs.resources.requests) == {"cpu": "1"}
    assert st.phase == "Running" and cs.ready and cs.container_id == "kplane://abc"
    conds = {c.type: c for c in st.conditions}
    assert conds["PodScheduled"].last_transition_time == "2020-01-01T00:00:00Z"
    assert conds["Ready"].status == "True" and conds["PodResizeInProgress"].observed_generation == 3
    assert st.observed_generation == 3 and st.pod_ip == "10.0.0.2"


def test_a_container_that_is_not_running_reports_its_allocated_resources_and_empty_means_supported():
    pod = MakePod().name("p").container("c1").obj()
    st = compute_status(pod, PodView(), {"c1": Resources()}, {})
    cs = st.container_statuses[0]
    assert cs.HasField("resources") and not cs.resources.requests  # {}: this kubelet supports resize
    assert cs.state.waiting.reason == "ContainerCreating" and st.phase == "Pending"


def test_an_old_kubelet_reports_no_status_resources():
    """KEP-1287 Version Skew Strategy: without in-place resize, resources stay unset."""
    pod = MakePod().name("p").req(cpu="1").obj()
    view = PodView(sandbox_ready=True, containers={"c1": ContainerView("c1", "x", "running",
                                                                       applied=LinuxResources(cpu_shares=1024))})
    cs = compute_status(pod, view, None, {}, report_resources=False).container_statuses[0]
    assert not cs.HasField("resources") and not cs.allocated_resources


@pytest.mark.parametrize("policy,states,expected", [
    ("Always", [("running", 0, False)], "Running"),
    ("Always", [("created", 0, False)], "Pending"),
    ("Never", [("exited", 0, False)], "Succeeded"),
    ("Never", [("exited", 1, False)], "Failed"),
    ("OnFailure", [("exited", 1, False)], "Running"),
    ("Always", [("created", 0, True)], "Running"),  # waiting to restart after a crash: stopped, restarts
    ("Never", [("exited", 0, False), ("running", 0, False)], "Running"),
])
def test_phase_follows_kubernetes_get_phase(policy, states, expected):
    builder = MakePod().name("p")
    for i in range(len(states)):
        builder.container(f"c{i}")
    pod = builder.obj()
    pod.spec.restart_policy = policy
    view = PodView(sandbox_ready=True)
    for i, (state, code, crashed_before) in enumerate(states):
        view.containers[f"c{i}"] = ContainerView(f"c{i}", f"id{i}", state, exit_code=code)
        if crashed_before:
            view.previous[f"c{i}"] = ContainerView(f"c{i}", "old", "exited", exit_code=1, reason="Error")
    assert phase(pod, view) == expected


def test_restart_count_and_last_state_after_a_restart_container_resize():
    pod = MakePod().name("p").req(cpu="1").obj()
    view = PodView(sandbox_ready=True, restarts={"c1": 1},
                   containers={"c1": ContainerView("c1", "new", "running", attempt=1, applied=to_linux(
                       Resources({"cpu": "1"})))},
                   previous={"c1": ContainerView("c1", "old", "exited", exit_code=0, reason="Completed")})
    cs = compute_status(pod, view, {"c1": Resources({"cpu": "1"})}, {}).container_statuses[0]
    assert cs.restart_count == 1 and cs.last_state.terminated.container_id == "kplane://old"
