"""KEP-1287 Test Plan, "Patch error tests": eleven resize patches the API server must reject.

Each case runs against a real apiserver: a pod is created (and, where the e2e waits for start,
reported running by its kubelet with status resources, as a kubelet with in-place resize does),
then patched through the ``resize`` subresource with a strategic merge patch shaped as
Kubernetes' e2e builds it. The error must carry the e2e's message, and the pod must be unchanged.
Values are the e2e's: cpu 20m (limit 30m), increased 25m (limit 35m); memory 35Mi (limit 45Mi),
increased 40Mi (limit 50Mi).
"""

from __future__ import annotations

import pytest

from machinery import errors
from tests.harness.builders import MakePod, mark_running_and_ready

pytestmark = pytest.mark.scenario

ORIGINAL_CPU, ORIGINAL_CPU_LIMIT, INCREASED_CPU, INCREASED_CPU_LIMIT = "20m", "30m", "25m", "35m"
ORIGINAL_MEM, ORIGINAL_MEM_LIMIT, INCREASED_MEM, INCREASED_MEM_LIMIT = "35Mi", "45Mi", "40Mi", "50Mi"
QOS_ERROR = "Pod QOS Class may not change as a result of resizing"
REORDER_ERROR = ("spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize, "
                 "spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize")


def _patch(*containers: dict, **spec) -> dict:
    return {"spec": {**({"containers": list(containers)} if containers else {}), **spec}}


def _c(name: str, **resources) -> dict:
    return {"name": name, "resources": resources}


CASES = [
    # (name, containers (name, requests, limits), init containers (name, requests, limits, restartPolicy),
    #  patch, expected message, wait for start)
    ("BestEffort pod - request memory", [("c1", {}, {})], [],
     _patch(_c("c1", requests={"memory": ORIGINAL_MEM})), QOS_ERROR, True),
    ("BestEffort pod - request cpu", [("c1", {}, {})], [],
     _patch(_c("c1", requests={"cpu": ORIGINAL_CPU})), QOS_ERROR, True),
    ("Guaranteed pod - remove cpu & memory limits",
     [("c1", {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM}, {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM})], [],
     _patch(_c("c1", limits=None)), "resource limits cannot be removed", True),
    ("Burstable pod - remove cpu & memory limits + increase requests",
     [("c1", {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM},
       {"cpu": INCREASED_CPU_LIMIT, "memory": INCREASED_MEM_LIMIT})], [],
     _patch(_c("c1", limits=None, requests={"cpu": INCREASED_CPU, "memory": INCREASED_MEM})),
     "resource limits cannot be removed", True),
    ("Burstable pod - remove memory requests", [("c1", {"memory": ORIGINAL_MEM}, {})], [],
     _patch(_c("c1", requests=None)), "resource requests cannot be removed", True),
    ("Burstable pod - remove cpu requests", [("c1", {"cpu": ORIGINAL_CPU}, {})], [],
     _patch(_c("c1", requests=None)), "resource requests cannot be removed", True),
    ("Burstable pod - reorder containers", [("c1", {"cpu": ORIGINAL_CPU}, {}), ("c2", {"cpu": ORIGINAL_CPU}, {})], [],
     _patch(**{"$setElementOrder/containers": [{"name": "c2"}, {"name": "c1"}]}), REORDER_ERROR, True),
    ("Guaranteed pod - rename containers",
     [(n, {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM}, {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM})
      for n in ("c1-old", "c2-old")], [],
     _patch(*[{"name": n, "image": "registry.k8s.io/pause:3.10",
               "resources": {"requests": {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM},
                             "limits": {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM}}} for n in ("c1-new", "c2-new")],
            {"$patch": "delete", "name": "c1-old"}, {"$patch": "delete", "name": "c2-old"},
            **{"$setElementOrder/containers": [{"name": "c1-new"}, {"name": "c2-new"}]}),
     REORDER_ERROR, True),
    ("Burstable pod - set requests == limits",
     [("c1", {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM},
       {"cpu": INCREASED_CPU_LIMIT, "memory": INCREASED_MEM_LIMIT})], [],
     _patch(_c("c1", requests={"cpu": INCREASED_CPU_LIMIT, "memory": INCREASED_MEM_LIMIT})), QOS_ERROR, True),
    ("Burstable pod - resize ephemeral storage",
     [("c1", {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM, "ephemeral-storage": "1"}, {})], [],
     _patch(_c("c1", requests={"ephemeral-storage": "3"})), "only cpu and memory resources are mutable", True),
    ("Burstable pod - nonrestartable initContainer", [("c1", {}, {})],
     [("c1-init", {"cpu": ORIGINAL_CPU, "memory": ORIGINAL_MEM}, {}, None)],  # no restartPolicy: not a sidecar
     {"spec": {"initContainers": [_c("c1-init", requests={"cpu": INCREASED_CPU, "memory": INCREASED_MEM})]}},
     "resources for non-sidecar init containers are immutable", False),
]


@pytest.mark.parametrize("name,containers,inits,patch,message,wait_for_start", CASES, ids=[c[0] for c in CASES])
async def test_kep1287_patch_error(kcluster, client, name, containers, inits, patch, message, wait_for_start):
    pod_name = "pe-" + "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")[:50].strip("-")
    builder = MakePod().name(pod_name)
    for cname, requests, limits in containers:
        builder.container(cname).req(requests).lim(limits)
    for cname, requests, limits, restart in inits:
        builder.init_container(cname, restart).req(requests).lim(limits)
    pod = await client.pods.create(builder.obj())
    if wait_for_start:
        kubelet = kcluster.client("system:node:node-1")
        try:
            bound = await client.pods.bind(pod_name, "node-1")
            pod = await kubelet.pods.update_status(mark_running_and_ready(bound))
        finally:
            await kubelet.close()
    with pytest.raises(errors.Invalid) as exc:
        await client.pods.patch(pod_name, patch, subresource="resize")
    assert message in exc.value.message
    after = await client.pods.get(pod_name)
    assert after.spec == pod.spec, "a rejected resize must change nothing"
    assert after.metadata.resource_version == pod.metadata.resource_version
