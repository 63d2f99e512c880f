"""KEP-6030 "Dynamic Resize of Memory-Backed Volumes" (Kubernetes 1.37 alpha, gate
InPlacePodVerticalScalingMemoryBackedVolumes), as upstream's resize e2e checks it, on real
processes with the real kubectl: an emptyDir with ``medium: Memory`` resized through
``pods/resize`` together with the container's memory — grown cgroup first ("Order of
Actuation"), shrunk volume first; a shrink below what the tmpfs holds refused by the kernel
("Shrinkage Safety": PodResizeInProgress Error, retried until the data shrinks); a resize that is
Deferred leaves its volume as it was while another pod's volume resize goes through ("Atomic
Resize Principle"); and the API's restrictions ("API Validation and Restrictions").

What the kubelet mounted is read from its actuated checkpoint (``emptyDir:<volume>``), the order
from the kubelet's ``volume_resized`` and the runtime's ``container_resources_updated`` records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kubelet.allocation.checkpoint import ALLOCATED_FILE
from machinery import jsonconv
from machinery.api import core_pb2
from machinery.quantity import Quantity
from tests.harness import kubectl as kubectl_cmd
from tests.harness.api import api_fixture
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.node_state import checkpointed
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.scenario

NODE = "node-1"
GATE = "InPlacePodVerticalScalingMemoryBackedVolumes=true"
volume_cluster = cluster_fixture(nodes=1, node_cpu="4", node_memory="4Gi", kubelet_args=FAST_KUBELET,
                                 feature_gates=GATE)
MI = 1024 * 1024


def _kubectl(tc, tmp_path: Path, *args: str):
    return kubectl_cmd.run(tc.kubeconfig, tmp_path / "cache", *args, timeout=60)


def _pod(name: str, *, size: str = "100Mi", memory: str = "256Mi", cpu: str = "500m",
         disk: bool = False) -> core_pb2.Pod:
    pod = (MakePod().name(name).node(NODE).req(cpu=cpu, memory=memory).lim(cpu=cpu, memory=memory).grace(1)
           .resize_policy("cpu", "NotRequired").resize_policy("memory", "NotRequired").obj())
    doc = jsonconv.to_dict(pod)
    volumes = [{"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": size}}]
    if disk:
        volumes.append({"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}})
    doc["spec"]["volumes"] = volumes
    doc["spec"]["containers"][0]["volumeMounts"] = [{"name": v["name"], "mountPath": f"/{v['name']}"}
                                                    for v in volumes]
    return jsonconv.from_dict(core_pb2.Pod, doc)


def _resize(tc, tmp_path: Path, pod: str, *, size: str | None = None, memory: str | None = None,
            cpu: str | None = None, volume: dict | None = None):
    spec: dict = {}
    if size is not None or volume is not None:
        spec["volumes"] = [volume or {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": size}}]
    res = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if res:
        spec["containers"] = [{"name": "c1", "resources": {"requests": res, "limits": res}}]
    return _kubectl(tc, tmp_path, "patch", "pod", pod, "--subresource", "resize", "-p", json.dumps({"spec": spec}))


def _mounted(tc, uid: str, which: str = "actuated_pods_state") -> int:
    """The size the kubelet has the pod's cache volume at: actuated (mounted) or allocated."""
    r = checkpointed(tc, NODE, uid, which).get("emptyDir:cache")
    return Quantity(r.limits["memory"]).value() if r is not None else -1


def _condition(pod: core_pb2.Pod, type_: str):
    return next((c for c in pod.status.conditions if c.type == type_ and c.status == "True"), None)


async def _settled(api, name: str, what: str) -> core_pb2.Pod:
    """Until the pod has no resize condition left and runs at its spec."""
    async def done() -> bool:
        pod = await api.pods.get(name)
        cs = pod.status.container_statuses
        return (pod.status.observed_generation == pod.metadata.generation and not any(
            _condition(pod, t) for t in ("PodResizePending", "PodResizeInProgress")) and bool(cs) and
            cs[0].resources.limits.get("memory") == pod.spec.containers[0].resources.limits["memory"])
    await eventually(done, timeout=30, what=what)
    return await api.pods.get(name)


