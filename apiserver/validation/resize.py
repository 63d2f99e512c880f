"""In-place pod resize (KEP-1287): Kubernetes' ValidatePodResize for the ``resize`` subresource.

Only cpu and memory requests and limits of regular containers and restartable init containers
(sidecars) may change. The order of the checks is Kubernetes':

1. the feature gate (kplane: the subresource answers only when InPlacePodVerticalScaling is on);
2. metadata update rules, and the resized pod must pass pod create validation
   (limits >= requests, quantities, resizePolicy values, ...);
3. pods with pod-level resources, static (mirror) pods and Windows pods cannot be resized;
4. the QoS class may not change;
5. version skew: at the first running container in ``status.containerStatuses``, the node's
   kubelet supports resize only if it reported ``resources`` (possibly ``{}``);
6. containers may not be renamed or reordered (nothing else is checked if they are);
7. requests and limits may not be removed;
8. kplane keeps ``resizePolicy`` immutable (docs/apiserver.md, "Resize"), where Kubernetes >= 1.33
   lets resize change it;
9. only cpu and memory may change; resources of non-sidecar init containers not at all;
10. no other field of the spec may change; with InPlacePodVerticalScalingMemoryBackedVolumes
    (KEP-6030, alpha), but for the ``sizeLimit`` of an emptyDir volume with ``medium: Memory``,
    which may change but not be added or removed (the alpha's rule), in a pod whose volumes are
    neither added nor removed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from apiserver.validation._common import FIELD_IMMUTABLE, fields_equal, parse_q, quantity_maps_equal
from apiserver.validation.meta import validate_object_meta_update
from apiserver.validation.pod import MIRROR_POD_ANNOTATION, options_for_update, validate_pod_metadata_and_spec
from apiserver.validation.quantities import validate_quantity_value
from machinery import emptydir, resources
from machinery.api import core_pb2
from machinery.errors import FieldError, forbidden, invalid

_CPU_MEMORY: Final = ("cpu", "memory")
_CONTAINER_SKIP: Final = frozenset({"resources", "resize_policy"})
_SPEC_SKIP: Final = frozenset({"containers", "init_containers"})
_VOLUMES: Final = frozenset({"volumes"})

ONLY_CPU_MEMORY: Final = "only cpu and memory resources are mutable"
ONLY_CPU_MEMORY_SIDECAR: Final = "only cpu and memory resources for sidecar containers are mutable"
NON_SIDECAR_IMMUTABLE: Final = "resources for non-sidecar init containers are immutable"
QOS_MAY_NOT_CHANGE: Final = "Pod QOS Class may not change as a result of resizing"
NODE_WITHOUT_RESIZE: Final = "Pod running on node without support for resize"


def is_pod_resize_request_supported(pod: core_pb2.Pod) -> bool:
    """KEP-1287's version-skew rule: the first running container tells whether its kubelet
    supports resize (it reports ``status.containerStatuses[].resources``, ``{}`` included).
    Without running containers there is no signal, and the resize is allowed."""
    for cs in pod.status.container_statuses:
        if cs.state.HasField("running"):
            return cs.HasField("resources")
    return True


def _pod_level_resources_set(pod: core_pb2.Pod) -> bool:
    r = pod.spec.resources
    return pod.spec.HasField("resources") and bool(len(r.requests) + len(r.limits))


def _ordering_errors(new: core_pb2.PodSpec, old: core_pb2.PodSpec) -> list[FieldError]:
    errs: list[FieldError] = []
    for field, json in (("containers", "containers"), ("init_containers", "initContainers")):
        n, o = getattr(new, field), getattr(old, field)
        if len(n) != len(o):
            errs.append(forbidden(f"spec.{json}", f"{json} may not be added or removed on resize"))
            continue
        for i, (nc, oc) in enumerate(zip(n, o, strict=True)):
            if nc.name != oc.name:
                errs.append(forbidden(f"spec.{json}[{i}].name", f"{json} may not be renamed or reordered on resize"))
    return errs


def _removed(new: Mapping[str, str], old: Mapping[str, str]) -> bool:
    return len(old) > len(new) or any(name not in new for name in old)


def _removal_errors(new: core_pb2.Container, old: core_pb2.Container, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if _removed(new.resources.requests, old.resources.requests):
        errs.append(forbidden(f"{path}.requests", "resource requests cannot be removed"))
    if _removed(new.resources.limits, old.resources.limits):
        errs.append(forbidden(f"{path}.limits", "resource limits cannot be removed"))
    return errs


def _non_cpu_memory_equal(new: Mapping[str, str], old: Mapping[str, str]) -> bool:
    """Go's dropCPUMemoryResourcesFromContainer comparison for one ResourceList: with cpu and
    memory taken from the old list, the lists must be equal. A list that was empty before
    compares equal whatever it holds now (Kubernetes lets a resize add to it)."""
    if not old:
        return True
    rest_new = {k: new[k] for k in new if k not in _CPU_MEMORY}
    rest_old = {k: old[k] for k in old if k not in _CPU_MEMORY}
    return quantity_maps_equal(rest_new, rest_old)


def _only_cpu_memory_changed(new: core_pb2.Container, old: core_pb2.Container) -> bool:
    if not fields_equal(new, old, _CONTAINER_SKIP):
        return False
    nr, orr = new.resources, old.resources
    return _non_cpu_memory_equal(nr.limits, orr.limits) and _non_cpu_memory_equal(nr.requests, orr.requests) \
        and list(nr.claims) == list(orr.claims)


def _resources_equal(new: core_pb2.Container, old: core_pb2.Container) -> bool:
    nr, orr = new.resources, old.resources
    return quantity_maps_equal(nr.limits, orr.limits) and quantity_maps_equal(nr.requests, orr.requests) \
        and list(nr.claims) == list(orr.claims)


def _resize_policy_errors(new: Sequence[core_pb2.Container], old: Sequence[core_pb2.Container],
                          path: str) -> list[FieldError]:
    return [forbidden(f"{path}[{i}].resizePolicy", FIELD_IMMUTABLE)
            for i, (n, o) in enumerate(zip(new, old, strict=True)) if list(n.resize_policy) != list(o.resize_policy)]


VOLUMES_ADDED_OR_REMOVED: Final = "volumes may not be added or removed on resize"
ONLY_MEMORY_BACKED_SIZE_LIMIT: Final = ("only the sizeLimit of an emptyDir volume with medium Memory may be changed "
                                        "on resize")
SIZE_LIMIT_ADDED_OR_REMOVED: Final = "sizeLimit may not be added or removed on resize"


def _volume_errors(new: core_pb2.PodSpec, old: core_pb2.PodSpec) -> list[FieldError]:
    """KEP-6030 "API Validation and Restrictions": the volumes as they were, but for the sizeLimit
    of memory-backed emptyDir volumes, changed (a quantity), not added or removed."""
    if [emptydir.name_of(v) for v in new.volumes] != [emptydir.name_of(v) for v in old.volumes]:
        return [forbidden("spec.volumes", VOLUMES_ADDED_OR_REMOVED)]
    errs: list[FieldError] = []
    for i, (nv, ov) in enumerate(zip(new.volumes, old.volumes, strict=True)):
        if nv == ov:
            continue
        path = f"spec.volumes[{i}]"
        was, now = emptydir.size_limit(ov), emptydir.size_limit(nv)
        same_but_limit = emptydir.without_size_limit(nv) == emptydir.without_size_limit(ov)
        if not (emptydir.is_memory_backed(ov) and same_but_limit):
            errs.append(forbidden(path, ONLY_MEMORY_BACKED_SIZE_LIMIT))
        elif (was is None) != (now is None):
            errs.append(forbidden(f"{path}.emptyDir.sizeLimit", SIZE_LIMIT_ADDED_OR_REMOVED))
        elif now is not None and (q := parse_q(now, f"{path}.emptyDir.sizeLimit", errs)) is not None:
            errs.extend(validate_quantity_value("memory", q, f"{path}.emptyDir.sizeLimit"))
    return errs


def validate_pod_resize(new: core_pb2.Pod, old: core_pb2.Pod, *, in_place_enabled: bool = True,
                        memory_backed_volumes: bool = False) -> list[FieldError]:
    """Validate ``new`` (the pod as the resize would leave it) against the stored ``old`` pod;
    ``memory_backed_volumes``: the InPlacePodVerticalScalingMemoryBackedVolumes gate (KEP-6030)."""
    if not in_place_enabled:
        return [forbidden("", "in-place pod resize is disabled")]
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(validate_pod_metadata_and_spec(new, options_for_update(old)))

    if _pod_level_resources_set(old) or _pod_level_resources_set(new):
        return [forbidden("", "pods with pod-level resources cannot be resized")]
    if MIRROR_POD_ANNOTATION in old.metadata.annotations:
        return [forbidden("", "static pods cannot be resized")]
    if old.spec.HasField("os") and old.spec.os.name == "windows":
        return [forbidden("", "windows pods cannot be resized")]

    old_qos = resources.qos_class(old)
    try:
        new_qos = resources.compute_qos(new)
    except ValueError:
        new_qos = old_qos  # a malformed quantity, already reported by create validation
    if old_qos != new_qos:
        errs.append(invalid("spec", old_qos, QOS_MAY_NOT_CHANGE))
    if not is_pod_resize_request_supported(old):
        errs.append(forbidden("spec", NODE_WITHOUT_RESIZE))

    ordering = _ordering_errors(new.spec, old.spec)
    if ordering:
        return errs + ordering

    ns, os_ = new.spec, old.spec
    for i, oc in enumerate(os_.init_containers):
        if resources.is_restartable_init_container(oc):
            errs.extend(_removal_errors(ns.init_containers[i], oc, f"spec.initContainers[{i}].resources"))
    for i, oc in enumerate(os_.containers):
        errs.extend(_removal_errors(ns.containers[i], oc, f"spec.containers[{i}].resources"))

    errs.extend(_resize_policy_errors(ns.containers, os_.containers, "spec.containers"))
    errs.extend(_resize_policy_errors(ns.init_containers, os_.init_containers, "spec.initContainers"))

    for nc, oc in zip(ns.containers, os_.containers, strict=True):
        if not _only_cpu_memory_changed(nc, oc):
            errs.append(forbidden("spec", ONLY_CPU_MEMORY))
    for i, (nc, oc) in enumerate(zip(ns.init_containers, os_.init_containers, strict=True)):
        if resources.is_restartable_init_container(nc):
            if not _only_cpu_memory_changed(nc, oc):
                errs.append(forbidden("spec", ONLY_CPU_MEMORY_SIDECAR))
        elif not fields_equal(nc, oc, _CONTAINER_SKIP) or not _resources_equal(nc, oc):
            errs.append(forbidden(f"spec.initContainers[{i}].resources", NON_SIDECAR_IMMUTABLE))
    if errs:
        return errs

    if memory_backed_volumes:
        errs.extend(_volume_errors(ns, os_))
    if not fields_equal(ns, os_, _SPEC_SKIP | _VOLUMES if memory_backed_volumes else _SPEC_SKIP):
        errs.append(forbidden("spec", ONLY_CPU_MEMORY))
    return errs
