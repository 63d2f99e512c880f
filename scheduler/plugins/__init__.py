"""The in-tree plugins, one module each (as kube-scheduler's framework/plugins/<name>), and the
registry a profile picks them from by name.

Every plugin module exposes ``NAME`` and ``new(args, handle) -> plugin``; a newcomer finds in
that one module what the plugin filters or scores, which cluster events requeue the pods it
rejected (``events_to_register`` with its QueueingHints) and, for a plugin that takes args, its
frozen ``<Plugin>Args`` dataclass with kube-scheduler's v1 defaults and the strict
``decode_args(raw, path)`` that ``scheduler.config`` runs on ``pluginConfig[i].args``.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable

from scheduler.framework.interfaces import PluginFactory

# decode_args(raw, path) -> the plugin's typed args
ArgsDecoder = Callable[[Any, str], Any]

# Plugin name -> module under scheduler.plugins.
MODULES = {
    "PrioritySort": "priority_sort",
    "SchedulingGates": "scheduling_gates",
    "NodeUnschedulable": "node_unschedulable",
    "NodeName": "node_name",
    "TaintToleration": "taint_toleration",
    "NodeAffinity": "node_affinity",
    "NodePorts": "node_ports",
    "NodeResourcesFit": "node_resources_fit",
    "NodeResourcesBalancedAllocation": "node_resources_balanced_allocation",
    "PodTopologySpread": "pod_topology_spread",
    "InterPodAffinity": "inter_pod_affinity",
    "DynamicResources": "dynamic_resources",
    "DefaultPreemption": "default_preemption",
    "DefaultBinder": "default_binder",
}


def default_registry() -> dict[str, PluginFactory]:
    """Every in-tree plugin's factory, by name."""
    out: dict[str, PluginFactory] = {}
    for name, module in MODULES.items():
        mod = importlib.import_module(f"scheduler.plugins.{module}")
        if mod.NAME != name:
            raise ImportError(f"scheduler.plugins.{module} calls itself {mod.NAME!r}, not {name!r}")
        out[name] = mod.new
    return out


def args_decoder(name: str) -> ArgsDecoder | None:
    """The in-tree plugin's ``decode_args``, or None when it takes no args (or is not in-tree)."""
    module = MODULES.get(name)
    if module is None:
        return None
    return getattr(importlib.import_module(f"scheduler.plugins.{module}"), "decode_args", None)
