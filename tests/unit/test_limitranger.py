"""LimitRanger admission (apiserver.admission.limitranger) as Kubernetes' plugin does it: defaults
and the annotation saying what they set, min/max/maxLimitRequestRatio per Container and per Pod
with Kubernetes' messages, several violations in one aggregated message — and KEP-1287's
LimitRanger cases ("Limit Ranger tests") against the values of Kubernetes' e2e: a LimitRange with
Container max cpu 500m / memory 500Mi, min 50m / 50Mi, default 100m / 100Mi, defaultRequest
50m / 50Mi, and a pod at 300m / 300Mi resized."""

from __future__ import annotations

import pytest

from apiserver.admission import limitranger
from machinery import errors
from machinery.api import core_pb2
from tests.harness.builders import MakePod, limit_range_item, make_limit_range

E2E_RANGE = make_limit_range("resize-limit-ranger", limit_range_item(
    "Container", max={"cpu": "500m", "memory": "500Mi"}, min={"cpu": "50m", "memory": "50Mi"},
    default={"cpu": "100m", "memory": "100Mi"}, default_request={"cpu": "50m", "memory": "50Mi"}))


def refusal(pod: core_pb2.Pod, *ranges: core_pb2.LimitRange) -> str:
    with pytest.raises(errors.Forbidden) as exc:
        limitranger.validate_pod(pod, ranges)
    return exc.value.message


def guaranteed(cpu: str, memory: str) -> core_pb2.Pod:
    return MakePod().name("testpod1").req(cpu=cpu, memory=memory).lim(cpu=cpu, memory=memory).obj()


# ---------------------------------------------------------------- defaults


def test_defaults_and_annotation():
    pod = MakePod().name("p").container("c1").lim(cpu="1").init_container("init").obj()
    lr = make_limit_range("lr", limit_range_item(default={"cpu": "500m", "memory": "1Gi"},
                                                 default_request={"cpu": "250m", "memory": "512Mi"}))
    note = limitranger.default_pod(pod, [lr])
    assert note == ("LimitRanger plugin set: cpu, memory request for container c1; memory limit for container c1; "
                    "cpu, memory request for init container init; cpu, memory limit for init container init")
    assert pod.metadata.annotations["kubernetes.io/limit-ranger"] == note
    c1 = pod.spec.containers[0].resources
    # c1's own limit stays; what it did not name is filled in.
    assert dict(c1.limits) == {"cpu": "1", "memory": "1Gi"} and dict(c1.requests) == {"cpu": "250m", "memory": "512Mi"}


def test_nothing_to_default_leaves_the_pod_alone():
    pod = guaranteed("300m", "300Mi")
    assert limitranger.default_pod(pod, [E2E_RANGE]) is None
    assert "kubernetes.io/limit-ranger" not in pod.metadata.annotations


def test_a_resize_is_defaulted_without_annotation():
    pod = MakePod().name("p").req(cpu="100m").obj()
    assert limitranger.default_pod(pod, [E2E_RANGE], annotate=False) is not None
    assert not pod.metadata.annotations and pod.spec.containers[0].resources.limits["cpu"] == "100m"


