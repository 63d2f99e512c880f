"""The reference workload: how fast this machine is today, so that figures from different days compare.

The 2-core machine the benchmarks run on changes speed by 2x from one day to the next (and within a
long run), so every ``python -m bench`` times a fixed workload before its first suite and after each
one (``measure``); bench/figures.py puts every suite's figures in its units beside the measured ones:

- the python loop: fixed, deterministic work of the kind kplane's processes do (dict and attribute
  access, small objects, string formatting, a pod built, serialized and parsed), its CPU time
  (``time.process_time``) the best of ``REPEATS``, spread over the seconds the etcd rounds take; the
  unit "ref-ms". A CPU figure in ms divided by it is the same figure in "ref" (``cpu_ms_per_pod`` ->
  ``cpu_ref_per_pod``);
- raw etcd puts/s: a throwaway etcd (the binary ``make install`` installs, a temporary data dir) and
  pod-sized puts through aetcd, 64 concurrent (as the API suite's ``raw_etcd_puts_per_s``; the best
  of ``REPEATS`` rounds: one round's figure swings 2x under load from outside) and one at a time. A
  rate times 11,000 / the concurrent puts/s is the rate on a day when raw etcd makes ~11k puts/s
  (``pods_per_s`` -> ``pods_per_s_at_11k``).

A suite is scaled by the means of the snapshots taken just before and just after it (``between``).
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

from bench import figures
from bench.api import raw_etcd_puts, run_loop_result
from cli import cluster, etcd_binary
from machinery.api import core_pb2
from tests.harness.builders import MakePod

REPEATS = 5
LOOP_PODS = 100  # pods per repeat of the python loop: ~4 ms of CPU on the 2-core machine, a pod's cost in a process
ETCD_PUTS = 2000  # 64 concurrent, a round after each repeat of the python loop
ETCD_SEQUENTIAL_PUTS = 300  # one at a time: each waits for etcd's fsync


# ------------------------------------------------------------------------------ the python loop


@dataclass(frozen=True)
class _Slot:
    node: str
    pod: str
    milli_cpu: int


def _loop_once() -> int:
    """The python loop's work, once; a checksum of what it computed (the same on every run)."""
    by_node: dict[str, list[_Slot]] = {}
    index: dict[str, _Slot] = {}
    total = 0
    for i in range(LOOP_PODS):
        pod = (MakePod().name(f"ref-{i}").labels({"app": "ref", "tier": f"t{i % 3}"}).req(cpu="100m", memory="64Mi")
               .lim(cpu="200m", memory="128Mi").node(f"node-{i % 7}").obj())
        copy = core_pb2.Pod()
        copy.ParseFromString(pod.SerializeToString())
        meta, spec = copy.metadata, copy.spec
        key = f"{meta.namespace}/{meta.name}"
        milli = int(spec.containers[0].resources.requests["cpu"].rstrip("m"))
        slot = _Slot(spec.node_name, key, milli)
        index[key] = slot
        by_node.setdefault(slot.node, []).append(slot)
        for j in range(25):  # what a scheduler cycle or a status write does between two encodes
            name = f"{key}#{j}"
            s = index[key]
            total += s.milli_cpu + len(name) + len(meta.labels.get("tier", ""))
            index[name] = _Slot(s.node, name, s.milli_cpu + j)
    return total + sum(len(v) for v in by_node.values()) + len(index)


def python_loop_ms(between: Callable[[], object] = lambda: None) -> tuple[float, list[float]]:
    """The python loop's CPU time in ms: the best of ``REPEATS`` (after one warm-up), and each repeat's;
    ``between`` runs after each repeat (``measure``: an etcd round, so the repeats span seconds and
    the best of them misses a burst of load from outside that lasts less)."""
    _loop_once()
    times = []
    for _ in range(REPEATS):
        t0 = time.process_time()
        _loop_once()
        times.append(1000 * (time.process_time() - t0))
        between()
    return min(times), times


# ------------------------------------------------------------------------------ raw etcd


class ReferenceEtcdError(Exception):
    """The throwaway etcd did not start."""


