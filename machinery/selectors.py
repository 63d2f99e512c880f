"""Label selectors and field selectors, with Kubernetes' syntax and semantics.

- ``parse_label_selector("app=web,tier in (a,b),!canary")`` -> ``LabelSelector`` with ``matches(labels)``.
- ``from_label_selector_message(msg)``: metav1.LabelSelector (matchLabels + matchExpressions);
  ``label_selector_as_selector`` also refuses the keys and values Kubernetes' conversion refuses,
  and ``selector_string`` / ``format_label_selector`` print one as Kubernetes does.
- ``parse_field_selector("spec.nodeName=node-1", kind)`` -> ``FieldSelector`` with ``matches(obj)``;
  only the fields Kubernetes supports for the kind are accepted, as the apiserver does.

Selectors are compiled once and evaluated many times (the watch cache filters every event for
every watcher), so matching is plain dict and attribute access.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from google.protobuf.message import Message

from machinery.api import meta_pb2


class SelectorError(ValueError):
    """A malformed selector; the message says what is wrong, as the apiserver would."""


# ---------------------------------------------------------------- label selectors

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY_RE = re.compile(rf"^(({_DNS_SUBDOMAIN})/)?{_NAME}$")
_VALUE_RE = re.compile(rf"^({_NAME})?$")


def validate_label_key(key: str) -> str | None:
    """None if ``key`` is a valid label key (Kubernetes qualified name), else the reason."""
    prefix, slash, name = key.rpartition("/")
    if not name:
        return "name part must be non-empty"
    if len(name) > 63:
        return "name part must be no more than 63 characters"
    if slash and len(prefix) > 253:
        return "prefix part must be no more than 253 characters"
    if not _KEY_RE.match(key):
        return ("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used "
                "for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
                if not slash else "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
    return None


def validate_label_value(value: str) -> str | None:
    """None if ``value`` is a valid label value, else the reason."""
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _VALUE_RE.match(value):
        return ("a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                "and must start and end with an alphanumeric character")
    return None


@dataclass(frozen=True)
class Requirement:
    key: str
    # in, notin, =, ==, !=, exists, !, gt, lt
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in ("in", "=", "=="):
            return self.key in labels and labels[self.key] in self.values
        if op in ("notin", "!="):
            return self.key not in labels or labels[self.key] not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("gt", "lt"):
            if self.key not in labels:
                return False
            try:
                have, want = int(labels[self.key]), int(next(iter(self.values)))
            except ValueError:
                return False
            return have > want if op == "gt" else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return f"!{self.key}"
        if op in ("in", "notin"):
            return f"{self.key} {op} ({','.join(sorted(self.values))})"
        if op == "gt":
            return f"{self.key}>{next(iter(self.values))}"
        if op == "lt":
            return f"{self.key}<{next(iter(self.values))}"
        return f"{self.key}{op}{next(iter(self.values))}"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements. ``everything`` matches all; ``nothing`` matches none."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    @property
    def empty(self) -> bool:
        return not self.requirements and not self.nothing

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        for r in self.requirements:
            if not r.matches(labels):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = LabelSelector()
NOTHING = LabelSelector(nothing=True)


class _Lexer:
    _TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=(),<>]+)")

    def __init__(self, text: str):
        self.tokens: list[str] = []
        pos = 0
        text = text.strip()
        while pos < len(text):
            m = self._TOKEN.match(text, pos)
            if not m:
                raise SelectorError(f"unable to parse requirement: found unexpected character at '{text[pos:]}'")
            self.tokens.append(m.group(1))
            pos = m.end()
            while pos < len(text) and text[pos].isspace():
                pos += 1
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str | None:
        tok = self.peek()
        self.i += 1
        return tok


def _check_key(key: str | None) -> str:
    if key is None or key in "!=(),<>" or key in ("!=", "=="):
        raise SelectorError(f"unable to parse requirement: expected a label key, found {key!r}")
    reason = validate_label_key(key)
    if reason:
        raise SelectorError(f'unable to parse requirement: invalid label key "{key}": {reason}')
    return key


def _check_value(value: str) -> str:
    reason = validate_label_value(value)
    if reason:
        raise SelectorError(f'unable to parse requirement: invalid label value: "{value}": {reason}')
    return value


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the string form (``kubectl -l``). Empty text selects everything."""
    if not text or not text.strip():
        return EVERYTHING
    lex = _Lexer(text)
    reqs: list[Requirement] = []
    while True:
        tok = lex.take()
        if tok == "!":
            reqs.append(Requirement(_check_key(lex.take()), "!", frozenset()))
        else:
            key = _check_key(tok)
            nxt = lex.peek()
            if nxt is None or nxt == ",":
                reqs.append(Requirement(key, "exists", frozenset()))
            elif nxt in ("=", "==", "!="):
                lex.take()
                value = lex.peek()
                if value is None or value == ",":
                    value = ""
                else:
                    lex.take()
                reqs.append(Requirement(key, nxt, frozenset({_check_value(value)})))
            elif nxt in ("in", "notin"):
                lex.take()
                if lex.take() != "(":
                    raise SelectorError(f"unable to parse requirement: expected '(' after '{nxt}'")
                values: list[str] = []
                while True:
                    tok = lex.take()
                    if tok == ")":
                        break
                    if tok is None:
                        raise SelectorError("unable to parse requirement: expected ')'")
                    if tok == ",":
                        continue
                    values.append(_check_value(tok))
                if nxt == "in" and not values:
                    raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
                reqs.append(Requirement(key, nxt, frozenset(values)))
            elif nxt in (">", "<"):
                lex.take()
                value = lex.take() or ""
                if not value.lstrip("-").isdigit():
                    raise SelectorError("unable to parse requirement: for 'Gt', 'Lt' operators, "
                                        f"the value must be an integer: {value!r}")
                reqs.append(Requirement(key, "gt" if nxt == ">" else "lt", frozenset({value})))
            else:
                raise SelectorError(f"unable to parse requirement: found '{nxt}', "
                                    "expected: '=', '!=', '==', 'in', notin'")
        tok = lex.take()
        if tok is None:
            break
        if tok != ",":
            raise SelectorError(f"unable to parse requirement: found '{tok}', expected: ','")
    return LabelSelector(tuple(reqs))


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def from_match(match_labels: Mapping[str, str], match_expressions: Iterable[Any]) -> LabelSelector:
    """A selector from metav1.LabelSelector's parts (matchLabels and matchExpressions)."""
    reqs = [Requirement(k, "=", frozenset({v})) for k, v in sorted(match_labels.items())]
    for e in match_expressions:
        op = _OPERATORS.get(e.operator)
        if op is None:
            raise SelectorError(f'"{e.operator}" is not a valid label selector operator')
        values = frozenset(e.values)
        if op in ("in", "notin") and not values:
            raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
        if op in ("exists", "!") and values:
            raise SelectorError("values set must be empty for exists and does not exist")
        reqs.append(Requirement(e.key, op, values))
    return LabelSelector(tuple(reqs))


