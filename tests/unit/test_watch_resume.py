"""``kplane get -w`` on the informers' Reflector, against a scripted apiserver: a broken stream is
resumed from the last resourceVersion seen, nothing printed twice; ``Gone`` relists and prints what
changed (new and modified objects, DELETED for the ones gone); a fatal error ends the watch."""

from __future__ import annotations

import asyncio
import io
from typing import Any, AsyncIterator

import pytest

from cli import watch as watch_cmd
from machinery import errors
from machinery.api import core_pb2
from machinery.client import WatchEvent
from machinery.informer import Reflector
from machinery.kinds import POD
from tests.harness.builders import MakePod


def _bookmark(rv: int) -> WatchEvent:
    pod = core_pb2.Pod()
    pod.metadata.resource_version = str(rv)
    return WatchEvent("BOOKMARK", pod)


class _Done(Exception):
    pass


class _ScriptedPods:
    """A pods ResourceClient whose watches play a script: each a list of events, ending with an
    exception (the stream failing), or ``None`` (the stream ending)."""

    kind = POD

    def __init__(self, watches: list[tuple[list[WatchEvent], BaseException | None]], lists: list[list[Any]]):
        self._watches = list(watches)
        self._lists = list(lists)
        self.watched_from: list[str] = []
        self.listed = 0

    async def watch(self, namespace: str = "", *, label_selector: str = "", field_selector: str = "",
                    resource_version: str = "", allow_bookmarks: bool = True,
                    send_initial_events: bool = False) -> AsyncIterator[WatchEvent]:
        self.watched_from.append(resource_version)
        if not self._watches:
            raise _Done
        events, end = self._watches.pop(0)
        for ev in events:
            yield ev
        if end is not None:
            raise end

    async def list(self, namespace: str = "", **kw: Any) -> core_pb2.PodList:
        self.listed += 1
        items, rv = self._lists.pop(0)
        lst = core_pb2.PodList(items=items)
        lst.metadata.resource_version = str(rv)
        return lst


async def _follow(pods: _ScriptedPods, shown: list[core_pb2.Pod], rv: int) -> tuple[list[tuple[str, str, str]], str]:
    printed: list[tuple[str, str, str]] = []
    err = io.StringIO()
    with pytest.raises(_Done):
        async with asyncio.timeout(10):
            await watch_cmd.follow(pods, namespace="default", label_selector="", field_selector="",  # type: ignore[arg-type]
                                   resource_version=str(rv), shown=shown, show=lambda t, o: printed.append(
                                       (t, o.metadata.name, o.metadata.resource_version)), err=err)
    return printed, err.getvalue()


async def test_a_broken_stream_resumes_from_the_last_version_seen_printing_nothing_twice():
    pods = _ScriptedPods([
        ([WatchEvent("ADDED", MakePod().name("a").resource_version("11")
                              .phase("Pending").obj()), _bookmark(12)], errors.Unavailable("Stream removed")),
        ([], errors.Unavailable("failed to connect to all addresses")),  # the apiserver is still down
        ([WatchEvent("ADDED", MakePod().name("b").resource_version("13").phase("Pending").obj()),
          WatchEvent("MODIFIED", MakePod().name("a").resource_version("14").phase("Running").obj())], None),
    ], lists=[])
    printed, notes = await _follow(pods, [], 10)
    assert pods.watched_from == ["10", "12", "12", "14"]
    assert pods.listed == 0, "a broken stream is resumed, not relisted"
    assert printed == [("ADDED", "a", "11"), ("ADDED", "b", "13"), ("MODIFIED", "a", "14")]
    assert notes.splitlines() == ["watch interrupted (Stream removed); resuming from resourceVersion 12"]


async def test_gone_relists_and_prints_only_what_changed():
    shown = [MakePod().name("keep").resource_version("5").phase("Pending").obj(),
             MakePod().name("change").resource_version("6").phase("Pending").obj(),
             MakePod().name("gone").resource_version("7").phase("Pending").obj()]
    pods = _ScriptedPods([
        ([], errors.Gone("too old resource version: 8 (40)")),
        ([WatchEvent("ADDED", MakePod().name("later").resource_version("51").phase("Pending").obj())], None),
    ],
                         lists=[([MakePod().name("keep").resource_version("5").phase("Pending").obj(),
                                  MakePod().name("change").resource_version("30").phase("Pending").obj(),
                                  MakePod().name("new").resource_version("31").phase("Pending").obj()], 50)])
    printed, notes = await _follow(pods, shown, 8)
    assert pods.watched_from == ["8", "50", "51"]
    assert printed == [("DELETED", "gone", "7"), ("MODIFIED", "change", "30"), ("ADDED", "new", "31"),
                       ("ADDED", "later", "51")]
    assert "is too old" in notes and "listing again" in notes


async def test_a_fatal_error_ends_the_watch():
    pods = _ScriptedPods([([], errors.Forbidden('pods is forbidden: User "x" cannot watch'))], lists=[])
    with pytest.raises(errors.Forbidden):
        await watch_cmd.follow(pods, namespace="", label_selector="", field_selector="",  # type: ignore[arg-type]
                               resource_version="3", shown=[], show=lambda t, o: None, err=io.StringIO())


async def test_reflector_lists_first_without_a_version_and_reports_failures_in_a_row():
    seen: list[tuple[str, str]] = []
    failures: list[int] = []
    pods = _ScriptedPods([
        ([], errors.Unavailable("down")),
        ([], errors.Unavailable("down")),
        ([WatchEvent("ADDED", MakePod().name("x").resource_version("21")
                              .phase("Pending").obj())], errors.Unavailable("down")),
    ],
                         lists=[([MakePod().name("w").resource_version("19").phase("Pending").obj()], 20)])
    reflector = Reflector(pods, on_list=lambda items, rv: seen.append(("list", rv)),  # type: ignore[arg-type]
                          on_event=lambda t, o: seen.append((t, o.metadata.name)),
                          on_error=lambda exc, n: failures.append(n))
    with pytest.raises(_Done):
        await reflector.run()
    assert seen == [("list", "20"), ("ADDED", "x")]
    assert failures == [1, 2, 1]
    assert pods.watched_from == ["20", "20", "20", "21"]
