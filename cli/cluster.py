"""Running a cluster as local processes: start, stop, kill, health, and the state in cluster.json.

``<data-dir>/cluster.json`` records the cluster's configuration, ports and, per component, the
command line, addresses, log file and pid, so any later ``kplane`` command (or a test) can find
the apiserver, kill a component, or start it again exactly as it was. Components run in their
own sessions (they outlive the ``kplane`` command); each writes its log to
``<data-dir>/logs/<component>.log``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from apiserver.auth import MASTERS_GROUP
from cli import containers, kubeconfig, pki, topology
from cli.etcd_binary import find_etcd

STATE_FILE = "cluster.json"
TOKENS_FILE = "tokens.csv"


class ClusterError(Exception):
    """A cluster operation failed; the message is for the user."""


@dataclass
class Process:
    name: str
    role: str
    argv: list[str]
    grpc: str = ""
    admin: str = ""
    health_path: str = "/healthz"
    log: str = ""
    rest: str = ""
    env: dict[str, str] = field(default_factory=dict)
    pid: int | None = None
    # A compose cluster's component: "project/service", a container (cli/containers.py), no pid.
    container: str = ""


@dataclass
class ClusterState:
    data_dir: str
    config: dict
    processes: dict[str, Process] = field(default_factory=dict)
    compose_project: str = ""  # a cluster `docker compose up` runs (its components are containers)

    @property
    def server(self) -> str:
        """Every apiserver's gRPC address, the first's first: a client given it fails over along
        them (machinery/client.py)."""
        return topology.servers_from(self.apiserver_addresses)

    @property
    def apiserver_addresses(self) -> list[str]:
        """Each apiserver's gRPC address, in the topology's order."""
        return [p.grpc for p in self.processes.values() if p.role == "apiserver" and p.grpc]

    @property
    def rest(self) -> str:
        """host:port of the Kubernetes REST API (HTTPS), "" for a cluster from before it."""
        api = self.processes.get("apiserver")
        return api.rest if api else ""

    @property
    def kubeconfig(self) -> Path:
        return Path(self.data_dir) / kubeconfig.KUBECONFIG_FILE

    @staticmethod
    def path(data_dir: str | Path) -> Path:
        return Path(data_dir) / STATE_FILE

    @classmethod
    def load(cls, data_dir: str | Path) -> "ClusterState | None":
        p = cls.path(data_dir)
        if not p.exists():
            return None
        try:
            raw = json.loads(p.read_text())
            procs = {n: Process(**v) for n, v in raw.get("processes", {}).items()}
            if raw.get("compose_project"):  # written inside a container: its data dir is where it was found
                return cls(data_dir=str(data_dir), config=raw["config"], processes=procs,
                           compose_project=raw["compose_project"])
            return cls(data_dir=raw["data_dir"], config=raw["config"], processes=procs)
        except (ValueError, KeyError, TypeError) as exc:
            raise ClusterError(f"{p} is not a kplane cluster state file: {exc}") from None

    def save(self) -> None:
        p = self.path(self.data_dir)
        tmp = p.with_suffix(".json.tmp")
        doc = {"data_dir": self.data_dir, "server": self.server, "rest": self.rest, "config": self.config,
               "processes": {n: asdict(v) for n, v in self.processes.items()}}
        if self.compose_project:
            doc["compose_project"] = self.compose_project
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, p)

    def admin_token(self) -> str:
        return read_token(Path(self.data_dir), "admin")


# ---------------------------------------------------------------- tokens


def write_tokens(data_dir: Path, nodes: list[str]) -> None:
    """Create tokens.csv (Kubernetes static token file) if missing; add missing node users."""
    path = data_dir / TOKENS_FILE
    rows: list[list[str]] = []
    if path.exists():
        rows = [line.split(",", 3) for line in path.read_text().splitlines() if line.strip()]
    users = {r[1] for r in rows if len(r) > 1}
    wanted = [("admin", MASTERS_GROUP), ("system:kube-scheduler", "system:kube-scheduler"),
              ("system:kube-controller-manager", "system:kube-controller-manager")]
    wanted += [(f"system:node:{n}", "system:nodes") for n in nodes]
    added = False
    for user, group in wanted:
        if user not in users:
            rows.append([secrets.token_hex(16), user, user, f'"{group}"'])
            added = True
    if added or not path.exists():
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(",".join(r) + "\n" for r in rows))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    # One file per user, for the components (--token-file): tokens/<node>.token, tokens/<user>.token.
    token_dir = data_dir / "tokens"
    token_dir.mkdir(exist_ok=True)
    for r in rows:
        user = r[1]
        name = user.removeprefix("system:node:").removeprefix("system:")
        target = token_dir / f"{name}.token"
        if not target.exists() or target.read_text().strip() != r[0]:
            tmp = target.with_suffix(".tmp")
            tmp.write_text(r[0] + "\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, target)


def read_token(data_dir: Path, user: str) -> str:
    path = data_dir / TOKENS_FILE
    if not path.exists():
        raise ClusterError(f"no {TOKENS_FILE} in {data_dir}: is a cluster there? (kplane up)")
    for line in path.read_text().splitlines():
        parts = line.split(",", 3)
        if len(parts) > 1 and parts[1] == user:
            return parts[0]
    raise ClusterError(f"no token for user {user!r} in {path}")


# ---------------------------------------------------------------- processes


def free_ports(count: int) -> list[int]:
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as dead.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def launch(proc: Process) -> int:
    Path(proc.log).parent.mkdir(parents=True, exist_ok=True)
    log = open(proc.log, "ab")
    ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    log.write(f'{{"event": "kplane_start", "component": "{proc.name}", "ts": "{ts}"}}\n'.encode())
    log.flush()
    env = dict(os.environ)
    env.update(proc.env)
    env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        p = subprocess.Popen(proc.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, env=env, close_fds=True)
    except OSError as exc:
        raise ClusterError(f"cannot start {proc.name}: {exc}") from None
    finally:
        log.close()
    proc.pid = p.pid
    return p.pid


def signal_process(proc: Process, sig: int) -> bool:
    """Send ``sig`` to the component's process group; False if it was not running."""
    pid = proc.pid
    if pid is None or not alive(pid):
        return False
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        os.kill(pid, sig)
    return True


