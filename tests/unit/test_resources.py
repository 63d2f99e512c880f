"""Tests for machinery.resources.

The tables port the cases of Kubernetes' component-helpers/resource/helpers_test.go
(TestPodRequestsAndLimits, TestPodRequestsAndLimitsWithoutOverhead, TestPodResourceRequests,
TestPodResourceLimits, TestPodLevelResourceRequests, TestAggregateContainerRequestsAndLimits,
TestIsPodLevelResourcesSet, TestIsSupportedPodLevelResource) and of
pkg/apis/core/v1/helper/qos/qos_test.go (TestComputePodQOS), minus the DRA and pod-level
in-place-resize cases whose status fields kplane's API does not have, plus the KEP-1287
worked examples. Expected values are written as quantity strings and converted with
``to_resource_list`` so they read like the Go tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from machinery.api import core_pb2
from machinery.resources import (
    NON_ZERO_DEFAULTS,
    add,
    compute_qos,
    container_limits,
    container_requests,
    fits,
    format_resource_list,
    is_pod_level_requests_set,
    is_pod_level_resources_set,
    is_pod_resize_infeasible,
    is_resize_in_progress,
    is_restartable_init_container,
    is_supported_pod_level_resource,
    max_of,
    pod_limits,
    pod_requests,
    qos_class,
    resize_status,
    sub,
    to_resource_list,
)

# ---------------------------------------------------------------- builders

Q = Mapping[str, str]


def ctr(name: str = "", requests: Q | None = None, limits: Q | None = None,
        sidecar: bool = False) -> core_pb2.Container:
    c = core_pb2.Container(name=name)
    if requests:
        c.resources.requests.update(requests)
    if limits:
        c.resources.limits.update(limits)
    if sidecar:
        c.restart_policy = "Always"
    return c


def status(name: str, requests: Q | None = None, limits: Q | None = None,
           allocated: Q | None = None, resources: bool = True) -> core_pb2.ContainerStatus:
    """A container status; ``resources=False`` leaves status.resources unset (nil in Go)."""
    cs = core_pb2.ContainerStatus(name=name)
    if resources:
        cs.resources.SetInParent()
        if requests:
            cs.resources.requests.update(requests)
        if limits:
            cs.resources.limits.update(limits)
    if allocated:
        cs.allocated_resources.update(allocated)
    return cs


def resize_pending(reason: str, status_: str = "True") -> core_pb2.PodCondition:
    return core_pb2.PodCondition(type="PodResizePending", status=status_, reason=reason)


INFEASIBLE = [resize_pending("Infeasible")]


def pod_with(containers: list[core_pb2.Container] | None = None,
             init: list[core_pb2.Container] | None = None,
             overhead: Q | None = None,
             pod_requests_: Q | None = None,
             pod_limits_: Q | None = None,
             pod_resources: bool = False,
             statuses: list[core_pb2.ContainerStatus] | None = None,
             init_statuses: list[core_pb2.ContainerStatus] | None = None,
             conditions: list[core_pb2.PodCondition] | None = None,
             qos: str = "") -> core_pb2.Pod:
    """A pod put together from ready-made parts (Container and ContainerStatus messages, conditions), as
    the tables of Kubernetes' resource helper tests give them."""
    pod = core_pb2.Pod()
    pod.metadata.name = "pod"
    pod.spec.containers.extend(containers or [])
    pod.spec.init_containers.extend(init or [])
    if overhead:
        pod.spec.overhead.update(overhead)
    if pod_resources or pod_requests_ or pod_limits_:
        pod.spec.resources.SetInParent()
        if pod_requests_:
            pod.spec.resources.requests.update(pod_requests_)
        if pod_limits_:
            pod.spec.resources.limits.update(pod_limits_)
    pod.status.container_statuses.extend(statuses or [])
    pod.status.init_container_statuses.extend(init_statuses or [])
    pod.status.conditions.extend(conditions or [])
    if qos:
        pod.status.qos_class = qos
    return pod


def rl(**kv: str) -> dict[str, int]:
    """Expected ResourceList from quantity strings; ``ephemeral_storage`` -> ephemeral-storage,
    ``hugepages_2Mi`` -> hugepages-2Mi."""
    return to_resource_list({k.replace("_", "-"): v for k, v in kv.items()})


def get_pod(cpu_request: str = "", cpu_limit: str = "", memory_request: str = "", memory_limit: str = "",
            cpu_overhead: str = "", memory_overhead: str = "") -> core_pb2.Pod:
    """helpers_test.go's getPod: one container and one identical init container."""
    requests = {k: v for k, v in (("cpu", cpu_request), ("memory", memory_request)) if v}
    limits = {k: v for k, v in (("cpu", cpu_limit), ("memory", memory_limit)) if v}
    overhead = {k: v for k, v in (("cpu", cpu_overhead), ("memory", memory_overhead)) if v}
    return pod_with(containers=[ctr("foo", requests, limits)], init=[ctr("init-foo", requests, limits)],
                    overhead=overhead)


# ---------------------------------------------------------------- TestPodRequestsAndLimits


