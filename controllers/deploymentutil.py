"""The Deployment controller's arithmetic (Kubernetes' pkg/controller/deployment/util): pure
functions over a Deployment and its ReplicaSets, no API calls.

- ``resolve_fenceposts``: maxSurge and maxUnavailable as pod counts (a percentage of the desired
  replicas, surge rounded up, unavailable rounded down; both 0 gives unavailable 1, so a rollout
  can always move).
- ``compute_hash``: the ``pod-template-hash`` label and the new ReplicaSet's name suffix — FNV-32a
  of the template's deterministic protobuf encoding (Kubernetes hashes its Go printout, which
  Python cannot reproduce) and the collision count, the decimal digits mapped to Kubernetes'
  SafeEncodeString alphabet.
- revisions (``deployment.kubernetes.io/revision``) and the desired-/max-replicas annotations,
  the deployment's annotations copied to its new ReplicaSet;
- ``new_rs_new_replicas`` (how far the new ReplicaSet may grow), ``get_proportion`` (proportional
  scaling when a rollout is resized), ``find_new_replica_set``/``find_old_replica_sets``;
- conditions and the rollout's progress (complete, progressing, timed out), ``calculate_status``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from machinery import timeutil, wellknown
from machinery.api import apps_pb2, core_pb2
from machinery.disruption import IntOrPercentError, scaled_value

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
REVISION_HISTORY_ANNOTATION = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS_ANNOTATION = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS_ANNOTATION = "deployment.kubernetes.io/max-replicas"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
DEPRECATED_ROLLBACK_TO = "deprecated.deployment.rollback.to"
POD_TEMPLATE_HASH_LABEL = wellknown.LABEL_POD_TEMPLATE_HASH
MAX_REV_HISTORY_LENGTH_IN_CHARS = 2000
MAX_INT32 = 2**31 - 1

# Condition reasons.
REPLICA_SET_UPDATED = "ReplicaSetUpdated"
FAILED_RS_CREATE = "ReplicaSetCreateError"
NEW_REPLICA_SET = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
MINIMUM_REPLICAS_AVAILABLE = "MinimumReplicasAvailable"
MINIMUM_REPLICAS_UNAVAILABLE = "MinimumReplicasUnavailable"

_ANNOTATIONS_TO_SKIP = frozenset({LAST_APPLIED_ANNOTATION, REVISION_ANNOTATION, REVISION_HISTORY_ANNOTATION,
                                  DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION, DEPRECATED_ROLLBACK_TO})
_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' rand alphabet: no vowels, no 0/1/3

Workload = apps_pb2.ReplicaSet | apps_pb2.Deployment


def replicas(obj: Workload) -> int:
    """``spec.replicas`` (the apiserver defaults it to 1)."""
    return obj.spec.replicas if obj.spec.HasField("replicas") else 1


# ---------------------------------------------------------------- pod-template-hash


def safe_encode_string(s: str) -> str:
    """Kubernetes' rand.SafeEncodeString: each character mapped into the alphabet above."""
    return "".join(_ALPHANUMS[ord(ch) % len(_ALPHANUMS)] for ch in s)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def compute_hash(template: core_pb2.PodTemplateSpec, collision_count: int | None) -> str:
    """controller.ComputeHash: the template's hash, salted with the collision count when there is one
    (written as Kubernetes writes it: a uint32 little-endian in 8 bytes)."""
    data = template.SerializeToString(deterministic=True)
    if collision_count is not None:
        data += (collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\x00" * 4
    return safe_encode_string(str(fnv32a(data)))


def equal_ignore_hash(a: core_pb2.PodTemplateSpec, b: core_pb2.PodTemplateSpec) -> bool:
    """EqualIgnoreHash: the templates are equal but for their pod-template-hash labels."""
    ca, cb = core_pb2.PodTemplateSpec(), core_pb2.PodTemplateSpec()
    ca.CopyFrom(a)
    cb.CopyFrom(b)
    ca.metadata.labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    cb.metadata.labels.pop(POD_TEMPLATE_HASH_LABEL, None)
    return ca == cb


# ---------------------------------------------------------------- surge and unavailability


def resolve_fenceposts(max_surge: str | None, max_unavailable: str | None, desired: int) -> tuple[int, int]:
    """ResolveFenceposts: (surge, unavailable) as pod counts; surge rounds up, unavailable down,
    and both 0 makes unavailable 1. ValueError for a value that is neither an int nor a percentage."""
    try:
        surge = scaled_value(max_surge or "0", desired, True)
        unavailable = scaled_value(max_unavailable or "0", desired, False)
    except IntOrPercentError as exc:
        raise ValueError(str(exc)) from None
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def is_rolling_update(d: apps_pb2.Deployment) -> bool:
    return d.spec.strategy.type == "RollingUpdate"


def _fenceposts(d: apps_pb2.Deployment) -> tuple[int, int]:
    ru = d.spec.strategy.rolling_update
    return resolve_fenceposts(ru.max_surge if ru.HasField("max_surge") else None,
                              ru.max_unavailable if ru.HasField("max_unavailable") else None, replicas(d))


def max_surge(d: apps_pb2.Deployment) -> int:
    """MaxSurge: the pods a rolling Deployment may run over its replicas (0 for Recreate)."""
    return _fenceposts(d)[0] if is_rolling_update(d) else 0


def max_unavailable(d: apps_pb2.Deployment) -> int:
    """MaxUnavailable: at most the replicas; 0 for Recreate or no replicas."""
    if not is_rolling_update(d) or replicas(d) == 0:
        return 0
    return min(_fenceposts(d)[1], replicas(d))


def min_available(d: apps_pb2.Deployment) -> int:
    return replicas(d) - max_unavailable(d) if is_rolling_update(d) else 0


# ---------------------------------------------------------------- revisions and annotations


def revision(rs: Workload) -> int:
    """The revision annotation; 0 when absent. ValueError when it is not an integer."""
    text = rs.metadata.annotations.get(REVISION_ANNOTATION)
    return 0 if text is None else int(text)


def max_revision(rss: Iterable[apps_pb2.ReplicaSet]) -> int:
    """MaxRevision: the highest revision (those that do not parse are skipped)."""
    best = 0
    for rs in rss:
        try:
            best = max(best, revision(rs))
        except ValueError:
            continue
    return best


def set_replicas_annotations(rs: apps_pb2.ReplicaSet, desired: int, maximum: int) -> bool:
    """SetReplicasAnnotations: desired-replicas and max-replicas; True when either changed."""
    changed = False
    for key, value in ((DESIRED_REPLICAS_ANNOTATION, str(desired)), (MAX_REPLICAS_ANNOTATION, str(maximum))):
        if rs.metadata.annotations.get(key) != value:
            rs.metadata.annotations[key] = value
            changed = True
    return changed


def replicas_annotations_need_update(rs: apps_pb2.ReplicaSet, desired: int, maximum: int) -> bool:
    return (rs.metadata.annotations.get(DESIRED_REPLICAS_ANNOTATION) != str(desired)
            or rs.metadata.annotations.get(MAX_REPLICAS_ANNOTATION) != str(maximum))


def _int_annotation(rs: apps_pb2.ReplicaSet, key: str) -> int | None:
    text = rs.metadata.annotations.get(key)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def desired_replicas_annotation(rs: apps_pb2.ReplicaSet) -> int | None:
    return _int_annotation(rs, DESIRED_REPLICAS_ANNOTATION)


def copy_deployment_annotations(d: apps_pb2.Deployment, rs: apps_pb2.ReplicaSet) -> bool:
    """copyDeploymentAnnotationsToReplicaSet: every annotation but the skipped ones; True when one changed."""
    changed = False
    for k, v in d.metadata.annotations.items():
        if k in _ANNOTATIONS_TO_SKIP or rs.metadata.annotations.get(k) == v:
            continue
        rs.metadata.annotations[k] = v
        changed = True
    return changed


def set_new_replica_set_annotations(d: apps_pb2.Deployment, rs: apps_pb2.ReplicaSet, new_revision: int,
                                    exists: bool, limit: int = MAX_REV_HISTORY_LENGTH_IN_CHARS) -> bool:
    """SetNewReplicaSetAnnotations: the deployment's annotations, the revision raised to
    ``new_revision`` if lower (the old one kept in revision-history, as a rollback to it does),
    and for a new ReplicaSet the replicas annotations. True when any changed."""
    changed = copy_deployment_annotations(d, rs)
    old_text = rs.metadata.annotations.get(REVISION_ANNOTATION)
    try:
        old = int(old_text) if old_text else 0
    except ValueError:
        return False
    if old < new_revision:
        rs.metadata.annotations[REVISION_ANNOTATION] = str(new_revision)
        changed = True
        if old_text is not None:
            history = rs.metadata.annotations.get(REVISION_HISTORY_ANNOTATION, "")
            if not history:
                rs.metadata.annotations[REVISION_HISTORY_ANNOTATION] = old_text
            else:
                revisions = history.split(",")
                total, start = len(history) + len(old_text) + 1, 0
                while total > limit and start < len(revisions):
                    total -= len(revisions[start]) + 1
                    start += 1
                if total <= limit:
                    rs.metadata.annotations[REVISION_HISTORY_ANNOTATION] = ",".join(revisions[start:] + [old_text])
    if not exists and set_replicas_annotations(rs, replicas(d), replicas(d) + max_surge(d)):
        changed = True
    return changed


def set_deployment_revision(d: apps_pb2.Deployment, rev: str) -> bool:
    if d.metadata.annotations.get(REVISION_ANNOTATION) != rev:
        d.metadata.annotations[REVISION_ANNOTATION] = rev
        return True
    return False


# ---------------------------------------------------------------- finding and ordering ReplicaSets


def _created(rs: apps_pb2.ReplicaSet) -> float:
    t = timeutil.parse(rs.metadata.creation_timestamp)
    return t.timestamp() if t is not None else 0.0


def by_creation(rss: Iterable[apps_pb2.ReplicaSet]) -> list[apps_pb2.ReplicaSet]:
    """ReplicaSetsByCreationTimestamp: oldest first, name breaking ties."""
    return sorted(rss, key=lambda rs: (_created(rs), rs.metadata.name))


def by_size_older(rss: Iterable[apps_pb2.ReplicaSet]) -> list[apps_pb2.ReplicaSet]:
    """ReplicaSetsBySizeOlder: largest first; same size, older first (scaling down)."""
    return sorted(rss, key=lambda rs: (-replicas(rs), _created(rs), rs.metadata.name))


def by_size_newer(rss: Iterable[apps_pb2.ReplicaSet]) -> list[apps_pb2.ReplicaSet]:
    """ReplicaSetsBySizeNewer: largest first; same size, newer first (scaling up)."""
    return sorted(by_creation(rss)[::-1], key=lambda rs: -replicas(rs))


def by_revision(rss: Iterable[apps_pb2.ReplicaSet]) -> list[apps_pb2.ReplicaSet]:
    """ReplicaSetsByRevision: lowest revision first, then oldest."""
    def key(rs: apps_pb2.ReplicaSet) -> tuple[int, float, str]:
        try:
            rev = revision(rs)
        except ValueError:
            rev = 0
        return rev, _created(rs), rs.metadata.name
    return sorted(rss, key=key)


def active(rss: Iterable[apps_pb2.ReplicaSet | None]) -> list[apps_pb2.ReplicaSet]:
    """FilterActiveReplicaSets: those with replicas wanted."""
    return [rs for rs in rss if rs is not None and replicas(rs) > 0]


def find_new_replica_set(d: apps_pb2.Deployment, rss: Sequence[apps_pb2.ReplicaSet]) -> apps_pb2.ReplicaSet | None:
    """FindNewReplicaSet: the oldest ReplicaSet whose template is the deployment's."""
    return next((rs for rs in by_creation(rss) if equal_ignore_hash(rs.spec.template, d.spec.template)), None)


def find_old_replica_sets(d: apps_pb2.Deployment, rss: Sequence[apps_pb2.ReplicaSet]) -> list[apps_pb2.ReplicaSet]:
    """FindOldReplicaSets' second list: every ReplicaSet but the new one."""
    new = find_new_replica_set(d, rss)
    return [rs for rs in rss if new is None or rs.metadata.uid != new.metadata.uid]


def find_active_or_latest(new: apps_pb2.ReplicaSet | None,
                          old: Sequence[apps_pb2.ReplicaSet]) -> apps_pb2.ReplicaSet | None:
    """FindActiveOrLatest: the one active ReplicaSet, or the newest when none is; None when several are."""
    if new is None and not old:
        return None
    newest_first = by_creation(old)[::-1]
    live = active([*newest_first, new])
    if not live:
        return new if new is not None else newest_first[0]
    return live[0] if len(live) == 1 else None


# ---------------------------------------------------------------- scaling


def spec_total(rss: Iterable[apps_pb2.ReplicaSet | None]) -> int:
    """GetReplicaCountForReplicaSets: the sum of spec.replicas."""
    return sum(replicas(rs) for rs in rss if rs is not None)


def new_rs_new_replicas(d: apps_pb2.Deployment, all_rss: Sequence[apps_pb2.ReplicaSet | None],
                        new: apps_pb2.ReplicaSet, live_pods: Mapping[str, int] | None = None) -> int:
    """NewRSNewReplicas: the size the new ReplicaSet may have now. RollingUpdate: up to
    replicas + maxSurge pods in all, never more than replicas in the new one; Recreate: replicas.

    ``live_pods`` (ReplicaSet uid -> its pods neither finished nor being deleted, as the pod
    informer shows them) makes the count of a ReplicaSet the larger of its spec and its pods: a
    ReplicaSet scaled down whose pods are not yet being deleted still counts them (kplane; see
    docs/controller-manager.md)."""
    if d.spec.strategy.type == "Recreate":
        return replicas(d)
    if not is_rolling_update(d):
        raise ValueError(f"deployment type {d.spec.strategy.type} isn't supported")
    surge = scaled_value(d.spec.strategy.rolling_update.max_surge or "0", replicas(d), True)
    current = sum(max(replicas(rs), (live_pods or {}).get(rs.metadata.uid, 0)) for rs in all_rss if rs is not None)
    max_total = replicas(d) + surge
    if current >= max_total:
        return replicas(new)
    scale_up = min(max_total - current, replicas(d) - replicas(new))
    return replicas(new) + scale_up


def is_saturated(d: apps_pb2.Deployment, rs: apps_pb2.ReplicaSet | None) -> bool:
    """IsSaturated: the ReplicaSet has every replica, knows it (its desired-replicas annotation),
    and all are available."""
    if rs is None:
        return False
    desired = desired_replicas_annotation(rs)
    return desired is not None and replicas(rs) == replicas(d) == desired and \
        rs.status.available_replicas == replicas(d)


def _round_to_int32(x: float) -> int:
    """integer.RoundToInt32: halves away from zero."""
    return int(x - 0.5) if x < 0 else int(x + 0.5)


def replica_set_fraction(rs: apps_pb2.ReplicaSet, d: apps_pb2.Deployment) -> int:
    """getReplicaSetFraction: how many replicas this ReplicaSet gains (or loses) in the resize."""
    if replicas(d) == 0:
        return -replicas(rs)
    deployment_replicas = replicas(d) + max_surge(d)
    annotated = _int_annotation(rs, MAX_REPLICAS_ANNOTATION)
    if annotated is None:
        annotated = d.status.replicas
    if annotated == 0:
        return 0
    return _round_to_int32(replicas(rs) * deployment_replicas / annotated) - replicas(rs)


def get_proportion(rs: apps_pb2.ReplicaSet | None, d: apps_pb2.Deployment, to_add: int, added: int) -> int:
    """GetProportion: this ReplicaSet's share of the ``to_add`` replicas (``added`` so far)."""
    if rs is None or replicas(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = replica_set_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)


# ---------------------------------------------------------------- conditions and status


def get_condition(status: apps_pb2.DeploymentStatus, type_: str) -> apps_pb2.DeploymentCondition | None:
    return next((c for c in status.conditions if c.type == type_), None)


def new_condition(type_: str, status: str, reason: str, message: str,
                  now: datetime | None = None) -> apps_pb2.DeploymentCondition:
    t = timeutil.rfc3339(now)
    return apps_pb2.DeploymentCondition(type=type_, status=status, reason=reason, message=message,
                                        last_update_time=t, last_transition_time=t)


def remove_condition(status: apps_pb2.DeploymentStatus, type_: str) -> None:
    kept = [c for c in status.conditions if c.type != type_]
    del status.conditions[:]
    status.conditions.extend(kept)


def set_condition(status: apps_pb2.DeploymentStatus, cond: apps_pb2.DeploymentCondition) -> None:
    """SetDeploymentCondition: nothing when status and reason are the same; the transition time kept
    when only the reason changes."""
    current = get_condition(status, cond.type)
    if current is not None and current.status == cond.status and current.reason == cond.reason:
        return
    if current is not None and current.status == cond.status:
        cond.last_transition_time = current.last_transition_time
    remove_condition(status, cond.type)
    status.conditions.append(cond)


def has_progress_deadline(d: apps_pb2.Deployment) -> bool:
    return d.spec.HasField("progress_deadline_seconds") and d.spec.progress_deadline_seconds != MAX_INT32


def has_revision_history_limit(d: apps_pb2.Deployment) -> bool:
    return d.spec.HasField("revision_history_limit") and d.spec.revision_history_limit != MAX_INT32


def deployment_complete(d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus) -> bool:
    """DeploymentComplete: every replica updated and available, no old ones, the generation observed."""
    want = replicas(d)
    return status.updated_replicas == want and status.replicas == want and status.available_replicas == want \
        and status.observed_generation >= d.metadata.generation


def deployment_progressing(d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus) -> bool:
    """DeploymentProgressing: new pods up, old pods down, more ready or more available than last time."""
    old = d.status
    return (status.updated_replicas > old.updated_replicas
            or status.replicas - status.updated_replicas < old.replicas - old.updated_replicas
            or status.ready_replicas > old.ready_replicas
            or status.available_replicas > old.available_replicas)


def deployment_timed_out(d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus, now: datetime) -> bool:
    """DeploymentTimedOut: no progress reported for progressDeadlineSeconds (or already reported so)."""
    if not has_progress_deadline(d):
        return False
    cond = get_condition(status, "Progressing")
    if cond is None or cond.reason == NEW_RS_AVAILABLE:
        return False
    if cond.reason == TIMED_OUT:
        return True
    since = timeutil.parse(cond.last_update_time)
    return since is not None and since.timestamp() + d.spec.progress_deadline_seconds < now.timestamp()


def calculate_status(all_rss: Sequence[apps_pb2.ReplicaSet | None], new: apps_pb2.ReplicaSet | None,
                     d: apps_pb2.Deployment, now: datetime | None = None) -> apps_pb2.DeploymentStatus:
    """calculateStatus: the counts from the ReplicaSets' statuses, and the Available condition."""
    rss = [rs for rs in all_rss if rs is not None]
    available = sum(rs.status.available_replicas for rs in rss)
    status = apps_pb2.DeploymentStatus(
        observed_generation=d.metadata.generation,
        replicas=sum(rs.status.replicas for rs in rss),
        updated_replicas=new.status.replicas if new is not None else 0,
        ready_replicas=sum(rs.status.ready_replicas for rs in rss),
        available_replicas=available,
        unavailable_replicas=max(0, spec_total(rss) - available))
    if d.status.HasField("collision_count"):
        status.collision_count = d.status.collision_count
    if all(rs.status.HasField("terminating_replicas") for rs in rss):
        status.terminating_replicas = sum(rs.status.terminating_replicas for rs in rss)
    status.conditions.extend(d.status.conditions)
    if available >= replicas(d) - max_unavailable(d):
        set_condition(status, new_condition("Available", "True", MINIMUM_REPLICAS_AVAILABLE,
                                            "Deployment has minimum availability.", now))
    else:
        set_condition(status, new_condition("Available", "False", MINIMUM_REPLICAS_UNAVAILABLE,
                                            "Deployment does not have minimum availability.", now))
    return status


def replica_failure(all_rss: Sequence[apps_pb2.ReplicaSet | None],
                    new: apps_pb2.ReplicaSet | None) -> apps_pb2.DeploymentCondition | None:
    """getReplicaFailures' first: the new ReplicaSet's ReplicaFailure condition, else an old one's."""
    for rs in ([new] if new is not None else []) + [rs for rs in all_rss if rs is not None]:
        for c in rs.status.conditions:
            if c.type == "ReplicaFailure":
                return apps_pb2.DeploymentCondition(type=c.type, status=c.status, reason=c.reason, message=c.message,
                                                    last_transition_time=c.last_transition_time,
                                                    last_update_time=c.last_transition_time)
    return None


def progress_check_in(d: apps_pb2.Deployment, status: apps_pb2.DeploymentStatus, now: datetime) -> float | None:
    """requeueStuckDeployment: seconds until the progress deadline of a rollout that made none
    (0: now), None when no check is due (no deadline, complete, already timed out)."""
    cond = get_condition(d.status, "Progressing")
    if not has_progress_deadline(d) or cond is None:
        return None
    if deployment_complete(d, status) or cond.reason == TIMED_OUT:
        return None
    since = timeutil.parse(cond.last_update_time)
    if since is None:
        return None
    after = since.timestamp() + d.spec.progress_deadline_seconds - now.timestamp()
    return max(0.0, after) if after >= 1.0 else 0.0
