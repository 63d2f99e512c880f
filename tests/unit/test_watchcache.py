"""The watch cache's fan-out, without etcd: groups, node index, selector transitions, replay, batching."""

from __future__ import annotations

import asyncio

import pytest

from apiserver.watchcache import CacheEvent, WatchCache, with_resource_version
from machinery import errors
from machinery.api import core_pb2
from machinery.kinds import NODE, POD
from machinery.selectors import EVERY_FIELD, EVERYTHING, parse_field_selector, parse_label_selector
from tests.harness.builders import MakeNode, MakePod


class Feed:
    """Drives a pods cache the way the etcd watch does."""

    def __init__(self, capacity: int = 100):
        self.cache = WatchCache(etcd=None, capacity=capacity, watch_batch_interval=0)  # type: ignore[arg-type]
        self.pods = self.cache[POD]
        self.pods.reset([], 1)
        self.cache.rev = 1

    def put(self, pod: core_pb2.Pod) -> None:
        rev = int(pod.metadata.resource_version)
        key = POD.key(pod.metadata.namespace, pod.metadata.name)
        prev = self.pods.store.get(key)
        self.cache.rev = rev
        self.pods.apply(CacheEvent(rev, "ADDED" if prev is None else "MODIFIED", key, pod, prev))

    def delete(self, name: str, rev: int) -> None:
        key = POD.key("default", name)
        prev = self.pods.store[key]
        self.cache.rev = rev
        self.pods.apply(CacheEvent(rev, "DELETED", key, with_resource_version(prev, rev), prev))


async def _drain(w) -> list[tuple[str, str, str]]:
    batch = await asyncio.wait_for(w.next_batch(), 1)
    resp = core_pb2.PodWatchResponse.FromString(batch)
    return [(e.type, e.object.metadata.name, e.object.metadata.resource_version) for e in resp.events]


def _labels(text: str):
    return parse_label_selector(text)


async def test_label_transitions_become_added_and_deleted_for_a_selecting_watcher():
    f = Feed()
    w = f.pods.watch("default", _labels("team=x"), EVERY_FIELD, "1", False, False, 1000)
    f.put(MakePod().name("a").resource_version("2").labels({"team": "x"}).obj())
    f.put(MakePod().name("a").resource_version("3").labels({"team": "x", "more": "1"}).obj())
    # leaves the selector: DELETED with the old state, at rev 4
    f.put(MakePod().name("a").resource_version("4").labels({"team": "y"}).obj())
    f.put(MakePod().name("b").resource_version("5").labels({"team": "y"}).obj())  # never matched: nothing
    f.put(MakePod().name("a").resource_version("6").labels({"team": "x"}).obj())  # comes back: ADDED
    assert await _drain(w) == [("ADDED", "a", "2"), ("MODIFIED", "a", "3"), ("DELETED", "a", "4"), ("ADDED", "a", "6")]


async def test_watchers_with_the_same_filter_share_a_group_and_all_get_every_event():
    f = Feed()
    ws = [f.pods.watch("default", _labels("app=web"), EVERY_FIELD, "1", False, False, 1000) for _ in range(5)]
    other = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "1", False, False, 1000)
    assert len(f.pods._groups) == 2
    f.put(MakePod().name("w").resource_version("2").labels({"app": "web"}).obj())
    for w in ws:
        assert await _drain(w) == [("ADDED", "w", "2")]
    assert await _drain(other) == [("ADDED", "w", "2")]
    for w in ws:
        f.pods.remove(w)
    f.pods.remove(other)
    assert f.pods._groups == {} and f.pods.watcher_count == 0


