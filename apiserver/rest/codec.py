"""JSON in and out of the REST API: content negotiation, request bodies, metav1.Status errors.

Objects are Kubernetes JSON through ``machinery.jsonconv``, the converter ``kplane get -o json``
prints with. Accept headers are negotiated as Kubernetes does: plain JSON (or YAML), a
meta.k8s.io Table (``application/json;as=Table;v=v1;g=meta.k8s.io``, tables.py), the
aggregated discovery documents (``application/json;g=apidiscovery.k8s.io;v=v2;as=
APIGroupDiscoveryList``, discovery.py) where they apply, each falling back to the next range the
client lists; protobuf is not served (406 if a client accepts nothing else).

Every ``ApiError`` becomes a metav1.Status with Kubernetes' code, reason, message and details
(``status``), so kubectl prints ``Error from server (NotFound): pods "x" not found`` and the
official clients raise their usual exceptions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import grpc
import yaml
from google.protobuf.message import Message

from apiserver.rest import protobuf
from machinery import errors, jsonconv
from machinery.kinds import Kind

JSON = "application/json"
YAML = "application/yaml"
TABLE_GROUP = "meta.k8s.io"
DISCOVERY_GROUP = "apidiscovery.k8s.io"
SERVED_MEDIA_TYPES = (JSON, YAML)


class NotAcceptable(errors.ApiError):
    code, http = grpc.StatusCode.INVALID_ARGUMENT, 406


class UnsupportedMediaType(errors.ApiError):
    code, http = grpc.StatusCode.INVALID_ARGUMENT, 415


class NotEmulated(errors.ApiError):
    """What kplane does not emulate (exec, attach, port-forward, proxy, logs): 501, never a hang."""

    code, http = grpc.StatusCode.UNIMPLEMENTED, 501


_REASONS: dict[type[errors.ApiError], str] = {
    errors.BadRequest: "BadRequest",
    errors.Invalid: "Invalid",
    errors.NotFound: "NotFound",
    errors.AlreadyExists: "AlreadyExists",
    errors.Conflict: "Conflict",
    errors.FailedPrecondition: "BadRequest",
    errors.TooManyRequests: "TooManyRequests",
    errors.RequestEntityTooLarge: "RequestEntityTooLarge",
    errors.Forbidden: "Forbidden",
    errors.Unauthorized: "Unauthorized",
    errors.Gone: "Expired",
    errors.Unavailable: "ServiceUnavailable",
    errors.Timeout: "Timeout",
    errors.InternalError: "InternalError",
    errors.MethodNotAllowed: "MethodNotAllowed",
    NotAcceptable: "NotAcceptable",
    UnsupportedMediaType: "UnsupportedMediaType",
    NotEmulated: "NotImplemented",
}

# field.ErrorType -> metav1.CauseType
_CAUSES = {"Required": "FieldValueRequired", "Invalid": "FieldValueInvalid", "Forbidden": "FieldValueForbidden",
           "NotSupported": "FieldValueNotSupported", "Duplicate": "FieldValueDuplicate",
           "TooMany": "FieldValueTooMany", "TooLong": "FieldValueTooLong"}
# The reasons whose details name the resource (plural) rather than the kind.
_BY_RESOURCE = {"NotFound", "AlreadyExists", "Conflict", "Forbidden", "TooManyRequests"}
_CONFLICT_PREFIX = "conflict: "


def qualified(kind: Kind[Message, Message]) -> str:
    """Kubernetes' GroupResource string: ``pods``, ``priorityclasses.scheduling.k8s.io``."""
    return f"{kind.plural}.{kind.group}" if kind.group else kind.plural


def status_message(exc: errors.ApiError, kind: Kind[Message, Message] | None) -> str:
    """The message as Kubernetes words it: the group-qualified resource (``priorityclasses.
    scheduling.k8s.io "x" not found``) and no ``conflict:`` prefix (the gRPC API's contract
    keeps it, so gRPC clients can match on it)."""
    message = exc.message
    if isinstance(exc, errors.Conflict) and message.startswith(_CONFLICT_PREFIX):
        message = message[len(_CONFLICT_PREFIX):]
    if kind is not None and kind.group:
        for lead in (f'{kind.plural} "', f"Operation cannot be fulfilled on {kind.plural} \""):
            if message.startswith(lead):
                message = lead.replace(f'{kind.plural} "', f'{qualified(kind)} "') + message[len(lead):]
                break
    return message


