"""Builders for the API objects tests make, in the style of kube-scheduler's testing wrappers
(pkg/scheduler/testing/wrappers.go: ``st.MakePod().Name("p").Req(...).Obj()``)::

    MakePod().name("web").req(cpu="1", memory="1Gi").lim(cpu="2").priority_class("high").node("node-1").obj()
    MakeNode().name("n1").allocatable(cpu="4", memory="8Gi", pods="110").label("zone", "a").obj()

A pod has namespace "default" and, unless the test adds containers itself, one container "c1"
running ``registry.k8s.io/pause:3.10``; ``req``/``lim``/``resize_policy``/``port`` apply to the
container added last (``c1`` when none was). Nothing else is set unless a call says so: no
priority, no grace period, no uid, no status. A node has a name and nothing else: its
allocatable resources, labels and taints are what the test gives it.

    MakeReplicaSet().name("web").replicas(3).req(cpu="100m").obj()
    MakeDeployment().name("web").replicas(3).image("nginx:1.25").rolling_update(max_surge=1, max_unavailable=0).obj()

A ReplicaSet or Deployment selects and labels its pods ``app: <name>`` unless ``labels`` says
otherwise; its template has the one container ``c1``.
"""

from __future__ import annotations

from collections.abc import Mapping

from machinery.api import apps_pb2, core_pb2, policy_pb2, scheduling_pb2

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_CONTAINER = "c1"


def _resources(given: Mapping[str, str | None] | None, kw: Mapping[str, str | None]) -> dict[str, str]:
    """``{"cpu": "1"}`` and/or ``cpu="1"`` as one map; empty or ``None`` values (not asked for) left out."""
    return {k: v for k, v in {**(given or {}), **kw}.items() if v}


