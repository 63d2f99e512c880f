"""The REST half of the API benchmark: pod creates and watches over HTTPS, as kubectl and client-go
send them, beside the same work over gRPC in the same run.

Both paths end in the same registry, admission and watch cache (``apiserver/requests.py``); what
differs is the encoding (JSON against protobuf), HTTP/1.1 against HTTP/2 and the request path of
each server. The figure the REST API is held to is the apiserver's own CPU per request, REST over
gRPC, measured from /proc around each phase: creates (64 concurrent, JSON bodies POSTed on 8
keep-alive connections) and watch delivery (watchers on ``?watch=1`` newline-delimited JSON,
writes over gRPC in both phases so they cost the same).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from pathlib import Path
from typing import Any

import aiohttp

from apiserver.rest import codec
from cli import cluster, pki
from machinery.api import core_pb2

TARGET_CPU_RATIO = 1.5  # the REST path's apiserver CPU per request, at most this times the gRPC path's


class Endpoint:
    """Where and how a REST client reaches the cluster: the base URL, the CA, the bearer token."""

    def __init__(self, state: cluster.ClusterState, token: str):
        self.base = f"https://{state.rest}"
        self.ca = str(pki.Pki(Path(state.data_dir) / pki.PKI_DIR).ca_cert)
        self.token = token

    def session(self, connections: int) -> aiohttp.ClientSession:
        ctx = ssl.create_default_context(cafile=self.ca)
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=ctx, limit=connections),
            headers={"Authorization": f"Bearer {self.token}", "User-Agent": "kplane-bench/rest",
                     "Accept": "application/json", "Content-Type": "application/json"})


def pod_body(pod: core_pb2.Pod) -> bytes:
    return json.dumps(codec.to_json(pod, "v1", "Pod"), separators=(",", ":")).encode()


async def creates(endpoint: Endpoint, bodies: list[bytes], concurrency: int, connections: int) -> float:
    """POST every body to /api/v1/namespaces/default/pods, ``concurrency`` at a time; creates/s."""
    url = f"{endpoint.base}/api/v1/namespaces/default/pods"
    async with endpoint.session(connections) as s:
        it = iter(bodies)

        async def worker() -> None:
            for body in it:
                async with s.post(url, data=body) as resp:
                    if resp.status != 201:
                        raise RuntimeError(f"REST create answered {resp.status}: {(await resp.text())[:300]}")
                    await resp.read()

        start = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        return len(bodies) / (time.perf_counter() - start)


def cpu_ratio(rest_cpu_ms: float, grpc_cpu_ms: float) -> float:
    return round(rest_cpu_ms / grpc_cpu_ms, 3) if grpc_cpu_ms > 0 else float("nan")


def summary_lines(r: dict[str, Any]) -> list[str]:
    c, w = r["creates"], r["watch"]
    # In ref units (bench/reference.py) when the run was scaled.
    create_ref = f" ({c['grpc_cpu_ref']:.3f} / {c['rest_cpu_ref']:.3f} ref)" if "grpc_cpu_ref" in c else ""
    event_ref = f" ({w['grpc_cpu_ref_per_event']:.5f} / {w['rest_cpu_ref_per_event']:.5f} ref)" \
        if "grpc_cpu_ref_per_event" in w else ""
    return [
        f"creates gRPC / REST:        {c['grpc_per_s']:>8.0f} / {c['rest_per_s']:.0f} per s; apiserver CPU "
        f"{c['grpc_cpu_ms']:.2f} / {c['rest_cpu_ms']:.2f} ms per create{create_ref}, ratio {c['cpu_ratio']:.2f} "
        f"(target <= {TARGET_CPU_RATIO})",
        f"watch @ {w['rate']:.0f} writes/s to {w['watchers']} watchers, gRPC / REST: every watcher complete "
        f"{w['grpc']['all_complete']} / {w['rest']['all_complete']}; worst watcher p99 "
        f"{w['grpc']['worst_watcher_p99_ms']:.1f} / {w['rest']['worst_watcher_p99_ms']:.1f} ms; apiserver CPU "
        f"{w['grpc_cpu_us_per_event']:.1f} / {w['rest_cpu_us_per_event']:.1f} us per delivered event{event_ref}, ratio "
        f"{w['cpu_ratio']:.2f} (target <= {TARGET_CPU_RATIO})",
    ]
