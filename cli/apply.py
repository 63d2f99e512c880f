"""``kplane apply -f FILE``: create what is absent, update what exists (docs/cli.md).

All or nothing: every document is parsed and decoded first (malformed YAML, an unknown kind or
field fails before anything is sent), then sent to the server as a dry run (admission and
validation), and only if every document passes are they applied for real. A document that goes
into a Namespace an earlier document of the same apply creates cannot be dry-run there (the
namespace does not exist yet): it is checked as a create in the default namespace instead.

For an existing object, ``spec`` (for kinds without one: every field but metadata and status),
labels and annotations are replaced by the given ones; status, uid and creationTimestamp are
kept; a given metadata.resourceVersion must match. Spec fields the server fills in and users do
not write (a pod's nodeName, priority and preemptionPolicy) are kept when the document omits them.

``--server-side`` sends each document as written to the server's apply (server-side apply under
``--field-manager``, ``kplane`` by default): the server merges it, and a field another manager
owns is a conflict unless ``--force-conflicts``. The dry runs come first as above, and for an
object that exists a server-side dry run too, so a conflict stops the apply before anything is
written.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import yaml
from google.protobuf.message import Message

from cli import printers
from machinery import errors, jsonconv
from machinery.api import core_pb2, scheduling_pb2
from machinery.client import Client
from machinery.kinds import NAMESPACE, Kind, UnknownKindError, for_api_kind, object_meta, spec_of

_SERVER_FILLED_SPEC = {"Pod": ("node_name", "priority", "preemption_policy", "priority_class_name")}


class ApplyError(Exception):
    pass


@dataclass
class Document:
    index: int
    kind: Kind[Message, Message]
    obj: Message
    source: dict[str, Any] = field(default_factory=dict)  # the document as written: what server-side apply sends


@dataclass(frozen=True)
class ServerSide:
    """``--server-side``: apply on the server as ``field_manager``, taking conflicting fields with ``force``."""

    field_manager: str = "kplane"
    force: bool = False


# After a conflict, what the user can do (kubectl says as much).
CONFLICT_HELP = """
Please review the fields above: other field managers own them. To resolve this:
* to manage all of them, run the apply again with --force-conflicts;
* to leave them to their managers, remove them from your manifest;
* to share them, give them the values they have now (you become their manager when the others
  stop applying them)."""


def _read(filename: str) -> str:
    if filename == "-":
        return sys.stdin.read()
    try:
        with open(filename) as f:
            return f.read()
    except OSError as exc:
        raise ApplyError(f"the path \"{filename}\" cannot be read: {exc.strerror}") from None


def load_documents(filename: str) -> list[Document]:
    text = _read(filename)
    try:
        raw = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ApplyError(f"error parsing {filename}: {problem}{at}") from None
    return documents(raw, filename)


def documents(raw: list[Any], filename: str) -> list[Document]:
    """The objects of manifests already read (``List`` documents expanded), each decoded and
    checked; ``filename`` names where they came from in messages."""
    expanded: list[dict] = []
    for d in raw:
        if isinstance(d, dict) and d.get("kind") == "List" and isinstance(d.get("items"), list):
            expanded.extend(d["items"])
        else:
            expanded.append(d)
    if not expanded:
        raise ApplyError(f"no objects passed to apply (is {filename} empty?)")
    docs = []
    for i, d in enumerate(expanded, 1):
        where = f'error validating "{filename}" (document {i})'
        if not isinstance(d, dict):
            raise ApplyError(f"{where}: expected an object, got {type(d).__name__}")
        api_version, kind_name = d.get("apiVersion"), d.get("kind")
        if not kind_name or not api_version:
            raise ApplyError(f"{where}: apiVersion and kind must be set")
        try:
            kind = for_api_kind(str(api_version), str(kind_name))
        except UnknownKindError as exc:
            raise ApplyError(f"{where}: {exc}") from None
        try:
            obj = jsonconv.from_dict(kind.message, d)
        except jsonconv.DecodeError as exc:
            raise ApplyError(f"{where}: {kind.name} in version \"{api_version}\" cannot be handled as a "
                             f"{kind.name}: {exc}") from None
        if not object_meta(obj).name and not object_meta(obj).generate_name:
            raise ApplyError(f"{where}: metadata.name is required")
        docs.append(Document(i, kind, obj, d))
    return docs


def _merged(kind: Kind[Message, Message], existing: Message, wanted: Message) -> Message:
    new = type(existing)()
    new.CopyFrom(existing)
    fields = wanted.DESCRIPTOR.fields_by_name
    new_spec, wanted_spec, src = spec_of(new), spec_of(wanted), spec_of(existing)
    if new_spec is not None and wanted_spec is not None and src is not None:  # the kind has a spec
        new_spec.CopyFrom(wanted_spec)
        for name in _SERVER_FILLED_SPEC.get(kind.name, ()):
            fd = src.DESCRIPTOR.fields_by_name[name]
            absent = not wanted_spec.HasField(name) if fd.has_presence else not getattr(wanted_spec, name)
            if absent and (src.HasField(name) if fd.has_presence else getattr(src, name)):
                setattr(new_spec, name, getattr(src, name))
    else:
        for name in fields:
            if name in ("api_version", "kind", "metadata", "status"):
                continue
            new.ClearField(name)
        for fd, value in wanted.ListFields():
            if fd.name in ("api_version", "kind", "metadata", "status"):
                continue
            if fd.message_type is not None and not fd.is_repeated:
                getattr(new, fd.name).CopyFrom(value)
            elif fd.is_repeated:
                getattr(new, fd.name).extend(value)
            else:
                setattr(new, fd.name, value)
    new_meta, wanted_meta = object_meta(new), object_meta(wanted)
    new_meta.ClearField("labels")
    new_meta.labels.update(wanted_meta.labels)
    new_meta.ClearField("annotations")
    new_meta.annotations.update(wanted_meta.annotations)
    if wanted_meta.resource_version:
        new_meta.resource_version = wanted_meta.resource_version
    return new


async def _apply_one(client: Client, doc: Document, namespace: str, dry_run: bool) -> str:
    rc = client.resource(doc.kind)
    obj = doc.obj
    meta = object_meta(obj)
    if doc.kind.namespaced:
        meta.namespace = meta.namespace or namespace
    else:
        meta.namespace = ""
    existing = None
    if meta.name:
        try:
            existing = await rc.get(meta.name, meta.namespace)
        except errors.NotFound:
            existing = None
    if existing is None:
        if meta.resource_version:
            raise errors.Conflict(f'conflict: {doc.kind.plural} "{meta.name}" does not exist, but the '
                                  f'document gives resourceVersion {meta.resource_version}')
        created = await rc.create(obj, dry_run=dry_run)
        return f"{printers.resource_name(doc.kind, object_meta(created).name)} created"
    new = _merged(doc.kind, existing, obj)
    updated = await rc.update(new, dry_run=dry_run)
    same = object_meta(updated).resource_version == object_meta(existing).resource_version
    return f"{printers.resource_name(doc.kind, meta.name)} {'unchanged' if same else 'configured'}"


def _needs_class_from_this_apply(pod: core_pb2.Pod, classes: dict[str, scheduling_pb2.PriorityClass],
                                 exc: errors.ApiError) -> bool:
    name = pod.spec.priority_class_name
    return bool(name) and name in classes and f"no PriorityClass with name {name} was found" in exc.message


async def _apply_server_side(client: Client, doc: Document, namespace: str, how: ServerSide, dry_run: bool) -> str:
    """One document through the server's apply; the line kubectl prints for it."""
    source = dict(doc.source)
    meta = dict(source.get("metadata") or {})
    if doc.kind.namespaced:
        meta["namespace"] = meta.get("namespace") or namespace
    else:
        meta.pop("namespace", None)
    if not meta.get("name"):
        raise ApplyError(f"document {doc.index}: metadata.name is required: server-side apply cannot use "
                         f"generateName")
    source["metadata"] = meta
    try:
        await client.resource(doc.kind).apply(source, field_manager=how.field_manager, force=how.force,
                                              dry_run=dry_run)
    except errors.Conflict as exc:
        if exc.message.startswith("Apply failed"):
            raise ApplyError(exc.message + CONFLICT_HELP) from None
        raise
    return f"{printers.resource_name(doc.kind, meta['name'])} serverside-applied"


