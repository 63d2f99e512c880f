"""Pods: Kubernetes' ValidatePodCreate, ValidatePodUpdate and ValidatePodStatusUpdate.

The checks, their order, field paths and messages are Kubernetes' (pkg/apis/core/validation).
Fields kplane stores as ``google.protobuf.Struct`` (volumes' sources, probes, lifecycle,
securityContext, env ``valueFrom``, dnsConfig, ...) get only the structural checks that need no
schema: names, mutual exclusion, and what other fields reference.
"""

from __future__ import annotations

import re
from collections.abc import Sequence, Set
from dataclasses import dataclass
from typing import Final

from google.protobuf import struct_pb2

from apiserver.validation import placement, quantities
from apiserver.validation._common import (
    FIELD_IMMUTABLE,
    GoValue,
    changed_fields,
    fields_equal,
    go_list,
    go_repr,
    go_string_map,
    inclusive_range_error,
    ip_family,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_qualified_name,
    is_relaxed_env_var_name,
    is_valid_ip,
    is_valid_port_name,
    is_valid_port_num,
    labels_ok,
    not_found,
    parse_q,
    quantity_maps_equal,
    validate_dns1123_label,
    validate_labels,
    validate_nonnegative,
    validate_qualified_name,
)
from apiserver.validation.meta import (
    name_is_dns_subdomain,
    validate_annotations,
    validate_object_meta,
    validate_object_meta_update,
)
from machinery import resources
from machinery.api import core_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, not_supported, required, too_many
from machinery.memo import Memo

MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"
POD_DELETION_COST_ANNOTATION: Final = "controller.kubernetes.io/pod-deletion-cost"
MAX_INT32: Final = 2**31 - 1

UPDATABLE_POD_SPEC_FIELDS: Final = ",".join((
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
))
POD_UPDATE_FORBIDDEN: Final = f"pod updates may not change fields other than {UPDATABLE_POD_SPEC_FIELDS}"

_RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
_DNS_POLICIES: Final = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL_POLICIES: Final = ("Always", "IfNotPresent", "Never")
_TERMINATION_MESSAGE_POLICIES: Final = ("File", "FallbackToLogsOnError")
_PORT_PROTOCOLS: Final = ("SCTP", "TCP", "UDP")
_PREEMPTION_POLICIES: Final = ("PreemptLowerPriority", "Never")
_RESIZE_RESOURCES: Final = ("cpu", "memory")
_RESIZE_RESTART_POLICIES: Final = ("NotRequired", "RestartContainer")
_OSES: Final = ("linux", "windows")
_PHASES: Final = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
_TERMINAL_PHASES: Final = frozenset({"Succeeded", "Failed"})
_CONDITION_STATUSES: Final = ("False", "True", "Unknown")
_SYSTEM_CONDITIONS: Final = frozenset({"PodScheduled", "Ready", "Initialized"})
_ENV_SOURCES: Final = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
_DELETION_COST_RE: Final = re.compile(r"(0|[1-9][0-9]*|-[0-9]+)")


@dataclass(frozen=True, slots=True)
class PodValidationOptions:
    """Kubernetes' PodValidationOptions that matter here: relaxations an update gets when the
    stored pod already used them, and the PodLevelResources gate."""

    allow_invalid_pod_deletion_cost: bool = False
    allow_indivisible_hugepages: bool = False
    allow_invalid_label_value_in_selector: bool = False
    allow_invalid_label_value_in_required_node_affinity: bool = False
    pod_level_resources: bool = True
    container_restart_rules: bool = True  # the ContainerRestartRules gate (KEP-5307)


_CREATE_OPTIONS: Final = PodValidationOptions()
_CREATE_OPTIONS_WITHOUT_RESTART_RULES: Final = PodValidationOptions(container_restart_rules=False)

# KEP-5307 "Container Restart Rules" (gate ContainerRestartRules, beta from 1.35).
CONTAINER_RESTART_RULES: Final = "ContainerRestartRules"
_CONTAINER_RESTART_POLICIES: Final = ("Always", "OnFailure", "Never")
_RESTART_RULE_ACTIONS: Final = ("Restart",)
_EXIT_CODE_OPERATORS: Final = ("In", "NotIn")
MAX_RESTART_RULES: Final = 20
MAX_RESTART_RULE_EXIT_CODES: Final = 255


def uses_container_restart_rules(spec: core_pb2.PodSpec) -> bool:
    """A container-level restartPolicy on a regular container, a non-sidecar one on an init
    container, or restart rules anywhere (Kubernetes' containerRestartRulesInUse)."""
    return any(c.restart_policy_rules for c in (*spec.containers, *spec.init_containers)) or any(
        c.HasField("restart_policy") for c in spec.containers) or any(
        c.HasField("restart_policy") and c.restart_policy != "Always" for c in spec.init_containers)


def _validate_restart_rules(c: core_pb2.Container, path: str, opts: PodValidationOptions,
                            sidecar: bool = False) -> list[FieldError]:
    """A container's ``restartPolicyRules`` (KEP-5307): at most 20, each with the action Restart and
    an ``exitCodes`` condition (operator In or NotIn, at most 255 distinct values); only beside a
    container-level ``restartPolicy``; not on a sidecar, which restarts whatever its exit."""
    rules = c.restart_policy_rules
    if not rules:
        return []
    at = f"{path}.restartPolicyRules"
    if not opts.container_restart_rules:
        return [forbidden(at, "may not be set when the ContainerRestartRules feature gate is disabled")]
    errs: list[FieldError] = []
    if sidecar:
        errs.append(forbidden(at, "may not be set for containers with restartPolicy=Always"))
    if not c.HasField("restart_policy"):
        errs.append(required(f"{path}.restartPolicy", "must be specified when restartPolicyRules are specified"))
    if len(rules) > MAX_RESTART_RULES:
        errs.append(too_many(at, len(rules), MAX_RESTART_RULES))
    for i, rule in enumerate(rules):
        rp = f"{at}[{i}]"
        if not rule.action:
            errs.append(required(f"{rp}.action", ""))
        elif rule.action not in _RESTART_RULE_ACTIONS:
            errs.append(not_supported(f"{rp}.action", rule.action, _RESTART_RULE_ACTIONS))
        if not rule.HasField("exit_codes"):
            errs.append(required(f"{rp}.exitCodes", "must be specified"))
            continue
        codes = rule.exit_codes
        if not codes.operator:
            errs.append(required(f"{rp}.exitCodes.operator", ""))
        elif codes.operator not in _EXIT_CODE_OPERATORS:
            errs.append(not_supported(f"{rp}.exitCodes.operator", codes.operator, _EXIT_CODE_OPERATORS))
        if len(codes.values) > MAX_RESTART_RULE_EXIT_CODES:
            errs.append(too_many(f"{rp}.exitCodes.values", len(codes.values), MAX_RESTART_RULE_EXIT_CODES))
        seen: set[int] = set()
        for j, v in enumerate(codes.values):
            if v in seen:
                errs.append(duplicate(f"{rp}.exitCodes.values[{j}]", v))
            seen.add(v)
    return errs


