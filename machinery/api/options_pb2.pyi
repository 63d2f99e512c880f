from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf import descriptor as _descriptor
from typing import ClassVar as _ClassVar

DESCRIPTOR: _descriptor.FileDescriptor
QUANTITY_FIELD_NUMBER: _ClassVar[int]
quantity: _descriptor.FieldDescriptor
INT_OR_STRING_FIELD_NUMBER: _ClassVar[int]
int_or_string: _descriptor.FieldDescriptor
RAW_JSON_FIELD_NUMBER: _ClassVar[int]
raw_json: _descriptor.FieldDescriptor
LIST_TYPE_FIELD_NUMBER: _ClassVar[int]
list_type: _descriptor.FieldDescriptor
LIST_MAP_KEYS_FIELD_NUMBER: _ClassVar[int]
list_map_keys: _descriptor.FieldDescriptor
PATCH_STRATEGY_FIELD_NUMBER: _ClassVar[int]
patch_strategy: _descriptor.FieldDescriptor
PATCH_MERGE_KEY_FIELD_NUMBER: _ClassVar[int]
patch_merge_key: _descriptor.FieldDescriptor
MAP_TYPE_FIELD_NUMBER: _ClassVar[int]
map_type: _descriptor.FieldDescriptor
REQUIRED_FIELD_NUMBER: _ClassVar[int]
required: _descriptor.FieldDescriptor
DEFAULT_JSON_FIELD_NUMBER: _ClassVar[int]
default_json: _descriptor.FieldDescriptor
MERGE_AS_FIELD_NUMBER: _ClassVar[int]
merge_as: _descriptor.FieldDescriptor
STRUCT_TYPE_FIELD_NUMBER: _ClassVar[int]
struct_type: _descriptor.FieldDescriptor
