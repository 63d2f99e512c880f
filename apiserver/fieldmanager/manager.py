"""metadata.managedFields for every write, and server-side apply: Kubernetes' field manager
(k8s.io/apimachinery's managedfields and structured-merge-diff's merge.Updater).

- ``FieldManager``: a write runs one of two operations, ``FieldManager.update`` (with
  ``created`` for a create) or ``FieldManager.apply``;
- ``_Entry``: one manager's entry; ``decode`` / ``encode`` read and write metadata.managedFields;
- ``_STRIPPED`` and ``FieldManager._ignored``: the fields no manager owns;
- ``conflict_error``: an Apply's conflicts, as Kubernetes words them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from apiserver.fieldmanager import schema
from apiserver.fieldmanager.fieldpath import FieldSet, FieldsV1Error, Path, field, path_string
from apiserver.fieldmanager.typed import (
    ABSENT,
    TypeError_,
    compare,
    ensure_named_fields_are_members,
    field_set,
    merge,
    remove_items,
    undeclared,
)
from machinery import errors, jsonconv, timeutil
from machinery.api import meta_pb2
from machinery.kinds import Kind, L, M, object_meta
from machinery.logging import get_logger
from machinery.memo import Memo

log = get_logger()

APPLY, UPDATE = "Apply", "Update"
FIELDS_V1 = "FieldsV1"
MAX_MANAGER_LENGTH = 128  # Kubernetes' FieldManagerMaxLength
MAX_UPDATE_MANAGERS = 10  # Kubernetes' DefaultMaxUpdateManagers: older Update entries merge into one
ANCIENT_CHANGES = "ancient-changes"

# Never anyone's (Kubernetes' stripMetaManager): exact paths, what is below them may be owned.
# No manager owns the object's identity and system metadata (apiVersion, kind, name, namespace,
# uid, resourceVersion, generation, creationTimestamp, managedFields).
_STRIPPED = FieldSet.of(
    (field("apiVersion"),), (field("kind"),), (field("metadata"),),
    *((field("metadata"), field(name)) for name in (
        "name", "namespace", "creationTimestamp", "selfLink", "uid", "generation", "managedFields",
        "resourceVersion")),
)
_STATUS = FieldSet.of((field("status"),))
_ALWAYS_PRESENT = frozenset({"metadata", "spec", "status"})


@dataclass(frozen=True)
class Manager:
    """Who writes: a field manager's name, and the subresource written ("" the object itself)."""

    name: str
    subresource: str = ""


@dataclass(frozen=True)
class _Identity:
    """Kubernetes' manager identifier: an entry without its fields and time (an Apply entry
    without its API version either, so an applier is one entry whatever version it applies)."""

    manager: str
    operation: str
    api_version: str
    subresource: str

    def display(self) -> str:
        """As a conflict message names it: ``"a"``, ``"kubectl-edit" using v1``,
        ``"kubectl" with subresource "scale" using apps/v1``."""
        text = json.dumps(self.manager, ensure_ascii=False)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == UPDATE:
            text += f" using {self.api_version}"
        return text


@dataclass
class _Entry:
    """One managedFields entry, under its ``_Identity``: every entry is a manager's identity — its
    name, the operation (``Apply`` or ``Update``), the API version for an Update, the subresource —
    with the fields it owns and the time it last changed the object."""

    fields: FieldSet
    api_version: str
    time: str = ""
    raw: str = ""  # the fieldsV1 text it was read from, reused while the set is unchanged
    raw_fields: FieldSet | None = None


Managed = dict[_Identity, _Entry]


def validate_manager(name: str, path: str = "fieldManager") -> list[errors.FieldError]:
    """Kubernetes' ValidateFieldManager: at most 128 bytes, printable characters only."""
    errs: list[errors.FieldError] = []
    if len(name.encode()) > MAX_MANAGER_LENGTH:
        errs.append(errors.FieldError("TooLong", path, f"may not be more than {MAX_MANAGER_LENGTH} bytes"))
    for i, ch in enumerate(name):
        if not ch.isprintable():
            errs.append(errors.invalid(path, name, f"invalid character {ch!r} (at position {i})"))
    return errs


