from google.protobuf import struct_pb2 as _struct_pb2
from machinery.api import meta_pb2 as _meta_pb2
from machinery.api import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Pod(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: PodSpec
    status: PodStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodSpec, _Mapping]] = ..., status: _Optional[_Union[PodStatus, _Mapping]] = ...) -> None: ...

class PodList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[Pod]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Pod, _Mapping]]] = ...) -> None: ...

class PodSpec(_message.Message):
    __slots__ = ("volumes", "init_containers", "containers", "ephemeral_containers", "restart_policy", "termination_grace_period_seconds", "active_deadline_seconds", "dns_policy", "node_selector", "service_account_name", "service_account", "automount_service_account_token", "node_name", "host_network", "host_pid", "host_ipc", "share_process_namespace", "security_context", "image_pull_secrets", "hostname", "subdomain", "affinity", "scheduler_name", "tolerations", "host_aliases", "priority_class_name", "priority", "dns_config", "readiness_gates", "runtime_class_name", "enable_service_links", "preemption_policy", "overhead", "topology_spread_constraints", "set_hostname_as_fqdn", "os", "host_users", "scheduling_gates", "resource_claims", "resources")
    class NodeSelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class OverheadEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    VOLUMES_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_CONTAINERS_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    DNS_POLICY_FIELD_NUMBER: _ClassVar[int]
    NODE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ACCOUNT_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVICE_ACCOUNT_FIELD_NUMBER: _ClassVar[int]
    AUTOMOUNT_SERVICE_ACCOUNT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_NETWORK_FIELD_NUMBER: _ClassVar[int]
    HOST_PID_FIELD_NUMBER: _ClassVar[int]
    HOST_IPC_FIELD_NUMBER: _ClassVar[int]
    SHARE_PROCESS_NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SECURITY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_PULL_SECRETS_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    SUBDOMAIN_FIELD_NUMBER: _ClassVar[int]
    AFFINITY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOLERATIONS_FIELD_NUMBER: _ClassVar[int]
    HOST_ALIASES_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DNS_CONFIG_FIELD_NUMBER: _ClassVar[int]
    READINESS_GATES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_CLASS_NAME_FIELD_NUMBER: _ClassVar[int]
    ENABLE_SERVICE_LINKS_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    OVERHEAD_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_SPREAD_CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    SET_HOSTNAME_AS_FQDN_FIELD_NUMBER: _ClassVar[int]
    OS_FIELD_NUMBER: _ClassVar[int]
    HOST_USERS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULING_GATES_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIMS_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    volumes: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    init_containers: _containers.RepeatedCompositeFieldContainer[Container]
    containers: _containers.RepeatedCompositeFieldContainer[Container]
    ephemeral_containers: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    restart_policy: str
    termination_grace_period_seconds: int
    active_deadline_seconds: int
    dns_policy: str
    node_selector: _containers.ScalarMap[str, str]
    service_account_name: str
    service_account: str
    automount_service_account_token: bool
    node_name: str
    host_network: bool
    host_pid: bool
    host_ipc: bool
    share_process_namespace: bool
    security_context: _struct_pb2.Struct
    image_pull_secrets: _containers.RepeatedCompositeFieldContainer[_meta_pb2.LocalObjectReference]
    hostname: str
    subdomain: str
    affinity: Affinity
    scheduler_name: str
    tolerations: _containers.RepeatedCompositeFieldContainer[Toleration]
    host_aliases: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    priority_class_name: str
    priority: int
    dns_config: _struct_pb2.Struct
    readiness_gates: _containers.RepeatedCompositeFieldContainer[PodReadinessGate]
    runtime_class_name: str
    enable_service_links: bool
    preemption_policy: str
    overhead: _containers.ScalarMap[str, str]
    topology_spread_constraints: _containers.RepeatedCompositeFieldContainer[TopologySpreadConstraint]
    set_hostname_as_fqdn: bool
    os: PodOS
    host_users: bool
    scheduling_gates: _containers.RepeatedCompositeFieldContainer[PodSchedulingGate]
    resource_claims: _containers.RepeatedCompositeFieldContainer[PodResourceClaim]
    resources: ResourceRequirements
    def __init__(self, volumes: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., init_containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., containers: _Optional[_Iterable[_Union[Container, _Mapping]]] = ..., ephemeral_containers: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., restart_policy: _Optional[str] = ..., termination_grace_period_seconds: _Optional[int] = ..., active_deadline_seconds: _Optional[int] = ..., dns_policy: _Optional[str] = ..., node_selector: _Optional[_Mapping[str, str]] = ..., service_account_name: _Optional[str] = ..., service_account: _Optional[str] = ..., automount_service_account_token: _Optional[bool] = ..., node_name: _Optional[str] = ..., host_network: _Optional[bool] = ..., host_pid: _Optional[bool] = ..., host_ipc: _Optional[bool] = ..., share_process_namespace: _Optional[bool] = ..., security_context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., image_pull_secrets: _Optional[_Iterable[_Union[_meta_pb2.LocalObjectReference, _Mapping]]] = ..., hostname: _Optional[str] = ..., subdomain: _Optional[str] = ..., affinity: _Optional[_Union[Affinity, _Mapping]] = ..., scheduler_name: _Optional[str] = ..., tolerations: _Optional[_Iterable[_Union[Toleration, _Mapping]]] = ..., host_aliases: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., priority_class_name: _Optional[str] = ..., priority: _Optional[int] = ..., dns_config: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., readiness_gates: _Optional[_Iterable[_Union[PodReadinessGate, _Mapping]]] = ..., runtime_class_name: _Optional[str] = ..., enable_service_links: _Optional[bool] = ..., preemption_policy: _Optional[str] = ..., overhead: _Optional[_Mapping[str, str]] = ..., topology_spread_constraints: _Optional[_Iterable[_Union[TopologySpreadConstraint, _Mapping]]] = ..., set_hostname_as_fqdn: _Optional[bool] = ..., os: _Optional[_Union[PodOS, _Mapping]] = ..., host_users: _Optional[bool] = ..., scheduling_gates: _Optional[_Iterable[_Union[PodSchedulingGate, _Mapping]]] = ..., resource_claims: _Optional[_Iterable[_Union[PodResourceClaim, _Mapping]]] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ...) -> None: ...