def wait_dead(proc: Process, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive(proc.pid):
            return True
        time.sleep(0.05)
    return not alive(proc.pid)


def stop(proc: Process, timeout: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``timeout``."""
    if signal_process(proc, signal.SIGTERM) and not wait_dead(proc, timeout):
        signal_process(proc, signal.SIGKILL)
        wait_dead(proc, 5.0)
    proc.pid = None


def running(proc: Process) -> bool:
    """Whether the component runs: its process, or a compose cluster's container."""
    if proc.container:
        try:
            return containers.running(proc.container)
        except containers.ContainerError as exc:
            raise ClusterError(str(exc)) from None
    return alive(proc.pid)


def kill(proc: Process) -> None:
    """SIGKILL: the process group, or a compose cluster's container."""
    if proc.container:
        try:
            containers.kill(proc.container)
        except containers.ContainerError as exc:
            raise ClusterError(str(exc)) from None
        return
    signal_process(proc, signal.SIGKILL)
    wait_dead(proc, 5.0)
    proc.pid = None


def health(proc: Process, timeout: float = 1.0, path: str | None = None) -> tuple[bool, str]:
    """(healthy, reason) from the component's admin endpoint."""
    if not running(proc):
        return False, "not running"
    if not proc.admin:
        return True, "running"
    url = f"http://{proc.admin}{path or proc.health_path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = resp.read().decode(errors="replace").strip()
            if proc.role == "etcd" and '"true"' not in body:
                return False, body
            return True, "ok"
    except urllib.error.HTTPError as exc:
        return False, exc.read().decode(errors="replace").strip() or str(exc)
    except (urllib.error.URLError, OSError) as exc:
        return False, f"admin endpoint not answering ({getattr(exc, 'reason', exc)})"


def wait_healthy(proc: Process, timeout: float) -> tuple[bool, str]:
    """Wait until the component is ready (etcd: healthy), at most ``timeout`` seconds — for a
    hollow-nodes process, ``timeout`` seconds without progress: its /readyz says how many of its
    nodes still start, and each change of that moves the deadline, so thousands of nodes that
    take minutes on a small machine never time out while they come up, and a stalled start still
    does."""
    deadline = time.monotonic() + timeout
    ok, reason = False, "not checked"
    path = "/readyz" if proc.role != "etcd" else None
    while time.monotonic() < deadline:
        said = reason
        ok, reason = health(proc, path=path)
        if ok:
            return True, reason
        if not running(proc):
            return False, "exited"
        if proc.role == "hollow" and reason != said:
            deadline = time.monotonic() + timeout
        time.sleep(0.1)
    return ok, reason


def tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def last_error_line(path: str) -> str:
    """The component's own last word in its log, for a one-line report of why it did not start.

    Only what it wrote since ``kplane`` last started it counts. From the end: a plain line that
    is not part of a traceback's frames (a SystemExit's message, or a traceback's final
    ``Type: message`` line), or a JSON log line at error level (its event and error). Info and
    warning lines (a clean stop after the failure) are passed over; with nothing better the last
    line is returned.
    """
    lines = tail(path, lines=200).splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if '"kplane_start"' in lines[i]:
            lines = lines[i + 1:]
            break
    lines = [line.rstrip() for line in lines if line.strip()]
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = None
            if isinstance(entry, dict):
                if str(entry.get("level", "")).lower() in ("error", "critical", "fatal", "panic"):
                    what = str(entry.get("event") or entry.get("msg") or "error")
                    detail = entry.get("error")
                    return f"{what}: {detail}" if detail else what
                continue
        if line.startswith((" ", "\t", "Traceback (most recent call last)")):
            continue  # a traceback's frames: its last line says what happened
        return line
    return lines[-1] if lines else "no output"


# ---------------------------------------------------------------- the cluster


def resolve(cfg: topology.ClusterConfig) -> list[topology.Component]:
    """The local topology with real executables (this Python, the etcd binary found)."""
    comps = topology.build(cfg, "local", python=sys.executable)
    etcd = find_etcd()
    for c in comps:
        if c.role == "etcd":
            c.argv[0] = etcd.path
    return comps


def to_process(c: topology.Component, data_dir: Path) -> Process:
    return Process(name=c.name, role=c.role, argv=c.argv, grpc=c.grpc, admin=c.admin, health_path=c.health_path,
                   log=str(data_dir / "logs" / f"{c.log_name}.log"), env=c.env, rest=c.rest)


def write_kubeconfig(data_dir: Path, rest: str, others: list[tuple[str, str]] | None = None) -> Path:
    """``<data-dir>/kubeconfig`` for the REST API at ``rest`` (host:port), user admin; ``others``:
    (name, host:port) of the other apiservers' REST APIs, each its own context."""
    return kubeconfig.write(data_dir, f"https://{rest}", pki.Pki(data_dir / pki.PKI_DIR).ca_cert,
                            read_token(data_dir, "admin"), others=[(n, f"https://{r}") for n, r in others or []])


def up(cfg: topology.ClusterConfig, timeout: float = 60.0, echo=print) -> ClusterState:
    """Start every implemented component; on failure stop what started and raise ClusterError with
    one line: the component, and its own last error line from its log (``last_error_line``)."""
    data_dir = Path(cfg.data_dir).resolve()
    cfg.data_dir = str(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    previous = ClusterState.load(data_dir)
    if previous is not None:
        running = [p.name for p in previous.processes.values() if alive(p.pid)]
        if running:
            raise ClusterError(f"a cluster is already running in {data_dir} ({', '.join(running)}); "
                               f"run `kplane down` first")
        old_ports = previous.config.get("ports", {})
        # Nodes `kplane node add` started belong to the cluster: they come back with it.
        remembered = topology.ClusterConfig.from_dict(previous.config)
        cfg.added_nodes = cfg.added_nodes or remembered.added_nodes
        cfg.removed_nodes = cfg.removed_nodes or remembered.removed_nodes
        if previous.config.get("etcd_members", 1) != cfg.etcd_members and (data_dir / "etcd").exists():
            raise ClusterError(f"{data_dir} holds a cluster with {previous.config.get('etcd_members')} etcd "
                               f"member(s); use the same --etcd-members or `kplane down --purge` first")
    else:
        old_ports = {}
    # cluster.json records how many hollow processes run, chosen automatically or not.
    cfg.hollow_processes = len(topology.hollow_shards(cfg))
    names = topology.port_names(cfg)
    ports = {n: old_ports[n] for n in names if n in old_ports}
    fresh = free_ports(len(names) - len(ports))
    for n in names:
        if n not in ports:
            ports[n] = fresh.pop()
    cfg.ports = ports
    write_tokens(data_dir, topology.node_names(cfg))
    try:
        pki.ensure(data_dir)
    except (OSError, ValueError) as exc:
        raise ClusterError(f"cannot make the cluster's certificates in {data_dir / pki.PKI_DIR}: {exc}") from None
    comps = resolve(cfg)
    apis = [c for c in comps if c.role == "apiserver" and c.rest]
    if apis:
        write_kubeconfig(data_dir, apis[0].rest, [(c.name, c.rest) for c in apis[1:]])
    state = ClusterState(data_dir=str(data_dir), config=asdict(cfg))
    state.save()
    for c in comps:
        proc = to_process(c, data_dir)
        state.processes[c.name] = proc
        launch(proc)
        state.save()
    for c in comps:
        proc = state.processes[c.name]
        ok, reason = wait_healthy(proc, timeout)
        if not ok:
            said = last_error_line(proc.log)
            down(state)
            if reason == "exited":
                raise ClusterError(f"{c.name} exited while starting: {said} (log: {proc.log})")
            raise ClusterError(f"{c.name} did not become healthy within {timeout:.0f}s ({reason}); last log "
                               f"line: {said} (log: {proc.log})")
        echo(f"{c.name:<20} pid {proc.pid:<8} {('grpc ' + proc.grpc) if proc.grpc else '':<26} "
             f"admin {proc.admin}" + (f"  rest https://{proc.rest}" if proc.rest else ""))
    if cfg.dra_devices:
        try:
            install_device_class(state)
        except Exception as exc:
            down(state)
            raise ClusterError(f"could not create the DeviceClass of the DRA driver: {exc}") from None
        echo("deviceclass gpu.kplane.dev (driver dra.kplane.dev)")
    return state


def install_device_class(state: ClusterState) -> None:
    """Create the fake DRA driver's DeviceClass ``gpu.kplane.dev`` unless it exists: what a cluster
    administrator does when installing a driver (Kubernetes docs: Dynamic Resource Allocation,
    "DeviceClasses are created by a cluster administrator when installing a resource driver");
    the kubelets publish the devices themselves (``--dra-devices``)."""
    import asyncio
    import threading

    from kubelet.dra.driver import device_class
    from machinery import errors
    from machinery.client import Client

    async def create() -> None:
        client = Client(state.server, state.admin_token(), timeout=10.0)
        try:
            await client.device_classes.create(device_class())
        except errors.AlreadyExists:
            pass
        finally:
            await client.close()

    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(create())
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    worker = threading.Thread(target=run, name="install-device-class")  # the caller may be in an event loop
    worker.start()
    worker.join()
    if failure:
        raise failure[0]


def down(state: ClusterState, purge: bool = False) -> list[str]:
    stopped = []
    for proc in reversed(list(state.processes.values())):
        if alive(proc.pid):
            stop(proc)
            stopped.append(proc.name)
        proc.pid = None
    if purge:
        shutil.rmtree(state.data_dir, ignore_errors=True)
    else:
        state.save()
    return stopped


def compose_state(data_dir: Path, cfg: topology.ClusterConfig, project: str) -> ClusterState:
    """The state of a compose cluster as kplane on the host drives it: every component at the
    addresses compose.yaml publishes on 127.0.0.1, a container of ``project``."""
    procs = {c.name: Process(name=c.name, role=c.role, argv=[], grpc=c.grpc, admin=c.admin, rest=c.rest,
                             health_path=c.health_path, container=f"{project}/{c.log_name}")
             for c in topology.compose_host_view(cfg)}
    return ClusterState(data_dir=str(data_dir), config=asdict(cfg), processes=procs, compose_project=project)


def arm_failpoint(proc: Process, name: str, action: str) -> str:
    """Arm failpoint ``name`` of ``proc`` at run time through its admin port; returns what it said."""
    if not proc.admin or proc.role == "etcd":
        raise ClusterError(f"{proc.name} has no failpoints")
    req = urllib.request.Request(f"http://{proc.admin}/failpoints/{name}", data=action.encode(), method="PUT")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return str(resp.read().decode().strip())
    except urllib.error.HTTPError as exc:
        raise ClusterError(f"{proc.name}: {exc.read().decode().strip()}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ClusterError(f"{proc.name} is not answering on {proc.admin}: {getattr(exc, 'reason', exc)}") from None


def failpoints_of(proc: Process) -> dict[str, Any]:
    """``GET /failpoints`` of ``proc``: ``{"declared", "armed", "paused"}``."""
    if not proc.admin or proc.role == "etcd":
        raise ClusterError(f"{proc.name} has no failpoints")
    try:
        with urllib.request.urlopen(f"http://{proc.admin}/failpoints", timeout=5) as resp:
            doc = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise ClusterError(f"{proc.name} is not answering on {proc.admin}: {getattr(exc, 'reason', exc)}") from None
    return doc if isinstance(doc, dict) else {}


def select(state: ClusterState, component: str) -> list[Process]:
    """The processes a COMPONENT argument names: a process by its name, or every process of a role
    that no process is named after (``etcd`` names every member, ``kubelet`` every kubelet)."""
    if component in state.processes:
        return [state.processes[component]]
    members = [p for p in state.processes.values() if p.role == component]
    if members:
        return members
    known = ", ".join(state.processes) or "none"
    raise ClusterError(f'unknown component "{component}" (this cluster has: {known})')


def start(state: ClusterState, proc: Process, wait: float = 30.0) -> tuple[bool, str]:
    if running(proc):
        return True, "already running"
    if proc.container:
        try:
            containers.start(proc.container)
        except containers.ContainerError as exc:
            raise ClusterError(str(exc)) from None
    else:
        launch(proc)
        state.save()
    if wait <= 0:
        return True, "started"
    return wait_healthy(proc, wait)
