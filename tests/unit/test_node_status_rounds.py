"""The kubelet's node status rounds: a round whose inputs (the Node as last written, the config, the
conditions) are those of a round that found nothing to write is skipped; any change of them, a due
report, or ``force`` runs the round again."""

from __future__ import annotations

import itertools

from kubelet.node import Conditions, NodeAgent, NodeConfig
from machinery.api import core_pb2


class _Nodes:
    """``client.nodes``: every write returns a fresh copy with a new resourceVersion."""

    def __init__(self) -> None:
        self.stored: core_pb2.Node | None = None
        self.writes: list[str] = []
        self._rv = itertools.count(1)

    def _store(self, node: core_pb2.Node, what: str) -> core_pb2.Node:
        out = core_pb2.Node()
        out.CopyFrom(node)
        out.metadata.resource_version = str(next(self._rv))
        self.stored = out
        self.writes.append(what)
        copy = core_pb2.Node()
        copy.CopyFrom(out)
        return copy

    async def create(self, node: core_pb2.Node) -> core_pb2.Node:
        return self._store(node, "create")

    async def get(self, name: str) -> core_pb2.Node:
        assert self.stored is not None
        copy = core_pb2.Node()
        copy.CopyFrom(self.stored)
        return copy

    async def update_status(self, node: core_pb2.Node) -> core_pb2.Node:
        return self._store(node, "status")

    async def update(self, node: core_pb2.Node) -> core_pb2.Node:
        return self._store(node, "update")


class _Client:
    def __init__(self) -> None:
        self.nodes = _Nodes()


async def test_an_unchanged_round_is_skipped_and_any_change_of_its_inputs_runs_it():
    client = _Client()
    state = Conditions()
    agent = NodeAgent(client, NodeConfig("n1"), lambda: state)  # type: ignore[arg-type]
    await agent.register()
    assert client.nodes.writes == ["create", "status"]
    computed = 0
    real_inputs = agent._inputs

    def counting(c: Conditions) -> tuple[object, ...]:
        nonlocal computed
        computed += 1
        return real_inputs(c)

    agent._inputs = counting  # type: ignore[method-assign]
    written = agent.node
    await agent.update_status()
    assert client.nodes.writes == ["create", "status"], "nothing changed: nothing written"
    assert agent._settled is not None and agent._settled[0] is written

    before = agent._settled
    await agent.update_status()
    assert agent._settled is before and computed == 2, "the same inputs: the round is skipped"

    state.memory_pressure = True  # a condition: status and the pressure taint written
    await agent.update_status()
    assert client.nodes.writes == ["create", "status", "status", "update"]
    mp = {c.type: c for c in client.nodes.stored.status.conditions}["MemoryPressure"]
    assert mp.status == "True"
    assert [t.key for t in client.nodes.stored.spec.taints] == ["node.kubernetes.io/memory-pressure"]
    await agent.update_status()
    assert len(client.nodes.writes) == 4, "settled again: nothing to write"

    agent.node = await client.nodes.get("n1")  # a fresh read: another object, the round runs
    settled = agent._settled
    await agent.update_status()
    assert agent._settled is not settled and agent._settled[0] is agent.node and len(client.nodes.writes) == 4

    agent._last_report -= agent.status_report_interval  # a report due: written though unchanged
    await agent.update_status()
    assert client.nodes.writes[-1] == "status" and len(client.nodes.writes) == 5

    await agent.update_status(force=True)
    assert len(client.nodes.writes) == 6, "force writes"

    agent.cfg.declared_features = ("SomeFeature",)  # the config: the status changes
    await agent.update_status()
    assert list(client.nodes.stored.status.declared_features) == ["SomeFeature"]
