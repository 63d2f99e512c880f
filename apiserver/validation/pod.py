"""Pods: Kubernetes' ValidatePodCreate, ValidatePodUpdate and ValidatePodStatusUpdate.

The checks, their order, field paths and messages are Kubernetes' (pkg/apis/core/validation).
Fields kplane stores as ``google.protobuf.Struct`` (volumes' sources, probes, lifecycle,
securityContext, env ``valueFrom``, dnsConfig, ...) get only the structural checks that need no
schema: names, mutual exclusion, and what other fields reference.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from google.protobuf import struct_pb2

from machinery import resources
from machinery.api import core_pb2
from machinery.errors import FieldError, duplicate, forbidden, invalid, not_supported, required

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
    is_dns1123_subdomain,
    is_relaxed_env_var_name,
    is_valid_ip,
    is_valid_port_name,
    is_valid_port_num,
    not_found,
    parse_q,
    quantity_maps_equal,
    validate_dns1123_label,
    validate_labels,
    validate_nonnegative,
    validate_qualified_name,
)
from apiserver.validation.meta import name_is_dns_subdomain, validate_object_meta, validate_object_meta_update

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


_CREATE_OPTIONS: Final = PodValidationOptions()


def options_for_update(old: core_pb2.Pod) -> PodValidationOptions:
    """What GetValidationOptionsFromPodSpecAndMeta allows an update because the old pod had it."""
    cost = old.metadata.annotations.get(POD_DELETION_COST_ANNOTATION)
    indivisible = False
    for c in (*old.spec.containers, *old.spec.init_containers):
        for m in (c.resources.requests, c.resources.limits):
            for name in m:
                if quantities.is_hugepages(name):
                    errs: list[FieldError] = []
                    q = parse_q(m[name], "", errs)
                    if q is not None and quantities._hugepage_error(name, q):
                        indivisible = True
    return PodValidationOptions(
        allow_invalid_pod_deletion_cost=cost is not None and not _valid_deletion_cost(cost),
        allow_indivisible_hugepages=indivisible,
    )


def _valid_deletion_cost(value: str) -> bool:
    if not _DELETION_COST_RE.fullmatch(value):
        return False
    return -2**31 <= int(value) <= MAX_INT32


# ---------------------------------------------------------------- annotations


def _validate_pod_annotations(pod: core_pb2.Pod, opts: PodValidationOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    annotations = pod.metadata.annotations
    path = "metadata.annotations"
    mirror = annotations.get(MIRROR_POD_ANNOTATION)
    if mirror is not None and not pod.spec.node_name:
        errs.append(invalid(f"{path}[{MIRROR_POD_ANNOTATION}]", mirror,
                            "must set spec.nodeName if mirror pod annotation is set"))
    if not opts.allow_invalid_pod_deletion_cost:
        cost = annotations.get(POD_DELETION_COST_ANNOTATION)
        if cost is not None and not _valid_deletion_cost(cost):
            errs.append(invalid(f"{path}[{POD_DELETION_COST_ANNOTATION}]", cost, "must be a 32bit integer"))
    return errs


# ---------------------------------------------------------------- volumes and containers


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


def _validate_volume_mounts(mounts: Sequence[core_pb2.VolumeMount], volumes: set[str],
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


def _validate_container_common(c: core_pb2.Container, volumes: set[str], claim_names: set[str], path: str,
                               spec: core_pb2.PodSpec, opts: PodValidationOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    if not c.name:
        errs.append(required(f"{path}.name"))
    else:
        errs.extend(validate_dns1123_label(c.name, f"{path}.name"))
    if not c.image:
        errs.append(required(f"{path}.image"))
    if not c.termination_message_policy:
        errs.append(required(f"{path}.terminationMessagePolicy"))
    elif c.termination_message_policy not in _TERMINATION_MESSAGE_POLICIES:
        errs.append(not_supported(f"{path}.terminationMessagePolicy", c.termination_message_policy,
                                  _TERMINATION_MESSAGE_POLICIES))
    errs.extend(_validate_ports(c.ports, f"{path}.ports"))
    errs.extend(_validate_env(c.env, f"{path}.env"))
    errs.extend(_validate_volume_mounts(c.volume_mounts, volumes, f"{path}.volumeMounts"))
    if not c.image_pull_policy:
        errs.append(required(f"{path}.imagePullPolicy"))
    elif c.image_pull_policy not in _PULL_POLICIES:
        errs.append(not_supported(f"{path}.imagePullPolicy", c.image_pull_policy, _PULL_POLICIES))
    r = c.resources
    errs.extend(quantities.validate_requirements(r.limits, r.requests, r.claims, claim_names, f"{path}.resources",
                                                 allow_indivisible_hugepages=opts.allow_indivisible_hugepages))
    errs.extend(_validate_resize_policy(c.resize_policy, f"{path}.resizePolicy", spec.restart_policy))
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


def _validate_containers(spec: core_pb2.PodSpec, volumes: set[str], claim_names: set[str], path: str,
                         opts: PodValidationOptions) -> list[FieldError]:
    if not spec.containers:
        return [required(path)]
    errs: list[FieldError] = []
    names: set[str] = set()
    for i, c in enumerate(spec.containers):
        p = f"{path}[{i}]"
        errs.extend(_validate_container_common(c, volumes, claim_names, p, spec, opts))
        if c.name in names:
            errs.append(duplicate(f"{p}.name", c.name))
        else:
            names.add(c.name)
        if c.HasField("restart_policy"):
            errs.append(forbidden(f"{p}.restartPolicy", "may not be set for non-init containers"))
    errs.extend(_host_port_conflicts(spec.containers, path))
    return errs


def _validate_init_containers(spec: core_pb2.PodSpec, volumes: set[str], claim_names: set[str], path: str,
                              opts: PodValidationOptions) -> list[FieldError]:
    errs: list[FieldError] = []
    names = {c.name for c in spec.containers}
    for i, c in enumerate(spec.init_containers):
        p = f"{path}[{i}]"
        errs.extend(_validate_container_common(c, volumes, claim_names, p, spec, opts))
        restart_always = False
        if c.HasField("restart_policy"):
            if c.restart_policy != "Always":
                errs.append(not_supported(f"{p}.restartPolicy", c.restart_policy, ("Always",)))
            restart_always = c.restart_policy == "Always"
        if c.name in names:
            errs.append(duplicate(f"{p}.name", c.name))
        elif c.name:
            names.add(c.name)
        # Init containers run one by one: ports conflict only within one (Kubernetes reports
        # them at index 0 of a one-container list).
        errs.extend(_host_port_conflicts([c], path))
        if not restart_always:
            for field, json in (("lifecycle", "lifecycle"), ("liveness_probe", "livenessProbe"),
                                ("readiness_probe", "readinessProbe"), ("startup_probe", "startupProbe")):
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


def _validate_pod_resources(pod: core_pb2.Pod, claim_names: set[str], path: str,
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


def validate_pod_spec(pod: core_pb2.Pod, opts: PodValidationOptions = _CREATE_OPTIONS,
                      path: str = "spec") -> list[FieldError]:
    """Kubernetes' ValidatePodSpec for a pod's spec (defaults already applied)."""
    spec = pod.spec
    errs: list[FieldError] = []
    if not spec.HasField("termination_grace_period_seconds"):
        errs.append(required(f"{path}.terminationGracePeriodSeconds"))
    volumes, verrs = _validate_volumes(spec.volumes, f"{path}.volumes")
    errs.extend(verrs)
    claim_names = {c.name for c in spec.resource_claims if c.name}
    errs.extend(_validate_pod_resource_claims(spec, f"{path}.resourceClaims"))
    errs.extend(_validate_containers(spec, volumes, claim_names, f"{path}.containers", opts))
    errs.extend(_validate_init_containers(spec, volumes, claim_names, f"{path}.initContainers", opts))
    if opts.pod_level_resources and spec.HasField("resources"):
        errs.extend(_validate_pod_resources(pod, claim_names, f"{path}.resources", opts))
    if spec.host_network:
        for i, c in enumerate(spec.containers):
            for j, port in enumerate(c.ports):
                if port.host_port != port.container_port:
                    errs.append(invalid(f"{path}.containers[{i}].ports[{j}].hostPort", port.host_port,
                                        "must match `containerPort` when `hostNetwork` is true"))
    if not spec.restart_policy:
        errs.append(required(f"{path}.restartPolicy"))
    elif spec.restart_policy not in _RESTART_POLICIES:
        errs.append(not_supported(f"{path}.restartPolicy", spec.restart_policy, _RESTART_POLICIES))
    if not spec.dns_policy:
        errs.append(required(f"{path}.dnsPolicy"))
    elif spec.dns_policy not in _DNS_POLICIES:
        errs.append(not_supported(f"{path}.dnsPolicy", spec.dns_policy, _DNS_POLICIES))
    errs.extend(validate_labels(spec.node_selector, f"{path}.nodeSelector"))
    if spec.HasField("affinity"):
        errs.extend(placement.validate_affinity(
            spec.affinity, f"{path}.affinity",
            allow_invalid_selector_value=opts.allow_invalid_label_value_in_selector,
            allow_invalid_required_node_affinity_value=opts.allow_invalid_label_value_in_required_node_affinity))
    if spec.dns_policy == "None":
        if not spec.HasField("dns_config"):
            errs.append(required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
        else:
            ns = spec.dns_config.fields.get("nameservers")
            if ns is None or not ns.list_value.values:
                errs.append(required(f"{path}.dnsConfig.nameservers",
                                     "must provide at least one DNS nameserver when `dnsPolicy` is None"))
    for i, gate in enumerate(spec.readiness_gates):
        errs.extend(validate_qualified_name(gate.condition_type, f"{path}.readinessGates[{i}].conditionType"))
    errs.extend(placement.validate_scheduling_gates(spec.scheduling_gates, f"{path}.schedulingGates"))
    errs.extend(placement.validate_topology_spread_constraints(spec.topology_spread_constraints,
                                                               f"{path}.topologySpreadConstraints"))
    if spec.HasField("host_users") and not spec.host_users:
        for flag, json in ((spec.host_network, "hostNetwork"), (spec.host_pid, "HostPID"), (spec.host_ipc, "HostIPC")):
            if flag:
                errs.append(forbidden(f"{path}.{json}", "when `pod.Spec.HostUsers` is false"))
    if spec.service_account_name:
        errs.extend(invalid(f"{path}.serviceAccountName", spec.service_account_name, m)
                    for m in is_dns1123_subdomain(spec.service_account_name))
    if spec.node_name:
        errs.extend(invalid(f"{path}.nodeName", spec.node_name, m) for m in is_dns1123_subdomain(spec.node_name))
    if spec.HasField("active_deadline_seconds"):
        value = spec.active_deadline_seconds
        if value < 1 or value > MAX_INT32:
            errs.append(invalid(f"{path}.activeDeadlineSeconds", value, inclusive_range_error(1, MAX_INT32)))
    if spec.hostname:
        errs.extend(validate_dns1123_label(spec.hostname, f"{path}.hostname"))
    if spec.subdomain:
        errs.extend(validate_dns1123_label(spec.subdomain, f"{path}.subdomain"))
    if spec.tolerations:
        errs.extend(placement.validate_tolerations(spec.tolerations, f"{path}.tolerations"))
    if spec.priority_class_name:
        errs.extend(invalid(f"{path}.priorityClassName", spec.priority_class_name, m)
                    for m in is_dns1123_subdomain(spec.priority_class_name))
    if spec.HasField("runtime_class_name"):
        errs.extend(invalid(f"{path}.runtimeClassName", spec.runtime_class_name, m)
                    for m in is_dns1123_subdomain(spec.runtime_class_name))
    if spec.HasField("preemption_policy"):
        errs.extend(validate_preemption_policy(spec.preemption_policy, f"{path}.preemptionPolicy"))
    if spec.overhead:
        # Kubernetes validates overhead as the limits of a ResourceRequirements.
        errs.extend(quantities.validate_requirements(spec.overhead, {}, (), None, f"{path}.overhead",
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
    errs = validate_object_meta(pod.metadata, True, name_is_dns_subdomain)
    errs.extend(_validate_pod_annotations(pod, opts))
    errs.extend(validate_pod_spec(pod, opts))
    for field, path in (("containers", "spec.containers"), ("init_containers", "spec.initContainers")):
        for i, c in enumerate(getattr(pod.spec, field)):
            if c.image != c.image.strip():
                errs.append(invalid(f"{path}[{i}].image", c.image, "must not have leading or trailing whitespace"))
    return errs


def validate_pod_create(pod: core_pb2.Pod) -> list[FieldError]:
    """Kubernetes' ValidatePodCreate."""
    errs = validate_pod_metadata_and_spec(pod, _CREATE_OPTIONS)
    if pod.spec.ephemeral_containers:
        errs.append(forbidden("spec.ephemeralContainers", "cannot be set on create"))
    if pod.spec.node_name and pod.spec.scheduling_gates:
        errs.append(forbidden("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    return errs


# ---------------------------------------------------------------- update


def _container_updates(new: Sequence[core_pb2.Container], old: Sequence[core_pb2.Container],
                       path: str) -> tuple[list[FieldError], bool]:
    if len(new) != len(old):
        return [forbidden(path, "pod updates may not add or remove containers")], True
    errs: list[FieldError] = []
    for i, c in enumerate(new):
        if not c.image:
            errs.append(required(f"{path}[{i}].image"))
        if c.image.strip() != c.image:
            errs.append(invalid(f"{path}[{i}].image", c.image, "must not have leading or trailing whitespace"))
    return errs, False


_CONTAINER_SKIP: Final = frozenset({"image", "resources"})


def _containers_equal_but_image(new: Sequence[core_pb2.Container], old: Sequence[core_pb2.Container]) -> bool:
    for n, o in zip(new, old):
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
    for i, (o, n) in enumerate(zip(old_terms, new_terms)):
        only_additions = len(o.match_expressions) <= len(n.match_expressions) and \
            len(o.match_fields) <= len(n.match_fields) and \
            all(a == b for a, b in zip(o.match_expressions, n.match_expressions)) and \
            all(a == b for a, b in zip(o.match_fields, n.match_fields))
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
    opts = options_for_update(old)
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(validate_pod_metadata_and_spec(new, opts))
    errs.extend(_mirror_annotation_updates(new, old))
    cerrs, stop = _container_updates(new.spec.containers, old.spec.containers, "spec.containers")
    errs.extend(cerrs)
    if stop:
        return errs
    cerrs, stop = _container_updates(new.spec.init_containers, old.spec.init_containers, "spec.initContainers")
    errs.extend(cerrs)
    if stop:
        return errs
    ns, os_ = new.spec, old.spec
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
    errs.extend(placement.validate_only_added_tolerations(ns.tolerations, os_.tolerations, "spec.tolerations"))
    errs.extend(placement.validate_only_deleted_scheduling_gates(ns.scheduling_gates, os_.scheduling_gates,
                                                                 "spec.schedulingGates"))
    if ns == os_:
        return errs
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


def _validate_ips(ips: Sequence[core_pb2.PodIP] | Sequence[core_pb2.HostIP], path: str,
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


def _validate_status_resources(statuses: Sequence[core_pb2.ContainerStatus], path: str) -> list[FieldError]:
    """kplane: quantities a kubelet reports must parse and be non-negative (Kubernetes decodes
    them as quantities, so a malformed one never reaches validation there)."""
    errs: list[FieldError] = []
    for i, cs in enumerate(statuses):
        p = f"{path}[{i}]"
        errs.extend(quantities.validate_resource_list(cs.allocated_resources, f"{p}.allocatedResources"))
        if cs.HasField("resources"):
            errs.extend(quantities.validate_resource_list(cs.resources.requests, f"{p}.resources.requests"))
            errs.extend(quantities.validate_resource_list(cs.resources.limits, f"{p}.resources.limits"))
    return errs


def validate_pod_status_update(new: core_pb2.Pod, old: core_pb2.Pod) -> list[FieldError]:
    """Kubernetes' ValidatePodStatusUpdate, plus kplane's checks of the phase (values, and no way
    out of Succeeded/Failed), condition statuses, observedGeneration and reported quantities."""
    opts = options_for_update(old)
    errs = validate_object_meta_update(new.metadata, old.metadata)
    errs.extend(_mirror_annotation_updates(new, old))
    errs.extend(_validate_pod_annotations(new, opts))
    status, old_status = new.status, old.status
    for i, cond in enumerate(status.conditions):
        if cond.type not in _SYSTEM_CONDITIONS:
            # Kubernetes reports these under "metadata.conditions".
            errs.extend(validate_qualified_name(cond.type, f"metadata.conditions[{i}].Type"))
    for i, cond in enumerate(status.conditions):
        if cond.status not in _CONDITION_STATUSES:
            errs.append(not_supported(f"status.conditions[{i}].status", cond.status, _CONDITION_STATUSES))
        errs.extend(validate_nonnegative(cond.observed_generation, f"status.conditions[{i}].observedGeneration"))
    if status.phase and status.phase not in _PHASES:
        errs.append(not_supported("status.phase", status.phase, _PHASES))
    if old_status.phase in _TERMINAL_PHASES and status.phase != old_status.phase:
        errs.append(forbidden("status.phase",
                              f"may not transition from {old_status.phase} to {status.phase or '(none)'}"))
    errs.extend(validate_nonnegative(status.observed_generation, "status.observedGeneration"))
    if new.spec.node_name != old.spec.node_name:
        errs.append(forbidden("status.nodeName", "may not be changed directly"))
    if status.nominated_node_name != old_status.nominated_node_name and status.nominated_node_name:
        errs.extend(invalid("status.nominatedNodeName", status.nominated_node_name, m)
                    for m in is_dns1123_subdomain(status.nominated_node_name))
    if status.qos_class and status.qos_class != old_status.qos_class:
        errs.append(invalid("status.qosClass", status.qos_class, FIELD_IMMUTABLE))
    errs.extend(_state_transitions(status.container_statuses, old_status.container_statuses,
                                   "status.containerStatuses", old.spec.restart_policy))
    restartable = frozenset(c.name for c in old.spec.init_containers if c.restart_policy == "Always")
    errs.extend(_state_transitions(status.init_container_statuses, old_status.init_container_statuses,
                                   "status.initContainerStatuses", old.spec.restart_policy, restartable))
    errs.extend(_state_transitions(status.ephemeral_container_statuses, old_status.ephemeral_container_statuses,
                                   "status.ephemeralContainerStatuses", "Never"))
    claim_names = {c.name for c in new.spec.resource_claims}
    seen: set[str] = set()
    for i, rcs in enumerate(status.resource_claim_statuses):
        p = f"status.resourceClaimStatuses[{i}].name"
        if rcs.name not in claim_names:
            errs.append(invalid(p, rcs.name, "must match the name of an entry in `spec.resourceClaims`"))
        if rcs.name in seen:
            errs.append(duplicate(p, rcs.name))
        seen.add(rcs.name)
        if rcs.HasField("resource_claim_name"):
            errs.extend(invalid(p, rcs.resource_claim_name, m) for m in is_dns1123_subdomain(rcs.resource_claim_name))
    errs.extend(_validate_ips(status.pod_ips, "status.podIPs", core_pb2.PodIP.DESCRIPTOR))
    if status.host_ips:
        if status.host_ip != status.host_ips[0].ip:
            errs.append(invalid("status.hostIPs[0].ip", status.host_ips[0].ip, "must be equal to `hostIP`"))
        errs.extend(_validate_ips(status.host_ips, "status.hostIPs", core_pb2.HostIP.DESCRIPTOR))
    errs.extend(_validate_status_resources(status.container_statuses, "status.containerStatuses"))
    errs.extend(_validate_status_resources(status.init_container_statuses, "status.initContainerStatuses"))
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
