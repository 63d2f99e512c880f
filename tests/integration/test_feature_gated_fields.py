"""A field of a feature gate at a real apiserver (Kubernetes' dropDisabledFields): KEP-5836's
node ``spec.podPreemptionPolicy`` is served with SchedulerPreemptionForPodResize on; with it off
it is dropped from creates and from updates of nodes that did not already use it, and kept on the
nodes that did (the enablement rolled back: the same cluster's apiserver restarted without it)."""

from __future__ import annotations

import pytest

from machinery.api import core_pb2
from tests.harness.builders import MakeNode
from tests.harness.cluster import kill, start, start_cluster, stop_cluster

pytestmark = pytest.mark.integration

OWNER = "autoscaler.example.com"


def _policy(node: core_pb2.Node) -> list[str] | None:
    if not node.spec.HasField("pod_preemption_policy"):
        return None
    return list(node.spec.pod_preemption_policy.disable_resize_preemption)


async def test_pod_preemption_policy_is_served_by_the_gate_and_kept_where_in_use_after_a_rollback():
    tc = start_cluster(feature_gates="SchedulerPreemptionForPodResize=true")
    try:
        c = tc.client()
        try:
            stored = await c.nodes.create(MakeNode().name("in-use").disable_resize_preemption(OWNER).obj())
            assert _policy(stored) == [OWNER]
        finally:
            await c.close()

        kill(tc, "apiserver")  # the gate turned off: the last --feature-gates wins
        tc.process("apiserver").argv += ["--feature-gates", "SchedulerPreemptionForPodResize=false"]
        tc.state.save()
        start(tc, "apiserver")

        c = tc.client()
        try:
            # Created with the gate off: dropped.
            created = await c.nodes.create(MakeNode().name("new").disable_resize_preemption(OWNER).obj())
            assert _policy(created) is None
            assert _policy(await c.nodes.get("new")) is None
            # Added by an update to a node that did not use it: dropped.
            await c.nodes.patch("new", {"spec": {"podPreemptionPolicy": {"disableResizePreemption": [OWNER]}}})
            assert _policy(await c.nodes.get("new")) is None
            # Already in use: kept through an unrelated update, and may still change.
            await c.nodes.patch("in-use", {"metadata": {"labels": {"zone": "a"}}})
            node = await c.nodes.get("in-use")
            assert node.metadata.labels["zone"] == "a" and _policy(node) == [OWNER]
            await c.nodes.patch("in-use", {"spec": {"podPreemptionPolicy": {"disableResizePreemption": ["b.io/c"]}}})
            assert _policy(await c.nodes.get("in-use")) == ["b.io/c"]
        finally:
            await c.close()
    finally:
        stop_cluster(tc)
