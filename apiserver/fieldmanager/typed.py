"""Values under a schema (structured-merge-diff's ``typed``): the field set of a value, the
comparison of two values, the merge of an applied configuration into an object, and the removal
of items. Values are Kubernetes JSON (dicts, lists, scalars) and are never mutated: each
operation returns new containers where it changes something and shares the rest.

The rules, as structured-merge-diff's, are on their functions: ``field_set``, ``compare``,
``merge`` and ``remove_items``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from apiserver.fieldmanager.fieldpath import INDEX, FieldSet, Path, PathElement, field, key, path_string, value
from apiserver.fieldmanager.schema import MAP, SET, Atom, ListType, MapType, deduce


class _Absent:
    """No value at all (a missing key), as distinct from JSON null."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()


class TypeError_(ValueError):  # noqa: N801 (a ValueError, not Python's TypeError)
    """A value that does not fit its schema: a list-map item without its key, a duplicate item."""


def _element(t: ListType, item: Any, index: int, where: Path) -> PathElement:
    """The path element of a list item (structured-merge-diff's listItemToPathElement)."""
    if t.relationship == MAP:
        if not isinstance(item, dict):
            raise TypeError_(f"{path_string(where)}: element {index}: associative list with keys has an element "
                             f"that is not a map")
        values: dict[str, Any] = {}
        for k in t.keys:
            if k in item and item[k] is not None:
                values[k] = item[k]
            elif k in t.defaults:
                values[k] = t.defaults[k]
            else:
                raise TypeError_(f"{path_string(where)}: element {index}: associative list with keys has an element "
                                 f'that omits key field "{k}" (and doesn\'t have default value)')
        return key(values)
    if t.relationship == SET:
        return value(item)
    return (INDEX, index)


def _items(t: ListType, items: list[Any], where: Path) -> tuple[list[PathElement], dict[PathElement, Any]]:
    """Each item's element, in order, and the first item of each element."""
    order: list[PathElement] = []
    first: dict[PathElement, Any] = {}
    for i, item in enumerate(items):
        pe = _element(t, item, i, where)
        order.append(pe)
        first.setdefault(pe, item)
    return order, first


# ---------------------------------------------------------------- field set


def field_set(v: Any, atom: Atom, *, unique: bool = False) -> FieldSet:
    """The fields ``v`` sets. ``unique``: a list-map or set item given twice is an error (an applied
    configuration; an object as stored may hold duplicates, counted once).

    Every scalar, every atomic list or map, every key of a map that is not a struct field, and every
    item of a list map or set is a member; a struct field is a member only through what is below it.
    """
    out = FieldSet()
    _walk(v, atom, out, (), unique)
    return out


def _walk(v: Any, atom: Atom, node: FieldSet, where: Path, unique: bool) -> bool:
    """Fill ``node`` with what is below ``v``; whether ``v`` itself is a member."""
    t = deduce(atom, v)
    if isinstance(t, MapType):
        if t.atomic:
            return True
        if not isinstance(v, dict):
            return False
        for k, item in v.items():
            pe = field(k)
            below = FieldSet()
            member = _walk(item, t.of(k), below, (*where, pe), unique)
            if member or k not in t.fields:
                node.members.add(pe)
            if below:
                node.children[pe] = below
        return False
    if isinstance(t, ListType):
        if t.relationship not in (MAP, SET):
            return True
        if not isinstance(v, list):
            return False
        seen: set[PathElement] = set()
        for i, item in enumerate(v):
            pe = _element(t, item, i, where)
            if pe in seen:
                if unique:
                    raise TypeError_(f"{path_string(where)}: duplicate entries for key {path_string((pe,))}")
                continue
            seen.add(pe)
            node.members.add(pe)
            below = FieldSet()
            _walk(item, t.element, below, (*where, pe), unique)
            if below:
                node.children[pe] = below
        return False
    return True


def undeclared(v: Any, atom: Atom) -> list[Path]:
    """The paths of the fields ``v`` has that the schema does not declare (an applied
    configuration must have none: structured-merge-diff's "field not declared in schema")."""
    out: list[Path] = []
    _undeclared(v, atom, (), out)
    return out


def _undeclared(v: Any, atom: Atom, where: Path, out: list[Path]) -> None:
    t = deduce(atom, v)
    if isinstance(t, MapType) and isinstance(v, dict):
        for k, item in v.items():
            if k not in t.fields and t.element is None:
                out.append((*where, field(k)))
            else:
                _undeclared(item, t.of(k), (*where, field(k)), out)
    elif isinstance(t, ListType) and isinstance(v, list):
        for i, item in enumerate(v):
            try:
                pe = _element(t, item, i, where)
            except TypeError_:
                pe = (INDEX, i)
            _undeclared(item, t.element, (*where, pe), out)


