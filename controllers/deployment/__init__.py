"""The Deployment controller (Kubernetes' pkg/controller/deployment): rollouts over ReplicaSets.

A Deployment owns one ReplicaSet per pod template it has had, named ``<deployment>-<hash>`` where
the hash (``pod-template-hash``, also a label of its selector, template and pods) is computed from
the template and ``status.collisionCount`` (``controllers.deploymentutil.compute_hash``). The one
whose template is the Deployment's is the *new* ReplicaSet, the others are *old*. Each sync, from
the informers' caches:

1. claim the ReplicaSets (adopt matching orphans, release those that no longer match);
2. being deleted: only the status; paused: only scale (below), and clean up old ReplicaSets;
3. a *scaling event* (an active ReplicaSet's ``deployment.kubernetes.io/desired-replicas`` is not
   the Deployment's replicas): scale proportionally — the one active ReplicaSet takes the new
   size; with several, the difference (up to replicas + maxSurge in all) is shared in proportion
   to their sizes (``deployment.kubernetes.io/max-replicas``), leftovers to the largest;
4. otherwise roll out:

   - RollingUpdate: create the new ReplicaSet if there is none (revision = the highest old one +
     1), scale it up while all ReplicaSets together stay within replicas + maxSurge (maxSurge
     rounded up from a percentage), scale old ones down while the available pods stay at least
     replicas - maxUnavailable (rounded down; both 0 resolves to maxUnavailable 1) — unhealthy old
     replicas first;
   - Recreate: scale every old ReplicaSet to 0, wait until none of their pods is left (not even
     terminating), then create and scale up the new one;

5. once the rollout is complete, delete the old ReplicaSets over ``revisionHistoryLimit`` that
   are scaled to 0, oldest revision first;
6. the status: ``replicas``, ``updatedReplicas``, ``readyReplicas``, ``availableReplicas``,
   ``unavailableReplicas``, ``terminatingReplicas`` summed over the ReplicaSets' statuses,
   ``observedGeneration``, and the conditions ``Available`` (MinimumReplicasAvailable /
   MinimumReplicasUnavailable) and ``Progressing`` (NewReplicaSetCreated, FoundNewReplicaSet,
   ReplicaSetUpdated, NewReplicaSetAvailable; ProgressDeadlineExceeded once no progress was made
   for ``progressDeadlineSeconds``; DeploymentPaused/DeploymentResumed, Unknown), written only
   when it changed. The revision annotation travels with the status write, as in Kubernetes.

Events ``ScalingReplicaSet`` on the Deployment: "Scaled up replica set web-7d4b9 from 0 to 1",
"Scaled down replica set web-5f6c8 from 3 to 2". Failpoint
``controller-manager/deployment-after-scale``: a ReplicaSet's new size was written (or a new
ReplicaSet created with pods), the rest of the sync not done.

Where kplane differs (docs/controller-manager.md): a scale-up counts each ReplicaSet as the larger
of its size and its pods not yet being deleted, so pods of a ReplicaSet just scaled down count
until their deletion starts; old ReplicaSets are not scaled down further while one of them has not
yet observed its last size (its ``availableReplicas`` may still count pods it is deleting); and a
sync waits until the ReplicaSet informer shows this controller's own last writes
(``controllers.ownwrites``): sized from a cache without them, a template change right after a
scale-up would count room that scale-up already took and overshoot replicas + maxSurge.

One module per file of Kubernetes' pkg/controller/deployment: ``deployment_controller.py`` (the
controller: informer handlers that only enqueue, syncDeployment, steps 1-2), ``sync.py`` (what
every sync does: the new ReplicaSet and its revision, scaling and scaling events, paused
conditions, cleanup, the status; steps 2, 3, 5, 6, and the failpoint), ``rolling.py`` and
``recreate.py`` (the strategies, step 4), ``progress.py`` (a rollout's status and conditions, and
the look again when its progress deadline is due).
"""

from controllers.deployment.deployment_controller import DeploymentController
from controllers.deployment.sync import FP_AFTER_SCALE, SCALING_REPLICA_SET

__all__ = ["FP_AFTER_SCALE", "SCALING_REPLICA_SET", "DeploymentController"]