def status(exc: errors.ApiError, kind: Kind[Message, Message] | None = None, name: str = "") -> dict[str, Any]:
    """The metav1.Status of a failure, as Kubernetes shapes it."""
    reason = _REASONS.get(type(exc), "")
    if not reason:
        reason = next((r for cls, r in _REASONS.items() if isinstance(exc, cls)), "")
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": status_message(exc, kind)}
    if reason:
        body["reason"] = reason
    details: dict[str, Any] = {}
    if isinstance(exc, errors.ApplyConflict):
        # Kubernetes' NewApplyConflict: a cause per field, and nothing else in the details.
        body["details"] = {"causes": [{"reason": "FieldManagerConflict", "message": message, "field": path}
                                      for message, path in exc.causes]}
        body["code"] = exc.http
        return body
    if isinstance(exc, errors.Invalid) and exc.kind:
        # Kubernetes' NewInvalid: the kind and name of what was invalid (a create's object has no
        # name on the URL; a Scale or a DeleteOptions is not the URL's kind).
        name = exc.name
        group = kind.group if kind is not None and exc.kind == kind.name else ""
        if name:
            details["name"] = name
        if group:
            details["group"] = group
        details["kind"] = exc.kind
    elif kind is not None and (reason in _BY_RESOURCE or reason == "Invalid"):
        if name:
            details["name"] = name
        if kind.group:
            details["group"] = kind.group
        details["kind"] = kind.name if reason == "Invalid" else kind.plural
    elif name:
        details["name"] = name
    if isinstance(exc, errors.Invalid) and exc.errors:
        details["causes"] = [_cause(e) for e in exc.errors]
    elif isinstance(exc, errors.Forbidden) and exc.causes:
        details["causes"] = [{"reason": c} for c in exc.causes]
    if details:
        body["details"] = details
    body["code"] = exc.http
    return body


def _cause(e: errors.FieldError) -> dict[str, str]:
    text = str(e)
    prefix = f"{e.path}: "
    return {"reason": _CAUSES.get(e.type, e.type), "message": text[len(prefix):] if text.startswith(prefix) else text,
            "field": e.path}


