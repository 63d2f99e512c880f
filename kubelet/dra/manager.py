"""Prepares a pod's ResourceClaims before its containers start (Kubernetes' pkg/kubelet/cm/dra).

- ``DRAManager.prepare_resources``: in the pod's sync, each claim checked and prepared, or the pod
  waits (``NotReady``);
- ``DRAManager._check_node``: the claim's allocation is for this node and its drivers run here;
- ``DRAManager.unprepare_resources``: when the pod's containers have stopped for good.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kubelet.dra.driver import DRIVER_NAME, FakeDriver, PrepareError
from machinery import errors
from machinery.api import core_pb2, resource_pb2
from machinery.client import Client
from machinery.dra import resourceclaim as rc
from machinery.informer import key_of
from machinery.logging import get_logger
from machinery.placement import NodeSelector

log = get_logger()

# The reason of the Warning event, and of the waiting containers, while a pod's claims are not ready.
FAILED_PREPARE = "FailedPrepareDynamicResources"


class NotReady(Exception):
    """The pod's claims cannot be prepared now; the message says why."""


@dataclass
class _ClaimInfo:
    """A claim prepared on this node: its key and the pods (uids) of this node using it."""

    key: str
    pods: set[str] = field(default_factory=set)


class DRAManager:
    """One node's claims: prepared for its pods, unprepared when the last of them ends.

    Claims prepared are kept in memory (Kubernetes checkpoints them); after a restart a running
    pod's claims are prepared again at its first sync, which reads them from the API as the first
    time.
    """

    def __init__(self, node: str, client: Client, driver: FakeDriver | None,
                 node_object: Callable[[], core_pb2.Node | None]):
        self._node = node
        self._client = client
        self._driver = driver
        self._node_object = node_object
        self._claims: dict[str, _ClaimInfo] = {}  # claim uid -> what uses it
        self._pods: dict[str, list[str]] = {}  # pod uid -> its prepared claims' uids

    def prepared(self, pod_uid: str) -> bool:
        return pod_uid in self._pods

    async def prepare_resources(self, pod: core_pb2.Pod) -> None:
        """Prepare every claim of the pod, once; NotReady when one is not allocated to this node
        and reserved for the pod (or cannot be read).

        Runs in the pod's sync, after admission and before any container is created. For each entry
        of ``spec.resourceClaims`` it resolves the claim (a template's through
        ``status.resourceClaimStatuses``, which the resourceclaim controller writes), reads it from
        the API, and requires, as Kubernetes' manager does, that:

        - it exists and, when generated from a template, was generated for this pod;
        - it is reserved for the pod (``status.reservedFor``; the scheduler's PreBind reserved it) —
          ``pod web(uid) is not allowed to use resource claim c(uid)``;
        - its allocation is for this node and every driver it names runs on this node
          (``_check_node``), and the driver accepts the devices.

        Then the driver prepares it. Anything missing is not an error of the pod: it waits, and the
        sync tries again (Kubernetes docs: Dynamic Resource Allocation, "Pre-scheduled Pods": "the
        kubelet will fail to run the Pod and re-check periodically").
        """
        uid = pod.metadata.uid
        if not pod.spec.resource_claims or uid in self._pods:
            return
        claims: list[resource_pb2.ResourceClaim] = []
        for pod_claim in pod.spec.resource_claims:
            try:
                resolved = rc.claim_name(pod, pod_claim)
            except rc.ClaimNameError as exc:
                raise NotReady(str(exc)) from None
            if resolved is None:
                continue
            try:
                claim = await self._client.resource_claims.get(resolved.name, pod.metadata.namespace)
            except errors.ApiError as exc:
                raise NotReady(f"failed to fetch ResourceClaim {resolved.name} referenced by pod "
                               f"{pod.metadata.name}: {exc.message}") from None
            if resolved.must_check_owner:
                why = rc.is_for_pod(pod, claim)
                if why is not None:
                    raise NotReady(why)
            if not rc.is_reserved_for_pod(pod, claim):
                raise NotReady(f"pod {pod.metadata.name}({uid}) is not allowed to use resource claim "
                               f"{resolved.name}({claim.metadata.uid})")
            self._check_node(claim)
            claims.append(claim)
        for claim in claims:
            if self._driver is not None and claim.status.allocation.devices.results:
                try:
                    self._driver.prepare(claim)
                except PrepareError as exc:
                    raise NotReady(str(exc)) from None
            info = self._claims.setdefault(claim.metadata.uid, _ClaimInfo(key_of(claim)))
            info.pods.add(uid)
        self._pods[uid] = [c.metadata.uid for c in claims]
        log.info("dra_pod_prepared", node=self._node, pod=key_of(pod), claims=[key_of(c) for c in claims])

    def _check_node(self, claim: resource_pb2.ResourceClaim) -> None:
        """NotReady unless the claim's allocation is for this node (its ``nodeSelector`` matches the
        Node) — a pod bound by ``spec.nodeName`` past the scheduler to another node than its claim's
        is refused here — and every driver it names runs on this node."""
        allocation = claim.status.allocation
        if allocation.HasField("node_selector"):
            node = self._node_object()
            if node is None:
                node = core_pb2.Node()
                node.metadata.name = self._node
            if not NodeSelector(allocation.node_selector).matches(node):
                raise NotReady(f"resource claim {key_of(claim)} is allocated for other nodes, not {self._node}")
        for r in allocation.devices.results:
            if self._driver is None or r.driver != DRIVER_NAME:
                raise NotReady(f"DRA driver {r.driver} is not registered on node {self._node} (resource claim "
                               f"{key_of(claim)})")

    def unprepare_resources(self, pod_uid: str) -> None:
        """The pod's containers are stopped for good: unprepare each of its claims no other pod of
        this node still uses."""
        claim_uids = self._pods.pop(pod_uid, None)
        if claim_uids is None:
            return
        for claim_uid in claim_uids:
            info = self._claims.get(claim_uid)
            if info is None:
                continue
            info.pods.discard(pod_uid)
            if not info.pods:
                del self._claims[claim_uid]
                if self._driver is not None:
                    self._driver.unprepare(claim_uid, info.key)
