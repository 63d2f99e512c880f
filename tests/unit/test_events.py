"""machinery/events.py's EventRecorder over a fake events client: an event repeating one written
within the window bumps its count (client-go's event correlator), the recorder remembers the last
MAX_REMEMBERED events as the correlator's LRU cache does, and a full queue drops and counts."""

from __future__ import annotations

import copy

import pytest

from machinery import events
from machinery.api import core_pb2
from tests.harness.builders import MakePod


class _FakeEvents:
    def __init__(self) -> None:
        self.stored: dict[str, core_pb2.Event] = {}
        self.creates = 0

    async def create(self, ev: core_pb2.Event) -> core_pb2.Event:
        self.creates += 1
        ev = copy.deepcopy(ev)
        ev.metadata.name = f"{ev.metadata.generate_name}{self.creates}"
        self.stored[ev.metadata.name] = ev
        return ev

    async def get(self, name: str, namespace: str) -> core_pb2.Event:
        return copy.deepcopy(self.stored[name])

    async def update(self, ev: core_pb2.Event) -> core_pb2.Event:
        self.stored[ev.metadata.name] = copy.deepcopy(ev)
        return ev


class _FakeClient:
    def __init__(self) -> None:
        self.events = _FakeEvents()


@pytest.fixture
def client() -> _FakeClient:
    return _FakeClient()


async def _record(rec: events.EventRecorder, pod: core_pb2.Pod, message: str = "placed") -> None:
    rec.event(pod, "Normal", "Scheduled", message)
    key, obj, related, action = rec._queue.get_nowait()
    await rec._write(key, obj, related, action)


async def test_a_repeat_within_the_window_bumps_the_count_of_the_event_written(client):
    rec = events.EventRecorder(client, "default-scheduler")  # type: ignore[arg-type]
    pod = MakePod().name("web").uid("u1").obj()
    await _record(rec, pod)
    await _record(rec, pod)
    await _record(rec, pod, "elsewhere")
    assert client.events.creates == 2
    counts = sorted((e.message, e.count) for e in client.events.stored.values())
    assert counts == [("elsewhere", 1), ("placed", 2)]


async def test_the_recorder_remembers_the_last_events_written_as_an_lru(client, monkeypatch):
    monkeypatch.setattr(events, "MAX_REMEMBERED", 3)
    rec = events.EventRecorder(client, "default-scheduler")  # type: ignore[arg-type]
    pods = [MakePod().name(f"p{i}").uid(f"u{i}").obj() for i in range(4)]
    for p in pods[:3]:
        await _record(rec, p)
    await _record(rec, pods[0])  # a repeat: counted, and now the most recent
    await _record(rec, pods[3])  # past the bound: p1, the least recently written, is forgotten
    assert len(rec._written) == 3
    await _record(rec, pods[0])  # still remembered: counted again
    await _record(rec, pods[1])  # forgotten: a new Event
    by_name = sorted((e.involved_object.name, e.count) for e in client.events.stored.values())
    assert by_name == [("p0", 3), ("p1", 1), ("p1", 1), ("p2", 1), ("p3", 1)]


def test_a_full_queue_drops_and_counts(client):
    rec = events.EventRecorder(client, "bench-recorder", max_queue=1)  # type: ignore[arg-type]
    pod = MakePod().name("web").uid("u1").obj()
    before = rec._dropped._value.get()
    rec.event(pod, "Normal", "Scheduled", "one")
    rec.event(pod, "Normal", "Scheduled", "two")
    assert rec._dropped._value.get() == before + 1
