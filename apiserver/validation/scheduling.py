"""PriorityClasses (scheduling.k8s.io/v1): Kubernetes' ValidatePriorityClass and
ValidatePriorityClassUpdate.

User-defined classes may not exceed 1000000000; names starting with ``system-`` are reserved for
the two built-in classes, which must keep their values and ``globalDefault: false``.
"""

from __future__ import annotations

from typing import Final

from apiserver.validation._common import FIELD_IMMUTABLE
from apiserver.validation.meta import name_is_dns_subdomain, validate_object_meta, validate_object_meta_update
from apiserver.validation.pod import validate_preemption_policy
from machinery.api import scheduling_pb2
from machinery.errors import FieldError, forbidden, invalid

HIGHEST_USER_DEFINABLE_PRIORITY: Final = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY: Final = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASS_PREFIX: Final = "system-"
# name -> value of the built-in classes (both with globalDefault false).
SYSTEM_PRIORITY_CLASSES: Final = {
    "system-node-critical": SYSTEM_CRITICAL_PRIORITY + 1000,
    "system-cluster-critical": SYSTEM_CRITICAL_PRIORITY,
}


def _known_system_class_error(pc: scheduling_pb2.PriorityClass) -> str | None:
    value = SYSTEM_PRIORITY_CLASSES.get(pc.metadata.name)
    if value is None:
        return f"{pc.metadata.name} is not a known system priority class"
    if pc.value != value:
        return f"value of {pc.metadata.name} PriorityClass must be {value}"
    if pc.global_default:
        return f"globalDefault of {pc.metadata.name} PriorityClass must be false"
    return None


def validate_priority_class(pc: scheduling_pb2.PriorityClass) -> list[FieldError]:
    errs = validate_object_meta(pc.metadata, False, name_is_dns_subdomain)
    if pc.metadata.name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        err = _known_system_class_error(pc)
        if err:
            errs.append(forbidden("metadata.name", f"priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' "
                                                   f"prefix are reserved for system use only. error: {err}"))
    elif pc.value > HIGHEST_USER_DEFINABLE_PRIORITY:
        errs.append(forbidden("value", f"maximum allowed value of a user defined priority is "
                                       f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if pc.HasField("preemption_policy"):
        errs.extend(validate_preemption_policy(pc.preemption_policy, "preemptionPolicy"))
    return errs


def validate_priority_class_update(new: scheduling_pb2.PriorityClass,
                                   old: scheduling_pb2.PriorityClass) -> list[FieldError]:
    """Name (via metadata), value and preemptionPolicy are immutable."""
    errs = validate_object_meta_update(new.metadata, old.metadata)
    if new.value != old.value:
        errs.append(forbidden("value", "may not be changed in an update."))
    new_policy = new.preemption_policy if new.HasField("preemption_policy") else None
    old_policy = old.preemption_policy if old.HasField("preemption_policy") else None
    if new_policy != old_policy:
        errs.append(invalid("preemptionPolicy", new_policy, FIELD_IMMUTABLE))
    return errs
