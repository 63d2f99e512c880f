from machinery.api import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ObjectMeta(_message.Message):
    __slots__ = ("name", "generate_name", "namespace", "uid", "resource_version", "generation", "creation_timestamp", "deletion_timestamp", "deletion_grace_period_seconds", "labels", "annotations", "owner_references", "finalizers", "managed_fields")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class AnnotationsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATE_NAME_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    CREATION_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DELETION_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    DELETION_GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    OWNER_REFERENCES_FIELD_NUMBER: _ClassVar[int]
    FINALIZERS_FIELD_NUMBER: _ClassVar[int]
    MANAGED_FIELDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    generate_name: str
    namespace: str
    uid: str
    resource_version: str
    generation: int
    creation_timestamp: str
    deletion_timestamp: str
    deletion_grace_period_seconds: int
    labels: _containers.ScalarMap[str, str]
    annotations: _containers.ScalarMap[str, str]
    owner_references: _containers.RepeatedCompositeFieldContainer[OwnerReference]
    finalizers: _containers.RepeatedScalarFieldContainer[str]
    managed_fields: _containers.RepeatedCompositeFieldContainer[ManagedFieldsEntry]
    def __init__(self, name: _Optional[str] = ..., generate_name: _Optional[str] = ..., namespace: _Optional[str] = ..., uid: _Optional[str] = ..., resource_version: _Optional[str] = ..., generation: _Optional[int] = ..., creation_timestamp: _Optional[str] = ..., deletion_timestamp: _Optional[str] = ..., deletion_grace_period_seconds: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., annotations: _Optional[_Mapping[str, str]] = ..., owner_references: _Optional[_Iterable[_Union[OwnerReference, _Mapping]]] = ..., finalizers: _Optional[_Iterable[str]] = ..., managed_fields: _Optional[_Iterable[_Union[ManagedFieldsEntry, _Mapping]]] = ...) -> None: ...

class ManagedFieldsEntry(_message.Message):
    __slots__ = ("manager", "operation", "api_version", "time", "fields_type", "fields_v1", "subresource")
    MANAGER_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIME_FIELD_NUMBER: _ClassVar[int]
    FIELDS_TYPE_FIELD_NUMBER: _ClassVar[int]
    FIELDS_V1_FIELD_NUMBER: _ClassVar[int]
    SUBRESOURCE_FIELD_NUMBER: _ClassVar[int]
    manager: str
    operation: str
    api_version: str
    time: str
    fields_type: str
    fields_v1: str
    subresource: str
    def __init__(self, manager: _Optional[str] = ..., operation: _Optional[str] = ..., api_version: _Optional[str] = ..., time: _Optional[str] = ..., fields_type: _Optional[str] = ..., fields_v1: _Optional[str] = ..., subresource: _Optional[str] = ...) -> None: ...

class OwnerReference(_message.Message):
    __slots__ = ("api_version", "kind", "name", "uid", "controller", "block_owner_deletion")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_FIELD_NUMBER: _ClassVar[int]
    BLOCK_OWNER_DELETION_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool
    block_owner_deletion: bool
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., controller: _Optional[bool] = ..., block_owner_deletion: _Optional[bool] = ...) -> None: ...

class ListMeta(_message.Message):
    __slots__ = ("resource_version", "continue_token", "remaining_item_count")
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REMAINING_ITEM_COUNT_FIELD_NUMBER: _ClassVar[int]
    resource_version: str
    continue_token: str
    remaining_item_count: int
    def __init__(self, resource_version: _Optional[str] = ..., continue_token: _Optional[str] = ..., remaining_item_count: _Optional[int] = ...) -> None: ...