class MakePod:
    """A pod under construction; ``obj()`` returns it."""

    def __init__(self) -> None:
        self._pod = core_pb2.Pod(api_version="v1", kind="Pod")
        self._pod.metadata.namespace = "default"
        self._current: core_pb2.Container | None = None

    # --- metadata ---------------------------------------------------------------------------

    def name(self, name: str) -> MakePod:
        self._pod.metadata.name = name
        return self

    def namespace(self, namespace: str) -> MakePod:
        self._pod.metadata.namespace = namespace
        return self

    def uid(self, uid: str) -> MakePod:
        self._pod.metadata.uid = uid
        return self

    def generation(self, generation: int) -> MakePod:
        self._pod.metadata.generation = generation
        return self

    def resource_version(self, rv: str) -> MakePod:
        self._pod.metadata.resource_version = rv
        return self

    def label(self, key: str, value: str) -> MakePod:
        self._pod.metadata.labels[key] = value
        return self

    def labels(self, labels: Mapping[str, str] | None) -> MakePod:
        self._pod.metadata.labels.update(labels or {})
        return self

    def annotation(self, key: str, value: str) -> MakePod:
        self._pod.metadata.annotations[key] = value
        return self

    def owner(self, kind: str, name: str, uid: str, *, api_version: str = "apps/v1", controller: bool = True,
              block_owner_deletion: bool | None = None) -> MakePod:
        """An ownerReference (the controller's, unless ``controller=False``)."""
        ref = self._pod.metadata.owner_references.add(api_version=api_version, kind=kind, name=name, uid=uid,
                                                      controller=controller)
        if block_owner_deletion is not None:
            ref.block_owner_deletion = block_owner_deletion
        return self

    def deletion_timestamp(self, when: str) -> MakePod:
        self._pod.metadata.deletion_timestamp = when
        return self

    # --- containers ---------------------------------------------------------------------------

    def container(self, name: str, image: str = PAUSE_IMAGE, **requests: str | None) -> MakePod:
        """One more container (``c1`` is then not added unless asked for)."""
        self._current = self._pod.spec.containers.add(name=name, image=image)
        self._current.resources.requests.update(_resources(None, requests))
        return self

    def init_container(self, name: str, restart_policy: str | None = None, **requests: str | None) -> MakePod:
        self._current = self._pod.spec.init_containers.add(name=name, image=PAUSE_IMAGE)
        self._current.resources.requests.update(_resources(None, requests))
        if restart_policy:
            self._current.restart_policy = restart_policy
        return self

    def sidecar(self, name: str, **requests: str | None) -> MakePod:
        """An init container with ``restartPolicy: Always`` (KEP-753)."""
        return self.init_container(name, "Always", **requests)

    def _container(self) -> core_pb2.Container:
        if self._current is None:
            self.container(DEFAULT_CONTAINER)
        assert self._current is not None
        return self._current

    def req(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakePod:
        """Requests of the last container: ``req(cpu="1")`` or ``req({"example.com/gpu": "1"})``."""
        self._container().resources.requests.update(_resources(resources, kw))
        return self

    def lim(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakePod:
        """Limits of the last container."""
        self._container().resources.limits.update(_resources(resources, kw))
        return self

    def resize_policy(self, resource: str, restart_policy: str) -> MakePod:
        """KEP-1287: how the last container takes a resize of ``resource`` (``NotRequired``, ``RestartContainer``)."""
        self._container().resize_policy.add(resource_name=resource, restart_policy=restart_policy)
        return self

    def port(self, container_port: int, host_port: int = 0, protocol: str = "") -> MakePod:
        self._container().ports.add(container_port=container_port, host_port=host_port, protocol=protocol)
        return self

    # --- scheduling -----------------------------------------------------------------------------

    def node(self, node_name: str) -> MakePod:
        """``spec.nodeName``: the pod is bound to ``node_name``."""
        self._pod.spec.node_name = node_name
        return self

    def priority(self, priority: int) -> MakePod:
        """``spec.priority`` as the Priority admission plugin sets it (set even when 0)."""
        self._pod.spec.priority = priority
        return self

    def priority_class(self, name: str) -> MakePod:
        self._pod.spec.priority_class_name = name
        return self

    def preemption_policy(self, policy: str) -> MakePod:
        self._pod.spec.preemption_policy = policy
        return self

    def scheduler_name(self, name: str) -> MakePod:
        self._pod.spec.scheduler_name = name
        return self

    def grace(self, seconds: int) -> MakePod:
        """``spec.terminationGracePeriodSeconds``."""
        self._pod.spec.termination_grace_period_seconds = seconds
        return self

    def node_selector(self, selector: Mapping[str, str]) -> MakePod:
        self._pod.spec.node_selector.update(selector)
        return self

    def toleration(self, key: str = "", operator: str = "", value: str = "", effect: str = "",
                   toleration_seconds: int | None = None) -> MakePod:
        t = self._pod.spec.tolerations.add(key=key, operator=operator, value=value, effect=effect)
        if toleration_seconds is not None:
            t.toleration_seconds = toleration_seconds
        return self

    def node_affinity_in(self, key: str, values: list[str]) -> MakePod:
        """A required node affinity term of its own: ``key In values`` (``metadata.name`` goes to matchFields)."""
        ns = self._pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
        term = ns.node_selector_terms.add()
        exprs = term.match_fields if key == "metadata.name" else term.match_expressions
        exprs.add(key=key, operator="In", values=values)
        return self

    def pod_affinity(self, topology_key: str, match_labels: Mapping[str, str]) -> MakePod:
        """A required pod affinity term: a pod labelled ``match_labels`` in the same ``topology_key`` domain."""
        term = self._pod.spec.affinity.pod_affinity.required_during_scheduling_ignored_during_execution.add(
            topology_key=topology_key)
        term.label_selector.match_labels.update(match_labels)
        return self

    def pod_anti_affinity(self, topology_key: str, match_labels: Mapping[str, str]) -> MakePod:
        """A required pod anti-affinity term: no pod labelled ``match_labels`` in the ``topology_key`` domain."""
        term = self._pod.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution.add(
            topology_key=topology_key)
        term.label_selector.match_labels.update(match_labels)
        return self

    def spread(self, max_skew: int, topology_key: str, when_unsatisfiable: str,
               match_labels: Mapping[str, str]) -> MakePod:
        """A topology spread constraint over the pods labelled ``match_labels``."""
        c = self._pod.spec.topology_spread_constraints.add(max_skew=max_skew, topology_key=topology_key,
                                                           when_unsatisfiable=when_unsatisfiable)
        c.label_selector.match_labels.update(match_labels)
        return self

    # --- status ---------------------------------------------------------------------------------

    def phase(self, phase: str) -> MakePod:
        self._pod.status.phase = phase
        return self

    def condition(self, type_: str, status: str = "True", reason: str = "", **fields: str | int) -> MakePod:
        self._pod.status.conditions.add(type=type_, status=status, reason=reason, **fields)
        return self

    def start_time(self, when: str) -> MakePod:
        self._pod.status.start_time = when
        return self

    def _status(self) -> core_pb2.ContainerStatus:
        name = self._container().name
        for cs in self._pod.status.container_statuses:
            if cs.name == name:
                return cs
        return self._pod.status.container_statuses.add(name=name)

    def allocated(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakePod:
        """KEP-1287: what the kubelet allocated to the last container (``allocatedResources`` of its status)."""
        self._status().allocated_resources.update(_resources(resources, kw))
        return self

    def actual(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakePod:
        """KEP-1287: the requests the last container runs with (``resources`` of its status)."""
        self._status().resources.requests.update(_resources(resources, kw))
        return self

    def actual_lim(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakePod:
        """KEP-1287: the limits the last container runs with (``resources.limits`` of its status)."""
        self._status().resources.limits.update(_resources(resources, kw))
        return self

    def active_deadline(self, seconds: int) -> MakePod:
        """``spec.activeDeadlineSeconds`` (the pod is in a quota's Terminating scope)."""
        self._pod.spec.active_deadline_seconds = seconds
        return self

    def overhead(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakePod:
        """``spec.overhead``, as a RuntimeClass sets it."""
        self._pod.spec.overhead.update(_resources(resources, kw))
        return self

    def nominated(self, node_name: str) -> MakePod:
        """``status.nominatedNodeName``."""
        self._pod.status.nominated_node_name = node_name
        return self

    def obj(self) -> core_pb2.Pod:
        if not self._pod.spec.containers:
            self.container(DEFAULT_CONTAINER)
        return self._pod


class MakeNode:
    """A node under construction; ``obj()`` returns it."""

    def __init__(self) -> None:
        self._node = core_pb2.Node(api_version="v1", kind="Node")

    def name(self, name: str) -> MakeNode:
        self._node.metadata.name = name
        return self

    def resource_version(self, rv: str) -> MakeNode:
        self._node.metadata.resource_version = rv
        return self

    def label(self, key: str, value: str) -> MakeNode:
        self._node.metadata.labels[key] = value
        return self

    def labels(self, labels: Mapping[str, str] | None) -> MakeNode:
        self._node.metadata.labels.update(labels or {})
        return self

    def allocatable(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakeNode:
        """``status.allocatable``, what the scheduler fits pods into."""
        self._node.status.allocatable.update(_resources(resources, kw))
        return self

    def capacity(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakeNode:
        """``status.capacity`` and ``status.allocatable`` both (as wrappers.go's ``Capacity``)."""
        self._node.status.capacity.update(_resources(resources, kw))
        return self.allocatable(resources, **kw)

    def taint(self, key: str, value: str = "", effect: str = "NoSchedule") -> MakeNode:
        self._node.spec.taints.add(key=key, value=value, effect=effect)
        return self

    def unschedulable(self, unschedulable: bool = True) -> MakeNode:
        self._node.spec.unschedulable = unschedulable
        return self

    def ready(self, status: str = "True") -> MakeNode:
        """The ``Ready`` condition a kubelet reports."""
        self._node.status.conditions.add(type="Ready", status=status)
        return self

    def kubelet_version(self, version: str) -> MakeNode:
        self._node.status.node_info.kubelet_version = version
        return self

    def disable_resize_preemption(self, *owners: str) -> MakeNode:
        """KEP-5836's node-level policy: ``spec.podPreemptionPolicy.disableResizePreemption``."""
        self._node.spec.pod_preemption_policy.disable_resize_preemption.extend(owners)
        return self

    def obj(self) -> core_pb2.Node:
        return self._node


def make_priority_class(name: str, value: int, *, global_default: bool = False,
                        preemption_policy: str | None = None) -> scheduling_pb2.PriorityClass:
    pc = scheduling_pb2.PriorityClass(api_version="scheduling.k8s.io/v1", kind="PriorityClass", value=value,
                                      global_default=global_default)
    pc.metadata.name = name
    if preemption_policy:
        pc.preemption_policy = preemption_policy
    return pc


def make_pdb(name: str, match_labels: Mapping[str, str], *, min_available: str | None = None,
             max_unavailable: str | None = None, namespace: str = "default") -> policy_pb2.PodDisruptionBudget:
    pdb = policy_pb2.PodDisruptionBudget(api_version="policy/v1", kind="PodDisruptionBudget")
    pdb.metadata.name, pdb.metadata.namespace = name, namespace
    pdb.spec.selector.match_labels.update(match_labels)
    if min_available is not None:
        pdb.spec.min_available = min_available
    if max_unavailable is not None:
        pdb.spec.max_unavailable = max_unavailable
    return pdb


def make_namespace(name: str) -> core_pb2.Namespace:
    ns = core_pb2.Namespace(api_version="v1", kind="Namespace")
    ns.metadata.name = name
    return ns


def make_resource_quota(name: str, hard: Mapping[str, str], *, namespace: str = "default",
                        scopes: tuple[str, ...] = ()) -> core_pb2.ResourceQuota:
    """A ResourceQuota limiting ``hard`` (``{"requests.cpu": "2", "pods": "10"}``)."""
    q = core_pb2.ResourceQuota(api_version="v1", kind="ResourceQuota")
    q.metadata.name, q.metadata.namespace = name, namespace
    q.spec.hard.update(hard)
    q.spec.scopes.extend(scopes)
    return q


def limit_range_item(type_: str = "Container", *, min: Mapping[str, str] | None = None,
                     max: Mapping[str, str] | None = None, default: Mapping[str, str] | None = None,
                     default_request: Mapping[str, str] | None = None,
                     max_limit_request_ratio: Mapping[str, str] | None = None) -> core_pb2.LimitRangeItem:
    """One item of a LimitRange: ``type_`` Container or Pod, and the bounds given."""
    item = core_pb2.LimitRangeItem(type=type_)
    for field, values in (("min", min), ("max", max), ("default", default), ("default_request", default_request),
                          ("max_limit_request_ratio", max_limit_request_ratio)):
        getattr(item, field).update(values or {})
    return item


def make_limit_range(name: str, *items: core_pb2.LimitRangeItem, namespace: str = "default") -> core_pb2.LimitRange:
    lr = core_pb2.LimitRange(api_version="v1", kind="LimitRange")
    lr.metadata.name, lr.metadata.namespace = name, namespace
    lr.spec.limits.extend(items)
    return lr


def mark_running_and_ready(pod: core_pb2.Pod, with_status_resources: bool = True) -> core_pb2.Pod:
    """What a kubelet reports for a started pod (used where no kubelet runs)."""
    pod.status.phase = "Running"
    del pod.status.conditions[:]
    pod.status.conditions.add(type="Ready", status="True")
    del pod.status.container_statuses[:]
    for c in pod.spec.containers:
        cs = pod.status.container_statuses.add(name=c.name, ready=True, image=c.image)
        cs.state.running.started_at = "2026-01-01T00:00:00Z"
        if with_status_resources:
            cs.allocated_resources.update(c.resources.requests)
            cs.resources.requests.update(c.resources.requests)
            cs.resources.limits.update(c.resources.limits)
    return pod


class _MakeWorkload:
    """What ReplicaSets and Deployments share: a selector, a pod template (one container ``c1``
    running the pause image unless ``image``/``req`` say otherwise), replicas."""

    def __init__(self, obj: apps_pb2.ReplicaSet | apps_pb2.Deployment) -> None:
        self._obj = obj
        obj.metadata.namespace = "default"

    def _container(self) -> core_pb2.Container:
        spec = self._obj.spec.template.spec
        if not spec.containers:
            spec.containers.add(name=DEFAULT_CONTAINER, image=PAUSE_IMAGE)
        return spec.containers[0]

    def _name(self, name: str) -> None:
        self._obj.metadata.name = name

    def _labels(self, labels: Mapping[str, str]) -> None:
        """``labels`` as the selector's matchLabels and the template's labels."""
        self._obj.spec.selector.match_labels.update(labels)
        self._obj.spec.template.metadata.labels.update(labels)

    def _done(self) -> None:
        self._container()
        if not self._obj.spec.selector.match_labels and not self._obj.spec.selector.match_expressions:
            self._labels({"app": self._obj.metadata.name})


class MakeReplicaSet(_MakeWorkload):
    """A ReplicaSet under construction (labels ``app: <name>`` unless ``labels`` is given)."""

    def __init__(self) -> None:
        self._rs = apps_pb2.ReplicaSet(api_version="apps/v1", kind="ReplicaSet")
        super().__init__(self._rs)

    def name(self, name: str) -> MakeReplicaSet:
        self._name(name)
        return self

    def labels(self, labels: Mapping[str, str]) -> MakeReplicaSet:
        self._labels(labels)
        return self

    def replicas(self, replicas: int) -> MakeReplicaSet:
        self._rs.spec.replicas = replicas
        return self

    def min_ready_seconds(self, seconds: int) -> MakeReplicaSet:
        self._rs.spec.min_ready_seconds = seconds
        return self

    def image(self, image: str) -> MakeReplicaSet:
        self._container().image = image
        return self

    def req(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakeReplicaSet:
        self._container().resources.requests.update(_resources(resources, kw))
        return self

    def priority_class(self, name: str) -> MakeReplicaSet:
        self._rs.spec.template.spec.priority_class_name = name
        return self

    def grace(self, seconds: int) -> MakeReplicaSet:
        self._rs.spec.template.spec.termination_grace_period_seconds = seconds
        return self

    def obj(self) -> apps_pb2.ReplicaSet:
        self._done()
        return self._rs


class MakeDeployment(_MakeWorkload):
    """A Deployment under construction (labels ``app: <name>`` unless ``labels`` is given; the
    apiserver's defaults otherwise: RollingUpdate 25%/25%, revisionHistoryLimit 10)."""

    def __init__(self) -> None:
        self._d = apps_pb2.Deployment(api_version="apps/v1", kind="Deployment")
        super().__init__(self._d)

    def name(self, name: str) -> MakeDeployment:
        self._name(name)
        return self

    def labels(self, labels: Mapping[str, str]) -> MakeDeployment:
        self._labels(labels)
        return self

    def replicas(self, replicas: int) -> MakeDeployment:
        self._d.spec.replicas = replicas
        return self

    def image(self, image: str) -> MakeDeployment:
        self._container().image = image
        return self

    def req(self, resources: Mapping[str, str | None] | None = None, /, **kw: str | None) -> MakeDeployment:
        self._container().resources.requests.update(_resources(resources, kw))
        return self

    def grace(self, seconds: int) -> MakeDeployment:
        self._d.spec.template.spec.termination_grace_period_seconds = seconds
        return self

    def rolling_update(self, max_surge: str | int | None = None,
                       max_unavailable: str | int | None = None) -> MakeDeployment:
        """``strategy: RollingUpdate`` with these bounds (an int or a percentage like ``"25%"``)."""
        self._d.spec.strategy.type = "RollingUpdate"
        if max_surge is not None:
            self._d.spec.strategy.rolling_update.max_surge = str(max_surge)
        if max_unavailable is not None:
            self._d.spec.strategy.rolling_update.max_unavailable = str(max_unavailable)
        return self

    def recreate(self) -> MakeDeployment:
        self._d.spec.strategy.type = "Recreate"
        return self

    def min_ready_seconds(self, seconds: int) -> MakeDeployment:
        self._d.spec.min_ready_seconds = seconds
        return self

    def revision_history_limit(self, limit: int) -> MakeDeployment:
        self._d.spec.revision_history_limit = limit
        return self

    def progress_deadline_seconds(self, seconds: int) -> MakeDeployment:
        self._d.spec.progress_deadline_seconds = seconds
        return self

    def paused(self, paused: bool = True) -> MakeDeployment:
        self._d.spec.paused = paused
        return self

    def obj(self) -> apps_pb2.Deployment:
        self._done()
        return self._d
