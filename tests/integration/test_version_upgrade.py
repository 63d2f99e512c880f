"""A downgrade and an upgrade in place (issue 22, point 6): ``kplane restart COMPONENT
--emulated-version V [--feature-gates G]`` on a running cluster, in the order the version skew
policy allows (a downgrade takes the scheduler first, the apiserver last; an upgrade the other
way), and what happens to an object written under the newer release: KEP-5836's node
``spec.podPreemptionPolicy``, written at 1.37 with the gate on, survives the apiserver's
downgrade to 1.36 (Kubernetes' dropDisabledFields keeps a field in use) while no node can gain it
there; back at 1.37 one can again."""

from __future__ import annotations

import pytest

from cli import cluster
from machinery import errors
from machinery.api import core_pb2
from tests.harness.api import resize
from tests.harness.builders import MakeNode, MakePod
from tests.harness.cluster import start_cluster, stop_cluster
from tests.harness.metrics import series

pytestmark = pytest.mark.integration

GATE = "SchedulerPreemptionForPodResize=true"
OWNER = "autoscaler.example.com"


def _policy(node: core_pb2.Node) -> list[str] | None:
    if not node.spec.HasField("pod_preemption_policy"):
        return None
    return list(node.spec.pod_preemption_policy.disable_resize_preemption)


def _restart(tc, component: str, release: str, gates: str):
    return tc.kplane("restart", component, "--emulated-version", release, "--feature-gates", gates)


def _gate_exported(tc, component: str) -> bool:
    """Whether the component's release has the KEP-5836 gate (it exports only the gates it has)."""
    return any('name="SchedulerPreemptionForPodResize"' in key
               for key in series(tc, component, "kubernetes_feature_enabled"))


async def test_a_downgrade_keeps_what_the_newer_release_wrote_and_an_upgrade_serves_it_again():
    tc = start_cluster(schedulers=1, version="1.37", apiserver_args=[f"--feature-gates={GATE}"],
                       scheduler_args=[f"--feature-gates={GATE}"])
    try:
        c = tc.client()
        try:
            assert _policy(await c.nodes.create(MakeNode().name("in-use").disable_resize_preemption(OWNER).obj())) \
                == [OWNER]
        finally:
            await c.close()

        # The apiserver may not go first: a 1.37 scheduler beside a 1.36 apiserver breaks the policy.
        refused = _restart(tc, "apiserver", "1.36", "")
        assert refused.returncode != 0
        assert "scheduler: the kube-scheduler version 1.37 is newer than the apiserver's 1.36" in refused.stderr
        assert _gate_exported(tc, "apiserver"), "a refused restart left the apiserver as it was"
        # Nor may a 1.36 component keep the 1.37 gate.
        refused = _restart(tc, "scheduler", "1.36", GATE)
        assert "feature is PreAlpha at emulated version 1.36" in refused.stderr
        for component in ("scheduler", "apiserver"):
            done = _restart(tc, component, "1.36", "")
            assert done.returncode == 0, done.stderr
        tc.reload()
        saved = cluster.ClusterState.load(tc.data_dir)
        assert saved is not None and saved.processes["apiserver"].argv[-4:] == [
            "--emulated-version", "1.36", "--feature-gates", ""]
        assert not _gate_exported(tc, "apiserver") and not _gate_exported(tc, "scheduler")

        c = tc.client()
        try:
            await c.nodes.patch("in-use", {"metadata": {"labels": {"zone": "a"}}})
            kept = await c.nodes.get("in-use")
            assert kept.metadata.labels["zone"] == "a" and _policy(kept) == [OWNER]
            assert _policy(await c.nodes.create(MakeNode().name("new").disable_resize_preemption(OWNER).obj())) is None
            await c.nodes.patch("new", {"spec": {"podPreemptionPolicy": {"disableResizePreemption": [OWNER]}}})
            assert _policy(await c.nodes.get("new")) is None
        finally:
            await c.close()

        for component in ("apiserver", "scheduler"):
            done = _restart(tc, component, "1.37", GATE)
            assert done.returncode == 0, done.stderr
        c = tc.client()
        try:
            await c.nodes.patch("new", {"spec": {"podPreemptionPolicy": {"disableResizePreemption": [OWNER]}}})
            assert _policy(await c.nodes.get("new")) == [OWNER]
            assert _policy(await c.nodes.get("in-use")) == [OWNER]
        finally:
            await c.close()
    finally:
        stop_cluster(tc)


async def test_an_apiserver_of_a_release_before_the_resize_subresource_does_not_serve_it():
    """The resize subresource came with in-place resize's beta, 1.33: a 1.32 apiserver answers
    404 as for any path it does not have; upgraded in place to 1.33 it serves it."""
    tc = start_cluster(version="1.32")
    try:
        c = tc.client()
        try:
            await c.pods.create(MakePod().name("p").req(cpu="100m", memory="64Mi").node("nowhere").obj())
            with pytest.raises(errors.NotFound, match="the server could not find the requested resource"):
                await resize(c, "p", cpu="200m")
        finally:
            await c.close()
        done = _restart(tc, "apiserver", "1.33", "")
        assert done.returncode == 0, done.stderr
        c = tc.client()
        try:
            resized = await resize(c, "p", cpu="200m")  # served now
            assert resized.spec.containers[0].resources.requests["cpu"] == "200m"
        finally:
            await c.close()
    finally:
        stop_cluster(tc)
