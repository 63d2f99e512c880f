"""Code shared by every kplane process.

The generated API (``machinery.api``), Kubernetes quantities, pod resource math, selectors,
the async client with informers and workqueues, feature gates, failpoints, logging and the
admin HTTP server. Nothing here talks to etcd: only the apiserver does.
"""

from __future__ import annotations

import os
from pathlib import Path

# The modules tools/build_mypyc.py compiles with mypyc (docs/performance-mypyc.md: pure computation
# that runs at least 1.3x faster compiled), into COMPILED_DIR.
COMPILED = ("fit", "jsonconv", "selectors")
COMPILED_DIR = Path(__file__).resolve().parent.parent / "build" / "mypyc" / "machinery"
COMPILED_STAMP = COMPILED_DIR / "BUILT"


def _use_compiled() -> bool:
    """The build is there, newer than every source it compiled, and KPLANE_PURE_PYTHON is not 1."""
    if os.environ.get("KPLANE_PURE_PYTHON") == "1":
        return False
    try:
        built = COMPILED_STAMP.stat().st_mtime
        here = Path(__file__).parent
        return all((here / f"{name}.py").stat().st_mtime <= built for name in COMPILED)
    except OSError:
        return False


# Found first, before the .py files beside this one: Python imports the C extension when both exist.
if _use_compiled():
    __path__.insert(0, str(COMPILED_DIR))
