"""CPU time of the cluster's processes, read from /proc: what the benchmarks divide by the work
done (CPU ms per pod, per resize, per request) to compare processes and code paths in one run."""

from __future__ import annotations

import os
from pathlib import Path

from cli import cluster


def seconds(pid: int | None) -> float:
    """User + system CPU time a process has used (Linux /proc); 0 for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def by_component(state: cluster.ClusterState) -> dict[str, float]:
    """Each process of the cluster's CPU seconds so far, by component name."""
    return {name: seconds(p.pid) for name, p in state.processes.items()}
