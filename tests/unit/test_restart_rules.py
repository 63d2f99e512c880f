"""kubelet/restart_rules.py and the pod phase (kubelet/status.py) with KEP-5307's container restart
rules: a container's own restartPolicy and restartPolicyRules in place of the pod's."""

from __future__ import annotations

import pytest

from kubelet.restart_rules import will_restart
from kubelet.status import ContainerView, PodView, phase
from machinery import jsonconv
from machinery.api import core_pb2


def pod(policy: str = "Never", container: dict | None = None, init: dict | None = None) -> core_pb2.Pod:
    spec: dict = {"restartPolicy": policy, "containers": [{"name": "c1", **(container or {})}]}
    if init is not None:
        spec["initContainers"] = [{"name": "init", **init}]
    return jsonconv.from_dict(core_pb2.Pod, {"metadata": {"name": "p"}, "spec": spec})


RESTART_ON_42 = {"restartPolicy": "Never",
                 "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]}


@pytest.mark.parametrize("pod_policy,container,code,want", [
    ("Always", {}, 0, True), ("OnFailure", {}, 0, False), ("OnFailure", {}, 1, True), ("Never", {}, 1, False),
    ("Never", {"restartPolicy": "OnFailure"}, 1, True),  # the container's own policy wins
    ("Always", {"restartPolicy": "Never"}, 0, False),
    ("Never", RESTART_ON_42, 42, True), ("Never", RESTART_ON_42, 1, False),
    ("Always", RESTART_ON_42, 0, False),  # no rule holds: the container's Never, not the pod's Always
    ("Never", {"restartPolicy": "Never", "restartPolicyRules": [
        {"action": "Restart", "exitCodes": {"operator": "NotIn", "values": [0, 2]}}]}, 3, True),
])
def test_will_restart(pod_policy, container, code, want):
    p = pod(pod_policy, container)
    assert will_restart(p, p.spec.containers[0], code) is want


def test_without_the_gate_only_the_pods_policy_counts_and_a_sidecar_always_restarts():
    p = pod("Never", RESTART_ON_42)
    assert not will_restart(p, p.spec.containers[0], 42, container_rules=False)
    sidecar = pod("Never", init={"restartPolicy": "Always"})
    assert will_restart(sidecar, sidecar.spec.init_containers[0], 0)


def _view(**containers: ContainerView) -> PodView:
    return PodView(sandbox_ready=True, containers=dict(containers))


def test_the_phase_follows_each_containers_policy():
    p = pod("Never", RESTART_ON_42)
    exited_42 = ContainerView("c1", state="exited", exit_code=42)
    assert phase(p, _view(c1=exited_42)) == "Running"  # it will be started again
    assert phase(p, _view(c1=exited_42), container_rules=False) == "Failed"
    assert phase(p, _view(c1=ContainerView("c1", state="exited", exit_code=1))) == "Failed"
    assert phase(p, _view(c1=ContainerView("c1", state="exited", exit_code=0))) == "Succeeded"
    waiting = PodView(sandbox_ready=True, previous={"c1": exited_42})
    assert phase(p, waiting) == "Running"


def test_a_failed_init_container_with_its_own_policy_keeps_the_pod_pending():
    p = pod("Never", init={"restartPolicy": "OnFailure"})
    failed_init = ContainerView("init", state="exited", exit_code=1)
    assert phase(p, _view(init=failed_init)) == "Pending"
    plain = pod("Never", init={})
    assert phase(plain, _view(init=failed_init)) == "Failed"
