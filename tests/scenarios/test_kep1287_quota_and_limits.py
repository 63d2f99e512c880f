"""KEP-1287 Test Plan, "Resource Quota tests" and "Limit Ranger tests", over real processes: an
apiserver with its LimitRanger and ResourceQuota admission, a controller-manager running the
resourcequota controller, a kubelet and its runtime actuating the resizes.

As Kubernetes' e2e for these lists does, each case gets a namespace of its own with a
ResourceQuota ``resize-resource-quota`` of cpu 800m and memory 800Mi (waited for until the
controller has written its status) or a LimitRange ``resize-limit-ranger`` (Container max 500m /
500Mi, min 50m / 50Mi, default 100m / 100Mi, defaultRequest 50m / 50Mi), two Guaranteed pods of
300m / 300Mi running, and the first pod resized through the ``resize`` subresource with a
strategic merge patch: a valid resize is actuated by the kubelet; a refused one answers with
Kubernetes' message and changes nothing — neither the pod nor the quota's usage.

Then KEP-1287 "Resource Quota" itself: a quota's usage follows a resize up at once (the admission
charges it) and a resize down only once the kubelet has actuated it (the controller recounts when
the pod's status resources change); creates are defaulted and bounded by a LimitRange; and two
creates racing for the last of a quota cannot both get it.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from machinery import errors
from machinery.api import core_pb2, cri_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod, limit_range_item, make_limit_range, make_namespace, make_resource_quota
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.metrics import metric
from tests.harness.node_state import runtime
from tests.harness.wait import condition, eventually

pytestmark = pytest.mark.scenario

NODE = "node-1"
QUOTA, LIMIT_RANGE = "resize-resource-quota", "resize-limit-ranger"
ORIGINAL = ("300m", "300Mi")

# The module's cluster (the harness's ``client`` fixture talks to it).
kcluster = cluster_fixture(nodes=1, controller_managers=1, kubelet_args=FAST_KUBELET,
                           controller_manager_args=["--controllers=resourcequota", "--resource-quota-sync-period=2s"])
_namespaces = itertools.count(1)


@pytest.fixture
def api(client):
    return client


@pytest.fixture
async def namespace(api):
    """A namespace of the test's own (Kubernetes' e2e framework makes one per test); its pods are
    deleted afterwards, so the node has room for the next test's."""
    name = f"kep1287-quota-{next(_namespaces)}"
    await api.namespaces.create(make_namespace(name))
    yield name
    await delete_all_pods(api, name)


def guaranteed(name: str, namespace: str, cpu: str, memory: str) -> core_pb2.Pod:
    return (MakePod().name(name).namespace(namespace).node(NODE).grace(1)
            .req(cpu=cpu, memory=memory).lim(cpu=cpu, memory=memory)
            .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())


def resize_patch(cpu: str, memory: str) -> dict:
    """What the e2e's MakeResizePatch sends for container c1."""
    r = {"cpu": cpu, "memory": memory}
    return {"spec": {"containers": [{"name": "c1", "resources": {"requests": r, "limits": r}}]}}


async def running(api, namespace: str, *names: str) -> None:
    async def check():
        for n in names:
            pod = await api.pods.get(n, namespace)
            if pod.status.phase != "Running" or not all(cs.ready for cs in pod.status.container_statuses):
                return False
        return True

    await eventually(check, timeout=30, what=f"{', '.join(names)} running in {namespace}")


def actuated(pod: core_pb2.Pod, cpu: str, memory: str) -> bool:
    """The kubelet has allocated and actuated the resize: status resources are the spec's, and no
    resize condition is left."""
    cs = pod.status.container_statuses[0] if pod.status.container_statuses else None
    if cs is None:
        return False
    want = {"cpu": Quantity(cpu), "memory": Quantity(memory)}
    return all(Quantity(cs.allocated_resources.get(r, "0")) == q and Quantity(cs.resources.requests.get(r, "0")) == q
               and Quantity(cs.resources.limits.get(r, "0")) == q for r, q in want.items()) and \
        condition(pod, "PodResizePending") is None and condition(pod, "PodResizeInProgress") is None


