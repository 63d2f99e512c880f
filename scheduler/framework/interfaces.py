"""The extension points a plugin may implement, and the Handle plugins are given.

A plugin is an object with a ``name`` and any of the methods below; the framework calls it at
every extension point whose method it has (kube-scheduler's interface.go, in Python's terms):

=====================  ====================================================================
``pre_enqueue``        (pod) -> Status|None; not success keeps the pod out of activeQ (gated)
``less``               (QueuedPodInfo, QueuedPodInfo) -> bool; the one QueueSort plugin
``events_to_register`` () -> list[ClusterEventWithHint]; what can make a rejected pod schedulable
``pre_filter``         (state, pod, nodes) -> (PreFilterResult|None, Status|None); Skip = not relevant
``add_pod`` / ``remove_pod``  PreFilter extensions: (state, pod, pod_info, node_info) -> Status|None,
                       keep PreFilter's state right when preemption simulates pods gone or added
``filter``             (state, pod, node_info) -> Status|None
``post_filter``        async (state, pod, diagnosis) -> (PostFilterResult|None, Status|None)
``pre_score``          (state, pod, nodes) -> Status|None; Skip = no score from this plugin
``score``              (state, pod, node_info) -> (int, Status|None)
``normalize_score``    (state, pod, node_names: list[str], scores: list[int]) -> Status|None (in place)
``reserve`` / ``unreserve``  (state, pod, node_name)
``permit``             (state, pod, node_name) -> (Status|None, timeout seconds); Wait parks the pod
``pre_bind``           async (state, pod, node_name) -> Status|None
``bind``               async (state, pod, node_name) -> Status|None; Skip passes to the next binder
``post_bind``          (state, pod, node_name)
=====================  ====================================================================

Filter and Score run for each node and are synchronous and cheap; anything that talks to the
API (post_filter, pre_bind, bind) is a coroutine. Plugins are built by a factory
``factory(args, handle: Handle) -> plugin``, registered by name (``scheduler/plugins``): ``args``
is the plugin's typed ``<Plugin>Args`` that ``scheduler.config`` decoded strictly
(``scheduler/framework/plugin_args.py``), or None for a plugin that takes none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Protocol

from machinery.api import core_pb2, policy_pb2
from scheduler.framework.features import Features

if TYPE_CHECKING:
    from machinery.client import Client
    from machinery.events import EventRecorder
    from scheduler.cache.snapshot import Snapshot
    from scheduler.framework.runtime import Framework
    from scheduler.framework.pod_info import PodInfo
    from scheduler.status_writer import StatusWriter

EXTENSION_POINTS = ("pre_enqueue", "less", "pre_filter", "filter", "post_filter", "pre_score", "score", "reserve",
                    "permit", "pre_bind", "bind", "post_bind")


class Plugin(Protocol):
    name: str


class Nominator(Protocol):
    """The pods nominated to run on a node (waiting for preemption victims to leave)."""

    def nominated_pods_for_node(self, node_name: str) -> list["PodInfo"]: ...

    def node_of(self, pod: core_pb2.Pod) -> str: ...


class Handle:
    """What plugins may use of the scheduler: the cycle's snapshot, the API, events, nominations,
    the pods and PodDisruptionBudgets the informers hold, the framework itself (preemption
    runs the filters to simulate) and what the feature gates mean to plugins (``features``)."""

    def __init__(self, *, client: "Client | None" = None, recorder: "EventRecorder | None" = None,
                 nominator: Nominator | None = None, pods: Callable[[], Iterable[core_pb2.Pod]] | None = None,
                 get_pod: Callable[[str, str], core_pb2.Pod | None] | None = None,
                 pdbs: Callable[[], Iterable[policy_pb2.PodDisruptionBudget]] | None = None,
                 activate: Callable[[list[core_pb2.Pod]], None] | None = None,
                 features: Features | None = None):
        self.client = client
        self.features = features or Features()
        self.recorder = recorder
        self.nominator = nominator
        self._pods = pods or (lambda: ())
        self._get_pod = get_pod or (lambda namespace, name: None)
        self._pdbs = pdbs or (lambda: ())
        self.activate = activate or (lambda pods: None)
        self.snapshot: "Snapshot | None" = None
        self.status_writer: "StatusWriter | None" = None  # pod status writes off the cycle, in order per pod
        self.framework: "Framework | None" = None
        self.waiting_pods: dict[str, Any] = {}

    def pods(self) -> Iterable[core_pb2.Pod]:
        return self._pods()

    def get_pod(self, namespace: str, name: str) -> core_pb2.Pod | None:
        return self._get_pod(namespace, name)

    def pdbs(self) -> Iterable[policy_pb2.PodDisruptionBudget]:
        return self._pdbs()

    def nominated_pods_for_node(self, node_name: str) -> list["PodInfo"]:
        return self.nominator.nominated_pods_for_node(node_name) if self.nominator is not None else []

    def nominated_node(self, pod: core_pb2.Pod) -> str:
        """The node the pod is nominated to: the scheduler's own latest decision if it has one (its
        status write may not have landed yet), else the pod's ``status.nominatedNodeName``."""
        node = self.nominator.node_of(pod) if self.nominator is not None else ""
        return node or pod.status.nominated_node_name


PluginFactory = Callable[[Any, Handle], Any]