async def _exists(client: Client, doc: Document, namespace: str) -> bool:
    meta = object_meta(doc.obj)
    if not meta.name:
        return False
    try:
        await client.resource(doc.kind).get(meta.name, (meta.namespace or namespace) if doc.kind.namespaced else "")
    except errors.NotFound:
        return False
    return True


async def _dry_run(client: Client, d: Document, default_ns: str, classes: dict[str, scheduling_pb2.PriorityClass],
                   namespaces: set[str]) -> None:
    """A create or update dry run of ``d`` as client-side apply sends it: the Namespace and the
    PriorityClass earlier documents of this apply create count as there."""
    probe = type(d.obj)()
    probe.CopyFrom(d.obj)
    try:
        await _apply_one(client, Document(d.index, d.kind, probe), default_ns, dry_run=True)
    except errors.NotFound as exc:
        ns = object_meta(probe).namespace
        if not d.kind.namespaced or ns not in namespaces or exc.message != f'namespaces "{ns}" not found':
            raise
        # Nothing can exist yet in a namespace this apply creates: the document will be a
        # create; check it as one where a namespace exists.
        object_meta(probe).namespace = "default"
        await client.resource(d.kind).create(probe, dry_run=True)
    except errors.Forbidden as exc:
        pod = d.obj
        if not isinstance(pod, core_pb2.Pod) or not _needs_class_from_this_apply(pod, classes, exc):
            raise
        # The pod's PriorityClass is created by an earlier document of this apply: check the
        # rest of the pod without it, and the priority it states against that class.
        pc = classes[pod.spec.priority_class_name]
        if pod.spec.HasField("priority") and pod.spec.priority != pc.value:
            raise errors.Forbidden(f'pods "{pod.metadata.name}" is forbidden: the integer value of priority '
                                   f'({pod.spec.priority}) must not be provided in pod spec; priority admission '
                                   f'controller computed {pc.value} from the given PriorityClass name') from None
        pod_probe = core_pb2.Pod()
        pod_probe.CopyFrom(pod)
        pod_probe.spec.ClearField("priority_class_name")
        pod_probe.spec.ClearField("priority")
        pod_probe.spec.ClearField("preemption_policy")
        await _apply_one(client, Document(d.index, d.kind, pod_probe), default_ns, dry_run=True)


