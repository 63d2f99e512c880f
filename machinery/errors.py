"""API errors: one exception type per failure a caller can act on, each with its gRPC code.

The apiserver raises these and its handlers turn them into gRPC statuses; the client turns gRPC
statuses back into them, so ``except NotFound`` works on both sides. Messages are Kubernetes'
own (``pods "web" not found``, ``Pod "web" is invalid: spec.containers[0].name: Required value``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import grpc

# Kubernetes' apiserver refuses request bodies over 3 MiB (k8s.io/apiserver's
# MaxRequestBodyBytes: twice etcd's 1.5 MiB request limit, since JSON shrinks when stored as
# protobuf) with 413 "Request entity too large: limit is 3145728".
MAX_REQUEST_BYTES: Final = 3 * 1024 * 1024
# A status message travels in gRPC trailers; clients refuse metadata over 8 KiB (soft) / 16 KiB
# (hard) as RESOURCE_EXHAUSTED, which reads as "retry". Messages are cut to this many bytes as
# they go on the wire (percent-encoded), well inside both.
MAX_STATUS_MESSAGE_BYTES: Final = 4096
# A field error quotes at most this much of a bad value: longer than any name Kubernetes allows
# (253), short enough that a message stays readable and small.
MAX_QUOTED_VALUE_CHARS: Final = 256


class ApiError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN
    http: int = 500  # the HTTP status Kubernetes would answer with (metrics, CLI)

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class BadRequest(ApiError):
    code, http = grpc.StatusCode.INVALID_ARGUMENT, 400


class Invalid(ApiError):
    """Validation failed; ``errors`` holds the field errors."""

    code, http = grpc.StatusCode.INVALID_ARGUMENT, 422

    def __init__(self, message: str, errors: list["FieldError"] | None = None, kind: str = "", name: str = ""):
        super().__init__(message)
        self.errors = errors or []
        self.kind, self.name = kind, name  # what is invalid (Kubernetes' StatusDetails kind and name)

    @classmethod
    def of(cls, kind: str, name: str, errors: list["FieldError"]) -> "Invalid":
        text = ", ".join(str(e) for e in errors)
        if len(errors) > 1:
            text = f"[{text}]"
        return cls(f'{kind} "{name}" is invalid: {text}', errors, kind, name)


class NotFound(ApiError):
    code, http = grpc.StatusCode.NOT_FOUND, 404


class AlreadyExists(ApiError):
    code, http = grpc.StatusCode.ALREADY_EXISTS, 409


class Conflict(ApiError):
    """Optimistic concurrency failed (stale resourceVersion) or a precondition did not hold."""

    code, http = grpc.StatusCode.ABORTED, 409


class ApplyConflict(Conflict):
    """A server-side apply that would change fields other field managers own (Kubernetes'
    NewApplyConflict): ``causes`` are (``conflict with "manager"``, field path) pairs."""

    def __init__(self, message: str, causes: list[tuple[str, str]] | None = None):
        super().__init__(message)
        self.causes = causes or []


class FailedPrecondition(ApiError):
    code, http = grpc.StatusCode.FAILED_PRECONDITION, 400


class TooManyRequests(ApiError):
    """Kubernetes' 429: an eviction a PodDisruptionBudget does not allow now."""

    code, http = grpc.StatusCode.RESOURCE_EXHAUSTED, 429


class RequestEntityTooLarge(ApiError):
    """Kubernetes' 413: the request is over the apiserver's size limit. Never worth a retry, so it
    travels as INVALID_ARGUMENT, not as gRPC's RESOURCE_EXHAUSTED (which clients read as 429)."""

    code, http = grpc.StatusCode.INVALID_ARGUMENT, 413

    @classmethod
    def of(cls, limit: int = MAX_REQUEST_BYTES) -> "RequestEntityTooLarge":
        return cls(f"Request entity too large: limit is {limit}")


class Forbidden(ApiError):
    """Kubernetes' 403. ``causes`` are cause types an admission plugin adds to the Status's
    details (PodResizeValidator's ``NodeCapacity``), for clients to tell refusals apart."""

    code, http = grpc.StatusCode.PERMISSION_DENIED, 403

    def __init__(self, message: str, causes: list[str] | None = None):
        super().__init__(message)
        self.causes = causes or []


class Unauthorized(ApiError):
    code, http = grpc.StatusCode.UNAUTHENTICATED, 401


class Gone(ApiError):
    """A watch or list from a resourceVersion older than the server keeps ("too old resource version")."""

    code, http = grpc.StatusCode.OUT_OF_RANGE, 410


class Unavailable(ApiError):
    """The server (or etcd behind it) cannot answer now; retry."""

    code, http = grpc.StatusCode.UNAVAILABLE, 503


class Timeout(ApiError):
    code, http = grpc.StatusCode.DEADLINE_EXCEEDED, 504


class InternalError(ApiError):
    code, http = grpc.StatusCode.INTERNAL, 500


class MethodNotAllowed(ApiError):
    code, http = grpc.StatusCode.UNIMPLEMENTED, 405


_BY_CODE: dict[grpc.StatusCode, type[ApiError]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.RESOURCE_EXHAUSTED: TooManyRequests,
    grpc.StatusCode.PERMISSION_DENIED: Forbidden,
    grpc.StatusCode.UNAUTHENTICATED: Unauthorized,
    grpc.StatusCode.OUT_OF_RANGE: Gone,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: Timeout,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNIMPLEMENTED: MethodNotAllowed,
    grpc.StatusCode.INVALID_ARGUMENT: Invalid,
    # A server that cannot take a call answers CANCELLED (gRPC core's load shedding).
    grpc.StatusCode.CANCELLED: Unavailable,
}


