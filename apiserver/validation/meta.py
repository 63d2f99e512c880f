"""Object metadata: Kubernetes' ValidateObjectMeta and ValidateObjectMetaUpdate.

Name functions take ``(name, prefix)`` and return Kubernetes' messages, as Go's
``ValidateNameFunc`` does; ``prefix`` is true for ``generateName`` (a trailing dash allowed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Final

from apiserver.validation._common import (
    FIELD_IMMUTABLE,
    GoValue,
    go_strings,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    labels_ok,
    too_long,
    validate_labels,
    validate_nonnegative,
)
from machinery import timeutil
from machinery.api import meta_pb2
from machinery.errors import FieldError, forbidden, invalid, required

NameFn = Callable[[str, bool], Sequence[str]]

TOTAL_ANNOTATION_SIZE_LIMIT: Final = 256 * 1024
STANDARD_FINALIZERS: Final = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def _mask_trailing_dash(name: str) -> str:
    """generateName may end in '-': check it as if a character followed."""
    if len(name) > 1 and name.endswith("-"):
        return name[:-1] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> Sequence[str]:
    """Most kinds (pods, nodes, priority classes, leases, DRA objects)."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> Sequence[str]:
    """Namespaces."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_path_segment(name: str, prefix: bool) -> list[str]:
    """The generic check every kind gets (PodDisruptionBudget and core/v1 Event get no other)."""
    if not prefix:
        for illegal in (".", ".."):
            if name == illegal:
                return [f"may not be '{illegal}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in name]


@lru_cache(maxsize=16384)
def _annotation_key_ok(key: str) -> bool:
    return not is_qualified_name(key.lower())


def annotations_ok(annotations: Mapping[str, str]) -> bool:
    """Whether ``validate_annotations`` finds nothing wrong (a fast pre-check)."""
    size = 0
    for k in annotations:
        if not _annotation_key_ok(k):
            return False
        size += len(k.encode()) + len(annotations[k].encode())
    return size <= TOTAL_ANNOTATION_SIZE_LIMIT


def validate_annotations(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    """Keys are qualified names (case-insensitive); keys and values total at most 256 KiB."""
    if not annotations or annotations_ok(annotations):
        return []
    errs: list[FieldError] = []
    size = 0
    for k in sorted(annotations):
        errs.extend(invalid(path, k, m) for m in is_qualified_name(k.lower()))
        size += len(k.encode()) + len(annotations[k].encode())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def _validate_finalizers(finalizers: Iterable[str], path: str, kube: bool) -> list[FieldError]:
    errs: list[FieldError] = []
    finalizers = list(finalizers)
    for f in finalizers:
        errs.extend(invalid(path, f, m) for m in is_qualified_name(f))
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        errs.append(invalid(path, GoValue(go_strings(finalizers)),
                            "finalizer orphan and foregroundDeletion cannot be both set"))
    if kube:
        for i, f in enumerate(finalizers):
            if "/" not in f and f not in STANDARD_FINALIZERS:
                errs.append(invalid(f"{path}[{i}]", f,
                                    "name is neither a standard finalizer name nor is it fully qualified"))
    return errs


def _validate_owner_references(refs: Iterable[meta_pb2.OwnerReference], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    controller = ""
    for ref in refs:
        group_version = ref.api_version.split("/")
        version = group_version[-1] if len(group_version) <= 2 else ""
        if not version:
            errs.append(invalid(f"{path}.apiVersion", ref.api_version, "version must not be empty"))
        if not ref.kind:
            errs.append(invalid(f"{path}.kind", ref.kind, "must not be empty"))
        if not ref.name:
            errs.append(invalid(f"{path}.name", ref.name, "must not be empty"))
        if not ref.uid:
            errs.append(invalid(f"{path}.uid", ref.uid, "must not be empty"))
        if ref.controller:
            name = f"{ref.kind}/{ref.name}"
            if controller:
                errs.append(invalid(path, GoValue("[]v1.OwnerReference{...}"),
                                    "Only one reference can have Controller set to true. Found \"true\" in "
                                    f"references for {controller} and {name}"))
            else:
                controller = name
    return errs


def validate_object_meta(meta: meta_pb2.ObjectMeta, namespaced: bool, name_fn: NameFn,
                         path: str = "metadata", *, kube_finalizers: bool = True) -> list[FieldError]:
    """Kubernetes' ValidateObjectMeta on create (name generation already done).

    ``kube_finalizers`` adds core/v1's check that unqualified finalizers are standard ones."""
    errs: list[FieldError] = []
    generate_name = meta.generate_name
    if generate_name:
        msgs = name_fn(generate_name, True)
        if msgs:
            errs.extend(invalid(f"{path}.generateName", generate_name, m) for m in msgs)
    name = meta.name
    if not name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    else:
        msgs = name_fn(name, False)
        if msgs:
            errs.extend(invalid(f"{path}.name", name, m) for m in msgs)
    namespace = meta.namespace
    if namespaced:
        if not namespace:
            errs.append(required(f"{path}.namespace"))
        else:
            msgs = is_dns1123_label(namespace)
            if msgs:
                errs.extend(invalid(f"{path}.namespace", namespace, m) for m in msgs)
    elif namespace:
        errs.append(forbidden(f"{path}.namespace", "not allowed on this type"))
    generation = meta.generation
    if generation < 0:
        errs.extend(validate_nonnegative(generation, f"{path}.generation"))
    labels = meta.labels
    if labels and not labels_ok(labels):
        errs.extend(validate_labels(labels, f"{path}.labels"))
    annotations = meta.annotations
    if annotations and not annotations_ok(annotations):
        errs.extend(validate_annotations(annotations, f"{path}.annotations"))
    refs = meta.owner_references
    if refs:
        errs.extend(_validate_owner_references(refs, f"{path}.ownerReferences"))
    finalizers = meta.finalizers
    if finalizers:
        errs.extend(_validate_finalizers(finalizers, f"{path}.finalizers", kube_finalizers))
    return errs


