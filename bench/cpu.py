"""CPU time and resident memory of the cluster's processes, read from /proc: what the benchmarks
divide by the work done (CPU ms per pod, per resize, per request; bytes per hollow node) to compare
processes and code paths in one run."""

from __future__ import annotations

import os
from pathlib import Path

from cli import cluster, topology


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


def rss_bytes(pid: int | None) -> int:
    """A process's resident set size now (VmRSS of /proc/PID/status), in bytes; 0 for a process that is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024  # the kernel reports it in kB
    return 0  # a zombie has no VmRSS line


def rss_by_component(state: cluster.ClusterState) -> dict[str, int]:
    """Each process of the cluster's resident set size now, in bytes, by component name."""
    return {name: rss_bytes(p.pid) for name, p in state.processes.items()}


def hollow_rss_bytes(rss: dict[str, int]) -> int:
    """The resident memory of every hollow-node process (``hollow-nodes``, ``hollow-nodes-2``, ...) together."""
    return sum(v for name, v in rss.items() if name.startswith(topology.HOLLOW))
