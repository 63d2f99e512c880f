"""What pods have beyond the common verbs: graceful deletion, binding, resize, eviction.

- ``grace_period``: Kubernetes' pod CheckGracefulDelete (unscheduled or finished pods go at once).
- ``bind``: the binding subresource sets ``spec.nodeName`` once and the PodScheduled condition.
- ``resize``: the KEP-1287 ``resize`` subresource; only container resources change, validated by
  ``validation.validate_pod_resize`` (QoS class kept, no removals, cpu/memory only, the version-skew
  rule on ``status.containerStatuses[].resources``); a change bumps ``metadata.generation``. As
  KEP-1287 "Affected Components" says, LimitRanger checks the new resources against the
  namespace's LimitRanges and ResourceQuota charges the pod's increase (dry runs checked too).
- ``evict``: API-initiated eviction (Kubernetes' eviction.go): pods that cannot be disrupted
  (terminal, Pending, already deleting) are deleted; otherwise the one PodDisruptionBudget
  covering the pod must allow a disruption by its status, as the disruption controller keeps it
  (``controllers/disruption.py``): a status older than the budget's spec or allowing none is
  refused (429), else ``disruptionsAllowed`` goes down by one and the pod goes into
  ``disruptedPods`` in one status write, then the pod is deleted gracefully. A budget whose
  status no controller ever wrote gets one computed here from the watch cache's pods
  (``machinery.disruption.compute_status``), so a cluster without a controller-manager still
  honours budgets; Kubernetes refuses such evictions until its controller has run. Every
  eviction that deletes marks the pod DisruptionTarget (reason EvictionByEvictionAPI) first, in a
  revision of its own, as Kubernetes' addConditionAndDeletePod does.
"""

from __future__ import annotations

import functools

from apiserver import strategy
from apiserver.admission.interfaces import Attributes, Operation
from apiserver.auth import User
from apiserver.fieldmanager import Manager
from apiserver.registry import Registry, check_patch_options, is_apply, parse_patch, patched
from machinery import disruption, emptydir, errors, podconditions, timeutil
from machinery.api import core_pb2, meta_pb2, policy_pb2
from machinery.featuregates import FeatureGates, Stage
from machinery.kinds import POD, POD_DISRUPTION_BUDGET, list_accessor

DEFAULT_GRACE_PERIOD = 30
EVICTION_RETRIES = 5
TERMINAL_PHASES = ("Succeeded", "Failed")
_POD = strategy.pod_strategy()


def grace_period(pod: core_pb2.Pod, requested: int | None) -> int:
    """Seconds a deleted pod gets to terminate: 0 means remove at once."""
    if requested is not None:
        period = requested
    elif pod.spec.HasField("termination_grace_period_seconds"):
        period = pod.spec.termination_grace_period_seconds
    else:
        period = DEFAULT_GRACE_PERIOD
    if not pod.spec.node_name or pod.status.phase in TERMINAL_PHASES:
        period = 0
    return max(period, 0)


