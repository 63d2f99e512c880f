"""The framework of one profile: its plugins, built once, run at each extension point in order.

kube-scheduler's frameworkruntime: ``Framework`` instantiates the profile's plugins from the
registry (one instance per plugin, shared by the extension points it implements: those whose
Protocol in ``interfaces.py`` it implements; a multiPoint plugin with a public method no
extension point names is refused), and runs them:

- PreFilter: a Skip status skips that plugin's Filter for this attempt; PreFilterResults
  intersect; a rejection stops the attempt (every node gets the same status).
- Filter: per node, in order, stopping at the first failure. ``filter_with_nominated_pods`` is the
  two-pass check of the preemption design: pods nominated to the node with priority >= the
  pod's are assumed to run there first, and if they were, the filters run again without them.
- PostFilter (preemption), PreScore (Skip skips that plugin's Score), Score (then
  NormalizeScore, then the plugin's weight), Reserve / Unreserve (reverse order), Permit (with
  waiting pods), PreBind, Bind (first binder not answering Skip), PostBind.

Extension-point durations go to ``scheduler_framework_extension_point_duration_seconds``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from types import MethodType
from typing import TYPE_CHECKING, Any, Callable, Iterable

from prometheus_client import Histogram

from machinery.api import core_pb2, policy_pb2
from scheduler.framework.features import Features
from scheduler.framework.interfaces import (
    POINT_PROTOCOLS,
    BindPlugin,
    Closer,
    EnqueueExtensions,
    FilterFn,
    FilterPlugin,
    Handle,
    Nominator,
    PermitPlugin,
    Plugin,
    PluginFactory,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScoreExtensions,
    ScorePlugin,
    Services,
    SharedDRAManager,
    contracts_of,
    methods_of,
    public_methods,
)
from scheduler.framework.node_info import NodeInfo
from scheduler.framework.pod_info import PodInfo, QueuedPodInfo, pod_priority
from scheduler.framework.tiebreaks import TieBreaks
from scheduler.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    ClusterEventWithHint,
    Code,
    CycleState,
    Diagnosis,
    PostFilterResult,
    PreFilterResult,
    Status,
    code_name,
)

if TYPE_CHECKING:
    from machinery.client import Client
    from machinery.events import EventRecorder
    from scheduler.cache.snapshot import Snapshot
    from scheduler.status_writer import StatusWriter


EXTENSION_POINT_DURATION = Histogram(
    "scheduler_framework_extension_point_duration_seconds",
    "Latency for running all plugins of a specific extension point.", ["extension_point", "status", "profile"],
    buckets=(0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048))

DEFAULT_PERMIT_TIMEOUT = 15 * 60.0


class _NoQueueSort:
    """The queue sort of a framework without plugins, which sorts no pods."""

    name = ""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        raise FrameworkError("a framework without plugins sorts no pods")


@dataclass
class PluginSets:
    """A profile's plugins: those enabled at every extension point they implement (multiPoint),
    those enabled at one point specifically (run first there), those disabled per point ("*":
    all multiPoint ones), score weights and args (plugin name -> its typed ``<Plugin>Args``,
    decoded by ``scheduler.config``; a plugin without an entry is built with None)."""

    multi_point: list[str] = field(default_factory=list)
    points: dict[str, list[str]] = field(default_factory=dict)
    disabled: dict[str, set[str]] = field(default_factory=dict)
    weights: dict[str, int] = field(default_factory=dict)
    args: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        seen = list(self.multi_point)
        for names in self.points.values():
            for n in names:
                if n not in seen:
                    seen.append(n)
        return seen

    def expand(self, plugins: dict[str, Plugin], profile: str) -> dict[str, list[str]]:
        """The plugins each extension point runs, in order (kube-scheduler's multiPoint expansion):
        a plugin serves a point when it implements that point's Protocol (``POINT_PROTOCOLS``)."""
        out: dict[str, list[str]] = {}
        for point, contract in POINT_PROTOCOLS.items():
            names = list(self.points.get(point, []))
            for n in names:
                if not isinstance(plugins[n], contract):
                    raise FrameworkError(f'profile "{profile}": plugin "{n}" does not extend {point}')
            off = self.disabled.get(point, set())
            if "*" not in off:
                names += [n for n in self.multi_point
                          if n not in off and n not in names and isinstance(plugins[n], contract)]
            out[point] = names
        return out


class FrameworkError(ValueError):
    """A profile names a plugin that does not exist or cannot serve an extension point, or a
    multiPoint plugin has a method no extension point names."""


def _unknown_methods(plugin: Plugin, events: list[ClusterEventWithHint]) -> list[str]:
    """The plugin's public methods that no contract it fulfils names and that are none of the
    QueueingHints and PreQueueingHints it registers: a misspelt ``filtr``, or half a contract
    (``reserve`` alone)."""
    known = set().union(*map(methods_of, contracts_of(plugin)))
    known |= {fn.__func__.__name__ for e in events for fn in (e.hint, e.pre_queueing_hint)
              if isinstance(fn, MethodType) and fn.__self__ is plugin}
    return [m for m in public_methods(plugin) if m not in known]


class WaitingPod:
    """A pod Permit plugins asked to wait: allowed once every one of them allows it, rejected by
    any of them — or by its own timer, one per plugin, stopped when that plugin allows."""

    def __init__(self, pod: core_pb2.Pod, timeouts: dict[str, float]):
        self.pod = pod
        self.pending = set(timeouts)
        loop = asyncio.get_running_loop()
        self.done: asyncio.Future[Status | None] = loop.create_future()
        self._timers = {name: loop.call_later(t, self.reject, name,
                                              f"rejected due to timeout after waiting {t:g}s at plugin {name}")
                        for name, t in timeouts.items()}

    def allow(self, plugin: str) -> None:
        timer = self._timers.pop(plugin, None)
        if timer is not None:
            timer.cancel()
        self.pending.discard(plugin)
        if not self.pending and not self.done.done():
            self.done.set_result(None)

    def reject(self, plugin: str, message: str) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        if not self.done.done():
            self.done.set_result(Status(Code.UNSCHEDULABLE, message, plugin=plugin))


class Framework:
    """A profile's plugins, run point by point, and the Handle they were built with: the
    Framework implements it (kube-scheduler's frameworkImpl), from the ``services`` the scheduler
    gives it. Without plugin sets it is a bare Handle, for a plugin built on its own (a unit test,
    as kube-scheduler's tests build a plugin with a framework of no profile)."""

    def __init__(self, profile_name: str, sets: PluginSets | None, registry: dict[str, PluginFactory],
                 services: Services | None = None, percentage_of_nodes_to_score: int | None = None):
        self.profile_name = profile_name
        self.services = services if services is not None else Services()
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.waiting_pods: dict[str, Any] = {}
        self.plugins: dict[str, Plugin] = {}
        bare = sets is None
        sets = sets if sets is not None else PluginSets()
        for name in sets.names():
            factory = registry.get(name)
            if factory is None:
                raise FrameworkError(f'profile "{profile_name}": plugin "{name}" does not exist')
            plugin = factory(sets.args.get(name), self)
            plugin.name = name
            self.plugins[name] = plugin

        expanded = sets.expand(self.plugins, profile_name)
        self.points = expanded
        self._events: dict[str, list[ClusterEventWithHint]] = {
            name: list(pl.events_to_register()) for name, pl in self.plugins.items()
            if isinstance(pl, EnqueueExtensions)}
        for name in sets.multi_point:
            unknown = _unknown_methods(self.plugins[name], self._events.get(name, []))
            if unknown:
                raise FrameworkError(f'profile "{profile_name}": multiPoint plugin "{name}" has method '
                                     f'"{unknown[0]}", which no extension point it implements names')

        def at(point: str) -> list[Any]:  # expand checked that each implements the point's Protocol
            return [self.plugins[name] for name in expanded[point]]

        self.pre_enqueue_plugins: list[PreEnqueuePlugin] = at("preEnqueue")
        sorters: list[QueueSortPlugin] = at("queueSort") if not bare else [_NoQueueSort()]
        if len(sorters) != 1:
            raise FrameworkError(f'profile "{profile_name}": exactly one queueSort plugin is needed, got '
                                 f'{len(sorters)}')
        self.queue_sort = sorters[0]
        self.pre_filter_plugins: list[PreFilterPlugin] = at("preFilter")
        self.filter_plugins: list[FilterPlugin] = at("filter")
        self.post_filter_plugins: list[PostFilterPlugin] = at("postFilter")
        self.pre_score_plugins: list[PreScorePlugin] = at("preScore")
        self.score_plugins: list[ScorePlugin] = at("score")
        self.reserve_plugins: list[ReservePlugin] = at("reserve")
        self.permit_plugins: list[PermitPlugin] = at("permit")
        self.pre_bind_plugins: list[PreBindPlugin] = at("preBind")
        self.bind_plugins: list[BindPlugin] = at("bind")
        if not self.bind_plugins and not bare:
            raise FrameworkError(f'profile "{profile_name}": at least one bind plugin is needed')
        self.post_bind_plugins: list[PostBindPlugin] = at("postBind")
        self.weights = {pl.name: (sets.weights.get(pl.name) or 1) for pl in self.score_plugins}
        self._pre_filter_extensions: list[PreFilterExtensions] = [
            pl for pl in self.pre_filter_plugins if isinstance(pl, PreFilterExtensions)]
        self._score_extensions: dict[str, ScoreExtensions] = {
            pl.name: pl for pl in self.score_plugins if isinstance(pl, ScoreExtensions)}

    # ------------------------------------------------------------ the Handle

    @property
    def features(self) -> Features:
        return self.services.features

    @property
    def recorder(self) -> EventRecorder | None:
        return self.services.recorder

    @property
    def tie_breaks(self) -> TieBreaks:
        return self.services.tie_breaks

    @property
    def dra(self) -> SharedDRAManager | None:
        return self.services.dra

    @property
    def snapshot(self) -> Snapshot | None:
        return self.services.snapshot

    @property
    def status_writer(self) -> StatusWriter | None:
        return self.services.status_writer

    def set_pod_nominator(self, nominator: Nominator) -> None:
        """The scheduling queue's nominator, made after the profiles (kube-scheduler's
        SetPodNominator)."""
        self.services.nominator = nominator

    def require_client(self) -> Client:
        if self.services.client is None:
            raise RuntimeError("this scheduler framework has no API client")
        return self.services.client

    def pods(self) -> Iterable[core_pb2.Pod]:
        return self.services.pods()

    def get_pod(self, namespace: str, name: str) -> core_pb2.Pod | None:
        return self.services.get_pod(namespace, name)

    def get_node(self, name: str) -> core_pb2.Node | None:
        return self.services.get_node(name)

    def pdbs(self) -> Iterable[policy_pb2.PodDisruptionBudget]:
        return self.services.pdbs()

    def activate(self, pods: list[core_pb2.Pod]) -> None:
        self.services.activate(pods)

    def add_pod_indexer(self, name: str, index: Callable[[core_pb2.Pod], list[str]]) -> None:
        if self.services.pod_indexes is not None:
            self.services.pod_indexes.add_indexer(name, index)

    def pods_by_index(self, name: str, value: str) -> list[core_pb2.Pod]:
        if self.services.pod_indexes is None:
            return []
        return self.services.pod_indexes.by_index(name, value)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        nominator = self.services.nominator
        return nominator.nominated_pods_for_node(node_name) if nominator is not None else []

    def nominated_node(self, pod: core_pb2.Pod) -> str:
        nominator = self.services.nominator
        node = nominator.node_of(pod) if nominator is not None else ""
        return node or pod.status.nominated_node_name

    # ------------------------------------------------------------ queueing

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return self.queue_sort.less(a, b)

    def events_to_register(self) -> dict[str, list[ClusterEventWithHint]]:
        """Per plugin, the events that may make a pod it rejected schedulable (EnqueueExtensions)."""
        return self._events

    def run_pre_enqueue_plugins(self, pod: core_pb2.Pod) -> Status | None:
        for pl in self.pre_enqueue_plugins:
            s = pl.pre_enqueue(pod)
            if s is not None and s.code != Code.SUCCESS:
                return s.with_plugin(pl.name)
        return None

    # ------------------------------------------------------------ filtering

    def run_pre_filter_plugins(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]
                               ) -> tuple[PreFilterResult | None, Status | None, set[str]]:
        """The merged PreFilterResult, the status, and the plugins that narrowed the nodes (they
        count as rejectors when the pod fits none). After an Unschedulable the others still run,
        so preemption has the whole CycleState; an UnschedulableAndUnresolvable ends it."""
        start = time.perf_counter()
        result: PreFilterResult | None = None
        narrowing: set[str] = set()
        status: Status | None = None
        try:
            for pl in self.pre_filter_plugins:
                r, s = pl.pre_filter(state, pod, nodes)
                if s is not None and s.code != Code.SUCCESS:
                    if s.code == Code.SKIP:
                        state.skip_filter_plugins.add(pl.name)
                        continue
                    s.with_plugin(pl.name)
                    if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                        status = s
                        return None, status, set()
                    if s.code == Code.UNSCHEDULABLE:
                        status = s
                        continue
                    status = Status(Code.ERROR, f'running PreFilter plugin "{pl.name}": {s.message()}',
                                    plugin=pl.name, error=s.error)
                    return None, status, set()
                if r is not None and not r.all_nodes():
                    narrowing.add(pl.name)
                    result = r if result is None else result.merge(r)
                    if not result.node_names:
                        names = sorted(narrowing)
                        msg = f"node(s) didn't satisfy plugin {names[0]}" if len(names) == 1 else \
                            f"node(s) didn't satisfy plugin(s) [{' '.join(names)}] simultaneously"
                        status = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)
                        return result, status, narrowing
            return result, status, narrowing
        finally:
            EXTENSION_POINT_DURATION.labels("PreFilter", code_name(status), self.profile_name).observe(
                time.perf_counter() - start)

    def filters_for(self, state: CycleState) -> list[tuple[str, FilterFn]]:
        """The (name, filter) pairs that run this attempt (those whose PreFilter said Skip do not)."""
        skip = state.skip_filter_plugins
        return [(pl.name, pl.filter) for pl in self.filter_plugins if pl.name not in skip]

    def run_filter_plugins(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo,
                           filters: list[tuple[str, FilterFn]] | None = None) -> Status | None:
        for name, fn in (filters if filters is not None else self.filters_for(state)):
            s = fn(state, pod, node_info)
            if s is not None and s.code != Code.SUCCESS:
                if not s.plugin:
                    s.plugin = name
                if not s.is_rejected():
                    return Status(Code.ERROR, f'running "{name}" filter plugin: {s.message()}', plugin=name,
                                  error=s.error)
                return s
        return None

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: core_pb2.Pod, node_info: NodeInfo,
                                               filters: list[tuple[str, FilterFn]] | None = None) -> Status | None:
        """The preemption design's two passes: with higher-or-equal priority nominated pods, then without."""
        nominated = self.nominated_pods_for_node(node_info.name) if node_info.node is not None else []
        if nominated:
            priority, uid = pod_priority(pod), pod.metadata.uid
            chosen = [pi for pi in nominated if pi.priority >= priority and pi.pod.metadata.uid != uid]
            if chosen:
                # The state is only written by PreFilter extensions: without one active it is shared.
                active = self.pre_filter_extensions_active(state)
                state2, info2 = (state.clone() if active else state), node_info.clone()
                for pi in chosen:
                    info2.add_pod_info(pi)
                    s = self.run_pre_filter_extension_add_pod(state2, pod, pi, info2)
                    if s is not None:
                        return s
                s = self.run_filter_plugins(state2, pod, info2, filters)
                if s is not None:
                    return s
        return self.run_filter_plugins(state, pod, node_info, filters)

    def pre_filter_extensions_active(self, state: CycleState) -> bool:
        """Whether any PreFilter extension (AddPod/RemovePod) runs this attempt: only they write
        the CycleState after PreFilter, so without one a simulation may share the state."""
        return any(pl.name not in state.skip_filter_plugins for pl in self._pre_filter_extensions)

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: core_pb2.Pod, to_add: PodInfo,
                                         node_info: NodeInfo) -> Status | None:
        for pl in self._pre_filter_extensions:
            if pl.name in state.skip_filter_plugins:
                continue
            s = pl.add_pod(state, pod, to_add, node_info)
            if s is not None and s.code != Code.SUCCESS:
                return Status(Code.ERROR, f'running AddPod on PreFilter plugin "{pl.name}": {s.message()}',
                              plugin=pl.name)
        return None

    def run_pre_filter_extension_remove_pod(self, state: CycleState, pod: core_pb2.Pod, to_remove: PodInfo,
                                            node_info: NodeInfo) -> Status | None:
        for pl in self._pre_filter_extensions:
            if pl.name in state.skip_filter_plugins:
                continue
            s = pl.remove_pod(state, pod, to_remove, node_info)
            if s is not None and s.code != Code.SUCCESS:
                return Status(Code.ERROR, f'running RemovePod on PreFilter plugin "{pl.name}": {s.message()}',
                              plugin=pl.name)
        return None

    async def run_post_filter_plugins(self, state: CycleState, pod: core_pb2.Pod,
                                      diagnosis: Diagnosis) -> tuple[PostFilterResult | None, Status | None]:
        start = time.perf_counter()
        result: PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        status: Status | None = Status(Code.UNSCHEDULABLE)
        try:
            for pl in self.post_filter_plugins:
                r, s = await pl.post_filter(state, pod, diagnosis)
                if s is None or s.code == Code.SUCCESS:
                    status = None
                    return r, None
                if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    status = s.with_plugin(pl.name)
                    return r, status
                if not s.is_rejected():
                    status = Status(Code.ERROR, s.message(), plugin=pl.name, error=s.error)
                    return None, status
                if r is not None and r.nominating_info is not None:
                    result = r
                reasons.extend(s.reasons)
                rejector = pl.name
            status = Status(Code.UNSCHEDULABLE, *reasons, plugin=rejector)
            return result, status
        finally:
            EXTENSION_POINT_DURATION.labels("PostFilter", code_name(status), self.profile_name).observe(
                time.perf_counter() - start)

    # ------------------------------------------------------------ scoring

    def run_pre_score_plugins(self, state: CycleState, pod: core_pb2.Pod, nodes: list[NodeInfo]) -> Status | None:
        for pl in self.pre_score_plugins:
            s = pl.pre_score(state, pod, nodes)
            if s is not None and s.code != Code.SUCCESS:
                if s.code == Code.SKIP:
                    state.skip_score_plugins.add(pl.name)
                    continue
                return Status(Code.ERROR, f'running PreScore plugin "{pl.name}": {s.message()}', plugin=pl.name)
        return None

    def run_score_plugins(self, state: CycleState, pod: core_pb2.Pod,
                          nodes: list[NodeInfo]) -> tuple[list[int], Status | None]:
        """The weighted total score of each node, aligned with ``nodes``."""
        totals = [0] * len(nodes)
        names = [ni.name for ni in nodes]
        skip = state.skip_score_plugins
        for pl in self.score_plugins:
            if pl.name in skip:
                continue
            batch = getattr(pl, "score_nodes", None)
            scores = batch(state, pod, nodes) if batch is not None else None
            if scores is None:
                score = pl.score
                scores = []
                for ni in nodes:
                    s, st = score(state, pod, ni)
                    if st is not None and st.code != Code.SUCCESS:
                        return totals, Status(Code.ERROR, f'running Score plugin "{pl.name}": {st.message()}',
                                              plugin=pl.name)
                    scores.append(s)
            extensions = self._score_extensions.get(pl.name)
            if extensions is not None:
                st = extensions.normalize_score(state, pod, names, scores)
                if st is not None and st.code != Code.SUCCESS:
                    return totals, Status(Code.ERROR, f'running Normalize on Score plugin "{pl.name}": '
                                                      f'{st.message()}', plugin=pl.name)
            weight = self.weights[pl.name]
            for i, s in enumerate(scores):
                if s > MAX_NODE_SCORE or s < MIN_NODE_SCORE:
                    return totals, Status(Code.ERROR, f'plugin "{pl.name}" returns an invalid score {s}, it should '
                                                      f'in the range of [{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after '
                                                      f'normalizing', plugin=pl.name)
                totals[i] += s * weight
        return totals, None

    # ------------------------------------------------------------ reserve, permit, bind

    def run_reserve_plugins_reserve(self, state: CycleState, pod: core_pb2.Pod, node: str) -> Status | None:
        for pl in self.reserve_plugins:
            s = pl.reserve(state, pod, node)
            if s is not None and s.code != Code.SUCCESS:
                s.with_plugin(pl.name)
                if not s.is_rejected():
                    return Status(Code.ERROR, f'running Reserve plugin "{pl.name}": {s.message()}', plugin=pl.name)
                return s
        return None

    def run_reserve_plugins_unreserve(self, state: CycleState, pod: core_pb2.Pod, node: str) -> None:
        for pl in reversed(self.reserve_plugins):
            pl.unreserve(state, pod, node)

    def run_permit_plugins(self, state: CycleState, pod: core_pb2.Pod, node: str) -> Status | None:
        waiting: dict[str, float] = {}
        for pl in self.permit_plugins:
            s, timeout = pl.permit(state, pod, node)
            if s is None or s.code == Code.SUCCESS:
                continue
            if s.code == Code.WAIT:
                waiting[pl.name] = min(max(timeout or 0.0, 0.0), DEFAULT_PERMIT_TIMEOUT)
                continue
            s.with_plugin(pl.name)
            if not s.is_rejected():
                return Status(Code.ERROR, f'running Permit plugin "{pl.name}": {s.message()}', plugin=pl.name)
            return s
        if waiting:
            self.waiting_pods[pod.metadata.uid] = WaitingPod(pod, waiting)
            return Status(Code.WAIT,
                          f'one or more plugins asked to wait and no plugin rejected pod "{pod.metadata.name}"')
        return None

    async def wait_on_permit(self, pod: core_pb2.Pod) -> Status | None:
        wp: WaitingPod | None = self.waiting_pods.get(pod.metadata.uid)
        if wp is None:
            return None
        try:
            return await asyncio.shield(wp.done)
        finally:
            self.waiting_pods.pop(pod.metadata.uid, None)

    async def run_pre_bind_plugins(self, state: CycleState, pod: core_pb2.Pod, node: str) -> Status | None:
        for pl in self.pre_bind_plugins:
            s = await pl.pre_bind(state, pod, node)
            if s is not None and s.code != Code.SUCCESS:
                s.with_plugin(pl.name)
                if not s.is_rejected():
                    return Status(Code.ERROR, f'running PreBind plugin "{pl.name}": {s.message()}', plugin=pl.name)
                return s
        return None

    async def run_bind_plugins(self, state: CycleState, pod: core_pb2.Pod, node: str) -> Status | None:
        for pl in self.bind_plugins:
            s = await pl.bind(state, pod, node)
            if s is not None and s.code == Code.SKIP:
                continue
            if s is not None and s.code != Code.SUCCESS:
                s.with_plugin(pl.name)
                if not s.is_rejected():
                    return Status(Code.ERROR, f'binding rejected: running Bind plugin "{pl.name}": {s.message()}',
                                  plugin=pl.name, error=s.error)
            return s
        return Status(Code.ERROR, "all bind plugins skipped binding the pod")

    def run_post_bind_plugins(self, state: CycleState, pod: core_pb2.Pod, node: str) -> None:
        for pl in self.post_bind_plugins:
            pl.post_bind(state, pod, node)

    async def close(self) -> None:
        """Let plugins with work of their own in flight (async preemption) finish it."""
        for pl in self.plugins.values():
            if isinstance(pl, Closer):
                await pl.close()

    # ------------------------------------------------------------ facts

    def has_score_plugins(self) -> bool:
        return bool(self.score_plugins)

    def has_post_filter_plugins(self) -> bool:
        return bool(self.post_filter_plugins)


def new_handle(services: Services | None = None) -> Handle:
    """A framework without plugins over ``services``: the Handle of a plugin built on its own
    (kube-scheduler's tests build one with NewFramework and no profile)."""
    return Framework("", None, {}, services)
