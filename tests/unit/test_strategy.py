"""apiserver.strategy: every kind has its strategy, which holds the kind's validation."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver import strategy
from machinery.kinds import KINDS, Kind, lookup


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_kind_has_a_strategy_with_its_validation(kind: Kind[Any, Any]) -> None:
    s = strategy.for_kind(kind)
    assert s.kind is kind
    assert callable(s.validate) and callable(s.validate_update)
    empty = kind.message()
    if kind.has_status:  # a status subresource validates its writes
        assert isinstance(s.validate_status_update(empty, empty), list)
    else:
        with pytest.raises(ValueError, match=f"{kind.name} has no status subresource"):
            s.validate_status_update(empty, empty)


def test_validation_by_kind_name_takes_what_kubectl_takes() -> None:
    pod = lookup("po").message()
    assert strategy.validate_create("pods", pod) == strategy.for_kind(lookup("Pod")).validate(pod)
    assert any("metadata.name" in str(e) for e in strategy.validate_create("po", pod))