class VolumeMergeSchema(_message.Message):
    __slots__ = ("ephemeral",)
    EPHEMERAL_FIELD_NUMBER: _ClassVar[int]
    ephemeral: EphemeralVolumeMergeSchema
    def __init__(self, ephemeral: _Optional[_Union[EphemeralVolumeMergeSchema, _Mapping]] = ...) -> None: ...

class EphemeralVolumeMergeSchema(_message.Message):
    __slots__ = ("volume_claim_template",)
    VOLUME_CLAIM_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    volume_claim_template: PersistentVolumeClaimTemplateMergeSchema
    def __init__(self, volume_claim_template: _Optional[_Union[PersistentVolumeClaimTemplateMergeSchema, _Mapping]] = ...) -> None: ...

class PersistentVolumeClaimTemplateMergeSchema(_message.Message):
    __slots__ = ("metadata",)
    METADATA_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ...) -> None: ...

class PodOS(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PodReadinessGate(_message.Message):
    __slots__ = ("condition_type",)
    CONDITION_TYPE_FIELD_NUMBER: _ClassVar[int]
    condition_type: str
    def __init__(self, condition_type: _Optional[str] = ...) -> None: ...

class PodSchedulingGate(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class PodResourceClaim(_message.Message):
    __slots__ = ("name", "resource_claim_name", "resource_claim_template_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_TEMPLATE_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    resource_claim_name: str
    resource_claim_template_name: str
    def __init__(self, name: _Optional[str] = ..., resource_claim_name: _Optional[str] = ..., resource_claim_template_name: _Optional[str] = ...) -> None: ...

class Container(_message.Message):
    __slots__ = ("name", "image", "command", "args", "working_dir", "ports", "env_from", "env", "resources", "resize_policy", "restart_policy", "volume_mounts", "volume_devices", "liveness_probe", "readiness_probe", "startup_probe", "lifecycle", "termination_message_path", "termination_message_policy", "image_pull_policy", "security_context", "stdin", "stdin_once", "tty", "restart_policy_rules")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    WORKING_DIR_FIELD_NUMBER: _ClassVar[int]
    PORTS_FIELD_NUMBER: _ClassVar[int]
    ENV_FROM_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    RESIZE_POLICY_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    VOLUME_MOUNTS_FIELD_NUMBER: _ClassVar[int]
    VOLUME_DEVICES_FIELD_NUMBER: _ClassVar[int]
    LIVENESS_PROBE_FIELD_NUMBER: _ClassVar[int]
    READINESS_PROBE_FIELD_NUMBER: _ClassVar[int]
    STARTUP_PROBE_FIELD_NUMBER: _ClassVar[int]
    LIFECYCLE_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_MESSAGE_PATH_FIELD_NUMBER: _ClassVar[int]
    TERMINATION_MESSAGE_POLICY_FIELD_NUMBER: _ClassVar[int]
    IMAGE_PULL_POLICY_FIELD_NUMBER: _ClassVar[int]
    SECURITY_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    STDIN_FIELD_NUMBER: _ClassVar[int]
    STDIN_ONCE_FIELD_NUMBER: _ClassVar[int]
    TTY_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_RULES_FIELD_NUMBER: _ClassVar[int]
    name: str
    image: str
    command: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    working_dir: str
    ports: _containers.RepeatedCompositeFieldContainer[ContainerPort]
    env_from: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    env: _containers.RepeatedCompositeFieldContainer[EnvVar]
    resources: ResourceRequirements
    resize_policy: _containers.RepeatedCompositeFieldContainer[ContainerResizePolicy]
    restart_policy: str
    volume_mounts: _containers.RepeatedCompositeFieldContainer[VolumeMount]
    volume_devices: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    liveness_probe: _struct_pb2.Struct
    readiness_probe: _struct_pb2.Struct
    startup_probe: _struct_pb2.Struct
    lifecycle: _struct_pb2.Struct
    termination_message_path: str
    termination_message_policy: str
    image_pull_policy: str
    security_context: _struct_pb2.Struct
    stdin: bool
    stdin_once: bool
    tty: bool
    restart_policy_rules: _containers.RepeatedCompositeFieldContainer[ContainerRestartRule]
    def __init__(self, name: _Optional[str] = ..., image: _Optional[str] = ..., command: _Optional[_Iterable[str]] = ..., args: _Optional[_Iterable[str]] = ..., working_dir: _Optional[str] = ..., ports: _Optional[_Iterable[_Union[ContainerPort, _Mapping]]] = ..., env_from: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., env: _Optional[_Iterable[_Union[EnvVar, _Mapping]]] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ..., resize_policy: _Optional[_Iterable[_Union[ContainerResizePolicy, _Mapping]]] = ..., restart_policy: _Optional[str] = ..., volume_mounts: _Optional[_Iterable[_Union[VolumeMount, _Mapping]]] = ..., volume_devices: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., liveness_probe: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., readiness_probe: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., startup_probe: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., lifecycle: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., termination_message_path: _Optional[str] = ..., termination_message_policy: _Optional[str] = ..., image_pull_policy: _Optional[str] = ..., security_context: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., stdin: _Optional[bool] = ..., stdin_once: _Optional[bool] = ..., tty: _Optional[bool] = ..., restart_policy_rules: _Optional[_Iterable[_Union[ContainerRestartRule, _Mapping]]] = ...) -> None: ...

class ContainerRestartRule(_message.Message):
    __slots__ = ("action", "exit_codes")
    ACTION_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODES_FIELD_NUMBER: _ClassVar[int]
    action: str
    exit_codes: ContainerRestartRuleOnExitCodes
    def __init__(self, action: _Optional[str] = ..., exit_codes: _Optional[_Union[ContainerRestartRuleOnExitCodes, _Mapping]] = ...) -> None: ...

class ContainerRestartRuleOnExitCodes(_message.Message):
    __slots__ = ("operator", "values")
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    operator: str
    values: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, operator: _Optional[str] = ..., values: _Optional[_Iterable[int]] = ...) -> None: ...

class ContainerPort(_message.Message):
    __slots__ = ("name", "host_port", "container_port", "protocol", "host_ip")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_PORT_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_PORT_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    name: str
    host_port: int
    container_port: int
    protocol: str
    host_ip: str
    def __init__(self, name: _Optional[str] = ..., host_port: _Optional[int] = ..., container_port: _Optional[int] = ..., protocol: _Optional[str] = ..., host_ip: _Optional[str] = ...) -> None: ...

class EnvVar(_message.Message):
    __slots__ = ("name", "value", "value_from")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VALUE_FROM_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    value_from: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., value_from: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class VolumeMount(_message.Message):
    __slots__ = ("name", "read_only", "mount_path", "sub_path", "mount_propagation", "sub_path_expr", "recursive_read_only")
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    MOUNT_PATH_FIELD_NUMBER: _ClassVar[int]
    SUB_PATH_FIELD_NUMBER: _ClassVar[int]
    MOUNT_PROPAGATION_FIELD_NUMBER: _ClassVar[int]
    SUB_PATH_EXPR_FIELD_NUMBER: _ClassVar[int]
    RECURSIVE_READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    name: str
    read_only: bool
    mount_path: str
    sub_path: str
    mount_propagation: str
    sub_path_expr: str
    recursive_read_only: str
    def __init__(self, name: _Optional[str] = ..., read_only: _Optional[bool] = ..., mount_path: _Optional[str] = ..., sub_path: _Optional[str] = ..., mount_propagation: _Optional[str] = ..., sub_path_expr: _Optional[str] = ..., recursive_read_only: _Optional[str] = ...) -> None: ...

class ResourceRequirements(_message.Message):
    __slots__ = ("limits", "requests", "claims")
    class LimitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class RequestsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.ScalarMap[str, str]
    requests: _containers.ScalarMap[str, str]
    claims: _containers.RepeatedCompositeFieldContainer[ResourceClaimRef]
    def __init__(self, limits: _Optional[_Mapping[str, str]] = ..., requests: _Optional[_Mapping[str, str]] = ..., claims: _Optional[_Iterable[_Union[ResourceClaimRef, _Mapping]]] = ...) -> None: ...

class ResourceClaimRef(_message.Message):
    __slots__ = ("name", "request")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    name: str
    request: str
    def __init__(self, name: _Optional[str] = ..., request: _Optional[str] = ...) -> None: ...

class ContainerResizePolicy(_message.Message):
    __slots__ = ("resource_name", "restart_policy")
    RESOURCE_NAME_FIELD_NUMBER: _ClassVar[int]
    RESTART_POLICY_FIELD_NUMBER: _ClassVar[int]
    resource_name: str
    restart_policy: str
    def __init__(self, resource_name: _Optional[str] = ..., restart_policy: _Optional[str] = ...) -> None: ...

class Affinity(_message.Message):
    __slots__ = ("node_affinity", "pod_affinity", "pod_anti_affinity")
    NODE_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    POD_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    POD_ANTI_AFFINITY_FIELD_NUMBER: _ClassVar[int]
    node_affinity: NodeAffinity
    pod_affinity: PodAffinity
    pod_anti_affinity: PodAntiAffinity
    def __init__(self, node_affinity: _Optional[_Union[NodeAffinity, _Mapping]] = ..., pod_affinity: _Optional[_Union[PodAffinity, _Mapping]] = ..., pod_anti_affinity: _Optional[_Union[PodAntiAffinity, _Mapping]] = ...) -> None: ...

class NodeAffinity(_message.Message):
    __slots__ = ("required_during_scheduling_ignored_during_execution", "preferred_during_scheduling_ignored_during_execution")
    REQUIRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    required_during_scheduling_ignored_during_execution: NodeSelector
    preferred_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[PreferredSchedulingTerm]
    def __init__(self, required_during_scheduling_ignored_during_execution: _Optional[_Union[NodeSelector, _Mapping]] = ..., preferred_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[PreferredSchedulingTerm, _Mapping]]] = ...) -> None: ...

