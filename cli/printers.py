"""kubectl-like output for ``kplane get``: tables per kind, and Kubernetes JSON/YAML.

The columns and cells are ``machinery.printers``' — kubectl's (``kubectl get pods``: NAME READY
STATUS RESTARTS AGE; ``-o wide`` adds IP, NODE, NOMINATED NODE, READINESS GATES; ...) — which the
apiserver's Table responses serve too, so ``kubectl get`` and ``kplane get`` print the same
columns. This module lays them out and prints JSON and YAML.
"""

from __future__ import annotations

import json
from typing import Sequence

import yaml
from google.protobuf.message import Message

from machinery import jsonconv, printers
from machinery.kinds import Kind, object_meta

pod_status = printers.pod_status
node_status = printers.node_status


def table_header(kind: Kind[Message, Message], wide: bool, all_namespaces: bool) -> list[str]:
    cols = printers.header(kind, wide)
    return (["NAMESPACE"] + cols) if all_namespaces and kind.namespaced else cols


def table_row(kind: Kind[Message, Message], obj: Message, wide: bool, all_namespaces: bool) -> list[str]:
    row = printers.cells(kind, obj, wide)
    return ([object_meta(obj).namespace] + row) if all_namespaces and kind.namespaced else row


def format_table(rows: Sequence[Sequence[str]]) -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.ljust(widths[i]) for i, c in enumerate(r[:-1])] + [r[-1]]
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def to_json(obj: Message | dict) -> str:
    return json.dumps(obj if isinstance(obj, dict) else jsonconv.to_dict(obj), indent=4)


def to_yaml(obj: Message | dict) -> str:
    return yaml.safe_dump(obj if isinstance(obj, dict) else jsonconv.to_dict(obj), sort_keys=False)


def without_managed_fields(obj: Message) -> Message:
    """``obj`` without metadata.managedFields: what kubectl's get prints unless
    ``--show-managed-fields``."""
    if not object_meta(obj).managed_fields:
        return obj
    out = type(obj)()
    out.CopyFrom(obj)
    del object_meta(out).managed_fields[:]
    return out


def as_list(items: list[Message]) -> dict:
    return {"apiVersion": "v1", "items": [jsonconv.to_dict(i) for i in items], "kind": "List",
            "metadata": {"resourceVersion": ""}}


def resource_name(kind: Kind, name: str) -> str:
    """kubectl's ``pod/web``, ``priorityclass.scheduling.k8s.io/high``."""
    group = kind.group
    return f"{kind.name.lower()}{'.' + group if group else ''}/{name}"
