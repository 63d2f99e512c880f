"""bench/cpu.py's resident-memory reader: VmRSS of /proc/PID/status, and the hollow nodes' memory
summed over every hollow-nodes process (``hollow-nodes``, ``hollow-nodes-2``, ...)."""

from __future__ import annotations

import os
import subprocess

from bench import cpu


def test_rss_of_this_process_grows_with_what_it_holds():
    before = cpu.rss_bytes(os.getpid())
    held = b"x" * (64 << 20)  # written, so resident
    assert cpu.rss_bytes(os.getpid()) - before >= 48 << 20
    del held
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert cpu.rss_bytes(gone.pid) == 0 and cpu.rss_bytes(None) == 0


def test_hollow_node_memory_counts_every_hollow_nodes_process():
    rss = {"apiserver": 100, "hollow-nodes": 70, "hollow-nodes-2": 30, "scheduler": 50}
    assert cpu.hollow_rss_bytes(rss) == 100
