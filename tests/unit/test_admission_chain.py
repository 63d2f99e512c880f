"""apiserver/admission/interfaces.py: the chain's two passes, its order, and its metric."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY

from apiserver.admission.interfaces import AdmissionChain, Attributes, Operation
from apiserver.auth import User
from machinery import errors
from machinery.kinds import POD
from tests.harness.builders import MakePod

USER = User("someone")


class Step:
    def __init__(self, name: str, log: list[str], refuse: str = ""):
        self.name, self._log, self._refuse = name, log, refuse


class Mutating(Step):
    async def admit(self, a: Attributes) -> None:
        self._log.append(f"{self.name}.admit")
        a.object.metadata.labels[self.name] = "admitted"
        if self._refuse == "admit":
            raise errors.Forbidden("no")


class Validating(Step):
    async def validate(self, a: Attributes) -> None:
        self._log.append(f"{self.name}.validate")
        if self._refuse == "validate":
            raise errors.Forbidden("no")


class Both(Mutating, Validating):
    pass


def attrs() -> Attributes:
    return Attributes(Operation.CREATE, POD, "", "default", "p", MakePod().name("p").obj(), None, USER)


async def test_each_pass_runs_its_plugins_in_the_chains_order():
    log: list[str] = []
    chain = AdmissionChain([Validating("A", log), Both("B", log), Mutating("C", log)])
    assert chain.names == ["A", "B", "C"]
    a = attrs()
    await chain.admit(a)
    await chain.validate(a)
    assert log == ["B.admit", "C.admit", "A.validate", "B.validate"]
    assert dict(a.object.metadata.labels) == {"B": "admitted", "C": "admitted"}


async def test_a_refusal_stops_the_pass_and_is_counted():
    log: list[str] = []
    chain = AdmissionChain([Mutating("Refuser", log, refuse="admit"), Mutating("Later", log)])
    labels = {"name": "Refuser", "operation": "CREATE", "rejected": "true", "type": "admit"}
    before = REGISTRY.get_sample_value("apiserver_admission_controller_admission_duration_seconds_count", labels) or 0
    with pytest.raises(errors.Forbidden):
        await chain.admit(attrs())
    assert log == ["Refuser.admit"]
    assert REGISTRY.get_sample_value("apiserver_admission_controller_admission_duration_seconds_count", labels) == \
        before + 1


def test_a_plugin_named_twice_is_refused():
    with pytest.raises(ValueError, match="named twice"):
        AdmissionChain([Mutating("A", []), Validating("A", [])])


def test_the_verb_is_the_subresource_or_the_operation():
    a = attrs()
    assert a.verb == "create"
    a.operation, a.subresource = Operation.UPDATE, "resize"
    assert a.verb == "resize"
