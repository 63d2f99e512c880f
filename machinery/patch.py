"""The three Kubernetes patch types, applied to plain JSON values.

The apiserver's PATCH handler uses this module to turn the stored object (as Kubernetes JSON:
lowerCamelCase fields, the shape ``kubectl get -o json`` prints) and a request body into the
new object. It knows nothing of protobuf, storage or HTTP:

* :func:`json_merge_patch` -- RFC 7386 JSON merge patch (``application/merge-patch+json``).
* :func:`json_patch` -- RFC 6902 JSON patch (``application/json-patch+json``).
* :func:`strategic_merge_patch` -- Kubernetes strategic merge patch
  (``application/strategic-merge-patch+json``), following apimachinery's
  ``strategicpatch.StrategicMergeMapPatch``: lists whose Go field carries
  ``patchStrategy:"merge"`` merge element by element on their ``patchMergeKey``; every other
  list is replaced whole. The schema knowledge is :data:`MERGE_LISTS`, read from the proto
  options that carry the struct tags of the Go API types (``machinery.schema``).
* :func:`apply_patch` -- dispatch on the patch type (short name or MIME type).

Every function returns a new document and never mutates its arguments. Malformed patches raise
:class:`PatchError` (a ``ValueError``) with a one-line message.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from machinery.kinds import KINDS
from machinery.schema import ListStrategy, merge_lists

__all__ = [
    "MERGE_LISTS",
    "PATCH_TYPES",
    "ListStrategy",
    "PatchError",
    "apply_patch",
    "json_merge_patch",
    "json_patch",
    "merge_strategy",
    "strategic_merge_patch",
]

JSON = Any  # dict[str, JSON] | list[JSON] | str | int | float | bool | None


class PatchError(ValueError):
    """A patch that is malformed or cannot be applied to the target document."""


# ---------------------------------------------------------------------------------------------
# Schema: which lists merge, and on what key.
# ---------------------------------------------------------------------------------------------


#: Kind -> JSON path of a list field -> its merge strategy, from the ``patch_strategy`` and
#: ``patch_merge_key`` options on the kind's proto fields (``machinery.schema``, the Go struct
#: tags of Kubernetes' types). Paths are dotted Kubernetes JSON field names; ``[]`` marks "each
#: element of this list", e.g. ``spec.containers[].env``. A list not listed here is atomic: a
#: patch replaces it whole.
MERGE_LISTS: dict[str, dict[str, ListStrategy]] = {
    kind.name: dict(merge_lists(kind.message.DESCRIPTOR)) for kind in KINDS
}


def _kind_table(kind: str | None) -> dict[str, ListStrategy]:
    """The merge-list table of ``kind`` (case-insensitive). Like the apiserver, which refuses
    strategic merge patches for kinds it has no Go struct for, an unknown kind is an error."""
    if isinstance(kind, str):
        if kind in MERGE_LISTS:
            return MERGE_LISTS[kind]
        for name, table in MERGE_LISTS.items():
            if name.lower() == kind.lower():
                return table
    raise PatchError(
        f"strategic merge patch is not supported for kind {kind!r}; "
        f"known kinds: {', '.join(sorted(MERGE_LISTS))}"
    )


def merge_strategy(kind: str, path: str) -> ListStrategy | None:
    """The merge strategy of the list at ``path`` (e.g. ``"spec.containers[].env"``) in ``kind``.

    ``None`` means the list is atomic (or unknown): a strategic merge patch replaces it.
    """
    return _kind_table(kind).get(path)


# ---------------------------------------------------------------------------------------------
# Helpers shared by the three patch types.
# ---------------------------------------------------------------------------------------------


def _short(value: Any, limit: int = 80) -> str:
    """A one-line, bounded rendering of a value for error messages."""
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    text = text.replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _copy_json(value: Any, where: str) -> JSON:
    """A deep copy of a JSON value; anything that is not JSON raises PatchError."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, dict):
        out: dict[str, JSON] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise PatchError(f"{where}: object key {key!r} is not a string")
            out[key] = _copy_json(item, where)
        return out
    if isinstance(value, list):
        return [_copy_json(item, where) for item in value]
    raise PatchError(f"{where}: {type(value).__name__} is not a JSON value")


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers by value (1 == 1.0), booleans never equal numbers."""
    kind = _json_kind(a)
    if kind != _json_kind(b):
        return False
    if kind == "object":
        return bool(a.keys() == b.keys()) and all(_json_equal(a[k], b[k]) for k in a)
    if kind == "array":
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _parse_if_text(patch: Any) -> Any:
    if isinstance(patch, (bytes, bytearray)):
        try:
            patch = patch.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PatchError(f"patch is not valid UTF-8: {exc}") from None
    if isinstance(patch, str):
        try:
            return json.loads(patch)
        except json.JSONDecodeError as exc:
            raise PatchError(f"patch is not valid JSON: {exc}") from None
    return patch


# ---------------------------------------------------------------------------------------------
# RFC 7386: JSON merge patch.
# ---------------------------------------------------------------------------------------------


def json_merge_patch(target: JSON, patch: JSON) -> JSON:
    """Apply an RFC 7386 merge patch: objects merge recursively, ``null`` deletes a member,
    anything else (arrays included) replaces the target value."""
    return _merge_patch(_copy_json(target, "target"), _copy_json(patch, "patch"))


def _merge_patch(target: JSON, patch: JSON) -> JSON:
    if not isinstance(patch, dict):
        return patch
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = _merge_patch(result.get(key), value)
    return result


# ---------------------------------------------------------------------------------------------
# RFC 6902: JSON patch, with RFC 6901 JSON pointers.
# ---------------------------------------------------------------------------------------------

_OPS = ("add", "remove", "replace", "move", "copy", "test")


def json_patch(target: JSON, ops: list[dict[str, Any]]) -> JSON:
    """Apply an RFC 6902 JSON patch: the operations run in order on a copy of ``target``.

    A failing operation (missing path, bad pointer, failed ``test``) raises PatchError and,
    since the work is done on a copy, leaves nothing half-applied.
    """
    ops = _parse_if_text(ops)
    if not isinstance(ops, list):
        raise PatchError(f"a JSON patch must be an array of operations, got {_json_kind(ops)}")
    doc = _copy_json(target, "target")
    for index, op in enumerate(ops):
        doc = _apply_op(doc, op, index)
    return doc


def _parse_pointer(pointer: Any, where: str) -> list[str]:
    if not isinstance(pointer, str):
        raise PatchError(f"{where}: JSON pointer must be a string, got {_short(pointer)}")
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"{where}: JSON pointer {pointer!r} must be empty or start with '/'")
    tokens = []
    for raw in pointer[1:].split("/"):
        token, i = [], 0
        while i < len(raw):
            ch = raw[i]
            if ch == "~":
                nxt = raw[i + 1] if i + 1 < len(raw) else ""
                if nxt not in ("0", "1"):
                    raise PatchError(f"{where}: JSON pointer {pointer!r} has an invalid '~' escape")
                token.append("~" if nxt == "0" else "/")
                i += 2
            else:
                token.append(ch)
                i += 1
        tokens.append("".join(token))
    return tokens


def _array_index(token: str, length: int, pointer: str, where: str, *, for_add: bool) -> int:
    if token == "-":
        if for_add:
            return length
        raise PatchError(f"{where}: '-' in {pointer!r} names no existing array element")
    if not token.isdigit() or not token.isascii() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"{where}: {token!r} in {pointer!r} is not a valid array index")
    index = int(token)
    if index > length or (index == length and not for_add):
        raise PatchError(f"{where}: index {index} in {pointer!r} is out of range (length {length})")
    return index


def _resolve_parent(doc: JSON, tokens: list[str], pointer: str, where: str) -> JSON:
    """The container that holds the last token of ``pointer``."""
    node = doc
    for depth, token in enumerate(tokens[:-1]):
        if isinstance(node, dict):
            if token not in node:
                missing = "/" + "/".join(tokens[: depth + 1])
                raise PatchError(f"{where}: path {pointer!r} does not exist (no {missing!r})")
            node = node[token]
        elif isinstance(node, list):
            node = node[_array_index(token, len(node), pointer, where, for_add=False)]
        else:
            raise PatchError(f"{where}: path {pointer!r} goes through a {_json_kind(node)}")
    return node


def _get(doc: JSON, pointer: str, where: str) -> JSON:
    tokens = _parse_pointer(pointer, where)
    if not tokens:
        return doc
    parent = _resolve_parent(doc, tokens, pointer, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{where}: path {pointer!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_array_index(last, len(parent), pointer, where, for_add=False)]
    raise PatchError(f"{where}: path {pointer!r} goes through a {_json_kind(parent)}")


def _add(doc: JSON, pointer: str, value: JSON, where: str) -> JSON:
    tokens = _parse_pointer(pointer, where)
    if not tokens:
        return value
    parent = _resolve_parent(doc, tokens, pointer, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_array_index(last, len(parent), pointer, where, for_add=True), value)
    else:
        raise PatchError(f"{where}: path {pointer!r} goes through a {_json_kind(parent)}")
    return doc


def _remove(doc: JSON, pointer: str, where: str) -> tuple[JSON, JSON]:
    """Remove the value at ``pointer``; return (document, removed value)."""
    tokens = _parse_pointer(pointer, where)
    if not tokens:
        raise PatchError(f"{where}: cannot remove the whole document")
    parent = _resolve_parent(doc, tokens, pointer, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{where}: path {pointer!r} does not exist")
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_array_index(last, len(parent), pointer, where, for_add=False))
    raise PatchError(f"{where}: path {pointer!r} goes through a {_json_kind(parent)}")


def _replace(doc: JSON, pointer: str, value: JSON, where: str) -> JSON:
    """Replace the existing value at ``pointer`` in place (an object keeps its key order)."""
    tokens = _parse_pointer(pointer, where)
    if not tokens:
        return value
    parent = _resolve_parent(doc, tokens, pointer, where)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"{where}: path {pointer!r} does not exist")
        parent[last] = value
    elif isinstance(parent, list):
        parent[_array_index(last, len(parent), pointer, where, for_add=False)] = value
    else:
        raise PatchError(f"{where}: path {pointer!r} goes through a {_json_kind(parent)}")
    return doc


def _apply_op(doc: JSON, op: Any, index: int) -> JSON:
    where = f"operation {index}"
    if not isinstance(op, dict):
        raise PatchError(f"{where}: must be an object, got {_short(op)}")
    name = op.get("op")
    if name not in _OPS:
        raise PatchError(f"{where}: unknown op {_short(name)}; expected one of {', '.join(_OPS)}")
    where = f"operation {index} ({name})"
    if "path" not in op:
        raise PatchError(f"{where}: missing 'path'")
    path = op["path"]
    if name in ("add", "replace", "test") and "value" not in op:
        raise PatchError(f"{where}: missing 'value'")
    if name in ("move", "copy") and "from" not in op:
        raise PatchError(f"{where}: missing 'from'")

    if name == "add":
        return _add(doc, path, _copy_json(op["value"], where), where)
    if name == "remove":
        return _remove(doc, path, where)[0]
    if name == "replace":
        return _replace(doc, path, _copy_json(op["value"], where), where)
    if name == "test":
        actual = _get(doc, path, where)
        if not _json_equal(actual, op["value"]):
            raise PatchError(
                f"{where}: test failed at {path!r}: expected {_short(op['value'])}, "
                f"found {_short(actual)}"
            )
        return doc
    source = op["from"]
    from_tokens = _parse_pointer(source, where)
    to_tokens = _parse_pointer(path, where)
    if name == "copy":
        return _add(doc, path, _copy_json(_get(doc, source, where), where), where)
    # move
    if from_tokens == to_tokens:
        _get(doc, source, where)
        return doc
    if to_tokens[: len(from_tokens)] == from_tokens:
        raise PatchError(f"{where}: cannot move {source!r} into its own child {path!r}")
    doc, value = _remove(doc, source, where)
    return _add(doc, path, value, where)


# ---------------------------------------------------------------------------------------------
# Kubernetes strategic merge patch.
# ---------------------------------------------------------------------------------------------

_DIRECTIVE = "$patch"
_RETAIN_KEYS = "$retainKeys"
_DELETE_PRIMITIVES = "$deleteFromPrimitiveList"
_SET_ORDER = "$setElementOrder"


def strategic_merge_patch(target: JSON, patch: JSON, kind: str | None) -> JSON:
    """Apply a Kubernetes strategic merge patch to ``target``, an object of ``kind`` (None, a kind
    the document does not name, is refused as an unknown kind is).

    Semantics follow apimachinery's ``StrategicMergeMapPatch``:

    * maps merge recursively and ``null`` deletes a key;
    * a list listed in :data:`MERGE_LISTS` merges: patch elements whose merge key matches an
      existing element are merged into it recursively, others are added, primitive lists
      merge as a set; every other list is replaced;
    * directives: ``{"$patch": "replace"}`` / ``{"$patch": "delete"}`` in a map,
      ``{"$patch": "delete", <key>: v}`` and ``{"$patch": "replace"}`` as list elements,
      ``$retainKeys``, ``$deleteFromPrimitiveList/<field>`` and ``$setElementOrder/<field>``.

    Order of a merged list, as in Go: ``$setElementOrder`` wins; without it, patch elements
    keep the patch's relative order and the elements only the server has keep theirs, the
    two interleaved by their positions in the live list, so an element new to the list lands
    *before* the remaining server-only elements (Go's behaviour: ``kubectl patch`` adding a
    container puts it first).
    """
    table = _kind_table(kind)
    if not isinstance(target, dict):
        raise PatchError(f"target must be a JSON object, got {_json_kind(target)}")
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be a JSON object, got {_json_kind(patch)}")
    smp = _StrategicMerge(table)
    return smp.merge_map(_copy_json(target, "target"), _copy_json(patch, "patch"), "")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _same(a: Any, b: Any) -> bool:
    """Go interface equality of two JSON scalars (bools never equal numbers; 1 == 1.0)."""
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return _json_equal(a, b)
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return _json_kind(a) == _json_kind(b) and a == b


def _index(items: list[JSON], value: JSON, key: str) -> int:
    """Position in ``items`` of the first element equal to ``value`` (by merge key if any)."""
    wanted = value.get(key) if key else value
    for i, item in enumerate(items):
        got = item.get(key) if key and isinstance(item, dict) else item
        if key and not isinstance(item, dict):
            continue
        if _same(got, wanted):
            return i
    return -1


def _element_kind(*lists: list[JSON]) -> str | None:
    """The common JSON kind of every element, as Go's sliceElementType demands."""
    kind = None
    for items in lists:
        for item in items:
            current = _json_kind(item)
            if current == "array":
                raise PatchError("lists of lists cannot be merged")
            if kind is None:
                kind = current
            elif kind != current:
                raise PatchError(f"list element types are not identical: {kind} and {current}")
    return kind


