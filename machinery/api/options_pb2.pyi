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
