from machinery.api import core_pb2 as _core_pb2
from machinery.api import meta_pb2 as _meta_pb2
from machinery.api import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaSet(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: ReplicaSetSpec
    status: ReplicaSetStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[ReplicaSetSpec, _Mapping]] = ..., status: _Optional[_Union[ReplicaSetStatus, _Mapping]] = ...) -> None: ...

class ReplicaSetSpec(_message.Message):
    __slots__ = ("replicas", "selector", "template", "min_ready_seconds")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    MIN_READY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    selector: _meta_pb2.LabelSelector
    template: _core_pb2.PodTemplateSpec
    min_ready_seconds: int
    def __init__(self, replicas: _Optional[int] = ..., selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., template: _Optional[_Union[_core_pb2.PodTemplateSpec, _Mapping]] = ..., min_ready_seconds: _Optional[int] = ...) -> None: ...

class ReplicaSetStatus(_message.Message):
    __slots__ = ("replicas", "fully_labeled_replicas", "observed_generation", "ready_replicas", "available_replicas", "conditions", "terminating_replicas")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    FULLY_LABELED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    fully_labeled_replicas: int
    observed_generation: int
    ready_replicas: int
    available_replicas: int
    conditions: _containers.RepeatedCompositeFieldContainer[ReplicaSetCondition]
    terminating_replicas: int
    def __init__(self, replicas: _Optional[int] = ..., fully_labeled_replicas: _Optional[int] = ..., observed_generation: _Optional[int] = ..., ready_replicas: _Optional[int] = ..., available_replicas: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[ReplicaSetCondition, _Mapping]]] = ..., terminating_replicas: _Optional[int] = ...) -> None: ...

class ReplicaSetCondition(_message.Message):
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

class ReplicaSetList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[ReplicaSet]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[ReplicaSet, _Mapping]]] = ...) -> None: ...

class ReplicaSetWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: ReplicaSet
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[ReplicaSet, _Mapping]] = ...) -> None: ...

class ReplicaSetWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ReplicaSetWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[ReplicaSetWatchEvent, _Mapping]]] = ...) -> None: ...

class Deployment(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "spec", "status")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    spec: DeploymentSpec
    status: DeploymentStatus
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., spec: _Optional[_Union[DeploymentSpec, _Mapping]] = ..., status: _Optional[_Union[DeploymentStatus, _Mapping]] = ...) -> None: ...

class DeploymentSpec(_message.Message):
    __slots__ = ("replicas", "selector", "template", "strategy", "min_ready_seconds", "revision_history_limit", "paused", "progress_deadline_seconds")
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MIN_READY_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REVISION_HISTORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    replicas: int
    selector: _meta_pb2.LabelSelector
    template: _core_pb2.PodTemplateSpec
    strategy: DeploymentStrategy
    min_ready_seconds: int
    revision_history_limit: int
    paused: bool
    progress_deadline_seconds: int
    def __init__(self, replicas: _Optional[int] = ..., selector: _Optional[_Union[_meta_pb2.LabelSelector, _Mapping]] = ..., template: _Optional[_Union[_core_pb2.PodTemplateSpec, _Mapping]] = ..., strategy: _Optional[_Union[DeploymentStrategy, _Mapping]] = ..., min_ready_seconds: _Optional[int] = ..., revision_history_limit: _Optional[int] = ..., paused: _Optional[bool] = ..., progress_deadline_seconds: _Optional[int] = ...) -> None: ...

class DeploymentStrategy(_message.Message):
    __slots__ = ("type", "rolling_update")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    ROLLING_UPDATE_FIELD_NUMBER: _ClassVar[int]
    type: str
    rolling_update: RollingUpdateDeployment
    def __init__(self, type: _Optional[str] = ..., rolling_update: _Optional[_Union[RollingUpdateDeployment, _Mapping]] = ...) -> None: ...

class RollingUpdateDeployment(_message.Message):
    __slots__ = ("max_unavailable", "max_surge")
    MAX_UNAVAILABLE_FIELD_NUMBER: _ClassVar[int]
    MAX_SURGE_FIELD_NUMBER: _ClassVar[int]
    max_unavailable: str
    max_surge: str
    def __init__(self, max_unavailable: _Optional[str] = ..., max_surge: _Optional[str] = ...) -> None: ...

class DeploymentStatus(_message.Message):
    __slots__ = ("observed_generation", "replicas", "updated_replicas", "available_replicas", "unavailable_replicas", "conditions", "ready_replicas", "collision_count", "terminating_replicas")
    OBSERVED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    UNAVAILABLE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CONDITIONS_FIELD_NUMBER: _ClassVar[int]
    READY_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    COLLISION_COUNT_FIELD_NUMBER: _ClassVar[int]
    TERMINATING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    observed_generation: int
    replicas: int
    updated_replicas: int
    available_replicas: int
    unavailable_replicas: int
    conditions: _containers.RepeatedCompositeFieldContainer[DeploymentCondition]
    ready_replicas: int
    collision_count: int
    terminating_replicas: int
    def __init__(self, observed_generation: _Optional[int] = ..., replicas: _Optional[int] = ..., updated_replicas: _Optional[int] = ..., available_replicas: _Optional[int] = ..., unavailable_replicas: _Optional[int] = ..., conditions: _Optional[_Iterable[_Union[DeploymentCondition, _Mapping]]] = ..., ready_replicas: _Optional[int] = ..., collision_count: _Optional[int] = ..., terminating_replicas: _Optional[int] = ...) -> None: ...

class DeploymentCondition(_message.Message):
    __slots__ = ("type", "status", "last_update_time", "last_transition_time", "reason", "message")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_TRANSITION_TIME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    type: str
    status: str
    last_update_time: str
    last_transition_time: str
    reason: str
    message: str
    def __init__(self, type: _Optional[str] = ..., status: _Optional[str] = ..., last_update_time: _Optional[str] = ..., last_transition_time: _Optional[str] = ..., reason: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class DeploymentList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[Deployment]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[Deployment, _Mapping]]] = ...) -> None: ...

class DeploymentWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: Deployment
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[Deployment, _Mapping]] = ...) -> None: ...

class DeploymentWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[DeploymentWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[DeploymentWatchEvent, _Mapping]]] = ...) -> None: ...