def _sort_by(items: list[JSON], order: list[JSON], key: str) -> list[JSON]:
    """Stable sort of ``items`` by position in ``order``; items absent from it go last."""
    def position(item: JSON) -> int:
        i = _index(order, item, key)
        return i if i >= 0 else len(order)
    return sorted(items, key=position)


def _normalize_order(patch_items: list[JSON], server_only: list[JSON], patch_order: list[JSON],
                     server_order: list[JSON], key: str) -> list[JSON]:
    """Go's normalizeElementOrder: sort both parts, then interleave them by the live order.

    A patch item is taken before the next server-only item unless both are in the live list
    and the server-only one comes first there.
    """
    right = _sort_by(patch_items, patch_order, key)
    left = _sort_by(server_only, server_order, key)
    out: list[JSON] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = _index(server_order, left[i], key)
            ri = _index(server_order, right[j], key)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _partition(merged: list[JSON], by: list[JSON], key: str) -> tuple[list[JSON], list[JSON]]:
    """Split ``merged`` into (elements present in ``by``, the others), keeping order."""
    inside: list[JSON] = []
    outside: list[JSON] = []
    for item in merged:
        (inside if _index(by, item, key) >= 0 else outside).append(item)
    return inside, outside


def _require_key(item: JSON, key: str, where: str) -> None:
    if not isinstance(item, dict):
        raise PatchError(f"{where}: list element {_short(item)} is not an object")
    if key not in item:
        raise PatchError(f"{where}: map {_short(item)} does not contain declared merge key {key!r}")


