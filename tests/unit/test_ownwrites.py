"""controllers/ownwrites.py: a controller's writes held against what its informer shows."""

from __future__ import annotations

from controllers.ownwrites import OwnWrites
from machinery.api import apps_pb2


def _rs(name: str, rv: int) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet()
    rs.metadata.name, rs.metadata.uid, rs.metadata.resource_version = name, f"uid-{name}", str(rv)
    return rs


def test_a_write_is_behind_until_the_cache_shows_it_or_a_later_version():
    own = OwnWrites()
    own.wrote("default/web", _rs("web-a", 10))
    own.wrote("default/web", _rs("web-b", 11))  # created: not in the cache at all yet
    assert own.behind("default/web", [_rs("web-a", 9)]) == ["web-a", "web-b"]
    assert own.behind("default/web", [_rs("web-a", 10)]) == ["web-b"]
    assert own.behind("default/web", [_rs("web-a", 9), _rs("web-b", 12)]) == []  # forgotten once shown
    assert own.behind("default/other", []) == []


def test_a_deleted_object_or_an_old_write_holds_nothing_back():
    clock = [0.0]
    own = OwnWrites(timeout=300, clock=lambda: clock[0])
    own.wrote("default/web", _rs("web-a", 10))
    own.wrote("default/web", _rs("web-b", 11))
    own.deleted("uid-web-a")
    assert own.behind("default/web", []) == ["web-b"]
    clock[0] = 301
    assert own.behind("default/web", []) == []
    own.wrote("default/web", _rs("web-c", 12))
    own.forget("default/web")
    assert own.behind("default/web", []) == []
