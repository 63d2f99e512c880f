"""KubeSchedulerConfiguration: profiles, plugins per extension point, plugin args, tuning.

The YAML a user passes (``python -m scheduler --config FILE``, ``kplane up --scheduler-config``)
is kube-scheduler's ``kubescheduler.config.k8s.io/v1`` document, read as kube-scheduler reads it;
a field kplane does not read is an error naming it.

- ``load`` / ``parse``: the document, and the fields read (an example on ``parse``);
- ``build_plugin_sets``: a profile's plugins, with kube-scheduler's defaults and merging;
- ``decode_plugin_args``: a plugin's args, decoded strictly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from machinery import timeutil
from scheduler import plugins as intree
from scheduler.framework.interfaces import POINT_PROTOCOLS
from scheduler.framework.plugin_args import ArgsError, no_args
from scheduler.framework.runtime import PluginSets

API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


# kube-scheduler v1's default plugins, all in multiPoint, in this order (weights for Score);
# DynamicResources before DefaultPreemption, where kube-scheduler puts it with DRA enabled.
DEFAULT_PLUGINS: list[tuple[str, int]] = [
    ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
    ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
    ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 0), ("DefaultPreemption", 0),
    ("NodeResourcesBalancedAllocation", 1), ("DefaultBinder", 0),
]


class ConfigError(ValueError):
    """A configuration the scheduler cannot run with; the message names the field."""


@dataclass
class LeaderElection:
    leader_elect: bool = True
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@dataclass
class Profile:
    scheduler_name: str
    plugins: PluginSets
    percentage_of_nodes_to_score: int | None = None


@dataclass
class SchedulerConfig:
    profiles: list[Profile]
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: float = 1.0
    pod_max_backoff_seconds: float = 10.0
    leader_election: LeaderElection = field(default_factory=LeaderElection)


def parse_duration(value: Any, path: str) -> float:
    """A Go duration ("15s", "1m30s", "500ms"), not negative, or a number of seconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        seconds = timeutil.parse_duration(str(value))
    except ValueError:
        seconds = -1.0
    if seconds < 0:
        raise ConfigError(f'{path}: Invalid value: "{value}": a duration like 15s, 1m30s or 500ms')
    return seconds


def _check_keys(doc: dict, allowed: set[str], path: str) -> None:
    for k in doc:
        if k not in allowed:
            raise ConfigError(f'{path}{"." if path else ""}{k}: unknown field "{k}"')