def _records(tc, log: str, event: str, pod: str) -> list[dict]:
    path = Path(tc.data_dir) / "logs" / log
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("event") == event and rec.get("pod") == f"default/{pod}":
            out.append(rec)
    return out


api = api_fixture("volume_cluster")


async def test_upsize_with_the_containers_memory_cgroup_first_then_shrink_volume_first(api, volume_cluster,
                                                                                       tmp_path):
    tc = volume_cluster
    await api.pods.create(_pod("grow"))
    await wait_running(api, "grow", timeout=30)
    uid = (await api.pods.get("grow")).metadata.uid
    assert _mounted(tc, uid) == 100 * MI  # mounted at its sizeLimit when the sandbox started

    r = _resize(tc, tmp_path, "grow", size="200Mi", memory="512Mi")
    assert r.returncode == 0, r.stderr
    pod = await _settled(api, "grow", "the volume and memory upsize actuated")
    assert pod.metadata.generation == 2
    assert _mounted(tc, uid) == 200 * MI and _mounted(tc, uid, ALLOCATED_FILE) == 200 * MI
    # Expansion: the cgroup's memory limit first, the tmpfs quota after it.
    [grown] = _records(tc, "kubelet-node-1.log", "volume_resized", "grow")
    cgroup = [rec for rec in _records(tc, "runtime-node-1.log", "container_resources_updated", "grow")
              if rec["applied"].get("memory_limit_in_bytes") == 512 * MI]
    assert cgroup and cgroup[0]["ts"] <= grown["ts"], (cgroup, grown)
    assert (grown["size"], grown["was"]) == (200 * MI, 100 * MI)

    # Contraction: the tmpfs quota first, the cgroup after it.
    r = _resize(tc, tmp_path, "grow", size="50Mi", memory="256Mi")
    assert r.returncode == 0, r.stderr
    await _settled(api, "grow", "the volume and memory downsize actuated")
    assert _mounted(tc, uid) == 50 * MI
    shrunk = _records(tc, "kubelet-node-1.log", "volume_resized", "grow")[-1]
    cgroup = [rec for rec in _records(tc, "runtime-node-1.log", "container_resources_updated", "grow")
              if rec["applied"].get("memory_limit_in_bytes") == 256 * MI and rec["ts"] >= grown["ts"]]
    assert cgroup and shrunk["ts"] <= cgroup[0]["ts"], (shrunk, cgroup)


async def test_a_shrink_below_what_the_volume_holds_is_refused_until_the_data_shrinks(api, volume_cluster,
                                                                                      tmp_path):
    tc = volume_cluster
    pod = _pod("full", size="200Mi")
    pod.metadata.annotations["kplane.dev/volume-usage.cache"] = "150Mi"
    await api.pods.create(pod)
    await wait_running(api, "full", timeout=30)
    uid = (await api.pods.get("full")).metadata.uid

    r = _resize(tc, tmp_path, "full", size="100Mi")
    assert r.returncode == 0, r.stderr

    async def refused() -> bool:
        c = _condition(await api.pods.get("full"), "PodResizeInProgress")
        return c is not None and c.reason == "Error"

    await eventually(refused, timeout=30, what="PodResizeInProgress Error")
    c = _condition(await api.pods.get("full"), "PodResizeInProgress")
    assert c.message == ('resizing volume "cache" to 104857600 bytes: mount point not mounted or bad option '
                         '(the volume holds 157286400 bytes)'), c.message
    assert _mounted(tc, uid) == 200 * MI and _mounted(tc, uid, ALLOCATED_FILE) == 100 * MI

    # The data shrinks: the next sync's remount succeeds.
    r = _kubectl(tc, tmp_path, "annotate", "pod", "full", "--overwrite", "kplane.dev/volume-usage.cache=60Mi")
    assert r.returncode == 0, r.stderr
    await _settled(api, "full", "the shrink actuated once the data fits")
    assert _mounted(tc, uid) == 100 * MI
    assert (await api.pods.get("full")).status.container_statuses[0].restart_count == 0


