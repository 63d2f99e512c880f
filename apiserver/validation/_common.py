"""Building blocks shared by the validation modules: Kubernetes' name and value checks
(``k8s.io/apimachinery/pkg/util/validation``), its error constructors where ``machinery.errors``
prints them differently, and Go-style renderings of values.

Every ``is_*`` function returns Kubernetes' messages for the value (empty = valid), exactly as
the Go function of the same name does, so callers can wrap each message in a ``FieldError`` at
their own path. The name checks are memoised (tuples): the same label keys, names and values
come back on every write.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

from google.protobuf.message import Message

from machinery.errors import FieldError, format_value, invalid
from machinery.quantity import Quantity, QuantityError, parse_quantity

# ---------------------------------------------------------------- messages

IS_NEGATIVE: Final = "must be greater than or equal to 0"
IS_NOT_POSITIVE: Final = "must be greater than zero"
IS_NOT_INTEGER: Final = "must be an integer"
FIELD_IMMUTABLE: Final = "field is immutable"

_QNAME_FMT: Final = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_ERR: Final = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                     "with an alphanumeric character")
_LABEL_VALUE_FMT: Final = f"({_QNAME_FMT})?"
_LABEL_VALUE_ERR: Final = ("a valid label must be an empty string or consist of alphanumeric characters, "
                           "'-', '_' or '.', and must start and end with an alphanumeric character")
_DNS_LABEL_FMT: Final = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_ERR: Final = ("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                         "or '-', and must start and end with an alphanumeric character")
_DNS_SUBDOMAIN_FMT: Final = _DNS_LABEL_FMT + "(\\." + _DNS_LABEL_FMT + ")*"
_DNS_SUBDOMAIN_ERR: Final = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                             "characters, '-' or '.', and must start and end with an alphanumeric character")
_PERCENT_FMT: Final = "[0-9]+%"
_PERCENT_ERR: Final = "a valid percent string must be a numeric string followed by an ending '%'"

_QNAME_RE: Final = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE: Final = re.compile(_LABEL_VALUE_FMT)
_DNS_LABEL_RE: Final = re.compile(_DNS_LABEL_FMT)
_DNS_SUBDOMAIN_RE: Final = re.compile(_DNS_SUBDOMAIN_FMT)
_PERCENT_RE: Final = re.compile(_PERCENT_FMT)
_PORT_NAME_CHARSET_RE: Final = re.compile("[-a-z0-9]+")
_PORT_NAME_LETTER_RE: Final = re.compile("[a-z]")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Go's RegexError: the message, the examples and the regular expression."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(lo: int, hi: int) -> str:
    return f"must be between {lo} and {hi}, inclusive"


# Pre-rendered, since they are used on every object.
QUALIFIED_NAME_REGEX_ERR: Final = regex_error(_QNAME_ERR, _QNAME_FMT, "MyName", "my.name", "123-abc")
LABEL_VALUE_REGEX_ERR: Final = regex_error(_LABEL_VALUE_ERR, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")
DNS_LABEL_REGEX_ERR: Final = regex_error(_DNS_LABEL_ERR, _DNS_LABEL_FMT, "my-name", "123-abc")
DNS_SUBDOMAIN_REGEX_ERR: Final = regex_error(_DNS_SUBDOMAIN_ERR, _DNS_SUBDOMAIN_FMT, "example.com")
PERCENT_REGEX_ERR: Final = regex_error(_PERCENT_ERR, _PERCENT_FMT, "1%", "93%")


# ---------------------------------------------------------------- names and values


@lru_cache(maxsize=16384)
def is_dns1123_label(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _DNS_LABEL_RE.fullmatch(value):
        if _DNS_SUBDOMAIN_RE.fullmatch(value):
            # A valid subdomain that is not a label: the length was checked, so it has dots.
            errs.append("must not contain dots")
        else:
            errs.append(DNS_LABEL_REGEX_ERR)
    return tuple(errs)


@lru_cache(maxsize=16384)
def is_dns1123_subdomain(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _DNS_SUBDOMAIN_RE.fullmatch(value):
        errs.append(DNS_SUBDOMAIN_REGEX_ERR)
    return tuple(errs)


@lru_cache(maxsize=16384)
def is_qualified_name(value: str) -> tuple[str, ...]:
    """A label key, annotation key (lower-cased by the caller), condition type, ...:
    an optional DNS-subdomain prefix and '/', then a name of at most 63 characters."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return (f"a qualified name {QUALIFIED_NAME_REGEX_ERR} with an optional DNS subdomain prefix and "
                "'/' (e.g. 'example.com/MyName')",)
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _QNAME_RE.fullmatch(name):
        errs.append("name part " + QUALIFIED_NAME_REGEX_ERR)
    return tuple(errs)