async def wait_actuated(api, namespace: str, name: str, cpu: str, memory: str) -> core_pb2.Pod:
    box: dict[str, core_pb2.Pod] = {}

    async def check():
        box["pod"] = await api.pods.get(name, namespace)
        return actuated(box["pod"], cpu, memory)

    await eventually(check, timeout=30, what=f"{name} resized to cpu {cpu}, memory {memory}")
    return box["pod"]


async def used(api, namespace: str, name: str = QUOTA) -> dict[str, Quantity]:
    q = await api.resource_quotas.get(name, namespace)
    return {k: Quantity(v) for k, v in q.status.used.items()}


async def wait_used(api, namespace: str, expected: dict[str, str], name: str = QUOTA) -> None:
    """Until the quota's status.used is ``expected`` (the controller has written its status)."""
    want = {k: Quantity(v) for k, v in expected.items()}
    await eventually(lambda: _used_is(api, namespace, name, want), timeout=30,
                     what=f"quota {namespace}/{name} used {expected}")


async def _used_is(api, namespace: str, name: str, want: dict[str, Quantity]) -> bool:
    return await used(api, namespace, name) == want


async def two_pods(api, namespace: str) -> core_pb2.Pod:
    """testpod1 and testpod2 at 300m / 300Mi, running; testpod1 as the API has it."""
    for n in ("testpod1", "testpod2"):
        await api.pods.create(guaranteed(n, namespace, *ORIGINAL))
    await running(api, namespace, "testpod1", "testpod2")
    return await api.pods.get("testpod1", namespace)


async def refused(api, namespace: str, pod: core_pb2.Pod, cpu: str, memory: str) -> str:
    """Resize testpod1 expecting a refusal: the message; the pod must be unchanged."""
    with pytest.raises(errors.Forbidden) as exc:
        await api.pods.patch(pod.metadata.name, resize_patch(cpu, memory), namespace=namespace, subresource="resize")
    after = await api.pods.get(pod.metadata.name, namespace)
    assert after.spec == pod.spec and after.metadata.generation == pod.metadata.generation, \
        "a refused resize must change nothing"
    assert actuated(after, *ORIGINAL)
    return exc.value.message


async def resized(api, namespace: str, pod: core_pb2.Pod, cpu: str, memory: str) -> core_pb2.Pod:
    """Resize testpod1 expecting it to be admitted, then actuated by the kubelet."""
    patched = await api.pods.patch(pod.metadata.name, resize_patch(cpu, memory), namespace=namespace,
                                   subresource="resize")
    assert patched.metadata.generation == pod.metadata.generation + 1
    return await wait_actuated(api, namespace, pod.metadata.name, cpu, memory)


# ---------------------------------------------------------------- KEP-1287 "Resource Quota tests"


async def quota_namespace(api, namespace: str) -> core_pb2.Pod:
    await api.resource_quotas.create(make_resource_quota(QUOTA, {"cpu": "800m", "memory": "800Mi"},
                                                         namespace=namespace))
    await wait_used(api, namespace, {"cpu": "0", "memory": "0"})  # pods are refused nothing before that
    pod = await two_pods(api, namespace)
    await wait_used(api, namespace, {"cpu": "600m", "memory": "600Mi"})
    return pod


QUOTA_REFUSED = [
    (1, "exceed max CPU", "600m", "400Mi", "requested: cpu=300m, used: cpu=600m, limited: cpu=800m"),
    (2, "exceed max memory", "250m", "750Mi", "requested: memory=450Mi, used: memory=600Mi, limited: memory=800Mi"),
    (3, "exceed max CPU and memory", "600m", "750Mi",
     "requested: cpu=300m,memory=450Mi, used: cpu=600m,memory=600Mi, limited: cpu=800m,memory=800Mi"),
]


