"""PrioritySort: higher spec.priority first, then the earlier queue timestamp."""

from __future__ import annotations

from scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from scheduler.plugins import priority_sort
from tests.harness.builders import MakePod


def queued(name: str, priority: int | None, timestamp: float) -> QueuedPodInfo:
    pod = MakePod().name(name).obj()
    if priority is not None:
        pod.spec.priority = priority
    return QueuedPodInfo(PodInfo(pod), timestamp)


def test_the_higher_priority_goes_first_whatever_the_timestamps():
    pl = priority_sort.new({}, None)
    high, low = queued("high", 1000, 20.0), queued("low", 10, 10.0)
    assert pl.less(high, low)
    assert not pl.less(low, high)


def test_equal_priorities_go_in_queue_order():
    pl = priority_sort.new({}, None)
    first, second = queued("first", 5, 10.0), queued("second", 5, 11.0)
    assert pl.less(first, second)
    assert not pl.less(second, first)
    assert not pl.less(first, first)  # a strict order


def test_a_pod_without_priority_counts_as_zero():
    pl = priority_sort.new({}, None)
    none, negative, positive = queued("none", None, 10.0), queued("neg", -1, 1.0), queued("pos", 1, 20.0)
    assert pl.less(none, negative)
    assert pl.less(positive, none)
    assert pl.less(none, queued("zero-later", 0, 11.0))


def test_sorting_a_queue():
    pl = priority_sort.new({}, None)
    pods = [queued("a", 0, 3.0), queued("b", 100, 5.0), queued("c", 0, 1.0), queued("d", 100, 4.0)]
    ordered = []
    rest = list(pods)
    while rest:  # selection by less(), as a heap would pop them
        best = rest[0]
        for p in rest[1:]:
            if pl.less(p, best):
                best = p
        rest.remove(best)
        ordered.append(best.pod.metadata.name)
    assert ordered == ["d", "b", "c", "a"]
    assert pl.name == priority_sort.NAME == "PrioritySort"
