"""``make image``: the ``kplane:dev`` image, built from Debian's packages and PyPI only (no registry).

Two layers, each rebuilt only when its inputs change (a content hash, kept as an image label):

1. the base, ``kplane-base:<hash>``: a Debian bookworm root filesystem with Python 3.11, its venv
   module and etcd-server, made by ``mmdebstrap`` from the machine's Debian mirror and loaded
   with ``docker import`` (Debian's own packages, as the registry Dockerfile's ``debian`` image
   would carry them);
2. ``kplane:dev``: on that base, a venv at /opt/kplane/venv with kplane and its dependencies,
   installed from wheels ``pip wheel`` fetched on this machine (tools/image/Dockerfile.offline).

The registry Dockerfile at the repository root builds the same layout from ``debian:bookworm-slim``.
``python tools/image.py [--tag kplane:dev] [--print-hash]``; exit 1 with one line on failure.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUITE = "bookworm"
# What the base carries: what `make install` takes from Debian for kplane (python3, etcd-server).
BASE_PACKAGES = ("python3", "python3-venv", "etcd-server", "ca-certificates")
OFFLINE_DOCKERFILE = ROOT / "tools" / "image" / "Dockerfile.offline"
LABEL = "dev.kplane.inputs"
# What goes into the wheel (pyproject.toml's packages) and so into the image.
SOURCES = ("pyproject.toml", "README.md", "machinery", "apiserver", "scheduler", "controllers", "kubelet", "cli",
           "bench")


class ImageError(Exception):
    """The image could not be built: one line for the user."""


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, text=True, capture_output=True, **kw)


def _mirror() -> str:
    """The Debian mirror apt uses here (deb822 or one-line sources), else deb.debian.org."""
    for path in (Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")):
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            words = line.split()
            if words[:1] == ["URIs:"] and len(words) > 1 and not words[1].endswith("-security"):
                return words[1]
            if words[:1] == ["deb"] and len(words) > 2 and "security" not in words[1]:
                return words[1]
    return "http://deb.debian.org/debian"


def base_hash() -> str:
    h = hashlib.sha256(f"{SUITE}\n{' '.join(BASE_PACKAGES)}\n".encode())
    return h.hexdigest()[:16]


def _tracked(paths: tuple[str, ...]) -> list[Path]:
    out = _run(["git", "ls-files", "-z", "--", *paths], cwd=ROOT)
    if out.returncode == 0 and out.stdout:
        return sorted(ROOT / p for p in out.stdout.split("\0") if p)
    files: list[Path] = []  # not a git checkout (an unpacked release): every file below them
    for p in paths:
        q = ROOT / p
        files += sorted(f for f in q.rglob("*") if f.is_file() and "__pycache__" not in f.parts) if q.is_dir() else [q]
    return files


def inputs_hash() -> str:
    """What decides ``kplane:dev``: the base, the offline Dockerfile and every source file of the wheel."""
    h = hashlib.sha256(base_hash().encode())
    for f in [OFFLINE_DOCKERFILE, *_tracked(SOURCES)]:
        if f.is_file():
            h.update(str(f.relative_to(ROOT)).encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _docker() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise ImageError("no docker command: install Debian's docker.io (apt-get install docker.io)")
    if _run([docker, "info", "--format", "{{.ServerVersion}}"]).returncode != 0:
        raise ImageError("the Docker engine is not running (start dockerd, or `sh tools/dockerd.sh`)")
    return docker


def _label_of(docker: str, image: str) -> str | None:
    out = _run([docker, "image", "inspect", "--format", f'{{{{ index .Config.Labels "{LABEL}" }}}}', image])
    return out.stdout.strip() if out.returncode == 0 else None


def build_base(docker: str) -> str:
    """``kplane-base:<hash>``, made with mmdebstrap unless it exists."""
    tag = f"kplane-base:{base_hash()}"
    if _run([docker, "image", "inspect", tag]).returncode == 0:
        return tag
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        subprocess.run(["sh", str(ROOT / "tools" / "apt_install.sh"), "mmdebstrap"], check=False)
        mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise ImageError("mmdebstrap is not installed and apt could not install it")
    print(f"building {tag}: Debian {SUITE} with {', '.join(BASE_PACKAGES)} (mmdebstrap)", flush=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": "1700000000"}  # reproducible file times
    strap = subprocess.Popen([mmdebstrap, "--variant=apt", "--mode=root", "--quiet",
                              "--include=" + ",".join(BASE_PACKAGES),
                              "--customize-hook=rm -rf $1/var/lib/apt/lists/* $1/var/cache/apt/*",
                              SUITE, "-", _mirror()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert strap.stdout is not None
    imported = _run([docker, "import", "--change", f"LABEL {LABEL}={base_hash()}",
                     "--change", 'CMD ["/bin/bash"]', "-", tag], stdin=strap.stdout)
    strap.stdout.close()
    err = strap.stderr.read().decode(errors="replace") if strap.stderr else ""
    if strap.wait() != 0:
        raise ImageError(f"mmdebstrap failed: {err.strip().splitlines()[-1] if err.strip() else strap.returncode}")
    if imported.returncode != 0:
        raise ImageError(f"docker import failed: {imported.stderr.strip()}")
    return tag


def build(tag: str = "kplane:dev") -> str:
    """``tag`` built (or found current); its inputs hash."""
    docker = _docker()
    want = inputs_hash()
    if _label_of(docker, tag) == want:
        print(f"{tag} is current ({LABEL}={want})", flush=True)
        return want
    base = build_base(docker)
    with tempfile.TemporaryDirectory(prefix="kplane-image-") as tmp:
        wheels = Path(tmp) / "wheels"
        print("fetching wheels for kplane and its dependencies (pip wheel)", flush=True)
        out = _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), str(ROOT)])
        if out.returncode != 0:
            raise ImageError(f"pip wheel failed: {out.stderr.strip().splitlines()[-1] if out.stderr else ''}")
        shutil.copy(OFFLINE_DOCKERFILE, Path(tmp) / "Dockerfile")
        print(f"building {tag} on {base}", flush=True)
        out = _run([docker, "build", "--quiet", "--build-arg", f"BASE={base}", "--label", f"{LABEL}={want}",
                    "-t", tag, tmp], env={**os.environ, "DOCKER_BUILDKIT": "0"})
        if out.returncode != 0:
            raise ImageError(f"docker build failed: {(out.stderr or out.stdout).strip().splitlines()[-1]}")
    print(f"built {tag} ({LABEL}={want})", flush=True)
    return want


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="tools/image.py", description=__doc__.splitlines()[0])
    p.add_argument("--tag", default="kplane:dev")
    p.add_argument("--print-hash", action="store_true", help="print the inputs hash and build nothing")
    a = p.parse_args(argv)
    if a.print_hash:
        print(inputs_hash())
        return 0
    try:
        build(a.tag)
    except ImageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