async def _resynced(api, tc) -> None:
    """Until the resourcequota controller has synced twice as many quotas as there are since now:
    its periodic resync (2 s here) queues every quota, so each one has been recounted from the
    caches of this moment at least once."""
    def synced() -> float:
        return metric(tc, "controller-manager", "workqueue_work_duration_seconds_count", 'name="resourcequota_primary"')

    start, quotas = synced(), len((await api.resource_quotas.list("")).items)
    await eventually(lambda: synced() >= start + 2 * quotas, timeout=20, what=f"{2 * quotas} quota syncs")


@pytest.mark.parametrize("case,title,cpu,memory,detail", QUOTA_REFUSED, ids=[f"{c[0]}-{c[1]}" for c in QUOTA_REFUSED])
async def test_kep1287_resource_quota_tests_1_to_3_exceed(api, namespace, case, title, cpu, memory, detail):
    pod = await quota_namespace(api, namespace)
    message = await refused(api, namespace, pod, cpu, memory)
    assert message == f'pods "testpod1" is forbidden: exceeded quota: {QUOTA}, {detail}', f"{case}. {title}"
    assert await used(api, namespace) == {"cpu": Quantity("600m"), "memory": Quantity("600Mi")}


QUOTA_VALID = [
    (4, "valid increase of CPU", "350m", "300Mi"),
    (5, "valid increase of memory", "350m", "350Mi"),
    (6, "valid increase of CPU and memory", "400m", "400Mi"),
]


@pytest.mark.parametrize("case,title,cpu,memory", QUOTA_VALID, ids=[f"{c[0]}-{c[1]}" for c in QUOTA_VALID])
async def test_kep1287_resource_quota_tests_4_to_6_valid_increase(api, namespace, case, title, cpu, memory):
    pod = await quota_namespace(api, namespace)
    await resized(api, namespace, pod, cpu, memory)
    total = {"cpu": Quantity(cpu) + Quantity("300m"), "memory": Quantity(memory) + Quantity("300Mi")}
    assert await used(api, namespace) == total, f"{case}. {title}"


# ---------------------------------------------------------------- KEP-1287 "Limit Ranger tests"


async def limit_range_namespace(api, namespace: str) -> core_pb2.Pod:
    await api.limit_ranges.create(make_limit_range(LIMIT_RANGE, limit_range_item(
        "Container", max={"cpu": "500m", "memory": "500Mi"}, min={"cpu": "50m", "memory": "50Mi"},
        default={"cpu": "100m", "memory": "100Mi"}, default_request={"cpu": "50m", "memory": "50Mi"}),
        namespace=namespace))
    return await two_pods(api, namespace)


LIMITS_REFUSED = [
    (1, "exceed max CPU", "600m", "250Mi", ["maximum cpu usage per Container is 500m, but limit is 600m"]),
    (2, "exceed max memory", "250m", "750Mi", ["maximum memory usage per Container is 500Mi, but limit is 750Mi"]),
    (3, "exceed max CPU and memory", "600m", "600Mi", ["maximum cpu usage per Container is 500m, but limit is 600m",
                                                       "maximum memory usage per Container is 500Mi, but limit is "
                                                       "600Mi"]),
    (7, "go below min CPU", "10m", "400Mi", ["minimum cpu usage per Container is 50m, but request is 10m"]),
    (8, "go below min memory", "250m", "10Mi", ["minimum memory usage per Container is 50Mi, but request is 10Mi"]),
    (9, "go below min CPU and memory", "10m", "10Mi", ["minimum cpu usage per Container is 50m, but request is 10m",
                                                       "minimum memory usage per Container is 50Mi, but request is "
                                                       "10Mi"]),
]


@pytest.mark.parametrize("case,title,cpu,memory,messages", LIMITS_REFUSED,
                         ids=[f"{c[0]}-{c[1]}" for c in LIMITS_REFUSED])
async def test_kep1287_limit_ranger_tests_refused(api, namespace, case, title, cpu, memory, messages):
    pod = await limit_range_namespace(api, namespace)
    message = await refused(api, namespace, pod, cpu, memory)
    expected = messages[0] if len(messages) == 1 else "[" + ", ".join(messages) + "]"
    assert message == f'pods "testpod1" is forbidden: {expected}', f"{case}. {title}"


