"""examples/resize_client.py, run as a program against a real cluster (docs/resize-clients.md).

KEP-1287: In-place Update of Pod Resources, as a client sees it over the gRPC API: a resize that
fits is actuated (the container's status.resources equal the new requests, no resize condition
left); one larger than the node's allocatable is refused by the apiserver (Kubernetes 1.36's
PodResizeValidator) and reported Infeasible; one that does not fit next to the other pods is
PodResizePending/Deferred ("Node didn't have enough resource") until room appears. The program's exit status says which:
0 actuated, 2 Infeasible, 3 timed out, 1 an error in one line. And server reflection, which the
document tells any client to use, lists the Pods service and its Resize method.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from machinery.quantity import Quantity
from tests.harness.api import delete_all_pods
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, ROOT, cluster_fixture
from tests.harness.wait import wait_running

pytestmark = pytest.mark.integration

EXAMPLE = ROOT / "examples" / "resize_client.py"
NODE = "node-1"
LINE = re.compile(r"^(\d+\.\d\d) (\S+) (.*)$")

resize_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="8Gi", kubelet_args=FAST_KUBELET)


@pytest.fixture
async def api(resize_cluster):
    c = resize_cluster.client()
    try:
        yield c
    finally:
        await delete_all_pods(c)
        await c.close()


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.strip().splitlines()

    def states(self) -> list[str]:
        """The state of each text line (``timeout`` lines: ``timeout <last state>``)."""
        out = []
        for line in self.lines:
            m = LINE.match(line)
            assert m, f"not '<elapsed> <state> <detail>': {line!r}"
            out.append(m.group(2))
        return out


async def _resize_client(tc, *args: str, discover: bool = False) -> Result:
    """Run the example; with ``discover`` it finds the cluster from the data dir, as ``kplane`` does."""
    where = ["--data-dir", tc.data_dir] if discover else \
        ["--server", tc.server, "--token-file", str(Path(tc.data_dir) / "tokens" / "admin.token")]
    proc = await asyncio.create_subprocess_exec(sys.executable, str(EXAMPLE), *where, *args, cwd=ROOT,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return Result(proc.returncode, out.decode(), err.decode())


async def test_a_resize_that_fits_is_actuated_and_a_guaranteed_pods_limits_follow(api, resize_cluster):
    # Guaranteed
    await api.pods.create(MakePod().name("web").req(cpu="1", memory="256Mi").lim(cpu="1", memory="256Mi").node(NODE)
                          .grace(1).resize_policy("cpu", "NotRequired").obj())
    await wait_running(api, "web")

    r = await _resize_client(resize_cluster, "web", "--cpu", "2")

    assert r.code == 0, r
    assert r.stderr == ""
    states = r.states()
    assert states[0] == "requested" and r.lines[0].endswith("generation 2: cpu=2 memory=256Mi"), r.lines
    assert states[-1] == "actuated", r.lines
    assert "Deferred" not in states and "Infeasible" not in states
    pod = await api.pods.get("web")
    c = pod.spec.containers[0].resources
    assert Quantity(c.requests["cpu"]) == Quantity("2") and Quantity(c.limits["cpu"]) == Quantity("2")
    assert pod.status.qos_class == "Guaranteed"
    assert Quantity(pod.status.container_statuses[0].resources.requests["cpu"]) == Quantity("2")


async def test_a_resize_beyond_the_nodes_allocatable_is_refused_by_the_apiserver_as_infeasible(api, resize_cluster):
    """Kubernetes 1.36's PodResizeValidator refuses it at once (403); the client says Infeasible
    with the apiserver's words and exits 2, and nothing was written."""
    await api.pods.create(MakePod().name("big").req(cpu="1", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await wait_running(api, "big")
    before = await api.pods.get("big")

    r = await _resize_client(resize_cluster, "big", "--cpu", "64", "--json")

    assert r.code == 2, r
    docs = [json.loads(line) for line in r.lines]
    assert len(docs) == 1, docs
    assert docs[0]["state"] == "Infeasible" and docs[0]["desired"] == {"cpu": "64", "memory": "256Mi"}
    assert docs[0]["refused"] == ('pods "big" is forbidden: node didn\'t have enough allocatable resources: cpu, '
                                  'requested: 64000, allocatable: 4000')
    assert docs[0]["actual"]["cpu"] == "1" and docs[0]["conditions"] == []
    after = await api.pods.get("big")
    assert after.metadata.generation == before.metadata.generation
    assert after.metadata.resource_version == before.metadata.resource_version
    text = await _resize_client(resize_cluster, "big", "--cpu", "64")
    assert text.code == 2 and text.lines[0].split(" ", 2)[1:] == [
        "Infeasible", 'pods "big" is forbidden: node didn\'t have enough allocatable resources: cpu, requested: '
                      '64000, allocatable: 4000'], text


async def test_a_pod_that_does_not_exist_is_one_line_and_exit_1(api, resize_cluster):
    r = await _resize_client(resize_cluster, "nope", "--cpu", "3", discover=True)

    assert r.code == 1, r
    assert r.stdout == ""
    assert r.stderr == "resize_client: pod default/nope not found\n"


async def test_a_resize_deferred_on_a_full_node_times_out_with_exit_3(api, resize_cluster):
    await api.pods.create(MakePod().name("grow").req(cpu="1", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await api.pods.create(MakePod().name("filler").req(cpu="2500m", memory="256Mi").node(NODE).grace(1)
                          .resize_policy("cpu", "NotRequired").obj())
    await wait_running(api, "grow", "filler")

    r = await _resize_client(resize_cluster, "grow", "--cpu", "3", "--timeout", "3")  # 3 + 2.5 > 4

    assert r.code == 3, r
    deferred = [line for line, state in zip(r.lines, r.states(), strict=True) if state == "Deferred"]
    assert deferred, r.lines
    assert "Node didn't have enough resource: cpu, requested: 3000" in deferred[0], deferred
    assert re.match(r"^\d+\.\d\d timeout Deferred Node didn't have enough resource: cpu", r.lines[-1]), r.lines
    assert float(LINE.match(r.lines[-1]).group(1)) >= 3.0
    pod = await api.pods.get("grow")
    assert Quantity(pod.status.container_statuses[0].resources.requests["cpu"]) == Quantity("1")


async def test_server_reflection_lists_the_pods_service_and_its_resize_method(resize_cluster):
    channel = grpc.insecure_channel(resize_cluster.server)  # grpc_reflection's database is synchronous
    try:
        db = ProtoReflectionDescriptorDatabase(channel)
        services = await asyncio.to_thread(db.get_services)
        assert "kplane.v1.Pods" in services, services
        pods = await asyncio.to_thread(DescriptorPool(db).FindServiceByName, "kplane.v1.Pods")
        assert {"Get", "Watch", "Resize"} <= set(pods.methods_by_name)
        resize = pods.methods_by_name["Resize"]
        assert resize.input_type.full_name == "kplane.v1.Pod"
        assert resize.output_type.full_name == "kplane.v1.Pod"
    finally:
        channel.close()