def _go_time(text: str) -> GoValue:
    """A metav1.Time as Go prints it (``2024-01-02 03:04:05 +0000 UTC``)."""
    try:
        t = timeutil.parse(text)
    except ValueError:
        t = None
    if t is None:
        return GoValue(text or "0001-01-01 00:00:00 +0000 UTC")
    return GoValue(t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC"))


def validate_object_meta_update(new: meta_pb2.ObjectMeta, old: meta_pb2.ObjectMeta, path: str = "metadata",
                                *, kube_finalizers: bool = True) -> list[FieldError]:
    """Kubernetes' ValidateObjectMetaUpdate, after the generic registry's backfill.

    Kubernetes copies uid and creationTimestamp from the stored object when an update leaves
    them empty, and keeps a deletionTimestamp once set; only an actual change is an error here.
    The resourceVersion precondition is the registry's (optimistic concurrency), not checked here.
    """
    errs: list[FieldError] = []
    old_deletion = old.deletion_timestamp
    if old_deletion:
        extra = sorted(set(new.finalizers) - set(old.finalizers))
        if extra:
            errs.append(forbidden(f"{path}.finalizers", "no new finalizers can be added if the object is being "
                                  f"deleted, found new finalizers {go_strings(extra)}"))
    if new.generation < old.generation:
        errs.append(invalid(f"{path}.generation", new.generation, "must not be decremented"))
    name = new.name
    if name != old.name:
        errs.append(invalid(f"{path}.name", name, FIELD_IMMUTABLE))
    namespace = new.namespace
    if namespace != old.namespace:
        errs.append(invalid(f"{path}.namespace", namespace, FIELD_IMMUTABLE))
    uid = new.uid
    if uid and uid != old.uid:
        errs.append(invalid(f"{path}.uid", uid, FIELD_IMMUTABLE))
    created = new.creation_timestamp
    if created and created != old.creation_timestamp:
        errs.append(invalid(f"{path}.creationTimestamp", _go_time(created), FIELD_IMMUTABLE))
    if not old_deletion:
        deletion = new.deletion_timestamp
        if deletion:
            errs.append(invalid(f"{path}.deletionTimestamp", _go_time(deletion), FIELD_IMMUTABLE))
    if new.HasField("deletion_grace_period_seconds"):
        if not old.HasField("deletion_grace_period_seconds") or \
                old.deletion_grace_period_seconds != new.deletion_grace_period_seconds:
            errs.append(invalid(f"{path}.deletionGracePeriodSeconds", new.deletion_grace_period_seconds,
                                FIELD_IMMUTABLE))
    labels = new.labels
    if labels and not labels_ok(labels):
        errs.extend(validate_labels(labels, f"{path}.labels"))
    annotations = new.annotations
    if annotations and not annotations_ok(annotations):
        errs.extend(validate_annotations(annotations, f"{path}.annotations"))
    refs = new.owner_references
    if refs:
        errs.extend(_validate_owner_references(refs, f"{path}.ownerReferences"))
    if kube_finalizers:
        finalizers = new.finalizers
        if finalizers:
            for i, f in enumerate(finalizers):
                if "/" not in f and f not in STANDARD_FINALIZERS:
                    errs.append(invalid(f"{path}.finalizers[{i}]", f,
                                        "name is neither a standard finalizer name nor is it fully qualified"))
    return errs
