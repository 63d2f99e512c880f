"""What ``kplane up`` checks before it starts a process or writes a file.

Every value ``kplane up`` was given is checked here, and each component's flags by that
component's own code: the release (``--version``) and the feature gates at it
(``FeatureGates.parse``, as every component parses them), the ``--scheduler-config`` file (the
scheduler's loader, plugin args decoded strictly), and the command line ``kplane up`` would run
for the apiserver, the scheduler and a kubelet (or the hollow nodes), ``--*-arg`` flags included,
parsed by the component's argparse parser and then checked as the component checks them before
it connects (``scheduler.main.check``, ``kubelet.main.config_from``). Nothing here reads a token,
opens a connection or touches the data dir, so a refused ``kplane up`` leaves nothing behind that
a later one would trip over.

``PreflightError``'s message is the one line the user sees, naming the flag.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Callable, Protocol

from cli import topology
from machinery import quantity, version
from machinery.featuregates import FeatureGateError, FeatureGates


class PreflightError(ValueError):
    """A value ``kplane up`` was given that a component would refuse; the message names the flag."""


def check_up(cfg: topology.ClusterConfig, timeout: float, ignore_version_skew: bool = False) -> None:
    """Raise PreflightError for the first bad value in ``cfg`` (and ``--timeout``), and for
    components whose releases the version skew policy does not allow together (unless
    ``ignore_version_skew``)."""
    _check_numbers(cfg, timeout)
    try:
        release = version.emulated(cfg.version) if cfg.version else version.BINARY
    except version.VersionError as exc:
        raise PreflightError(f"invalid --version {cfg.version}: {exc}") from None
    try:
        FeatureGates.parse(cfg.feature_gates, release)
    except FeatureGateError as exc:
        raise PreflightError(f"invalid --feature-gates {cfg.feature_gates!r}: {exc}") from None
    if cfg.scheduler_config:
        _check_scheduler_config(cfg.scheduler_config)
    # Each component's command line, first as kplane up's own flags make it, then with the
    # --*-arg flags added: an error in the second names the --*-arg flag.
    plain = dataclasses.replace(cfg, apiserver_args=[], scheduler_args=[], kubelet_args=[],
                                controller_manager_args=[])
    _check_components(plain, extra=False)
    _check_components(cfg, extra=True)
    if not ignore_version_skew:
        fake = dataclasses.replace(cfg, ports={n: 1 for n in topology.port_names(cfg)})
        _check_skew(topology.build(fake, "local"))


_SKEW_NAMES = {"kubelet": "kubelet", "hollow": "kubelet", "scheduler": "kube-scheduler",
               "controller-manager": "kube-controller-manager"}


class _Launched(Protocol):
    """A component's command line, planned (topology.Component) or running (cluster.Process)."""

    name: str
    role: str
    argv: list[str]


@dataclasses.dataclass
class _Command:
    name: str
    role: str
    argv: list[str]


def _check_skew(comps: Sequence[_Launched]) -> None:
    """Kubernetes' version skew policy over the releases these components emulate, as kubeadm's
    preflight checks a kubelet against the control plane: the apiservers within one minor of each
    other, each other component against the oldest apiserver (the one it may land on).
    PreflightError names the component and the way out."""
    apis = [emulated_version(c.argv) for c in comps if c.role == "apiserver"]
    if not apis:
        return
    oldest = min(apis)
    problem = version.apiserver_skew_violation(apis)
    if problem is not None:
        raise PreflightError(f"apiservers: {problem} (--ignore-version-skew runs it anyway)")
    for c in comps:
        component = _SKEW_NAMES.get(c.role)
        if component is None:
            continue
        problem = version.skew_violation(component, emulated_version(c.argv), oldest)
        if problem is not None:
            raise PreflightError(f"{c.name}: {problem} (--ignore-version-skew runs it anyway)")


