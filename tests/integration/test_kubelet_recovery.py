"""The kubelet's bad days, on real processes: a lost checkpoint dir, a corrupt checkpoint file, an
unreachable runtime, and pods deleted while it was down. Never a crash, never a lost running pod,
never a container left running for a pod the API no longer has."""

from __future__ import annotations

import glob
import shutil
from pathlib import Path

import pytest

from kubelet.allocation.checkpoint import ALLOCATED_FILE
from machinery.api import core_pb2, cri_pb2
from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.node_state import checkpoint_dir, runtime
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.integration

NODE = "node-1"
KUBELET, RUNTIME = f"kubelet/{NODE}", f"runtime/{NODE}"

recovery_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET)


@pytest.fixture
async def api(recovery_cluster):
    c = recovery_cluster.client()
    try:
        yield c
    finally:
        start(recovery_cluster, RUNTIME)
        start(recovery_cluster, KUBELET)
        await delete_all_pods(c)
        await c.close()


async def _resized_to(api, name: str, cpu: str) -> None:
    async def check():
        cs = (await api.pods.get(name)).status.container_statuses[0]
        return Quantity(cs.resources.requests.get("cpu", "0")) == Quantity(cpu) and \
            Quantity(cs.allocated_resources.get("cpu", "0")) == Quantity(cpu)

    await eventually(check, timeout=20, what=f"{name} resized to {cpu}")


async def _same_container_still_running(api, before: core_pb2.Pod) -> None:
    after = (await wait_running(api, before.metadata.name))[before.metadata.name]
    old, new = before.status.container_statuses[0], after.status.container_statuses[0]
    assert (new.container_id, new.restart_count) == (old.container_id, 0), "the pod was restarted"
    assert dict(new.allocated_resources) == dict(old.allocated_resources)


async def _runtime_containers(tc, uid: str) -> list[cri_pb2.Container]:
    rt = runtime(tc, NODE)
    try:
        resp = await rt.list_containers(cri_pb2.ListContainersRequest())
        return [c for c in resp.containers if c.labels.get("io.kubernetes.pod.uid") == uid]
    finally:
        await rt.close()


async def test_a_lost_checkpoint_dir_is_rebuilt_from_the_runtime_and_the_api(recovery_cluster, api):
    tc = recovery_cluster
    await api.pods.create(MakePod().name("keeps").req(cpu="500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    before = (await wait_running(api, "keeps"))["keeps"]
    kill(tc, KUBELET)
    shutil.rmtree(checkpoint_dir(tc, NODE))
    start(tc, KUBELET)
    await _same_container_still_running(api, before)
    await resize(api, "keeps", cpu="700m")  # the rebuilt allocation takes a resize
    await _resized_to(api, "keeps", "700m")
    assert (checkpoint_dir(tc, NODE) / ALLOCATED_FILE).exists()


async def test_a_corrupt_checkpoint_is_set_aside_logged_and_recovered(recovery_cluster, api):
    tc = recovery_cluster
    await api.pods.create(MakePod().name("survives").req(cpu="500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    before = (await wait_running(api, "survives"))["survives"]
    kill(tc, KUBELET)
    path = checkpoint_dir(tc, NODE) / ALLOCATED_FILE
    path.write_bytes(b'{"version": 1, "pods": {"x": ')  # cut short mid-write
    start(tc, KUBELET)
    await _same_container_still_running(api, before)
    aside = glob.glob(f"{path}.corrupt-*")
    assert aside, "the damaged checkpoint was not set aside"
    assert Path(aside[0]).read_bytes() == b'{"version": 1, "pods": {"x": '
    tc.reload()
    assert '"checkpoint_corrupt"' in Path(tc.process(KUBELET).log).read_text()
    await resize(api, "survives", cpu="700m")
    await _resized_to(api, "survives", "700m")


async def test_an_unreachable_runtime_makes_the_node_not_ready_and_loses_nothing(recovery_cluster, api):
    tc = recovery_cluster
    await api.pods.create(MakePod().name("old").req(cpu="500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    before = (await wait_running(api, "old"))["old"]
    kill(tc, RUNTIME)

    async def ready(want: str):
        node = await api.nodes.get(NODE)
        c = next(c for c in node.status.conditions if c.type == "Ready")
        return c.status == want and (want == "True" or c.message == "container runtime is down")

    await eventually(lambda: ready("False"), timeout=20, what="node NotReady while the runtime is down")
    # waits for the runtime, not refused
    await api.pods.create(MakePod().name("new").req(cpu="500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())

    def tried() -> bool:  # the kubelet has had the pod and found no runtime
        tc.reload()
        text = Path(tc.process(KUBELET).log).read_text(errors="replace")
        return any('"pod_sync_retry"' in line and '"default/new"' in line for line in text.splitlines())

    await eventually(tried, timeout=20, what="the kubelet trying to run new without its runtime")
    assert (await api.pods.get("new")).status.phase in ("", "Pending")
    tc.reload()
    assert tc.process(KUBELET).pid and Path(f"/proc/{tc.process(KUBELET).pid}").exists(), "the kubelet died"
    start(tc, RUNTIME)
    await eventually(lambda: ready("True"), timeout=20, what="node Ready again")
    await _same_container_still_running(api, before)
    await wait_running(api, "new")


async def test_pods_deleted_while_the_kubelet_is_down_are_stopped_when_it_returns(recovery_cluster, api):
    tc = recovery_cluster
    await api.pods.create(MakePod().name("forced").req(cpu="500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("graceful").req(cpu="500m", memory="64Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    pods = await wait_running(api, "forced", "graceful")
    kill(tc, KUBELET)
    await api.pods.delete("forced", grace_period_seconds=0)  # gone from the API at once
    await api.pods.delete("graceful")  # Terminating until its kubelet acts
    assert (await api.pods.get("graceful")).metadata.deletion_timestamp
    assert await _runtime_containers(tc, pods["forced"].metadata.uid), "nothing ran before the restart?"
    start(tc, KUBELET)

    async def gone():
        names = {p.metadata.name for p in (await api.pods.list("default")).items}
        if "graceful" in names:
            return False
        for p in pods.values():
            if await _runtime_containers(tc, p.metadata.uid):
                return False
        return True

    await eventually(gone, timeout=30, what="both pods' containers removed and the graceful one deleted")