def _wait_healthy(proc: subprocess.Popen[bytes], metrics: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ReferenceEtcdError(f"reference etcd exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://{metrics}/health", timeout=2) as resp:
                if b'"true"' in resp.read():
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise ReferenceEtcdError(f"reference etcd not healthy after {timeout:.0f} s")


@contextlib.contextmanager
def _throwaway_etcd() -> Iterator[str]:
    """An etcd of its own (free ports, a temporary data dir) for as long as the block runs; its endpoint."""
    binary = etcd_binary.find_etcd().path
    client, peer, metrics = cluster.free_ports(3)
    data = tempfile.mkdtemp(prefix="kplane-bench-ref-etcd-")
    argv = [binary, "--name", "ref", "--data-dir", str(Path(data) / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{client}",
            "--advertise-client-urls", f"http://127.0.0.1:{client}",
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--listen-metrics-urls", f"http://127.0.0.1:{metrics}",
            "--initial-cluster", f"ref=http://127.0.0.1:{peer}", "--initial-cluster-state", "new",
            "--logger", "zap", "--log-outputs", "stderr"]
    try:
        with open(Path(data) / "etcd.log", "wb") as log:
            proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        try:
            _wait_healthy(proc, f"127.0.0.1:{metrics}", 30)
            yield f"127.0.0.1:{client}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    finally:
        shutil.rmtree(data, ignore_errors=True)


# ------------------------------------------------------------------------------ snapshots


@dataclass(frozen=True)
class Snapshot:
    """The reference workload timed once: at ``label`` ("start", "after api", ...)."""
    label: str
    at: str  # UTC, ISO 8601
    python_ref_ms: float
    python_repeats_ms: tuple[float, ...]
    etcd_puts_per_s: float  # 64 concurrent, the best of REPEATS
    etcd_repeats_per_s: tuple[float, ...]
    etcd_sequential_puts_per_s: float

    def as_json(self) -> dict[str, Any]:
        return {"label": self.label, "at": self.at, "python_ref_ms": round(self.python_ref_ms, 3),
                "python_repeats_ms": [round(t, 3) for t in self.python_repeats_ms],
                "etcd_puts_per_s": round(self.etcd_puts_per_s, 1),
                "etcd_repeats_per_s": [round(r, 1) for r in self.etcd_repeats_per_s],
                "etcd_sequential_puts_per_s": round(self.etcd_sequential_puts_per_s, 1)}


def measure(label: str) -> Snapshot:
    """The python loop and raw etcd now: a round of ``ETCD_PUTS`` 64 concurrent puts after each of the
    loop's repeats (the first round is slower, as etcd's database grows), then ``ETCD_SEQUENTIAL_PUTS``
    one at a time."""
    concurrent: list[float] = []
    with _throwaway_etcd() as endpoint:
        best, times = python_loop_ms(lambda: concurrent.append(run_loop_result(raw_etcd_puts(endpoint, ETCD_PUTS, 64))))
        sequential = run_loop_result(raw_etcd_puts(endpoint, ETCD_SEQUENTIAL_PUTS, 1))
    return Snapshot(label, datetime.now(timezone.utc).isoformat(timespec="seconds"), best, tuple(times),
                    max(concurrent), tuple(concurrent), sequential)


def between(before: Snapshot, after: Snapshot) -> figures.Scale:
    """What a suite's figures are scaled by: the means of the snapshots just before and just after it."""
    return figures.Scale((before.python_ref_ms + after.python_ref_ms) / 2,
                         (before.etcd_puts_per_s + after.etcd_puts_per_s) / 2)


def suite_json(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """The ``reference`` a suite's JSON records: both snapshots and what its figures were scaled by."""
    ref = between(before, after)
    return {"unit": figures.UNIT, "basis_etcd_puts_per_s": figures.BASIS_PUTS_PER_S, "ref_ms": round(ref.ref_ms, 3),
            "etcd_puts_per_s": round(ref.etcd_puts_per_s, 1), "before": before.as_json(), "after": after.as_json()}


def run_json(snapshots: list[Snapshot]) -> dict[str, Any]:
    """``reference.json``: the run's first and last snapshot, and every one taken."""
    return {"unit": figures.UNIT, "basis_etcd_puts_per_s": figures.BASIS_PUTS_PER_S, "start": snapshots[0].as_json(),
            "end": snapshots[-1].as_json(), "snapshots": [s.as_json() for s in snapshots]}
