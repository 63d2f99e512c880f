"""Resizing memory-backed emptyDir volumes in place (KEP-6030, "Dynamic Resize of Memory-Backed
Volumes"): the kubelet's remount of a tmpfs, emulated, and the order it keeps with the
containers' cgroup updates (``PodRuntime._actuate``).

A memory-backed emptyDir is a tmpfs the kubelet mounts when the pod's sandbox starts, at the
volume's allocated ``sizeLimit`` (its actuated size, checkpointed beside the containers'
resources), and remounts at a new size once a resize allocated one. What the tmpfs holds is what
the pod says it holds: the annotation ``kplane.dev/volume-usage.<volume>`` (a quantity; none:
empty), read at each remount. The kernel refuses to remount a tmpfs below what it holds ("mount
point not mounted or bad option"); the kubelet then reports PodResizeInProgress with reason Error
and tries again at each sync, until the data shrinks, the resize is changed or the pod goes (the
KEP's "Shrinkage Safety").

The order ("Order of Actuation", its priority matrix): the volumes being shrunk first, then the
containers' cgroups, then the volumes being grown. A shrink that fails stops the rest for this
sync: the envelope is not tightened around a quota that did not shrink.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from kubelet.allocation.checkpoint import Resources
from kubelet.allocation.manager import AllocationManager, volume_size
from machinery.api import core_pb2
from machinery.logging import get_logger
from machinery.quantity import QuantityError, parse_quantity

log = get_logger()

USAGE_ANNOTATION: Final = "kplane.dev/volume-usage"
BAD_OPTION: Final = "mount point not mounted or bad option"


@dataclass(frozen=True)
class VolumeResize:
    name: str
    allocated: Resources  # the size to mount at
    actuated: Resources  # the size it is mounted at now

    @property
    def shrinks(self) -> bool:
        return volume_size(self.allocated) < volume_size(self.actuated)


def changes(allocated: Mapping[str, Resources], actuated: Mapping[str, Resources | None]) -> list[VolumeResize]:
    """The volumes whose allocated size is not the one they are mounted at."""
    out = []
    for name, r in sorted(allocated.items()):
        now = actuated.get(name)
        if now is not None and volume_size(now) != volume_size(r):
            out.append(VolumeResize(name, r, now))
    return out


def pending(alloc: AllocationManager, uid: str) -> list[VolumeResize]:
    """The pod's memory-backed volumes not mounted at their allocated size (``changes`` over the
    allocation manager's checkpoints): what actuation remounts, and what keeps PodResizeInProgress on."""
    sizes = alloc.volume_allocation_of(uid)
    return changes(sizes, {v: alloc.actuated_volume(uid, v) for v in sizes})


def usage(pod: core_pb2.Pod, volume: str) -> int:
    """The bytes the volume holds (its annotation; 0 without one or with a bad one, logged)."""
    text = pod.metadata.annotations.get(f"{USAGE_ANNOTATION}.{volume}")
    if not text:
        return 0
    try:
        return parse_quantity(text).value()
    except QuantityError as exc:
        log.warning("bad_volume_usage_annotation", volume=volume, value=text, error=str(exc))
        return 0


def remount(pod: core_pb2.Pod, change: VolumeResize, node: str) -> str | None:
    """``mount -o remount,size=<allocated>`` of the volume's tmpfs; the error, or None."""
    size, held = volume_size(change.allocated), usage(pod, change.name)
    if held > size:
        log.info("volume_resize_failed", node=node, pod=f"{pod.metadata.namespace}/{pod.metadata.name}",
                 volume=change.name, size=size, usage=held)
        return (f'resizing volume "{change.name}" to {size} bytes: {BAD_OPTION} (the volume holds {held} bytes)')
    log.info("volume_resized", node=node, pod=f"{pod.metadata.namespace}/{pod.metadata.name}", volume=change.name,
             size=size, was=volume_size(change.actuated))
    return None
