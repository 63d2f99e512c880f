"""The watcher side of the API benchmark, in its own process: N watches on pods, latency per event.

``python -m bench.watchers --server S --token T --watchers 50 --expect 5000 --out report.json``
opens the watches at the current resourceVersion, writes ``report.json.ready``, and records for
every ADDED event the delay from the send time the writer put in the pod's annotation. It ends
when every watcher has seen ``--expect`` events (or at ``--timeout``) and writes the report.
With ``--rest https://host:port --ca ca.crt`` the watches are the REST API's (``?watch=1``,
newline-delimited JSON, 10 watches per HTTPS connection pool) rather than gRPC streams.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import time
from pathlib import Path
from typing import AsyncIterator, TypedDict

import aiohttp

from machinery.client import Client
from machinery.process import run_loop

ANNOTATION = "bench.kplane.dev/sent"


class _WatcherReport(TypedDict):
    events: int
    p50_ms: float
    p99_ms: float
    max_ms: float | None  # None: no event


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


async def main(args: argparse.Namespace) -> None:
    clients = [Client(args.server, args.token) for _ in range(max(1, args.watchers // 10))]
    start_rv = (await clients[0].pods.list("default", resource_version="0", limit=1)).metadata.resource_version
    latencies: list[list[float]] = [[] for _ in range(args.watchers)]
    done = asyncio.Event()
    remaining = [args.watchers]

    sessions: list[aiohttp.ClientSession] = []
    if args.rest:
        ctx = ssl.create_default_context(cafile=args.ca)
        sessions = [aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=0),
                                          headers={"Authorization": f"Bearer {args.token}"})
                    for _ in range(max(1, args.watchers // 10))]

    async def grpc_events(i: int) -> AsyncIterator[tuple[str, str, dict[str, str]]]:
        async for ev in clients[i % len(clients)].pods.watch("default", label_selector="app=bench",
                                                              resource_version=start_rv, allow_bookmarks=False):
            yield ev.type, ev.object.metadata.name, dict(ev.object.metadata.annotations)

    async def rest_events(i: int) -> AsyncIterator[tuple[str, str, dict[str, str]]]:
        url = f"{args.rest}/api/v1/namespaces/default/pods"
        params = {"watch": "1", "labelSelector": "app=bench", "resourceVersion": start_rv,
                  "allowWatchBookmarks": "false", "timeoutSeconds": str(int(args.timeout) + 30)}
        async with sessions[i % len(sessions)].get(url, params=params, timeout=aiohttp.ClientTimeout()) as resp:
            if resp.status != 200:
                raise RuntimeError(f"REST watch answered {resp.status}: {(await resp.text())[:300]}")
            async for line in resp.content:
                ev = json.loads(line)
                meta = ev["object"].get("metadata", {})
                yield ev["type"], meta.get("name", ""), meta.get("annotations") or {}

    async def watch(i: int) -> None:
        seen = 0
        async for type_, name, notes in (rest_events(i) if args.rest else grpc_events(i)):
            if type_ != "ADDED" or not name.startswith(args.prefix):
                continue
            sent = notes.get(ANNOTATION)
            if sent:
                latencies[i].append((time.time() - float(sent)) * 1000)
            seen += 1
            if seen >= args.expect:
                break
        remaining[0] -= 1
        if remaining[0] == 0:
            done.set()

    tasks = [asyncio.create_task(watch(i)) for i in range(args.watchers)]
    await asyncio.sleep(0.5)  # let every watch register before the writer starts
    Path(args.out + ".ready").write_text("ready\n")
    try:
        async with asyncio.timeout(args.timeout):
            await done.wait()
    except TimeoutError:
        pass
    for t in tasks:
        t.cancel()
    for c in clients:
        await c.close()
    for session in sessions:
        await session.close()
    per: list[_WatcherReport] = [
        {"events": len(lat), "p50_ms": round(_pct(lat, 50), 2), "p99_ms": round(_pct(lat, 99), 2),
         "max_ms": round(max(lat), 2) if lat else None} for lat in latencies]
    everything = [x for lat in latencies for x in lat]
    report = {
        "watchers": args.watchers, "expected_per_watcher": args.expect,
        "all_complete": all(p["events"] >= args.expect for p in per),
        "p50_ms": round(_pct(everything, 50), 2), "p99_ms": round(_pct(everything, 99), 2),
        "max_ms": round(max(everything), 2) if everything else None,
        "worst_watcher_p99_ms": max((p["p99_ms"] for p in per), default=float("nan")),
        "min_events_per_watcher": min(p["events"] for p in per),
    }
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


def cli() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.watchers")
    p.add_argument("--server", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--watchers", type=int, default=50)
    p.add_argument("--expect", type=int, required=True)
    p.add_argument("--prefix", default="w-")
    p.add_argument("--out", required=True)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--rest", default="", help="watch over the REST API at this base URL (https://host:port)")
    p.add_argument("--ca", default="", help="the CA certificate of --rest")
    run_loop(main(p.parse_args()))


if __name__ == "__main__":
    cli()