class NodeSelector(_message.Message):
    __slots__ = ("node_selector_terms",)
    NODE_SELECTOR_TERMS_FIELD_NUMBER: _ClassVar[int]
    node_selector_terms: _containers.RepeatedCompositeFieldContainer[NodeSelectorTerm]
    def __init__(self, node_selector_terms: _Optional[_Iterable[_Union[NodeSelectorTerm, _Mapping]]] = ...) -> None: ...

class NodeSelectorTerm(_message.Message):
    __slots__ = ("match_expressions", "match_fields")
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELDS_FIELD_NUMBER: _ClassVar[int]
    match_expressions: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    match_fields: _containers.RepeatedCompositeFieldContainer[NodeSelectorRequirement]
    def __init__(self, match_expressions: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ..., match_fields: _Optional[_Iterable[_Union[NodeSelectorRequirement, _Mapping]]] = ...) -> None: ...

class NodeSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class PreferredSchedulingTerm(_message.Message):
    __slots__ = ("weight", "preference")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    weight: int
    preference: NodeSelectorTerm
    def __init__(self, weight: _Optional[int] = ..., preference: _Optional[_Union[NodeSelectorTerm, _Mapping]] = ...) -> None: ...

class PodAffinity(_message.Message):
    __slots__ = ("required_during_scheduling_ignored_during_execution", "preferred_during_scheduling_ignored_during_execution")
    REQUIRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    required_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[PodAffinityTerm]
    preferred_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[WeightedPodAffinityTerm]
    def __init__(self, required_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[PodAffinityTerm, _Mapping]]] = ..., preferred_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[WeightedPodAffinityTerm, _Mapping]]] = ...) -> None: ...