@pytest.mark.parametrize("pod, want_requests, want_limits", [
    pytest.param(get_pod(cpu_limit="9"), {}, rl(cpu="9"), id="just-limit-no-overhead"),
    pytest.param(get_pod(cpu_overhead="5", memory_overhead="5"), rl(cpu="5", memory="5"), {},
                 id="just-overhead"),
    pytest.param(get_pod(cpu_request="1", memory_request="10", cpu_overhead="5", memory_overhead="5"),
                 rl(cpu="6", memory="15"), {}, id="req-and-overhead"),
    pytest.param(get_pod(cpu_request="1", cpu_limit="2", memory_request="10", memory_limit="12",
                         cpu_overhead="5", memory_overhead="5"),
                 rl(cpu="6", memory="15"), rl(cpu="7", memory="17"), id="all-req-lim-and-overhead"),
    pytest.param(get_pod(cpu_request="1", cpu_limit="2", memory_request="10", cpu_overhead="5",
                         memory_overhead="5"),
                 rl(cpu="6", memory="15"), rl(cpu="7"), id="req-some-lim-and-overhead"),
])
def test_pod_requests_and_limits(pod: core_pb2.Pod, want_requests: dict, want_limits: dict) -> None:
    assert pod_requests(pod, use_status_resources=False) == want_requests
    assert pod_limits(pod, use_status_resources=False) == want_limits


_TWO = [ctr("foobar", {"cpu": "1", "memory": "5"}, {"cpu": "2", "memory": "10"}),
        ctr("foobar2", {"cpu": "4", "memory": "12"}, {"cpu": "8", "memory": "24"})]


@pytest.mark.parametrize("pod, want_requests, want_limits", [
    pytest.param(pod_with(containers=_TWO), rl(cpu="5", memory="17"), rl(cpu="10", memory="34"),
                 id="two container no overhead - should just be sum of containers"),
    pytest.param(pod_with(containers=_TWO, overhead={"cpu": "3", "memory": "8"}),
                 rl(cpu="5", memory="17"), rl(cpu="10", memory="34"),
                 id="two container with overhead - shouldn't consider overhead"),
    pytest.param(pod_with(containers=_TWO, overhead={"cpu": "3", "memory": "8"},
                          init=[ctr("small-init", {"cpu": "1", "memory": "5"}, {"cpu": "1", "memory": "5"}),
                                ctr("big-init", {"cpu": "40", "memory": "120"}, {"cpu": "80", "memory": "240"})]),
                 rl(cpu="40", memory="120"), rl(cpu="80", memory="240"),
                 id="two container with overhead, massive init - should just be the largest init"),
])
def test_pod_requests_and_limits_without_overhead(pod: core_pb2.Pod, want_requests: dict,
                                                  want_limits: dict) -> None:
    assert pod_requests(pod, exclude_overhead=True) == want_requests
    assert pod_limits(pod, exclude_overhead=True) == want_limits


# ---------------------------------------------------------------- TestPodResourceRequests


@dataclass
class ReqCase:
    id: str
    want: dict[str, int]
    containers: list[core_pb2.Container] = field(default_factory=list)
    init: list[core_pb2.Container] = field(default_factory=list)
    statuses: list[core_pb2.ContainerStatus] = field(default_factory=list)
    init_statuses: list[core_pb2.ContainerStatus] = field(default_factory=list)
    conditions: list[core_pb2.PodCondition] = field(default_factory=list)
    overhead: dict[str, str] = field(default_factory=dict)
    use_status: bool = False
    exclude_overhead: bool = False

    def pod(self) -> core_pb2.Pod:
        return pod_with(containers=self.containers, init=self.init, overhead=self.overhead,
                        statuses=self.statuses, init_statuses=self.init_statuses,
                        conditions=self.conditions)


def _cpu(v: str) -> dict[str, str]:
    return {"cpu": v}


