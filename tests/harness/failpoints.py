"""Failpoints of a running component, through its admin port: arm one (``pause``, ``panic``,
``sleep(ms)``, ``off``), read their state, wait until a ``pause`` holds a caller."""

from __future__ import annotations

import json
import urllib.request

from tests.harness.cluster import admin
from tests.harness.wait import eventually


def failpoint(tc, component: str, name: str, action: str) -> None:
    """Arm ``name`` in ``component`` (e.g. ``kubelet/node-1``) through its admin port."""
    req = urllib.request.Request(f"http://{admin(tc, component)}/failpoints/{name}", data=action.encode(),
                                 method="PUT")
    with urllib.request.urlopen(req, timeout=5) as resp:
        resp.read()


def failpoints_state(tc, component: str) -> dict:
    with urllib.request.urlopen(f"http://{admin(tc, component)}/failpoints", timeout=5) as resp:
        return json.loads(resp.read())


async def wait_paused(tc, component: str, name: str, timeout: float = 20) -> None:
    """Until a ``pause`` at ``name`` holds a caller in ``component``."""
    await eventually(lambda: failpoints_state(tc, component)["paused"].get(name, 0) > 0, timeout=timeout,
                     what=f"{component} paused at {name}")
