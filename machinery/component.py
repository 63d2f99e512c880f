"""The shell the scheduler and the controller-manager processes share (kube-scheduler's and
kube-controller-manager's app.Run around their own work).

- ``add_flags``: the flags both take — ``--server``, ``--token-file``, ``--admin-listen``,
  ``--identity``, ``--leader-elect`` and its three durations, ``--feature-gates``,
  ``--emulated-version``, ``--log-level``;
- ``check_admin_listen``, ``parse_gates``: their one-line errors, before anything connects;
- ``Component``: the process's client (named by its field manager), its admin server, and the
  leader-elected loop — with election, the work runs each time this process leads and is
  rebuilt when leadership ends, as a restarted process would be (kube-scheduler and
  kube-controller-manager exit and rely on a supervisor; kplane restarts in process, so
  ``kplane up`` needs none); without, it runs once;
- ``main``: logging, failpoints from the environment, the token file waited for, the process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from machinery import failpoints, process
from machinery.admin import AdminServer
from machinery.client import Client
from machinery.featuregates import FeatureGateError, FeatureGates
from machinery.files import wait_for_files
from machinery.leaderelection import LeaderElectionConfig, LeaderElector
from machinery.logging import get_logger, setup_logging
from machinery.process import Service, cancel_and_wait, fail_process, supervise
from machinery.version import BINARY

log = get_logger()


def add_flags(p: argparse.ArgumentParser, component: str, *, leader_elect: str | None,
              lease_duration: str | None, renew_deadline: str | None, retry_period: str | None,
              leader_elect_help: str | None = None) -> None:
    """The flags every control-plane component takes, with this component's defaults (None: the
    flag overrides the component's configuration file only when given)."""
    p.add_argument("--server", required=True, help="apiserver HOST:PORT")
    p.add_argument("--token-file", required=True, help=f"file holding the {component}'s bearer token")
    p.add_argument("--admin-listen", default="127.0.0.1:0")
    p.add_argument("--identity", default="", help="leader election identity (default: hostname_pid)")
    p.add_argument("--leader-elect", default=leader_elect, choices=["true", "false"], help=leader_elect_help)
    p.add_argument("--leader-elect-lease-duration", default=lease_duration)
    p.add_argument("--leader-elect-renew-deadline", default=renew_deadline)
    p.add_argument("--leader-elect-retry-period", default=retry_period)
    p.add_argument("--feature-gates", default="")
    p.add_argument("--emulated-version", default=str(BINARY),
                   help=f"behave as this Kubernetes release (its feature gates' defaults); default {BINARY}")
    p.add_argument("--log-level", default="info")


def check_admin_listen(a: argparse.Namespace) -> None:
    _, _, port = a.admin_listen.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise SystemExit(f"invalid --admin-listen {a.admin_listen!r}: want HOST:PORT")


def parse_gates(a: argparse.Namespace) -> FeatureGates:
    """``--feature-gates`` at ``--emulated-version``, exported as ``kubernetes_feature_enabled`` on
    the component's /metrics."""
    try:
        gates = FeatureGates.from_flags(a.feature_gates, a.emulated_version)
    except FeatureGateError as exc:
        raise SystemExit(str(exc)) from None
    gates.export()
    return gates


def identity(a: argparse.Namespace) -> str:
    """``--identity``, or hostname_pid as client-go's examples make it."""
    return a.identity or f"{socket.gethostname()}_{os.getpid()}"


class Component:
    """A leader-elected control-plane process around its work.

    ``lead()`` is the work while this process leads (cancelled when leadership ends);
    ``after_leading()``, if given, runs when a leadership has ended, before the next election
    round; ``may_release()`` says whether the Lease may be given up at once on a stop (see
    LeaderElector). ``election`` None: no election, ``lead()`` runs once. ``ready()`` is the
    admin server's readiness (None: ready, else why not)."""

    def __init__(self, name: str, a: argparse.Namespace, *, field_manager: str,
                 ready: Callable[[], str | None]):
        self.name = name
        self.identity = identity(a)
        token = Path(a.token_file).read_text().strip()
        self.client = Client(a.server, token, timeout=10.0, field_manager=field_manager)
        host, _, port = a.admin_listen.rpartition(":")
        self.admin = AdminServer(host or "127.0.0.1", int(port), health=lambda: None, ready=ready)
        self.stopping = False
        self.standby = False  # between leaderships, waiting for the Lease
        self.main_task: asyncio.Task[None] | None = None

    def run(self, lead: Callable[[], Awaitable[None]], election: LeaderElectionConfig | None, *,
            after_leading: Callable[[], Awaitable[None]] | None = None,
            may_release: Callable[[], bool] | None = None) -> None:
        """Start the work: under ``election`` in a loop of election rounds, or once."""
        if election is None:
            self.main_task = supervise(self.name, lead)
        else:
            async def lead_and_mark() -> None:
                self.standby = False
                await lead()

            async def elect_forever() -> None:
                while True:
                    self.standby = True
                    elector = LeaderElector(self.client, election, on_started_leading=lead_and_mark,
                                            on_stopped_leading=self._stopped_leading,
                                            on_new_leader=lambda who: log.info("new_leader", leader=who),
                                            may_release=may_release)
                    await elector.run()
                    if after_leading is not None:
                        await after_leading()

            self.main_task = supervise("leader-election", elect_forever)
        self.main_task.add_done_callback(self._main_ended)

    def _stopped_leading(self) -> None:
        if not self.stopping:  # stepping down on SIGTERM is no loss
            log.warning("leader_lost", identity=self.identity)

    def _main_ended(self, task: asyncio.Task[None]) -> None:
        if not self.stopping and not task.cancelled():
            fail_process(f"{task.get_name()} ended")

    async def stop_work(self) -> None:
        """Stop the election and the work (releasing the Lease if the work allows)."""
        self.stopping = True
        await cancel_and_wait([self.main_task])

    async def close(self) -> None:
        await self.admin.stop()
        await self.client.close()


def main(component: str, a: argparse.Namespace, make: Callable[[], Service]) -> None:
    """Run a component's process: structured logs, failpoints armed from the environment, its
    token file waited for (a container may start before the tokens are written), then ``make()``'s
    service until SIGTERM."""
    setup_logging(component, a.log_level)
    failpoints.arm_from_env()
    wait_for_files(a.token_file)
    process.main(component, make)
