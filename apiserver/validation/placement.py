"""Where a pod may run: tolerations and taints, node selectors and affinity, pod (anti-)affinity,
topology spread constraints, scheduling gates and label selectors (Kubernetes' validation of
the scheduling-related parts of a PodSpec and of Node taints)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Final

from apiserver.validation._common import (
    IS_NOT_POSITIVE,
    GoValue,
    duplicate_with_detail,
    go_repr,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_valid_label_value,
    validate_labels,
    validate_qualified_name,
)
from machinery.api import core_pb2, meta_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, not_supported, required

TAINT_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS: Final = ("Equal", "Exists")
_SCHEDULE_ACTIONS: Final = ("DoNotSchedule", "ScheduleAnyway")
_NODE_INCLUSION_POLICIES: Final = ("Honor", "Ignore")
_VALUES_FORBIDDEN: Final = "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
_EMPTY_KEY_NEEDS_EXISTS: Final = ("operator must be Exists when `key` is empty, which means "
                                  "\"match all values and all keys\"")


def _label_name(key: str, path: str) -> list[FieldError]:
    return [invalid(path, key, m) for m in is_qualified_name(key)]


# ---------------------------------------------------------------- label selectors


def validate_label_selector(selector: meta_pb2.LabelSelector, path: str,
                            allow_invalid_label_value: bool = False) -> list[FieldError]:
    """metav1 ValidateLabelSelector (call only when the selector is set)."""
    errs = validate_labels(selector.match_labels, f"{path}.matchLabels")
    for i, expr in enumerate(selector.match_expressions):
        p = f"{path}.matchExpressions[{i}]"
        if expr.operator in ("In", "NotIn"):
            if not expr.values:
                errs.append(required(f"{p}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif expr.operator in ("Exists", "DoesNotExist"):
            if expr.values:
                errs.append(forbidden(f"{p}.values", _VALUES_FORBIDDEN))
        else:
            errs.append(invalid(f"{p}.operator", expr.operator, "not a valid selector operator"))
        errs.extend(_label_name(expr.key, f"{p}.key"))
        if not allow_invalid_label_value:
            for j, value in enumerate(expr.values):
                errs.extend(invalid(f"{p}.values[{j}]", value, m) for m in is_valid_label_value(value))
    return errs


# ---------------------------------------------------------------- taints and tolerations


def validate_taint_effect(effect: str, allow_empty: bool, path: str) -> list[FieldError]:
    if not allow_empty and not effect:
        return [required(path)]
    if effect not in TAINT_EFFECTS:
        return [not_supported(path, effect, TAINT_EFFECTS)]
    return []


@lru_cache(maxsize=4096)
def _toleration_ok(key: str, operator: str, value: str, effect: str, has_seconds: bool) -> bool:
    """Whether ``validate_tolerations`` finds nothing wrong with one toleration."""
    if key:
        if is_qualified_name(key):
            return False
    elif operator != "Exists":
        return False
    if has_seconds and effect != "NoExecute":
        return False
    if operator == "Equal" or not operator:
        if is_valid_label_value(value):
            return False
    elif operator == "Exists":
        if value:
            return False
    else:
        return False
    return not effect or effect in TAINT_EFFECTS


def _toleration_facts(tolerations: Sequence[core_pb2.Toleration]) -> list[tuple[str, str, str, str, bool]]:
    return [(t.key, t.operator, t.value, t.effect, t.HasField("toleration_seconds")) for t in tolerations]


def valid_toleration_facts(tolerations: Sequence[core_pb2.Toleration]) -> list[tuple[str, str, str, str, bool]] | None:
    """(key, operator, value, effect, has tolerationSeconds) of each toleration when
    ``validate_tolerations`` finds nothing wrong with them, else None."""
    facts = _toleration_facts(tolerations)
    for f in facts:
        if not _toleration_ok(*f):
            return None
    return facts


def validate_tolerations(tolerations: Sequence[core_pb2.Toleration], path: str) -> list[FieldError]:
    if not tolerations or valid_toleration_facts(tolerations) is not None:
        return []
    errs: list[FieldError] = []
    for i, t in enumerate(tolerations):
        p = f"{path}[{i}]"
        if t.key:
            errs.extend(_label_name(t.key, f"{p}.key"))
        if not t.key and t.operator != "Exists":
            errs.append(invalid(f"{p}.operator", t.operator, _EMPTY_KEY_NEEDS_EXISTS))
        if t.HasField("toleration_seconds") and t.effect != "NoExecute":
            errs.append(invalid(f"{p}.effect", t.effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if t.operator in ("Equal", ""):
            msgs = is_valid_label_value(t.value)
            if msgs:
                errs.append(invalid(f"{p}.operator", t.value, ";".join(msgs)))
        elif t.operator == "Exists":
            if t.value:
                errs.append(invalid(f"{p}.operator", t.value, "value must be empty when `operator` is 'Exists'"))
        else:
            errs.append(not_supported(f"{p}.operator", t.operator, _TOLERATION_OPERATORS))
        if t.effect:
            errs.extend(validate_taint_effect(t.effect, True, f"{p}.effect"))
    return errs


def validate_only_added_tolerations(new: Sequence[core_pb2.Toleration], old: Sequence[core_pb2.Toleration],
                                    path: str, *,
                                    new_valid_facts: list[tuple[str, str, str, str, bool]] | None = None
                                    ) -> list[FieldError]:
    """Pod updates may add tolerations and change an existing one's tolerationSeconds only.

    ``new_valid_facts``: ``valid_toleration_facts(new)`` when the caller has it (not None)."""
    facts = new_valid_facts if new_valid_facts is not None else _toleration_facts(new)
    if old:
        new_keys = {f[:4] for f in facts}
        for o in old:
            if (o.key, o.operator, o.value, o.effect) not in new_keys:
                return [forbidden(path, "existing toleration can not be modified except its tolerationSeconds")]
    if new_valid_facts is None:
        for f in facts:
            if not _toleration_ok(*f):
                return validate_tolerations(new, path)
    return []


def validate_taints(taints: Sequence[core_pb2.Taint], path: str) -> list[FieldError]:
    """A node's taints: key, value, effect, unique by (key, effect)."""
    errs: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(taints):
        p = f"{path}[{i}]"
        errs.extend(_label_name(taint.key, f"{p}.key"))
        msgs = is_valid_label_value(taint.value)
        if msgs:
            errs.append(invalid(f"{p}.value", taint.value, ";".join(msgs)))
        errs.extend(validate_taint_effect(taint.effect, False, f"{p}.effect"))
        if (taint.effect, taint.key) in seen:
            errs.append(duplicate_with_detail(p, GoValue(go_repr(taint)),
                                              "taints must be unique by key and effect pair"))
            continue
        seen.add((taint.effect, taint.key))
    return errs