def _plugin_list(raw: Any, path: str) -> list[tuple[str, int]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{path}: must be a list of {{name, weight}}")
    out = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise ConfigError(f"{path}[{i}].name: Required value")
        _check_keys(item, {"name", "weight"}, f"{path}[{i}]")
        weight = item.get("weight", 0)
        if not isinstance(weight, int) or weight < 0:
            raise ConfigError(f"{path}[{i}].weight: Invalid value: {weight!r}: must be a non-negative integer")
        out.append((item["name"], weight))
    return out


def _merge(default: list[tuple[str, int]], enabled: list[tuple[str, int]],
           disabled: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """kube-scheduler's mergePluginSet: defaults minus disabled, then enabled (overriding in place)."""
    off = {n for n, _ in disabled}
    out = [] if "*" in off else [(n, w) for n, w in default if n not in off]
    for name, weight in enabled:
        for i, (n, _) in enumerate(out):
            if n == name:
                out[i] = (name, weight)
                break
        else:
            out.append((name, weight))
    return out


def build_plugin_sets(raw_plugins: dict | None, plugin_config: list | None, registry: dict, path: str) -> PluginSets:
    """A profile's plugins and their args, with kube-scheduler's defaults and merging.

    Every profile starts from the default plugins (all in multiPoint, with the default score
    weights: TaintToleration 3, NodeAffinity 2, PodTopologySpread 2, InterPodAffinity 2, the rest 1);
    a profile's ``disabled`` removes defaults ("*" all of them) and its ``enabled`` adds plugins or
    overrides a default's weight (``_merge``); multiPoint plugins are then placed at every extension
    point they implement, after the plugins enabled at that point specifically and except where they
    are disabled there (``PluginSets.expand``). Every enabled plugin that takes args gets its
    defaults when no ``pluginConfig`` names it, as kube-scheduler's defaulting appends them.
    """
    raw_plugins = raw_plugins or {}
    if not isinstance(raw_plugins, dict):
        raise ConfigError(f"{path}.plugins: must be a mapping of extension points")
    _check_keys(raw_plugins, set(POINT_PROTOCOLS) | {"multiPoint"}, f"{path}.plugins")
    raw_sets: dict[str, tuple[list[Any], list[Any]]] = {}
    for point in ["multiPoint", *POINT_PROTOCOLS]:
        raw = raw_plugins.get(point) or {}
        if not isinstance(raw, dict):
            raise ConfigError(f"{path}.plugins.{point}: must be a mapping with enabled/disabled")
        _check_keys(raw, {"enabled", "disabled"}, f"{path}.plugins.{point}")
        raw_sets[point] = (_plugin_list(raw.get("enabled"), f"{path}.plugins.{point}.enabled"),
                       _plugin_list(raw.get("disabled"), f"{path}.plugins.{point}.disabled"))
    multi = _merge(DEFAULT_PLUGINS, *raw_sets["multiPoint"])
    for point, (enabled, _) in raw_sets.items():
        for name, _ in (multi if point == "multiPoint" else enabled):
            if name not in registry:
                raise ConfigError(f'{path}.plugins.{point}: unknown plugin "{name}"')
    weights: dict[str, int] = {n: w for n, w in multi if w}
    points: dict[str, list[str]] = {}
    disabled: dict[str, set[str]] = {}
    for point in POINT_PROTOCOLS:
        enabled, off = raw_sets[point]
        points[point] = [n for n, _ in enabled]
        disabled[point] = {n for n, _ in off}
        if point == "score":
            weights.update({n: w for n, w in enabled if w})
    if plugin_config is not None and not isinstance(plugin_config, list):
        raise ConfigError(f"{path}.pluginConfig: must be a list of {{name, args}}")
    args: dict[str, Any] = {}
    for i, pc in enumerate(plugin_config or []):
        if not isinstance(pc, dict) or not isinstance(pc.get("name"), str):
            raise ConfigError(f"{path}.pluginConfig[{i}].name: Required value")
        _check_keys(pc, {"name", "args"}, f"{path}.pluginConfig[{i}]")
        if pc["name"] in args:
            raise ConfigError(f'{path}.pluginConfig[{i}]: Duplicate value: "{pc["name"]}"')
        if pc["name"] not in registry:
            raise ConfigError(f'{path}.pluginConfig[{i}].name: unknown plugin "{pc["name"]}"')
        args[pc["name"]] = decode_plugin_args(pc["name"], pc.get("args"), f"{path}.pluginConfig[{i}].args")
    sets = PluginSets(multi_point=[n for n, _ in multi], points=points, disabled=disabled, weights=weights,
                      args=args)
    for name in sets.names():  # kube-scheduler's defaulting: every enabled plugin gets its default args
        decoder = intree.args_decoder(name)
        if name not in args and decoder is not None:
            args[name] = decoder(None, "")
    return sets


def decode_plugin_args(name: str, raw: Any, path: str) -> Any:
    """``pluginConfig[i].args`` as the plugin's typed args (``path`` is where they are).

    An in-tree plugin's args are decoded strictly by its ``decode_args``, as kube-scheduler decodes
    them: into its frozen ``<Plugin>Args``, with kube-scheduler's v1 defaults for what is left out
    and validation_pluginargs.go's checks and wording; an unknown field is an error naming its full
    path (``profiles[0].pluginConfig[0].args.scoringStrategyy: unknown field "scoringStrategyy"``).
    Args for an in-tree plugin that takes none are an error. A plugin kplane does not ship (a test's registry) gets
    the mapping as given, without its type meta — kube-scheduler's runtime.Unknown for
    out-of-tree plugins.
    """
    try:
        decoder = intree.args_decoder(name)
        if decoder is not None:
            return decoder(raw, path)
        if name in intree.MODULES:
            no_args(name, raw, path)
            return None
    except ArgsError as exc:
        raise ConfigError(str(exc)) from None
    raw = {} if raw is None else raw
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must be a mapping")
    return {k: v for k, v in raw.items() if k not in ("apiVersion", "kind")}


def default_config(registry: dict) -> SchedulerConfig:
    return parse({}, registry)


def parse(doc: dict | None, registry: dict) -> SchedulerConfig:
    """The configuration of a ``kubescheduler.config.k8s.io/v1`` document. Only these fields are read;
    any other field is an error naming it (nothing is ignored silently)::

        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        percentageOfNodesToScore: 0            # 0: adaptive (50% at 100 nodes ... 5% floor)
        podInitialBackoffSeconds: 1
        podMaxBackoffSeconds: 10
        leaderElection: {leaderElect: true, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s,
                         resourceName: kube-scheduler, resourceNamespace: kube-system}
        profiles:
        - schedulerName: default-scheduler
          percentageOfNodesToScore: 50
          plugins:
            multiPoint: {enabled: [{name: X, weight: 2}], disabled: [{name: Y}]}
            filter: {enabled: [...], disabled: [{name: "*"}]}      # and queueSort, preFilter, ...
          pluginConfig:
          - name: NodeResourcesFit
            args: {scoringStrategy: {type: MostAllocated}}
    """
    doc = doc or {}
    if not isinstance(doc, dict):
        raise ConfigError("the configuration must be a YAML mapping")
    _check_keys(doc, {"apiVersion", "kind", "percentageOfNodesToScore", "podInitialBackoffSeconds",
                      "podMaxBackoffSeconds", "leaderElection", "profiles", "parallelism"}, "")
    if doc.get("apiVersion", API_VERSION) != API_VERSION or doc.get("kind", KIND) != KIND:
        raise ConfigError(f'apiVersion/kind: want "{API_VERSION}" / "{KIND}", got "{doc.get("apiVersion")}" / '
                          f'"{doc.get("kind")}"')
    pct = _percentage(doc.get("percentageOfNodesToScore", 0), "percentageOfNodesToScore")
    initial = doc.get("podInitialBackoffSeconds", 1)
    maximum = doc.get("podMaxBackoffSeconds", 10)
    for name, v in (("podInitialBackoffSeconds", initial), ("podMaxBackoffSeconds", maximum)):
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
            raise ConfigError(f"{name}: Invalid value: {v!r}: must be greater than 0")
    if maximum < initial:
        raise ConfigError(f"podMaxBackoffSeconds: Invalid value: {maximum}: must be greater than or equal to "
                          f"podInitialBackoffSeconds")
    le = LeaderElection()
    raw_le = doc.get("leaderElection") or {}
    _check_keys(raw_le, {"leaderElect", "leaseDuration", "renewDeadline", "retryPeriod", "resourceName",
                         "resourceNamespace", "resourceLock"}, "leaderElection")
    le.leader_elect = bool(raw_le.get("leaderElect", True))
    for key, attr in (("leaseDuration", "lease_duration"), ("renewDeadline", "renew_deadline"),
                      ("retryPeriod", "retry_period")):
        if key in raw_le:
            setattr(le, attr, parse_duration(raw_le[key], f"leaderElection.{key}"))
    le.resource_name = raw_le.get("resourceName", le.resource_name)
    le.resource_namespace = raw_le.get("resourceNamespace", le.resource_namespace)
    raw_profiles = doc.get("profiles") or [{"schedulerName": DEFAULT_SCHEDULER_NAME}]
    if not isinstance(raw_profiles, list):
        raise ConfigError("profiles: must be a list")
    profiles, seen = [], set()
    for i, rp in enumerate(raw_profiles):
        path = f"profiles[{i}]"
        if not isinstance(rp, dict):
            raise ConfigError(f"{path}: must be a mapping")
        _check_keys(rp, {"schedulerName", "plugins", "pluginConfig", "percentageOfNodesToScore"}, path)
        name = rp.get("schedulerName", DEFAULT_SCHEDULER_NAME)
        if not name:
            raise ConfigError(f"{path}.schedulerName: Required value")
        if name in seen:
            raise ConfigError(f'{path}.schedulerName: Duplicate value: "{name}"')
        seen.add(name)
        sets = build_plugin_sets(rp.get("plugins"), rp.get("pluginConfig"), registry, path)
        p_pct = rp.get("percentageOfNodesToScore")
        profiles.append(Profile(name, sets, None if p_pct is None else
                                _percentage(p_pct, f"{path}.percentageOfNodesToScore")))
    return SchedulerConfig(profiles=profiles, percentage_of_nodes_to_score=pct,
                           pod_initial_backoff_seconds=float(initial), pod_max_backoff_seconds=float(maximum),
                           leader_election=le)


def _percentage(v: Any, path: str) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v < 0 or v > 100:
        raise ConfigError(f"{path}: Invalid value: {v!r}: not in valid range [0-100]")
    return v


def load(path: str, registry: dict) -> SchedulerConfig:
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    return parse(doc, registry)
