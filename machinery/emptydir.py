"""Memory-backed emptyDir volumes (KEP-6030, "Dynamic Resize of Memory-Backed Volumes").

A pod's volumes are kept as given (``PodSpec.volumes`` is a list of Structs); these helpers read
the ones KEP-6030 lets a resize change: ``emptyDir`` with ``medium: Memory`` (a tmpfs), whose
``sizeLimit`` the ``resize`` subresource may change with the InPlacePodVerticalScalingMemoryBackedVolumes
gate. The apiserver validates such a change (apiserver/validation/resize.py); the kubelet
allocates it with the pod's container resources, atomically, and remounts the tmpfs
(kubelet/volume_resize.py). In the kubelet's checkpoints a volume's size is stored beside the
containers' resources under ``checkpoint_key`` (a container name cannot hold a colon).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from google.protobuf import struct_pb2

from machinery.api import core_pb2

GATE: Final = "InPlacePodVerticalScalingMemoryBackedVolumes"
MEDIUM_MEMORY: Final = "Memory"
_PREFIX: Final = "emptyDir:"


def _fields(volume: struct_pb2.Struct, key: str) -> Any | None:
    """The fields of the volume's ``key`` mapping, None when it has none."""
    v = volume.fields.get(key)
    return v.struct_value.fields if v is not None and v.HasField("struct_value") else None


def _text(v: struct_pb2.Value | None) -> str | None:
    if v is None or v.HasField("null_value"):
        return None
    if v.HasField("number_value"):
        n = v.number_value
        return str(int(n)) if n == int(n) else str(n)
    return v.string_value if v.HasField("string_value") else None


def name_of(volume: struct_pb2.Struct) -> str:
    return _text(volume.fields.get("name")) or ""


def is_memory_backed(volume: struct_pb2.Struct) -> bool:
    """An ``emptyDir`` with ``medium: Memory``."""
    ed = _fields(volume, "emptyDir")
    return ed is not None and _text(ed.get("medium")) == MEDIUM_MEMORY


def size_limit(volume: struct_pb2.Struct) -> str | None:
    """The volume's ``emptyDir.sizeLimit`` as given, None without one."""
    ed = _fields(volume, "emptyDir")
    return _text(ed.get("sizeLimit")) if ed is not None else None


def without_size_limit(volume: struct_pb2.Struct) -> struct_pb2.Struct:
    """A copy of the volume without its ``emptyDir.sizeLimit`` (to compare the rest)."""
    out = struct_pb2.Struct()
    out.CopyFrom(volume)
    ed = _fields(out, "emptyDir")
    if ed is not None and "sizeLimit" in ed:
        del ed["sizeLimit"]
    return out


def size_limits(pod: core_pb2.Pod) -> dict[str, str]:
    """The ``sizeLimit`` of each memory-backed emptyDir volume that has one, by volume name."""
    out = {}
    for v in pod.spec.volumes:
        if is_memory_backed(v) and (limit := size_limit(v)) is not None:
            out[name_of(v)] = limit
    return out


def set_size_limits(pod: core_pb2.Pod, limits: dict[str, str]) -> None:
    """Set the named memory-backed volumes' ``sizeLimit`` in place (the others are left as they are)."""
    for v in pod.spec.volumes:
        fields = _fields(v, "emptyDir")
        if fields is not None and is_memory_backed(v) and name_of(v) in limits:
            fields["sizeLimit"].string_value = limits[name_of(v)]


def checkpoint_key(volume: str) -> str:
    return _PREFIX + volume


def volume_of_key(key: str) -> str | None:
    """The volume a checkpoint key names, None for a container's."""
    return key[len(_PREFIX):] if key.startswith(_PREFIX) else None


def container_keys(keys: Iterable[str]) -> list[str]:
    return [k for k in keys if not k.startswith(_PREFIX)]