class PodAntiAffinity(_message.Message):
    __slots__ = ("required_during_scheduling_ignored_during_execution", "preferred_during_scheduling_ignored_during_execution")
    REQUIRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    PREFERRED_DURING_SCHEDULING_IGNORED_DURING_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    required_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[PodAffinityTerm]
    preferred_during_scheduling_ignored_during_execution: _containers.RepeatedCompositeFieldContainer[WeightedPodAffinityTerm]
    def __init__(self, required_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[PodAffinityTerm, _Mapping]]] = ..., preferred_during_scheduling_ignored_during_execution: _Optional[_Iterable[_Union[WeightedPodAffinityTerm, _Mapping]]] = ...) -> None: ...

class PodAffinityTerm(_message.Message):
    __slots__ = ("label_selector", "namespaces", "topology_key", "namespace_selector", "match_label_keys", "mismatch_label_keys")
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    MISMATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    label_selector: _meta_pb2.LabelSelector
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    topology_key: str
    namespace_selector: _meta_pb2.LabelSelector
    match_label_keys: _containers.RepeatedScalarFieldContainer[str]
    mismatch_label_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, label_selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., namespaces: _Optional[_Iterable[str]] = ..., topology_key: _Optional[str] = ..., namespace_selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., match_label_keys: _Optional[_Iterable[str]] = ..., mismatch_label_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class WeightedPodAffinityTerm(_message.Message):
    __slots__ = ("weight", "pod_affinity_term")
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    POD_AFFINITY_TERM_FIELD_NUMBER: _ClassVar[int]
    weight: int
    pod_affinity_term: PodAffinityTerm
    def __init__(self, weight: _Optional[int] = ..., pod_affinity_term: _Optional[_Union[PodAffinityTerm, _Mapping]] = ...) -> None: ...

class Toleration(_message.Message):
    __slots__ = ("key", "operator", "value", "effect", "toleration_seconds")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TOLERATION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    value: str
    effect: str
    toleration_seconds: int
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., toleration_seconds: _Optional[int] = ...) -> None: ...

