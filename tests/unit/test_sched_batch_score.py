"""BatchScorePlugin: a plugin's score_nodes gives exactly the scores its score gives node by node,
and the framework uses it."""

from __future__ import annotations

import random

import pytest

from scheduler.framework.node_info import NodeInfo
from scheduler.framework.types import CycleState
from scheduler.plugins.node_resources_balanced_allocation import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
)
from scheduler.plugins.node_resources_fit import NodeResourcesFit, NodeResourcesFitArgs, decode_args
from scheduler.plugins.taint_toleration import TaintToleration
from tests.harness.builders import MakeNode, MakePod


def _nodes(n: int, seed: int) -> list[NodeInfo]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        node = MakeNode().name(f"n{i}")
        if i % 7 == 3:
            node = node.allocatable(cpu="0", memory="8Gi", pods="110")  # no cpu: the per-node path
        else:
            node = node.allocatable(cpu=str(rng.choice([2, 4, 8])), memory=f"{rng.choice([4, 8, 32])}Gi", pods="110")
        if i % 5 == 1:
            node = node.taint("soft", "x", "PreferNoSchedule")
        if i % 11 == 2:
            node = node.taint("hard", "y", "NoSchedule").taint("soft2", "", "PreferNoSchedule")
        ni = NodeInfo(node.obj())
        for k in range(rng.randrange(0, 6)):
            ni.add_pod(MakePod().name(f"p{i}-{k}").uid(f"u{i}-{k}").node(f"n{i}")
                       .req(cpu=f"{rng.randrange(0, 2000)}m", memory=f"{rng.randrange(0, 3000)}Mi").obj())
        out.append(ni)
    return out


PODS = [
    MakePod().name("small").req(cpu="100m", memory="500Mi").obj(),
    MakePod().name("big").req(cpu="3", memory="20Gi").obj(),
    MakePod().name("cpu-only").req(cpu="250m").obj(),
    MakePod().name("tolerates").req(cpu="100m", memory="64Mi")
    .toleration("soft", "Equal", "x", "PreferNoSchedule").obj(),
]
PLUGINS = {
    "fit-least": lambda: NodeResourcesFit(NodeResourcesFitArgs()),
    "fit-most": lambda: NodeResourcesFit(decode_args({"scoringStrategy": {"type": "MostAllocated"}})),
    "balanced": lambda: NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs()),
    "taints": lambda: TaintToleration(),
}


@pytest.mark.parametrize("plugin", sorted(PLUGINS))
@pytest.mark.parametrize("pod", PODS, ids=[p.metadata.name for p in PODS])
@pytest.mark.parametrize("prescored", [True, False])
def test_score_nodes_equals_score_node_by_node(plugin, pod, prescored):
    pl = PLUGINS[plugin]()
    nodes = _nodes(60, seed=hash((plugin, pod.metadata.name)) & 0xFFFF)
    state = CycleState()
    if prescored and hasattr(pl, "pre_score"):
        pl.pre_score(state, pod, nodes)
    one_by_one = [pl.score(state, pod, ni)[0] for ni in nodes]
    batch = pl.score_nodes(state, pod, nodes)
    if batch is None:  # the batch declined: the framework scores one by one
        assert plugin == "balanced" and not prescored
    else:
        assert batch == one_by_one
    assert len(set(one_by_one)) > 1 or plugin == "taints"  # the inputs vary the scores
