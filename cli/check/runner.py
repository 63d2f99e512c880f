"""The runner: every rule, the history replayed through them, and ``kplane check`` itself."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterable

from cli.check.allocation import ActuatedWithinAllocated, AllocatedWithinAllocatable
from cli.check.binding import BoundAtMostOnce, BoundRequestsWithinAllocatable
from cli.check.deployment import DeploymentSurgeAndUnavailability
from cli.check.devices import DeviceAllocatedOnce
from cli.check.framework import Entry, Rule, Violation, World
from cli.check.preemption import NoPreemptionWhileVictimsGoing, PreemptionVictimsLowerPriority
from cli.check.resize_preemption import OneVictimSetPerResize
from machinery.api import api_pb2
from machinery.client import Client
from machinery.kinds import lookup


def rules() -> list[Rule]:
    return [BoundAtMostOnce(), AllocatedWithinAllocatable(), BoundRequestsWithinAllocatable(),
            ActuatedWithinAllocated(), PreemptionVictimsLowerPriority(), NoPreemptionWhileVictimsGoing(),
            OneVictimSetPerResize(), DeploymentSurgeAndUnavailability(), DeviceAllocatedOnce()]


def check_entries(entries: Iterable[Entry], active: list[Rule] | None = None) -> list[Violation]:
    active = active if active is not None else rules()
    world = World()
    violations: list[Violation] = []
    for e in entries:
        world.apply(e)
        for r in active:
            violations.extend(r.observe(e, world))
    for r in active:
        violations.extend(r.finish(world))
    violations.sort(key=lambda v: v.rev)  # stable: the order they were found within a revision
    return violations


async def entries_of(client: Client, since: int = 0) -> AsyncIterator[Entry]:
    async for resp in client.history(since):
        for h in resp.entries:
            yield entry(h)


def entry(h: api_pb2.HistoryEntry) -> Entry:
    """A history entry with its object decoded."""
    obj = lookup(h.kind).message()
    h.object.Unpack(obj)
    return Entry(h.rev, h.type, h.kind, h.namespace, h.name, obj)


async def run(client: Client, since: int = 0) -> int:
    entries = [e async for e in entries_of(client, since)]
    violations = check_entries(entries)
    last = entries[-1].rev if entries else 0
    names = ", ".join(r.name for r in rules())
    if not violations:
        print(f"ok: {len(entries)} revisions checked (up to {last}): {names}")
        return 0
    for v in violations:
        print(f"rev {v.rev}: {v.rule}: {v.message}", file=sys.stderr)
    revs = sorted({v.rev for v in violations})
    print(f"FAILED: {len(violations)} violation(s) at revisions {', '.join(map(str, revs))}", file=sys.stderr)
    return 1
