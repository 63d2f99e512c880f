"""``kplane timeline`` on a real cluster, drawn by a real browser: two nodes of 1 CPU, a
low-priority pod on each, the scheduler killed and started again (recorded as fault Events, as a
chaos run records them), then a high-priority pod that preempts one of them. The page
``kplane timeline -o X.html`` writes is loaded by headless Chromium (Debian's ``chromium``, which
``make install`` installs): the DOM it renders must hold the preemptor, its victim, the arrow between
them and the kill mark, and its screenshot must be a picture, not a blank page.
"""

from __future__ import annotations

import struct
import zlib

import pytest

from cli.chaos import marks
from tests.harness.browser import Elements, browser
from tests.harness.builders import MakePod, make_priority_class
from tests.harness.cluster import FAST_KUBELET, cluster_fixture, kill, start
from tests.harness.wait import eventually, wait_running

pytestmark = pytest.mark.integration

timeline_cluster = cluster_fixture(nodes=2, schedulers=1, node_cpu="1", node_memory="2Gi", kubelet_args=FAST_KUBELET)


def _png_rows(png: bytes) -> list[bytes]:
    """The filtered scanlines of an 8-bit RGB or RGBA PNG (enough to tell a picture from a blank)."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        body = png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), (depth, colour)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = 1 + width * channels
    return [raw[i * stride:(i + 1) * stride] for i in range(height)]


async def test_timeline_of_a_preemption_and_a_scheduler_kill_in_chromium(timeline_cluster, tmp_path):
    api = timeline_cluster.client()
    try:
        await api.priority_classes.create(make_priority_class("timeline-low", 10))
        await api.priority_classes.create(make_priority_class("timeline-high", 1000))
        for name in ("low-1", "low-2"):
            await api.pods.create(MakePod().name(name).req(cpu="600m").priority_class("timeline-low").grace(0).obj())
        running = await wait_running(api, "low-1", "low-2", timeout=30)
        assert {p.spec.node_name for p in running.values()} == {"node-1", "node-2"}

        # The scheduler killed and started again, recorded as kplane run records it.
        await api.events.create(marks.fault_event("kill", "scheduler", "scheduler killed"))
        kill(timeline_cluster, "scheduler")
        start(timeline_cluster, "scheduler")
        await api.events.create(marks.fault_event("start", "scheduler", "scheduler started"))

        await api.pods.create(MakePod().name("high").req(cpu="600m").priority_class("timeline-high").obj())
        victims: list[str] = []

        async def preempted() -> bool:
            evs = await api.events.list("default")
            victims[:] = [e.involved_object.name for e in evs.items
                          if e.reason == "Preempted" and e.related.name == "high"]
            return bool(victims)

        await eventually(preempted, timeout=30, what="a Preempted event naming high as the preemptor")
        await wait_running(api, "high", timeout=30)
    finally:
        await api.close()
    (victim,) = victims

    page = tmp_path / "timeline.html"
    out = timeline_cluster.kplane("timeline", "-o", str(page))
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"wrote {page}: revisions 0 to ") and "1 preemption, 2 faults" in out.stdout

    # The DOM Chromium built from the page.
    dom = browser("--dump-dom", page.as_uri(), profile=tmp_path / "profile")
    assert dom.returncode == 0, dom.stderr[-2000:]
    elements = Elements()
    elements.feed(dom.stdout)
    (high,) = elements.having("pod", data_pod="default/high")
    assert high["data-node"] == high["data-lane"] in ("node-1", "node-2") and high["data-priority"] == "1000"
    (gone,) = elements.having("pod", data_pod=f"default/{victim}")
    assert gone["data-ended"] in ("deleted", "Failed") and gone["data-lane"] == high["data-lane"]
    assert [a["data-phase"] for a in elements.having("segment", in_pod="default/high")][0] == "pending"
    assert elements.having("segment phase-running", in_pod="default/high")
    assert elements.having("segment phase-running", in_pod=f"default/{victim}")
    assert elements.having("preemption", data_preemptor="default/high", data_victim=f"default/{victim}")
    (killed,) = elements.having("fault kill", data_component="scheduler")
    assert killed["data-lane"] == "control plane"
    assert elements.having("fault start", data_component="scheduler")
    assert [a["data-lane"] for a in elements.having("lane")] == ["control plane", "unscheduled", "node-1", "node-2"]

    # And the picture it paints.
    shot = tmp_path / "timeline.png"
    painted = browser(f"--screenshot={shot}", "--window-size=1280,720", page.as_uri(), profile=tmp_path / "profile")
    assert painted.returncode == 0 and shot.exists(), painted.stderr[-2000:]
    rows = _png_rows(shot.read_bytes())
    assert len(set(rows)) > 50, f"the screenshot looks blank: {len(set(rows))} distinct scanlines of {len(rows)}"
