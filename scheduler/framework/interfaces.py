"""The extension points a plugin may implement, as one Protocol each, and the Handle plugins are given.

A plugin is an object with a ``name`` that implements any of the Protocols below; the framework
runs it at every extension point whose Protocol it implements (kube-scheduler's interface.go:
one Go interface per extension point, here a ``runtime_checkable`` ``Protocol``). Each Protocol's
docstring says what its statuses mean; a returned None is Success. Filter and Score run for each
node and are synchronous and cheap; anything that talks to the API (post_filter, pre_bind, bind)
is a coroutine.

- ``POINT_PROTOCOLS``: each extension point's configuration name, its Protocol and their methods.
- ``contracts_of``: the contracts a plugin fulfils, which bound the public methods it may have.
- ``Handle`` and ``Services``: what plugins may use of the scheduler; ``PluginFactory``: how
  plugins are built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol, runtime_checkable

from machinery.api import core_pb2, policy_pb2, resource_pb2
from machinery.dra.allocator import DeviceID, NodeDevices
from scheduler.framework.features import Features
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo, QueuedPodInfo
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import (
    ClusterEventWithHint,
    CycleState,
    Diagnosis,
    PostFilterResult,
    PreFilterResult,
    Status,
)

if TYPE_CHECKING:  # annotations only: the handle is given them, the framework never builds them
    from machinery.client import Client
    from machinery.events import EventRecorder
    from scheduler.cache.snapshot import Snapshot
    from scheduler.status_writer import StatusWriter

# One plugin's filter, as the framework runs it.
FilterFn = Callable[[CycleState, core_pb2.Pod, NodeInfo], Status | None]


@runtime_checkable
class Plugin(Protocol):
    """What every plugin has: the name the registry and the profiles know it by."""

    name: str


@runtime_checkable
class PreEnqueuePlugin(Plugin, Protocol):
    """Runs before a pod enters activeQ; cheap, as it runs every time one would."""

    def pre_enqueue(self, pod: core_pb2.Pod) -> Status | None:
        """Success: the pod may enter activeQ. Anything else keeps it gated in the unschedulable
        pool until an event this plugin registered lets it out."""
        ...


@runtime_checkable
class QueueSortPlugin(Plugin, Protocol):
    """Orders activeQ; a profile has exactly one, and all profiles the same one."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether ``a`` pops before ``b``."""
        ...