# ---------------------------------------------------------------- node selectors and affinity


def _validate_node_selector_requirement(rq: core_pb2.NodeSelectorRequirement, allow_invalid_value: bool,
                                        path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    op = rq.operator
    if op in ("In", "NotIn"):
        if not rq.values:
            errs.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if rq.values:
            errs.append(forbidden(f"{path}.values", _VALUES_FORBIDDEN))
    elif op in ("Gt", "Lt"):
        if len(rq.values) != 1:
            errs.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    errs.extend(_label_name(rq.key, f"{path}.key"))
    if not allow_invalid_value:
        for j, value in enumerate(rq.values):
            errs.extend(invalid(f"{path}.values[{j}]", value, m) for m in is_valid_label_value(value))
    return errs


def _validate_node_field_selector_requirement(rq: core_pb2.NodeSelectorRequirement, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if rq.operator in ("In", "NotIn"):
        if len(rq.values) != 1:
            errs.append(required(f"{path}.values",
                                 "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    else:
        errs.append(invalid(f"{path}.operator", rq.operator, "not a valid selector operator"))
    if rq.key != "metadata.name":
        errs.append(invalid(f"{path}.key", rq.key, "not a valid field selector key"))
    else:
        for j, value in enumerate(rq.values):
            errs.extend(invalid(f"{path}.values[{j}]", value, m) for m in is_dns1123_subdomain(value))
    return errs


def validate_node_selector_term(term: core_pb2.NodeSelectorTerm, allow_invalid_value: bool,
                                path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for j, rq in enumerate(term.match_expressions):
        errs.extend(_validate_node_selector_requirement(rq, allow_invalid_value, f"{path}.matchExpressions[{j}]"))
    for j, rq in enumerate(term.match_fields):
        errs.extend(_validate_node_field_selector_requirement(rq, f"{path}.matchFields[{j}]"))
    return errs


def validate_node_selector(selector: core_pb2.NodeSelector, allow_invalid_value: bool, path: str) -> list[FieldError]:
    """A required NodeSelector: at least one term, each requirement valid."""
    terms_path = f"{path}.nodeSelectorTerms"
    if not selector.node_selector_terms:
        return [required(terms_path, "must have at least one node selector term")]
    errs: list[FieldError] = []
    for i, term in enumerate(selector.node_selector_terms):
        errs.extend(validate_node_selector_term(term, allow_invalid_value, f"{terms_path}[{i}]"))
    return errs


def _validate_pod_affinity_term(term: core_pb2.PodAffinityTerm, allow_invalid_value: bool,
                                path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if term.HasField("label_selector"):
        errs.extend(validate_label_selector(term.label_selector, f"{path}.labelSelector", allow_invalid_value))
    if term.HasField("namespace_selector"):
        errs.extend(validate_label_selector(term.namespace_selector, f"{path}.namespaceSelector", allow_invalid_value))
    for name in term.namespaces:
        errs.extend(invalid(f"{path}.namespace", name, m) for m in is_dns1123_label(name))
    # matchLabelKeys / mismatchLabelKeys
    has_selector = term.HasField("label_selector")
    for child, keys in (("matchLabelKeys", term.match_label_keys), ("mismatchLabelKeys", term.mismatch_label_keys)):
        if not keys:
            continue
        if not has_selector:
            errs.append(forbidden(f"{path}.{child}", "must not be specified when labelSelector is not set"))
            continue
        for i, key in enumerate(keys):
            errs.extend(_label_name(key, f"{path}.{child}[{i}]"))
    mismatch = set(term.mismatch_label_keys)
    for i, key in enumerate(term.match_label_keys):
        if key in mismatch:
            errs.append(invalid(f"{path}.matchLabelKeys[{i}]", key,
                                "exists in both matchLabelKeys and mismatchLabelKeys"))
    if not term.topology_key:
        errs.append(required(f"{path}.topologyKey", "can not be empty"))
    errs.extend(_label_name(term.topology_key, f"{path}.topologyKey"))
    return errs


def _validate_pod_affinity_terms(required_terms: Sequence[core_pb2.PodAffinityTerm],
                                 preferred: Sequence[core_pb2.WeightedPodAffinityTerm], allow_invalid_value: bool,
                                 path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, term in enumerate(required_terms):
        errs.extend(_validate_pod_affinity_term(term, allow_invalid_value,
                                                f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"))
    for j, weighted in enumerate(preferred):
        p = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{j}]"
        if weighted.weight <= 0 or weighted.weight > 100:
            errs.append(invalid(f"{p}.weight", weighted.weight, "must be in the range 1-100"))
        errs.extend(_validate_pod_affinity_term(weighted.pod_affinity_term, allow_invalid_value,
                                                f"{p}.podAffinityTerm"))
    return errs


def validate_affinity(affinity: core_pb2.Affinity, path: str, *, allow_invalid_selector_value: bool = False,
                      allow_invalid_required_node_affinity_value: bool = False) -> list[FieldError]:
    errs: list[FieldError] = []
    if affinity.HasField("node_affinity"):
        na = affinity.node_affinity
        p = f"{path}.nodeAffinity"
        if na.HasField("required_during_scheduling_ignored_during_execution"):
            errs.extend(validate_node_selector(na.required_during_scheduling_ignored_during_execution,
                                               allow_invalid_required_node_affinity_value,
                                               f"{p}.requiredDuringSchedulingIgnoredDuringExecution"))
        for i, term in enumerate(na.preferred_during_scheduling_ignored_during_execution):
            tp = f"{p}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            if term.weight <= 0 or term.weight > 100:
                errs.append(invalid(f"{tp}.weight", term.weight, "must be in the range 1-100"))
            # invalid label values are always allowed in preferred terms
            errs.extend(validate_node_selector_term(term.preference, True, f"{tp}.preference"))
    if affinity.HasField("pod_affinity"):
        pa = affinity.pod_affinity
        errs.extend(_validate_pod_affinity_terms(pa.required_during_scheduling_ignored_during_execution,
                                                 pa.preferred_during_scheduling_ignored_during_execution,
                                                 allow_invalid_selector_value, f"{path}.podAffinity"))
    if affinity.HasField("pod_anti_affinity"):
        paa = affinity.pod_anti_affinity
        errs.extend(_validate_pod_affinity_terms(paa.required_during_scheduling_ignored_during_execution,
                                                 paa.preferred_during_scheduling_ignored_during_execution,
                                                 allow_invalid_selector_value, f"{path}.podAntiAffinity"))
    return errs


# ---------------------------------------------------------------- topology spread


def validate_topology_spread_constraints(constraints: Sequence[core_pb2.TopologySpreadConstraint],
                                         path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, c in enumerate(constraints):
        p = f"{path}[{i}]"
        if c.max_skew <= 0:
            errs.append(invalid(f"{p}.maxSkew", c.max_skew, IS_NOT_POSITIVE))
        if not c.topology_key:
            errs.append(required(f"{p}.topologyKey", "can not be empty"))
        if c.when_unsatisfiable not in _SCHEDULE_ACTIONS:
            errs.append(not_supported(f"{p}.whenUnsatisfiable", c.when_unsatisfiable, _SCHEDULE_ACTIONS))
        for rest in constraints[i + 1:]:
            if c.topology_key == rest.topology_key and c.when_unsatisfiable == rest.when_unsatisfiable:
                errs.append(duplicate(f"{p}.{{topologyKey, whenUnsatisfiable}}",
                                      f"{{{c.topology_key}, {c.when_unsatisfiable}}}"))
                break
        if c.HasField("min_domains"):
            if c.min_domains <= 0:
                errs.append(invalid(f"{p}.minDomains", c.min_domains, IS_NOT_POSITIVE))
            if c.when_unsatisfiable != "DoNotSchedule":
                errs.append(invalid(f"{p}.minDomains", c.min_domains, "can only use minDomains if "
                                    f"whenUnsatisfiable=DoNotSchedule, not {c.when_unsatisfiable}"))
        for field, json in (("node_affinity_policy", "nodeAffinityPolicy"), ("node_taints_policy", "nodeTaintsPolicy")):
            if c.HasField(field):
                value = getattr(c, field)
                if value not in _NODE_INCLUSION_POLICIES:
                    errs.append(not_supported(f"{p}.{json}", value, _NODE_INCLUSION_POLICIES))
        if c.match_label_keys:
            mp = f"{p}.matchLabelKeys"
            selector_keys: set[str] = set()
            if c.HasField("label_selector"):
                selector_keys.update(c.label_selector.match_labels)
                selector_keys.update(e.key for e in c.label_selector.match_expressions)
            else:
                errs.append(forbidden(mp, "must not be specified when labelSelector is not set"))
            for j, key in enumerate(c.match_label_keys):
                errs.extend(_label_name(key, f"{mp}[{j}]"))
                if key in selector_keys:
                    errs.append(invalid(f"{mp}[{j}]", key, "exists in both matchLabelKeys and labelSelector"))
        if c.HasField("label_selector"):
            errs.extend(validate_label_selector(c.label_selector, f"{p}.labelSelector"))
    return errs


# ---------------------------------------------------------------- scheduling gates


def validate_scheduling_gates(gates: Sequence[core_pb2.PodSchedulingGate], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, gate in enumerate(gates):
        errs.extend(validate_qualified_name(gate.name, f"{path}[{i}]"))
        if gate.name in seen:
            errs.append(duplicate(f"{path}[{i}]", gate.name))
        seen.add(gate.name)
    return errs


def validate_only_deleted_scheduling_gates(new: Sequence[core_pb2.PodSchedulingGate],
                                           old: Sequence[core_pb2.PodSchedulingGate], path: str) -> list[FieldError]:
    """Pod updates may only remove scheduling gates."""
    if not new:
        return []
    added: dict[str, int] = {}
    for i, gate in enumerate(new):
        added[gate.name] = i
    for gate in old:
        added.pop(gate.name, None)
    return [forbidden(f"{path}[{i}].name", f"only deletion is allowed, but found new scheduling gate '{name}'")
            for name, i in sorted(added.items(), key=lambda kv: kv[1])]
