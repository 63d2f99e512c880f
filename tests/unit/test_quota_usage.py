"""A pod's quota usage (machinery.quota, Kubernetes' PodUsageFunc) as KEP-1287 "Resource Quota" says:

    "resource quota will use the maximum of:
      1. Desired resources, computed from container requests in the pod spec, unless the resize is
         marked as Infeasible
      2. Actual resources, computed from the .status.containerStatuses[i].resources.requests
      3. Allocated resources, reported in .status.containerStatuses[i].allocatedResources"

and "to properly handle scale-down, resource quota controller now needs to evaluate pod updates
where .status...resources changed" — with the numbers of KEP-1287 "Flow Control" (one container,
cpu 1 resized to 1.5, 2, 1.6, then 100) — plus what Kubernetes' PodUsageFunc counts besides:
terminal pods and pods past their deletion grace count only ``count/pods``; sidecars, init
containers, overhead and pod-level resources; the resource names a quota may track; scopes.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from controllers.resourcequota import pod_update_matters
from machinery import quota, timeutil
from machinery.api import core_pb2
from machinery.kinds import DEPLOYMENT, REPLICA_SET, RESOURCE_QUOTA
from tests.harness.builders import MakePod, make_resource_quota

NOW = timeutil.now()


def usage(pod: core_pb2.Pod, now=NOW) -> dict[str, str]:
    return quota.to_strings(quota.POD_EVALUATOR.usage(pod, now))


def cpu(pod: core_pb2.Pod) -> str:
    return usage(pod)["requests.cpu"]


def resize_pending(pod: core_pb2.Pod, reason: str) -> core_pb2.Pod:
    pod.status.conditions.add(type="PodResizePending", status="True", reason=reason)
    return pod


def flow(desired: str, allocated: str | None, actual: str | None) -> core_pb2.Pod:
    """A KEP-1287 "Flow Control" pod: spec.containers[0].resources.requests[cpu] = desired, and the
    status the kubelet reported (none before it ran the pod)."""
    b = MakePod().name("flow").req(cpu=desired)
    if allocated is not None:
        b.allocated(cpu=allocated).actual(cpu=actual)
    return b.obj()


# ---------------------------------------------------------------- KEP-1287 "Resource Quota"


def test_kep1287_resource_quota_1_desired_counts_when_largest():
    # A resize up is pending (not yet allocated): the quota counts it at once.
    assert cpu(flow("1500m", allocated="1", actual="1")) == "1500m"


def test_kep1287_resource_quota_1_desired_ignored_while_infeasible():
    # Flow Control step 15: "this node does not have 100 CPUs" — Infeasible, so the desired 100 is
    # not counted; the pod counts what it holds.
    pod = resize_pending(flow("100", allocated="1600m", actual="1600m"), "Infeasible")
    assert cpu(pod) == "1600m"


def test_kep1287_resource_quota_1_desired_counts_while_deferred():
    # Flow Control step 9: Deferred is not Infeasible — the desired 2 still counts.
    assert cpu(resize_pending(flow("2", allocated="1500m", actual="1500m"), "Deferred")) == "2"


def test_kep1287_resource_quota_2_actual_counts_when_largest():
    # A resize down allocated but not yet actuated: the container still runs with 1 cpu.
    assert cpu(flow("500m", allocated="500m", actual="1")) == "1"


def test_kep1287_resource_quota_3_allocated_counts_when_largest():
    # Flow Control step 6: allocated 1.5, the runtime still at 1.
    assert cpu(flow("1500m", allocated="1500m", actual="1")) == "1500m"
    # A resize down not yet allocated, nor actuated.
    assert cpu(flow("500m", allocated="1", actual="500m")) == "1"


def test_kep1287_resource_quota_scale_down_frees_quota_once_actuated():
    """'To properly handle scale-down': 1 -> 500m counts 1 until desired, allocated and actual
    have all come down."""
    steps = [("500m", "1", "1"), ("500m", "500m", "1"), ("500m", "500m", "500m")]
    assert [cpu(flow(*s)) for s in steps] == ["1", "1", "500m"]


@pytest.mark.parametrize("step,desired,allocated,actual,counted", [
    (1, "1", None, None, "1"),
    (3, "1", "1", "1", "1"),
    (4, "1500m", "1", "1", "1500m"),
    (6, "1500m", "1500m", "1", "1500m"),
    (7, "2", "1500m", "1", "2"),
    (9, "2", "1500m", "1500m", "2"),
    (10, "1600m", "1500m", "1500m", "1600m"),
    (11, "1600m", "1600m", "1500m", "1600m"),
    (13, "1600m", "1600m", "1600m", "1600m"),
    (14, "100", "1600m", "1600m", "100"),
])
def test_kep1287_flow_control_steps_count_the_largest(step, desired, allocated, actual, counted):
    assert cpu(flow(desired, allocated, actual)) == counted, f"Flow Control step {step}"


def test_kep1287_limits_count_the_larger_of_desired_and_actual():
    pod = MakePod().name("l").req(cpu="1").lim(cpu="2", memory="1Gi").allocated(cpu="1").actual(cpu="1") \
        .actual_lim(cpu="3", memory="512Mi").obj()
    u = usage(pod)
    assert (u["limits.cpu"], u["limits.memory"]) == ("3", "1Gi")


def test_pod_without_status_resources_counts_its_spec():
    # Not yet running (or a kubelet without in-place resize): status resources are not looked at.
    pod = MakePod().name("p").req(cpu="250m", memory="64Mi").lim(cpu="500m").allocated(cpu="4").obj()
    pod.status.container_statuses[0].ClearField("resources")
    assert usage(pod) == {"count/pods": "1", "pods": "1", "cpu": "250m", "requests.cpu": "250m",
                          "limits.cpu": "500m", "memory": "64Mi", "requests.memory": "64Mi"}


# ---------------------------------------------------------------- what Kubernetes' PodUsageFunc counts


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_terminal_pod_counts_only_count_pods(phase):
    assert usage(MakePod().name("t").req(cpu="1").phase(phase).obj()) == {"count/pods": "1"}


def test_pod_past_its_deletion_grace_counts_only_count_pods():
    pod = MakePod().name("d").req(cpu="1").obj()
    pod.metadata.deletion_timestamp = timeutil.rfc3339(NOW - timedelta(seconds=40))
    pod.metadata.deletion_grace_period_seconds = 30
    assert usage(pod) == {"count/pods": "1"}
    pod.metadata.deletion_grace_period_seconds = 60  # still within its grace: it counts
    assert usage(pod)["requests.cpu"] == "1"


def test_sidecars_and_init_containers_count_as_kep753():
    # init 2 cpu alone; sidecar 500m then init beside it (2.5); steady state: c1 1 + sidecar 500m.
    pod = MakePod().name("s").init_container("init", cpu="2").sidecar("side", cpu="500m") \
        .init_container("late", cpu="2").container("c1", cpu="1").obj()
    assert cpu(pod) == "2500m"
    pod = MakePod().name("s").sidecar("side", cpu="500m").container("c1", cpu="1").obj()
    assert cpu(pod) == "1500m"


def test_resized_sidecar_counts_the_largest_too():
    pod = MakePod().name("s").sidecar("side", cpu="1").container("c1", cpu="1").obj()
    status = pod.status.init_container_statuses.add(name="side", allocated_resources={"cpu": "2"})
    status.resources.requests["cpu"] = "2"
    assert cpu(pod) == "3"


def test_overhead_and_pod_level_resources():
    pod = MakePod().name("o").req(cpu="1").lim(cpu="1").overhead(cpu="250m").obj()
    u = usage(pod)
    assert (u["requests.cpu"], u["limits.cpu"]) == ("1250m", "1250m")
    pod = MakePod().name("p").req(cpu="1").obj()
    pod.spec.resources.requests["cpu"] = "3"
    assert cpu(pod) == "3"


def test_quantities_sum_as_kubernetes_prints_them():
    pod = MakePod().name("q").container("a", memory="1G").container("b", memory="500M").obj()
    assert usage(pod)["requests.memory"] == "1500M"
    pod = MakePod().name("q").container("a", memory="1Gi").container("b", memory="512Mi").obj()
    assert usage(pod)["requests.memory"] == "1536Mi"


def test_extended_resources_and_hugepages():
    pod = MakePod().name("x").req({"example.com/gpu": "2", "hugepages-2Mi": "4Mi"}).obj()
    u = usage(pod)
    assert u["requests.example.com/gpu"] == "2" and "example.com/gpu" not in u
    assert u["hugepages-2Mi"] == u["requests.hugepages-2Mi"] == "4Mi"


def test_pod_evaluator_matching_resources():
    names = ["pods", "count/pods", "requests.cpu", "limits.memory", "cpu", "requests.example.com/gpu",
             "requests.hugepages-2Mi", "services", "count/replicasets.apps", "requests.storage"]
    assert quota.POD_EVALUATOR.matching_resources(names) == names[:7]


def test_object_count_names():
    assert quota.object_count_name(REPLICA_SET) == "count/replicasets.apps"
    assert quota.evaluator_for(DEPLOYMENT).matching_resources(["count/deployments.apps", "pods"]) == [
        "count/deployments.apps"]
    assert quota.evaluator_for(RESOURCE_QUOTA).matching_resources(["resourcequotas", "count/resourcequotas"]) == [
        "resourcequotas", "count/resourcequotas"]


def test_must_specify_what_the_quota_tracks():
    pod = MakePod().name("c").container("c1", cpu="1").container("c2").lim(memory="1Gi").obj()
    assert quota.POD_EVALUATOR.constraints(["requests.cpu", "limits.memory", "pods"], pod) == \
        "must specify limits.memory for: c1; requests.cpu for: c2"
    assert quota.POD_EVALUATOR.constraints(["pods", "count/pods"], pod) is None


@pytest.mark.parametrize("scope,builder,selected", [
    ("BestEffort", MakePod().name("be"), True),
    ("NotBestEffort", MakePod().name("be"), False),
    ("Terminating", MakePod().name("t").req(cpu="1").active_deadline(60), True),
    ("NotTerminating", MakePod().name("t").req(cpu="1").active_deadline(60), False),
    ("PriorityClass", MakePod().name("pc").priority_class("high"), True),
    ("PriorityClass", MakePod().name("pc"), False),
    ("CrossNamespacePodAffinity", MakePod().name("x"), False),
])
def test_scopes_select_pods(scope, builder, selected):
    q = make_resource_quota("q", {"pods": "10"}, scopes=(scope,))
    q.status.hard.update(q.spec.hard)
    assert quota.matches(quota.POD_EVALUATOR, q, builder.obj()) is selected


def test_quota_never_observed_matches_nothing():
    # status.hard is empty until the controller has written it: Kubernetes' Matches reads it.
    q = make_resource_quota("q", {"requests.cpu": "1"})
    assert not quota.matches(quota.POD_EVALUATOR, q, MakePod().name("p").req(cpu="2").obj())


def test_calculate_usage_counts_each_tracked_resource_from_zero():
    q = make_resource_quota("q", {"requests.cpu": "2", "requests.memory": "1Gi", "count/replicasets.apps": "3",
                                  "services": "1"})
    pods = [MakePod().name("a").req(cpu="500m").obj(), MakePod().name("b").req(cpu="1").phase("Succeeded").obj()]
    used = quota.calculate_usage(q, {"pods": pods}, NOW)
    assert quota.to_strings(used) == {"requests.cpu": "500m", "requests.memory": "0", "count/replicasets.apps": "0"}


def test_pod_update_filter():
    """The controller recomputes on a pod update only when its count can change: KEP-1287's status
    resources (a resize actuated), its Terminating scope, or its end."""
    base = MakePod().name("f").req(cpu="1").allocated(cpu="1").actual(cpu="1").obj()
    actuated = MakePod().name("f").req(cpu="1").allocated(cpu="1").actual(cpu="500m").obj()
    allocated = MakePod().name("f").req(cpu="1").allocated(cpu="2").actual(cpu="1").obj()
    done = MakePod().name("f").req(cpu="1").allocated(cpu="1").actual(cpu="1").phase("Succeeded").obj()
    relabelled = MakePod().name("f").label("a", "b").req(cpu="1").allocated(cpu="1").actual(cpu="1").obj()
    assert pod_update_matters(base, actuated) and pod_update_matters(base, allocated) and pod_update_matters(base, done)
    assert not pod_update_matters(base, relabelled)
