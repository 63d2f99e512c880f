"""The PLEG on real processes: what changes in the runtime reaches the kubelet within a relist
period, not at the next periodic resync (here a minute away, so only the PLEG can explain a
reaction within seconds). With the EventedPLEG gate (KEP-3386) it reaches it through the runtime's
event stream, with no relist (the next is five minutes away); a runtime killed under the stream
makes the kubelet relist at once and, its retries spent, fall back to relisting every second."""

from __future__ import annotations

import pytest

from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod
from tests.harness.cluster import cluster_fixture, kill, start
from tests.harness.metrics import metric
from tests.harness.node_state import crash
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.integration

NODE = "node-1"
SLOW_RESYNC = ["--sync-frequency=60", "--restart-backoff=0.2", "--node-status-interval=1"]

pleg_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=SLOW_RESYNC)
evented_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi",
                                  kubelet_args=[*SLOW_RESYNC, "--feature-gates=EventedPLEG=true"])


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
    relists = metric(tc, f"kubelet/{NODE}", "kubelet_pleg_relist_duration_seconds_count")
    events = metric(tc, f"kubelet/{NODE}", "kplane_kubelet_pleg_events_total")
    await crash(tc, NODE, pod)

    async def restarted():
        cs = (await api.pods.get("crashy")).status.container_statuses[0]
        return cs.restart_count == 1 and cs.HasField("state") and cs.state.HasField("running") and \
            cs.last_state.terminated.exit_code == 137

    # The resync is 60 s away: a restart within 15 s is the PLEG's doing.
    await eventually(restarted, timeout=15, what="crashed container restarted with lastState exit 137")
    assert metric(tc, f"kubelet/{NODE}", "kplane_kubelet_pleg_events_total") > events  # the exit was seen as an event
    assert metric(tc, f"kubelet/{NODE}", "kubelet_pleg_relist_duration_seconds_count") > relists


@pytest.fixture
async def evented_api(evented_cluster):
    c = evented_cluster.client()
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


async def _restarted(api, name: str, times: int) -> bool:
    cs = (await api.pods.get(name)).status.container_statuses[0]
    return cs.restart_count == times and cs.HasField("state") and cs.state.HasField("running")


async def test_with_the_evented_pleg_a_crash_reaches_the_kubelet_as_an_event_without_a_relist(evented_cluster,
                                                                                              evented_api):
    tc, api, kubelet = evented_cluster, evented_api, f"kubelet/{NODE}"
    await api.pods.create(MakePod().name("evented").req(cpu="100m", memory="32Mi").node(NODE).grace(0).obj())
    await wait_running(api, "evented")
    assert metric(tc, kubelet, "kubelet_evented_pleg_connection_success_count_total") >= 1
    relists = metric(tc, kubelet, "kubelet_pleg_relist_duration_seconds_count")
    events = metric(tc, kubelet, "kplane_kubelet_pleg_events_total")
    await crash(tc, NODE, await api.pods.get("evented"))
    # The resync is 60 s away and the relist five minutes: a restart within 15 s is the event's doing.
    await eventually(lambda: _restarted(api, "evented", 1), timeout=15, what="crashed container restarted")
    assert metric(tc, kubelet, "kplane_kubelet_pleg_events_total") > events
    assert metric(tc, kubelet, "kubelet_pleg_relist_duration_seconds_count") == relists, "no relist ran"


async def test_a_runtime_killed_under_the_stream_makes_the_kubelet_relist_and_fall_back(evented_cluster, evented_api):
    tc, api, kubelet = evented_cluster, evented_api, f"kubelet/{NODE}"
    await api.pods.create(MakePod().name("survivor").req(cpu="100m", memory="32Mi").node(NODE).grace(0).obj())
    await wait_running(api, "survivor")
    errors = metric(tc, kubelet, "kubelet_evented_pleg_connection_error_count_total")
    relists = metric(tc, kubelet, "kubelet_pleg_relist_duration_seconds_count")
    kill(tc, f"runtime/{NODE}")
    start(tc, f"runtime/{NODE}")
    await eventually(lambda: metric(tc, kubelet, "kubelet_evented_pleg_connection_error_count_total") > errors,
                     timeout=15, what="the broken stream counted")
    # The next relist is five minutes away: one now is the failed stream's doing.
    await eventually(lambda: metric(tc, kubelet, "kubelet_pleg_relist_duration_seconds_count") > relists,
                     timeout=15, what="a relist at once")
    # Relisting every second again (its retries spent while the runtime was down) or subscribed again
    # (the runtime came back first): either way the next crash reaches the kubelet within seconds.
    await crash(tc, NODE, await api.pods.get("survivor"))
    await eventually(lambda: _restarted(api, "survivor", 1), timeout=15, what="crashed container restarted")
