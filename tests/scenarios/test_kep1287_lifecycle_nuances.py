"""KEP-1287 "Lifecycle Nuances": "Resizing pods in a graceful shutdown state is permitted, and will
be actuated best-effort", on real processes (etcd, the apiserver, the scheduler, one node of 4 CPUs
whose kubelet and fake runtime are processes; SchedulerPreemptionForPodResize on).

The cases:

- the kubelet, restarted on a pod that was resized and then deleted (its container takes 8 s to
  stop; the restart makes the kubelet meet the resize and the deletion in one look, never one
  after the other by chance): before stopping it, the kubelet allocates and actuates the resize on the running
  container, and the status shows the new size while the pod still terminates;
- the scheduler (KEP-5836), holding a pod's Deferred resize as unschedulable when the pod's
  deletion starts: it lets go of the pod at once (``scheduler_pending_resize_pods`` drops to 0
  while the pod still terminates), rather than keep it until it is gone — a pod that is going is
  no reason to make room, and its cycle would skip it anyway.
"""

from __future__ import annotations

import pytest

from machinery import errors
from machinery.quantity import Quantity
from tests.harness.api import resize
from tests.harness.cluster import kill, start
from tests.harness.metrics import metric
from tests.harness.resize_preemption import (
    WAIT,
    gone,
    one_node_cluster,
    resizable_pod,
    resize_api,
    resize_attempts,
    run_pods,
    running_names,
    wait_resize_conditions,
)
from tests.harness.wait import eventually

pytestmark = pytest.mark.scenario

SHUTDOWN_SECONDS = "kplane.dev/shutdown-seconds"
STOPPING = 8  # seconds the container takes to exit after SIGTERM
GRACE = 30  # the pods' grace period: longer than STOPPING, so the container's own time decides


@pytest.fixture(scope="module")
def nuances_cluster():
    with one_node_cluster() as tc:
        yield tc


@pytest.fixture
async def api(nuances_cluster):
    async with resize_api(nuances_cluster) as c:
        yield c


def _slow_to_stop(name: str, cpu: str, priority_class: str):
    return resizable_pod(name, cpu, priority_class, GRACE).annotation(SHUTDOWN_SECONDS, str(STOPPING)).obj()


async def test_lifecycle_nuances_a_resize_of_a_pod_in_graceful_shutdown_is_actuated(api, nuances_cluster):
    tc = nuances_cluster
    await run_pods(api, _slow_to_stop("s", "1", "p-high"))
    kill(tc, "kubelet/node-1")
    await resize(api, "s", cpu="2")  # 1 + 1 of 4 CPUs: fits
    await api.pods.delete("s", grace_period_seconds=GRACE)
    start(tc, "kubelet/node-1")

    seen: dict = {}

    async def actuated_or_gone():
        try:
            pod = await api.pods.get("s")
        except errors.NotFound:
            seen["gone"] = True
            return True
        cs = pod.status.container_statuses
        seen["status"] = [(dict(c.allocated_resources), dict(c.resources.requests)) for c in cs]
        seen["terminating"] = bool(pod.metadata.deletion_timestamp)
        return bool(cs) and all(Quantity(c.allocated_resources.get("cpu", "0")) == Quantity("2")
                                and Quantity(c.resources.requests.get("cpu", "0")) == Quantity("2") for c in cs)

    await eventually(actuated_or_gone, timeout=WAIT, what="s's resize actuated, or s gone")
    assert not seen.get("gone"), f"s was stopped and deleted without its resize: last status {seen.get('status')}"
    assert seen["terminating"], "s is still in its graceful shutdown when its resize shows"
    await gone(api, "s")


async def test_lifecycle_nuances_the_scheduler_lets_go_of_a_deferred_pod_that_is_going(api, nuances_cluster):
    tc = nuances_cluster
    # a, the lowest priority, can preempt nobody: the scheduler holds its Deferred resize as
    # unschedulable, waiting for an event that makes room
    await run_pods(api, _slow_to_stop("a", "2", "p-lowest"),
                   resizable_pod("v", "1", "p-low").obj(), resizable_pod("b", "1", "p-mid").obj())
    tried = resize_attempts(tc, "unschedulable")
    await resize(api, "a", cpu="3")  # 3 + 1 + 1 > 4: Deferred
    await wait_resize_conditions(api, "a", {"PodResizePending": "Deferred"}, "a's resize Deferred")
    await eventually(lambda: resize_attempts(tc, "unschedulable") > tried
                     and metric(tc, "scheduler", "scheduler_pending_resize_pods") == 1,
                     timeout=WAIT, what="the scheduler holding a's resize, unschedulable")
    await api.pods.delete("a", grace_period_seconds=GRACE)

    seen: dict = {}

    async def let_go_or_gone():
        try:
            pod = await api.pods.get("a")
        except errors.NotFound:
            seen["gone"] = True
            return True
        seen["terminating"] = bool(pod.metadata.deletion_timestamp)
        seen["pending"] = metric(tc, "scheduler", "scheduler_pending_resize_pods")
        return seen["pending"] == 0

    await eventually(let_go_or_gone, timeout=WAIT, what="a out of the scheduler's queue, or a gone")
    assert not seen.get("gone"), "the scheduler held a's resize until a was gone"
    assert seen["terminating"]
    await gone(api, "a")
    assert resize_attempts(tc, "preempted") == 0
    assert await running_names(api) == {"v", "b"}
