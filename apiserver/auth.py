"""Bearer-token authentication against a Kubernetes static token file.

The file (``--token-auth-file``, written by ``kplane up``) has one CSV line per token, as
Kubernetes' ``token,user,uid,"group1,group2"``. Users of note: ``admin`` (group system:masters),
``system:kube-scheduler``, ``system:kube-controller-manager`` and ``system:node:<name>`` (group
system:nodes) per kubelet. The file is re-read when an unknown token arrives and the file has
changed, so ``kplane node add`` can add a kubelet's token to a running cluster.
"""

from __future__ import annotations

import csv
import os
import time
from dataclasses import dataclass
from pathlib import Path

from machinery import errors

NODES_GROUP = "system:nodes"
MASTERS_GROUP = "system:masters"
NODE_PREFIX = "system:node:"


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()

    @property
    def node_name(self) -> str | None:
        """The node a kubelet user speaks for (``system:node:N`` in group system:nodes)."""
        if self.name.startswith(NODE_PREFIX) and NODES_GROUP in self.groups:
            return self.name[len(NODE_PREFIX):]
        return None

    @property
    def is_node(self) -> bool:
        return self.node_name is not None


class TokenAuthenticator:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._tokens: dict[str, User] = {}
        self._mtime = 0.0
        self._checked = 0.0
        self._load()

    def _load(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            raise errors.InternalError(f"token file {self.path} does not exist") from None
        tokens: dict[str, User] = {}
        with self.path.open(newline="") as f:
            for row in csv.reader(f):
                if not row or row[0].startswith("#"):
                    continue
                if len(row) < 2:
                    continue
                token, name = row[0].strip(), row[1].strip()
                uid = row[2].strip() if len(row) > 2 else ""
                groups = tuple(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else ()
                tokens[token] = User(name, uid, groups)
        self._tokens, self._mtime = tokens, st.st_mtime

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if now - self._checked < 0.2:
            return
        self._checked = now
        try:
            if self.path.stat().st_mtime != self._mtime:
                self._load()
        except (OSError, errors.ApiError):
            pass

    def authenticate(self, metadata) -> User:
        """The user for a call's metadata; Unauthorized without a valid bearer token."""
        token = None
        for key, value in metadata or ():
            if key == "authorization":
                scheme, _, rest = value.partition(" ")
                if scheme.lower() == "bearer":
                    token = rest.strip()
                break
        if not token:
            raise errors.Unauthorized("Unauthorized: no bearer token")
        user = self._tokens.get(token)
        if user is None:
            self._maybe_reload()
            user = self._tokens.get(token)
        if user is None:
            raise errors.Unauthorized("Unauthorized: invalid bearer token")
        return user
