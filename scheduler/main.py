"""``python -m scheduler --server S --token-file F [--config FILE] [--admin-listen H:P]``.

Starts the informers, then (with leader election, the default) competes for the Lease
``kube-system/kube-scheduler``; only the leader schedules, so two schedulers can run and one
takes over when the other is killed. kube-scheduler exits when it loses the lease and relies on
its supervisor to start it again; kplane's scheduler does the same restart in process — it drops
its cache and queue, builds them afresh from the informers and rejoins the election — so a
cluster run by ``kplane up`` keeps a scheduler without a supervisor.

A bad flag or configuration (an unknown feature gate, an unknown field in the configuration or
its plugin args, a profile that cannot run) ends the process before it connects, with exit
status 1 and one line on stderr naming the field (``check``; ``kplane up`` runs the same checks
before it starts anything).
"""

from __future__ import annotations

import argparse

from machinery import component
from machinery.client import Client
from machinery.featuregates import FeatureGates
from machinery.leaderelection import LeaderElectionConfig
from machinery.logging import get_logger
from scheduler import config as schedconfig
from scheduler.config import ConfigError, parse_duration
from scheduler.framework.features import Features
from scheduler.framework.interfaces import PluginFactory, Services
from scheduler.framework.runtime import Framework, FrameworkError
from scheduler.plugins import default_registry
from scheduler.queue.scheduling_queue import DEFAULT_MAX_IN_UNSCHEDULABLE
from scheduler.scheduler import Scheduler

log = get_logger()

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scheduler", description="kplane scheduler")
    component.add_flags(p, "scheduler", leader_elect=None, lease_duration=None, renew_deadline=None,
                        retry_period=None, leader_elect_help="override the configuration's leaderElection.leaderElect")
    p.add_argument("--config", default="", help="KubeSchedulerConfiguration YAML")
    p.add_argument("--pod-max-in-unschedulable-pods-duration", default=None,
                   help="how long a pod may wait in the unschedulable pool before it is retried anyway (5m)")
    p.add_argument("--assumed-pod-ttl", default="15m",
                   help="how long after its binding an assumed pod may go unseen before it is expired")
    p.add_argument("--tie-break-seed", default="",
                   help="kplane's: draw each pod's random choices (a node among equal scores, where preemption's "
                        "dry runs start) from this seed and the pod's name, the same in every run (default: unseeded)")
    return p.parse_args(argv)


def check(a: argparse.Namespace, registry: dict[str, PluginFactory] | None = None) -> None:
    """Every check the scheduler makes of its flags and configuration before it connects: the
    feature gates, the configuration (plugin args decoded strictly), the durations, the admin
    address, and that every profile builds a framework. SystemExit with one line on the first
    error. Reads no token and opens no connection, so ``kplane up`` runs it before starting
    anything."""
    registry = registry if registry is not None else default_registry()
    features = Features.from_gates(component.parse_gates(a))
    cfg, _, _ = build_config(a, registry)
    component.check_admin_listen(a)
    try:
        sorts = set()
        for profile in cfg.profiles:
            fw = Framework(profile.scheduler_name, profile.plugins, registry, Services(features=features),
                           profile.percentage_of_nodes_to_score)
            sorts.add(type(fw.queue_sort))
        if len(sorts) != 1:
            raise FrameworkError("all profiles must use the same queueSort plugin")
    except (FrameworkError, ValueError) as exc:
        raise SystemExit(f"invalid scheduler configuration: {exc}") from None


