"""Device selectors by exact value: the CEL-free subset of Kubernetes' DRA CEL selectors.

A DeviceClass's ``spec.selectors`` and a request's ``exactly.selectors`` are CEL expressions in
Kubernetes (Kubernetes docs: Dynamic Resource Allocation: "Devices get selected through CEL
expressions which check those attributes and capacities"). kplane evaluates no CEL: it accepts the
expressions that compare a device's driver or one of its attributes with a literal, joined by
``&&``, which is what exact-value attribute matching needs.

- ``compile_selector``: the subset accepted, and what is refused (``SelectorError``);
- ``DeviceSelector.matches``: a compiled selector against one device.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Union

from machinery.api import resource_pb2

SYNTAX: Final = ('kplane matches devices by exact values: device.driver == "NAME", '
                 'device.attributes["DOMAIN"].NAME == VALUE, joined with &&')


class SelectorError(ValueError):
    """An expression outside the subset kplane evaluates."""


# A literal's value: str (string or version attribute), int, or bool.
Literal = Union[str, int, bool]


@dataclass(frozen=True)
class DriverIs:
    value: str


@dataclass(frozen=True)
class AttributeIs:
    domain: str
    name: str
    value: Literal


Comparison = Union[DriverIs, AttributeIs]


@dataclass(frozen=True)
class DeviceSelector:
    """A compiled selector: every comparison must hold (an empty one matches every device)."""

    expression: str
    comparisons: tuple[Comparison, ...]

    def matches(self, driver: str, device: resource_pb2.Device) -> bool:
        """Whether the device of ``driver`` passes every comparison. A device without the attribute,
        or with a value of another type, does not match (CEL would raise a runtime error)."""
        for c in self.comparisons:
            if isinstance(c, DriverIs):
                if driver != c.value:
                    return False
            elif not _attribute_is(driver, device, c):
                return False
        return True


def _attribute_is(driver: str, device: resource_pb2.Device, c: AttributeIs) -> bool:
    attrs = device.attributes
    attr = attrs.get(f"{c.domain}/{c.name}")
    if attr is None and c.domain == driver:
        attr = attrs.get(c.name)
    if attr is None:
        return False
    value = c.value
    if isinstance(value, bool):
        return attr.HasField("bool_value") and attr.bool_value == value
    if isinstance(value, int):
        return attr.HasField("int_value") and attr.int_value == value
    if attr.HasField("string_value"):
        return attr.string_value == value
    return attr.HasField("version_value") and attr.version_value == value


# ---------------------------------------------------------------- parsing

_TOKEN = re.compile(r"""\s*(?:
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<int>-?\d+)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|&&|\|\||!=|<=|>=|[.\[\]()<>!])
)""", re.VERBOSE)

_Token = tuple[str, str]  # (kind, text): kind is string, int, ident, op


def _tokens(expression: str) -> list[_Token]:
    out: list[_Token] = []
    pos = 0
    text = expression.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise SelectorError(f"unexpected {text[pos:].strip()[:20]!r}")
        kind = m.lastgroup or "op"
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


class _Parser:
    def __init__(self, tokens: list[_Token]):
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> _Token:
        tok = self.peek()
        if tok is None:
            raise SelectorError("the expression ends too early")
        self.pos += 1
        return tok

    def expect(self, text: str) -> None:
        kind, got = self.take()
        if got != text or kind not in ("op", "ident"):
            raise SelectorError(f"expected {text!r}, got {got!r}")

    def conjunction(self) -> list[Comparison]:
        out = self.atom()
        while (tok := self.peek()) is not None and tok[1] == "&&":
            self.take()
            out += self.atom()
        return out

    def atom(self) -> list[Comparison]:
        tok = self.peek()
        if tok is None:
            raise SelectorError("the expression ends too early")
        if tok[1] == "(":
            self.take()
            inner = self.conjunction()
            self.expect(")")
            return inner
        if tok == ("ident", "true"):
            after = self.tokens[self.pos + 1] if self.pos + 1 < len(self.tokens) else None
            if after is None or after[1] in ("&&", ")"):
                self.take()
                return []
        return [self.comparison()]

    def comparison(self) -> Comparison:
        left = self.operand()
        kind, op = self.take()
        if op != "==":
            raise SelectorError(f"{op!r} is not supported, only ==")
        right = self.operand()
        if isinstance(left, (DriverIs, _AttributeRef)) == isinstance(right, (DriverIs, _AttributeRef)):
            raise SelectorError("a comparison needs one device reference and one literal")
        ref, literal = (left, right) if isinstance(left, (DriverIs, _AttributeRef)) else (right, left)
        assert not isinstance(literal, (DriverIs, _AttributeRef))
        if isinstance(ref, DriverIs):
            if not isinstance(literal, str):
                raise SelectorError("device.driver is a string")
            return DriverIs(literal)
        assert isinstance(ref, _AttributeRef)
        return AttributeIs(ref.domain, ref.name, literal)

    def operand(self) -> Literal | DriverIs | _AttributeRef:
        kind, text = self.take()
        if kind == "string":
            return _unquote(text)
        if kind == "int":
            return int(text)
        if kind == "ident" and text in ("true", "false"):
            return text == "true"
        if kind == "ident" and text == "device":
            self.expect(".")
            kind, field = self.take()
            if field == "driver":
                return DriverIs("")
            if field != "attributes":
                raise SelectorError(f"device.{field} is not supported")
            self.expect("[")
            kind, domain = self.take()
            if kind != "string":
                raise SelectorError("device.attributes needs a quoted domain")
            self.expect("]")
            kind, sep = self.take()
            if sep == ".":
                kind, name = self.take()
                if kind != "ident":
                    raise SelectorError(f"expected an attribute name, got {name!r}")
            elif sep == "[":
                kind, quoted = self.take()
                if kind != "string":
                    raise SelectorError("expected a quoted attribute name")
                name = _unquote(quoted)
                self.expect("]")
            else:
                raise SelectorError(f"expected . or [ after device.attributes[...], got {sep!r}")
            nxt = self.peek()
            if nxt is not None and nxt[1] in (".", "("):
                raise SelectorError("methods and fields of an attribute are not supported")
            return _AttributeRef(_unquote(domain), name)
        raise SelectorError(f"unexpected {text!r}")


@dataclass(frozen=True)
class _AttributeRef:
    domain: str
    name: str


def compile_selector(expression: str) -> DeviceSelector:
    """The selector ``expression`` means; SelectorError when it is outside the subset (the
    message names the expression and the syntax kplane accepts).

    The subset: expressions that compare a device's driver or one of its attributes with a literal,
    joined by ``&&``, which is what exact-value attribute matching needs::

        device.driver == "dra.kplane.dev"
        device.attributes["dra.kplane.dev"].model == "kplane-gpu"
        device.attributes["dra.kplane.dev"]["index"] == 3 && device.attributes["dra.kplane.dev"].healthy == true
        true

    - a comparison is ``==`` between a device reference and a literal (either side);
    - references: ``device.driver``; ``device.attributes["DOMAIN"].NAME`` or
      ``device.attributes["DOMAIN"]["NAME"]`` — the attribute ``DOMAIN/NAME`` of the slice, or ``NAME``
      unqualified when DOMAIN is the device's driver (Kubernetes' attribute naming);
    - literals: a double- or single-quoted string (matching a string or version attribute), an
      integer (an int attribute), ``true`` / ``false`` (a bool attribute);
    - ``&&`` joins comparisons (all must hold), parentheses may group them, and ``true`` alone matches
      every device.

    Anything else — ``||``, ``!=``, ``<``, functions such as ``compareTo`` or ``matches``,
    capacities — is refused with ``SelectorError`` naming the expression, so a claim kplane cannot
    evaluate is never allocated by a guess.
    """
    try:
        parser = _Parser(_tokens(expression))
        comparisons = parser.conjunction()
        rest = parser.peek()
        if rest is not None:
            raise SelectorError(f"unexpected {rest[1]!r}")
    except SelectorError as exc:
        raise SelectorError(f"selector {expression.strip()!r} is not supported ({exc}); {SYNTAX}") from None
    return DeviceSelector(expression, tuple(comparisons))


def compile_selectors(selectors: list[resource_pb2.DeviceSelector]) -> tuple[DeviceSelector, ...]:
    """Each ``cel.expression`` compiled; SelectorError on the first kplane cannot evaluate."""
    return tuple(compile_selector(s.cel.expression) for s in selectors)