def test_defaults_of_several_ranges_the_last_annotation_wins():
    a = make_limit_range("a", limit_range_item(default_request={"cpu": "100m"}))
    b = make_limit_range("b", limit_range_item(default_request={"memory": "64Mi"}))
    pod = MakePod().name("p").obj()
    limitranger.default_pod(pod, [a, b])
    assert pod.metadata.annotations["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: memory request for container c1"
    assert dict(pod.spec.containers[0].resources.requests) == {"cpu": "100m", "memory": "64Mi"}


# ---------------------------------------------------------------- constraints


def test_brief_example_min_and_max_in_one_message():
    lr = make_limit_range("lr", limit_range_item(min={"cpu": "100m"}, max={"cpu": "2"}))
    pod = MakePod().name("x").req(cpu="50m").lim(cpu="4").obj()
    assert refusal(pod, lr) == ('pods "x" is forbidden: [minimum cpu usage per Container is 100m, but request is 50m, '
                                'maximum cpu usage per Container is 2, but limit is 4]')


@pytest.mark.parametrize("item,requests,limits,message", [
    (limit_range_item(min={"memory": "64Mi"}), {}, {}, "minimum memory usage per Container is 64Mi.  No request is "
                                                        "specified"),
    (limit_range_item(min={"cpu": "100m"}), {"cpu": "200m"}, {"cpu": "50m"},
     "minimum cpu usage per Container is 100m, but limit is 50m"),
    (limit_range_item(max={"cpu": "1"}), {"cpu": "500m"}, {}, "maximum cpu usage per Container is 1.  No limit is "
                                                              "specified"),
    (limit_range_item(max={"memory": "1Gi"}), {"memory": "2Gi"}, {"memory": "1Gi"},
     "maximum memory usage per Container is 1Gi, but request is 2Gi"),
    (limit_range_item(max_limit_request_ratio={"cpu": "2"}), {"cpu": "250m"}, {"cpu": "1"},
     "cpu max limit to request ratio per Container is 2, but provided ratio is 4.000000"),
    (limit_range_item(max_limit_request_ratio={"cpu": "2"}), {}, {"cpu": "1"},
     "cpu max limit to request ratio per Container is 2, but no request is specified or request is 0"),
    (limit_range_item(max_limit_request_ratio={"memory": "1500m"}), {"memory": "1Gi"}, {},
     "memory max limit to request ratio per Container is 1500m, but no limit is specified or limit is 0"),
])
def test_container_constraints_messages(item, requests, limits, message):
    pod = MakePod().name("x").req(requests).lim(limits).obj()
    assert refusal(pod, make_limit_range("lr", item)) == f'pods "x" is forbidden: {message}'


def test_within_bounds_is_admitted():
    item = limit_range_item(min={"cpu": "100m"}, max={"cpu": "2"}, max_limit_request_ratio={"cpu": "4"})
    limitranger.validate_pod(MakePod().name("x").req(cpu="500m").lim(cpu="2").obj(), [make_limit_range("lr", item)])


def test_pod_type_sums_the_containers():
    lr = make_limit_range("lr", limit_range_item("Pod", max={"cpu": "2"}, min={"memory": "100Mi"}))
    pod = MakePod().name("x").container("a", cpu="1", memory="64Mi").lim(cpu="1500m") \
        .container("b", cpu="1", memory="64Mi").lim(cpu="1").obj()
    assert refusal(pod, lr) == 'pods "x" is forbidden: maximum cpu usage per Pod is 2, but limit is 2500m'


def test_init_containers_are_checked_per_container():
    lr = make_limit_range("lr", limit_range_item(max={"cpu": "1"}))
    pod = MakePod().name("x").init_container("init", cpu="2").lim(cpu="2").container("c1", cpu="1").lim(cpu="1").obj()
    assert refusal(pod, lr) == 'pods "x" is forbidden: maximum cpu usage per Container is 1, but limit is 2'


def test_the_first_range_broken_refuses():
    a = make_limit_range("a", limit_range_item(max={"cpu": "1"}))
    b = make_limit_range("b", limit_range_item(max={"memory": "1Mi"}))
    pod = MakePod().name("x").req(cpu="2", memory="1Gi").lim(cpu="2", memory="1Gi").obj()
    assert refusal(pod, a, b) == 'pods "x" is forbidden: maximum cpu usage per Container is 1, but limit is 2'


def test_aggregate_drops_repeats():
    assert limitranger.aggregate(["a", "a"]) == "a"
    assert limitranger.aggregate(["a", "b", "a"]) == "[a, b]"


# ---------------------------------------------------------------- KEP-1287 "Limit Ranger tests"


@pytest.mark.parametrize("case,cpu,memory,messages", [
    (1, "600m", "250Mi", ["maximum cpu usage per Container is 500m, but limit is 600m"]),
    (2, "250m", "750Mi", ["maximum memory usage per Container is 500Mi, but limit is 750Mi"]),
    (3, "600m", "600Mi", ["maximum cpu usage per Container is 500m, but limit is 600m",
                          "maximum memory usage per Container is 500Mi, but limit is 600Mi"]),
    (4, "350m", "300Mi", []),
    (5, "300m", "350Mi", []),
    (6, "400m", "400Mi", []),
    (7, "10m", "400Mi", ["minimum cpu usage per Container is 50m, but request is 10m"]),
    (8, "250m", "10Mi", ["minimum memory usage per Container is 50Mi, but request is 10Mi"]),
    (9, "10m", "10Mi", ["minimum cpu usage per Container is 50m, but request is 10m",
                        "minimum memory usage per Container is 50Mi, but request is 10Mi"]),
    (10, "250m", "300Mi", []),
    (11, "300m", "250Mi", []),
    (12, "250m", "250Mi", []),
])
def test_kep1287_limit_ranger_cases(case, cpu, memory, messages):
    resized = guaranteed(cpu, memory)
    if not messages:
        limitranger.validate_pod(resized, [E2E_RANGE])
        return
    message = refusal(resized, E2E_RANGE)
    expected = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    assert message == f'pods "testpod1" is forbidden: {expected}', f"Limit Ranger test {case}"