def manager_from_user_agent(user_agent: str) -> str:
    """Kubernetes' prefixFromUserAgent: the User-Agent up to its first "/", printable characters
    only, at most 128 bytes (``kubectl/v1.32.4 (linux/amd64) ...`` is ``kubectl``)."""
    prefix = user_agent.split("/", 1)[0]
    if prefix.isprintable() and len(prefix) <= MAX_MANAGER_LENGTH and prefix.isascii():
        return prefix  # the usual case, without the walk below
    out = ""
    for ch in user_agent.split("/", 1)[0]:
        if not ch.isprintable():
            continue
        if len((out + ch).encode()) > MAX_MANAGER_LENGTH:
            break
        out += ch
    return out


# ---------------------------------------------------------------- managedFields <-> entries


def decode(kind: Kind[M, L], obj: M) -> Managed:
    """The entries of ``obj``'s metadata.managedFields; Invalid (Kubernetes' ValidateManagedFields
    and a fieldsV1 that is no field set) names the entry."""
    out: Managed = {}
    bad: list[errors.FieldError] = []
    for i, e in enumerate(object_meta(obj).managed_fields):
        where = f"metadata.managedFields[{i}]"
        if e.operation not in (APPLY, UPDATE):
            bad.append(errors.invalid(f"{where}.operation", e.operation, "must be `Apply` or `Update`"))
            continue
        if e.fields_type and e.fields_type != FIELDS_V1:
            bad.append(errors.invalid(f"{where}.fieldsType", e.fields_type, "must be `FieldsV1`"))
            continue
        bad.extend(validate_manager(e.manager, f"{where}.manager"))
        try:
            fields = _parsed(e.fields_v1)
        except (ValueError, FieldsV1Error) as exc:
            bad.append(errors.invalid(f"{where}.fieldsV1", e.fields_v1, str(exc)))
            continue
        identity = _Identity(e.manager, e.operation, e.api_version if e.operation == UPDATE else "", e.subresource)
        known = out.get(identity)
        if known is not None:
            known.fields = known.fields.union(fields)
            known.raw, known.raw_fields = "", None
            continue
        out[identity] = _Entry(fields, e.api_version, e.time, e.fields_v1, fields)
    if bad:
        raise errors.Invalid.of(kind.name, object_meta(obj).name, bad)
    return out


# Above the Leases of 5,000 nodes, each its own text (its owner reference names its Node's uid) and
# renewed every 10 s: a smaller memo is swept through by them and misses every time.
_PARSED: Memo[str, FieldSet] = Memo("apiserver.fieldmanager.parsed_fields", 16384)


def _parsed(text: str) -> FieldSet:
    """The set a fieldsV1 text encodes, remembered: objects made alike (a ReplicaSet's pods, a
    kubelet's status writes) share their sets, and sets are never changed once built."""
    fields = _PARSED.get(text)
    if fields is None:
        fields = FieldSet.from_fields_v1(json.loads(text)) if text else FieldSet()
        _PARSED.put(text, fields)
    return fields


_CREATED: Memo[bytes, tuple[meta_pb2.ManagedFieldsEntry, ...]] = Memo("apiserver.fieldmanager.created_fields", 1024)


def _create_shape(kind: Kind[M, L], requested: M, manager: Manager) -> bytes:
    """What the fields a create owns depend on, and nothing else: the request with what no manager
    owns cleared (name, namespace, uid, resourceVersion, generation, creationTimestamp) and its
    values blanked (``_blank_values``), with the kind and the manager. Two requests of one shape
    own the same fields."""
    out = type(requested)()
    out.CopyFrom(requested)
    meta = object_meta(out)
    for name in ("name", "namespace", "uid", "resource_version", "generation", "creation_timestamp"):
        meta.ClearField(name)
    _blank_values(out)
    head = f"{kind.plural}\0{manager.name}\0{manager.subresource}\0".encode()
    return head + out.SerializeToString(deterministic=True)


def _blank_values(msg: Message) -> None:
    """Every set string and integer outside lists made one value ("-", 1), in place: whether a
    scalar is there decides what a create owns, never its value (an Event's message, a pod's
    annotations, a label's value), so requests that differ only there share their shape. Lists
    are left as they are (an item's key values are its path: a container's name), as are
    protobuf Structs (kept whole) and zero values (a set ``priority: 0`` stays 0)."""
    for fd, value in msg.ListFields():
        if fd.message_type is not None and fd.message_type.full_name in jsonconv.OPAQUE_TYPES:
            continue
        if fd.is_repeated:
            entry = fd.message_type
            if entry is None or not entry.GetOptions().map_entry:
                continue  # a list
            value_fd = entry.fields_by_name["value"]
            if value_fd.message_type is None:
                for k in list(value):
                    value[k] = _blank(value_fd.type, value[k])
            elif value_fd.message_type.full_name not in jsonconv.OPAQUE_TYPES:
                for k in value:
                    _blank_values(value[k])
        elif fd.message_type is not None:
            _blank_values(value)
        else:
            setattr(msg, fd.name, _blank(fd.type, value))