class LabelSelector(_message.Message):
    __slots__ = ("match_labels", "match_expressions")
    class MatchLabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    MATCH_LABELS_FIELD_NUMBER: _ClassVar[int]
    MATCH_EXPRESSIONS_FIELD_NUMBER: _ClassVar[int]
    match_labels: _containers.ScalarMap[str, str]
    match_expressions: _containers.RepeatedCompositeFieldContainer[LabelSelectorRequirement]
    def __init__(self, match_labels: _Optional[_Mapping[str, str]] = ..., match_expressions: _Optional[_Iterable[_Union[LabelSelectorRequirement, _Mapping]]] = ...) -> None: ...

class LabelSelectorRequirement(_message.Message):
    __slots__ = ("key", "operator", "values")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: str
    values: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[str] = ..., values: _Optional[_Iterable[str]] = ...) -> None: ...

class Condition(_message.Message):
    __slots__ = ("type", "status", "observed_generation", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    observed_generation: int
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., observed_generation: _Optional[int] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class ObjectReference(_message.Message):
    __slots__ = ("kind", "namespace", "name", "uid", "api_version", "resource_version", "field_path")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UID_FIELD_NUMBER: _ClassVar[int]
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    FIELD_PATH_FIELD_NUMBER: _ClassVar[int]
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    resource_version: str
    field_path: str
    def __init__(self, kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., uid: _Optional[str] = ..., api_version: _Optional[str] = ..., resource_version: _Optional[str] = ..., field_path: _Optional[str] = ...) -> None: ...

class LocalObjectReference(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("namespace", "name")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("namespace", "label_selector", "field_selector", "resource_version", "limit", "continue_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    CONTINUE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    label_selector: str
    field_selector: str
    resource_version: str
    limit: int
    continue_token: str
    def __init__(self, namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., resource_version: _Optional[str] = ..., limit: _Optional[int] = ..., continue_token: _Optional[str] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("namespace", "label_selector", "field_selector", "resource_version", "allow_watch_bookmarks", "send_initial_events")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    LABEL_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    FIELD_SELECTOR_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALLOW_WATCH_BOOKMARKS_FIELD_NUMBER: _ClassVar[int]
    SEND_INITIAL_EVENTS_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    label_selector: str
    field_selector: str
    resource_version: str
    allow_watch_bookmarks: bool
    send_initial_events: bool
    def __init__(self, namespace: _Optional[str] = ..., label_selector: _Optional[str] = ..., field_selector: _Optional[str] = ..., resource_version: _Optional[str] = ..., allow_watch_bookmarks: _Optional[bool] = ..., send_initial_events: _Optional[bool] = ...) -> None: ...

class Preconditions(_message.Message):
    __slots__ = ("uid", "resource_version")
    UID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_VERSION_FIELD_NUMBER: _ClassVar[int]
    uid: str
    resource_version: str
    def __init__(self, uid: _Optional[str] = ..., resource_version: _Optional[str] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("namespace", "name", "grace_period_seconds", "preconditions", "propagation_policy")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GRACE_PERIOD_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PRECONDITIONS_FIELD_NUMBER: _ClassVar[int]
    PROPAGATION_POLICY_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    grace_period_seconds: int
    preconditions: Preconditions
    propagation_policy: str
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., grace_period_seconds: _Optional[int] = ..., preconditions: _Optional[_Union[Preconditions, _Mapping]] = ..., propagation_policy: _Optional[str] = ...) -> None: ...

class PatchRequest(_message.Message):
    __slots__ = ("namespace", "name", "patch_type", "patch", "subresource", "field_manager", "force")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PATCH_TYPE_FIELD_NUMBER: _ClassVar[int]
    PATCH_FIELD_NUMBER: _ClassVar[int]
    SUBRESOURCE_FIELD_NUMBER: _ClassVar[int]
    FIELD_MANAGER_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    name: str
    patch_type: str
    patch: str
    subresource: str
    field_manager: str
    force: bool
    def __init__(self, namespace: _Optional[str] = ..., name: _Optional[str] = ..., patch_type: _Optional[str] = ..., patch: _Optional[str] = ..., subresource: _Optional[str] = ..., field_manager: _Optional[str] = ..., force: _Optional[bool] = ...) -> None: ...