def ensure_named_fields_are_members(fs: FieldSet, atom: Atom) -> FieldSet:
    """``fs`` with every struct field it goes through made a member (structured-merge-diff's
    EnsureNamedFieldsAreMembers): what pruning compares, so that a struct one manager emptied can go."""
    out = FieldSet()
    out.members = set(fs.members)
    for pe, child in fs.children.items():
        sub: Atom = atom
        if isinstance(atom, MapType):
            if pe[1] in atom.fields:
                out.members.add(pe)
            sub = atom.of(pe[1])
        elif isinstance(atom, ListType):
            sub = atom.element
        out.children[pe] = ensure_named_fields_are_members(child, sub)
    return out


# ---------------------------------------------------------------- compare


@dataclass
class Comparison:
    added: FieldSet
    modified: FieldSet
    removed: FieldSet

    def changed(self) -> FieldSet:
        """What the newer value set: added or modified."""
        return self.added.union(self.modified)

    def same(self) -> bool:
        return self.added.empty() and self.modified.empty() and self.removed.empty()

    def excluding(self, ignored: FieldSet) -> Comparison:
        return Comparison(self.added.recursive_difference(ignored), self.modified.recursive_difference(ignored),
                          self.removed.recursive_difference(ignored))


def compare(lhs: Any, rhs: Any, atom: Atom) -> Comparison:
    """What changed from ``lhs`` to ``rhs``.

    A leaf present on one side only is added or removed, on both and different modified; a struct,
    map, list or item that appears or disappears is itself added or removed too (so an Update that
    adds a container owns the container, ``"."``). Empty and null containers on both sides compare
    as leaves.
    """
    c = Comparison(FieldSet(), FieldSet(), FieldSet())
    _compare(lhs, rhs, atom, (), c)
    return c


def _is_empty(v: Any, kind: type) -> bool:
    return v is ABSENT or v is None or not isinstance(v, kind) or not v


def _whole(v: Any, atom: Atom, where: Path) -> FieldSet:
    """Every path below ``v`` as a comparison with nothing on the other side finds them: leaves,
    and the structs, maps, lists and items that hold them."""
    out = FieldSet()
    t = deduce(atom, v)
    if isinstance(t, MapType):
        if t.atomic or not isinstance(v, dict) or not v:
            return out
        for k, item in v.items():
            pe = field(k)
            out.members.add(pe)
            below = _whole(item, t.of(k), (*where, pe))
            if below:
                out.children[pe] = below
    elif isinstance(t, ListType):
        if t.relationship not in (MAP, SET) or not isinstance(v, list) or not v:
            return out
        _, first = _items(t, v, where)
        for pe, item in first.items():
            out.members.add(pe)
            below = _whole(item, t.element, (*where, pe))
            if below:
                out.children[pe] = below
    return out


def _graft(target: FieldSet, where: Path, below: FieldSet) -> None:
    """Add ``where`` and, under it, ``below`` to ``target``."""
    target.insert(where)
    if not below:
        return
    node = target
    for pe in where[:-1]:
        node = node.children[pe]
    known = node.children.get(where[-1])
    node.children[where[-1]] = below if known is None else known.union(below)


def _compare(lhs: Any, rhs: Any, atom: Atom, where: Path, c: Comparison) -> None:
    if lhs is ABSENT:
        if where:
            _graft(c.added, where, _whole(rhs, atom, where))
        return
    if rhs is ABSENT:
        if where:
            _graft(c.removed, where, _whole(lhs, atom, where))
        return
    if lhs == rhs:
        return  # nothing below changed
    t = deduce(atom, rhs if rhs is not ABSENT else lhs)
    if lhs is not ABSENT and rhs is not ABSENT and deduce(atom, lhs) is not t:
        t = deduce(atom, None)  # an untyped value that changed its JSON type: a leaf
    leaf = True
    if isinstance(t, MapType):
        if not t.atomic and not (_is_empty(lhs, dict) and _is_empty(rhs, dict)):
            leaf = False
            left = lhs if isinstance(lhs, dict) else {}
            right = rhs if isinstance(rhs, dict) else {}
            for k, lv in left.items():
                _compare(lv, right.get(k, ABSENT), t.of(k), (*where, field(k)), c)
            for k, rv in right.items():
                if k not in left:
                    _compare(ABSENT, rv, t.of(k), (*where, field(k)), c)
    elif isinstance(t, ListType):
        if t.relationship in (MAP, SET) and not (_is_empty(lhs, list) and _is_empty(rhs, list)):
            leaf = False
            _, left = _items(t, lhs if isinstance(lhs, list) else [], where)
            _, right = _items(t, rhs if isinstance(rhs, list) else [], where)
            for pe, lv in left.items():
                _compare(lv, right.get(pe, ABSENT), t.element, (*where, pe), c)
            for pe, rv in right.items():
                if pe not in left:
                    _compare(ABSENT, rv, t.element, (*where, pe), c)
    if leaf:
        c.modified.insert(where)