_REQUEST_CASES = [
    ReqCase("nil options, larger init container", rl(cpu="4"),
            init=[ctr(requests=_cpu("4"))], containers=[ctr(requests=_cpu("1"))]),
    ReqCase("nil options, larger containers", rl(cpu="5"),
            init=[ctr(requests=_cpu("2"))], containers=[ctr(requests=_cpu("2")), ctr(requests=_cpu("3"))]),
    ReqCase("pod overhead excluded", rl(cpu="5"), exclude_overhead=True, overhead=_cpu("1"),
            init=[ctr(requests=_cpu("2"))], containers=[ctr(requests=_cpu("2")), ctr(requests=_cpu("3"))]),
    ReqCase("pod overhead included", rl(cpu="6", memory="1Gi"), overhead={"cpu": "1", "memory": "1Gi"},
            init=[ctr(requests=_cpu("2"), limits=_cpu("2"))],
            containers=[ctr(requests=_cpu("2")), ctr(requests=_cpu("3"))]),
    ReqCase("resized, infeasible", rl(cpu="2"), use_status=True, conditions=INFEASIBLE,
            containers=[ctr("container-1", _cpu("4"))], statuses=[status("container-1", _cpu("2"))]),
    ReqCase("resized, infeasible & in-progress", rl(cpu="4"), use_status=True, conditions=INFEASIBLE,
            containers=[ctr("container-1", _cpu("6"))],
            statuses=[status("container-1", _cpu("2"), allocated=_cpu("4"))]),
    ReqCase("resized, no resize status", rl(cpu="4"), use_status=True,
            containers=[ctr("container-1", _cpu("4"))], statuses=[status("container-1", _cpu("2"))]),
    ReqCase("resized: per-resource 3-way maximum", rl(cpu="30m", memory="30M", ephemeral_storage="30G"),
            use_status=True,
            containers=[ctr("container-1", {"cpu": "30m", "memory": "20M", "ephemeral-storage": "10G"})],
            statuses=[status("container-1", {"cpu": "10m", "memory": "30M", "ephemeral-storage": "20G"},
                             allocated={"cpu": "20m", "memory": "10M", "ephemeral-storage": "30G"})]),
    ReqCase("resized, infeasible, but don't use status", rl(cpu="4"), use_status=False, conditions=INFEASIBLE,
            containers=[ctr("container-1", _cpu("4"))], statuses=[status("container-1", _cpu("2"))]),
    ReqCase("resized, restartable init container, infeasible", rl(cpu="2"), use_status=True,
            conditions=INFEASIBLE, init=[ctr("restartable-init-1", _cpu("4"), sidecar=True)],
            init_statuses=[status("restartable-init-1", _cpu("2"))]),
    ReqCase("resized, restartable init container, no resize status", rl(cpu="4"), use_status=True,
            init=[ctr("restartable-init-1", _cpu("4"), sidecar=True)],
            init_statuses=[status("restartable-init-1", _cpu("2"))]),
    ReqCase("resized, restartable init container, infeasible, but don't use status", rl(cpu="4"),
            use_status=False, conditions=INFEASIBLE, init=[ctr("restartable-init-1", _cpu("4"), sidecar=True)],
            init_statuses=[status("restartable-init-1", _cpu("2"))]),
    ReqCase("restartable init container", rl(cpu="2"),
            init=[ctr("restartable-init-1", _cpu("1"), sidecar=True)], containers=[ctr("container-1", _cpu("1"))]),
    ReqCase("multiple restartable init containers", rl(cpu="7"),  # max(5, 3+2+1 + 1)
            init=[ctr("init-1", _cpu("5")), ctr("restartable-init-1", _cpu("1"), sidecar=True),
                  ctr("restartable-init-2", _cpu("2"), sidecar=True),
                  ctr("restartable-init-3", _cpu("3"), sidecar=True)],
            containers=[ctr("container-1", _cpu("1"))]),
    ReqCase("multiple restartable and regular init containers", rl(cpu="8"),  # init-2: 5 + (1+2)
            init=[ctr("init-1", _cpu("5")), ctr("restartable-init-1", _cpu("1"), sidecar=True),
                  ctr("restartable-init-2", _cpu("2"), sidecar=True), ctr("init-2", _cpu("5")),
                  ctr("restartable-init-3", _cpu("3"), sidecar=True)],
            containers=[ctr("container-1", _cpu("1"))]),
    ReqCase("restartable-init, init and regular", rl(cpu="210"),
            init=[ctr("restartable-init-1", _cpu("10"), sidecar=True), ctr("init-1", _cpu("200"))],
            containers=[ctr("container-1", _cpu("100"))]),
    # Upstream's case: status.resources is nil, so determineContainerReqs is not consulted.
    ReqCase("allocated resources without status.resources are not consulted", rl(cpu="3"), use_status=True,
            containers=[ctr("c1", _cpu("1")), ctr("c2", _cpu("2"))],
            statuses=[status("c1", allocated=_cpu("2"), resources=False),
                      status("c2", allocated=_cpu("1"), resources=False)]),
    # With status.resources reported, the max is taken per container (determineContainerReqs).
    ReqCase("per-container maximum when status.resources is reported", rl(cpu="4"), use_status=True,
            containers=[ctr("c1", _cpu("1")), ctr("c2", _cpu("2"))],
            statuses=[status("c1", allocated=_cpu("2")), status("c2", allocated=_cpu("1"))]),
    # AggregateContainerRequests cases.
    ReqCase("regular containers with empty requests, but status with non-empty requests", rl(cpu="2"),
            use_status=True, containers=[ctr("container-1")], statuses=[status("container-1", _cpu("2"))]),
    ReqCase("always-restart init containers with empty requests, but status with non-empty requests",
            rl(cpu="2"), use_status=True, init=[ctr("container-1", sidecar=True)],
            init_statuses=[status("container-1", _cpu("2"))]),
    ReqCase("regular, init and sidecar containers with requests", rl(cpu="17"),
            containers=[ctr(requests=_cpu("9"))],
            init=[ctr(requests=_cpu("8"), sidecar=True), ctr(requests=_cpu("6"))]),
    ReqCase("non-restartable init containers ignore status", rl(cpu="5"), use_status=True,
            init=[ctr("init-1", _cpu("5"))], containers=[ctr("c", _cpu("1"))],
            init_statuses=[status("init-1", _cpu("9"), allocated=_cpu("9"))]),
    # KEP-1287 worked examples.
    ReqCase("KEP-1287: resize up pending, spec wins", rl(cpu="1500m"), use_status=True,
            containers=[ctr("c", _cpu("1.5"))], statuses=[status("c", _cpu("1"), allocated=_cpu("1"))]),
    ReqCase("KEP-1287: resized down, not yet actuated", rl(cpu="1500m"), use_status=True,
            containers=[ctr("c", _cpu("1"))], statuses=[status("c", _cpu("1.5"), allocated=_cpu("1.5"))]),
    ReqCase("KEP-1287: infeasible resize ignores the spec", rl(cpu="1600m"), use_status=True,
            conditions=INFEASIBLE, containers=[ctr("c", _cpu("100"))],
            statuses=[status("c", _cpu("1.6"), allocated=_cpu("1.6"))]),
    ReqCase("KEP-1287: Deferred resize keeps the spec", rl(cpu="100"), use_status=True,
            conditions=[resize_pending("Deferred")], containers=[ctr("c", _cpu("100"))],
            statuses=[status("c", _cpu("1.6"), allocated=_cpu("1.6"))]),
    ReqCase("KEP-1287: infeasible sidecar with an init container after it", rl(cpu="2500m"),
            use_status=True, conditions=INFEASIBLE,
            init=[ctr("side", _cpu("8"), sidecar=True), ctr("init", _cpu("2"))],
            containers=[ctr("c", _cpu("500m"))],
            init_statuses=[status("side", _cpu("500m"), allocated=_cpu("500m"))],
            statuses=[status("c", _cpu("500m"), allocated=_cpu("500m"))]),
]


@pytest.mark.parametrize("case", _REQUEST_CASES, ids=lambda c: c.id)
def test_pod_resource_requests(case: ReqCase) -> None:
    got = pod_requests(case.pod(), use_status_resources=case.use_status, exclude_overhead=case.exclude_overhead)
    assert got == case.want