class _StrategicMerge:
    """One strategic merge, carrying the kind's merge-list table down the recursion."""

    def __init__(self, table: dict[str, ListStrategy]) -> None:
        self.table = table

    # -- maps ---------------------------------------------------------------------------------

    def merge_map(self, original: dict[str, JSON], patch: dict[str, JSON], path: str) -> dict[str, JSON]:
        """Merge ``patch`` into ``original`` (a private copy, mutated and returned)."""
        where = path or "<root>"
        if _DIRECTIVE in patch:
            directive = patch[_DIRECTIVE]
            if directive == "replace":
                rest = {k: v for k, v in patch.items() if k != _DIRECTIVE}
                return self.merge_map({}, rest, path)
            if directive == "delete":
                return {}
            raise PatchError(f"{where}: unknown $patch directive {_short(directive)} in a map")

        patch = dict(patch)
        self._retain_keys(original, patch, where)
        handled = self._set_element_orders(original, patch, path)

        deletions: list[tuple[str, JSON]] = []
        for key, value in patch.items():
            if key in handled:
                continue
            if key.startswith("$"):
                field = self._directive_field(key, _DELETE_PRIMITIVES, where)
                deletions.append((field, value))
                continue
            self._merge_field(original, key, value, path)
        for field, value in deletions:
            self._delete_from_primitive_list(original, field, value, _join(path, field))
        return original

    @staticmethod
    def _directive_field(key: str, prefix: str, where: str) -> str:
        head, sep, field = key.partition("/")
        if head == _DELETE_PRIMITIVES == prefix and sep and field:
            return field
        if head == _SET_ORDER == prefix and sep and field:
            return field
        if head in (_DELETE_PRIMITIVES, _SET_ORDER):
            raise PatchError(f"{where}: malformed directive {key!r}, expected '{head}/<field>'")
        raise PatchError(f"{where}: unknown patch directive {key!r}")

    def _merge_field(self, original: dict[str, JSON], key: str, value: JSON, path: str) -> None:
        sub = _join(path, key)
        if value is None:
            original.pop(key, None)
            return
        strategy = self.table.get(sub)
        if strategy is not None and not isinstance(value, list):
            raise PatchError(f"{sub}: expected a list, got {_json_kind(value)} {_short(value)}")
        current = original.get(key)
        if isinstance(value, dict):
            base_map = current if isinstance(current, dict) else {}
            original[key] = self.merge_map(base_map, value, sub)
        elif isinstance(value, list) and strategy is not None:
            base_list = current if isinstance(current, list) else []
            original[key] = self.merge_list(base_list, value, sub, strategy)[0]
        else:
            original[key] = value

    def _retain_keys(self, original: dict[str, JSON], patch: dict[str, JSON], where: str) -> None:
        if _RETAIN_KEYS not in patch:
            return
        keep = patch.pop(_RETAIN_KEYS)
        if not isinstance(keep, list):
            raise PatchError(f"{where}: $retainKeys must be a list, got {_short(keep)}")
        for key, value in patch.items():
            if value is None or key.startswith((_DELETE_PRIMITIVES, _SET_ORDER)):
                continue
            if not any(_same(key, k) for k in keep):
                raise PatchError(f"{where}: field {key!r} is set by the patch but missing from "
                                 f"$retainKeys {_short(keep)}")
        for key in list(original):
            if not any(_same(key, k) for k in keep):
                del original[key]

    def _delete_from_primitive_list(self, original: dict[str, JSON], field: str, value: JSON,
                                    sub: str) -> None:
        if not isinstance(value, list):
            raise PatchError(f"{sub}: {_DELETE_PRIMITIVES} value must be a list, "
                             f"got {_short(value)}")
        current = original.get(field)
        if current is None:
            return
        if not isinstance(current, list):
            raise PatchError(f"{sub}: {_DELETE_PRIMITIVES} applies to a list, found "
                             f"{_json_kind(current)}")
        _element_kind(current, value)
        if any(isinstance(item, dict) for item in current + value):
            raise PatchError(f"{sub}: {_DELETE_PRIMITIVES} only applies to lists of primitives")
        original[field] = [item for item in current if not any(_same(item, v) for v in value)]

    # -- $setElementOrder ---------------------------------------------------------------------

    def _set_element_orders(self, original: dict[str, JSON], patch: dict[str, JSON],
                            path: str) -> set[str]:
        """Merge each list named by a ``$setElementOrder/<field>`` and put it in that order.

        Returns the patch keys it consumed.
        """
        handled: set[str] = set()
        for key in [k for k in patch if k.startswith(_SET_ORDER)]:
            where = path or "<root>"
            field = self._directive_field(key, _SET_ORDER, where)
            order = patch[key]
            handled.add(key)
            sub = _join(path, field)
            if not isinstance(order, list):
                raise PatchError(f"{sub}: {_SET_ORDER} value must be a list, got {_short(order)}")
            strategy = self.table.get(sub)
            if strategy is None:
                # Go only emits the directive for merging lists; for any other list the
                # list in the patch (if any) simply replaces the live one.
                continue
            found_original = isinstance(original.get(field), list)
            found_patch = field in patch
            patch_value = patch.get(field)
            if found_patch and not isinstance(patch_value, list):
                raise PatchError(f"{sub}: expected a list, got {_json_kind(patch_value)} "
                                 f"{_short(patch_value)}")
            patch_list: list[JSON] = patch_value if isinstance(patch_value, list) else []
            if found_patch:
                self._validate_order(patch_list, order, strategy.merge_key, sub)
            if not found_original and not found_patch:
                continue
            if found_original and not found_patch:
                merged = original[field]
                server_view = original[field]
            else:
                base = original[field] if found_original else []
                merged, server_view = self.merge_list(base, patch_list, sub, strategy)
            key_name = strategy.merge_key
            if key_name:
                for item in list(order) + list(merged):
                    _require_key(item, key_name, sub)
            inside, outside = _partition(merged, order, key_name)
            original[field] = _normalize_order(inside, outside, order, server_view, key_name)
            handled.add(field)
        return handled

    @staticmethod
    def _validate_order(patch_list: list[JSON], order: list[JSON], key: str, sub: str) -> None:
        """Patch elements must appear in ``order`` in the same relative order (Go's
        validatePatchWithSetOrderList); deletions and other directives are ignored."""
        if not order or not patch_list:
            return
        items = patch_list
        if key:
            for item in patch_list:
                if not isinstance(item, dict):
                    raise PatchError(f"{sub}: list element {_short(item)} is not an object")
            items = [i for i in patch_list if i.get(_DIRECTIVE) != "delete"]
        p = o = 0
        while p < len(items) and o < len(order):
            item = items[p]
            if isinstance(item, dict) and _DIRECTIVE in item:
                p += 1
                continue
            if key:
                _require_key(item, key, sub)
                _require_key(order[o], key, sub)
                equal = _same(item[key], order[o][key])
            else:
                equal = _same(item, order[o])
            if equal:
                p += 1
            o += 1
        if p < len(items):
            raise PatchError(f"{sub}: the order in patch list {_short(patch_list)} doesn't match "
                             f"{_SET_ORDER} list {_short(order)}")

    # -- lists --------------------------------------------------------------------------------

    def merge_list(self, original: list[JSON], patch: list[JSON], path: str,
                   strategy: ListStrategy) -> tuple[list[JSON], list[JSON]]:
        """Merge a patch list into a live merging list.

        Returns the merged list and the "server order" a ``$setElementOrder`` uses to place
        the elements only the server has. In Go that is the live slice, which the merge
        edits in place: deleted elements shift the rest left and new elements fill the
        freed slots (up to the live length). We reproduce that view.
        """
        if not original and not patch:
            return [], []
        element = _element_kind(original, patch)
        key = strategy.merge_key
        if element != "object":
            # Primitives merge as an ordered set (a keyed list holding primitives too, as in Go).
            merged: list[JSON] = []
            for item in original + patch:
                if _index(merged, item, "") < 0:
                    merged.append(item)
            inside, outside = _partition(merged, patch, "")
            return _normalize_order(inside, outside, patch, original, ""), original
        if not key:
            raise PatchError(f"{path}: cannot merge a list of objects without a merge key")
        elem_path = f"{path}[]"

        live = list(original)
        backing = list(original)  # the Go slice's array, len(original) slots
        length, aliased = len(backing), True
        additions: list[dict[str, JSON]] = []
        replace = False
        for item in patch:
            if not isinstance(item, dict):
                raise PatchError(f"{path}: list element {_short(item)} is not an object")
            if _DIRECTIVE not in item:
                additions.append(item)
                continue
            directive = item[_DIRECTIVE]
            if directive == "delete":
                if key not in item:
                    raise PatchError(f"{path}: delete directive {_short(item)} does not contain "
                                     f"declared merge key {key!r}")
                # Each delete directive removes the first matching element, so a patch can
                # de-duplicate a list by deleting all but one copy.
                if (i := _index(live, item, key)) >= 0:
                    live.pop(i)
                    if aliased:
                        backing[i:length - 1] = backing[i + 1:length]
                        length -= 1
            elif directive == "replace":
                replace = True
            elif directive == "merge":
                raise PatchError(f"{path}: merging lists cannot yet be specified in the patch")
            else:
                raise PatchError(f"{path}: unknown $patch directive {_short(directive)} in a list")

        if replace:
            merged = []
            for item in additions:
                _require_key(item, key, path)
                merged.append(self.merge_map({}, item, elem_path))
            return merged, backing

        for item in live:
            _require_key(item, key, path)
        server_order = list(live)  # the live list after deletions, before additions
        merged = live
        for item in additions:
            _require_key(item, key, path)
            i = _index(merged, item, key)
            if i >= 0:
                merged[i] = self.merge_map(merged[i], item, elem_path)
            else:
                new = self.merge_map({}, item, elem_path)
                merged.append(new)
                if aliased and length < len(backing):
                    backing[length] = new
                    length += 1
                else:
                    aliased = False
        inside, outside = _partition(merged, additions, key)
        return _normalize_order(inside, outside, additions, server_order, key), backing


