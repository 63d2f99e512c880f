"""KEP-1287 actuation: per resource, pod-level increase first, decreases before increases, and the
failure rules (a failed decrease stops increases; a failed increase does not stop the others)."""

from __future__ import annotations

from kubelet.allocation.checkpoint import Resources
from kubelet.resize import ContainerResize, actuate, needs_restart
from kubelet.status import LinuxResources
from tests.harness.builders import MakePod


class FakeRuntime:
    def __init__(self, usage: dict[str, int] | None = None, fail: set[str] | None = None):
        self.calls: list[tuple] = []
        self.sandboxes: list[LinuxResources] = []  # each sandbox record sent, whole
        self.usage = usage or {}
        self.fail = fail or set()

    async def update_container(self, container_id: str, linux: LinuxResources) -> None:
        self.calls.append(("container", container_id, linux.memory_limit_in_bytes, linux.cpu_quota, linux.cpu_shares))
        if container_id in self.fail:
            raise RuntimeError("runtime refused")

    async def update_sandbox(self, total: LinuxResources) -> None:
        self.calls.append(("pod", total.memory_limit_in_bytes, total.cpu_quota))
        self.sandboxes.append(total)

    async def memory_usage(self, container_id: str) -> int:
        return self.usage.get(container_id, 0)


MI = 1 << 20


def _c(name: str, old_mem: int, new_mem: int, old_cpu: str = "1", new_cpu: str = "1", restart=False):
    return ContainerResize(name, name, Resources({"cpu": new_cpu}, {"memory": f"{new_mem}Mi", "cpu": new_cpu}),
                           Resources({"cpu": old_cpu}, {"memory": f"{old_mem}Mi", "cpu": old_cpu}), restart)


async def test_net_memory_increase_raises_the_pod_limit_first_then_decreases_then_increases():
    rt = FakeRuntime()
    out = await actuate([_c("up", 100, 300), _c("down", 200, 100)], rt)
    assert [c[:2] for c in rt.calls] == [("pod", 400 * MI), ("container", "down"), ("container", "up")]
    assert out.errors == [] and set(out.actuated) == {"up", "down"}


async def test_net_memory_decrease_lowers_the_pod_limit_after_the_container_decreases():
    rt = FakeRuntime()
    await actuate([_c("up", 100, 150), _c("down", 300, 100)], rt)
    assert [c[:2] for c in rt.calls] == [("container", "down"), ("pod", 250 * MI), ("container", "up")]


async def test_memory_limit_decrease_below_usage_is_not_attempted_and_reported():
    """KEP-1287 "Memory Limit Decreases": the resize stays in progress with an Error."""
    rt = FakeRuntime(usage={"c1": 180 * MI})
    out = await actuate([_c("c1", 200, 100)], rt)
    assert rt.calls == []
    assert out.errors == [f'container "c1" memory limit ({100 * MI}) below current usage ({180 * MI})']
    assert "c1" not in out.actuated


async def test_a_failed_decrease_stops_increases_and_the_pod_decrease_of_that_resource():
    rt = FakeRuntime(fail={"down"})
    out = await actuate([_c("up", 100, 150), _c("down", 300, 100)], rt)
    assert [c[:2] for c in rt.calls] == [("container", "down")]
    assert "up" not in out.actuated and out.errors


async def test_a_failed_increase_does_not_stop_the_other_increases():
    rt = FakeRuntime(fail={"a"})
    out = await actuate([_c("a", 100, 200), _c("b", 100, 200)], rt)
    assert [c[1] for c in rt.calls if c[0] == "container"] == ["a", "b"]
    assert set(out.actuated) == {"b"} and len(out.errors) == 1


async def test_memory_then_cpu_passes_update_only_that_resource():
    rt = FakeRuntime()
    out = await actuate([_c("c1", 100, 200, old_cpu="1", new_cpu="500m")], rt)
    containers = [c for c in rt.calls if c[0] == "container"]
    # memory pass: new memory limit, cpu still at the old 1 cpu (quota 100000, 1024 shares)
    assert containers[0] == ("container", "c1", 200 * MI, 100000, 1024)
    # cpu pass: now 500m (quota 50000, 512 shares)
    assert containers[1] == ("container", "c1", 200 * MI, 50000, 512)
    assert out.actuated["c1"].limits == {"memory": "200Mi", "cpu": "500m"}


