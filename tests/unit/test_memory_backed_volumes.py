"""KEP-6030 "Dynamic Resize of Memory-Backed Volumes" without a cluster: the apiserver's rules for
a resize's volumes (apiserver/validation/resize.py, the strategy's resize request), the kubelet's
atomic allocation of volume sizes (kubelet/allocation/manager.py) and the remount's refusal below
what the volume holds (kubelet/volume_resize.py)."""

from __future__ import annotations

from apiserver import defaults
from apiserver.strategy import PodStrategy
from apiserver.validation.resize import validate_pod_resize
from kubelet import volume_resize
from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import AllocationManager, volume_resources
from machinery import emptydir, jsonconv
from machinery.api import core_pb2
from tests.harness.builders import MakePod

MI = 1024 * 1024


def pod(size: str | None = "100Mi", *, medium: str = "Memory", cpu: str = "1", uid: str = "u1") -> core_pb2.Pod:
    p = MakePod().name("p").uid(uid).node("n1").req(cpu=cpu, memory="256Mi").lim(cpu=cpu, memory="256Mi").obj()
    doc = jsonconv.to_dict(p)
    ed: dict = {"medium": medium} if medium else {}
    if size is not None:
        ed["sizeLimit"] = size
    doc["spec"]["volumes"] = [{"name": "cache", "emptyDir": ed}]
    out = jsonconv.from_dict(core_pb2.Pod, doc)
    defaults.default_pod(out)
    out.status.qos_class = "Guaranteed"
    return out


def messages(errs) -> list[str]:
    return [str(e) for e in errs]


def test_a_memory_backed_size_limit_may_change_only_with_the_gate():
    assert validate_pod_resize(pod("200Mi"), pod(), memory_backed_volumes=True) == []
    assert messages(validate_pod_resize(pod("200Mi"), pod())) == [
        "spec: Forbidden: only cpu and memory resources are mutable"]


def test_nothing_else_of_the_volumes_may_change():
    assert messages(validate_pod_resize(pod("2Gi", medium=""), pod("1Gi", medium=""), memory_backed_volumes=True)) \
        == ["spec.volumes[0]: Forbidden: only the sizeLimit of an emptyDir volume with medium Memory may be changed "
            "on resize"]
    assert messages(validate_pod_resize(pod(None), pod(), memory_backed_volumes=True)) == [
        "spec.volumes[0].emptyDir.sizeLimit: Forbidden: sizeLimit may not be added or removed on resize"]
    assert messages(validate_pod_resize(pod("100Mi"), pod(None), memory_backed_volumes=True)) == [
        "spec.volumes[0].emptyDir.sizeLimit: Forbidden: sizeLimit may not be added or removed on resize"]
    fewer = pod()
    del fewer.spec.volumes[:]
    assert messages(validate_pod_resize(fewer, pod(), memory_backed_volumes=True)) == [
        "spec.volumes: Forbidden: volumes may not be added or removed on resize"]
    negative = messages(validate_pod_resize(pod("-1Mi"), pod(), memory_backed_volumes=True))
    assert negative and negative[0].startswith('spec.volumes[0].emptyDir.sizeLimit: Invalid value: "-1Mi"'), negative


def test_the_resize_request_takes_the_volumes_only_with_the_gate():
    old, requested = pod("100Mi"), pod("300Mi", cpu="2")
    assert emptydir.size_limits(PodStrategy.resize_request(requested, old, volumes=True)) == {"cache": "300Mi"}
    assert emptydir.size_limits(PodStrategy.resize_request(requested, old)) == {"cache": "100Mi"}


def _manager(tmp_path, cpu_millis: int = 2000) -> AllocationManager:
    m = AllocationManager(tmp_path, "n1", {"cpu": cpu_millis, "memory": 8 << 30, "pods": 110}, 110,
                          memory_backed_volumes=True)
    m.load()
    return m


def test_volume_sizes_are_allocated_with_the_containers_atomically(tmp_path):
    m = _manager(tmp_path)
    first = pod()
    assert m.add_pod(first, []).ok
    assert m.volume_allocation_of("u1") == {"cache": volume_resources("100Mi")}
    assert set(m.allocation_of("u1") or {}) == {"c1"}  # the containers' view has no volume in it
    # A volume-only resize: allocated at once (a volume does not count for room).
    assert m.handle_resize(pod("200Mi"), []) and m.volume_allocation_of("u1") == {"cache": volume_resources("200Mi")}
    # With a cpu increase that does not fit now: Deferred, and the volume waits with it.
    other = pod(uid="u2", cpu="1")
    assert not m.handle_resize(pod("300Mi", cpu="2"), [other])
    assert m.is_deferred("u1") and m.volume_allocation_of("u1") == {"cache": volume_resources("200Mi")}
    allocated, differs = m.with_allocation(pod("300Mi", cpu="2"))
    assert differs and emptydir.size_limits(allocated) == {"cache": "200Mi"}
    # Once it fits, both together.
    assert m.handle_resize(pod("300Mi", cpu="2"), [])
    assert m.volume_allocation_of("u1") == {"cache": volume_resources("300Mi")}
    assert m.allocation_of("u1")["c1"].requests["cpu"] == "2"  # type: ignore[index]


def test_a_remount_below_what_the_volume_holds_fails_as_the_kernels_does():
    holding = pod()
    holding.metadata.annotations["kplane.dev/volume-usage.cache"] = "150Mi"
    shrink = volume_resize.VolumeResize("cache", volume_resources("100Mi"), volume_resources("200Mi"))
    assert shrink.shrinks
    assert volume_resize.remount(holding, shrink, "n1") == (
        'resizing volume "cache" to 104857600 bytes: mount point not mounted or bad option (the volume holds '
        '157286400 bytes)')
    holding.metadata.annotations["kplane.dev/volume-usage.cache"] = "100Mi"
    assert volume_resize.remount(holding, shrink, "n1") is None  # exactly full fits
    grow = volume_resize.VolumeResize("cache", volume_resources("300Mi"), volume_resources("200Mi"))
    assert not grow.shrinks and volume_resize.remount(holding, grow, "n1") is None


def test_changes_are_the_volumes_not_at_their_allocated_size():
    allocated = {"a": volume_resources("100Mi"), "b": volume_resources("1Gi"), "c": volume_resources("5Mi")}
    actuated: dict[str, Resources | None] = {"a": volume_resources("104857600"), "b": volume_resources("512Mi"),
                                             "c": None}
    assert [(c.name, c.shrinks) for c in volume_resize.changes(allocated, actuated)] == [("b", False)]
