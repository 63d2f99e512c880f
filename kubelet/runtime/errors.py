"""The failures a caller of the runtime can act on, for the gRPC client and the in-process one alike.

``RuntimeCallError`` carries the CRI method name, the message and the gRPC status code (the
runtime's answer: NOT_FOUND, FAILED_PRECONDITION, ...); ``RuntimeNotFound`` is the one the kubelet
branches on (a container or sandbox already gone); ``RuntimeUnavailable`` means the runtime could
not be reached at all (nothing was done).
"""

from __future__ import annotations

import grpc


class RuntimeCallError(Exception):
    """A runtime call failed; ``str()`` is one line: ``Method: message``."""

    def __init__(self, method: str, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN):
        super().__init__(f"{method}: {message}" if method else message)
        self.method = method
        self.message = message
        self.code = code


class RuntimeNotFound(RuntimeCallError):
    """The sandbox or container does not exist (gRPC NOT_FOUND)."""


class RuntimeUnavailable(RuntimeCallError):
    """The runtime cannot be reached (gRPC UNAVAILABLE): it is down or restarting."""


def call_error(method: str, code: grpc.StatusCode, message: str) -> RuntimeCallError:
    """The exception for a call that failed with ``code``."""
    if code == grpc.StatusCode.NOT_FOUND:
        return RuntimeNotFound(method, message, code)
    if code == grpc.StatusCode.UNAVAILABLE:
        return RuntimeUnavailable(method, message, code)
    return RuntimeCallError(method, message, code)