_ENTITY_TOO_LARGE = "Request entity too large"
# gRPC's own refusals of an oversized message, by the sender ("Sent message larger than max") or
# the receiver ("Received message larger than max"), come as RESOURCE_EXHAUSTED.
_GRPC_TOO_LARGE = "message larger than max"


def from_rpc_error(err: grpc.RpcError) -> ApiError:
    """The ApiError for a gRPC error received by a client."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else str(err)) or ""
    cls = _BY_CODE.get(code, ApiError)
    if cls is Invalid and details.startswith(_ENTITY_TOO_LARGE):
        cls = RequestEntityTooLarge
    elif cls is Invalid and " is invalid: " not in details:
        cls = BadRequest  # both travel as INVALID_ARGUMENT; validation errors say "X is invalid: ..."
    elif cls is TooManyRequests and _GRPC_TOO_LARGE in details:
        cls = RequestEntityTooLarge  # gRPC's size limit: no retry can succeed
    return cls(details or code.name)


def _wire_bytes(ch: str) -> int:
    """Bytes ``ch`` takes in a grpc-message trailer: gRPC percent-encodes every byte outside
    printable ASCII, and '%' itself."""
    if " " <= ch <= "~" and ch != "%":
        return 1
    return 3 * len(ch.encode("utf-8", "surrogatepass"))


def fit_status_message(message: str, limit: int = MAX_STATUS_MESSAGE_BYTES) -> str:
    """``message`` cut to ``limit`` bytes on the wire, saying it was cut; unchanged if it fits.

    The apiserver applies this to every status it sends, so no error can outgrow the gRPC
    metadata limit and reach the client as a metadata-size RESOURCE_EXHAUSTED."""
    if len(message) * 12 <= limit or sum(map(_wire_bytes, message)) <= limit:
        return message
    suffix = f"... (truncated; the whole message is {len(message.encode('utf-8', 'surrogatepass'))} bytes)"
    budget = limit - len(suffix)
    used = 0
    for i, ch in enumerate(message):
        used += _wire_bytes(ch)
        if used > budget:
            return message[:i] + suffix
    return message


def not_found(resource: str, name: str) -> NotFound:
    return NotFound(f'{resource} "{name}" not found')


def already_exists(resource: str, name: str) -> AlreadyExists:
    return AlreadyExists(f'{resource} "{name}" already exists')


def conflict(resource: str, name: str, reason: str = "the object has been modified; please apply your "
             "changes to the latest version and try again") -> Conflict:
    return Conflict(f'conflict: Operation cannot be fulfilled on {resource} "{name}": {reason}')


# ---------------------------------------------------------------- field errors


def format_value(value: Any, limit: int = MAX_QUOTED_VALUE_CHARS) -> str:
    """How field.Error prints a bad value (strings quoted, bools lower case, nil as null).

    Kubernetes' field.Error omits values it knows are too long to print (``TooLong`` and
    ``omitValue`` in apimachinery's field/errors.go) and quotes every other value whole, so a 20 KB
    label value is quoted whole. Here no string is quoted beyond ``limit`` characters: a longer
    one prints its prefix, then how long it was — every validator gets this for free. A value
    printed as a Go struct (a PodDisruptionBudgetSpec, say) gets four times that, so Kubernetes'
    own messages for ordinary objects stay whole."""
    if isinstance(value, str):
        if len(value) <= limit:
            return f'"{value}"'
        return f'"{value[:limit]}"...(truncated: {len(value)} characters)'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    text, limit = str(value), 4 * limit
    if len(text) <= limit:
        return text
    return f"{text[:limit]}...(truncated: {len(text)} characters)"


@dataclass(frozen=True)
class FieldError:
    """One validation error at a field path, printed as Kubernetes prints field.Error."""

    type: str  # Required, Invalid, Forbidden, NotSupported, Duplicate, TooMany, TooLong
    path: str
    detail: str = ""
    value: Any = None
    supported: tuple[str, ...] = ()

    def __str__(self) -> str:
        if self.type == "Required":
            text = f"{self.path}: Required value"
            return f"{text}: {self.detail}" if self.detail else text
        if self.type == "Invalid":
            text = f"{self.path}: Invalid value: {format_value(self.value)}"
            return f"{text}: {self.detail}" if self.detail else text
        if self.type == "Forbidden":
            return f"{self.path}: Forbidden: {self.detail}" if self.detail else f"{self.path}: Forbidden"
        if self.type == "NotSupported":
            quoted = ", ".join(f'"{s}"' for s in self.supported)
            return f"{self.path}: Unsupported value: {format_value(self.value)}: supported values: {quoted}"
        if self.type == "Duplicate":
            return f"{self.path}: Duplicate value: {format_value(self.value)}"
        if self.type == "TooMany":
            return f"{self.path}: Too many: {format_value(self.value)}: {self.detail}"
        if self.type == "TooLong":
            return f"{self.path}: Too long: {self.detail}"
        return f"{self.path}: {self.type}: {self.detail}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("Required", path, detail)


def invalid(path: str, value: Any, detail: str = "") -> FieldError:
    return FieldError("Invalid", path, detail, value)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("Forbidden", path, detail)


def not_supported(path: str, value: Any, supported: tuple[str, ...] | list[str]) -> FieldError:
    return FieldError("NotSupported", path, "", value, tuple(supported))


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError("Duplicate", path, "", value)


def too_many(path: str, count: int, limit: int) -> FieldError:
    return FieldError("TooMany", path, f"must have at most {limit} items", count)