def with_flag(argv: list[str], flag: str, value: str) -> list[str]:
    """``argv`` with every ``flag V`` and ``flag=V`` taken out and ``flag value`` put at the end
    (where it wins over the cluster's and the --*-arg flags)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        elif not arg.startswith(flag + "="):
            out.append(arg)
    return out + [flag, value]


def check_restart(running: Sequence[_Launched], name: str, argv: list[str],
                  ignore_version_skew: bool = False) -> None:
    """``kplane restart NAME --emulated-version V``: the new command line, checked as the component
    checks it, and the cluster's releases with it against the version skew policy (so an upgrade
    goes apiservers first and a downgrade apiservers last, as Kubernetes' upgrade order says);
    PreflightError with one line."""
    checker = _CHECKERS.get(argv[2]) if argv[1:2] == ["-m"] and len(argv) > 2 else None
    if checker is not None:
        message = _run(functools.partial(checker, argv[3:]))
        if message is not None:
            raise PreflightError(f"{name}: {message}")
    if not ignore_version_skew:
        _check_skew([_Command(c.name, c.role, argv if c.name == name else c.argv) for c in running])


def emulated_version(argv: list[str]) -> version.Version:
    """The release a component's command line makes it emulate: its last ``--emulated-version``,
    else kplane's own (a malformed value is the component's own check's to report)."""
    found = str(version.BINARY)
    for i, arg in enumerate(argv):
        if arg == "--emulated-version" and i + 1 < len(argv):
            found = argv[i + 1]
        elif arg.startswith("--emulated-version="):
            found = arg.partition("=")[2]
    try:
        return version.Version.parse(found)
    except version.VersionError:
        return version.BINARY


def check_node(cfg: topology.ClusterConfig, spec: topology.NodeSpec, ignore_version_skew: bool = False,
               running: Sequence[_Launched] = ()) -> None:
    """``kplane node add``: the node's kubelet command line, its own ``--kubelet-arg`` flags
    included, checked as its kubelet checks it, and its release against the cluster's apiservers
    as they run (``running``; as ``cfg`` plans them when not given: an apiserver restarted with
    another ``--emulated-version`` counts at that one), by the version skew policy unless
    ``ignore_version_skew``; PreflightError with one line."""
    ports = {n: 1 for n in (*topology.port_names(cfg), *topology.node_port_names(spec.name))}
    fake = dataclasses.replace(cfg, ports=ports)
    node = topology.node_components(fake, topology._Addresses(fake, "local"), spec, "127.0.0.1:1", "python")
    for comp in node:
        checker = _CHECKERS.get(comp.argv[2]) if comp.role == "kubelet" else None
        message = _run(functools.partial(checker, comp.argv[3:])) if checker is not None else None
        if message is not None:
            raise PreflightError(f"invalid --kubelet-arg: {message}" if spec.kubelet_args else message)
    if not ignore_version_skew:
        apis = [c for c in (running or topology.build(fake, "local")) if c.role == "apiserver"]
        _check_skew([*apis, *node])


def _check_numbers(cfg: topology.ClusterConfig, timeout: float) -> None:
    for flag, value in (("--node-cpu", cfg.node_cpu), ("--node-memory", cfg.node_memory)):
        try:
            quantity.parse_quantity(value)
        except ValueError as exc:
            raise PreflightError(f"invalid {flag} {value!r}: {exc}") from None
    for flag, count, least in (("--nodes", cfg.nodes, 0), ("--hollow-nodes", cfg.hollow_nodes, 0),
                               ("--hollow-processes", cfg.hollow_processes, 0),
                               ("--schedulers", cfg.schedulers, 0), ("--node-pods", cfg.node_pods, 1),
                               ("--controller-managers", cfg.controller_managers, 0),
                               ("--apiservers", cfg.apiservers, 1),
                               ("--dra-devices", cfg.dra_devices, 0)):
        if count < least:
            raise PreflightError(f"invalid {flag} {count}: must be {least} or more")
    if cfg.hollow_processes > max(cfg.hollow_nodes, 1):
        raise PreflightError(f"invalid --hollow-processes {cfg.hollow_processes}: more than the "
                             f"{cfg.hollow_nodes} hollow nodes (--hollow-nodes) to run")
    if cfg.etcd_members not in (1, 3, 5):
        raise PreflightError(f"invalid --etcd-members {cfg.etcd_members}: must be 1, 3 or 5")
    if not timeout > 0:
        raise PreflightError(f"invalid --timeout {timeout:g}: must be greater than 0")