@lru_cache(maxsize=16384)
def is_valid_label_value(value: str) -> tuple[str, ...]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(LABEL_VALUE_REGEX_ERR)
    return tuple(errs)


def is_valid_percent(value: str) -> list[str]:
    return [] if _PERCENT_RE.fullmatch(value) else [PERCENT_REGEX_ERR]


def is_valid_port_num(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def is_valid_port_name(port: str) -> list[str]:
    errs: list[str] = []
    if len(port) > 15:
        errs.append(max_len_error(15))
    if not _PORT_NAME_CHARSET_RE.fullmatch(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    elif not _PORT_NAME_LETTER_RE.search(port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def is_relaxed_env_var_name(value: str) -> list[str]:
    errs: list[str] = []
    if not value:
        errs.append("environment variable name must be non-empty")
    for ch in value:
        if ord(ch) > 127 or not ch.isprintable() or ch == "=":
            errs.append("a valid environment variable name must consist only of printable ASCII "
                        "characters other than '='")
            break
    return errs


@lru_cache(maxsize=16384)
def is_valid_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


@lru_cache(maxsize=16384)
def ip_family(value: str) -> int:
    return ipaddress.ip_address(value).version


def is_valid_cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


# ---------------------------------------------------------------- field errors


class _GoFieldError(FieldError):
    """A FieldError whose detail Kubernetes prints after the value for Duplicate and NotFound
    (``machinery.errors`` prints those two without a detail)."""

    def __str__(self) -> str:
        if self.type == "Duplicate":
            text = f"{self.path}: Duplicate value: {format_value(self.value)}"
        elif self.type == "NotFound":
            text = f"{self.path}: Not found: {format_value(self.value)}"
        else:
            return super().__str__()
        return f"{text}: {self.detail}" if self.detail else text


def not_found(path: str, value: Any, detail: str = "") -> FieldError:
    """Go's field.NotFound (optionally with the detail some callers set)."""
    return _GoFieldError("NotFound", path, detail, value)


def duplicate_with_detail(path: str, value: Any, detail: str) -> FieldError:
    return _GoFieldError("Duplicate", path, detail, value)


def too_long(path: str, max_length: int) -> FieldError:
    """Go's field.TooLong: the value is omitted."""
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError("TooLong", path, f"may not be more than {max_length} {unit}")


def validate_qualified_name(value: str, path: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in is_qualified_name(value)]


def validate_dns1123_label(value: str, path: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in is_dns1123_label(value)]


def validate_dns1123_subdomain(value: str, path: str) -> list[FieldError]:
    return [invalid(path, value, m) for m in is_dns1123_subdomain(value)]


def validate_nonnegative(value: int, path: str) -> list[FieldError]:
    return [invalid(path, value, IS_NEGATIVE)] if value < 0 else []


@lru_cache(maxsize=16384)
def _label_ok(key: str, value: str) -> bool:
    return not is_qualified_name(key) and not is_valid_label_value(value)


def labels_ok(labels: Mapping[str, str]) -> bool:
    """Whether ``validate_labels`` finds nothing wrong (a fast pre-check on memoised verdicts)."""
    for k in labels:
        if not _label_ok(k, labels[k]):
            return False
    return True


def validate_labels(labels: Mapping[str, str], path: str) -> list[FieldError]:
    """metav1 ValidateLabels: keys are qualified names, values label values; errors at ``path``
    itself (Kubernetes does not key them)."""
    if not labels or labels_ok(labels):
        return []
    errs: list[FieldError] = []
    for k in sorted(labels):
        errs.extend(invalid(path, k, m) for m in is_qualified_name(k))
        v = labels[k]
        errs.extend(invalid(path, v, m) for m in is_valid_label_value(v))
    return errs


# ---------------------------------------------------------------- quantities


def parse_q(value: str, path: str, errs: list[FieldError]) -> Quantity | None:
    """The parsed quantity, or None after appending Kubernetes' parse error at ``path``.

    Kubernetes rejects a malformed quantity while decoding the request, with the quantity
    package's message; kplane stores quantities as strings, so the same message is reported as
    an Invalid error at the field."""
    try:
        return parse_quantity(value)
    except QuantityError as exc:
        errs.append(invalid(path, value, str(exc)))
        return None


def quantity_or_none(value: str) -> Quantity | None:
    try:
        return parse_quantity(value)
    except QuantityError:
        return None


# ---------------------------------------------------------------- Go renderings


class GoValue:
    """A bad value printed the way Go's ``%#v`` prints a struct, slice or map."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"GoValue({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GoValue) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


_GO_ESCAPES: Final = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r",
                      "\a": "\\a", "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def go_quote(s: str) -> str:
    """Go's %q for a string."""
    out = []
    for ch in s:
        esc = _GO_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def go_strings(values: Iterable[str]) -> str:
    items = [go_quote(v) for v in values]
    return "[]string{" + ", ".join(items) + "}" if items else "[]string(nil)"


def go_string_map(m: Mapping[str, str]) -> str:
    if not m:
        return "map[string]string(nil)"
    return "map[string]string{" + ", ".join(f"{go_quote(k)}:{go_quote(m[k])}" for k in sorted(m)) + "}"


# Go's spelling of initialisms in field names (``host_ip`` -> ``HostIP``).
_INITIALISMS: Final = {"ip": "IP", "ips": "IPs", "id": "ID", "uid": "UID", "cidr": "CIDR", "cidrs": "CIDRs",
                       "api": "API", "os": "OS", "qos": "QOS", "dns": "DNS", "fqdn": "FQDN", "url": "URL",
                       "cel": "CEL", "tcp": "TCP", "pid": "PID", "ipc": "IPC"}
_GO_PACKAGES: Final = {"kplane/v1/core.proto": "core", "kplane/v1/meta.proto": "v1",
                       "kplane/v1/resource.proto": "resource", "kplane/v1/policy.proto": "policy",
                       "kplane/v1/scheduling.proto": "scheduling", "kplane/v1/coordination.proto": "coordination",
                       "kplane/v1/apps.proto": "apps", "kplane/v1/autoscaling.proto": "autoscaling"}
# string fields holding a time that Go declares as *metav1.Time.
_GO_TIME_POINTERS: Final = frozenset({"time_added"})
# proto names that differ from the Go type names.
_GO_TYPE_NAMES: Final = {"ResourceClaimRef": "ResourceClaim"}


def _go_field_name(name: str) -> str:
    return "".join(_INITIALISMS.get(p, p[:1].upper() + p[1:]) for p in name.split("_"))


def _go_type(descriptor: Any) -> str:
    pkg = _GO_PACKAGES.get(descriptor.file.name, "v1")
    return f"{pkg}.{_GO_TYPE_NAMES.get(descriptor.name, descriptor.name)}"


def go_repr(msg: Message) -> str:
    """An approximation of Go's ``%#v`` of the internal type behind a kplane message.

    Exact for value-only structs (PodIP, NodeAddress, ContainerResizePolicy, NodeSelectorTerm,
    Taint without timeAdded, ...). Go prints a non-nil pointer as its address, which no emulator
    can reproduce; such fields print as ``&value`` instead."""
    parts = []
    for fd in msg.DESCRIPTOR.fields:
        if fd.message_type is not None and fd.message_type.full_name == "google.protobuf.Struct":
            continue
        value = getattr(msg, fd.name)
        key = _go_field_name(fd.name)
        if fd.name in _GO_TIME_POINTERS:
            parts.append(f"{key}:&v1.Time{{Time:{go_quote(value)}}}" if value else f"{key}:(*v1.Time)(nil)")
            continue
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_type = fd.message_type.fields_by_name["value"].message_type
            if value_type is None:
                parts.append(f"{key}:{go_string_map(value)}")
            else:
                t = _go_type(value_type)
                parts.append(f"{key}:map[string]{t}{{" + ", ".join(
                    f"{go_quote(k)}:{go_repr(value[k])}" for k in sorted(value)) + "}" if value
                    else f"{key}:map[string]{t}(nil)")
        elif fd.is_repeated:
            if fd.message_type is not None:
                t = _go_type(fd.message_type)
                parts.append(f"{key}:[]{t}{{{', '.join(go_repr(v) for v in value)}}}" if value
                             else f"{key}:[]{t}(nil)")
            else:
                parts.append(f"{key}:{go_strings(value)}" if fd.type == fd.TYPE_STRING
                             else f"{key}:[]int64{{{', '.join(str(v) for v in value)}}}")
        elif fd.message_type is not None:
            parts.append(f"{key}:{go_repr(value)}" if msg.HasField(fd.name)
                         else f"{key}:(*{_go_type(fd.message_type)})(nil)")
        elif fd.has_presence and not msg.HasField(fd.name):
            go_scalar = {fd.TYPE_STRING: "string", fd.TYPE_BOOL: "bool", fd.TYPE_INT32: "int32"}.get(fd.type, "int64")
            parts.append(f"{key}:(*{go_scalar})(nil)")
        else:
            text = (go_quote(value) if isinstance(value, str) else
                    ("true" if value else "false") if isinstance(value, bool) else str(value))
            parts.append(f"{key}:&{text}" if fd.has_presence else f"{key}:{text}")
    return f"{_go_type(msg.DESCRIPTOR)}{{{', '.join(parts)}}}"


def go_list(items: Iterable[Message], descriptor: Any) -> str:
    rendered = [go_repr(m) for m in items]
    t = _go_type(descriptor)
    return f"[]{t}{{{', '.join(rendered)}}}" if rendered else f"[]{t}(nil)"


# ---------------------------------------------------------------- comparisons


def fields_equal(a: Message, b: Message, skip: frozenset[str] = frozenset()) -> bool:
    """Whether two messages of one type are equal except for the fields named in ``skip``,
    without copying either. Only fields set on either side are compared; an unset field and
    one set to its empty value compare equal (Go's semantic equality of nil and empty)."""
    names = {fd.name for fd, _ in a.ListFields()}
    names.update(fd.name for fd, _ in b.ListFields())
    for name in names:
        if name not in skip and getattr(a, name) != getattr(b, name):
            return False
    return True


def changed_fields(a: Message, b: Message, skip: frozenset[str] = frozenset()) -> list[str]:
    """The JSON names of the top-level fields that differ between two messages."""
    fields = {fd.number: fd for fd, _ in a.ListFields()}
    fields.update((fd.number, fd) for fd, _ in b.ListFields())
    return [fd.json_name for _, fd in sorted(fields.items())
            if fd.name not in skip and getattr(a, fd.name) != getattr(b, fd.name)]


def quantity_maps_equal(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Go's semantic equality of two ResourceLists: same names, equal quantities ("1" == "1000m")."""
    if len(a) != len(b):
        return False
    for k in a:
        if k not in b:
            return False
        va, vb = a[k], b[k]
        if va != vb:
            qa, qb = quantity_or_none(va), quantity_or_none(vb)
            if qa is None or qb is None or qa != qb:
                return False
    return True
