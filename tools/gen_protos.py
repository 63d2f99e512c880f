"""Regenerate machinery/api from protos/ (``make proto``), or check it is current (``--check``).

Two proto packages are generated: ``kplane.v1`` (the API, protos/kplane/v1) and ``kplane.cri.v1``
(the CRI-like runtime API, protos/kplane/cri/v1). protoc names Python imports after the proto
paths (``from kplane.v1 import core_pb2``, ``from kplane.cri.v1 import cri_pb2``); the generated
modules live in the package ``machinery.api``, so the imports are rewritten to it.
The output is deterministic for a given grpcio-tools version (pinned in pyproject.toml).
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "protos"
# Each proto package's directory (relative to PROTO_ROOT); their modules share machinery/api.
PROTO_PACKAGES = (Path("kplane") / "v1", Path("kplane") / "cri" / "v1")
OUT_DIR = ROOT / "machinery" / "api"
GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
_IMPORT = re.compile(r"^from kplane\.(?:cri\.)?v1 import (\w+)", re.MULTILINE)


def _generate(into: Path) -> None:
    from grpc_tools import protoc  # imported here: only needed by developers

    protos = sorted(str(p.relative_to(PROTO_ROOT))
                    for pkg in PROTO_PACKAGES for p in (PROTO_ROOT / pkg).glob("*.proto"))
    include = Path(protoc.__file__).parent / "_proto"
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{include}",
        f"--python_out={into}",
        f"--pyi_out={into}",
        f"--grpc_python_out={into}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for pkg in PROTO_PACKAGES:
        for path in sorted((into / pkg).iterdir()):
            if path.name.endswith(GENERATED_SUFFIXES):
                if (into / path.name).exists():
                    raise SystemExit(f"two proto packages generate {path.name}; rename one .proto file")
                text = _IMPORT.sub(r"from machinery.api import \1", path.read_text())
                (into / path.name).write_text(text)
    shutil.rmtree(into / "kplane")


def _generated_files(directory: Path) -> set[str]:
    return {p.name for p in directory.iterdir() if p.name.endswith(GENERATED_SUFFIXES)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if machinery/api is stale")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp)
        _generate(fresh)
        if args.check:
            want, have = _generated_files(fresh), _generated_files(OUT_DIR)
            stale = sorted(want ^ have)
            stale += sorted(
                name for name in want & have if not filecmp.cmp(fresh / name, OUT_DIR / name, shallow=False)
            )
            if stale:
                print(f"machinery/api is not current with protos/ ({', '.join(stale)}); run `make proto`",
                      file=sys.stderr)
                return 1
            return 0
        for name in _generated_files(OUT_DIR):
            (OUT_DIR / name).unlink()
        for name in _generated_files(fresh):
            shutil.copy(fresh / name, OUT_DIR / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
