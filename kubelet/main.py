"""``python -m kubelet --node-name N --server S --token-file F --runtime-endpoint E --checkpoint-dir D``."""

from __future__ import annotations

import argparse
from pathlib import Path

from kubelet.allocation.feasibility import NodeResourcePolicies
from kubelet.eviction.thresholds import ThresholdError, parse_config
from kubelet.kubelet import Kubelet, KubeletConfig
from kubelet.node import NodeConfig
from kubelet.runtime.client import RuntimeClient
from machinery import emptydir, failpoints, process, quantity
from machinery.admin import AdminServer
from machinery.api import core_pb2
from machinery.client import Client
from machinery.featuregates import FeatureGateError, FeatureGates
from machinery.files import wait_for_files
from machinery.logging import get_logger, setup_logging
from machinery.version import BINARY

log = get_logger()


def _pairs(text: str, what: str) -> dict[str, str]:
    out = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        k, eq, v = item.partition("=")
        if not eq or not k:
            raise SystemExit(f"invalid {what} {item!r}: want key=value")
        out[k.strip()] = v.strip()
    return out


def _taints(text: str) -> list[core_pb2.Taint]:
    out = []
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        kv, colon, effect = item.rpartition(":")
        if not colon or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            raise SystemExit(f"invalid taint {item!r}: want key[=value]:NoSchedule|PreferNoSchedule|NoExecute")
        key, _, value = kv.partition("=")
        out.append(core_pb2.Taint(key=key, value=value, effect=effect))
    return out


def add_node_flags(p: argparse.ArgumentParser) -> None:
    """The flags every kubelet takes, one node or many (``python -m kubelet.hollow``)."""
    p.add_argument("--server", required=True, help="apiserver HOST:PORT")
    p.add_argument("--cpu", default="4")
    p.add_argument("--memory", default="8Gi")
    p.add_argument("--pods", type=int, default=110)
    p.add_argument("--kube-reserved", default="", help="cpu=500m,memory=1Gi")
    p.add_argument("--node-labels", default="", help="k=v,k2=v2")
    p.add_argument("--register-with-taints", default="", help="key=value:NoSchedule,...")
    p.add_argument("--emulated-version", default=str(BINARY),
                   help=f"behave as this kubelet release: its feature gates' defaults (version skew); default {BINARY}")
    p.add_argument("--feature-gates", default="")
    p.add_argument("--admin-listen", default="127.0.0.1:0")
    p.add_argument("--sync-frequency", type=float, default=60.0,
                   help="seconds between two syncs of a pod that nothing changed (Kubernetes' 1m; jittered by up "
                        "to half)")
    p.add_argument("--resize-retry-initial", type=float, default=30.0)
    p.add_argument("--resize-retry-interval", type=float, default=180.0)
    p.add_argument("--restart-backoff", type=float, default=10.0)
    p.add_argument("--node-status-interval", type=float, default=10.0)
    p.add_argument("--node-lease-duration-seconds", type=int, default=40,
                   help="the node Lease's duration; it is renewed every quarter of it")
    p.add_argument("--pleg-relist-period", type=float, default=1.0, help="seconds between PLEG relists")
    # The resource managers' policies (KubeletConfiguration's cpuManagerPolicy, memoryManagerPolicy,
    # memorySwap.swapBehavior): kplane runs no CPU or memory pinning, but a resize they forbid is Infeasible.
    p.add_argument("--cpu-manager-policy", default="none", help="none or static")
    p.add_argument("--memory-manager-policy", default="None", help="None or Static")
    p.add_argument("--memory-swap-behavior", default="NoSwap", help="NoSwap or LimitedSwap")
    # Node-pressure eviction (kubelet/eviction; Kubernetes' flags and syntax).
    p.add_argument("--eviction-hard", default=None,
                   help="memory.available<100Mi,... (default memory.available<100Mi; given, it replaces the default)")
    p.add_argument("--eviction-soft", default="", help="memory.available<1.5Gi,... (each needs a grace period)")
    p.add_argument("--eviction-soft-grace-period", default="", help="memory.available=1m30s,...")
    p.add_argument("--eviction-minimum-reclaim", default="", help="memory.available=100Mi,...")
    p.add_argument("--eviction-max-pod-grace-period", type=int, default=0,
                   help="seconds; caps a pod's grace period on soft evictions (0: kill at once)")
    p.add_argument("--eviction-pressure-transition-period", default="5m",
                   help="how long a pressure condition stays after the pressure ends (Go duration)")
    p.add_argument("--eviction-monitoring-interval", type=float, default=10.0,
                   help="seconds between eviction checks (Kubernetes' housekeeping interval)")
    p.add_argument("--system-memory-usage", default="0",
                   help="simulated memory used outside pods (kernel, daemons), counted in memory.available")
    p.add_argument("--dra-devices", type=int, default=0,
                   help="GPUs the fake DRA driver dra.kplane.dev publishes for the node (0: no driver)")
    p.add_argument("--log-level", default="info")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kubelet", description="kplane kubelet: one node's agent")
    p.add_argument("--node-name", required=True)
    p.add_argument("--token-file", required=True, help="file holding this kubelet's bearer token")
    p.add_argument("--runtime-endpoint", required=True, help="unix:///path/runtime.sock or HOST:PORT")
    p.add_argument("--checkpoint-dir", required=True)
    add_node_flags(p)
    return p.parse_args(argv)