async def test_restart_container_policy_restarts_instead_of_updating():
    pod = MakePod().name("p").req(cpu="1").obj()
    pod.spec.containers[0].resize_policy.add(resource_name="memory", restart_policy="RestartContainer")
    assert needs_restart(pod.spec.containers[0], {"memory"}) and not needs_restart(pod.spec.containers[0], {"cpu"})
    rt = FakeRuntime()
    out = await actuate([_c("c1", 100, 200, restart=True)], rt)
    assert rt.calls == [] and out.restart == ["c1"]


async def test_unchanged_containers_are_left_alone():
    rt = FakeRuntime()
    out = await actuate([_c("same", 100, 100)], rt)
    assert rt.calls == [] and out.actuated == {} and out.errors == []


async def test_a_memory_request_change_is_actuated_without_a_runtime_call():
    """Only the memory limit is a runtime setting: a request-only change is recorded as actuated."""
    rt = FakeRuntime()
    c = ContainerResize("c1", "c1", Resources({"cpu": "1", "memory": "128Mi"}, {"memory": "256Mi"}),
                        Resources({"cpu": "1", "memory": "64Mi"}, {"memory": "256Mi"}), False)
    out = await actuate([c], rt)
    assert rt.calls == [] and out.errors == []
    assert out.actuated == {"c1": Resources({"cpu": "1", "memory": "128Mi"}, {"memory": "256Mi"})}


async def test_missing_actuated_resources_are_set_by_one_update():
    """A container created but never recorded as actuated (kubelet killed in between): one
    superfluous update brings the record to the whole allocation, memory request included. (The
    sandbox's record, whose cpu shares follow the requests, is sent whole first: no limits, 1024
    shares.)"""
    rt = FakeRuntime()
    c = ContainerResize("c1", "c1", Resources({"cpu": "1", "memory": "64Mi"}, {}), Resources(), False)
    out = await actuate([c], rt)
    assert [x[:2] for x in rt.calls] == [("pod", 0), ("container", "c1")]
    assert rt.sandboxes == [LinuxResources(cpu_shares=1024)]
    assert out.actuated == {"c1": Resources({"cpu": "1", "memory": "64Mi"}, {})}


async def test_the_sandbox_record_is_sent_whole_over_every_running_container_with_the_overhead():
    """KEP-1287 "CRI Changes": UpdatePodSandboxResources carries the pod's whole record. A cpu-only
    resize of c1 beside an unchanged c2 raises the pod's quota to the sum over both plus the
    overhead, and keeps the memory limit (both containers' plus the overhead's) in the same record."""
    rt = FakeRuntime()
    up = ContainerResize("c1", "c1", Resources({"cpu": "2"}, {"cpu": "2", "memory": "100Mi"}),
                         Resources({"cpu": "1"}, {"cpu": "1", "memory": "100Mi"}), False)
    same = Resources({"cpu": "1"}, {"cpu": "1", "memory": "200Mi"})
    steady = ContainerResize("c2", "c2", same, same, False)
    overhead = Resources({"cpu": "100m", "memory": "10Mi"}, {"cpu": "100m", "memory": "10Mi"})
    out = await actuate([up, steady], rt, overhead=overhead)
    assert [x[:2] for x in rt.calls] == [("pod", 310 * MI), ("container", "c1")]
    assert rt.sandboxes == [LinuxResources(cpu_shares=3174, cpu_quota=310000, memory_limit_in_bytes=310 * MI)]
    assert set(out.actuated) == {"c1"}


async def test_a_container_without_a_limit_leaves_the_pod_without_one():
    """Kubernetes' ResourceConfigForPod sets a pod-level limit only when every container has one."""
    rt = FakeRuntime()
    up = ContainerResize("c1", "c1", Resources({"cpu": "2"}, {"cpu": "2", "memory": "100Mi"}),
                         Resources({"cpu": "1"}, {"cpu": "1", "memory": "100Mi"}), False)
    unlimited = Resources({"cpu": "1"}, {})
    await actuate([up, ContainerResize("c2", "c2", unlimited, unlimited, False)], rt)
    assert rt.sandboxes == [LinuxResources(cpu_shares=3072)]