class TopologySpreadConstraint(_message.Message):
    __slots__ = ("max_skew", "topology_key", "when_unsatisfiable", "label_selector", "min_domains", "node_affinity_policy", "node_taints_policy", "match_label_keys")
    MAX_SKEW_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_KEY_FIELD_NUMBER: _ClassVar[int]
    WHEN_UNSATISFIABLE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    MIN_DOMAINS_FIELD_NUMBER: _ClassVar[int]
    NODE_AFFINITY_POLICY_FIELD_NUMBER: _ClassVar[int]
    NODE_TAINTS_POLICY_FIELD_NUMBER: _ClassVar[int]
    MATCH_LABEL_KEYS_FIELD_NUMBER: _ClassVar[int]
    max_skew: int
    topology_key: str
    when_unsatisfiable: str
    label_selector: _meta_pb2.LabelSelector
    min_domains: int
    node_affinity_policy: str
    node_taints_policy: str
    match_label_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, max_skew: _Optional[int] = ..., topology_key: _Optional[str] = ..., when_unsatisfiable: _Optional[str] = ..., label_selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., min_domains: _Optional[int] = ..., node_affinity_policy: _Optional[str] = ..., node_taints_policy: _Optional[str] = ..., match_label_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class PodStatus(_message.Message):
    __slots__ = ("observed_generation", "phase", "conditions", "message", "reason", "nominated_node_name", "host_ip", "host_ips", "pod_ip", "pod_ips", "start_time", "init_container_statuses", "container_statuses", "ephemeral_container_statuses", "qos_class", "resize", "resource_claim_statuses")
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    NOMINATED_NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    HOST_IP_FIELD_NUMBER: _ClassVar[int]
    HOST_IPS_FIELD_NUMBER: _ClassVar[int]
    POD_IP_FIELD_NUMBER: _ClassVar[int]
    POD_IPS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    INIT_CONTAINER_STATUSES_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_STATUSES_FIELD_NUMBER: _ClassVar[int]
    EPHEMERAL_CONTAINER_STATUSES_FIELD_NUMBER: _ClassVar[int]
    QOS_CLASS_FIELD_NUMBER: _ClassVar[int]
    RESIZE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_STATUSES_FIELD_NUMBER: _ClassVar[int]
    observed_generation: int
    phase: str
    conditions: _containers.RepeatedCompositeFieldContainer[PodCondition]
    message: str
    reason: str
    nominated_node_name: str
    host_ip: str
    host_ips: _containers.RepeatedCompositeFieldContainer[HostIP]
    pod_ip: str
    pod_ips: _containers.RepeatedCompositeFieldContainer[PodIP]
    start_time: str
    init_container_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    container_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    ephemeral_container_statuses: _containers.RepeatedCompositeFieldContainer[ContainerStatus]
    qos_class: str
    resize: str
    resource_claim_statuses: _containers.RepeatedCompositeFieldContainer[PodResourceClaimStatus]
    def __init__(self, observed_generation: _Optional[int] = ..., phase: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[PodCondition, _Mapping]]] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., nominated_node_name: _Optional[str] = ..., host_ip: _Optional[str] = ..., host_ips: _Optional[_Iterable[_Union[HostIP, _Mapping]]] = ..., pod_ip: _Optional[str] = ..., pod_ips: _Optional[_Iterable[_Union[PodIP, _Mapping]]] = ..., start_time: _Optional[str] = ..., init_container_statuses: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., container_statuses: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., ephemeral_container_statuses: _Optional[_Iterable[_Union[ContainerStatus, _Mapping]]] = ..., qos_class: _Optional[str] = ..., resize: _Optional[str] = ..., resource_claim_statuses: _Optional[_Iterable[_Union[PodResourceClaimStatus, _Mapping]]] = ...) -> None: ...

class HostIP(_message.Message):
    __slots__ = ("ip",)
    IP_FIELD_NUMBER: _ClassVar[int]
    ip: str
    def __init__(self, ip: _Optional[str] = ...) -> None: ...

class PodIP(_message.Message):
    __slots__ = ("ip",)
    IP_FIELD_NUMBER: _ClassVar[int]
    ip: str
    def __init__(self, ip: _Optional[str] = ...) -> None: ...

class PodResourceClaimStatus(_message.Message):
    __slots__ = ("name", "resource_claim_name")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CLAIM_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    resource_claim_name: str
    def __init__(self, name: _Optional[str] = ..., resource_claim_name: _Optional[str] = ...) -> None: ...

class PodCondition(_message.Message):
    __slots__ = ("type", "observed_generation", "status", "last_probe_time", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_PROBE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    observed_generation: int
    status: str
    last_probe_time: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., observed_generation: _Optional[int] = ..., status: _Optional[str] = ..., last_probe_time: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ContainerStatus(_message.Message):
    __slots__ = ("name", "state", "last_state", "ready", "restart_count", "image", "image_id", "container_id", "started", "allocated_resources", "resources")
    class AllocatedResourcesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LAST_STATE_FIELD_NUMBER: _ClassVar[int]
    READY_FIELD_NUMBER: _ClassVar[int]
    RESTART_COUNT_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_ID_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    ALLOCATED_RESOURCES_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: ContainerState
    last_state: ContainerState
    ready: bool
    restart_count: int
    image: str
    image_id: str
    container_id: str
    started: bool
    allocated_resources: _containers.ScalarMap[str, str]
    resources: ResourceRequirements
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[ContainerState, _Mapping]] = ..., last_state: _Optional[_Union[ContainerState, _Mapping]] = ..., ready: _Optional[bool] = ..., restart_count: _Optional[int] = ..., image: _Optional[str] = ..., image_id: _Optional[str] = ..., container_id: _Optional[str] = ..., started: _Optional[bool] = ..., allocated_resources: _Optional[_Mapping[str, str]] = ..., resources: _Optional[_Union[ResourceRequirements, _Mapping]] = ...) -> None: ...