class PodSubresources:
    def __init__(self, registry: Registry, gates: FeatureGates):
        self.registry = registry
        self.gates = gates
        registry.grace_periods[POD.name] = grace_period

    # ------------------------------------------------------------ binding

    async def bind(self, binding: core_pb2.Binding, user: User, dry_run: bool = False) -> core_pb2.Pod:
        name = binding.metadata.name
        namespace = binding.metadata.namespace or "default"
        target = binding.target.name
        if not target:
            raise errors.Invalid.of("Binding", name, [errors.required("target.name")])
        if binding.target.kind and binding.target.kind != "Node":
            raise errors.Invalid.of("Binding", name,
                                    [errors.not_supported("target.kind", binding.target.kind, ["Node"])])

        def attributes(new: core_pb2.Pod, old: core_pb2.Pod) -> Attributes:
            return Attributes(Operation.CREATE, POD, "binding", namespace, name, new, old, user, dry_run)

        return await self.registry.guaranteed_update(POD, namespace, name, lambda pod: _POD.bound(pod, binding),
                                                     dry_run=dry_run, attributes=attributes)

    # ------------------------------------------------------------ resize

    def _check_served(self) -> None:
        """The resize subresource came with in-place resize's beta (Kubernetes 1.33); an apiserver
        emulating a release where the InPlacePodVerticalScaling gate is still alpha (or absent)
        does not serve it: 404, as for any path it does not have."""
        if self.gates.stage("InPlacePodVerticalScaling") in (Stage.PRE_ALPHA, Stage.ALPHA):
            raise errors.NotFound("the server could not find the requested resource")

    def _prepare_resize(self, new: core_pb2.Pod, old: core_pb2.Pod) -> core_pb2.Pod:
        return _POD.prepare_for_resize(new, old, in_place_enabled=self.gates.enabled("InPlacePodVerticalScaling"),
                                       memory_backed_volumes=self.gates.enabled(emptydir.GATE))

    def _resize_request(self, requested: core_pb2.Pod, old: core_pb2.Pod) -> core_pb2.Pod:
        return _POD.resize_request(requested, old, volumes=self.gates.enabled(emptydir.GATE))

    async def resize(self, pod: core_pb2.Pod, user: User, dry_run: bool = False,
                     field_manager: str | None = None) -> core_pb2.Pod:
        """Update through the resize subresource (the request is the whole pod), recorded under
        ``field_manager``."""
        self._check_served()
        namespace = pod.metadata.namespace or "default"
        return await self.registry.guaranteed_update(
            POD, namespace, pod.metadata.name, lambda old: self._resize_request(pod, old),
            precondition_rv=pod.metadata.resource_version, dry_run=dry_run,
            attributes=self.registry.writes(POD, "resize", user, dry_run), prepare=self._prepare_resize,
            manager=Manager(field_manager, "resize") if field_manager is not None else None)

    async def resize_patch(self, req: meta_pb2.PatchRequest, user: User, dry_run: bool = False,
                           unknown: list[str] | None = None, field_manager: str | None = None) -> core_pb2.Pod:
        """Patch through the resize subresource (strategic merge merges containers by name);
        ``unknown`` and the field manager as ``Registry.patch``'s. Server-side apply is served on
        the pod and its status, not here."""
        self._check_served()
        check_patch_options(req)
        if is_apply(req):
            raise errors.BadRequest("server-side apply is not served on pods/resize by kplane: apply to the pod, "
                                    "or patch pods/resize with a strategic merge, merge or JSON patch")
        document, precondition = parse_patch(req)
        namespace = req.namespace or "default"
        manager = req.field_manager or field_manager
        return await self.registry.guaranteed_update(
            POD, namespace, req.name,
            lambda old: self._resize_request(patched(POD, old, document, req.patch_type, unknown), old),
            precondition_rv=precondition, dry_run=dry_run,
            attributes=self.registry.writes(POD, "resize", user, dry_run), prepare=self._prepare_resize,
            manager=Manager(manager, "resize") if manager is not None else None)

    # ------------------------------------------------------------ eviction

    async def evict(self, eviction: core_pb2.Eviction, user: User, dry_run: bool = False) -> core_pb2.Pod:
        """Kubernetes' EvictionREST.Create: the pod is deleted if its PodDisruptionBudget allows it."""
        name = eviction.metadata.name
        namespace = eviction.metadata.namespace or "default"
        opts = eviction.delete_options
        delete = meta_pb2.DeleteRequest(namespace=namespace, name=name)
        if opts.HasField("grace_period_seconds"):
            delete.grace_period_seconds = opts.grace_period_seconds
        if opts.HasField("propagation_policy"):
            delete.propagation_policy = opts.propagation_policy
        delete.preconditions.CopyFrom(opts.preconditions)
        rv_given = delete.preconditions.HasField("resource_version")
        pod: core_pb2.Pod | None = None
        for _ in range(EVICTION_RETRIES):
            pod = await self.registry.read(POD, namespace, name, fresh=True)
            if pod is None:
                raise errors.not_found("pods", name)
            attrs = Attributes(Operation.CREATE, POD, "eviction", namespace, name, pod, pod, user, dry_run)
            await self.registry.admission.admit(attrs)
            await self.registry.admission.validate(attrs)
            if not _can_ignore_pdb(pod):
                break
            # Terminal, Pending or already deleting: it disrupts nothing more, so no budget is asked.
            req = delete
            if _should_enforce_resource_version(pod) and not rv_given:
                req = _with_resource_version(delete, pod.metadata.resource_version)
            try:
                return await self._mark_and_delete(req, user, dry_run)
            except errors.Conflict:
                if rv_given:
                    raise
        else:
            raise errors.conflict("pods", name, "too many concurrent writers; try again")
        assert pod is not None
        # A consistent read (Kubernetes' eviction lists the budgets through the API at ""): a budget
        # or pod status written a moment ago counts even while the watch cache lags behind etcd.
        budgets = [b for b in await self._consistent(POD_DISRUPTION_BUDGET, namespace)
                   if disruption.covers_for_eviction(b, pod)]
        if len(budgets) > 1:
            raise errors.InternalError("This pod has more than one PodDisruptionBudget, which the eviction "
                                       "subresource does not support.")
        if not budgets:
            return await self._mark_and_delete(delete, user, dry_run)
        pdb = await self._as_evictions_see_it(strategy.copy(budgets[0]))
        if not disruption.is_pod_ready(pod) and (
                pdb.spec.unhealthy_pod_eviction_policy == "AlwaysAllow"
                or pdb.status.current_healthy >= pdb.status.desired_healthy > 0):
            # An unready pod does not count as healthy: its eviction takes nothing from the budget,
            # as long as the pod is still as read (not Ready since).
            try:
                return await self._mark_and_delete(_with_resource_version(
                    delete, delete.preconditions.resource_version if rv_given else pod.metadata.resource_version),
                    user, dry_run)
            except errors.Conflict:
                if rv_given:
                    raise
                raise _still_being_processed(pdb.metadata.name) from None
        for _ in range(EVICTION_RETRIES):
            status = check_and_decrement(pdb, name)
            if dry_run:
                break
            try:
                await self.registry.guaranteed_update(
                    POD_DISRUPTION_BUDGET, namespace, pdb.metadata.name, functools.partial(_with_status, status=status),
                    precondition_rv=pdb.metadata.resource_version)
                break
            except errors.Conflict:  # another eviction or the controller wrote the budget: decide again
                fresh = await self.registry.read(POD_DISRUPTION_BUDGET, namespace, pdb.metadata.name, fresh=True)
                if fresh is None:
                    raise errors.not_found("poddisruptionbudgets", pdb.metadata.name) from None
                pdb = await self._as_evictions_see_it(fresh)
        else:
            raise errors.Timeout(f"Timeout: couldn't update PodDisruptionBudget \"{pdb.metadata.name}\" due to "
                                 "conflicts")
        return await self._mark_and_delete(delete, user, dry_run)

    async def _mark_and_delete(self, req: meta_pb2.DeleteRequest, user: User, dry_run: bool) -> core_pb2.Pod:
        """Kubernetes' addConditionAndDeletePod: the pod is marked DisruptionTarget (reason
        EvictionByEvictionAPI) in a write of its own, then deleted — so the history tells an
        eviction from a plain delete. The delete's preconditions are checked against the pod the
        mark is written on, and a resourceVersion precondition then names the marked version."""
        if not dry_run:
            pre = req.preconditions

            def mark(pod: core_pb2.Pod) -> core_pb2.Pod:
                if pre.HasField("uid") and pre.uid != pod.metadata.uid:
                    raise errors.conflict("pods", req.name, f"Precondition failed: UID in precondition: {pre.uid}, "
                                                            f"UID in object meta: {pod.metadata.uid}")
                if pre.HasField("resource_version") and pre.resource_version != pod.metadata.resource_version:
                    raise errors.conflict("pods", req.name, "Precondition failed: ResourceVersion in precondition: "
                                                            f"{pre.resource_version}, ResourceVersion in object meta: "
                                                            f"{pod.metadata.resource_version}")
                podconditions.update_condition(pod.status, podconditions.disruption_target(
                    podconditions.EVICTION_BY_EVICTION_API, "Eviction API: evicting"))
                return pod

            marked = await self.registry.guaranteed_update(POD, req.namespace, req.name, mark)
            if pre.HasField("resource_version"):
                req = _with_resource_version(req, marked.metadata.resource_version)
        return await self.registry.delete(POD, req, user, dry_run, verb="eviction")

    async def _consistent(self, kind, namespace: str) -> list:
        """The objects of ``kind`` in ``namespace`` as a list at resourceVersion "" gives them."""
        lst = await self.registry.list(kind, meta_pb2.ListRequest(namespace=namespace, resource_version=""))
        return list(list_accessor(kind, lst).items)

    async def _as_evictions_see_it(self, pdb: policy_pb2.PodDisruptionBudget) -> policy_pb2.PodDisruptionBudget:
        """The budget with the status evictions decide by: the disruption controller's, or — when no
        controller ever wrote one (a cluster run without a controller-manager) — kplane's fallback,
        computed here from the pods a consistent read gives (as the budgets: never older than a
        pod status written before the eviction) and marked as not the controller's
        (observedGeneration 0, no condition), so the next eviction computes it again."""
        if disruption.computed_by_controller(pdb):
            return pdb
        selected = [p for p in await self._consistent(POD, pdb.metadata.namespace) if disruption.selects(pdb, p)]
        status = disruption.compute_status(pdb, selected)
        status.observed_generation = 0
        del status.conditions[:]
        pdb.status.CopyFrom(status)
        return pdb