# ---------------------------------------------------------------- merge


def merge(lhs: Any, rhs: Any, atom: Atom) -> Any:
    """``rhs`` (an applied configuration) merged into ``lhs`` (the object).

    The applied value wins at every leaf and atomic value; maps merge key by key; list maps and sets
    merge item by item, the applied items in the applied order with the object's other items kept
    near where they were.
    """
    return _merge(lhs, rhs, atom, ())


def _merge(lhs: Any, rhs: Any, atom: Atom, where: Path) -> Any:
    if rhs is ABSENT:
        return lhs
    if lhs is ABSENT:
        return rhs
    t = deduce(atom, rhs)
    if isinstance(t, MapType):
        if t.atomic or not isinstance(lhs, dict) or not isinstance(rhs, dict) or not (lhs or rhs):
            return rhs
        out = {k: _merge(v, rhs.get(k, ABSENT), t.of(k), (*where, field(k))) for k, v in lhs.items()}
        for k, v in rhs.items():
            if k not in lhs:
                out[k] = v
        return out
    if isinstance(t, ListType):
        if t.relationship not in (MAP, SET) or not isinstance(lhs, list) or not isinstance(rhs, list) or not (
                lhs or rhs):
            return rhs
        return _merge_items(t, lhs, rhs, where)
    return rhs


def _merge_items(t: ListType, lhs: list[Any], rhs: list[Any], where: Path) -> list[Any]:
    """The items of both lists: the applied ones in their order, each merged with the object's
    item of the same key; the object's other items kept before the applied item they preceded.

    Two cursors walk the lists; ``shared`` is the order in which the items both have are taken,
    the applied one's, so an object item the applied list puts later waits for its turn."""
    left_order, left = _items(t, lhs, where)
    right_order, right = _items(t, rhs, where)
    shared = [pe for pe in right_order if pe in left]
    taken: set[PathElement] = set()
    out: list[Any] = []
    li = ri = 0
    si = 0

    def next_shared() -> PathElement | None:
        return shared[si] if si < len(shared) else None

    while li < len(left_order) or ri < len(right_order):
        if li < len(left_order):
            pe = left_order[li]
            if left[pe] is not lhs[li] or pe in taken:  # a duplicate, or an item merged already
                if left[pe] is not lhs[li]:
                    out.append(lhs[li])
                li += 1
                continue
            if ri < len(right_order) and pe == right_order[ri]:
                out.append(_merge(left[pe], right[pe], t.element, (*where, pe)))
                taken.add(pe)
                li += 1
                ri += 1
                si += 1
                continue
            if pe not in right:
                out.append(lhs[li])
                li += 1
                continue
            if next_shared() != pe:
                li += 1  # an item the applied list takes later
                continue
        if ri < len(right_order):
            pe = right_order[ri]
            ri += 1
            if pe in taken or right[pe] is not rhs[ri - 1]:
                continue
            out.append(_merge(left.get(pe, ABSENT), right[pe], t.element, (*where, pe)))
            taken.add(pe)
            if next_shared() == pe:
                si += 1
        else:  # not reached: an item both lists have was taken when the applied list got to it
            out.append(lhs[li])
            li += 1
    return out


# ---------------------------------------------------------------- remove


def remove_items(v: Any, fs: FieldSet, atom: Atom) -> Any:
    """``v`` without the members of ``fs`` (and what is below them); a map or list left empty
    becomes null."""
    if fs.empty():
        return v
    t = deduce(atom, v)
    if isinstance(t, MapType):
        if t.atomic or not isinstance(v, dict) or not v:
            return v
        out: dict[str, Any] = {}
        for k, item in v.items():
            pe = field(k)
            if pe in fs.members:
                continue
            below = fs.children.get(pe)
            out[k] = remove_items(item, below, t.of(k)) if below is not None else item
        return out or None
    if isinstance(t, ListType):
        if t.relationship not in (MAP, SET) or not isinstance(v, list) or not v:
            return v
        items: list[Any] = []
        for i, item in enumerate(v):
            pe = _element(t, item, i, ())
            if pe in fs.members:
                continue
            below = fs.children.get(pe)
            items.append(remove_items(item, below, t.element) if below is not None else item)
        return items or None
    return v