class ContainerState(_message.Message):
    __slots__ = ("waiting", "running", "terminated")
    WAITING_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    TERMINATED_FIELD_NUMBER: _ClassVar[int]
    waiting: ContainerStateWaiting
    running: ContainerStateRunning
    terminated: ContainerStateTerminated
    def __init__(self, waiting: _Optional[_Union[ContainerStateWaiting, _Mapping]] = ..., running: _Optional[_Union[ContainerStateRunning, _Mapping]] = ..., terminated: _Optional[_Union[ContainerStateTerminated, _Mapping]] = ...) -> None: ...

class ContainerStateWaiting(_message.Message):
    __slots__ = ("reason", "message")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    message: str
    def __init__(self, reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ContainerStateRunning(_message.Message):
    __slots__ = ("started_at",)
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    started_at: str
    def __init__(self, started_at: _Optional[str] = ...) -> None: ...

class ContainerStateTerminated(_message.Message):
    __slots__ = ("exit_code", "signal", "reason", "message", "started_at", "finished_at", "container_id")
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ID_FIELD_NUMBER: _ClassVar[int]
    exit_code: int
    signal: int
    reason: str
    message: str
    started_at: str
    finished_at: str
    container_id: str
    def __init__(self, exit_code: _Optional[int] = ..., signal: _Optional[int] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., started_at: _Optional[str] = ..., finished_at: _Optional[str] = ..., container_id: _Optional[str] = ...) -> None: ...

class PodWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: Pod
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[Pod, _Mapping]] = ...) -> None: ...

class PodWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[PodWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[PodWatchEvent, _Mapping]]] = ...) -> None: ...

class Binding(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "target")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    target: _meta_pb2.ObjectReference
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., target: _Optional[_Union[_meta_pb2.ObjectReference, _Mapping]] = ...) -> None: ...

class Eviction(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "delete_options")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    DELETE_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    delete_options: DeleteOptions
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., delete_options: _Optional[_Union[DeleteOptions, _Mapping]] = ...) -> None: ...

class DeleteOptions(_message.Message):
    __slots__ = ("grace_period_seconds", "preconditions", "propagation_policy")
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PRECONDITIONS_FIELD_NUMBER: _ClassVar[int]
    PROPAGATION_POLICY_FIELD_NUMBER: _ClassVar[int]
    grace_period_seconds: int
    preconditions: _meta_pb2.Preconditions
    propagation_policy: str
    def __init__(self, grace_period_seconds: _Optional[int] = ..., preconditions: _Optional[_Union[_meta_pb2.Preconditions, _Mapping]] = ..., propagation_policy: _Optional[str] = ...) -> None: ...

class Node(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: NodeSpec
    status: NodeStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[NodeSpec, _Mapping]] = ..., status: _Optional[_Union[NodeStatus, _Mapping]] = ...) -> None: ...

class NodeList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[Node]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Node, _Mapping]]] = ...) -> None: ...

class NodeSpec(_message.Message):
    __slots__ = ("pod_cidr", "pod_cidrs", "provider_id", "unschedulable", "taints", "pod_preemption_policy")
    POD_CIDR_FIELD_NUMBER: _ClassVar[int]
    POD_CIDRS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_ID_FIELD_NUMBER: _ClassVar[int]
    UNSCHEDULABLE_FIELD_NUMBER: _ClassVar[int]
    TAINTS_FIELD_NUMBER: _ClassVar[int]
    POD_PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    pod_cidr: str
    pod_cidrs: _containers.RepeatedScalarFieldContainer[str]
    provider_id: str
    unschedulable: bool
    taints: _containers.RepeatedCompositeFieldContainer[Taint]
    pod_preemption_policy: NodePodPreemptionPolicy
    def __init__(self, pod_cidr: _Optional[str] = ..., pod_cidrs: _Optional[_Iterable[str]] = ..., provider_id: _Optional[str] = ..., unschedulable: _Optional[bool] = ..., taints: _Optional[_Iterable[_Union[Taint, _Mapping]]] = ..., pod_preemption_policy: _Optional[_Union[NodePodPreemptionPolicy, _Mapping]] = ...) -> None: ...

class NodePodPreemptionPolicy(_message.Message):
    __slots__ = ("disable_resize_preemption",)
    DISABLE_RESIZE_PREEMPTION_FIELD_NUMBER: _ClassVar[int]
    disable_resize_preemption: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, disable_resize_preemption: _Optional[_Iterable[str]] = ...) -> None: ...

class Taint(_message.Message):
    __slots__ = ("key", "value", "effect", "time_added")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    EFFECT_FIELD_NUMBER: _ClassVar[int]
    TIME_ADDED_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    effect: str
    time_added: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., effect: _Optional[str] = ..., time_added: _Optional[str] = ...) -> None: ...