async def apply(client: Client, docs: list[Document], namespace: str | None, dry_run: bool = False,
                server_side: ServerSide | None = None) -> int:
    default_ns = namespace or client.namespace
    if namespace:
        for d in docs:
            given = object_meta(d.obj).namespace
            if d.kind.namespaced and given and given != namespace:
                raise ApplyError(f'the namespace from the provided object "{given}" does not match the namespace '
                                 f'"{namespace}". You must pass \'--namespace={given}\' to perform this operation.')
    # Every document must pass admission and validation before any is applied.
    classes: dict[str, scheduling_pb2.PriorityClass] = {}
    namespaces: set[str] = set()  # created (or updated) by earlier documents of this apply
    for d in docs:
        if server_side is not None and await _exists(client, d, default_ns):
            # An object that exists: the server's apply merges the document into it, and checks
            # what only it checks (another manager's fields).
            await _apply_server_side(client, d, default_ns, server_side, dry_run=True)
        else:
            await _dry_run(client, d, default_ns, classes, namespaces)
        if isinstance(d.obj, scheduling_pb2.PriorityClass):
            classes[d.obj.metadata.name] = d.obj
        elif d.kind is NAMESPACE:
            namespaces.add(object_meta(d.obj).name)
    if dry_run:
        for d in docs:
            meta = object_meta(d.obj)
            print(f"{printers.resource_name(d.kind, meta.name or meta.generate_name)} (server dry run)")
        return 0
    for d in docs:
        if server_side is not None:
            print(await _apply_server_side(client, d, default_ns, server_side, dry_run=False))
        else:
            print(await _apply_one(client, d, default_ns, dry_run=False))
    return 0
