"""A rollout's progress (Kubernetes' deployment progress.go): the status and its Progressing and
ReplicaFailure conditions, and a stalled rollout looked at again when its deadline is due."""

from __future__ import annotations

from controllers.deployment.sync import DeploymentContext, Sync, write_status
from controllers.deploymentutil import (
    NEW_RS_AVAILABLE,
    REPLICA_SET_UPDATED,
    TIMED_OUT,
    calculate_status,
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
    find_new_replica_set,
    get_condition,
    has_progress_deadline,
    new_condition,
    progress_check_in,
    remove_condition,
    replica_failure,
    set_condition,
)
from machinery import timeutil
from machinery.api import apps_pb2
from machinery.informer import key_of


async def sync_rollout_status(dc: DeploymentContext, s: Sync) -> None:
    """syncRolloutStatus: the status and the Progressing condition of a rollout: ReplicaSetUpdated,
    NewReplicaSetAvailable, or ProgressDeadlineExceeded once no progress was made for
    ``progressDeadlineSeconds``. NewReplicaSetCreated and FoundNewReplicaSet are set with the new
    ReplicaSet (``get_all``); DeploymentPaused and DeploymentResumed (status Unknown) by
    ``check_paused_conditions``."""
    d = s.d
    new = s.fresh(find_new_replica_set(d, s.rss))
    all_rss = list(s.rss)
    now = timeutil.now()
    status = calculate_status(all_rss, new, d, now)
    if not has_progress_deadline(d):
        remove_condition(status, "Progressing")
    current = get_condition(d.status, "Progressing")
    complete_before = status.replicas == status.updated_replicas and current is not None and \
        current.reason == NEW_RS_AVAILABLE
    if has_progress_deadline(d) and not complete_before:
        target = f'ReplicaSet "{new.metadata.name}"' if new is not None else f'Deployment "{d.metadata.name}"'
        if deployment_complete(d, status):
            set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE,
                                                f"{target} has successfully progressed.", now))
        elif deployment_progressing(d, status):
            cond = new_condition("Progressing", "True", REPLICA_SET_UPDATED, f"{target} is progressing.", now)
            if current is not None:
                if current.status == "True":
                    cond.last_transition_time = current.last_transition_time
                remove_condition(status, "Progressing")
            set_condition(status, cond)
        elif deployment_timed_out(d, status, now):
            set_condition(status, new_condition("Progressing", "False", TIMED_OUT,
                                                f"{target} has timed out progressing.", now))
    failure = replica_failure(all_rss, new)
    if failure is not None:
        set_condition(status, failure)
    else:
        remove_condition(status, "ReplicaFailure")
    if status == d.status:
        _requeue_stuck(dc, d, status)
        return
    d.status.CopyFrom(status)
    await write_status(dc, d)


def _requeue_stuck(dc: DeploymentContext, d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus) -> None:
    """requeueStuckDeployment: look again when the progress deadline of a stalled rollout is due."""
    after = progress_check_in(d, status, timeutil.now())
    if after is None:
        return
    if after == 0.0:
        dc.queue.add_rate_limited(key_of(d))
    else:
        dc.enqueue_key(key_of(d), after=after + 1.0)