LIMITS_VALID = [
    (4, "valid increase of CPU", "350m", "300Mi"),
    (5, "valid increase of memory", "300m", "350Mi"),
    (6, "valid increase of CPU and memory", "400m", "400Mi"),
    (10, "valid decrease of CPU", "250m", "300Mi"),
    (11, "valid decrease of memory", "300m", "250Mi"),
    (12, "valid decrease of CPU and memory", "250m", "250Mi"),
]


@pytest.mark.parametrize("case,title,cpu,memory", LIMITS_VALID, ids=[f"{c[0]}-{c[1]}" for c in LIMITS_VALID])
async def test_kep1287_limit_ranger_tests_valid(api, namespace, case, title, cpu, memory):
    pod = await limit_range_namespace(api, namespace)
    after = await resized(api, namespace, pod, cpu, memory)
    assert "kubernetes.io/limit-ranger" not in after.metadata.annotations, "nothing was defaulted"


# ---------------------------------------------------------------- KEP-1287 "Resource Quota": usage


async def test_kep1287_resource_quota_usage_follows_resize_up_at_once_and_down_once_actuated(
        kcluster, api, namespace):
    await api.resource_quotas.create(make_resource_quota(
        "compute", {"requests.cpu": "2", "limits.cpu": "2", "requests.memory": "1Gi", "pods": "4"},
        namespace=namespace))
    await api.pods.create(guaranteed("web", namespace, "500m", "128Mi"))
    await running(api, namespace, "web")
    await wait_used(api, namespace, {"requests.cpu": "500m", "limits.cpu": "500m", "requests.memory": "128Mi",
                                     "pods": "1"}, name="compute")

    # Up: desired 1 is the largest of desired, allocated and actual — charged by the resize itself.
    pod = await api.pods.patch("web", resize_patch("1", "128Mi"), namespace=namespace, subresource="resize")
    now = await used(api, namespace, "compute")
    assert (now["requests.cpu"], now["limits.cpu"]) == (Quantity("1"), Quantity("1")), "charged at once"
    await wait_actuated(api, namespace, "web", "1", "128Mi")

    # Down: while the kubelet has not actuated it, allocated and actual stay at 1 and so does the quota.
    failpoint(kcluster, f"kubelet/{NODE}", "kubelet/resize-after-allocate", "pause")
    try:
        pod = await api.pods.patch("web", resize_patch("250m", "128Mi"), namespace=namespace, subresource="resize")
        assert pod.metadata.generation == 3
        await wait_paused(kcluster, f"kubelet/{NODE}", "kubelet/resize-after-allocate")
        await _resynced(api, kcluster)  # the controller has recounted every quota since
        now = await used(api, namespace, "compute")
        assert now["requests.cpu"] == Quantity("1"), "a resize down frees quota only once actuated"
    finally:
        failpoint(kcluster, f"kubelet/{NODE}", "kubelet/resize-after-allocate", "off")
    await wait_actuated(api, namespace, "web", "250m", "128Mi")
    await wait_used(api, namespace, {"requests.cpu": "250m", "limits.cpu": "250m", "requests.memory": "128Mi",
                                     "pods": "1"}, name="compute")

    # And the room freed is usable: a new pod of 1750m fits exactly.
    await api.pods.create(guaranteed("more", namespace, "1750m", "128Mi"))
    with pytest.raises(errors.Forbidden) as exc:
        await api.pods.create(guaranteed("over", namespace, "1m", "128Mi"))
    assert exc.value.message == ('pods "over" is forbidden: exceeded quota: compute, requested: limits.cpu=1m,'
                                 'requests.cpu=1m, used: limits.cpu=2,requests.cpu=2, limited: limits.cpu=2,'
                                 'requests.cpu=2')


