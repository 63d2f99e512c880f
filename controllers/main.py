"""``python -m controllers --server S --token-file F [--controllers '*'] [--admin-listen H:P]``.

The controller-manager process, as kube-controller-manager: it competes for the Lease
``kube-system/kube-controller-manager`` (``--leader-elect``, on by default) and only the leader
runs controllers. Each time it becomes leader it builds the enabled controllers afresh over new
shared informers, waits for their caches, then starts each with its workers; when it loses the
Lease it stops them and starts over — kube-controller-manager exits and is restarted by its
supervisor, kplane's does the same in process so ``kplane up`` needs no supervisor. A second
controller-manager (``--identity``) waits as a standby and takes over when the first is killed.

A bad flag ends the process before it connects, with exit status 1 and one line naming it
(``check``; ``kplane up`` runs the same checks before it starts anything).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

from controllers import options as opts
from controllers.controller import Controller, ControllerContext
from controllers.deployment.deployment_controller import DeploymentController
from controllers.disruption import DisruptionController
from controllers.garbagecollector.garbagecollector import GarbageCollector
from controllers.informers import SharedInformerFactory
from controllers.namespace import NamespaceController
from controllers.nodelifecycle import NodeLifecycleController
from controllers.podgc import PodGCController
from controllers.replicaset import ReplicaSetController
from controllers.resourceclaim import ResourceClaimController
from controllers.resourcequota import ResourceQuotaController
from controllers.tainteviction import TaintEvictionController
from machinery import component, timeutil
from machinery.client import Client
from machinery.leaderelection import LeaderElectionConfig
from machinery.logging import get_logger

log = get_logger()

LEASE_NAMESPACE, LEASE_NAME = "kube-system", "kube-controller-manager"

# name -> (build it, how many workers); names as kube-controller-manager's --controllers has them.
Factory = Callable[[ControllerContext], Controller]
REGISTRY: dict[str, tuple[Factory, Callable[[opts.ControllerOptions], int]]] = {
    "podgc": (PodGCController, lambda o: 1),
    "nodelifecycle": (NodeLifecycleController, lambda o: 1),
    "taint-eviction-controller": (TaintEvictionController, lambda o: 8),  # Kubernetes' UpdateWorkerSize
    "garbagecollector": (GarbageCollector, lambda o: o.concurrent_gc_syncs),
    "namespace": (NamespaceController, lambda o: o.concurrent_namespace_syncs),
    "disruption": (DisruptionController, lambda o: 1),  # one worker, as Kubernetes' Run
    "resourcequota": (ResourceQuotaController, lambda o: o.concurrent_resource_quota_syncs),
    "replicaset": (ReplicaSetController, lambda o: o.concurrent_replicaset_syncs),
    "deployment": (DeploymentController, lambda o: o.concurrent_deployment_syncs),
    "resourceclaim": (ResourceClaimController, lambda o: 10),  # kube-controller-manager runs it with 10
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m controllers", description="kplane controller-manager")
    component.add_flags(p, "controller-manager", leader_elect="true", lease_duration="15s", renew_deadline="10s",
                        retry_period="2s")
    opts.add_flags(p)
    return p.parse_args(argv)


def check(a: argparse.Namespace) -> tuple[opts.ControllerOptions, LeaderElectionConfig | None]:
    """Every check of the flags, before anything connects; SystemExit with one line on the first error."""
    component.parse_gates(a)
    options = opts.from_args(a)
    component.check_admin_listen(a)
    if a.leader_elect == "false":
        return options, None
    durations = []
    for flag in ("lease_duration", "renew_deadline", "retry_period"):
        text = getattr(a, f"leader_elect_{flag}")
        try:
            durations.append(timeutil.parse_duration(text))
        except ValueError as exc:
            raise SystemExit(f"invalid --leader-elect-{flag.replace('_', '-')}: {exc}") from None
    lease_duration, renew_deadline, retry_period = durations
    try:
        election = LeaderElectionConfig(LEASE_NAMESPACE, LEASE_NAME, a.identity or "check",
                                        lease_duration=lease_duration, renew_deadline=renew_deadline,
                                        retry_period=retry_period)
    except ValueError as exc:
        raise SystemExit(f"invalid leader election flags: {exc}") from None
    return options, election


class _Leading:
    """The controllers while this process leads; built afresh each time it becomes leader."""

    def __init__(self, client: Client, options: opts.ControllerOptions):
        self.client, self.options = client, options
        self.ready = False

    async def run(self) -> None:
        ctx = ControllerContext(self.client, SharedInformerFactory(self.client), self.options)
        controllers = [(factory(ctx), workers(self.options)) for name, (factory, workers) in REGISTRY.items()
                       if name in self.options.enabled]
        try:
            await ctx.informers.start()
            await ctx.informers.wait_for_sync()
            for rec in ctx.recorders:
                rec.start()
            for controller, workers in controllers:
                await controller.start(workers)
            self.ready = True
            log.info("controllers_running", controllers=[c.name for c, _ in controllers])
            await asyncio.Event().wait()  # until leadership ends (cancelled)
        finally:
            self.ready = False
            await asyncio.gather(*(c.stop() for c, _ in controllers), return_exceptions=True)
            await ctx.informers.stop()
            await asyncio.gather(*(rec.stop() for rec in ctx.recorders), return_exceptions=True)


class ControllerManagerProcess:
    """The process: the component shell (client, admin port, election) around the controllers."""

    def __init__(self, a: argparse.Namespace):
        self.options, election = check(a)
        self.shell = shell = component.Component(
            "controllers", a, field_manager="kube-controller-manager",
            ready=lambda: None if self.leading.ready or shell.standby else "starting")
        self.leading = _Leading(shell.client, self.options)
        self.identity = shell.identity
        self.election = None if election is None else LeaderElectionConfig(
            LEASE_NAMESPACE, LEASE_NAME, self.identity, lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline, retry_period=election.retry_period)

    async def start(self) -> None:
        await self.shell.admin.start()
        log.info("controller_manager_starting", identity=self.identity, admin_port=self.shell.admin.port,
                 controllers=sorted(self.options.enabled), leader_elect=self.election is not None)
        self.shell.run(self.leading.run, self.election)

    async def stop(self) -> None:
        await self.shell.stop_work()
        await self.shell.close()


def main(argv: list[str] | None = None) -> None:
    a = parse_args(argv)
    component.main("controller-manager", a, lambda: ControllerManagerProcess(a))