async def test_a_deferred_resize_keeps_its_volume_while_another_pods_volume_resize_goes_through(api, volume_cluster,
                                                                                                tmp_path):
    tc = volume_cluster
    await api.pods.create(_pod("waits", cpu="1"))
    await api.pods.create(_pod("other", cpu="500m"))
    await api.pods.create(MakePod().name("filler").node(NODE).req(cpu="2500m", memory="64Mi").grace(1).obj())
    for name in ("waits", "other", "filler"):
        await wait_running(api, name, timeout=30)
    waits, other = (await api.pods.get("waits")).metadata.uid, (await api.pods.get("other")).metadata.uid

    # 1 + 0.5 + 2.5 of 4 cpus: two more for "waits" do not fit now. Its volume waits with it.
    r = _resize(tc, tmp_path, "waits", size="300Mi", cpu="3")
    assert r.returncode == 0, r.stderr

    async def deferred() -> bool:
        c = _condition(await api.pods.get("waits"), "PodResizePending")
        return c is not None and c.reason == "Deferred"

    await eventually(deferred, timeout=30, what="the cpu and volume resize Deferred")
    # The other pod's volume resize does not wait for it (a volume does not count for room).
    r = _resize(tc, tmp_path, "other", size="400Mi")
    assert r.returncode == 0, r.stderr
    await _settled(api, "other", "the other pod's volume resize actuated")
    assert _mounted(tc, other) == 400 * MI
    assert _mounted(tc, waits) == 100 * MI and _mounted(tc, waits, ALLOCATED_FILE) == 100 * MI
    assert _condition(await api.pods.get("waits"), "PodResizePending").reason == "Deferred"

    await api.pods.delete("filler", "default", grace_period_seconds=0)
    await _settled(api, "waits", "the deferred resize actuated, its volume with it")
    assert _mounted(tc, waits) == 300 * MI


async def test_api_validation_only_a_memory_backed_size_limit_may_change(api, volume_cluster, tmp_path):
    tc = volume_cluster
    await api.pods.create(_pod("strict", disk=True))
    await wait_running(api, "strict", timeout=30)
    before = await api.pods.get("strict")

    disk = _resize(tc, tmp_path, "strict", volume={"name": "scratch", "emptyDir": {"sizeLimit": "2Gi"}})
    assert disk.returncode == 1
    assert ('spec.volumes[1]: Forbidden: only the sizeLimit of an emptyDir volume with medium Memory may be '
            'changed on resize') in disk.stderr, disk.stderr
    removed = _resize(tc, tmp_path, "strict", volume={"name": "cache", "emptyDir": {"sizeLimit": None}})
    assert removed.returncode == 1
    assert "spec.volumes[0].emptyDir.sizeLimit: Forbidden: sizeLimit may not be added or removed on resize" \
        in removed.stderr, removed.stderr
    added = _kubectl(tc, tmp_path, "patch", "pod", "strict", "--subresource", "resize", "--type", "json", "-p",
                     json.dumps([{"op": "add", "path": "/spec/volumes/-",
                                  "value": {"name": "more", "emptyDir": {"medium": "Memory"}}}]))
    assert added.returncode == 1
    assert "spec.volumes: Forbidden: volumes may not be added or removed on resize" in added.stderr, added.stderr
    negative = _resize(tc, tmp_path, "strict", size="-1Mi")
    assert negative.returncode == 1 and "spec.volumes[0].emptyDir.sizeLimit" in negative.stderr, negative.stderr
    after = await api.pods.get("strict")
    assert after.metadata.resource_version == before.metadata.resource_version  # nothing written