_HUGEPAGES_BYTES: Final = quantities.HUGEPAGES_PREFIX.encode()

# The four results of options_for_update (frozen, so shared).
_UPDATE_OPTIONS: Final = {
    (cost, huge): PodValidationOptions(allow_invalid_pod_deletion_cost=cost, allow_indivisible_hugepages=huge)
    for cost in (False, True) for huge in (False, True)
}


def options_for_update(old: core_pb2.Pod) -> PodValidationOptions:
    """What GetValidationOptionsFromPodSpecAndMeta allows an update because the old pod had it."""
    return _options_for_update(old)[0]


def _options_for_update(old: core_pb2.Pod) -> tuple[PodValidationOptions, bytes]:
    """options_for_update, and the serialized old spec it looked at."""
    annotations = old.metadata.annotations
    cost = annotations[POD_DELETION_COST_ANNOTATION] \
        if annotations and POD_DELETION_COST_ANNOTATION in annotations else None
    indivisible = False
    spec = old.spec
    # Only hugepages matter: when "hugepages-" occurs nowhere in the serialized spec, no
    # container has a hugepages resource, and the walk over the resource maps is skipped.
    serialized = spec.SerializeToString()
    if _HUGEPAGES_BYTES in serialized:
        for c in (*spec.containers, *spec.init_containers):
            r = c.resources
            for m in (r.requests, r.limits):
                for name in m:
                    if quantities.is_hugepages(name):
                        errs: list[FieldError] = []
                        q = parse_q(m[name], "", errs)
                        if q is not None and quantities._hugepage_error(name, q):
                            indivisible = True
    return _UPDATE_OPTIONS[(cost is not None and not _valid_deletion_cost(cost), indivisible)], serialized


def _valid_deletion_cost(value: str) -> bool:
    if not _DELETION_COST_RE.fullmatch(value):
        return False
    return -2**31 <= int(value) <= MAX_INT32


# ---------------------------------------------------------------- annotations


def _validate_pod_annotations(pod: core_pb2.Pod, opts: PodValidationOptions,
                              path: str = "metadata.annotations") -> list[FieldError]:
    """ValidatePodSpecificAnnotations (the annotations of a pod, or of a pod template at ``path``)."""
    errs: list[FieldError] = []
    annotations = pod.metadata.annotations
    if not annotations:
        return errs
    if MIRROR_POD_ANNOTATION in annotations and not pod.spec.node_name:
        errs.append(invalid(f"{path}[{MIRROR_POD_ANNOTATION}]", annotations[MIRROR_POD_ANNOTATION],
                            "must set spec.nodeName if mirror pod annotation is set"))
    if not opts.allow_invalid_pod_deletion_cost and POD_DELETION_COST_ANNOTATION in annotations:
        cost = annotations[POD_DELETION_COST_ANNOTATION]
        if not _valid_deletion_cost(cost):
            errs.append(invalid(f"{path}[{POD_DELETION_COST_ANNOTATION}]", cost, "must be a 32bit integer"))
    return errs


# ---------------------------------------------------------------- volumes and containers


class _SpecScan:
    """What one validation of a pod's spec learned that later checks of the same call reuse
    instead of walking the (slow to access) protobuf message again."""

    __slots__ = ("bad_images", "images_ok", "spec_bytes", "tolerations")

    def __init__(self) -> None:
        # validatePodMetadataAndSpec's whitespace errors, in its order (containers, then init).
        self.bad_images: list[FieldError] = []
        # every container and init container has an image without surrounding whitespace
        self.images_ok = True
        # placement.valid_toleration_facts of spec.tolerations (None: invalid or not scanned)
        self.tolerations: list[tuple[str, str, str, str, bool]] | None = None
        # the serialized spec, when the spec verdict cache was consulted
        self.spec_bytes: bytes | None = None


def _struct_str(s: struct_pb2.Struct, key: str) -> str:
    v = s.fields.get(key)
    return v.string_value if v is not None else ""


def _validate_volumes(volumes: Sequence[struct_pb2.Struct], path: str) -> tuple[set[str], list[FieldError]]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, vol in enumerate(volumes):
        p = f"{path}[{i}].name"
        name = _struct_str(vol, "name")
        el = [required(p)] if not name else validate_dns1123_label(name, p)
        if name in names:
            el.append(duplicate(p, name))
        if el:
            errs.extend(el)
        else:
            names.add(name)
    return names, errs


