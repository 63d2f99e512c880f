"""``<data-dir>/kubeconfig``: how kubectl and the official clients reach the cluster's REST API.

One cluster (``kplane``: the apiserver's HTTPS address and the cluster CA, inline), one user
(``admin``, with its bearer token from tokens.csv, group system:masters), one context
(``kplane``, namespace default) made current. With several apiservers, ``kplane`` is the first
and each other one has its own cluster and context, ``kplane-apiserver-2`` ...: kubectl does
not fail over, so ``kubectl --context kplane-apiserver-2`` picks one (docs/cli.md). ``kplane up`` writes it (``export
KUBECONFIG=<path>`` then makes kubectl use it); it is rewritten when the address changes.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path

import yaml

KUBECONFIG_FILE = "kubeconfig"
CLUSTER = CONTEXT = "kplane"
USER = "admin"


def render(server: str, ca_pem: bytes, token: str, user: str = USER,
           others: Sequence[tuple[str, str]] = ()) -> str:
    """``others``: (apiserver name, server URL) of the apiservers after the first."""
    ca = base64.b64encode(ca_pem).decode()
    names = [(CLUSTER, server)] + [(f"{CLUSTER}-{name}", url) for name, url in others]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": n, "cluster": {"server": url, "certificate-authority-data": ca}} for n, url in names],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": user, "namespace": "default"}} for n, _ in names],
        "current-context": CONTEXT,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(data_dir: Path | str, server: str, ca_cert: Path, token: str, user: str = USER,
          name: str = KUBECONFIG_FILE, others: Sequence[tuple[str, str]] = ()) -> Path:
    """Write the kubeconfig (mode 0600: it holds a token) and return its path."""
    path = Path(data_dir) / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(server, ca_cert.read_bytes(), token, user, others))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)
    return path