# ---------------------------------------------------------------- TestPodResourceLimits


def _mem(v: str) -> dict[str, str]:
    return {"memory": v}


_LIMIT_CASES = [
    ReqCase("nil options, larger init container", rl(cpu="4"),
            init=[ctr(limits=_cpu("4"))], containers=[ctr(limits=_cpu("1"))]),
    ReqCase("nil options, larger containers", rl(cpu="5"),
            init=[ctr(limits=_cpu("2"))], containers=[ctr(limits=_cpu("2")), ctr(limits=_cpu("3"))]),
    ReqCase("pod overhead excluded", rl(cpu="5"), exclude_overhead=True, overhead=_cpu("1"),
            init=[ctr(limits=_cpu("2"))], containers=[ctr(limits=_cpu("2")), ctr(limits=_cpu("3"))]),
    # Overhead is only added to non-zero limits: no memory limit appears.
    ReqCase("pod overhead included", rl(cpu="6"), overhead={"cpu": "1", "memory": "1Gi"},
            init=[ctr(limits=_cpu("2"))], containers=[ctr(limits=_cpu("2")), ctr(limits=_cpu("3"))]),
    ReqCase("no limited containers should result in no limits for the pod", {}, containers=[ctr()]),
    ReqCase("one limited and one unlimited container", rl(cpu="2", memory="2Gi"),
            containers=[ctr(limits={"cpu": "2", "memory": "2Gi"}), ctr()]),
    ReqCase("one limited and one unlimited init container", rl(cpu="2", memory="2Gi"),
            init=[ctr(limits={"cpu": "2", "memory": "2Gi"}), ctr()],
            containers=[ctr(limits={"cpu": "1", "memory": "1Gi"})]),
    ReqCase("restartable init container", rl(cpu="2"),
            init=[ctr("restartable-init-1", limits=_cpu("1"), sidecar=True)],
            containers=[ctr("container-1", limits=_cpu("1"))]),
    ReqCase("multiple restartable init containers", rl(cpu="7"),
            init=[ctr("init-1", limits=_cpu("5")), ctr("restartable-init-1", limits=_cpu("1"), sidecar=True),
                  ctr("restartable-init-2", limits=_cpu("2"), sidecar=True),
                  ctr("restartable-init-3", limits=_cpu("3"), sidecar=True)],
            containers=[ctr("container-1", limits=_cpu("1"))]),
    ReqCase("multiple restartable and regular init containers", rl(cpu="8"),
            init=[ctr("init-1", limits=_cpu("5")), ctr("restartable-init-1", limits=_cpu("1"), sidecar=True),
                  ctr("restartable-init-2", limits=_cpu("2"), sidecar=True), ctr("init-2", limits=_cpu("5")),
                  ctr("restartable-init-3", limits=_cpu("3"), sidecar=True)],
            containers=[ctr("container-1", limits=_cpu("1"))]),
    ReqCase("restartable-init, init and regular", rl(cpu="210"),
            init=[ctr("restartable-init-1", limits=_cpu("10"), sidecar=True), ctr("init-1", limits=_cpu("200"))],
            containers=[ctr("container-1", limits=_cpu("100"))]),
    ReqCase("pod scaled up", rl(memory="2Gi"), use_status=True,
            containers=[ctr("container-1", limits=_mem("2Gi"))],
            statuses=[status("container-1", limits=_mem("1Gi"))]),
    ReqCase("pod scaled down", rl(memory="2Gi"), use_status=True,
            containers=[ctr("container-1", limits=_mem("1Gi"))],
            statuses=[status("container-1", limits=_mem("2Gi"))]),
    ReqCase("pod scaled down, don't use status", rl(memory="1Gi"), use_status=False,
            containers=[ctr("container-1", limits=_mem("1Gi"))],
            statuses=[status("container-1", limits=_mem("2Gi"))]),
    ReqCase("pod scaled up with restartable init containers", rl(memory="2Gi"), use_status=True,
            init=[ctr("restartable-init-1", limits=_mem("2Gi"), sidecar=True)],
            init_statuses=[status("restartable-init-1", limits=_mem("1Gi"))]),
    ReqCase("pod scaled down with restartable init containers", rl(memory="2Gi"), use_status=True,
            init=[ctr("restartable-init-1", limits=_mem("1Gi"), sidecar=True)],
            init_statuses=[status("restartable-init-1", limits=_mem("2Gi"))]),
    ReqCase("pod scaled down with restartable init containers, don't use status", rl(memory="1Gi"),
            use_status=False, init=[ctr("restartable-init-1", limits=_mem("1Gi"), sidecar=True)],
            init_statuses=[status("restartable-init-1", limits=_mem("2Gi"))]),
    ReqCase("infeasible resize uses the actual limits", rl(memory="1Gi"), use_status=True,
            conditions=INFEASIBLE, containers=[ctr("container-1", limits=_mem("8Gi"))],
            statuses=[status("container-1", limits=_mem("1Gi"))]),
    ReqCase("regular, init and sidecar containers with limits", rl(cpu="17"),
            containers=[ctr(limits=_cpu("9"))], init=[ctr(limits=_cpu("8"), sidecar=True), ctr(limits=_cpu("6"))]),
]


@pytest.mark.parametrize("case", _LIMIT_CASES, ids=lambda c: c.id)
def test_pod_resource_limits(case: ReqCase) -> None:
    got = pod_limits(case.pod(), use_status_resources=case.use_status, exclude_overhead=case.exclude_overhead)
    assert got == case.want


# ---------------------------------------------------------------- pod-level resources


