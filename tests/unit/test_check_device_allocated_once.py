"""``kplane check``'s device-allocated-once rule on synthetic histories: a device is in at most one
ResourceClaim's allocation at any revision (Kubernetes docs: Dynamic Resource Allocation, "With
structured parameters": the scheduler tracks "which of those resources have already been allocated
to existing ResourceClaims" and selects "from those resources that remain")."""

from __future__ import annotations

from cli import check
from machinery.api import resource_pb2

NAME = "device-allocated-once"


def claim(name: str, *devices: str) -> resource_pb2.ResourceClaim:
    c = resource_pb2.ResourceClaim()
    c.metadata.name, c.metadata.namespace, c.metadata.uid = name, "default", f"uid-{name}"
    if devices:
        for d in devices:
            c.status.allocation.devices.results.add(request="gpu", driver="dra.kplane.dev", pool="node-1", device=d)
    return c


def entries(*steps: tuple[str, resource_pb2.ResourceClaim]) -> list[check.Entry]:
    return [check.Entry(rev, type_, "ResourceClaim", "default", c.metadata.name, c)
            for rev, (type_, c) in enumerate(steps, start=1)]


def violations(*steps: tuple[str, resource_pb2.ResourceClaim]) -> list[check.Violation]:
    return check.check_entries(entries(*steps), [check.DeviceAllocatedOnce()])


def test_a_device_freed_by_deallocation_or_deletion_may_go_to_another_claim():
    assert violations(("ADDED", claim("a")), ("MODIFIED", claim("a", "gpu-0")), ("ADDED", claim("b")),
                      ("MODIFIED", claim("a")),  # deallocated by the resourceclaim controller
                      ("MODIFIED", claim("b", "gpu-0")),
                      ("ADDED", claim("c")), ("DELETED", claim("b", "gpu-0")), ("MODIFIED", claim("c", "gpu-0")),
                      ("MODIFIED", claim("c", "gpu-0"))) == []


def test_two_claims_holding_one_device_at_once_is_a_violation():
    [v] = violations(("MODIFIED", claim("a", "gpu-0", "gpu-1")), ("MODIFIED", claim("b", "gpu-1")))
    assert (v.rule, v.rev) == (NAME, 2)
    assert v.message == "device dra.kplane.dev/node-1/gpu-1 allocated to claim default/b while claim default/a holds it"


def test_the_rule_is_one_of_kplane_checks_rules():
    assert NAME in [r.name for r in check.rules()]
