"""compose.yaml checked by a real Compose implementation: Debian's docker-compose (which `make
install` installs with apt) or Docker's compose plugin — ``config -q`` parses and validates the
file as ``docker compose up`` would, without a Docker engine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _compose() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


def test_compose_yaml_is_valid_for_a_real_compose_implementation():
    compose = _compose()
    assert compose is not None, "no Compose implementation on this machine: `make install` installs Debian's " \
                                "docker-compose (tools/install_compose.sh)"
    out = subprocess.run([*compose, "--project-directory", str(ROOT), "-f", str(ROOT / "compose.yaml"), "config"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for service in ("etcd", "apiserver", "scheduler", "controller-manager", "kubelet-node-1", "runtime-node-1"):
        assert f"  {service}:" in out.stdout, f"{service} is not a service of compose.yaml"