def from_label_selector_message(msg: meta_pb2.LabelSelector | None, present: bool = True) -> LabelSelector:
    """metav1.LabelSelector semantics: absent selects nothing, empty ({}) selects everything."""
    if msg is None or not present:
        return NOTHING
    return from_match(msg.match_labels, msg.match_expressions)


def label_selector_as_selector(msg: meta_pb2.LabelSelector, present: bool = True) -> LabelSelector:
    """metav1.LabelSelectorAsSelector: absent selects nothing, empty ({}) everything; a bad
    operator, key or value raises SelectorError."""
    if not present:
        return NOTHING
    for key, value in msg.match_labels.items():
        reason = validate_label_key(key) or validate_label_value(value)
        if reason:
            raise SelectorError(reason)
    for expr in msg.match_expressions:
        reason = validate_label_key(expr.key)
        for v in expr.values:
            reason = reason or validate_label_value(v)
        if reason:
            raise SelectorError(reason)
    return from_match(msg.match_labels, msg.match_expressions)


def selector_string(selector: LabelSelector) -> str:
    """labels.Selector's String(): the requirements sorted by key ("" for everything or nothing)."""
    return ",".join(str(r) for r in sorted(selector.requirements, key=lambda r: r.key))


def format_label_selector(msg: meta_pb2.LabelSelector, present: bool = True) -> str:
    """metav1.FormatLabelSelector (kubectl's SELECTOR column): the selector's string, "<none>"
    when that is empty, "<error>" when it does not convert."""
    try:
        text = selector_string(label_selector_as_selector(msg, present))
    except SelectorError:
        return "<error>"
    return text or "<none>"