@runtime_checkable
class EnqueueExtensions(Plugin, Protocol):
    """The cluster events that may make a pod this plugin rejected schedulable."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        """Each event with its QueueingHint function (None: always Queue) and, optionally, its
        PreQueueingHint (``PreQueueingHintFn``); asked once, when the framework is built."""
        ...


@runtime_checkable
class PreFilterPlugin(Plugin, Protocol):
    """Runs once per scheduling attempt, before the filters."""

    def pre_filter(self, state: CycleState, pod: core_pb2.Pod,
                   nodes: list[NodeInfo]) -> tuple[PreFilterResult | None, Status | None]:
        """Success, optionally with a PreFilterResult that narrows the nodes to evaluate (the
        results of all plugins intersect); Skip: this plugin's Filter does not run this attempt;
        Unschedulable: the others still run, then the attempt fails; UnschedulableAndUnresolvable
        ends the attempt at once (preemption cannot help); Error: an internal error."""
        ...


@runtime_checkable
class PreFilterExtensions(Plugin, Protocol):
    """Keeps a PreFilter plugin's cycle state right when preemption simulates pods removed from
    or added to a node; counts only on a plugin that implements PreFilterPlugin."""

    def add_pod(self, state: CycleState, pod: core_pb2.Pod, pod_info_to_add: PodInfo,
                node_info: NodeInfo) -> Status | None:
        """``pod_info_to_add`` is now on ``node_info``; anything but Success is an Error."""
        ...

    def remove_pod(self, state: CycleState, pod: core_pb2.Pod, pod_info_to_remove: PodInfo,
                   node_info: NodeInfo) -> Status | None:
        """``pod_info_to_remove`` is gone from ``node_info``; anything but Success is an Error."""
        ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    """Whether the pod fits one node; runs for each node, synchronous and cheap."""

    def filter(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo) -> Status | None:
        """Success: the node fits; Unschedulable: it does not, and preemption may help;
        UnschedulableAndUnresolvable: it does not and preemption cannot help; Error: an internal
        error."""
        ...


@runtime_checkable
class PostFilterPlugin(Plugin, Protocol):
    """Runs when no node fits the pod (DefaultPreemption)."""

    async def post_filter(self, state: CycleState, pod: core_pb2.Pod,
                          diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        """Success: the pod can be made schedulable (the result may nominate a node), the next
        plugins do not run; Unschedulable: not by this plugin, the next ones run;
        UnschedulableAndUnresolvable: not at all, the next ones do not run; Error: an internal
        error."""
        ...


@runtime_checkable
class PreScorePlugin(Plugin, Protocol):
    """Runs once with the nodes that passed the filters, before Score."""

    def pre_score(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> Status | None:
        """Success; Skip: this plugin's Score does not run this attempt; anything else is an Error."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    """Ranks one feasible node; runs for each node, synchronous and cheap."""

    def score(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        """The node's score (after NormalizeScore within [MIN_NODE_SCORE, MAX_NODE_SCORE]; the
        framework multiplies it by the plugin's weight); anything but Success is an Error."""
        ...


@runtime_checkable
class BatchScorePlugin(Plugin, Protocol):
    """A Score plugin that can also rank every feasible node in one call, with exactly the scores
    its ``score`` gives one node at a time. kplane's own: kube-scheduler calls Score per node (from
    parallel goroutines); in Python the per-node call, its state lookup and its (score, status)
    tuple cost more than the arithmetic, for every node of every cycle."""

    def score_nodes(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> list[int] | None:
        """Each node's score, aligned with ``nodes``; None: score them one at a time (a case the
        batch does not cover, such as a node whose Score would be an error)."""
        ...


@runtime_checkable
class ScoreExtensions(Plugin, Protocol):
    """Rescales a Score plugin's scores of all nodes at once; counts only on a plugin that
    implements ScorePlugin."""

    def normalize_score(self, state: CycleState, pod: core_pb2.Pod, node_names: list[str],
                        scores: list[int]) -> Status | None:
        """Rewrites ``scores`` (aligned with ``node_names``) in place; anything but Success is an
        Error."""
        ...


@runtime_checkable
class ReservePlugin(Plugin, Protocol):
    """Told when the pod is assumed on its node, and when that is undone."""

    def reserve(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status | None:
        """Success; Unschedulable (or UnschedulableAndUnresolvable): the pod is rejected from the
        node, and every Reserve plugin's Unreserve runs; anything else is an Error."""
        ...

    def unreserve(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> None:
        """Undo Reserve; idempotent, and may run without a Reserve before it."""
        ...


@runtime_checkable
class PermitPlugin(Plugin, Protocol):
    """Approves, rejects or delays the binding of a reserved pod."""

    def permit(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> tuple[Status | None, float]:
        """Success; Wait: the pod waits at most the returned seconds (at most 15 minutes) for this
        plugin to allow it through ``handle.waiting_pods``; Unschedulable: rejected; anything
        else is an Error."""
        ...


@runtime_checkable
class PreBindPlugin(Plugin, Protocol):
    """Runs in the binding cycle, before Bind (may talk to the API)."""

    async def pre_bind(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status | None:
        """Success; Unschedulable: the pod is rejected and not bound; anything else is an Error."""
        ...


@runtime_checkable
class BindPlugin(Plugin, Protocol):
    """Binds the pod to its node; the first Bind plugin that does not Skip binds it."""

    async def bind(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> Status | None:
        """Success: bound; Skip: not this plugin's pod, the next Bind plugin runs; anything else
        rejects the pod, unbound."""
        ...


@runtime_checkable
class PostBindPlugin(Plugin, Protocol):
    """Informational, after the pod is bound (clean-up)."""

    def post_bind(self, state: CycleState, pod: core_pb2.Pod, node_name: str) -> None: ...


@runtime_checkable
class Closer(Plugin, Protocol):
    """A plugin with work of its own in flight (async preemption's evictions)."""

    async def close(self) -> None:
        """The scheduler stops: finish (or cancel) that work."""
        ...


# Extension point (its configuration name, in kube-scheduler's order) -> the Protocol of the plugins it runs.
# The framework selects a profile's plugins with ``isinstance`` against them. Each, with its methods, and the
# two contracts any plugin may implement:
#
# ==================  ===========================  ===============================================
# configuration name  Protocol                     methods
# ==================  ===========================  ===============================================
# ``preEnqueue``      ``PreEnqueuePlugin``         ``pre_enqueue``
# ``queueSort``       ``QueueSortPlugin``          ``less``
# ``preFilter``       ``PreFilterPlugin``          ``pre_filter`` (and ``PreFilterExtensions``:
#                                                  ``add_pod``, ``remove_pod``)
# ``filter``          ``FilterPlugin``             ``filter``
# ``postFilter``      ``PostFilterPlugin``         async ``post_filter``
# ``preScore``        ``PreScorePlugin``           ``pre_score``
# ``score``           ``ScorePlugin``              ``score`` (and ``ScoreExtensions``:
#                                                  ``normalize_score``; ``BatchScorePlugin``,
#                                                  kplane's: ``score_nodes``)
# ``reserve``         ``ReservePlugin``            ``reserve``, ``unreserve``
# ``permit``          ``PermitPlugin``             ``permit``
# ``preBind``         ``PreBindPlugin``            async ``pre_bind``
# ``bind``            ``BindPlugin``               async ``bind``
# ``postBind``        ``PostBindPlugin``           ``post_bind``
# (any plugin)        ``EnqueueExtensions``        ``events_to_register`` (each event with its
#                                                  QueueingHint and, optionally, its
#                                                  ``PreQueueingHintFn``: KEP-6132)
# (any plugin)        ``Closer``                   async ``close``
# ==================  ===========================  ===============================================
POINT_PROTOCOLS: dict[str, type] = {
    "preEnqueue": PreEnqueuePlugin, "queueSort": QueueSortPlugin, "preFilter": PreFilterPlugin,
    "filter": FilterPlugin, "postFilter": PostFilterPlugin, "preScore": PreScorePlugin, "score": ScorePlugin,
    "reserve": ReservePlugin, "permit": PermitPlugin, "preBind": PreBindPlugin, "bind": BindPlugin,
    "postBind": PostBindPlugin,
}

# An extension of a point's contract counts only on a plugin that implements that point.
_EXTENDS: dict[type, type] = {PreFilterExtensions: PreFilterPlugin, ScoreExtensions: ScorePlugin,
                              BatchScorePlugin: ScorePlugin}


def contracts_of(plugin: object) -> list[type]:
    """Every contract ``plugin`` fulfils whole: the extension points it implements, their
    extensions, EnqueueExtensions, Closer, and the Protocols its class names as bases.

    A plugin in ``multiPoint`` must not have a public method that none of its contracts names and
    that is not one of its QueueingHints or PreQueueingHints: a misspelt ``filtr`` is an error when
    the framework is built, never an extension point skipped silently. A plugin that fulfils another
    component's contract too (DefaultPreemption: the preemption evaluator's ``PreemptionPlugin``) says
    so by naming that Protocol as a base class (PEP 544's explicit implementation), which makes its
    methods known."""
    out: list[type] = [c for c in (*POINT_PROTOCOLS.values(), EnqueueExtensions, Closer) if isinstance(plugin, c)]
    out += [ext for ext, point in _EXTENDS.items() if point in out and isinstance(plugin, ext)]
    out += [c for c in type(plugin).__mro__ if Protocol in c.__bases__ and c not in out]
    return out


def methods_of(contract: type) -> frozenset[str]:
    """The methods a Protocol names, with those of the Protocols it extends."""
    return frozenset(name for c in contract.__mro__ if Protocol in c.__bases__
                     for name, value in vars(c).items() if not name.startswith("_") and callable(value))


def public_methods(plugin: object) -> list[str]:
    """The methods of the plugin's class (inherited ones too) whose names do not start with ``_``."""
    cls = type(plugin)
    return sorted(name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name)))


class PodIndexes(Protocol):
    """The indexes of the scheduler's pod informer (``machinery.informer.Informer``)."""

    def add_indexer(self, name: str, fn: Callable[[core_pb2.Pod], list[str]]) -> None: ...

    def by_index(self, name: str, value: str) -> list[core_pb2.Pod]: ...


class Nominator(Protocol):
    """The pods nominated to run on a node (waiting for preemption victims to leave)."""

    def nominated_pods_for_node(self, node_name: str) -> list["PodInfo"]: ...

    def node_of(self, pod: core_pb2.Pod) -> str: ...


class SharedDRAManager(Protocol):
    """The Dynamic Resource Allocation objects the scheduler's informers hold (kube-scheduler's
    SharedDRAManager): ResourceClaims, DeviceClasses, the ResourceSlices a node can use, and the
    devices the claims the informer shows hold. What a plugin has allocated but not yet written
    (Reserve to PreBind, and until the informer shows the write) is the plugin's own to add."""

    def get_claim(self, namespace: str, name: str) -> resource_pb2.ResourceClaim | None:
        """The claim as the informer has it, or None."""
        ...

    def get_device_class(self, name: str) -> resource_pb2.DeviceClass | None: ...

    def slices_for(self, node_name: str) -> list[resource_pb2.ResourceSlice]:
        """The slices published for that node (``spec.nodeName``) and those not tied to one node
        (``nodeSelector``, ``allNodes``), which the allocator matches against the node."""
        ...

    def usable_devices(self, node: core_pb2.Node) -> NodeDevices:
        """The devices the node's slices offer it, as the allocator picks from them (remembered
        while the node and its slices are unchanged)."""
        ...

    def is_allocated(self, device: DeviceID) -> bool:
        """Whether a claim the informer shows holds the device (its ``status.allocation``)."""
        ...


class PluginsRunner(Protocol):
    """What plugins may run of the framework they belong to (kube-scheduler's PluginsRunner, part
    of its Handle): preemption simulates a node without its victims by running the PreFilter
    extensions and the filters. The Framework implements it."""

    def filters_for(self, state: CycleState) -> list[tuple[str, FilterFn]]:
        """The (name, filter) pairs that run this attempt."""
        ...

    def pre_filter_extensions_active(self, state: CycleState) -> bool:
        """Whether any PreFilter extension (AddPod/RemovePod) runs this attempt."""
        ...

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo,
                                               filters: list[tuple[str, FilterFn]] | None = None) -> Status | None:
        ...

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: core_pb2.Pod, to_add: PodInfo,
                                         node_info: NodeInfo) -> Status | None: ...

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: core_pb2.Pod, to_remove: PodInfo,
                                            node_info: NodeInfo) -> Status | None: ...


class Services:
    """What the scheduler gives a profile's framework, which serves it to its plugins through the
    Handle: the API client, the event recorder, the pods and PodDisruptionBudgets the informers hold
    (and indexes a plugin adds to the pod informer), the DRA objects, the scheduling snapshot, the
    pod status writer and what the feature gates mean to plugins. A unit test gives what it needs;
    the rest is empty."""

    def __init__(self, *, client: "Client | None" = None, recorder: "EventRecorder | None" = None,
                 nominator: Nominator | None = None, pods: Callable[[], Iterable[core_pb2.Pod]] | None = None,
                 get_pod: Callable[[str, str], core_pb2.Pod | None] | None = None,
                 get_node: Callable[[str], core_pb2.Node | None] | None = None,
                 pdbs: Callable[[], Iterable[policy_pb2.PodDisruptionBudget]] | None = None,
                 activate: Callable[[list[core_pb2.Pod]], None] | None = None,
                 features: Features | None = None, dra: SharedDRAManager | None = None,
                 pod_indexes: "PodIndexes | None" = None, snapshot: "Snapshot | None" = None,
                 status_writer: "StatusWriter | None" = None, tie_breaks: TieBreaks | None = None):
        self.client = client
        self.features = features or Features()
        self.recorder = recorder
        self.nominator = nominator
        self.dra = dra
        self.pods = pods or (lambda: ())
        self.get_pod = get_pod or (lambda namespace, name: None)
        self.get_node = get_node or (lambda name: None)
        self.pdbs = pdbs or (lambda: ())
        self.pod_indexes = pod_indexes
        self.activate = activate or (lambda pods: None)
        self.snapshot = snapshot
        self.status_writer = status_writer  # pod status writes off the cycle, in order per pod
        self.tie_breaks = tie_breaks or TieBreaks()  # the random source of a pod's choices


class Handle(PluginsRunner, Protocol):
    """What plugins may use of the scheduler (kube-scheduler's framework.Handle), given to each
    plugin's factory: the Framework the plugin belongs to implements it, complete when the plugin
    is built but for the nominator, which the scheduling queue (built after the profiles) sets
    (kube-scheduler's SetPodNominator)."""

    #: Pods a Permit plugin holds, by uid (kube-scheduler's waitingPodsMap).
    waiting_pods: dict[str, Any]

    @property
    def features(self) -> Features:
        """What the feature gates mean to plugins."""
        ...

    @property
    def recorder(self) -> "EventRecorder | None": ...

    @property
    def dra(self) -> SharedDRAManager | None:
        """The DRA objects the informers hold (None with DynamicResourceAllocation off)."""
        ...

    @property
    def snapshot(self) -> "Snapshot | None":
        """The cycle's snapshot of the nodes and their pods (kube-scheduler's SnapshotSharedLister)."""
        ...

    @property
    def status_writer(self) -> "StatusWriter | None":
        """Pod status writes off the cycle, in order per pod (SchedulerAsyncAPICalls)."""
        ...

    def require_client(self) -> "Client":
        """The API client (kube-scheduler's Handle.ClientSet()): always given but in unit tests."""
        ...

    def pods(self) -> Iterable[core_pb2.Pod]:
        """The pods the informer holds."""
        ...

    def get_pod(self, namespace: str, name: str) -> core_pb2.Pod | None: ...

    def get_node(self, name: str) -> core_pb2.Node | None:
        """The node as the informer holds it now (fresher than the cycle's snapshot)."""
        ...

    def pdbs(self) -> Iterable[policy_pb2.PodDisruptionBudget]: ...

    def activate(self, pods: list[core_pb2.Pod]) -> None:
        """Move the pods to the active queue (kube-scheduler's PodActivator)."""
        ...

    def add_pod_indexer(self, name: str, index: Callable[[core_pb2.Pod], list[str]]) -> None:
        """Index the pod informer's pods by ``index(pod)`` under ``name`` (client-go's
        AddIndexers on the shared pod informer); nothing without one (unit tests)."""
        ...

    def pods_by_index(self, name: str, value: str) -> list[core_pb2.Pod]:
        """The informer's pods whose index ``name`` gives ``value``; KeyError for an index no one
        added (an empty list without a pod informer)."""
        ...

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def nominated_node(self, pod: core_pb2.Pod) -> str:
        """The node the pod is nominated to: the scheduler's own latest decision if it has one (its
        status write may not have landed yet), else the pod's ``status.nominatedNodeName``."""
        ...


# Plugins are built by a factory ``factory(args, handle: Handle) -> plugin``, registered by name
# (``scheduler/plugins``): ``args`` is the plugin's typed ``<Plugin>Args`` that ``scheduler.config``
# decoded strictly (``scheduler/framework/plugin_args.py``), or None for a plugin that takes none.
PluginFactory = Callable[[Any, Handle], Plugin]
