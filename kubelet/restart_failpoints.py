"""The kubelet's restart points (KEP-1287 "Kubelet Restart Analysis"): one failpoint per point.

A test pauses or kills the kubelet at one of these and checks that a restart recovers from it.
"""

from __future__ import annotations

from machinery import failpoints

FP_BEFORE_ADMIT_CHECKPOINT = failpoints.declare(
    "kubelet/admit-before-checkpoint", "a new pod passed admission; its allocation is not checkpointed yet")
FP_AFTER_ADMIT_CHECKPOINT = failpoints.declare(
    "kubelet/admit-after-checkpoint", "a new pod's allocation is checkpointed; its containers are not created yet")
FP_BEFORE_CREATE_ACK = failpoints.declare(
    "kubelet/create-before-actuated", "a container was created; its resources are not recorded as actuated yet")
FP_RESIZE_BEFORE_ALLOCATE = failpoints.declare(
    "kubelet/resize-before-allocate", "a resize fits; the allocation checkpoint is not updated yet")
FP_RESIZE_AFTER_ALLOCATE = failpoints.declare(
    "kubelet/resize-after-allocate", "a resize is allocated and checkpointed; nothing sent to the runtime yet")
FP_RESIZE_AFTER_CRI = failpoints.declare(
    "kubelet/resize-after-cri", "UpdateContainerResources succeeded; the actuated checkpoint is not updated yet")
FP_RESIZE_AFTER_ACTUATED = failpoints.declare(
    "kubelet/resize-after-actuated", "the actuated checkpoint is updated; the status is not written yet")