# ---------------------------------------------------------------- field selectors

# The fields Kubernetes' apiserver lets you select on, per kind, beyond metadata.name and
# metadata.namespace (pkg/registry/*/strategy.go ToSelectableFields).
_SELECTABLE: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Node": ("spec.unschedulable",),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
              "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
              "reason", "reportingComponent", "source", "type"),
    "ResourceSlice": ("spec.nodeName", "spec.driver"),
}


def _getter(descriptor: Any, path: str) -> Callable[[Message], str]:
    """A function reading a dotted JSON path of a message as Kubernetes' field-selector string."""
    names: list[str] = []
    d = descriptor
    for part in path.split("."):
        fd = next((f for f in d.fields if f.json_name == part), None)
        if fd is None:
            raise SelectorError(f'field label not supported: {path}')
        names.append(fd.name)
        d = fd.message_type
    if path == "source":  # Event: "source" selects on source.component
        names.append("component")

    def get(obj: Message) -> str:
        value: Any = obj
        for n in names:
            value = getattr(value, n)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    return get


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    operator: str  # "=" or "!="
    value: str
    get: Callable[[Message], str]

    def matches(self, obj: Message) -> bool:
        have = self.get(obj)
        return have == self.value if self.operator == "=" else have != self.value


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Message) -> bool:
        for r in self.requirements:
            if not r.matches(obj):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(f"{r.field}{r.operator}{r.value}" for r in self.requirements)

    def value_of(self, field: str) -> str | None:
        """The value an equality requirement pins ``field`` to (used to index watchers)."""
        for r in self.requirements:
            if r.field == field and r.operator == "=":
                return r.value
        return None


EVERY_FIELD = FieldSelector()


def _split_unescaped(text: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            cur.append(text[i:i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(value: str) -> str:
    out, i = [], 0
    while i < len(value):
        if value[i] == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=!":
                raise SelectorError(f"invalid field selector: invalid escape sequence in {value!r}")
            out.append(value[i + 1])
            i += 2
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def parse_field_selector(text: str, kind_name: str, descriptor: Any) -> FieldSelector:
    """Parse ``a=b,c!=d`` for a kind (``descriptor`` is its message descriptor)."""
    if not text or not text.strip():
        return EVERY_FIELD
    allowed = {"metadata.name", "metadata.namespace", *_SELECTABLE.get(kind_name, ())}
    reqs = []
    for term in _split_unescaped(text.strip(), ","):
        term = term.strip()
        m = re.match(r"^([^=!]+?)\s*(==|!=|=)\s*(.*)$", term)
        if not m:
            raise SelectorError(f"invalid field selector: '{term}' is not of the form field=value or field!=value")
        field, op, value = m.group(1).strip(), m.group(2), _unescape(m.group(3))
        if field not in allowed:
            raise SelectorError(f'field label not supported: {field}')
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value, _getter(descriptor, field)))
    return FieldSelector(tuple(reqs))