# ---------------------------------------------------------------------------------------------
# Dispatch.
# ---------------------------------------------------------------------------------------------

#: Accepted patch type names -> canonical short name.
PATCH_TYPES: dict[str, str] = {
    "strategic": "strategic",
    "application/strategic-merge-patch+json": "strategic",
    "merge": "merge",
    "application/merge-patch+json": "merge",
    "json": "json",
    "application/json-patch+json": "json",
}


def apply_patch(target: JSON, patch: JSON, patch_type: str, kind: str | None = None) -> dict[str, JSON]:
    """Apply ``patch`` of ``patch_type`` to the Kubernetes object ``target``; return the result.

    ``patch_type`` is ``"strategic"``, ``"merge"`` or ``"json"``, or the matching MIME type.
    ``patch`` may also be the raw request body (``str``/``bytes`` of JSON). ``kind`` selects the
    strategic merge schema and defaults to ``target["kind"]``. The result must be an object.
    """
    canonical = None
    if isinstance(patch_type, str):
        canonical = PATCH_TYPES.get(patch_type.split(";")[0].strip().lower())
    if canonical is None:
        raise PatchError(f"unsupported patch type {patch_type!r}; expected one of "
                         f"{', '.join(PATCH_TYPES)}")
    if not isinstance(target, dict):
        raise PatchError(f"target must be a JSON object, got {_json_kind(target)}")
    patch = _parse_if_text(patch)
    appliers: dict[str, Callable[[], JSON]] = {
        "strategic": lambda: strategic_merge_patch(
            target, patch, kind if kind is not None else target.get("kind")),
        "merge": lambda: _object_merge_patch(target, patch),
        "json": lambda: json_patch(target, patch),
    }
    result = appliers[canonical]()
    if not isinstance(result, dict):
        raise PatchError(f"the patched document must be a JSON object, got {_json_kind(result)}")
    return result


def _object_merge_patch(target: dict[str, JSON], patch: JSON) -> JSON:
    if not isinstance(patch, dict):
        raise PatchError(f"a merge patch for an object must be a JSON object, got "
                         f"{_json_kind(patch)}")
    return json_merge_patch(target, patch)
