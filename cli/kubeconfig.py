"""``<data-dir>/kubeconfig``: how kubectl and the official clients reach the cluster's REST API.

One cluster (``kplane``: the apiserver's HTTPS address and the cluster CA, inline), one user
(``admin``, with its bearer token from tokens.csv, group system:masters), one context
(``kplane``, namespace default) made current. ``kplane up`` writes it (``export
KUBECONFIG=<path>`` then makes kubectl use it); it is rewritten when the address changes.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

KUBECONFIG_FILE = "kubeconfig"
CLUSTER = CONTEXT = "kplane"
USER = "admin"


def render(server: str, ca_pem: bytes, token: str, user: str = USER) -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CLUSTER, "cluster": {"server": server,
                                                   "certificate-authority-data": base64.b64encode(ca_pem).decode()}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CLUSTER, "user": user, "namespace": "default"}}],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(data_dir: Path | str, server: str, ca_cert: Path, token: str, user: str = USER,
          name: str = KUBECONFIG_FILE) -> Path:
    """Write the kubeconfig (mode 0600: it holds a token) and return its path."""
    path = Path(data_dir) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(server, ca_cert.read_bytes(), token, user))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path