def _can_ignore_pdb(pod: core_pb2.Pod) -> bool:
    """Kubernetes' canIgnorePDB: a terminal or Pending pod, or one being deleted, is deleted at once."""
    return pod.status.phase in ("Succeeded", "Failed", "Pending") or bool(pod.metadata.deletion_timestamp)


def _should_enforce_resource_version(pod: core_pb2.Pod) -> bool:
    """Kubernetes' shouldEnforceResourceVersion: a pod that may still become Ready (and so count
    for a budget) is deleted only as read."""
    return pod.status.phase not in TERMINAL_PHASES and not pod.metadata.deletion_timestamp


def _with_resource_version(delete: meta_pb2.DeleteRequest, resource_version: str) -> meta_pb2.DeleteRequest:
    req = meta_pb2.DeleteRequest()
    req.CopyFrom(delete)
    req.preconditions.resource_version = resource_version
    return req


_VIOLATES = "Cannot evict pod as it would violate the pod's disruption budget."


def _still_being_processed(pdb_name: str) -> errors.TooManyRequests:
    """Kubernetes' createTooManyRequestsError: the budget's status is older than its spec, so the
    disruption controller has not decided yet; the client should try again (a 429)."""
    return errors.TooManyRequests(f"{_VIOLATES} The disruption budget {pdb_name} is still being processed by the "
                                  "server.")


