"""core/v1 Events: Kubernetes' legacy event validation (what the v1 API applies: the involved
object's namespace must match the event's; events with ``eventTime`` need the reporting
fields), plus the generic object metadata checks every kind gets, plus one events.k8s.io rule:
a type, when given, is Normal or Warning."""

from __future__ import annotations

from typing import Final

from apiserver.validation._common import is_dns1123_subdomain, is_qualified_name
from apiserver.validation.meta import name_is_path_segment, validate_object_meta, validate_object_meta_update
from machinery.api import core_pb2
from machinery.errors import FieldError, invalid, required

REPORTING_INSTANCE_LENGTH_LIMIT: Final = 128
ACTION_LENGTH_LIMIT: Final = 128
REASON_LENGTH_LIMIT: Final = 128
NOTE_LENGTH_LIMIT: Final = 1024
_EVENT_TYPES: Final = ("Normal", "Warning")


def _legacy_validate(event: core_pb2.Event) -> list[FieldError]:
    errs: list[FieldError] = []
    ns, involved_ns = event.metadata.namespace, event.involved_object.namespace
    mismatch = "does not match event.namespace"
    if not event.event_time:
        if not involved_ns:
            if ns not in ("", "default"):
                errs.append(invalid("involvedObject.namespace", involved_ns, mismatch))
        elif ns != involved_ns:
            errs.append(invalid("involvedObject.namespace", involved_ns, mismatch))
    else:
        if not involved_ns and ns not in ("default", "kube-system"):
            errs.append(invalid("involvedObject.namespace", involved_ns, mismatch))
        if not event.reporting_component:
            errs.append(required("reportingController"))
        errs.extend(invalid("reportingController", event.reporting_component, m)
                    for m in is_qualified_name(event.reporting_component))
        if not event.reporting_instance:
            errs.append(required("reportingInstance"))
        if len(event.reporting_instance) > REPORTING_INSTANCE_LENGTH_LIMIT:
            errs.append(invalid("reportingInstance", "",
                                f"can have at most {REPORTING_INSTANCE_LENGTH_LIMIT} characters"))
        if not event.action:
            errs.append(required("action"))
        if len(event.action) > ACTION_LENGTH_LIMIT:
            errs.append(invalid("action", "", f"can have at most {ACTION_LENGTH_LIMIT} characters"))
        if not event.reason:
            errs.append(required("reason"))
        if len(event.reason) > REASON_LENGTH_LIMIT:
            errs.append(invalid("reason", "", f"can have at most {REASON_LENGTH_LIMIT} characters"))
        if len(event.message) > NOTE_LENGTH_LIMIT:
            errs.append(invalid("message", "", f"can have at most {NOTE_LENGTH_LIMIT} characters"))
    errs.extend(invalid("namespace", ns, m) for m in is_dns1123_subdomain(ns))
    if event.type and event.type not in _EVENT_TYPES:
        # kplane: the events.k8s.io rule (core/v1 accepts any type); empty stays allowed.
        errs.append(invalid("type", "", f"has invalid value: {event.type}"))
    return errs


def validate_event(event: core_pb2.Event) -> list[FieldError]:
    errs = _legacy_validate(event)
    if not errs:
        # The generic metadata checks run only after the kind's own validation passed.
        errs = validate_object_meta(event.metadata, True, name_is_path_segment, kube_finalizers=False)
    return errs


def validate_event_update(new: core_pb2.Event, old: core_pb2.Event) -> list[FieldError]:
    errs = validate_object_meta_update(new.metadata, old.metadata, kube_finalizers=False)
    errs.extend(_legacy_validate(new))
    return errs
