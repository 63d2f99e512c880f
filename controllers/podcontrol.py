"""Making and removing a controller's pods, with the Events Kubernetes' RealPodControl records.

``create_pod`` makes a pod from a template as GetPodFromTemplate does — the template's labels,
annotations and finalizers, ``generateName: <owner>-``, the controller's ownerReference, the
template's spec — and records ``SuccessfulCreate`` "Created pod: NAME" on the owner, or
``FailedCreate`` "Error creating: ..." (not when the namespace is being deleted: every create
would fail, and Kubernetes stays quiet). ``delete_pod`` deletes gracefully and records
``SuccessfulDelete`` "Deleted pod: NAME" or ``FailedDelete`` "Error deleting: ...".
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.message import Message

from machinery import errors
from machinery.api import core_pb2, meta_pb2
from machinery.client import Client
from machinery.events import EventRecorder
from machinery.kinds import accessor
from machinery.logging import get_logger

log = get_logger()

SUCCESSFUL_CREATE, FAILED_CREATE = "SuccessfulCreate", "FailedCreate"
SUCCESSFUL_DELETE, FAILED_DELETE = "SuccessfulDelete", "FailedDelete"


def controller_ref(owner: Message) -> meta_pb2.OwnerReference:
    """metav1.NewControllerRef: the owner as the controller of what it makes (blocking its deletion)."""
    typed = accessor(owner)
    return meta_pb2.OwnerReference(api_version=typed.api_version, kind=typed.kind, name=typed.metadata.name,
                                   uid=typed.metadata.uid, controller=True, block_owner_deletion=True)


def controller_of(meta: meta_pb2.ObjectMeta) -> meta_pb2.OwnerReference | None:
    """metav1.GetControllerOf: the ownerReference with ``controller: true``, if any."""
    return next((r for r in meta.owner_references if r.controller), None)


def namespace_terminating(exc: errors.ApiError) -> bool:
    """The NamespaceLifecycle refusal of a create in a namespace being deleted (NamespaceTerminatingCause)."""
    return isinstance(exc, errors.Forbidden) and "because it is being terminated" in exc.message


def pod_from_template(template: core_pb2.PodTemplateSpec, owner: Message,
                      ref: meta_pb2.OwnerReference | None) -> core_pb2.Pod:
    """GetPodFromTemplate: the pod a controller asks for."""
    meta = accessor(owner).metadata
    pod = core_pb2.Pod(api_version="v1", kind="Pod")
    pod.metadata.namespace = meta.namespace
    pod.metadata.generate_name = f"{meta.name}-"
    pod.metadata.labels.update(template.metadata.labels)
    pod.metadata.annotations.update(template.metadata.annotations)
    pod.metadata.finalizers.extend(template.metadata.finalizers)
    if ref is not None:
        pod.metadata.owner_references.append(ref)
    pod.spec.CopyFrom(template.spec)
    return pod


class PodControl:
    """The pods of a controller (Kubernetes' PodControlInterface), Events on the owner."""

    def __init__(self, client: Client, recorder: EventRecorder):
        self._client = client
        self._recorder = recorder

    async def create_pod(self, template: core_pb2.PodTemplateSpec, owner: Message,
                         ref: meta_pb2.OwnerReference) -> core_pb2.Pod:
        pod = pod_from_template(template, owner, ref)
        if not pod.metadata.labels:
            raise errors.Invalid("unable to create pods, no labels")
        try:
            created = await self._client.pods.create(pod)
        except errors.ApiError as exc:
            if not namespace_terminating(exc):
                self._recorder.event(owner, "Warning", FAILED_CREATE, f"Error creating: {exc.message}")
            raise
        log.info("controller_created_pod", controller=accessor(owner).metadata.name,
                 pod=f"{created.metadata.namespace}/{created.metadata.name}")
        self._recorder.event(owner, "Normal", SUCCESSFUL_CREATE, f"Created pod: {created.metadata.name}")
        return created

    async def delete_pod(self, namespace: str, name: str, owner: Message) -> None:
        """Graceful delete; NotFound raised as is (already gone: nothing recorded)."""
        try:
            await self._client.pods.delete(name, namespace)
        except errors.NotFound:
            raise
        except errors.ApiError as exc:
            self._recorder.event(owner, "Warning", FAILED_DELETE, f"Error deleting: {exc.message}")
            raise
        log.info("controller_deleted_pod", controller=accessor(owner).metadata.name, pod=f"{namespace}/{name}")
        self._recorder.event(owner, "Normal", SUCCESSFUL_DELETE, f"Deleted pod: {name}")

    async def patch_pod(self, namespace: str, name: str, patch: dict[str, Any]) -> core_pb2.Pod:
        return await self._client.pods.patch(name, json.dumps(patch), namespace=namespace)
