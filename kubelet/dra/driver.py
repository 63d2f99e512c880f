"""kplane's fake DRA driver, ``dra.kplane.dev``: GPUs that exist only as a ResourceSlice.

``kplane up --dra-devices K`` (the kubelet's ``--dra-devices K``) makes each node's kubelet run this
driver: it publishes one ResourceSlice, ``<node>-dra.kplane.dev``, with the node's pool (named
after the node, generation 1, one slice) and K devices ``gpu-0`` … ``gpu-<K-1>``, each with the
attributes ``index`` (int), ``model`` (``kplane-gpu``) and ``uuid`` (``gpu-<node>-<i>``) and the
capacity ``memory`` (16Gi). A slice already there is brought to that (its pool's generation goes
up when its devices change); with K = 0 the driver does not run and publishes nothing.

``device_class()`` is the DeviceClass ``gpu.kplane.dev`` that selects this driver's devices
(``device.driver == "dra.kplane.dev"``).

Preparing a claim (NodePrepareResources) hands out CDI device names
(``dra.kplane.dev/gpu=gpu-0``) for the devices allocated on this node, and refuses a device this
node does not publish; unpreparing forgets them. A real driver would set up the hardware here;
this one keeps the books so the kubelet's contract — prepared before the containers start,
unprepared after they stop — can be seen in its log and metrics.
"""

from __future__ import annotations

from typing import Final

from prometheus_client import Gauge

from machinery import errors
from machinery.api import resource_pb2
from machinery.client import Client
from machinery.logging import get_logger

log = get_logger()

DRIVER_NAME: Final = "dra.kplane.dev"
DEVICE_CLASS_NAME: Final = "gpu.kplane.dev"
DEVICE_MODEL: Final = "kplane-gpu"
DEVICE_MEMORY: Final = "16Gi"

PREPARED_CLAIMS = Gauge("kplane_dra_prepared_claims", "ResourceClaims the fake DRA driver has prepared on its "
                        "node(s) and not yet unprepared.")


def slice_name(node: str) -> str:
    return f"{node}-{DRIVER_NAME}"


def device_class() -> resource_pb2.DeviceClass:
    """The DeviceClass selecting this driver's devices (``kplane up`` creates it)."""
    dc = resource_pb2.DeviceClass(api_version="resource.k8s.io/v1", kind="DeviceClass")
    dc.metadata.name = DEVICE_CLASS_NAME
    dc.spec.selectors.add().cel.expression = f'device.driver == "{DRIVER_NAME}"'
    return dc


def resource_slice(node: str, devices: int, generation: int = 1) -> resource_pb2.ResourceSlice:
    """The slice a node with ``devices`` GPUs publishes."""
    s = resource_pb2.ResourceSlice(api_version="resource.k8s.io/v1", kind="ResourceSlice")
    s.metadata.name = slice_name(node)
    s.spec.driver = DRIVER_NAME
    s.spec.node_name = node
    s.spec.pool.name = node
    s.spec.pool.generation = generation
    s.spec.pool.resource_slice_count = 1
    for i in range(devices):
        d = s.spec.devices.add(name=f"gpu-{i}")
        d.attributes["index"].int_value = i
        d.attributes["model"].string_value = DEVICE_MODEL
        d.attributes["uuid"].string_value = f"gpu-{node}-{i}"
        d.capacity["memory"].value = DEVICE_MEMORY
    return s


class PrepareError(Exception):
    """The driver cannot prepare the claim on this node."""


class FakeDriver:
    """The driver's node plugin for one node: its published devices and the claims it prepared."""

    def __init__(self, node: str, devices: int):
        self.node = node
        self.devices = devices
        self._names = frozenset(f"gpu-{i}" for i in range(devices))
        self._prepared: dict[str, list[str]] = {}  # claim uid -> CDI device names

    async def publish(self, client: Client) -> resource_pb2.ResourceSlice:
        """Create the node's slice, or bring an existing one to this driver's devices."""
        wanted = resource_slice(self.node, self.devices)
        api = client.resource_slices
        try:
            current = await api.get(wanted.metadata.name)
        except errors.NotFound:
            created = await api.create(wanted)
            log.info("dra_slice_published", node=self.node, driver=DRIVER_NAME, devices=self.devices)
            return created
        if list(current.spec.devices) == list(wanted.spec.devices) and current.spec.node_name == self.node:
            return current
        updated = resource_pb2.ResourceSlice()
        updated.CopyFrom(current)
        updated.spec.ClearField("devices")
        updated.spec.devices.extend(wanted.spec.devices)
        updated.spec.pool.generation = current.spec.pool.generation + 1
        result = await api.update(updated)
        log.info("dra_slice_republished", node=self.node, driver=DRIVER_NAME, devices=self.devices,
                 generation=updated.spec.pool.generation)
        return result

    def prepare(self, claim: resource_pb2.ResourceClaim) -> list[str]:
        """NodePrepareResources for one claim: its devices of this driver as CDI names."""
        uid = claim.metadata.uid
        done = self._prepared.get(uid)
        if done is not None:
            return done
        cdi: list[str] = []
        for r in claim.status.allocation.devices.results:
            if r.driver != DRIVER_NAME:
                continue
            if r.pool != self.node or r.device not in self._names:
                raise PrepareError(f"device {r.pool}/{r.device} of claim {claim.metadata.namespace}/"
                                   f"{claim.metadata.name} is not one driver {DRIVER_NAME} publishes on node "
                                   f"{self.node}")
            cdi.append(f"{DRIVER_NAME}/gpu={r.device}")
        self._prepared[uid] = cdi
        PREPARED_CLAIMS.inc()
        log.info("dra_claim_prepared", node=self.node, claim=f"{claim.metadata.namespace}/{claim.metadata.name}",
                 devices=cdi)
        return cdi

    def unprepare(self, claim_uid: str, claim_key: str) -> None:
        """NodeUnprepareResources: the claim's devices are no longer in use on this node."""
        if self._prepared.pop(claim_uid, None) is not None:
            PREPARED_CLAIMS.dec()
            log.info("dra_claim_unprepared", node=self.node, claim=claim_key)

    def prepared(self) -> dict[str, list[str]]:
        """Claim uid -> its prepared devices (a copy)."""
        return {uid: list(cdi) for uid, cdi in self._prepared.items()}
