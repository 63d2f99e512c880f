"""The kubelet's resource checkpoints: allocated and actuated resources per pod and container.

KEP-1287 ("Resource States"): the allocated resources (what the kubelet admitted) and the actuated
resources (what it last passed to the runtime and saw succeed) are persisted locally so a
restarted kubelet re-admits pods at what it had admitted and knows whether a resize still needs
to reach the runtime. One file per state in the checkpoint dir, like Kubernetes'
``allocated_pods_state`` / ``actuated_pods_state``.

Writes are atomic (temp file, fsync, rename, fsync of the directory) and the content carries a
checksum, so a crash mid-write leaves the previous checkpoint intact and a damaged file is
detected: it is logged, moved aside as ``<name>.corrupt-<time>`` and the store starts empty (the
kubelet then recovers from the runtime and the API) — never a crash.

Only ``kubelet.allocation`` writes these files; everyone else asks the allocation manager.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from machinery.logging import get_logger

log = get_logger()

FORMAT_VERSION = 1
ALLOCATED_FILE = "allocated_pods_state"
ACTUATED_FILE = "actuated_pods_state"


@dataclass(frozen=True)
class Resources:
    """A container's requests and limits, as quantity strings keyed by resource name."""

    requests: Mapping[str, str] = field(default_factory=dict)
    limits: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"requests": dict(sorted(self.requests.items())), "limits": dict(sorted(self.limits.items()))}

    @classmethod
    def from_json(cls, doc: dict) -> "Resources":
        return cls(dict(doc.get("requests") or {}), dict(doc.get("limits") or {}))

    @classmethod
    def of(cls, requirements) -> "Resources":
        """From a ResourceRequirements message."""
        return cls(dict(requirements.requests), dict(requirements.limits))


class CorruptCheckpoint(Exception):
    pass


def _checksum(pods: dict) -> str:
    body = json.dumps(pods, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(body).hexdigest()


def read(path: str | os.PathLike) -> dict[str, dict[str, Resources]]:
    """A checkpoint file's content, read only (for tools and tests); CorruptCheckpoint if damaged."""
    return CheckpointStore._decode(Path(path).read_bytes())


class CheckpointStore:
    """``{pod uid: {container name: Resources}}`` backed by one checkpoint file."""

    def __init__(self, directory: str | os.PathLike, name: str):
        self.path = Path(directory) / name
        self._pods: dict[str, dict[str, Resources]] = {}
        self._fragments: dict[str, str] = {}
        self.recovered_from_corruption = False

    # ------------------------------------------------------------ load / save

    def load(self) -> None:
        """Read the checkpoint; a missing file is an empty store, a damaged one is set aside."""
        self._fragments = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            self._pods = {}
            return
        try:
            self._pods = self._decode(raw)
        except CorruptCheckpoint as exc:
            aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
            try:
                os.replace(self.path, aside)
            except OSError:
                aside = self.path
            log.error("checkpoint_corrupt", path=str(self.path), moved_to=str(aside), error=str(exc))
            self._pods = {}
            self.recovered_from_corruption = True

    @staticmethod
    def _decode(raw: bytes) -> dict[str, dict[str, Resources]]:
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise CorruptCheckpoint(f"not JSON: {exc}") from None
        if not isinstance(doc, dict) or doc.get("version") != FORMAT_VERSION or not isinstance(doc.get("pods"), dict):
            raise CorruptCheckpoint("unknown format")
        if doc.get("checksum") != _checksum(doc["pods"]):
            raise CorruptCheckpoint("checksum mismatch")
        try:
            return {uid: {name: Resources.from_json(r) for name, r in containers.items()}
                    for uid, containers in doc["pods"].items()}
        except (AttributeError, TypeError) as exc:
            raise CorruptCheckpoint(f"bad entry: {exc}") from None

    def _fragment(self, uid: str) -> str:
        """A pod's entry in canonical JSON, cached until the pod changes: a save joins them."""
        frag = self._fragments.get(uid)
        if frag is None:
            doc = {name: r.to_json() for name, r in self._pods[uid].items()}
            frag = self._fragments[uid] = json.dumps(uid) + ":" + json.dumps(doc, sort_keys=True, separators=(",", ":"))
        return frag

    def _save(self) -> None:
        # The canonical form of "pods" (what _checksum hashes), built from cached per-pod pieces so
        # a save costs a join, not a re-encoding of every pod.
        for uid in [u for u in self._fragments if u not in self._pods]:
            del self._fragments[uid]
        body = "{" + ",".join(self._fragment(uid) for uid in sorted(self._pods)) + "}"
        checksum = hashlib.sha256(body.encode()).hexdigest()
        data = f'{{"checksum":"{checksum}","pods":{body},"version":{FORMAT_VERSION}}}'.encode()
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    # ------------------------------------------------------------ access

    def get_pod(self, uid: str) -> dict[str, Resources] | None:
        pod = self._pods.get(uid)
        return dict(pod) if pod is not None else None

    def get(self, uid: str, container: str) -> Resources | None:
        return self._pods.get(uid, {}).get(container)

    def set_pod(self, uid: str, containers: Mapping[str, Resources]) -> None:
        """Replace a pod's entry (written at once; a no-op write is skipped)."""
        new = dict(containers)
        if self._pods.get(uid) == new:
            return
        self._pods[uid] = new
        self._fragments.pop(uid, None)
        self._save()

    def set_container(self, uid: str, container: str, resources: Resources) -> None:
        pod = dict(self._pods.get(uid, {}))
        if pod.get(container) == resources:
            return
        pod[container] = resources
        self._pods[uid] = pod
        self._fragments.pop(uid, None)
        self._save()

    def remove_pod(self, uid: str) -> None:
        if self._pods.pop(uid, None) is not None:
            self._save()

    def remove_orphans(self, keep: set[str]) -> list[str]:
        gone = [uid for uid in self._pods if uid not in keep]
        for uid in gone:
            del self._pods[uid]
        if gone:
            self._save()
        return gone

    def pods(self) -> list[str]:
        return list(self._pods)