def config_from(a: argparse.Namespace, node_name: str | None = None,
                checkpoint_dir: str | None = None) -> KubeletConfig:
    """The kubelet's configuration from its flags (SystemExit with one line on bad input)."""
    node_name = node_name or a.node_name
    checkpoint_dir = checkpoint_dir or a.checkpoint_dir
    for flag, value in (("--cpu", a.cpu), ("--memory", a.memory)):
        try:
            quantity.parse_quantity(value)
        except ValueError as exc:
            raise SystemExit(f"invalid {flag} {value!r}: {exc}") from None
    if a.node_lease_duration_seconds <= 0 or a.pleg_relist_period <= 0:
        raise SystemExit("--node-lease-duration-seconds and --pleg-relist-period must be positive")
    try:
        system_memory = quantity.bytes_value(a.system_memory_usage)
    except ValueError as exc:
        raise SystemExit(f"invalid --system-memory-usage {a.system_memory_usage!r}: {exc}") from None
    if system_memory < 0:
        raise SystemExit(f"invalid --system-memory-usage {a.system_memory_usage!r}: must not be negative")
    try:
        eviction = parse_config(a.eviction_hard, a.eviction_soft, a.eviction_soft_grace_period,
                                a.eviction_minimum_reclaim, a.eviction_max_pod_grace_period,
                                a.eviction_pressure_transition_period, a.eviction_monitoring_interval)
    except ThresholdError as exc:
        raise SystemExit(f"invalid eviction configuration: {exc}") from None
    if a.dra_devices < 0:
        raise SystemExit(f"invalid --dra-devices {a.dra_devices}: must be 0 or more")
    try:
        policies = NodeResourcePolicies(a.cpu_manager_policy, a.memory_manager_policy, a.memory_swap_behavior)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    try:
        gates = FeatureGates.from_flags(a.feature_gates, a.emulated_version)
    except FeatureGateError as exc:
        raise SystemExit(str(exc)) from None
    gates.export()  # kubernetes_feature_enabled, as every component exports it
    node = NodeConfig(node_name, cpu=a.cpu, memory=a.memory, pods=a.pods,
                      kube_reserved=_pairs(a.kube_reserved, "--kube-reserved"),
                      labels=_pairs(a.node_labels, "--node-labels"), taints=_taints(a.register_with_taints),
                      declared_features=declared_features(gates))
    return KubeletConfig(node=node, checkpoint_dir=checkpoint_dir, release=gates.emulated_version,
                         in_place_resize=gates.enabled("InPlacePodVerticalScaling"),
                         resize_preemption=gates.enabled("SchedulerPreemptionForPodResize"),
                         memory_backed_volumes=gates.enabled(emptydir.GATE),
                         container_restart_rules=gates.enabled("ContainerRestartRules"),
                         sync_frequency=a.sync_frequency,
                         resize_retry_initial=a.resize_retry_initial, resize_retry_interval=a.resize_retry_interval,
                         restart_backoff=a.restart_backoff, node_status_interval=a.node_status_interval,
                         node_lease_duration=a.node_lease_duration_seconds, pleg_relist_period=a.pleg_relist_period,
                         evented_pleg=gates.enabled("EventedPLEG"),
                         eviction=eviction, system_memory_usage=system_memory, dra_devices=a.dra_devices,
                         resource_policies=policies)


# The features a kubelet declares on its Node when enabled (KEP-5328 Node Declared Features), so
# the control plane acts on what the node does rather than on its version: InPlacePodVerticalScaling
# (it resizes in place), SchedulerPreemptionForPodResize (it propagates the Node's
# podPreemptionPolicy to its pods as PodResizePreemptionDisabled, so the scheduler need not read the
# policy itself: KEP-5836).
DECLARED_FEATURES = ("InPlacePodVerticalScaling", "SchedulerPreemptionForPodResize")


def declared_features(gates: FeatureGates) -> tuple[str, ...]:
    return tuple(f for f in DECLARED_FEATURES if gates.enabled(f))


class KubeletProcess:
    """One kubelet, its admin port and its connections: what ``python -m kubelet`` runs."""

    def __init__(self, a: argparse.Namespace):
        self.cfg = config_from(a)
        token = Path(a.token_file).read_text().strip()
        self.client = Client(a.server, token, timeout=10.0, field_manager="kubelet")
        self.runtime = RuntimeClient(a.runtime_endpoint)
        self.kubelet = kubelet = Kubelet(self.cfg, self.client, self.runtime)
        self.runtime_endpoint = a.runtime_endpoint
        host, _, port = a.admin_listen.rpartition(":")
        self.admin = AdminServer(host or "127.0.0.1", int(port),
                                 health=lambda: None if kubelet.ready else "starting",
                                 ready=lambda: None if kubelet.ready and kubelet.node_conditions.ready else
                                 ("starting" if not kubelet.ready else kubelet.node_conditions.ready_message))

    async def start(self) -> None:
        await self.admin.start()
        log.info("kubelet_starting", node=self.cfg.node.name, admin_port=self.admin.port, runtime=self.runtime_endpoint)
        await self.kubelet.start()

    async def stop(self) -> None:
        await self.kubelet.stop()
        await self.admin.stop()
        await self.runtime.close()
        await self.client.close()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    setup_logging("kubelet", a.log_level)
    failpoints.arm_from_env()
    wait_for_files(a.token_file)
    process.main("kubelet", lambda: KubeletProcess(a))
