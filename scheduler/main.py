"""``python -m scheduler --server S --token-file F [--config FILE] [--admin-listen H:P]``.

Starts the informers, then (with leader election, the default) competes for the Lease
``kube-system/kube-scheduler``; only the leader schedules, so two schedulers can run and one
takes over when the other is killed. kube-scheduler exits when it loses the lease and relies on
its supervisor to start it again; kplane's scheduler does the same restart in process — it drops
its cache and queue, builds them afresh from the informers and rejoins the election — so a
cluster run by ``kplane up`` keeps a scheduler without a supervisor.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
from pathlib import Path

from machinery import failpoints
from machinery.admin import AdminServer
from machinery.client import Client
from machinery.featuregates import FeatureGateError, FeatureGates
from machinery.leaderelection import LeaderElectionConfig, LeaderElector
from machinery.logging import get_logger, setup_logging
from machinery.process import cancel_and_wait, profiling, run_loop
from scheduler import config as schedconfig
from scheduler.config import ConfigError, parse_duration
from scheduler.framework.runtime import FrameworkError
from scheduler.plugins import default_registry
from scheduler.queue.scheduling_queue import DEFAULT_MAX_IN_UNSCHEDULABLE
from scheduler.scheduler import Scheduler

log = get_logger()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m scheduler", description="kplane scheduler")
    p.add_argument("--server", required=True, help="apiserver HOST:PORT")
    p.add_argument("--token-file", required=True, help="file holding the scheduler's bearer token")
    p.add_argument("--config", default="", help="KubeSchedulerConfiguration YAML")
    p.add_argument("--admin-listen", default="127.0.0.1:0")
    p.add_argument("--identity", default="", help="leader election identity (default: hostname_pid)")
    p.add_argument("--leader-elect", default=None, choices=["true", "false"],
                   help="override the configuration's leaderElection.leaderElect")
    p.add_argument("--leader-elect-lease-duration", default=None)
    p.add_argument("--leader-elect-renew-deadline", default=None)
    p.add_argument("--leader-elect-retry-period", default=None)
    p.add_argument("--pod-max-in-unschedulable-pods-duration", default=None,
                   help="how long a pod may wait in the unschedulable pool before it is retried anyway (5m)")
    p.add_argument("--assumed-pod-ttl", default="15m",
                   help="how long after its binding an assumed pod may go unseen before it is expired")
    p.add_argument("--feature-gates", default="")
    p.add_argument("--emulated-version", default="1.36")
    p.add_argument("--log-level", default="info")
    return p.parse_args(argv)


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
                         max_in_unschedulable=max_unsched, feature_gates=self.gates)

    async def start(self) -> None:
        self.sched = self.new()
        await self.sched.start()
        self.ready = True

    async def lead(self) -> None:
        assert self.sched is not None
        await self.sched.run()

    async def reset(self) -> None:
        """After losing the lease: drop everything learnt and start over, as a restarted process would."""
        self.ready = False
        if self.sched is not None:
            await self.sched.stop()
        await self.start()


async def run(a: argparse.Namespace) -> None:
    registry = default_registry()
    try:
        gates = FeatureGates.parse(a.feature_gates)
    except FeatureGateError as exc:
        raise SystemExit(f"invalid --feature-gates: {exc}") from None
    cfg, _, _ = build_config(a, registry)
    a.identity = a.identity or f"{socket.gethostname()}_{os.getpid()}"
    token = Path(a.token_file).read_text().strip()
    client = Client(a.server, token, timeout=10.0)
    runner = _Runner(client, a, registry, gates)
    try:
        runner.sched = runner.new()
    except (FrameworkError, ValueError) as exc:
        raise SystemExit(f"invalid scheduler configuration: {exc}") from None
    host, _, port = a.admin_listen.rpartition(":")
    admin = AdminServer(host or "127.0.0.1", int(port), health=lambda: None,
                        ready=lambda: None if runner.ready else "informers not synced")
    await admin.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log.info("scheduler_starting", identity=a.identity, admin_port=admin.port, leader_elect=cfg.leader_election.leader_elect)
    await runner.sched.start()
    runner.ready = True
    le = cfg.leader_election
    if le.leader_elect:
        lost = asyncio.Event()

        def on_stopped() -> None:
            if not stop.is_set():  # stepping down on SIGTERM is no loss
                log.warning("leader_lost", identity=a.identity)
            lost.set()

        elector_cfg = LeaderElectionConfig(lease_namespace=le.resource_namespace, lease_name=le.resource_name,
                                           identity=a.identity, lease_duration=le.lease_duration,
                                           renew_deadline=le.renew_deadline, retry_period=le.retry_period)

        async def elect_forever() -> None:
            while True:
                lost.clear()
                elector = LeaderElector(client, elector_cfg, on_started_leading=runner.lead,
                                        on_stopped_leading=on_stopped,
                                        on_new_leader=lambda who: log.info("new_leader", leader=who))
                await elector.run()
                await runner.reset()

        main_task = asyncio.create_task(elect_forever(), name="leader-election")
    else:
        main_task = asyncio.create_task(runner.lead(), name="scheduling")
    waiter = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({main_task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if main_task in done and not waiter.done():
        main_task.result()  # an unexpected end: let it raise
    log.info("scheduler_stopping", identity=a.identity)
    await cancel_and_wait([main_task, waiter])
    if runner.sched is not None:
        await runner.sched.stop()
    await admin.stop()
    await client.close()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    setup_logging("scheduler", a.log_level)
    failpoints.arm_from_env()
    with profiling("scheduler"):
        run_loop(run(a))
