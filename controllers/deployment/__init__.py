"""The Deployment controller (Kubernetes' pkg/controller/deployment): rollouts over ReplicaSets.

A Deployment owns one ReplicaSet per pod template it has had: the *new* one has the Deployment's
template, the others are *old*. One module per file of Kubernetes' package:
``deployment_controller.py`` (``DeploymentController``: informer handlers that only enqueue, and
``sync``, a sync's steps in order), ``sync.py`` (what every sync does: the new ReplicaSet and its
revision, scaling events, paused conditions, cleanup, the status), ``rolling.py`` and
``recreate.py`` (the strategies), ``progress.py`` (a rollout's status and conditions, and the look
again when its progress deadline is due). Where kplane differs from Kubernetes:
docs/controller-manager.md, "Where kplane differs".
"""

from controllers.deployment.deployment_controller import DeploymentController
from controllers.deployment.sync import FP_AFTER_SCALE, SCALING_REPLICA_SET

__all__ = ["FP_AFTER_SCALE", "SCALING_REPLICA_SET", "DeploymentController"]
