from machinery.api import meta_pb2 as _meta_pb2
from machinery.api import options_pb2 as _options_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class PriorityClass(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "value", "global_default", "description", "preemption_policy")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PREEMPTION_POLICY_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ObjectMeta
    value: int
    global_default: bool
    description: str
    preemption_policy: str
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ObjectMeta, _Mapping]] = ..., value: _Optional[int] = ..., global_default: _Optional[bool] = ..., description: _Optional[str] = ..., preemption_policy: _Optional[str] = ...) -> None: ...

class PriorityClassList(_message.Message):
    __slots__ = ("api_version", "kind", "metadata", "items")
    API_VERSION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    api_version: str
    kind: str
    metadata: _meta_pb2.ListMeta
    items: _containers.RepeatedCompositeFieldContainer[PriorityClass]
    def __init__(self, api_version: _Optional[str] = ..., kind: _Optional[str] = ..., metadata: _Optional[_Union[_meta_pb2.ListMeta, _Mapping]] = ..., items: _Optional[_Iterable[_Union[PriorityClass, _Mapping]]] = ...) -> None: ...

class PriorityClassWatchEvent(_message.Message):
    __slots__ = ("type", "object")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    type: str
    object: PriorityClass
    def __init__(self, type: _Optional[str] = ..., object: _Optional[_Union[PriorityClass, _Mapping]] = ...) -> None: ...

class PriorityClassWatchResponse(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[PriorityClassWatchEvent]
    def __init__(self, events: _Optional[_Iterable[_Union[PriorityClassWatchEvent, _Mapping]]] = ...) -> None: ...
