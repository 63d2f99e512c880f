"""Files a process needs at start that another may still be writing: the tokens and certificates
compose.yaml's ``tokens`` service makes while the other services start (compose can order their
starts, and ``docker stack deploy`` not even that, but neither waits for a service to finish).

``wait_for_files`` runs before the process's event loop starts, so SIGTERM still ends it at once.
"""

from __future__ import annotations

import time
from pathlib import Path

from machinery.logging import get_logger

log = get_logger()

START_FILES_WAIT = 60.0  # seconds


def wait_for_files(*paths: str, timeout: float = START_FILES_WAIT) -> None:
    """Until every non-empty ``paths`` exists; SystemExit with one line naming what is missing
    after ``timeout`` seconds."""
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
