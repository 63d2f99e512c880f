"""Whether the kubelet restarts a container that exited: the pod's restartPolicy, or with
container restart rules (KEP-5307 "Container Restart Rules", gate ContainerRestartRules) the
container's own.

In order: a sidecar (an init container with ``restartPolicy: Always``) always restarts; the first
of the container's ``restartPolicyRules`` whose ``exitCodes`` hold decides (its action, Restart);
else the container's ``restartPolicy``; else the pod's. Always restarts whatever the exit code,
OnFailure on a non-zero one, Never not at all. A regular init container that succeeded is done
whatever the policy (its callers check that first): a failed one is retried under Always as
under OnFailure. With the gate off the kubelet reads the pod's policy only, as a kubelet that
predates the rules does.
"""

from __future__ import annotations

from machinery import resources
from machinery.api import core_pb2


def rule_says_restart(c: core_pb2.Container, exit_code: int) -> bool | None:
    """The first rule whose exit codes hold: True for Restart; None when no rule holds."""
    for rule in c.restart_policy_rules:
        codes = rule.exit_codes
        if (exit_code in codes.values) == (codes.operator == "In"):
            return rule.action == "Restart"
    return None


def policy_of(pod: core_pb2.Pod, c: core_pb2.Container, container_rules: bool = True) -> str:
    """The restart policy that applies to the container: its own with the gate, else the pod's."""
    if container_rules and c.HasField("restart_policy") and not resources.is_restartable_init_container(c):
        return c.restart_policy
    return pod.spec.restart_policy or "Always"


def will_restart(pod: core_pb2.Pod, c: core_pb2.Container, exit_code: int, container_rules: bool = True) -> bool:
    """Whether a container that exited with ``exit_code`` is started again (its back-off aside)."""
    if resources.is_restartable_init_container(c):
        return True
    if container_rules:
        decided = rule_says_restart(c, exit_code)
        if decided is not None:
            return decided
    policy = policy_of(pod, c, container_rules)
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)
