from google.protobuf import any_pb2 as _any_pb2
from machinery.api import apps_pb2 as _apps_pb2
from machinery.api import autoscaling_pb2 as _autoscaling_pb2
from machinery.api import coordination_pb2 as _coordination_pb2
from machinery.api import core_pb2 as _core_pb2
from machinery.api import meta_pb2 as _meta_pb2
from machinery.api import policy_pb2 as _policy_pb2
from machinery.api import resource_pb2 as _resource_pb2
from machinery.api import scheduling_pb2 as _scheduling_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HistoryRequest(_message.Message):
    __slots__ = ("since", "follow")
    SINCE_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    since: int
    follow: bool
    def __init__(self, since: _Optional[int] = ..., follow: _Optional[bool] = ...) -> None: ...

class HistoryEntry(_message.Message):
    __slots__ = ("rev", "type", "kind", "namespace", "name", "object")
    REV_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    rev: int
    type: str
    kind: str
    namespace: str
    name: str
    object: _any_pb2.Any
    def __init__(self, rev: _Optional[int] = ..., type: _Optional[str] = ..., kind: _Optional[str] = ..., namespace: _Optional[str] = ..., name: _Optional[str] = ..., object: _Optional[_Union[_any_pb2.Any, _Mapping]] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("entries", "revision")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    revision: int
    def __init__(self, entries: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., revision: _Optional[int] = ...) -> None: ...