class NodeStatus(_message.Message):
    __slots__ = ("capacity", "allocatable", "phase", "conditions", "addresses", "daemon_endpoints", "node_info", "images", "volumes_in_use", "features", "runtime_handlers", "declared_features")
    class CapacityEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AllocatableEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    ALLOCATABLE_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    ADDRESSES_FIELD_NUMBER: _ClassVar[int]
    DAEMON_ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    NODE_INFO_FIELD_NUMBER: _ClassVar[int]
    IMAGES_FIELD_NUMBER: _ClassVar[int]
    VOLUMES_IN_USE_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    RUNTIME_HANDLERS_FIELD_NUMBER: _ClassVar[int]
    DECLARED_FEATURES_FIELD_NUMBER: _ClassVar[int]
    capacity: _containers.ScalarMap[str, str]
    allocatable: _containers.ScalarMap[str, str]
    phase: str
    conditions: _containers.RepeatedCompositeFieldContainer[NodeCondition]
    addresses: _containers.RepeatedCompositeFieldContainer[NodeAddress]
    daemon_endpoints: _struct_pb2.Struct
    node_info: NodeSystemInfo
    images: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    volumes_in_use: _containers.RepeatedScalarFieldContainer[str]
    features: _struct_pb2.Struct
    runtime_handlers: _containers.RepeatedCompositeFieldContainer[_struct_pb2.Struct]
    declared_features: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, capacity: _Optional[_Mapping[str, str]] = ..., allocatable: _Optional[_Mapping[str, str]] = ..., phase: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[NodeCondition, _Mapping]]] = ..., addresses: _Optional[_Iterable[_Union[NodeAddress, _Mapping]]] = ..., daemon_endpoints: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., node_info: _Optional[_Union[NodeSystemInfo, _Mapping]] = ..., images: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., volumes_in_use: _Optional[_Iterable[str]] = ..., features: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., runtime_handlers: _Optional[_Iterable[_Union[_struct_pb2.Struct, _Mapping]]] = ..., declared_features: _Optional[_Iterable[str]] = ...) -> None: ...

class NodeCondition(_message.Message):
    __slots__ = ("type", "status", "last_heartbeat_time", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_heartbeat_time: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_heartbeat_time: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class NodeAddress(_message.Message):
    __slots__ = ("type", "address")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    type: str
    address: str
    def __init__(self, type: _Optional[str] = ..., address: _Optional[str] = ...) -> None: ...

class NodeSystemInfo(_message.Message):
    __slots__ = ("machine_id", "system_uuid", "boot_id", "kernel_version", "os_image", "container_runtime_version", "kubelet_version", "kube_proxy_version", "operating_system", "architecture")
    MACHINE_ID_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_UUID_FIELD_NUMBER: _ClassVar[int]
    BOOT_ID_FIELD_NUMBER: _ClassVar[int]
    KERNEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    OS_IMAGE_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_RUNTIME_VERSION_FIELD_NUMBER: _ClassVar[int]
    KUBELET_VERSION_FIELD_NUMBER: _ClassVar[int]
    KUBE_PROXY_VERSION_FIELD_NUMBER: _ClassVar[int]
    OPERATING_SYSTEM_FIELD_NUMBER: _ClassVar[int]
    ARCHITECTURE_FIELD_NUMBER: _ClassVar[int]
    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str
    container_runtime_version: str
    kubelet_version: str
    kube_proxy_version: str
    operating_system: str
    architecture: str
    def __init__(self, machine_id: _Optional[str] = ..., system_uuid: _Optional[str] = ..., boot_id: _Optional[str] = ..., kernel_version: _Optional[str] = ..., os_image: _Optional[str] = ..., container_runtime_version: _Optional[str] = ..., kubelet_version: _Optional[str] = ..., kube_proxy_version: _Optional[str] = ..., operating_system: _Optional[str] = ..., architecture: _Optional[str] = ...) -> None: ...

class NodeWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: Node
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[Node, _Mapping]] = ...) -> None: ...

class NodeWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[NodeWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[NodeWatchEvent, _Mapping]]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "involved_object", "reason", "message", "source", "first_timestamp", "last_timestamp", "count", "type", "event_time", "series", "action", "related", "reporting_component", "reporting_instance")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    INVOLVED_OBJECT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    FIRST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: _ClassVar[int]
    SERIES_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    RELATED_FIELD_NUMBER: _ClassVar[int]
    REPORTING_COMPONENT_FIELD_NUMBER: _ClassVar[int]
    REPORTING_INSTANCE_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    involved_object: _meta_pb2.ObjectReference
    reason: str
    message: str
    source: EventSource
    first_timestamp: str
    last_timestamp: str
    count: int
    type: str
    event_time: str
    series: _struct_pb2.Struct
    action: str
    related: _meta_pb2.ObjectReference
    reporting_component: str
    reporting_instance: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., involved_object: _Optional[_Union[_meta_pb2.ObjectReference, _Mapping]] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ..., source: _Optional[_Union[EventSource, _Mapping]] = ..., first_timestamp: _Optional[str] = ..., last_timestamp: _Optional[str] = ..., count: _Optional[int] = ..., type: _Optional[str] = ..., event_time: _Optional[str] = ..., series: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., action: _Optional[str] = ..., related: _Optional[_Union[_meta_pb2.ObjectReference, _Mapping]] = ..., reporting_component: _Optional[str] = ..., reporting_instance: _Optional[str] = ...) -> None: ...

class EventSource(_message.Message):
    __slots__ = ("component", "host")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    component: str
    host: str
    def __init__(self, component: _Optional[str] = ..., host: _Optional[str] = ...) -> None: ...

class EventList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class EventWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: Event
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[Event, _Mapping]] = ...) -> None: ...

class EventWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[EventWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[EventWatchEvent, _Mapping]]] = ...) -> None: ...