def check_and_decrement(pdb: policy_pb2.PodDisruptionBudget,
                             pod_name: str) -> policy_pb2.PodDisruptionBudgetStatus:
    """Kubernetes' checkAndDecrement: the budget's status with one disruption fewer allowed and the
    pod in ``disruptedPods`` (one write, so the controller does not count it healthy meanwhile) —
    or the refusal: a status older than the spec (429), a negative or too full status (403), no
    disruption allowed (429)."""
    name, st = pdb.metadata.name, pdb.status
    fallback = not disruption.computed_by_controller(pdb)
    if not fallback and st.observed_generation < pdb.metadata.generation:
        raise _still_being_processed(name)
    if st.disruptions_allowed < 0:
        raise errors.Forbidden(f'poddisruptionbudget.policy "{name}" is forbidden: pdb disruptions allowed is negative')
    if len(st.disrupted_pods) > disruption.MAX_DISRUPTED_PODS:
        raise errors.Forbidden(f'poddisruptionbudget.policy "{name}" is forbidden: DisruptedPods map too big - too '
                               "many evictions not confirmed by PDB controller")
    if st.disruptions_allowed == 0:
        raise errors.TooManyRequests(f"{_VIOLATES} The disruption budget {name} needs {st.desired_healthy} healthy "
                                     f"pods and has {st.current_healthy} currently")
    status = policy_pb2.PodDisruptionBudgetStatus()
    status.CopyFrom(st)
    status.disruptions_allowed -= 1
    now = timeutil.now()
    if status.disruptions_allowed == 0 and not fallback:
        disruption.update_disruption_allowed_condition(status, now)
    status.disrupted_pods[pod_name] = timeutil.rfc3339(now)
    return status


def _with_status(pdb: policy_pb2.PodDisruptionBudget,
                 status: policy_pb2.PodDisruptionBudgetStatus) -> policy_pb2.PodDisruptionBudget:
    pdb.status.CopyFrom(status)
    return pdb
