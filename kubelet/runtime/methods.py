"""The runtime's RPC table, read from the generated descriptors: one ``Method`` per RPC.

The gRPC server, the gRPC client, the in-process client and ``FakeRuntime`` all use it, so a CRI
name (``UpdateContainerResources``), its Python name (``update_container_resources``), its
messages, its metric label and its failpoint (``runtime/update-container-resources``) are
spelled in one place: the .proto.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from google.protobuf.message import Message

from machinery.api import cri_pb2

RUNTIME_SERVICE = "kplane.cri.v1.RuntimeService"
CONTROL_SERVICE = "kplane.cri.v1.FakeRuntimeControl"


@dataclass(frozen=True)
class Method:
    service: str  # full gRPC service name
    name: str  # CRI name: UpdateContainerResources
    attr: str  # Python name: update_container_resources (also the metrics' operation_type)
    request: type[Message]
    response: type[Message]
    failpoint: str | None  # runtime/update-container-resources (RuntimeService only)
    streaming: bool = False  # the response is a stream (GetContainerEvents)

    @property
    def path(self) -> str:
        return f"/{self.service}/{self.name}"


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _methods() -> dict[str, Method]:
    table: dict[str, Method] = {}
    for service in (RUNTIME_SERVICE, CONTROL_SERVICE):
        desc = cri_pb2.DESCRIPTOR.services_by_name[service.rsplit(".", 1)[1]]
        for m in desc.methods:
            attr = _snake(m.name)
            failpoint = f"runtime/{attr.replace('_', '-')}" if service == RUNTIME_SERVICE else None
            table[attr] = Method(service, m.name, attr, getattr(cri_pb2, m.input_type.name),
                                 getattr(cri_pb2, m.output_type.name), failpoint, m.server_streaming)
    return table


METHODS: dict[str, Method] = _methods()
