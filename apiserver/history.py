"""The cluster's event log: every etcd revision of ``/registry/``, in order (``kplane history``,
docs/cli.md; the ``Cluster/History`` stream, docs/api.md).

Read straight from etcd's history with a watch from ``since`` (so it shows what etcd holds, not
what a cache kept): each put is ADDED (first version) or MODIFIED, each delete is DELETED with
the object's last state; every object carries its revision as resourceVersion. Without
``follow`` the stream ends at the revision current when it was asked for.
"""

from __future__ import annotations

from typing import AsyncIterator

from google.protobuf import any_pb2

from apiserver.etcd import CompactedError, EtcdClient
from machinery import errors
from machinery.api import api_pb2
from machinery.kinds import REGISTRY_PREFIX, object_meta, split_key


def _entry(rev: int, type_: str, key: str, value: bytes) -> api_pb2.HistoryEntry | None:
    parts = split_key(key)
    if parts is None:
        return None
    kind, namespace, name = parts
    obj = kind.message.FromString(value)
    object_meta(obj).resource_version = str(rev)
    packed = any_pb2.Any()
    packed.Pack(obj)
    return api_pb2.HistoryEntry(rev=rev, type=type_, kind=kind.name, namespace=namespace, name=name, object=packed)


async def stream(etcd: EtcdClient, since: int, follow: bool) -> AsyncIterator[api_pb2.HistoryResponse]:
    end = await etcd.current_revision()
    start = max(since, 1)
    if start > end and not follow:
        yield api_pb2.HistoryResponse(revision=end)
        return
    try:
        async for resp in etcd.watch(REGISTRY_PREFIX, start, prev_kv=True, progress_notify=True):
            if resp.created:
                continue
            entries = []
            last = 0
            for e in resp.events:
                rev = e.kv.mod_revision
                last = max(last, rev)
                if e.type == 1:  # DELETE: the last state, at the deletion's revision
                    if not e.HasField("prev_kv"):
                        continue
                    entry = _entry(rev, "DELETED", e.kv.key.decode(), e.prev_kv.value)
                else:
                    entry = _entry(rev, "ADDED" if e.kv.create_revision == rev else "MODIFIED",
                                   e.kv.key.decode(), e.kv.value)
                if entry is not None:
                    entries.append(entry)
            last = max(last, resp.header.revision if not resp.events else last)
            if entries or follow:
                yield api_pb2.HistoryResponse(entries=entries, revision=last)
            if not follow and last >= end:
                return
    except CompactedError as exc:
        raise errors.Gone(f"history before revision {exc.compact_revision} has been compacted; "
                          f"use --since {exc.compact_revision}") from None