def success(code: int, name: str = "", kind: Kind[Message, Message] | None = None, uid: str = "") -> dict[str, Any]:
    """metav1.Status Success (a binding, an eviction, an object deleted at once)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if kind is not None:
        if kind.group:
            details["group"] = kind.group
        details["kind"] = kind.plural
    if uid:
        details["uid"] = uid
    if details:
        body["details"] = details
    body["code"] = code
    return body


# ---------------------------------------------------------------- objects out


def to_json(obj: Message, api_version: str = "", kind: str = "") -> dict[str, Any]:
    """An object as Kubernetes JSON, ``kind`` and ``apiVersion`` first (set if the stored object
    lacks them)."""
    d = jsonconv.to_dict(obj, jsonconv.KUBERNETES_ALWAYS)
    head = {"kind": d.pop("kind", "") or kind, "apiVersion": d.pop("apiVersion", "") or api_version}
    return {**{k: v for k, v in head.items() if v}, **d}


def dump(doc: Any, media: str = JSON) -> bytes:
    if media == YAML:
        return yaml.safe_dump(doc, sort_keys=False).encode()
    return json.dumps(doc, separators=(",", ":")).encode()


# ---------------------------------------------------------------- negotiation


@dataclass(frozen=True)
class MediaRange:
    type: str  # "application/json", "*/*"
    params: dict[str, str] = field(default_factory=dict)
    q: float = 1.0

    def matches(self, media: str) -> bool:
        if self.type in ("*/*", media):
            return True
        major = media.split("/")[0]
        return self.type == f"{major}/*"


def parse_accept(header: str) -> list[MediaRange]:
    """The ranges of an Accept header, most preferred first (by q, then as listed)."""
    out: list[MediaRange] = []
    for part in (header or "*/*").split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for p in pieces[1:]:
            k, _, v = p.partition("=")
            k, v = k.strip().lower(), v.strip().strip('"')
            if k == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
            elif k:
                params[k] = v
        out.append(MediaRange(pieces[0].lower(), params, q))
    return sorted((r for r in out if r.q > 0), key=lambda r: -r.q)


@dataclass(frozen=True)
class Output:
    """What a response is to be: a plain object (``media`` JSON or YAML), a Table of it
    (``version`` v1 or v1beta1, rows carrying ``include_object``), or an aggregated discovery
    document (``version`` v2 or v2beta1)."""

    form: str = "object"  # object, table, discovery
    media: str = JSON
    version: str = ""
    include_object: str = "Metadata"

    @property
    def content_type(self) -> str:
        if self.form == "table":
            return f"{JSON};as=Table;v={self.version};g={TABLE_GROUP}"
        if self.form == "discovery":
            return f"{JSON};g={DISCOVERY_GROUP};v={self.version};as=APIGroupDiscoveryList"
        return self.media


PLAIN = Output()


def negotiate(accept: str, table: bool = False, discovery: bool = False, include_object: str = "") -> Output:
    """The first range of ``accept`` kplane can answer; NotAcceptable when none."""
    for r in parse_accept(accept):
        as_ = r.params.get("as", "")
        if as_:
            if (table and as_ == "Table" and r.params.get("g") == TABLE_GROUP
                    and r.params.get("v") in ("v1", "v1beta1") and r.matches(JSON)):
                return Output("table", JSON, r.params["v"], include_object or "Metadata")
            if (discovery and as_ == "APIGroupDiscoveryList" and r.params.get("g") == DISCOVERY_GROUP
                    and r.params.get("v") in ("v2", "v2beta1") and r.matches(JSON)):
                return Output("discovery", JSON, r.params["v"])
            continue  # PartialObjectMetadata and other conversions are not served: try the next range
        if r.matches(JSON):
            return PLAIN
        if r.matches(YAML) or r.type == "application/yml":
            return Output(media=YAML)
    raise NotAcceptable(f"only the following media types are accepted: {', '.join(SERVED_MEDIA_TYPES)}")


# ---------------------------------------------------------------- bodies in


def read_document(body: bytes, content_type: str) -> Any:
    """The request body as a JSON value (JSON, or YAML when the body says it is)."""
    media = (content_type or JSON).split(";")[0].strip().lower()
    if media == protobuf.MEDIA_TYPE:
        try:
            return protobuf.decode(body) if body else None
        except protobuf.NotRead as exc:
            raise UnsupportedMediaType(str(exc)) from None
    if media not in (JSON, "", "*/*", YAML, "application/yml", "text/yaml"):
        raise UnsupportedMediaType(f"the body of the request was in an unknown format - accepted media types "
                                   f"include: {', '.join(SERVED_MEDIA_TYPES)}")
    as_json = media in (JSON, "", "*/*")
    try:
        if not body:
            return None
        return json.loads(body) if as_json else yaml.safe_load(body)
    except (ValueError, yaml.YAMLError) as exc:
        raise errors.BadRequest(f"the request body is not valid {'JSON' if as_json else 'YAML'}: "
                                f"{' '.join(str(exc).split())}") from None


FIELD_VALIDATIONS = ("Strict", "Warn", "Ignore")


def decode(message: type[Message], api_version: str, kind_name: str, doc: Any, field_validation: str = "Warn",
           warnings: list[str] | None = None) -> Message:
    """A request body as ``message`` (apiVersion ``api_version``, kind ``kind_name``).

    ``field_validation`` is Kubernetes': ``Strict`` refuses unknown fields (400, naming every one),
    ``Warn`` (the default) drops them with a warning each (into ``warnings``), ``Ignore`` drops them."""
    where = f'{kind_name} in version "{api_version.rpartition("/")[2]}" cannot be handled as a {kind_name}'
    if not isinstance(doc, dict):
        raise errors.BadRequest(f"{where}: the request body must be a JSON object")
    given_version, given_kind = doc.get("apiVersion"), doc.get("kind")
    if given_version and given_version != api_version:
        raise errors.BadRequest(f"the API version in the data ({given_version}) does not match the expected API "
                                f"version ({api_version})")
    if given_kind and given_kind != kind_name:
        raise errors.BadRequest(f"the kind in the data ({given_kind}) does not match the expected kind ({kind_name})")
    if field_validation not in FIELD_VALIDATIONS:
        raise errors.BadRequest(f"fieldValidation must be one of {', '.join(FIELD_VALIDATIONS)}, got "
                                f'"{field_validation}"')
    try:
        return jsonconv.from_dict(message, doc)  # the usual body: every field known, every value valid
    except jsonconv.DecodeError:
        pass  # the walk below names every unknown field first, as Kubernetes' decoder does
    pruned, unknown = jsonconv.prune_unknown(message, doc)
    if unknown:
        if field_validation == "Strict":
            raise errors.BadRequest(f"{where}: strict decoding error: "
                                    + ", ".join(f'unknown field "{u}"' for u in unknown))
        if field_validation == "Warn" and warnings is not None:
            warnings.extend(f'unknown field "{u}"' for u in unknown)
        doc = pruned
    try:
        return jsonconv.from_dict(message, doc)
    except jsonconv.DecodeError as exc:
        raise errors.BadRequest(f"{where}: {exc}") from None
