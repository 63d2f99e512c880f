"""The PLEG on real processes: what changes in the runtime reaches the kubelet within a relist
period, not at the next periodic resync (here a minute away, so only the PLEG can explain a
reaction within seconds)."""

from __future__ import annotations

import pytest

from machinery.api import cri_pb2
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod
from tests.harness.cluster import cluster_fixture
from tests.harness.metrics import metric
from tests.harness.node_state import runtime
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.integration

NODE = "node-1"
SLOW_RESYNC = ["--sync-frequency=60", "--restart-backoff=0.2", "--node-status-interval=1"]

pleg_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=SLOW_RESYNC)


@pytest.fixture
async def api(pleg_cluster):
    c = pleg_cluster.client()
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


async def test_a_crashed_container_is_restarted_after_the_pleg_sees_it_exit(pleg_cluster, api):
    tc = pleg_cluster
    await api.pods.create(MakePod().name("crashy").req(cpu="100m", memory="32Mi").node(NODE).grace(0).obj())
    pod = (await wait_running(api, "crashy"))["crashy"]
    cid = pod.status.container_statuses[0].container_id.split("://", 1)[-1]
    relists = metric(tc, f"kubelet/{NODE}", "kubelet_pleg_relist_duration_seconds_count")
    events = metric(tc, f"kubelet/{NODE}", "kplane_kubelet_pleg_events_total")
    rt = runtime(tc, NODE)
    try:
        await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cid, exit_code=137, reason="Error"))
    finally:
        await rt.close()

    async def restarted():
        cs = (await api.pods.get("crashy")).status.container_statuses[0]
        return cs.restart_count == 1 and cs.HasField("state") and cs.state.HasField("running") and \
            cs.last_state.terminated.exit_code == 137

    # The resync is 60 s away: a restart within 15 s is the PLEG's doing.
    await eventually(restarted, timeout=15, what="crashed container restarted with lastState exit 137")
    assert metric(tc, f"kubelet/{NODE}", "kplane_kubelet_pleg_events_total") > events  # the exit was seen as an event
    assert metric(tc, f"kubelet/{NODE}", "kubelet_pleg_relist_duration_seconds_count") > relists