async def test_node_pinned_watchers_only_see_their_nodes_pods_and_binding_is_an_add():
    f = Feed()
    d = core_pb2.Pod.DESCRIPTOR
    n1 = f.pods.watch("", EVERYTHING, parse_field_selector("spec.nodeName=n1", "Pod", d), "1", False, False, 100)
    unbound = f.pods.watch("", EVERYTHING, parse_field_selector("spec.nodeName=", "Pod", d), "1", False, False, 100)
    f.put(MakePod().name("p").resource_version("2").obj())
    f.put(MakePod().name("p").resource_version("3").node("n1").obj())  # bound: leaves "unbound", enters "n1"
    f.put(MakePod().name("q").resource_version("4").node("n2").obj())
    assert await _drain(n1) == [("ADDED", "p", "3")]
    assert await _drain(unbound) == [("ADDED", "p", "2"), ("DELETED", "p", "3")]
    assert set(f.pods._pinned) == {"n1", ""}


async def test_watchers_of_one_node_by_name_are_indexed_and_see_only_it():
    cache = WatchCache(etcd=None, watch_batch_interval=0)  # type: ignore[arg-type]
    nodes = cache[NODE]
    nodes.reset([], 1)
    d = core_pb2.Node.DESCRIPTOR
    mine = [nodes.watch("", EVERYTHING, parse_field_selector(f"metadata.name=n{i}", "Node", d), "1", False, False, 100)
            for i in range(3)]
    every = nodes.watch("", EVERYTHING, EVERY_FIELD, "1", False, False, 100)
    assert set(nodes._pinned) == {"n0", "n1", "n2"} and len(nodes._groups) == 1
    n1 = MakeNode().name("n1").obj()
    n1.metadata.resource_version = "2"
    cache.rev = 2
    ev = CacheEvent(2, "ADDED", NODE.key("", "n1"), n1, None)
    assert len(list(nodes._targets(ev))) == 2  # n1's group and the unfiltered one, not n0's or n2's
    nodes.apply(ev)
    for w in (mine[1], every):
        resp = core_pb2.NodeWatchResponse.FromString(await asyncio.wait_for(w.next_batch(), 1))
        assert [(e.type, e.object.metadata.name) for e in resp.events] == [("ADDED", "n1")]
    assert mine[0].pending == 0 and mine[2].pending == 0
    nodes.remove(mine[0])
    assert set(nodes._pinned) == {"n1", "n2"}


async def test_watch_from_a_version_replays_the_ring_and_too_old_is_gone():
    f = Feed(capacity=3)
    for rev in range(2, 7):
        f.put(MakePod().name(f"p{rev}").resource_version(str(rev)).obj())
    assert f.pods.start_rev == 3  # the ring holds 4, 5, 6
    w = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "4", False, False, 100)
    assert await _drain(w) == [("ADDED", "p5", "5"), ("ADDED", "p6", "6")]
    with pytest.raises(errors.Gone, match="too old resource version: 2"):
        f.pods.watch("default", EVERYTHING, EVERY_FIELD, "2", False, False, 100)


async def test_initial_events_then_bookmark_then_live():
    f = Feed()
    f.put(MakePod().name("a").resource_version("2").obj())
    w = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "", True, True, 100)
    f.put(MakePod().name("b").resource_version("3").obj())
    events = await _drain(w)
    assert events[0] == ("ADDED", "a", "2")
    assert events[1][0] == "BOOKMARK" and events[1][2] == "2"
    assert events[2] == ("ADDED", "b", "3")
    far = asyncio.get_running_loop().time() + 3600
    assert f.cache.bookmarks.send(f.cache.rev, far) == 0  # nothing new since rev 3: no bookmark
    assert w.pending == 0


