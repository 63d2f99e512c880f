"""Code shared by every kplane process.

The generated API (``machinery.api``), Kubernetes quantities, pod resource math, selectors,
the async client with informers and workqueues, feature gates, failpoints, logging and the
admin HTTP server. Nothing here talks to etcd: only the apiserver does.
"""

from __future__ import annotations

import os
from pathlib import Path

# The modules tools/build_mypyc.py compiles with mypyc (docs/performance.md, "mypyc": pure computation
# that runs at least 1.3x faster compiled), into COMPILED_DIR.
COMPILED = ("fit", "jsonconv", "selectors")
COMPILED_DIR = Path(__file__).resolve().parent.parent / "build" / "mypyc" / "machinery"
COMPILED_STAMP = COMPILED_DIR / "BUILT"


def compiled_is_fresh(*also: Path) -> bool:
    """The build is there and newer than every source it compiled (and than the files ``also``)."""
    here = Path(__file__).parent
    try:
        built = COMPILED_STAMP.stat().st_mtime
        return all(p.stat().st_mtime <= built for p in (*(here / f"{name}.py" for name in COMPILED), *also))
    except OSError:
        return False


# Found first, before the .py files beside this one: Python imports the C extension when both exist.
if os.environ.get("KPLANE_PURE_PYTHON") != "1" and compiled_is_fresh():
    __path__.insert(0, str(COMPILED_DIR))
