"""DefaultBinder: bind the pod to the chosen node through the pods/binding subresource.

kube-scheduler's defaultbinder. The apiserver refuses a binding for a pod already bound (or
deleted, or replaced by another pod of the same name: the uid is part of the request), which is
what makes "a pod is bound at most once" hold even across scheduler restarts and two
schedulers racing.
"""

from __future__ import annotations

from typing import Any

from machinery import errors
from machinery.api import core_pb2
from scheduler.framework.interfaces import Handle
from scheduler.framework.plugin_args import no_args
from scheduler.framework.types import Code, CycleState, Status

NAME = "DefaultBinder"


class DefaultBinder:
    name = NAME

    def __init__(self, handle: Handle):
        self.handle = handle

    async def bind(self, state: CycleState, pod: core_pb2.Pod, node: str) -> Status | None:
        try:
            await self.handle.require_client().pods.bind(pod.metadata.name, node, pod.metadata.namespace,
                                                         uid=pod.metadata.uid)
        except errors.ApiError as exc:
            return Status(Code.ERROR, exc.message, error=exc)
        return None


def new(args: Any, handle: Any) -> DefaultBinder:
    """DefaultBinder takes no args: kube-scheduler has no DefaultBinderArgs, and any given are an error."""
    no_args(NAME, args)
    return DefaultBinder(handle)