class PodTemplateSpec(_message.Message):
    __slots__ = ("metadata", "spec")
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    metadata: _meta_pb2.ObjectMeta
    spec: PodSpec
    def __init__(self, metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[PodSpec, _Mapping]] = ...) -> None: ...

class Namespace(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: NamespaceSpec
    status: NamespaceStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[NamespaceSpec, _Mapping]] = ..., status: _Optional[_Union[NamespaceStatus, _Mapping]] = ...) -> None: ...

class NamespaceSpec(_message.Message):
    __slots__ = ("finalizers",)
    FINALIZERS_FIELD_NUMBER: _ClassVar[int]
    finalizers: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, finalizers: _Optional[_Iterable[str]] = ...) -> None: ...

class NamespaceStatus(_message.Message):
    __slots__ = ("phase", "conditions")
    PHASE_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    phase: str
    conditions: _containers.RepeatedCompositeFieldContainer[NamespaceCondition]
    def __init__(self, phase: _Optional[str] = ..., conditions: _Optional[_Iterable[_Union[NamespaceCondition, _Mapping]]] = ...) -> None: ...

class NamespaceCondition(_message.Message):
    __slots__ = ("type", "status", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class NamespaceList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[Namespace]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Namespace, _Mapping]]] = ...) -> None: ...

class NamespaceWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: Namespace
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[Namespace, _Mapping]] = ...) -> None: ...

class NamespaceWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[NamespaceWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[NamespaceWatchEvent, _Mapping]]] = ...) -> None: ...

class ResourceQuota(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: ResourceQuotaSpec
    status: ResourceQuotaStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[ResourceQuotaSpec, _Mapping]] = ..., status: _Optional[_Union[ResourceQuotaStatus, _Mapping]] = ...) -> None: ...

class ResourceQuotaSpec(_message.Message):
    __slots__ = ("hard", "scopes", "scope_selector")
    class HardEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HARD_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SCOPE_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    hard: _containers.ScalarMap[str, str]
    scopes: _containers.RepeatedScalarFieldContainer[str]
    scope_selector: ScopeSelector
    def __init__(self, hard: _Optional[_Mapping[str, str]] = ..., scopes: _Optional[_Iterable[str]] = ..., scope_selector: _Optional[_Union[ScopeSelector, _Mapping]] = ...) -> None: ...

class ScopeSelector(_message.Message):
    __slots__ = ("match_expressions",)
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    match_expressions: _containers.RepeatedCompositeFieldContainer[ScopedResourceSelectorRequirement]
    def __init__(self, match_expressions: _Optional[_Iterable[_Union[ScopedResourceSelectorRequirement, _Mapping]]] = ...) -> None: ...

class ScopedResourceSelectorRequirement(_message.Message):
    __slots__ = ("scope_name", "operator", "values")
    SCOPE_NAME_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    scope_name: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, scope_name: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class ResourceQuotaStatus(_message.Message):
    __slots__ = ("hard", "used")
    class HardEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class UsedEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    HARD_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    hard: _containers.ScalarMap[str, str]
    used: _containers.ScalarMap[str, str]
    def __init__(self, hard: _Optional[_Mapping[str, str]] = ..., used: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ResourceQuotaList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[ResourceQuota]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[ResourceQuota, _Mapping]]] = ...) -> None: ...

class ResourceQuotaWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: ResourceQuota
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[ResourceQuota, _Mapping]] = ...) -> None: ...

class ResourceQuotaWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ResourceQuotaWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ResourceQuotaWatchEvent, _Mapping]]] = ...) -> None: ...

class LimitRange(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: LimitRangeSpec
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[LimitRangeSpec, _Mapping]] = ...) -> None: ...

class LimitRangeSpec(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[LimitRangeItem]
    def __init__(self, limits: _Optional[_Iterable[_Union[LimitRangeItem, _Mapping]]] = ...) -> None: ...

class LimitRangeItem(_message.Message):
    __slots__ = ("type", "max", "min", "default", "default_request", "max_limit_request_ratio")
    class MaxEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MinEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class DefaultEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class DefaultRequestEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class MaxLimitRequestRatioEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    TYPE_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    MIN_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    MAX_LIMIT_REQUEST_RATIO_FIELD_NUMBER: _ClassVar[int]
    type: str
    max: _containers.ScalarMap[str, str]
    min: _containers.ScalarMap[str, str]
    default: _containers.ScalarMap[str, str]
    default_request: _containers.ScalarMap[str, str]
    max_limit_request_ratio: _containers.ScalarMap[str, str]
    def __init__(self, type: _Optional[str] = ..., max: _Optional[_Mapping[str, str]] = ..., min: _Optional[_Mapping[str, str]] = ..., default: _Optional[_Mapping[str, str]] = ..., default_request: _Optional[_Mapping[str, str]] = ..., max_limit_request_ratio: _Optional[_Mapping[str, str]] = ...) -> None: ...

class LimitRangeList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[LimitRange]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[LimitRange, _Mapping]]] = ...) -> None: ...

class LimitRangeWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: LimitRange
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[LimitRange, _Mapping]] = ...) -> None: ...

class LimitRangeWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[LimitRangeWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[LimitRangeWatchEvent, _Mapping]]] = ...) -> None: ...