def _blank(field_type: int, value: Any) -> Any:
    if not value or isinstance(value, bool):
        return value
    if field_type == FieldDescriptor.TYPE_STRING:
        return "-"
    if isinstance(value, int):
        return 1
    return value


def _time_order(entry: _Entry) -> str:
    return entry.time or ""


def encode(managed: Managed, obj: Message) -> None:
    """Write ``managed`` into ``obj``'s metadata.managedFields, in Kubernetes' order (Apply before
    Update, then by time, manager, API version, subresource)."""
    meta = object_meta(obj)
    del meta.managed_fields[:]
    ordered = sorted(managed.items(), key=lambda kv: (kv[0].operation, _time_order(kv[1]), kv[0].manager,
                                                      kv[1].api_version, kv[0].subresource))
    for identity, entry in ordered:
        if entry.fields.empty():
            continue
        raw = entry.raw if entry.raw and entry.raw_fields is entry.fields else entry.fields.to_json()
        if raw is not entry.raw:
            _PARSED.setdefault(raw, entry.fields)
        meta.managed_fields.add(manager=identity.manager, operation=identity.operation,
                                api_version=entry.api_version, time=entry.time, fields_type=FIELDS_V1,
                                fields_v1=raw, subresource=identity.subresource)


def _differing(a: Message, b: Message, left: dict[str, Any], right: dict[str, Any], skip: str = "") -> None:
    """Fill ``left`` and ``right`` with the Kubernetes JSON of the fields of ``a`` and ``b`` (two
    messages of one type, both set) that differ, and only those: a message set on both sides is
    narrowed the same way, anything else is printed whole. Equal fields add, change and remove
    nothing, so comparing what is left finds what comparing the whole objects finds, and protobuf
    tells equal fields apart without printing them."""
    descriptor = a.DESCRIPTOR
    fields = jsonconv.fields_of(descriptor)
    for fd in descriptor.fields:
        if fd.name == skip:
            continue
        va, vb = getattr(a, fd.name), getattr(b, fd.name)
        f = fields[fd.name]
        if f.message is not None and not fd.is_repeated:  # a singular message field
            has_a, has_b = a.HasField(fd.name), b.HasField(fd.name)
            if has_a == has_b and (not has_a or va == vb):
                continue
            if has_a and has_b:
                sub_left: dict[str, Any] = {}
                sub_right: dict[str, Any] = {}
                _differing(va, vb, sub_left, sub_right)
                left[f.json_name], right[f.json_name] = sub_left, sub_right
                continue
        elif va == vb and (not fd.has_presence or fd.is_repeated or a.HasField(fd.name) == b.HasField(fd.name)):
            continue
        lv = jsonconv.field_json(a, fd, jsonconv.KUBERNETES_ALWAYS)
        rv = jsonconv.field_json(b, fd, jsonconv.KUBERNETES_ALWAYS)
        if lv is not jsonconv.MISSING and rv is not jsonconv.MISSING and lv == rv:
            continue
        if lv is not jsonconv.MISSING:
            left[f.json_name] = lv
        if rv is not jsonconv.MISSING:
            right[f.json_name] = rv


def _without_managed_fields(meta: meta_pb2.ObjectMeta) -> meta_pb2.ObjectMeta:
    out = meta_pb2.ObjectMeta()
    out.CopyFrom(meta)
    del out.managed_fields[:]
    return out


def _cleared(obj: Message) -> bool:
    """A request's ``managedFields: [{}]``: Kubernetes' way to strip them."""
    entries = object_meta(obj).managed_fields
    return len(entries) == 1 and entries[0] == meta_pb2.ManagedFieldsEntry()


def _cap_updates(managed: Managed) -> None:
    """Kubernetes' capManagersManager: beyond 10 Update entries, the oldest are merged into an
    ``ancient-changes`` entry (one per API version)."""
    oldest_first = sorted((kv for kv in managed.items() if kv[0].operation == UPDATE
                           and kv[0].manager != ANCIENT_CHANGES), key=lambda kv: _time_order(kv[1]))
    while sum(1 for i in managed if i.operation == UPDATE) > MAX_UPDATE_MANAGERS and oldest_first:
        identity, entry = oldest_first.pop(0)
        del managed[identity]
        bucket = _Identity(ANCIENT_CHANGES, UPDATE, entry.api_version, "")
        known = managed.get(bucket)
        managed[bucket] = _Entry(entry.fields if known is None else known.fields.union(entry.fields),
                                 entry.api_version, entry.time)