def build_config(a: argparse.Namespace, registry: dict) -> tuple[schedconfig.SchedulerConfig, float, float]:
    try:
        cfg = schedconfig.load(a.config, registry) if a.config else schedconfig.default_config(registry)
        le = cfg.leader_election
        if a.leader_elect is not None:
            le.leader_elect = a.leader_elect == "true"
        for flag, attr in (("leader_elect_lease_duration", "lease_duration"),
                           ("leader_elect_renew_deadline", "renew_deadline"),
                           ("leader_elect_retry_period", "retry_period")):
            value = getattr(a, flag)
            if value is not None:
                setattr(le, attr, parse_duration(value, "--" + flag.replace("_", "-")))
        max_unsched = DEFAULT_MAX_IN_UNSCHEDULABLE
        if a.pod_max_in_unschedulable_pods_duration is not None:
            max_unsched = parse_duration(a.pod_max_in_unschedulable_pods_duration,
                                         "--pod-max-in-unschedulable-pods-duration")
        ttl = parse_duration(a.assumed_pod_ttl, "--assumed-pod-ttl")
    except ConfigError as exc:
        raise SystemExit(f"invalid scheduler configuration: {exc}") from None
    return cfg, max_unsched, ttl


class _Runner:
    """The scheduler while it leads; rebuilt from scratch each time leadership is (re)gained."""

    def __init__(self, client: Client, a: argparse.Namespace, registry: dict, gates: FeatureGates):
        self.client, self.a, self.registry, self.gates = client, a, registry, gates
        self.sched: Scheduler | None = None
        self.ready = False

    def new(self) -> Scheduler:
        cfg, max_unsched, ttl = build_config(self.a, self.registry)
        return Scheduler(self.client, cfg, self.registry, identity=self.a.identity, assumed_ttl=ttl,
                         max_in_unschedulable=max_unsched, feature_gates=self.gates,
                         tie_break_seed=self.a.tie_break_seed)

    async def start(self) -> None:
        self.sched = self.new()
        await self.sched.start()
        self.ready = True

    async def lead(self) -> None:
        assert self.sched is not None
        await self.sched.run()

    def drained(self) -> bool:
        """Whether the last leadership's bindings all ended on their own (see Scheduler._finish_bindings)."""
        return self.sched is None or self.sched.drained

    async def reset(self) -> None:
        """After losing the lease: drop everything learnt and start over, as a restarted process would."""
        self.ready = False
        if self.sched is not None:
            await self.sched.stop()
        await self.start()


class SchedulerProcess:
    """The process: the component shell (client, admin port, election) around the scheduler."""

    def __init__(self, a: argparse.Namespace):
        registry = default_registry()
        check(a, registry)
        gates = component.parse_gates(a)
        self.cfg, _, _ = build_config(a, registry)
        self.shell = component.Component("scheduling", a, field_manager="kube-scheduler",
                                         ready=lambda: None if self.runner.ready else "informers not synced")
        a.identity = self.identity = self.shell.identity
        self.runner = runner = _Runner(self.shell.client, a, registry, gates)
        try:
            runner.sched = runner.new()
        except (FrameworkError, ValueError) as exc:
            raise SystemExit(f"invalid scheduler configuration: {exc}") from None

    async def start(self) -> None:
        await self.shell.admin.start()
        le = self.cfg.leader_election
        log.info("scheduler_starting", identity=self.identity, admin_port=self.shell.admin.port,
                 leader_elect=le.leader_elect)
        runner = self.runner
        assert runner.sched is not None
        await runner.sched.start()
        runner.ready = True
        election = LeaderElectionConfig(lease_namespace=le.resource_namespace, lease_name=le.resource_name,
                                        identity=self.identity, lease_duration=le.lease_duration,
                                        renew_deadline=le.renew_deadline, retry_period=le.retry_period) \
            if le.leader_elect else None
        self.shell.run(runner.lead, election, after_leading=runner.reset, may_release=runner.drained)

    async def stop(self) -> None:
        if self.runner.sched is not None:
            # Before the leading task hears of the stop (a few hops away), or it could start a
            # cycle — a preemption, say — after the stop was asked for.
            self.runner.sched.stop_scheduling()
        await self.shell.stop_work()
        if self.runner.sched is not None:
            await self.runner.sched.stop()
        await self.shell.close()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    component.main("scheduler", a, lambda: SchedulerProcess(a))