async def test_a_terminal_pod_frees_its_quota(kcluster, api, namespace):
    await api.resource_quotas.create(make_resource_quota("pods", {"pods": "1", "count/pods": "5"},
                                                         namespace=namespace))
    await wait_used(api, namespace, {"pods": "0", "count/pods": "0"}, name="pods")
    pod = MakePod().name("job").namespace(namespace).node(NODE).req(cpu="10m").obj()
    pod.spec.restart_policy = "Never"
    await api.pods.create(pod)
    await running(api, namespace, "job")
    with pytest.raises(errors.Forbidden, match="exceeded quota: pods, requested: pods=1, used: pods=1"):
        await api.pods.create(MakePod().name("second").namespace(namespace).node(NODE).obj())
    # Its container completes: the pod Succeeded counts for count/pods only.
    cid = (await api.pods.get("job", namespace)).status.container_statuses[0].container_id.split("://", 1)[-1]
    rt = runtime(kcluster, NODE)
    try:
        await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=0))
    finally:
        await rt.close()
    await wait_used(api, namespace, {"pods": "0", "count/pods": "1"}, name="pods")
    await api.pods.create(MakePod().name("second").namespace(namespace).node(NODE).obj())


# ---------------------------------------------------------------- creates


async def test_limit_range_defaults_and_bounds_a_created_pod(api, namespace):
    await api.limit_ranges.create(make_limit_range("limits", limit_range_item(
        min={"cpu": "100m"}, max={"cpu": "2"}, default={"cpu": "500m", "memory": "256Mi"},
        default_request={"cpu": "200m", "memory": "128Mi"}), namespace=namespace))
    pod = await api.pods.create(MakePod().name("plain").namespace(namespace).obj())
    c1 = pod.spec.containers[0].resources
    assert dict(c1.requests) == {"cpu": "200m", "memory": "128Mi"} and dict(c1.limits) == {"cpu": "500m",
                                                                                             "memory": "256Mi"}
    assert pod.metadata.annotations["kubernetes.io/limit-ranger"] == \
        "LimitRanger plugin set: cpu, memory request for container c1; cpu, memory limit for container c1"
    assert pod.status.qos_class == "Burstable"
    with pytest.raises(errors.Forbidden) as exc:
        await api.pods.create(MakePod().name("x").namespace(namespace).req(cpu="50m").lim(cpu="4").obj())
    assert exc.value.message == ('pods "x" is forbidden: [minimum cpu usage per Container is 100m, but request is '
                                 '50m, maximum cpu usage per Container is 2, but limit is 4]')


@pytest.mark.parametrize("round_", range(3))
async def test_racing_creates_cannot_exceed_a_quota(api, namespace, round_):
    """Eight creates at once for the last two pods of a quota: two are admitted. The pods are bound,
    so their kubelet starts them meanwhile and the controller recounts as their status comes in."""
    await api.resource_quotas.create(make_resource_quota("two", {"pods": "3", "requests.cpu": "3"},
                                                         namespace=namespace))
    await api.pods.create(MakePod().name("first").namespace(namespace).node(NODE).req(cpu="1").obj())
    await wait_used(api, namespace, {"pods": "1", "requests.cpu": "1"}, name="two")
    results = await asyncio.gather(*(api.pods.create(MakePod().name(f"racer-{i}").namespace(namespace).node(NODE)
                                                     .req(cpu="1").obj()) for i in range(8)),
                                   return_exceptions=True)
    created = [r for r in results if isinstance(r, core_pb2.Pod)]
    assert len(created) == 2, results
    assert all(isinstance(r, errors.Forbidden) and "exceeded quota: two" in r.message
               for r in results if not isinstance(r, core_pb2.Pod))
    await running(api, namespace, "first", *(p.metadata.name for p in created))
    with pytest.raises(errors.Forbidden):
        await api.pods.create(MakePod().name("late").namespace(namespace).node(NODE).req(cpu="1").obj())
    assert len((await api.pods.list(namespace)).items) == 3
    await wait_used(api, namespace, {"pods": "3", "requests.cpu": "3"}, name="two")
