"""Files a process needs at start that another may still be writing: the tokens and certificates
compose.yaml's ``tokens`` service makes while the other services start (compose can order their
starts, and ``docker stack deploy`` not even that, but neither waits for a service to finish).

``wait_for_files`` runs before the process's event loop starts, so SIGTERM still ends it at once.
It waits only where asked to, by ``KPLANE_START_FILES_WAIT`` (seconds; compose.yaml sets it): a
process started by hand with a missing token file still fails at once, saying so.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from machinery.logging import get_logger

log = get_logger()

START_FILES_WAIT_ENV = "KPLANE_START_FILES_WAIT"


def wait_for_files(*paths: str, timeout: float | None = None) -> None:
    """Until every non-empty ``paths`` exists, for ``timeout`` seconds (default: the environment's
    ``KPLANE_START_FILES_WAIT``, else 0: no wait); SystemExit with one line naming what is still
    missing then. With no wait, nothing is checked: the process reports a missing file itself."""
    if timeout is None:
        timeout = float(os.environ.get(START_FILES_WAIT_ENV, "0") or 0)
    if timeout <= 0:
        return
    wanted = [Path(p) for p in paths if p]
    deadline = time.monotonic() + timeout
    logged = False
    while True:
        missing = [str(p) for p in wanted if not p.exists()]
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise SystemExit(f"{', '.join(missing)}: no such file after waiting {timeout:g}s")
        if not logged:
            log.info("waiting_for_files", missing=missing, timeout=timeout)
            logged = True
        time.sleep(0.2)