# ---------------------------------------------------------------- the field manager


class FieldManager:
    """Records field ownership on the writes of every kind, and applies configurations.

    A write runs one of two operations: an Update (``update``, ``created``) or an Apply (``apply``).
    """

    def __init__(self, now: Callable[[], str] = timeutil.rfc3339):
        self._now = now

    @staticmethod
    def _as_json(obj: Message) -> dict[str, Any]:
        """The object as its fields are compared: Kubernetes JSON without managedFields."""
        d = jsonconv.to_dict(obj, jsonconv.KUBERNETES_ALWAYS)
        meta = d.get("metadata")
        if isinstance(meta, dict) and "managedFields" in meta:
            d["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
        return d

    @classmethod
    def _changed_json(cls, old: Message, new: Message) -> tuple[dict[str, Any], dict[str, Any]]:
        """The two objects as compared, reduced to the top-level fields that differ: the others
        can add, change or remove nothing, and a status write then converts the status alone."""
        left: dict[str, Any] = {}
        right: dict[str, Any] = {}
        for fd in new.DESCRIPTOR.fields:
            if fd.message_type is None or fd.is_repeated:
                if getattr(old, fd.name) != getattr(new, fd.name):
                    whole_left, whole_right = cls._as_json(old), cls._as_json(new)
                    changed = {k for k in whole_left.keys() | whole_right.keys()
                               if whole_left.get(k, ABSENT) != whole_right.get(k, ABSENT)}
                    return ({k: v for k, v in whole_left.items() if k in changed},
                            {k: v for k, v in whole_right.items() if k in changed})
                continue
            a, b = getattr(old, fd.name), getattr(new, fd.name)
            has_a, has_b = old.HasField(fd.name), new.HasField(fd.name)
            if has_a and has_b:
                if a == b:
                    continue
                sub_left: dict[str, Any] = {}
                sub_right: dict[str, Any] = {}
                _differing(a, b, sub_left, sub_right, "managed_fields" if fd.name == "metadata" else "")
                if sub_left or sub_right:
                    left[fd.json_name], right[fd.json_name] = sub_left, sub_right
                continue
            if fd.name == "metadata" and (a.managed_fields or b.managed_fields):
                a, b = _without_managed_fields(a), _without_managed_fields(b)
            if has_a == has_b and a == b:
                continue
            always = fd.name in _ALWAYS_PRESENT  # Go structs, printed even when empty
            if has_a or always:
                left[fd.json_name] = jsonconv.to_dict(a, jsonconv.KUBERNETES_ALWAYS)
            if has_b or always:
                right[fd.json_name] = jsonconv.to_dict(b, jsonconv.KUBERNETES_ALWAYS)
        return left, right

    @staticmethod
    def _baseline(kind: Kind[M, L], atom: schema.MapType) -> dict[str, Any]:
        """What a create is compared with: an empty object of the kind as Go prints it (metadata,
        spec and status present, the spec's required lists null)."""
        out: dict[str, Any] = {}
        for name in ("metadata", "spec", "status"):
            t = atom.fields.get(name)
            if isinstance(t, schema.MapType):
                out[name] = schema.zero(t) if name == "spec" else {}
        return out

    @staticmethod
    def _ignored(kind: Kind[M, L], subresource: str) -> FieldSet | None:
        """The fields a write of ``subresource`` never owns: a kind's status through the object.

        For a kind with a status subresource no manager owns the status through the object, nor its
        spec through the status (the strategies reset them)."""
        return _STATUS if not subresource and kind.has_status else None

    # ------------------------------------------------------------ Update

    def created(self, kind: Kind[M, L], requested: M, obj: M, manager: Manager,
                default: Callable[[Kind[M, L], M], M]) -> None:
        """Record in ``obj`` that ``manager`` created it by the request ``requested``, as
        ``default`` (the decoder's defaulting) makes it, before admission: what admission and the
        strategy add is nobody's.

        Objects made alike — a ReplicaSet's pods, a client's burst of creates from one template,
        the Events of one reason — own the same fields: what a create owns is remembered by the
        defaulted request's shape (``_create_shape``; defaulted first, as a default can depend on
        a value: a Deployment's rollingUpdate on its strategy's type), and a create of a known
        shape only stamps the time."""
        meta = object_meta(obj)
        del meta.managed_fields[:]
        defaulted = default(kind, requested)
        shape = None if object_meta(defaulted).managed_fields else _create_shape(kind, defaulted, manager)
        entries = _CREATED.get(shape) if shape is not None else None
        if entries is None:
            self.update(kind, None, defaulted, manager)
            entries = tuple(meta_pb2.ManagedFieldsEntry(
                manager=e.manager, operation=e.operation, api_version=e.api_version, fields_type=e.fields_type,
                fields_v1=e.fields_v1, subresource=e.subresource) for e in object_meta(defaulted).managed_fields)
            if shape is not None:
                _CREATED.put(shape, entries)
        now = self._now()
        for e in entries:
            added = meta.managed_fields.add()
            added.CopyFrom(e)
            added.time = now

    def update(self, kind: Kind[M, L], old: M | None, new: M, manager: Manager) -> None:
        """Record in ``new`` that ``manager`` wrote it over ``old`` (None: created it). A value the
        schema cannot key (an item without its key field) leaves ``new`` without managedFields, as
        Kubernetes' UpdateNoErrors does.

        An Update is a create, an update, a patch, a write of a subresource, whichever transport: the
        fields the write added or changed are the writer's, taken from whoever owned them; removed
        fields are nobody's. Nothing changed: nothing moves and the time stays. A request that
        carries managedFields of its own replaces them first (``[{}]`` clears them), else the stored
        ones count.
        """
        try:
            self._update(kind, old, new, manager)
        except TypeError_ as exc:
            log.warning("managed_fields_dropped", kind=kind.name, name=object_meta(new).name, error=str(exc))
            del object_meta(new).managed_fields[:]

    def _update(self, kind: Kind[M, L], old: M | None, new: M, manager: Manager) -> None:
        if _cleared(new):
            managed: Managed = {}
        elif object_meta(new).managed_fields and not manager.subresource:
            managed = decode(kind, new)
        else:
            managed = decode(kind, old) if old is not None else {}
        atom = schema.of_kind(kind)
        if old is None:
            diff = compare(self._baseline(kind, atom), self._as_json(new), atom)
        else:
            diff = compare(*self._changed_json(old, new), atom)
        ignored = self._ignored(kind, manager.subresource)
        if ignored is not None:
            diff = diff.excluding(ignored)
        changed = diff.changed()
        for entry in managed.values():
            entry.fields = entry.fields.difference(changed).difference(diff.removed)
        mine = changed.difference(_STRIPPED)
        if mine:
            identity = _Identity(manager.name, UPDATE, kind.api_version, manager.subresource)
            known = managed.get(identity)
            fields = mine if known is None else known.fields.union(mine)  # known's, if mine adds nothing
            managed[identity] = _Entry(fields, kind.api_version, self._now())
        for identity in [i for i, e in managed.items() if e.fields.empty()]:
            del managed[identity]
        _cap_updates(managed)
        encode(managed, new)

    # ------------------------------------------------------------ Apply

    def apply(self, kind: Kind[M, L], live: M | None, config: dict[str, Any], manager: Manager, force: bool,
              prepare: Callable[[M], M]) -> M:
        """``config`` applied by ``manager`` to ``live`` (None: the object does not exist yet):
        merged, pruned of what the manager no longer applies, made an object, ``prepare``d (the
        kind's strategy: defaults, validation), checked for conflicts with the other managers;
        the result carries the new managedFields.

        An Apply is a ``PATCH`` with ``application/apply-patch+yaml`` or a gRPC ``Patch`` of type
        ``apply``: the applied configuration is merged into the object by the schema
        (``typed.merge``); the fields it sets are the applier's; fields the applier set last time and
        leaves out now are removed unless another manager owns them (``_prune``); a field it changes
        that another manager owns is a conflict, refused with 409 unless ``force``, which takes the
        field over. The applier owning exactly what it applied, a field others set to the same value
        is shared.
        """
        atom = schema.of_kind(kind)
        given = config.get("metadata")
        meta: dict[str, Any] = given if isinstance(given, dict) else {}
        group, _, version = kind.api_version.rpartition("/")
        where = (f"failed to create typed patch object ({meta.get('namespace') or ''}/{meta.get('name') or ''}; "
                 f"{group}/{version}, Kind={kind.name})")
        unknown = undeclared(config, atom)
        if unknown:
            raise errors.BadRequest(f"{where}: " + "\n".join(f"{path_string(p)}: field not declared in schema"
                                                            for p in unknown))
        try:
            applied = field_set(config, atom, unique=True).difference(_STRIPPED)
        except TypeError_ as exc:
            raise errors.BadRequest(f"{where}: {exc}") from None
        ignored = self._ignored(kind, manager.subresource)
        if manager.subresource == "status":
            applied = FieldSet.of(*[p for p in applied.paths() if p[0] == field("status")])
        elif ignored is not None:
            applied = applied.recursive_difference(ignored)
        managed = decode(kind, live) if live is not None else {}
        identity = _Identity(manager.name, APPLY, "", manager.subresource)
        previous = managed.get(identity)
        current = self._as_json(live) if live is not None else {}
        before = current if live is not None else self._baseline(kind, atom)
        try:
            merged = merge(current, config, atom)
            managed[identity] = _Entry(applied, kind.api_version, previous.time if previous else "")
            if previous is not None and previous.fields:
                merged = self._prune(merged, previous.fields, managed, atom)
        except TypeError_ as exc:
            raise errors.BadRequest(f"the applied configuration cannot be merged into the {kind.name}: {exc}") from None
        try:
            obj = jsonconv.from_dict(kind.message, merged)
        except jsonconv.DecodeError as exc:
            raise errors.BadRequest(f'{kind.name} in version "{kind.api_version}" cannot be handled as a '
                                    f"{kind.name}: {exc}") from None
        del object_meta(obj).managed_fields[:]
        result = prepare(obj)
        after = self._as_json(result)
        try:
            diff = compare(before, after, atom)
        except TypeError_ as exc:
            raise errors.BadRequest(f"the applied configuration cannot be merged into the {kind.name}: {exc}") from None
        if ignored is not None:
            diff = diff.excluding(ignored)
        changed = diff.changed()
        conflicts: list[tuple[_Identity, Path]] = []
        for other, entry in managed.items():
            if other == identity:
                continue
            conflicts.extend((other, p) for p in entry.fields.intersection(changed).paths())
        if conflicts and not force:
            raise conflict_error(conflicts)
        for other in list(managed):
            if other != identity:
                managed[other].fields = managed[other].fields.difference(changed).difference(diff.removed)
        if live is None or before != after:
            managed[identity].time = self._now()
        for other in [i for i, e in managed.items() if e.fields.empty()]:
            del managed[other]
        _cap_updates(managed)
        encode(managed, result)
        return result

    @staticmethod
    def _prune(merged: Any, last: FieldSet, managed: Managed, atom: schema.Atom) -> Any:
        """Remove from ``merged`` what the applier owned last time and no manager owns now (the
        applier's new set included) — structured-merge-diff's prune, with its struct fields made
        members so that a struct the applier alone filled goes with its content."""
        present = ensure_named_fields_are_members(field_set(merged, atom), atom)
        owned = FieldSet()
        for entry in managed.values():
            owned = owned.union(entry.fields)
        owned = ensure_named_fields_are_members(owned, atom)
        gone = ensure_named_fields_are_members(last, atom).intersection(present).difference(owned)
        return remove_items(merged, gone, atom) if gone else merged


def conflict_error(conflicts: Iterable[tuple[_Identity, Path]]) -> errors.ApplyConflict:
    """Kubernetes' NewConflictError: ``Apply failed with 1 conflict: conflict with "a": .spec.x``,
    or, for several, grouped by manager (sorted): ``Apply failed with 2 conflicts: conflicts with
    "a":\\n- .spec.x\\n- .spec.y``; a cause per field."""
    items = list(conflicts)
    causes = [(f"conflict with {who.display()}", path_string(p)) for who, p in items]
    if len(items) == 1:
        who, p = items[0]
        return errors.ApplyConflict(f"Apply failed with 1 conflict: conflict with {who.display()}: {path_string(p)}",
                                    causes)
    by_manager: dict[str, list[str]] = {}
    for who, p in items:
        by_manager.setdefault(who.display(), []).append(path_string(p))
    lines: list[str] = []
    for who_text in sorted(by_manager):
        lines.append(f"conflicts with {who_text}:")
        lines.extend(f"- {p}" for p in by_manager[who_text])
    return errors.ApplyConflict(f"Apply failed with {len(items)} conflicts: " + "\n".join(lines), causes)