async def test_each_watcher_gets_a_bookmark_a_frequency_after_its_start_then_every_frequency():
    f = Feed()
    f.cache.bookmarks.frequency = 60.0
    now = asyncio.get_running_loop().time()
    early = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "1", True, False, 100)
    late = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "1", True, False, 100)
    f.cache.bookmarks.buckets = {int(now + 60): [early], int(now + 90): [late]}  # started 30 s apart
    none = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "1", False, False, 100)  # did not ask for them
    f.cache.rev = 7  # another kind's write: the pods' watchers are behind the cache
    assert f.cache.bookmarks.send(7, now + 30) == 0
    assert f.cache.bookmarks.send(7, now + 61) == 1
    assert await _drain(early) == [("BOOKMARK", "", "7")] and late.pending == 0 and none.pending == 0
    assert f.cache.bookmarks.send(7, now + 91) == 1  # late's turn; early is at rev 7 already
    assert await _drain(late) == [("BOOKMARK", "", "7")]
    f.cache.rev = 9
    assert f.cache.bookmarks.send(9, now + 122) == 1  # early again, a minute after its first
    assert await _drain(early) == [("BOOKMARK", "", "9")]
    f.pods.remove(late)
    assert f.cache.bookmarks.send(9, now + 152) == 0  # a closed watcher is dropped from the schedule
    assert all(late not in ws for ws in f.cache.bookmarks.buckets.values())


async def test_delete_event_carries_the_deletion_revision():
    f = Feed()
    f.put(MakePod().name("a").resource_version("2").obj())
    w = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "2", False, False, 100)
    f.delete("a", 3)
    assert await _drain(w) == [("DELETED", "a", "3")]


async def test_a_watcher_that_falls_too_far_behind_is_cut_off():
    f = Feed()
    w = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "1", False, False, max_pending=3)
    for rev in range(2, 7):
        f.put(MakePod().name(f"p{rev}").resource_version(str(rev)).obj())
    assert w.closed and w.overflowed
    assert await w.next_batch() is None


async def test_a_busy_watcher_gets_many_events_per_message():
    """A watcher that was just sent a message waits out ``watch_batch_interval`` before the next,
    and everything that arrived meanwhile goes in that one message. (No timing is needed to see
    it: the events are put before the watcher runs again; the interval is a lower bound on the
    wait, which a loaded machine only lengthens.)"""
    f = Feed()
    f.cache.watch_batch_interval = 0.2
    w = f.pods.watch("default", EVERYTHING, EVERY_FIELD, "1", False, False, 1000)
    f.put(MakePod().name("a").resource_version("2").obj())
    assert len(await _drain(w)) == 1  # quiet before: goes out at once
    loop = asyncio.get_running_loop()
    sent = loop.time()
    for rev in range(3, 8):
        f.put(MakePod().name(f"p{rev}").resource_version(str(rev)).obj())
    assert [name for _, name, _ in await _drain(w)] == ["p3", "p4", "p5", "p6", "p7"]  # one message
    assert loop.time() - sent >= 0.2 * 0.99, "the next message did not wait out the interval"


def test_a_list_pinned_to_a_name_is_one_lookup_and_matches_as_a_scan():
    cache = WatchCache(etcd=None, watch_batch_interval=0)  # type: ignore[arg-type]
    nodes = cache[NODE]
    nodes.reset([(NODE.key("", f"n{i}"), MakeNode().name(f"n{i}").label("i", str(i)).obj()) for i in range(50)], 1)
    d = core_pb2.Node.DESCRIPTOR
    by_name = parse_field_selector("metadata.name=n7", "Node", d)
    assert [n.metadata.name for n in nodes.select("", EVERYTHING, by_name)] == ["n7"]
    assert nodes.select("", _labels("i=8"), by_name) == []  # the labels still count
    assert nodes.select("", EVERYTHING, parse_field_selector("metadata.name=absent", "Node", d)) == []
    nodes.store = _Unsorted(nodes.store)  # a lookup: the store is never walked
    assert [n.metadata.name for n in nodes.select("", EVERYTHING, by_name)] == ["n7"]
    f = Feed()
    f.put(MakePod().name("a").resource_version("2").obj())
    f.put(MakePod().name("b").resource_version("3").obj())
    pod_a = parse_field_selector("metadata.name=a", "Pod", core_pb2.Pod.DESCRIPTOR)
    assert [p.metadata.name for p in f.pods.select("default", EVERYTHING, pod_a)] == ["a"]
    assert [p.metadata.name for p in f.pods.select("", EVERYTHING, pod_a)] == ["a"]  # every namespace: a scan


class _Unsorted(dict):
    def __iter__(self):
        raise AssertionError("the store was walked")