def _validate_local_descending_path(target: str, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if target.startswith("/"):
        errs.append(invalid(path, target, "must be a relative path"))
    if ".." in target.replace("\\", "/").split("/"):
        errs.append(invalid(path, target, "must not contain '..'"))
    return errs


def _validate_volume_mounts(mounts: Sequence[core_pb2.VolumeMount], volumes: Set[str],
                            path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    mount_points: set[str] = set()
    for i, m in enumerate(mounts):
        p = f"{path}[{i}]"
        if not m.name:
            errs.append(required(f"{p}.name"))
        if m.name not in volumes:
            errs.append(not_found(f"{p}.name", m.name))
        if not m.mount_path:
            errs.append(required(f"{p}.mountPath"))
        if m.mount_path in mount_points:
            errs.append(invalid(f"{p}.mountPath", m.mount_path, "must be unique"))
        mount_points.add(m.mount_path)
        if m.sub_path:
            errs.extend(_validate_local_descending_path(m.sub_path, f"{path}.subPath"))
        if m.sub_path_expr:
            if m.sub_path:
                errs.append(invalid(f"{p}.subPathExpr", m.sub_path_expr,
                                    "subPathExpr and subPath are mutually exclusive"))
            errs.extend(_validate_local_descending_path(m.sub_path_expr, f"{path}.subPathExpr"))
    return errs


def _validate_ports(ports: Sequence[core_pb2.ContainerPort], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, port in enumerate(ports):
        p = f"{path}[{i}]"
        if port.name:
            msgs = is_valid_port_name(port.name)
            if msgs:
                errs.extend(invalid(f"{p}.name", port.name, m) for m in msgs)
            elif port.name in names:
                errs.append(duplicate(f"{p}.name", port.name))
            else:
                names.add(port.name)
        if port.container_port == 0:
            errs.append(required(f"{p}.containerPort"))
        else:
            errs.extend(invalid(f"{p}.containerPort", port.container_port, m)
                        for m in is_valid_port_num(port.container_port))
        if port.host_port != 0:
            errs.extend(invalid(f"{p}.hostPort", port.host_port, m) for m in is_valid_port_num(port.host_port))
        if not port.protocol:
            errs.append(required(f"{p}.protocol"))
        elif port.protocol not in _PORT_PROTOCOLS:
            errs.append(not_supported(f"{p}.protocol", port.protocol, _PORT_PROTOCOLS))
    return errs


def _validate_env(env: Sequence[core_pb2.EnvVar], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, ev in enumerate(env):
        p = f"{path}[{i}]"
        if not ev.name:
            errs.append(required(f"{p}.name"))
        else:
            errs.extend(invalid(f"{p}.name", ev.name, m) for m in is_relaxed_env_var_name(ev.name))
        if ev.HasField("value_from"):
            vp = f"{p}.valueFrom"
            sources = sum(1 for key in _ENV_SOURCES if key in ev.value_from.fields)
            if sources == 0:
                errs.append(invalid(vp, "", "must specify one of: `fieldRef`, `resourceFieldRef`, "
                                            "`configMapKeyRef` or `secretKeyRef`"))
            elif ev.value:
                errs.append(invalid(vp, "", "may not be specified when `value` is not empty"))
            elif sources > 1:
                errs.append(invalid(vp, "", "may not have more than one field specified at a time"))
    return errs


def _validate_resize_policy(policies: Sequence[core_pb2.ContainerResizePolicy], path: str,
                            pod_restart_policy: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, p in enumerate(policies):
        if p.resource_name in seen:
            errs.append(duplicate(f"{path}[{i}]", p.resource_name))
        seen.add(p.resource_name)
        if not p.resource_name:
            errs.append(required(path))
        elif p.resource_name not in _RESIZE_RESOURCES:
            errs.append(not_supported(path, p.resource_name, _RESIZE_RESOURCES))
        if not p.restart_policy:
            errs.append(required(path))
        elif p.restart_policy not in _RESIZE_RESTART_POLICIES:
            errs.append(not_supported(path, p.restart_policy, _RESIZE_RESTART_POLICIES))
        if pod_restart_policy == "Never" and p.restart_policy != "NotRequired":
            errs.append(invalid(path, p.restart_policy, "must be 'NotRequired' when `restartPolicy` is 'Never'"))
    return errs


def _validate_container_common(c: core_pb2.Container, volumes: Set[str], claim_names: Set[str], path: str,
                               spec: core_pb2.PodSpec, opts: PodValidationOptions,
                               scan: _SpecScan | None = None) -> list[FieldError]:
    errs: list[FieldError] = []
    name = c.name
    if not name:
        errs.append(required(f"{path}.name"))
    else:
        msgs = is_dns1123_label(name)
        if msgs:
            errs.extend(invalid(f"{path}.name", name, m) for m in msgs)
    image = c.image
    if not image:
        errs.append(required(f"{path}.image"))
        if scan is not None:
            scan.images_ok = False
    elif scan is not None and image != image.strip():
        scan.images_ok = False
        scan.bad_images.append(invalid(f"{path}.image", image, "must not have leading or trailing whitespace"))
    policy = c.termination_message_policy
    if policy not in _TERMINATION_MESSAGE_POLICIES:
        if not policy:
            errs.append(required(f"{path}.terminationMessagePolicy"))
        else:
            errs.append(not_supported(f"{path}.terminationMessagePolicy", policy, _TERMINATION_MESSAGE_POLICIES))
    ports = c.ports
    if ports:
        errs.extend(_validate_ports(ports, f"{path}.ports"))
    env = c.env
    if env:
        errs.extend(_validate_env(env, f"{path}.env"))
    mounts = c.volume_mounts
    if mounts:
        errs.extend(_validate_volume_mounts(mounts, volumes, f"{path}.volumeMounts"))
    policy = c.image_pull_policy
    if policy not in _PULL_POLICIES:
        if not policy:
            errs.append(required(f"{path}.imagePullPolicy"))
        else:
            errs.append(not_supported(f"{path}.imagePullPolicy", policy, _PULL_POLICIES))
    r = c.resources
    limits, requests, claims = r.limits, r.requests, r.claims
    if limits or requests or claims:
        errs.extend(quantities.validate_requirements(limits, requests, claims, claim_names, f"{path}.resources",
                                                     allow_indivisible_hugepages=opts.allow_indivisible_hugepages))
    resize_policy = c.resize_policy
    if resize_policy:
        errs.extend(_validate_resize_policy(resize_policy, f"{path}.resizePolicy", spec.restart_policy))
    return errs


def _host_port_conflicts(containers: Sequence[core_pb2.Container], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for ci, c in enumerate(containers):
        for pi, port in enumerate(c.ports):
            if port.host_port == 0:
                continue
            key = f"{port.protocol}/{port.host_ip}/{port.host_port}"
            if key in seen:
                errs.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            else:
                seen.add(key)
    return errs


def _validate_containers(spec: core_pb2.PodSpec, volumes: Set[str], claim_names: Set[str], path: str,
                         opts: PodValidationOptions, scan: _SpecScan | None = None) -> list[FieldError]:
    containers = spec.containers
    if not containers:
        return [required(path)]
    errs: list[FieldError] = []
    names: set[str] = set()
    host_ports = False
    for i, c in enumerate(containers):
        p = f"{path}[{i}]"
        errs.extend(_validate_container_common(c, volumes, claim_names, p, spec, opts, scan))
        name = c.name
        if name in names:
            errs.append(duplicate(f"{p}.name", name))
        else:
            names.add(name)
        if c.HasField("restart_policy"):
            if not opts.container_restart_rules:
                errs.append(forbidden(f"{p}.restartPolicy", "may not be set for non-init containers"))
            elif c.restart_policy not in _CONTAINER_RESTART_POLICIES:
                errs.append(not_supported(f"{p}.restartPolicy", c.restart_policy, _CONTAINER_RESTART_POLICIES))
        errs.extend(_validate_restart_rules(c, p, opts))
        if not host_ports and c.ports:
            host_ports = True
    if host_ports:
        errs.extend(_host_port_conflicts(containers, path))
    return errs


_INIT_ONLY_WITH_RESTART: Final = (("lifecycle", "lifecycle"), ("liveness_probe", "livenessProbe"),
                                  ("readiness_probe", "readinessProbe"), ("startup_probe", "startupProbe"))


def _validate_init_containers(spec: core_pb2.PodSpec, volumes: Set[str], claim_names: Set[str], path: str,
                              opts: PodValidationOptions, scan: _SpecScan | None = None) -> list[FieldError]:
    errs: list[FieldError] = []
    init_containers = spec.init_containers
    if not init_containers:
        return errs
    names = {c.name for c in spec.containers}
    for i, c in enumerate(init_containers):
        p = f"{path}[{i}]"
        errs.extend(_validate_container_common(c, volumes, claim_names, p, spec, opts, scan))
        restart_always = False
        if c.HasField("restart_policy"):
            # KEP-5307: with container restart rules an init container may also say OnFailure or
            # Never (how its failures are retried); Always still makes it a sidecar.
            allowed = _CONTAINER_RESTART_POLICIES if opts.container_restart_rules else ("Always",)
            if c.restart_policy not in allowed:
                errs.append(not_supported(f"{p}.restartPolicy", c.restart_policy, allowed))
            restart_always = c.restart_policy == "Always"
        errs.extend(_validate_restart_rules(c, p, opts, sidecar=restart_always))
        if c.name in names:
            errs.append(duplicate(f"{p}.name", c.name))
        elif c.name:
            names.add(c.name)
        # Init containers run one by one: ports conflict only within one (Kubernetes reports
        # them at index 0 of a one-container list).
        if c.ports:
            errs.extend(_host_port_conflicts([c], path))
        if not restart_always:
            for field, json in _INIT_ONLY_WITH_RESTART:
                if c.HasField(field):
                    errs.append(forbidden(f"{p}.{json}",
                                          "may not be set for init containers without restartPolicy=Always"))
            if c.resize_policy:
                errs.append(invalid(f"{p}.resizePolicy",
                                    GoValue(go_list(c.resize_policy, core_pb2.ContainerResizePolicy.DESCRIPTOR)),
                                    "must not be set for init containers"))
    return errs


def _validate_pod_resource_claims(spec: core_pb2.PodSpec, path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, claim in enumerate(spec.resource_claims):
        p = f"{path}[{i}]"
        if not claim.name:
            errs.append(required(f"{p}.name"))
        elif claim.name in seen:
            errs.append(duplicate(f"{p}.name", claim.name))
        else:
            errs.extend(validate_dns1123_label(claim.name, f"{p}.name"))
            seen.add(claim.name)
        has_name, has_template = claim.HasField("resource_claim_name"), claim.HasField("resource_claim_template_name")
        if has_name and has_template:
            errs.append(invalid(p, GoValue(go_repr(claim)),
                                "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
        if not has_name and not has_template:
            errs.append(invalid(p, GoValue(go_repr(claim)),
                                "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        if has_name:
            errs.extend(invalid(f"{p}.resourceClaimName", claim.resource_claim_name, m)
                        for m in is_dns1123_subdomain(claim.resource_claim_name))
        if has_template:
            errs.extend(invalid(f"{p}.resourceClaimTemplateName", claim.resource_claim_template_name, m)
                        for m in is_dns1123_subdomain(claim.resource_claim_template_name))
    return errs


def _validate_pod_resources(pod: core_pb2.Pod, claim_names: Set[str], path: str,
                            opts: PodValidationOptions) -> list[FieldError]:
    """Pod-level resources: valid names and quantities, and consistent with the containers."""
    spec = pod.spec
    r = spec.resources
    errs: list[FieldError] = []
    if r.claims:
        errs.append(forbidden(f"{path}.claims", "claims cannot be set for Resources at pod-level"))
    before = len(errs)
    errs.extend(quantities.validate_requirements(r.limits, r.requests, (), None, path, pod_level=True,
                                                 allow_indivisible_hugepages=opts.allow_indivisible_hugepages))
    if len(errs) > before:
        return errs  # the sums below need valid quantities
    try:
        aggregate = resources.pod_requests(pod, use_status_resources=False, exclude_overhead=True, skip_pod_level=True)
        pod_requests = resources.to_resource_list(r.requests)
        limits = {i: resources.container_limits(c) for i, c in enumerate(spec.containers)}
        pod_limits = resources.to_resource_list(r.limits)
    except ValueError:
        return errs  # a container quantity is malformed; reported at the container
    shown = resources.format_resource_list(aggregate)
    for name in sorted(aggregate):
        have = pod_requests.get(name, 0)
        if aggregate[name] > have:
            errs.append(invalid(f"{path}.requests[{name}]", r.requests.get(name, "0"),
                                f"must be greater than or equal to aggregate container requests of {shown[name]}"))
    for i, c in enumerate(spec.containers):
        for name in sorted(limits[i]):
            if name in pod_limits and limits[i][name] > pod_limits[name]:
                errs.append(invalid(f"{path}.containers[{i}][{name}].limits", c.resources.limits[name],
                                    f"must be less than or equal to pod limits of {r.limits[name]}"))
    return errs


# ---------------------------------------------------------------- pod spec


_NO_NAMES: Final[frozenset[str]] = frozenset()


# Pod specs found valid, by their serialized form and the options (the shared option objects
# only): the pods of one workload share their spec, and an update that leaves the spec alone
# validates the same spec again. The value is placement.valid_toleration_facts of the
# tolerations. Only specs without errors (and without images that have surrounding whitespace)
# are remembered; equal bytes mean an equal spec, which the checks treat the same (they read
# nothing but the spec and the options; the path only goes into error messages).
_VALID_SPECS: Memo[tuple[int, bytes], tuple[tuple[str, str, str, str, bool], ...]] = Memo(
    "apiserver.validation.valid_pod_specs", 512)
_OPTIONS_SLOTS: Final = {id(o): i for i, o in enumerate((_CREATE_OPTIONS, *_UPDATE_OPTIONS.values()))}


def validate_pod_spec(pod: core_pb2.Pod, opts: PodValidationOptions = _CREATE_OPTIONS,
                      path: str = "spec") -> list[FieldError]:
    """Kubernetes' ValidatePodSpec for a pod's spec (defaults already applied)."""
    return _validate_pod_spec(pod, opts, path, None)


def _validate_pod_spec(pod: core_pb2.Pod, opts: PodValidationOptions, path: str,
                       scan: _SpecScan | None) -> list[FieldError]:
    spec = pod.spec
    slot = _OPTIONS_SLOTS.get(id(opts))
    if slot is None:
        return _check_pod_spec(pod, spec, opts, path, scan)
    serialized = spec.SerializeToString()
    key = (slot, serialized)
    tolerations = _VALID_SPECS.get(key)
    if scan is not None:
        scan.spec_bytes = serialized
    if tolerations is not None:
        if scan is not None:
            scan.tolerations = list(tolerations)
        return []
    if scan is None:
        scan = _SpecScan()
    errs = _check_pod_spec(pod, spec, opts, path, scan)
    if not errs and scan.images_ok and scan.tolerations is not None:
        _VALID_SPECS.put(key, tuple(scan.tolerations))
    return errs


def _check_pod_spec(pod: core_pb2.Pod, spec: core_pb2.PodSpec, opts: PodValidationOptions, path: str,
                    scan: _SpecScan | None) -> list[FieldError]:
    errs: list[FieldError] = []
    if not spec.HasField("termination_grace_period_seconds"):
        errs.append(required(f"{path}.terminationGracePeriodSeconds"))
    volumes: Set[str] = _NO_NAMES
    if spec.volumes:
        volumes, verrs = _validate_volumes(spec.volumes, f"{path}.volumes")
        errs.extend(verrs)
    claim_names: Set[str] = _NO_NAMES
    if spec.resource_claims:
        claim_names = {c.name for c in spec.resource_claims if c.name}
        errs.extend(_validate_pod_resource_claims(spec, f"{path}.resourceClaims"))
    errs.extend(_validate_containers(spec, volumes, claim_names, f"{path}.containers", opts, scan))
    if spec.init_containers:
        errs.extend(_validate_init_containers(spec, volumes, claim_names, f"{path}.initContainers", opts, scan))
    if opts.pod_level_resources and spec.HasField("resources"):
        errs.extend(_validate_pod_resources(pod, claim_names, f"{path}.resources", opts))
    if spec.host_network:
        for i, c in enumerate(spec.containers):
            for j, port in enumerate(c.ports):
                if port.host_port != port.container_port:
                    errs.append(invalid(f"{path}.containers[{i}].ports[{j}].hostPort", port.host_port,
                                        "must match `containerPort` when `hostNetwork` is true"))
    restart_policy = spec.restart_policy
    if restart_policy not in _RESTART_POLICIES:
        if not restart_policy:
            errs.append(required(f"{path}.restartPolicy"))
        else:
            errs.append(not_supported(f"{path}.restartPolicy", restart_policy, _RESTART_POLICIES))
    dns_policy = spec.dns_policy
    if dns_policy not in _DNS_POLICIES:
        if not dns_policy:
            errs.append(required(f"{path}.dnsPolicy"))
        else:
            errs.append(not_supported(f"{path}.dnsPolicy", dns_policy, _DNS_POLICIES))
    node_selector = spec.node_selector
    if node_selector and not labels_ok(node_selector):
        errs.extend(validate_labels(node_selector, f"{path}.nodeSelector"))
    if spec.HasField("affinity"):
        errs.extend(placement.validate_affinity(
            spec.affinity, f"{path}.affinity",
            allow_invalid_selector_value=opts.allow_invalid_label_value_in_selector,
            allow_invalid_required_node_affinity_value=opts.allow_invalid_label_value_in_required_node_affinity))
    if dns_policy == "None":
        if not spec.HasField("dns_config"):
            errs.append(required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
        else:
            ns = spec.dns_config.fields.get("nameservers")
            if ns is None or not ns.list_value.values:
                errs.append(required(f"{path}.dnsConfig.nameservers",
                                     "must provide at least one DNS nameserver when `dnsPolicy` is None"))
    readiness_gates = spec.readiness_gates
    if readiness_gates:
        for i, gate in enumerate(readiness_gates):
            errs.extend(validate_qualified_name(gate.condition_type, f"{path}.readinessGates[{i}].conditionType"))
    gates = spec.scheduling_gates
    if gates:
        errs.extend(placement.validate_scheduling_gates(gates, f"{path}.schedulingGates"))
    constraints = spec.topology_spread_constraints
    if constraints:
        errs.extend(placement.validate_topology_spread_constraints(constraints, f"{path}.topologySpreadConstraints"))
    if spec.HasField("host_users") and not spec.host_users:
        for flag, json in ((spec.host_network, "hostNetwork"), (spec.host_pid, "HostPID"), (spec.host_ipc, "HostIPC")):
            if flag:
                errs.append(forbidden(f"{path}.{json}", "when `pod.Spec.HostUsers` is false"))
    service_account_name = spec.service_account_name
    if service_account_name:
        msgs = is_dns1123_subdomain(service_account_name)
        if msgs:
            errs.extend(invalid(f"{path}.serviceAccountName", service_account_name, m) for m in msgs)
    node_name = spec.node_name
    if node_name:
        msgs = is_dns1123_subdomain(node_name)
        if msgs:
            errs.extend(invalid(f"{path}.nodeName", node_name, m) for m in msgs)
    if spec.HasField("active_deadline_seconds"):
        value = spec.active_deadline_seconds
        if value < 1 or value > MAX_INT32:
            errs.append(invalid(f"{path}.activeDeadlineSeconds", value, inclusive_range_error(1, MAX_INT32)))
    hostname = spec.hostname
    if hostname and is_dns1123_label(hostname):
        errs.extend(validate_dns1123_label(hostname, f"{path}.hostname"))
    subdomain = spec.subdomain
    if subdomain and is_dns1123_label(subdomain):
        errs.extend(validate_dns1123_label(subdomain, f"{path}.subdomain"))
    tolerations = spec.tolerations
    if tolerations:
        facts = placement.valid_toleration_facts(tolerations)
        if facts is None:
            errs.extend(placement.validate_tolerations(tolerations, f"{path}.tolerations"))
        elif scan is not None:
            scan.tolerations = facts
    elif scan is not None:
        scan.tolerations = []
    priority_class_name = spec.priority_class_name
    if priority_class_name:
        msgs = is_dns1123_subdomain(priority_class_name)
        if msgs:
            errs.extend(invalid(f"{path}.priorityClassName", priority_class_name, m) for m in msgs)
    if spec.HasField("runtime_class_name"):
        msgs = is_dns1123_subdomain(spec.runtime_class_name)
        if msgs:
            errs.extend(invalid(f"{path}.runtimeClassName", spec.runtime_class_name, m) for m in msgs)
    if spec.HasField("preemption_policy"):
        errs.extend(validate_preemption_policy(spec.preemption_policy, f"{path}.preemptionPolicy"))
    overhead = spec.overhead
    if overhead:
        # Kubernetes validates overhead as the limits of a ResourceRequirements.
        errs.extend(quantities.validate_requirements(overhead, {}, (), None, f"{path}.overhead",
                                                     allow_indivisible_hugepages=opts.allow_indivisible_hugepages))
    if spec.HasField("os"):
        if not spec.os.name:
            errs.append(required(f"{path}.os.name", "cannot be empty"))
        elif spec.os.name not in _OSES:
            errs.append(not_supported(f"{path}.os", spec.os.name, _OSES))
    return errs


def validate_preemption_policy(policy: str, path: str) -> list[FieldError]:
    if not policy:
        return [required(path)]
    if policy not in _PREEMPTION_POLICIES:
        return [not_supported(path, policy, _PREEMPTION_POLICIES)]
    return []


def validate_pod_metadata_and_spec(pod: core_pb2.Pod, opts: PodValidationOptions = _CREATE_OPTIONS) -> list[FieldError]:
    """Kubernetes' validatePodMetadataAndSpec: what a pod must satisfy after any write."""
    return _validate_pod_metadata_and_spec(pod, opts, _SpecScan())


def _validate_pod_metadata_and_spec(pod: core_pb2.Pod, opts: PodValidationOptions,
                                    scan: _SpecScan) -> list[FieldError]:
    errs = validate_object_meta(pod.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_pod_annotations(pod, opts))
    errs.extend(_validate_pod_spec(pod, opts, "spec", scan))
    # Images with leading or trailing whitespace (found while validating the containers).
    errs.extend(scan.bad_images)
    return errs


def template_pod(template: core_pb2.PodTemplateSpec) -> core_pb2.Pod:
    """A pod with the template's metadata and spec, for the checks written for pods."""
    return core_pb2.Pod(metadata=template.metadata, spec=template.spec)


def template_options_for_update(old: core_pb2.PodTemplateSpec) -> PodValidationOptions:
    """GetValidationOptionsFromPodTemplate: what an update may keep because the old template had it."""
    return options_for_update(template_pod(old))


def validate_pod_template_spec(template: core_pb2.PodTemplateSpec, path: str,
                               opts: PodValidationOptions = _CREATE_OPTIONS) -> list[FieldError]:
    """Kubernetes' ValidatePodTemplateSpec: the template's labels and annotations (at
    ``path.labels`` and ``path.annotations``, as Kubernetes words them), its pod spec under
    ``path.spec``, and no ephemeral containers."""
    pod = template_pod(template)
    meta = pod.metadata
    errs = validate_labels(meta.labels, f"{path}.labels")
    errs.extend(validate_annotations(meta.annotations, f"{path}.annotations"))
    errs.extend(_validate_pod_annotations(pod, opts, f"{path}.annotations"))
    errs.extend(_validate_pod_spec(pod, opts, f"{path}.spec", None))
    if pod.spec.ephemeral_containers:
        errs.append(forbidden(f"{path}.spec.ephemeralContainers", "ephemeral containers not allowed in pod template"))
    return errs


def validate_pod_create(pod: core_pb2.Pod, *, container_restart_rules: bool = True) -> list[FieldError]:
    """Kubernetes' ValidatePodCreate; ``container_restart_rules``: the ContainerRestartRules gate."""
    errs = validate_pod_metadata_and_spec(
        pod, _CREATE_OPTIONS if container_restart_rules else _CREATE_OPTIONS_WITHOUT_RESTART_RULES)
    spec = pod.spec
    if spec.ephemeral_containers:
        errs.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if spec.node_name and spec.scheduling_gates:
        errs.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


# ---------------------------------------------------------------- update


def _container_updates(new: Sequence[core_pb2.Container], old: Sequence[core_pb2.Container],
                       path: str) -> tuple[list[FieldError], bool]:
    if len(new) != len(old):
        return [forbidden(path, "pod updates may not add or remove containers")], True
    errs: list[FieldError] = []
    for i, c in enumerate(new):
        image = c.image
        if not image:
            errs.append(required(f"{path}[{i}].image"))
        elif image.strip() != image:
            errs.append(invalid(f"{path}[{i}].image", image, "must not have leading or trailing whitespace"))
    return errs, False


_CONTAINER_SKIP: Final = frozenset({"image", "resources"})


def _containers_equal_but_image(new: Sequence[core_pb2.Container], old: Sequence[core_pb2.Container]) -> bool:
    for n, o in zip(new, old, strict=True):
        if not fields_equal(n, o, _CONTAINER_SKIP):
            return False
        nr, orr = n.resources, o.resources
        if not quantity_maps_equal(nr.limits, orr.limits) or not quantity_maps_equal(nr.requests, orr.requests) \
                or list(nr.claims) != list(orr.claims):
            return False
    return True


def _node_affinity(spec: core_pb2.PodSpec) -> core_pb2.NodeAffinity | None:
    if spec.HasField("affinity") and spec.affinity.HasField("node_affinity"):
        return spec.affinity.node_affinity
    return None


def _node_affinity_mutation(path: str, new: core_pb2.NodeAffinity | None,
                            old: core_pb2.NodeAffinity | None) -> list[FieldError]:
    """Gated pods may add to, but not change, their required node affinity."""
    if old is None or not old.HasField("required_during_scheduling_ignored_during_execution"):
        return []
    old_terms = old.required_during_scheduling_ignored_during_execution.node_selector_terms
    new_terms: Sequence[core_pb2.NodeSelectorTerm] = ()
    if new is not None and new.HasField("required_during_scheduling_ignored_during_execution"):
        new_terms = new.required_during_scheduling_ignored_during_execution.node_selector_terms
    terms_path = f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
    if old_terms and len(old_terms) != len(new_terms):
        return [invalid(terms_path, GoValue(go_list(new_terms, core_pb2.NodeSelectorTerm.DESCRIPTOR)),
                        "no additions/deletions to non-empty NodeSelectorTerms list are allowed")]
    errs: list[FieldError] = []
    # strict=False: with no old terms, the new ones are all additions (nothing to compare); the
    # old expressions and fields must be a prefix of the new ones (zip stops at the old's end).
    for i, (o, n) in enumerate(zip(old_terms, new_terms, strict=False)):
        only_additions = len(o.match_expressions) <= len(n.match_expressions) and \
            len(o.match_fields) <= len(n.match_fields) and \
            all(a == b for a, b in zip(o.match_expressions, n.match_expressions, strict=False)) and \
            all(a == b for a, b in zip(o.match_fields, n.match_fields, strict=False))
        if not only_additions:
            errs.append(invalid(f"{terms_path}[{i}]", GoValue(go_repr(n)),
                                "only additions are allowed (no mutations or deletions)"))
    return errs


def _spec_diff(new: core_pb2.PodSpec, old: core_pb2.PodSpec, gated: bool) -> tuple[list[str], list[FieldError]]:
    """The spec fields an update changed beyond what Kubernetes lets it change, and the errors of
    the gated-pod scheduling-constraint mutations (which are then not counted as changes)."""
    skip = {"containers", "init_containers", "active_deadline_seconds", "scheduling_gates", "tolerations",
            "termination_grace_period_seconds", "overhead", "resources"}
    errs: list[FieldError] = []
    if gated:
        skip.update(("node_selector", "affinity"))
    changed = changed_fields(new, old, frozenset(skip))
    if not _containers_equal_but_image(new.containers, old.containers):
        changed.append("containers")
    if not _containers_equal_but_image(new.init_containers, old.init_containers):
        changed.append("initContainers")
    tgps_new = new.termination_grace_period_seconds if new.HasField("termination_grace_period_seconds") else None
    tgps_old = old.termination_grace_period_seconds if old.HasField("termination_grace_period_seconds") else None
    if tgps_new != tgps_old and not (tgps_old is not None and tgps_old < 0 and tgps_new == 1):
        changed.append("terminationGracePeriodSeconds")
    if not quantity_maps_equal(new.overhead, old.overhead):
        changed.append("overhead")
    if new.HasField("resources") != old.HasField("resources") or not (
            quantity_maps_equal(new.resources.limits, old.resources.limits)
            and quantity_maps_equal(new.resources.requests, old.resources.requests)
            and list(new.resources.claims) == list(old.resources.claims)):
        changed.append("resources")
    if gated:
        if dict(new.node_selector) != dict(old.node_selector):
            for k, v in old.node_selector.items():
                if new.node_selector.get(k) != v:
                    errs.append(invalid("spec.nodeSelector", GoValue(go_string_map(new.node_selector)),
                                        "only additions to spec.nodeSelector are allowed (no mutations or deletions)"))
                    break
        new_na, old_na = _node_affinity(new), _node_affinity(old)
        if new_na != old_na:
            errs.extend(_node_affinity_mutation("spec.affinity.nodeAffinity", new_na, old_na))
        new_aff = new.affinity if new.HasField("affinity") else core_pb2.Affinity()
        old_aff = old.affinity if old.HasField("affinity") else core_pb2.Affinity()
        if not fields_equal(new_aff, old_aff, frozenset({"node_affinity"})):
            changed.append("affinity")
    return changed, errs


def validate_pod_update(new: core_pb2.Pod, old: core_pb2.Pod) -> list[FieldError]:
    """Kubernetes' ValidatePodUpdate: the spec is immutable except images, activeDeadlineSeconds
    (set or decrease), added tolerations, removed scheduling gates, and for gated pods additions
    to nodeSelector and required node affinity. Resources change only through ``resize``."""
    opts, old_spec_bytes = _options_for_update(old)
    nm, om = new.metadata, old.metadata
    errs = validate_object_meta_update(nm, om)
    scan = _SpecScan()
    errs.extend(_validate_pod_metadata_and_spec(new, opts, scan))
    if nm.annotations or om.annotations:
        errs.extend(_mirror_annotation_updates(new, old))
    ns, os_ = new.spec, old.spec
    # An unchanged spec (the common update: metadata only) makes several checks below trivial.
    same_spec = scan.spec_bytes == old_spec_bytes or ns == os_  # (equal bytes: equal specs)
    if not (same_spec and scan.images_ok):
        for new_containers, old_containers, path in (
                (ns.containers, os_.containers, "spec.containers"),
                (ns.init_containers, os_.init_containers, "spec.initContainers")):
            if scan.images_ok and len(new_containers) == len(old_containers):
                continue  # _container_updates would find nothing: the images were checked above
            cerrs, stop = _container_updates(new_containers, old_containers, path)
            errs.extend(cerrs)
            if stop:
                return errs
    if ns.HasField("active_deadline_seconds"):
        value = ns.active_deadline_seconds
        if value < 0 or value > MAX_INT32:
            errs.append(invalid("spec.activeDeadlineSeconds", value, inclusive_range_error(0, MAX_INT32)))
            return errs
        if os_.HasField("active_deadline_seconds") and os_.active_deadline_seconds < value:
            errs.append(invalid("spec.activeDeadlineSeconds", value, "must be less than or equal to previous value"))
            return errs
    elif os_.HasField("active_deadline_seconds"):
        errs.append(invalid("spec.activeDeadlineSeconds", None, "must not update from a positive integer to nil value"))
    if same_spec:
        # Every old toleration is still there and no scheduling gate was added: what remains of
        # validate_only_added_tolerations is validating the tolerations again.
        if scan.tolerations is None:
            errs.extend(placement.validate_tolerations(ns.tolerations, "spec.tolerations"))
        return errs
    errs.extend(placement.validate_only_added_tolerations(ns.tolerations, os_.tolerations, "spec.tolerations",
                                                          new_valid_facts=scan.tolerations))
    new_gates = ns.scheduling_gates
    if new_gates:
        errs.extend(placement.validate_only_deleted_scheduling_gates(new_gates, os_.scheduling_gates,
                                                                     "spec.schedulingGates"))
    changed, mutation_errs = _spec_diff(ns, os_, gated=len(os_.scheduling_gates) > 0)
    errs.extend(mutation_errs)
    if changed:
        errs.append(forbidden("spec", f"{POD_UPDATE_FORBIDDEN}\n  core.PodSpec{{\n  \t... // changed: "
                                      f"{', '.join(changed)}\n  }}\n"))
    return errs


def _mirror_annotation_updates(new: core_pb2.Pod, old: core_pb2.Pod) -> list[FieldError]:
    """ValidatePodSpecificAnnotationUpdates without re-running the create-time annotation checks
    (validate_pod_metadata_and_spec already did)."""
    errs: list[FieldError] = []
    path = f"metadata.annotations[{MIRROR_POD_ANNOTATION}]"
    na, oa = new.metadata.annotations, old.metadata.annotations
    if MIRROR_POD_ANNOTATION in oa and na.get(MIRROR_POD_ANNOTATION) != oa[MIRROR_POD_ANNOTATION]:
        errs.append(forbidden(path, "may not remove or update mirror pod annotation"))
    if MIRROR_POD_ANNOTATION in na and MIRROR_POD_ANNOTATION not in oa:
        errs.append(forbidden(path, "may not add mirror pod annotation"))
    return errs


# ---------------------------------------------------------------- status update


def _state_transitions(new: Sequence[core_pb2.ContainerStatus], old: Sequence[core_pb2.ContainerStatus],
                       path: str, restart_policy: str, restartable: frozenset[str] = frozenset()) -> list[FieldError]:
    """A container that terminated and may not restart must stay terminated."""
    if restart_policy == "Always":
        return []
    errs: list[FieldError] = []
    for i, o in enumerate(old):
        if not o.state.HasField("terminated"):
            continue
        if o.state.terminated.exit_code != 0 and restart_policy == "OnFailure":
            continue
        if o.name in restartable:
            continue
        for n in new:
            if n.name == o.name and not n.state.HasField("terminated"):
                errs.append(forbidden(f"{path}[{i}].state", "may not be transitioned to non-terminated state"))
    return errs


def _validate_ips(ips: Sequence[core_pb2.PodIP | core_pb2.HostIP], path: str,
                  descriptor: object) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, ip in enumerate(ips):
        if not is_valid_ip(ip.ip):
            errs.append(invalid(f"{path}[{i}]", ip.ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"))
    if len(ips) > 1 and not errs:
        families = [ip_family(ip.ip) for ip in ips]
        if len(ips) > 2 or families[0] == families[1]:
            errs.append(invalid(path, GoValue(go_list(ips, descriptor)),
                                "may specify no more than one IP for each IP family"))
        seen: set[str] = set()
        for i, ip in enumerate(ips):
            if ip.ip in seen:
                errs.append(duplicate(f"{path}[{i}]", GoValue(go_repr(ip))))
            seen.add(ip.ip)
    return errs


# Serialized container statuses whose reported quantities passed _validate_status_resources (a
# status is reported again and again unchanged). Bounded: cleared when full.
_OK_STATUS_RESOURCES: set[bytes] = set()
_OK_STATUS_RESOURCES_MAX: Final = 4096


def _validate_status_resources(statuses: Sequence[core_pb2.ContainerStatus], path: str) -> list[FieldError]:
    """kplane: quantities a kubelet reports must parse and be non-negative (Kubernetes decodes
    them as quantities, so a malformed one never reaches validation there)."""
    errs: list[FieldError] = []
    ok = quantities.resource_list_ok
    for i, cs in enumerate(statuses):
        key = cs.SerializeToString()
        if key in _OK_STATUS_RESOURCES:
            continue
        before = len(errs)
        allocated = cs.allocated_resources
        if allocated and not ok(allocated):
            errs.extend(quantities.validate_resource_list(allocated, f"{path}[{i}].allocatedResources"))
        if cs.HasField("resources"):
            r = cs.resources
            requests, limits = r.requests, r.limits
            if requests and not ok(requests):
                errs.extend(quantities.validate_resource_list(requests, f"{path}[{i}].resources.requests"))
            if limits and not ok(limits):
                errs.extend(quantities.validate_resource_list(limits, f"{path}[{i}].resources.limits"))
        if len(errs) == before:
            if len(_OK_STATUS_RESOURCES) >= _OK_STATUS_RESOURCES_MAX:
                _OK_STATUS_RESOURCES.clear()
            _OK_STATUS_RESOURCES.add(key)
    return errs


def _conditions_ok(conditions: Sequence[core_pb2.PodCondition]) -> bool:
    """Whether the condition checks of validate_pod_status_update find nothing wrong."""
    for cond in conditions:
        ctype = cond.type
        if ctype not in _SYSTEM_CONDITIONS and is_qualified_name(ctype):
            return False
        if cond.status not in _CONDITION_STATUSES or cond.observed_generation < 0:
            return False
    return True


def validate_pod_status_update(new: core_pb2.Pod, old: core_pb2.Pod) -> list[FieldError]:
    """Kubernetes' ValidatePodStatusUpdate, plus kplane's checks of the phase (values, and no way
    out of Succeeded/Failed), condition statuses, observedGeneration and reported quantities."""
    nm, om = new.metadata, old.metadata
    errs = validate_object_meta_update(nm, om)
    if nm.annotations or om.annotations:
        errs.extend(_mirror_annotation_updates(new, old))
        if nm.annotations:  # (_validate_pod_annotations finds nothing otherwise)
            errs.extend(_validate_pod_annotations(new, options_for_update(old)))
    status, old_status = new.status, old.status
    conditions = status.conditions
    if conditions and not _conditions_ok(conditions):
        for i, cond in enumerate(conditions):
            if cond.type not in _SYSTEM_CONDITIONS:
                # Kubernetes reports these under "metadata.conditions".
                errs.extend(validate_qualified_name(cond.type, f"metadata.conditions[{i}].Type"))
        for i, cond in enumerate(conditions):
            if cond.status not in _CONDITION_STATUSES:
                errs.append(not_supported(f"status.conditions[{i}].status", cond.status, _CONDITION_STATUSES))
            errs.extend(validate_nonnegative(cond.observed_generation, f"status.conditions[{i}].observedGeneration"))
    phase, old_phase = status.phase, old_status.phase
    if phase and phase not in _PHASES:
        errs.append(not_supported("status.phase", phase, _PHASES))
    if old_phase in _TERMINAL_PHASES and phase != old_phase:
        errs.append(forbidden("status.phase", f"may not transition from {old_phase} to {phase or '(none)'}"))
    observed_generation = status.observed_generation
    if observed_generation < 0:
        errs.extend(validate_nonnegative(observed_generation, "status.observedGeneration"))
    old_spec = old.spec
    if new.spec.node_name != old_spec.node_name:
        errs.append(forbidden("status.nodeName", "may not be changed directly"))
    nominated = status.nominated_node_name
    if nominated and nominated != old_status.nominated_node_name:
        errs.extend(invalid("status.nominatedNodeName", nominated, m) for m in is_dns1123_subdomain(nominated))
    qos_class = status.qos_class
    if qos_class and qos_class != old_status.qos_class:
        errs.append(invalid("status.qosClass", qos_class, FIELD_IMMUTABLE))
    restart_policy = old_spec.restart_policy
    if restart_policy != "Always":  # (_state_transitions finds nothing then)
        errs.extend(_state_transitions(status.container_statuses, old_status.container_statuses,
                                       "status.containerStatuses", restart_policy))
        restartable = frozenset(c.name for c in old_spec.init_containers if c.restart_policy == "Always")
        errs.extend(_state_transitions(status.init_container_statuses, old_status.init_container_statuses,
                                       "status.initContainerStatuses", restart_policy, restartable))
    old_ephemeral = old_status.ephemeral_container_statuses
    if old_ephemeral:
        errs.extend(_state_transitions(status.ephemeral_container_statuses, old_ephemeral,
                                       "status.ephemeralContainerStatuses", "Never"))
    claim_statuses = status.resource_claim_statuses
    if claim_statuses:
        claim_names = {c.name for c in new.spec.resource_claims}
        seen: set[str] = set()
        for i, rcs in enumerate(claim_statuses):
            p = f"status.resourceClaimStatuses[{i}].name"
            if rcs.name not in claim_names:
                errs.append(invalid(p, rcs.name, "must match the name of an entry in `spec.resourceClaims`"))
            if rcs.name in seen:
                errs.append(duplicate(p, rcs.name))
            seen.add(rcs.name)
            if rcs.HasField("resource_claim_name"):
                errs.extend(invalid(p, rcs.resource_claim_name, m)
                            for m in is_dns1123_subdomain(rcs.resource_claim_name))
    pod_ips = status.pod_ips
    if pod_ips and (len(pod_ips) > 1 or not is_valid_ip(pod_ips[0].ip)):  # (one valid IP: nothing to report)
        errs.extend(_validate_ips(pod_ips, "status.podIPs", core_pb2.PodIP.DESCRIPTOR))
    host_ips = status.host_ips
    if host_ips:
        first = host_ips[0].ip
        if status.host_ip != first:
            errs.append(invalid("status.hostIPs[0].ip", first, "must be equal to `hostIP`"))
        if len(host_ips) > 1 or not is_valid_ip(first):
            errs.extend(_validate_ips(host_ips, "status.hostIPs", core_pb2.HostIP.DESCRIPTOR))
    statuses = status.container_statuses
    if statuses:
        errs.extend(_validate_status_resources(statuses, "status.containerStatuses"))
    statuses = status.init_container_statuses
    if statuses:
        errs.extend(_validate_status_resources(statuses, "status.initContainerStatuses"))
    return errs


__all__ = [
    "MIRROR_POD_ANNOTATION",
    "POD_UPDATE_FORBIDDEN",
    "PodValidationOptions",
    "options_for_update",
    "validate_pod_create",
    "validate_pod_metadata_and_spec",
    "validate_pod_spec",
    "validate_pod_status_update",
    "validate_pod_update",
    "validate_preemption_policy",
]
