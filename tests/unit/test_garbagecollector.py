"""Garbage collection without processes: the apiserver's side of propagation (the finalizers a
delete's propagationPolicy gives, Kubernetes' deletionFinalizersForGarbageCollection), kubectl's
--cascade, and the garbage collector's graph and workers over an API played in memory."""

from __future__ import annotations

import pytest

from apiserver.registry import deletion_finalizers
from cli.main import UsageError, cascade_policy
from machinery.api import apps_pb2


def _rs(*finalizers: str) -> apps_pb2.ReplicaSet:
    rs = apps_pb2.ReplicaSet()
    rs.metadata.name = "web"
    rs.metadata.finalizers.extend(finalizers)
    return rs


# ---------------------------------------------------------------- the apiserver's finalizers


@pytest.mark.parametrize("finalizers, policy, want", [
    ((), None, None),  # Background by default: nothing to wait for, removed at once
    ((), "Background", None),
    ((), "Foreground", ["foregroundDeletion"]),
    ((), "Orphan", ["orphan"]),
    (("example.com/keep",), "Orphan", ["example.com/keep", "orphan"]),
    (("orphan",), None, None),  # a finalizer already there decides when no policy is given
    (("foregroundDeletion",), None, None),
    (("orphan",), "Foreground", ["foregroundDeletion"]),  # an explicit policy overrides it
    (("foregroundDeletion",), "Background", []),
    (("example.com/keep", "foregroundDeletion"), "Orphan", ["example.com/keep", "orphan"]),
])
def test_a_deletes_propagation_policy_becomes_the_collectors_finalizer(finalizers, policy, want):
    assert deletion_finalizers(_rs(*finalizers), policy) == want


@pytest.mark.parametrize("flag, want", [("background", "Background"), ("foreground", "Foreground"),
                                        ("orphan", "Orphan"), ("true", "Background"), ("false", "Orphan")])
def test_cascade_is_kubectls_flag(flag, want, capsys):
    assert cascade_policy(flag) == want
    if flag in ("true", "false"):
        assert "is deprecated (boolean value) and can be replaced with --cascade=" in capsys.readouterr().err


def test_an_unknown_cascade_value_is_refused_with_kubectls_message():
    with pytest.raises(UsageError, match=r'invalid cascade value \(all\). Must be "background", "foreground", '
                                         r'or "orphan"'):
        cascade_policy("all")
