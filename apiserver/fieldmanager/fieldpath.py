"""Field paths and field sets (structured-merge-diff's ``fieldpath``), and their two encodings:
FieldsV1, the JSON of a managedFields entry, and the printed path of a conflict message.

A path element names one step down a value:

- ``("f", "spec")``: a field of a struct, or a key of a map;
- ``("k", (("name", "c1"),))``: the item of a list map whose key fields have these values,
  sorted by key name;
- ``("v", "kubernetes")``: the item of a set with this value;
- ``("i", 0)``: an item of an atomic list by its index (never owned on its own).

A ``FieldSet`` is a trie of paths: ``members`` are the paths that end at this node, ``children``
the sets below each element. A member that also has children is what FieldsV1 writes as
``".": {}`` inside the child's object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from machinery.memo import Memo

FIELD, KEY, VALUE, INDEX = "f", "k", "v", "i"

PathElement = tuple[str, Any]
Path = tuple[PathElement, ...]

_RANK = {FIELD: 0, KEY: 1, VALUE: 2, INDEX: 3}


class FieldsV1Error(ValueError):
    """A FieldsV1 document that is not a field set."""


def field(name: str) -> PathElement:
    return (FIELD, name)


def key(values: dict[str, Any]) -> PathElement:
    """The element of the list-map item whose key fields have ``values``."""
    return (KEY, tuple((name, hashable(values[name])) for name in sorted(values)))


def value(v: Any) -> PathElement:
    return (VALUE, hashable(v))


def hashable(v: Any) -> Any:
    """A JSON value as a hashable one: scalars are themselves, anything else its sorted JSON
    (a key or set value is a scalar in every schema kplane serves)."""
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return _Composite(json.dumps(v, sort_keys=True, separators=(",", ":")))


class _Composite(str):
    """A list or object used as a key or set value, kept as its JSON text."""

    def json(self) -> Any:
        return json.loads(self)


def _plain(v: Any) -> Any:
    return v.json() if isinstance(v, _Composite) else v


class FieldSet:
    """A set of paths, as a trie (structured-merge-diff's ``fieldpath.Set``). Children are
    never empty."""

    __slots__ = ("members", "children", "_inner")

    def __init__(self) -> None:
        self.members: set[PathElement] = set()
        self.children: dict[PathElement, FieldSet] = {}
        self._inner: str | None = None  # to_json's text between the braces, once asked for

    @classmethod
    def of(cls, *paths: Path) -> FieldSet:
        s = cls()
        for p in paths:
            s.insert(p)
        return s

    # ------------------------------------------------------------ one path

    def insert(self, path: Path) -> None:
        node = self
        node._inner = None
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
            node._inner = None
        if path:
            node.members.add(path[-1])

    def has(self, path: Path) -> bool:
        node: FieldSet | None = self
        for pe in path[:-1]:
            node = node.children.get(pe) if node is not None else None
        return node is not None and bool(path) and path[-1] in node.members

    def empty(self) -> bool:
        return not self.members and not self.children

    def __bool__(self) -> bool:
        return not self.empty()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldSet) and self.members == other.members and self.children == other.children

    def __repr__(self) -> str:
        return f"FieldSet({', '.join(path_string(p) for p in self.paths())})"

    def paths(self) -> Iterator[Path]:
        """Every member path, in FieldsV1's order (a node before what is below it)."""
        for pe in sorted(self.members | set(self.children), key=order):
            if pe in self.members:
                yield (pe,)
            child = self.children.get(pe)
            if child is not None:
                for rest in child.paths():
                    yield (pe, *rest)

    # ------------------------------------------------------------ set algebra
    #
    # Sets are values: once built they are never changed, so the operations share the children
    # they do not change, and return ``self`` itself when nothing changes (a caller can tell an
    # unchanged set by identity).

    def union(self, other: FieldSet) -> FieldSet:
        """``self`` itself when ``other`` adds nothing to it."""
        if other.empty() or other is self:
            return self
        if self.empty():
            return other
        members = self.members if other.members <= self.members else self.members | other.members
        children: dict[PathElement, FieldSet] | None = None
        for pe, theirs in other.children.items():
            mine = self.children.get(pe)
            both = theirs if mine is None else mine.union(theirs)
            if both is not mine:
                if children is None:
                    children = dict(self.children)
                children[pe] = both
        if children is None and members is self.members:
            return self
        out = FieldSet()
        out.members = set(members) if members is self.members else members
        out.children = children if children is not None else dict(self.children)
        return out

    def difference(self, other: FieldSet) -> FieldSet:
        """The members of ``self`` that are not members of ``other`` (what is below a member of
        ``other`` stays)."""
        if other.empty() or self.empty():
            return self
        members = self.members - other.members
        children, changed = self._children_with(other, FieldSet.difference)
        if not changed and len(members) == len(self.members):
            return self
        out = FieldSet()
        out.members, out.children = members, children
        return out

    def intersection(self, other: FieldSet) -> FieldSet:
        out = FieldSet()
        out.members = self.members & other.members
        for pe, child in self.children.items():
            theirs = other.children.get(pe)
            if theirs is not None:
                both = child.intersection(theirs)
                if both:
                    out.children[pe] = both
        return out

    def recursive_difference(self, other: FieldSet) -> FieldSet:
        """``self`` without the members of ``other`` and everything below them."""
        if other.empty() or self.empty():
            return self
        members = self.members - other.members
        children, changed = self._children_with(other, FieldSet.recursive_difference, drop=other.members)
        if not changed and len(members) == len(self.members):
            return self
        out = FieldSet()
        out.members, out.children = members, children
        return out

    def _children_with(self, other: FieldSet, op: Callable[[FieldSet, FieldSet], FieldSet],
                       drop: set[PathElement] | frozenset[PathElement] = frozenset()
                       ) -> tuple[dict[PathElement, FieldSet], bool]:
        children: dict[PathElement, FieldSet] = {}
        changed = False
        for pe, child in self.children.items():
            if pe in drop:
                changed = True
                continue
            theirs = other.children.get(pe)
            rest = child if theirs is None else op(child, theirs)
            if rest is not child:
                changed = True
            if rest:
                children[pe] = rest
        return children, changed

    def leaves_under(self, pe: PathElement) -> FieldSet | None:
        """The set below ``pe`` (structured-merge-diff's WithPrefix)."""
        return self.children.get(pe)

    # ------------------------------------------------------------ FieldsV1

    def to_fields_v1(self) -> dict[str, Any]:
        """The set as the JSON object of a managedFields entry's ``fieldsV1``."""
        return self._encode(False)

    def _encode(self, member: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if member:
            out["."] = {}
        for pe in sorted(self.members | set(self.children), key=order):
            child = self.children.get(pe)
            out[encode_element(pe)] = {} if child is None else child._encode(pe in self.members)
        return out

    def to_json(self) -> str:
        """``to_fields_v1`` as compact JSON text. A node's text is kept once made: sets are values,
        and the sets an update builds share the nodes it did not change, so re-encoding an entry
        costs the paths that changed."""
        return "{" + self._inner_text() + "}"

    def _inner_text(self) -> str:
        if self._inner is None:
            parts = []
            for pe in sorted(self.members | set(self.children), key=order):
                child = self.children.get(pe)
                key = _key_text(pe)
                if child is None:
                    parts.append(key + ":{}")
                else:
                    inner = child._inner_text()
                    dot = pe in self.members
                    body = ('".":{}' + ("," + inner if inner else "")) if dot else inner
                    parts.append(key + ":{" + body + "}")
            self._inner = ",".join(parts)
        return self._inner

    @classmethod
    def from_fields_v1(cls, doc: Any) -> FieldSet:
        """The set a FieldsV1 object encodes; FieldsV1Error if it is not one."""
        if not isinstance(doc, dict):
            raise FieldsV1Error("fieldsV1 must be a JSON object")
        out = cls()
        for k, child in doc.items():
            if k == ".":
                continue
            if not isinstance(child, dict):
                raise FieldsV1Error(f"fieldsV1: {k!r} must hold an object")
            pe = decode_element(k)
            if not child or "." in child:
                out.members.add(pe)
            below = cls.from_fields_v1(child)
            if below:
                out.children[pe] = below
        return out


def order(pe: PathElement) -> tuple[Any, ...]:
    """structured-merge-diff's order of path elements: fields, then keys, values, indexes."""
    kind, v = pe
    if kind == KEY:
        return (_RANK[kind], tuple((name, _value_order(x)) for name, x in v))
    if kind == VALUE:
        return (_RANK[kind], _value_order(v))
    return (_RANK[kind], v)


def _value_order(v: Any) -> tuple[int, Any]:
    if v is None:
        return (0, 0)
    if isinstance(v, bool):
        return (1, v)
    if isinstance(v, (int, float)):
        return (2, v)
    return (3, str(v))


def encode_element(pe: PathElement) -> str:
    kind, v = pe
    if kind == FIELD:
        return f"f:{v}"
    if kind == KEY:
        return "k:" + json.dumps({name: _plain(x) for name, x in v}, separators=(",", ":"), ensure_ascii=False)
    if kind == VALUE:
        return "v:" + json.dumps(_plain(v), separators=(",", ":"), ensure_ascii=False)
    return f"i:{v}"


_KEY_TEXTS: Memo[PathElement, str] = Memo("apiserver.fieldmanager.key_texts", 65536)


def _key_text(pe: PathElement) -> str:
    """``encode_element(pe)`` as a JSON string, remembered for fields and for list keys of strings
    (the elements every managedFields entry repeats). Not for values and other keys: True and 1 are
    one dict key to Python, two elements to FieldsV1."""
    text = _KEY_TEXTS.get(pe)
    if text is None:
        text = json.dumps(encode_element(pe), ensure_ascii=False)
        kind, v = pe
        if kind == FIELD or (kind == KEY and all(isinstance(x, str) for _, x in v)):
            _KEY_TEXTS.put(pe, text)
    return text


def decode_element(text: str) -> PathElement:
    prefix, sep, rest = text.partition(":")
    if not sep:
        raise FieldsV1Error(f"fieldsV1: {text!r} is not a path element (f:, k:, v: or i:)")
    if prefix == FIELD:
        return field(rest)
    if prefix == INDEX:
        try:
            return (INDEX, int(rest))
        except ValueError:
            raise FieldsV1Error(f"fieldsV1: {text!r}: the index is not an integer") from None
    try:
        decoded = json.loads(rest)
    except ValueError:
        raise FieldsV1Error(f"fieldsV1: {text!r}: not JSON after {prefix}:") from None
    if prefix == KEY:
        if not isinstance(decoded, dict) or not decoded:
            raise FieldsV1Error(f"fieldsV1: {text!r}: a key must be a non-empty object")
        return key(decoded)
    if prefix == VALUE:
        return value(decoded)
    raise FieldsV1Error(f"fieldsV1: {text!r} is not a path element (f:, k:, v: or i:)")


# ---------------------------------------------------------------- printed paths


def path_string(path: Path) -> str:
    """A path as Kubernetes prints it in a conflict: ``.spec.containers[name="c1"].image``."""
    return "".join(element_string(pe) for pe in path)


def element_string(pe: PathElement) -> str:
    kind, v = pe
    if kind == FIELD:
        return f".{v}"
    if kind == KEY:
        return "[" + ",".join(f"{name}={_go_value(x)}" for name, x in v) + "]"
    if kind == VALUE:
        return f"[={_go_value(v)}]"
    return f"[{v}]"


def _go_value(v: Any) -> str:
    """A value as structured-merge-diff's value.ToString prints it: strings quoted, the rest bare."""
    v = _plain(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (int, float)):
        return repr(v)
    return json.dumps(v, separators=(",", ":"), sort_keys=True)