@pytest.mark.parametrize("pod, skip, want", [
    pytest.param(pod_with(), False, {}, id="nil"),
    pytest.param(pod_with(pod_requests_=_mem("2Mi")), True, {},
                 id="pod level memory resource with SkipPodLevelResources true"),
    pytest.param(pod_with(pod_requests_=_mem("2Mi")), False, rl(memory="2Mi"),
                 id="pod level memory resource with SkipPodLevelResources false"),
    pytest.param(pod_with(pod_requests_=_mem("2Mi"), containers=[ctr(requests=_cpu("2m"))]), False,
                 rl(memory="2Mi", cpu="2m"), id="pod level memory and container level cpu"),
    pytest.param(pod_with(pod_requests_={"storage": "2Mi"}, containers=[ctr(requests={"storage": "3Mi"})]), False,
                 rl(storage="3Mi"), id="unsupported resources set at both pod-level and container-level"),
    pytest.param(pod_with(pod_requests_={"storage": "2Mi"}, containers=[ctr(requests=_mem("3Mi"))]), False,
                 rl(memory="3Mi"), id="unsupported resources set at pod-level"),
    pytest.param(pod_with(containers=[ctr(requests={"memory": "3Mi", "cpu": "2m"})]), False,
                 rl(memory="3Mi", cpu="2m"), id="only container level resources set"),
    pytest.param(pod_with(pod_requests_={"memory": "6Mi", "cpu": "8m"},
                          containers=[ctr(requests={"memory": "3Mi", "cpu": "2m"})]), False,
                 rl(memory="6Mi", cpu="8m"), id="both container-level and pod-level resources set"),
    pytest.param(pod_with(containers=[ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                          init=[ctr(requests={"memory": "5Mi", "cpu": "4m"})]), True,
                 rl(memory="5Mi", cpu="4m"), id="container-level resources and init container"),
    pytest.param(pod_with(containers=[ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                          init=[ctr(requests={"memory": "5Mi", "cpu": "4m"}, sidecar=True)]), False,
                 rl(memory="8Mi", cpu="6m"), id="container-level resources and sidecar container"),
    pytest.param(pod_with(containers=[ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                          init=[ctr(requests={"memory": "5Mi", "cpu": "4m"}, sidecar=True),
                                ctr(requests={"memory": "6Mi", "cpu": "8m"})]), False,
                 rl(memory="11Mi", cpu="12m"), id="container-level resources, init and sidecar container"),
    pytest.param(pod_with(pod_requests_={"memory": "15Mi", "cpu": "18m"},
                          containers=[ctr(requests={"memory": "3Mi", "cpu": "2m"})],
                          init=[ctr(requests={"memory": "5Mi", "cpu": "4m"}, sidecar=True),
                                ctr(requests={"memory": "6Mi", "cpu": "8m"})]), False,
                 rl(memory="15Mi", cpu="18m"), id="pod-level resources, container-level, init and sidecar"),
    pytest.param(pod_with(pod_limits_={"hugepages-2Mi": "2Mi"},
                          pod_requests_={"memory": "10Mi", "hugepages-2Mi": "2Mi"}), False,
                 rl(memory="10Mi", hugepages_2Mi="2Mi"), id="pod-level hugepage single page size"),
    pytest.param(pod_with(pod_limits_={"hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"},
                          pod_requests_={"cpu": "1", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"}), False,
                 to_resource_list({"cpu": "1", "hugepages-2Mi": "2Mi", "hugepages-1Gi": "1Gi"}),
                 id="pod-level hugepage multiple page sizes"),
    pytest.param(pod_with(pod_limits_={"hugepages-2Mi": "10Mi"}, pod_requests_={"cpu": "1", "hugepages-2Mi": "10Mi"},
                          containers=[ctr(requests={"hugepages-2Mi": "6Mi"}, limits={"hugepages-2Mi": "6Mi"})]),
                 False, to_resource_list({"cpu": "1", "hugepages-2Mi": "10Mi"}),
                 id="pod-level and container-level hugepage single page size"),
    pytest.param(pod_with(pod_limits_={"hugepages-2Mi": "10Mi"}, pod_requests_={"cpu": "1", "hugepages-2Mi": "10Mi"},
                          containers=[ctr(requests={"memory": "4Mi", "hugepages-1Gi": "1Gi"},
                                          limits={"hugepages-1Gi": "1Gi"})]),
                 False, to_resource_list({"cpu": "1", "memory": "4Mi", "hugepages-2Mi": "10Mi",
                                          "hugepages-1Gi": "1Gi"}),
                 id="hugepage page sizes split between pod-level and container-level"),
    pytest.param(pod_with(pod_requests_={"cpu": "1"}, overhead={"cpu": "100m", "memory": "10Mi"},
                          containers=[ctr(requests={"cpu": "500m", "memory": "1Gi"})]), False,
                 rl(cpu="1100m", memory="1034Mi"), id="overhead is added on top of pod-level requests"),
])
def test_pod_level_resource_requests(pod: core_pb2.Pod, skip: bool, want: dict) -> None:
    assert pod_requests(pod, skip_pod_level=skip) == want


@pytest.mark.parametrize("pod, skip, want", [
    pytest.param(pod_with(pod_limits_={"cpu": "2"}, containers=[ctr(limits={"cpu": "1", "memory": "1Gi"})]),
                 False, rl(cpu="2", memory="1Gi"), id="pod-level cpu limit overrides the aggregate"),
    pytest.param(pod_with(pod_limits_={"cpu": "2"}, containers=[ctr(limits={"cpu": "1", "memory": "1Gi"})]),
                 True, rl(cpu="1", memory="1Gi"), id="skip pod-level limits"),
    pytest.param(pod_with(pod_requests_={"cpu": "2"}, containers=[ctr(limits={"cpu": "1"})]),
                 False, rl(cpu="1"), id="pod-level requests only leave container limits"),
    pytest.param(pod_with(pod_limits_={"cpu": "2", "memory": "1Gi"}, overhead={"cpu": "250m", "memory": "64Mi"}),
                 False, rl(cpu="2250m", memory="1088Mi"), id="overhead added to pod-level limits"),
])
def test_pod_level_resource_limits(pod: core_pb2.Pod, skip: bool, want: dict) -> None:
    assert pod_limits(pod, skip_pod_level=skip) == want


@pytest.mark.parametrize("requests, limits, resources_set, requests_set", [
    pytest.param(None, None, False, False, id="nil resources struct"),
    pytest.param({}, {}, False, False, id="empty resources struct"),
    pytest.param({"ephemeral-storage": "1Mi"}, None, False, False, id="only unsupported resource requests set"),
    pytest.param(None, {"ephemeral-storage": "1Mi"}, False, False, id="only unsupported resource limits set"),
    pytest.param({"ephemeral-storage": "1Mi", "cpu": "1m"}, None, True, True,
                 id="unsupported and supported resources requests set"),
    pytest.param(None, {"ephemeral-storage": "1Mi", "cpu": "1m"}, True, False,
                 id="unsupported and supported resources limits set"),
    pytest.param({"memory": "100Mi"}, None, True, True, id="only resource requests set"),
])
def test_is_pod_level_resources_set(requests: dict | None, limits: dict | None, resources_set: bool,
                                    requests_set: bool) -> None:
    pod = pod_with(pod_requests_=requests, pod_limits_=limits, pod_resources=requests is not None)
    assert is_pod_level_resources_set(pod) is resources_set
    assert is_pod_level_requests_set(pod) is requests_set


@pytest.mark.parametrize("name, want", [
    ("cpu", True), ("memory", True), ("ephemeral-storage", False), ("hugepages-2Mi", True),
    ("hugepages-1Gi", True), ("nvidia.com/gpu", False),
])
def test_is_supported_pod_level_resource(name: str, want: bool) -> None:
    assert is_supported_pod_level_resource(name) is want


# ---------------------------------------------------------------- non-missing (scheduler scoring)


@pytest.mark.parametrize("pod, want, plain", [
    pytest.param(pod_with(containers=[ctr("a"), ctr("b")]), rl(cpu="200m", memory="400Mi"), {},
                 id="best-effort containers get the defaults each"),
    pytest.param(pod_with(containers=[ctr("a", {"cpu": "0"}), ctr("b", {"memory": "1Gi"})]),
                 rl(cpu="100m", memory="1224Mi"), rl(cpu="0", memory="1Gi"), id="an explicit zero is kept"),
    pytest.param(pod_with(containers=[ctr("a", {"cpu": "1"})], init=[ctr("i", {"cpu": "2"})]),
                 rl(cpu="2", memory="200Mi"), rl(cpu="2"), id="init containers get the defaults too"),
    pytest.param(pod_with(containers=[ctr("a")], init=[ctr("s", sidecar=True)]),
                 rl(cpu="200m", memory="400Mi"), {}, id="sidecar defaults add to the steady state"),
    pytest.param(pod_with(containers=[ctr("a", {"nvidia.com/gpu": "1"})]),
                 {"nvidia.com/gpu": 1, **rl(cpu="100m", memory="200Mi")}, {"nvidia.com/gpu": 1},
                 id="extended resources untouched"),
])
def test_pod_requests_non_missing(pod: core_pb2.Pod, want: dict, plain: dict) -> None:
    assert pod_requests(pod, non_missing=NON_ZERO_DEFAULTS) == want
    assert pod_requests(pod) == plain  # the defaults never leak into the plain requests


def test_non_missing_applies_after_status_resources() -> None:
    pod = pod_with(containers=[ctr("c")], statuses=[status("c", {"cpu": "300m"})])
    assert pod_requests(pod, non_missing=NON_ZERO_DEFAULTS) == rl(cpu="300m", memory="200Mi")


# ---------------------------------------------------------------- QoS (qos_test.go)


def rr(cpu: str = "", memory: str = "") -> dict[str, str]:
    """qos_test.go's getResourceList."""
    out = {}
    if cpu:
        out["cpu"] = cpu
    if memory:
        out["memory"] = memory
    return out


def qctr(name: str, requests: dict[str, str], limits: dict[str, str]) -> core_pb2.Container:
    return ctr(name, requests, limits)


@pytest.mark.parametrize("pod, want", [
    pytest.param(pod_with([qctr("guaranteed", rr("100m", "100Mi"), rr("100m", "100Mi"))]),
                 "Guaranteed", id="guaranteed"),
    pytest.param(pod_with([qctr("guaranteed", rr("100m", "100Mi"), rr("100m", "100Mi")),
                           qctr("guaranteed", rr("100m", "100Mi"), rr("100m", "100Mi"))]),
                 "Guaranteed", id="guaranteed-guaranteed"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr()), qctr("best-effort", rr(), rr())]),
                 "BestEffort", id="best-effort-best-effort"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr())]), "BestEffort", id="best-effort"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr()), qctr("burstable", rr("1"), rr("2"))]),
                 "Burstable", id="best-effort-burstable"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr()),
                           qctr("guaranteed", rr("10m", "100Mi"), rr("10m", "100Mi"))]),
                 "Burstable", id="best-effort-guaranteed"),
    pytest.param(pod_with([qctr("burstable", rr("", "100Mi"), rr("", "100Mi"))]),
                 "Burstable", id="burstable-cpu-guaranteed-memory"),
    pytest.param(pod_with([qctr("burstable", rr("100m", "100Mi"), rr())]), "Burstable", id="burstable-no-limits"),
    pytest.param(pod_with([qctr("burstable", rr("1", "100Mi"), rr("2", "100Mi")),
                           qctr("guaranteed", rr("100m", "100Mi"), rr("100m", "100Mi"))]),
                 "Burstable", id="burstable-guaranteed"),
    pytest.param(pod_with([qctr("burstable", rr("100m", "100Mi"), rr("200m", "200Mi")),
                           qctr("burstable-unbounded", rr("100m", "100Mi"), rr())]),
                 "Burstable", id="burstable-unbounded-but-requests-match-limits"),
    pytest.param(pod_with([qctr("burstable", rr("10m", "100Mi"), rr("100m", "200Mi"))]),
                 "Burstable", id="burstable-1"),
    pytest.param(pod_with([qctr("burstable", rr("0", "0"), rr("100m", "200Mi"))]), "Burstable", id="burstable-2"),
    pytest.param(pod_with([qctr("best-effort", {**rr("0", "0"), "hugepages-2Mi": "1Gi"},
                                {**rr("0", "0"), "hugepages-2Mi": "1Gi"})]),
                 "BestEffort", id="best-effort-hugepages"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr())],
                          init=[qctr("burstable", rr("10m", "100Mi"), rr("100m", "200Mi"))]),
                 "Burstable", id="init-container"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr())],
                          pod_requests_=rr("10m", "100Mi"), pod_limits_=rr("10m", "100Mi")),
                 "Guaranteed", id="guaranteed-with-pod-level-resources"),
    pytest.param(pod_with([qctr("burstable", rr("3m", "10Mi"), rr("5m", "20Mi"))],
                          pod_requests_=rr("10m", "100Mi"), pod_limits_=rr("10m", "100Mi")),
                 "Guaranteed", id="guaranteed-with-pod-and-container-level-resources"),
    pytest.param(pod_with([qctr("best-effort", rr(), rr())],
                          pod_requests_=rr("10m", "10Mi"), pod_limits_=rr("20m", "50Mi")),
                 "Burstable", id="burstable-with-pod-level-resources"),
    pytest.param(pod_with([qctr("burstable", rr("5m", "10Mi"), rr("5m", "10Mi"))],
                          pod_requests_=rr("10m", "10Mi"), pod_limits_=rr("20m", "50Mi")),
                 "Burstable", id="burstable-with-pod-and-container-level-resources"),
    pytest.param(pod_with([qctr("burstable", rr("5m", "10Mi"), rr())], pod_requests_=rr("10m", "10Mi")),
                 "Burstable", id="burstable-with-pod-and-container-level-requests"),
    pytest.param(pod_with([qctr("burstable", rr("5m", "10Mi"), rr()),
                           qctr("guaranteed", rr("5m", "10Mi"), rr("5m", "10Mi"))],
                          pod_requests_=rr("10m", "10Mi"), pod_limits_=rr("5m")),
                 "Burstable", id="burstable-with-pod-and-container-level-resources-2"),
    # Beyond qos_test.go: defaulting, sidecars, exact comparison, extended resources.
    pytest.param(pod_with([qctr("limits-only", rr(), rr("1", "1Gi"))]),
                 "Guaranteed", id="requests defaulted from limits"),
    pytest.param(pod_with([qctr("partial", rr("500m"), rr("1", "1Gi"))]),
                 "Burstable", id="memory request defaulted, cpu request lower"),
    pytest.param(pod_with([qctr("c", rr("1", "1Gi"), rr("1", "1Gi"))],
                          init=[ctr("side", rr("100m", "64Mi"), rr("100m", "64Mi"), sidecar=True)]),
                 "Guaranteed", id="guaranteed with guaranteed sidecar"),
    pytest.param(pod_with([qctr("c", rr("1", "1Gi"), rr("1", "1Gi"))],
                          init=[ctr("side", rr("100m"), rr(), sidecar=True)]),
                 "Burstable", id="guaranteed with burstable sidecar"),
    pytest.param(pod_with([qctr("c", rr("1000m", "1024Mi"), rr("1", "1Gi"))]),
                 "Guaranteed", id="equal quantities in different notations"),
    pytest.param(pod_with([qctr("c", rr("0.5m", "1Gi"), rr("1m", "1Gi"))]),
                 "Burstable", id="sub-millicore difference is exact"),
    pytest.param(pod_with([qctr("gpu", {"nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "1"})]),
                 "BestEffort", id="extended resources do not count"),
    pytest.param(pod_with([qctr("c", rr("1", "1Gi"), rr("1", "1Gi"))], pod_limits_=rr("2", "2Gi")),
                 "Guaranteed", id="pod-level requests defaulted from pod-level limits"),
])
def test_compute_qos(pod: core_pb2.Pod, want: str) -> None:
    assert compute_qos(pod) == want
    assert qos_class(pod) == want


def test_compute_qos_pod_level_gate_off() -> None:
    pod = pod_with([qctr("best-effort", rr(), rr())], pod_requests_=rr("10m", "100Mi"),
                   pod_limits_=rr("10m", "100Mi"))
    assert compute_qos(pod, pod_level_resources=False) == "BestEffort"
    assert compute_qos(pod) == "Guaranteed"


def test_qos_class_prefers_status() -> None:
    pod = pod_with([qctr("c", rr("1", "1Gi"), rr("1", "1Gi"))], qos="Burstable")
    assert qos_class(pod) == "Burstable"
    assert compute_qos(pod) == "Guaranteed"


# ---------------------------------------------------------------- resize status


@pytest.mark.parametrize("conditions, want_status, want_infeasible", [
    pytest.param([], None, False, id="none"),
    pytest.param([resize_pending("Infeasible")], "Infeasible", True, id="infeasible"),
    pytest.param([resize_pending("Deferred")], "Deferred", False, id="deferred"),
    pytest.param([resize_pending("Infeasible", "False")], None, True, id="status False (Go ignores status)"),
    pytest.param([core_pb2.PodCondition(type="Ready", status="True", reason="Infeasible")], None, False,
                 id="other condition"),
])
def test_resize_status(conditions: list, want_status: str | None, want_infeasible: bool) -> None:
    pod = pod_with(conditions=conditions)
    assert resize_status(pod) == want_status
    assert is_pod_resize_infeasible(pod) is want_infeasible


def test_is_resize_in_progress() -> None:
    assert not is_resize_in_progress(pod_with())
    cond = core_pb2.PodCondition(type="PodResizeInProgress", status="True")
    assert is_resize_in_progress(pod_with(conditions=[cond]))
    cond_false = core_pb2.PodCondition(type="PodResizeInProgress", status="False")
    assert not is_resize_in_progress(pod_with(conditions=[cond_false]))


# ---------------------------------------------------------------- helpers


def test_container_helpers() -> None:
    c = ctr("c", {"cpu": "1.5", "memory": "1Gi", "example.com/foo": "2"}, {"cpu": "2"})
    assert container_requests(c) == {"cpu": 1500, "memory": 1 << 30, "example.com/foo": 2}
    assert container_limits(c) == {"cpu": 2000}
    assert container_requests(ctr("empty")) == {}
    assert not is_restartable_init_container(c)
    assert is_restartable_init_container(ctr("s", sidecar=True))
    never = ctr("n")
    never.restart_policy = "Never"
    assert not is_restartable_init_container(never)


@pytest.mark.parametrize("quantities, want", [
    ({"cpu": "1.5"}, {"cpu": 1500}),
    ({"cpu": "0.1m"}, {"cpu": 1}),  # rounded up like MilliValue
    ({"cpu": "2"}, {"cpu": 2000}),
    ({"memory": "1.5Gi"}, {"memory": 1610612736}),
    ({"memory": "0.5"}, {"memory": 1}),  # rounded up like Value
    ({"ephemeral-storage": "1G"}, {"ephemeral-storage": 10**9}),
    ({"hugepages-2Mi": "4Mi"}, {"hugepages-2Mi": 4 << 20}),
    ({"nvidia.com/gpu": "2"}, {"nvidia.com/gpu": 2}),
    ({"example.com/foo": "500m"}, {"example.com/foo": 1}),
])
def test_to_resource_list(quantities: dict, want: dict) -> None:
    assert to_resource_list(quantities) == want


def test_to_resource_list_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        to_resource_list({"cpu": "lots"})


@pytest.mark.parametrize("amounts, want", [
    ({"cpu": 1500}, {"cpu": "1500m"}),
    ({"cpu": 2000}, {"cpu": "2"}),
    ({"cpu": 100}, {"cpu": "100m"}),
    ({"memory": 1 << 30}, {"memory": "1Gi"}),
    ({"memory": 1610612736}, {"memory": "1536Mi"}),
    ({"memory": 1000}, {"memory": "1k"}),
    ({"ephemeral-storage": 10**9}, {"ephemeral-storage": "1000000000"}),  # BinarySI, as Go
    ({"hugepages-2Mi": 4 << 20}, {"hugepages-2Mi": "4Mi"}),
    ({"nvidia.com/gpu": 2}, {"nvidia.com/gpu": "2"}),
    ({"cpu": 0, "memory": 0}, {"cpu": "0", "memory": "0"}),
])
def test_format_resource_list(amounts: dict, want: dict) -> None:
    assert format_resource_list(amounts) == want
    assert to_resource_list(format_resource_list(amounts)) == amounts


def test_list_arithmetic() -> None:
    a = {"cpu": 1000, "memory": 10}
    b = {"cpu": 500, "pods": 1}
    assert add(a, b) == {"cpu": 1500, "memory": 10, "pods": 1}
    assert sub(a, b) == {"cpu": 500, "memory": 10, "pods": -1}
    assert max_of(a, {"cpu": 2000, "memory": 5}) == {"cpu": 2000, "memory": 10}
    assert a == {"cpu": 1000, "memory": 10}  # inputs untouched
    assert b == {"cpu": 500, "pods": 1}


@pytest.mark.parametrize("request_, free, want", [
    ({"cpu": 500, "memory": 100}, {"cpu": 1000, "memory": 100}, []),
    ({"cpu": 1500, "memory": 100}, {"cpu": 1000, "memory": 50}, ["cpu", "memory"]),
    ({"nvidia.com/gpu": 1}, {"cpu": 1000}, ["nvidia.com/gpu"]),
    ({"nvidia.com/gpu": 0}, {}, []),
    ({}, {}, []),
])
def test_fits(request_: dict, free: dict, want: list) -> None:
    assert fits(request_, free) == want


def test_results_are_fresh_dicts() -> None:
    pod = pod_with(containers=[ctr("c", {"cpu": "1"}, {"cpu": "1"})])
    first = pod_requests(pod)
    first["cpu"] = 0
    assert pod_requests(pod) == {"cpu": 1000}
    limits = pod_limits(pod)
    limits["cpu"] = 0
    assert pod_limits(pod) == {"cpu": 1000}


def test_reading_does_not_mutate_the_pod() -> None:
    pod = pod_with(containers=[ctr("c")])
    before = pod.SerializeToString(deterministic=True)
    pod_requests(pod, non_missing=NON_ZERO_DEFAULTS)
    pod_limits(pod)
    compute_qos(pod)
    qos_class(pod)
    resize_status(pod)
    assert pod.SerializeToString(deterministic=True) == before
    assert not pod.spec.containers[0].HasField("resources")
    assert not pod.spec.HasField("resources")