def _check_scheduler_config(path: str) -> None:
    from scheduler import config as schedconfig
    from scheduler.plugins import default_registry

    if not Path(path).is_file():
        raise PreflightError(f"invalid --scheduler-config {path}: no such file")
    try:
        schedconfig.load(path, default_registry())
    except schedconfig.ConfigError as exc:
        raise PreflightError(f"invalid --scheduler-config {path}: {exc}") from None


def _check_components(cfg: topology.ClusterConfig, extra: bool) -> None:
    """Parse and check the command line of one component of each kind (all of a kind get the same
    flags but for names and ports); ``extra``: an error is blamed on that kind's --*-arg flag."""
    fake = dataclasses.replace(cfg, ports={n: 1 for n in topology.port_names(cfg)})
    seen: set[str] = set()
    for comp in topology.build(fake, "local"):
        if comp.role in seen or comp.argv[1:2] != ["-m"]:
            continue  # etcd: kplane up gives it no flag of the user's
        seen.add(comp.role)
        module, argv = comp.argv[2], comp.argv[3:]
        checker = _CHECKERS.get(module)
        if checker is None:
            continue
        flag = {"apiserver": "--apiserver-arg", "scheduler": "--scheduler-arg", "kubelet": "--kubelet-arg",
                "hollow": "--kubelet-arg", "controller-manager": "--controller-manager-arg"}.get(comp.role, "")
        message = _run(functools.partial(checker, argv))
        if message is None:
            continue
        if extra and flag:
            raise PreflightError(f"invalid {flag}: {message}")
        raise PreflightError(message)


def _run(check: Callable[[], None]) -> str | None:
    """None if ``check`` passes, else its one-line complaint: a SystemExit's message, argparse's
    error line (which it prints, then exits 2) or a ValueError's text."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(out), contextlib.redirect_stdout(out):
            check()
    except SystemExit as exc:
        if isinstance(exc.code, str):
            return exc.code
        lines = [line for line in out.getvalue().splitlines() if line.strip()]
        if exc.code in (0, None):
            return "the component would print its help and exit"
        last = lines[-1] if lines else f"exit status {exc.code}"
        return last.split(": error: ", 1)[-1]
    except ValueError as exc:
        return str(exc)
    return None


def _apiserver(argv: list[str]) -> None:
    from apiserver.server import parse_args

    parse_args(argv)


def _scheduler(argv: list[str]) -> None:
    from scheduler import main

    main.check(main.parse_args(argv))


def _controller_manager(argv: list[str]) -> None:
    from controllers import main

    main.check(main.parse_args(argv))


def _kubelet(argv: list[str]) -> None:
    from kubelet import main

    main.config_from(main.parse_args(argv))


def _hollow(argv: list[str]) -> None:
    from kubelet.hollow import main as hollow
    from kubelet.main import config_from

    a = hollow.parse_args(argv)
    name = f"{a.name_prefix}{a.first}"
    config_from(a, node_name=name, checkpoint_dir=str(Path(a.data_dir) / name / "checkpoints"))


# python -m MODULE -> how to check its flags
_CHECKERS: dict[str, Callable[[list[str]], None]] = {
    "apiserver": _apiserver, "scheduler": _scheduler, "kubelet": _kubelet, "kubelet.hollow": _hollow,
    "controllers": _controller_manager,
}
