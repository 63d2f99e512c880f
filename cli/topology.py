"""The one description of a kplane cluster's processes.

``build(cfg, mode)`` lists every component with its command line, addresses and dependencies.
``kplane up`` runs the "local" rendering as processes on this machine (127.0.0.1, ports chosen
free, state under the data dir); ``render_compose`` turns the "compose" rendering (service
names, fixed ports, volumes) into compose.yaml. The command lines are built by the same code in
both modes, so running one tests the other.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass, field, replace
from typing import Literal

import yaml

Mode = Literal["local", "compose"]

ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380
ETCD_METRICS_PORT = 2381
# etcd's space quota (--quota-backend-bytes): its suggested maximum, 8 GiB, not its default 2 GiB.
# The apiserver keeps history within --history-budget (1 GiB of data in use by default); the rest
# is for the objects themselves (150,000 pods are ~0.5 GiB) and the pages bbolt keeps free.
ETCD_QUOTA_BYTES = 8 << 30
APISERVER_PORT = 6443
# The Kubernetes REST API (HTTPS): 6444, beside the gRPC API on Kubernetes' own 6443.
APISERVER_REST_PORT = 6444
APISERVER_ADMIN_PORT = 8080
# compose.yaml runs several apiservers, as Kubernetes does: each its own service, all of them also
# found under one DNS name (a network alias), which compose's and a swarm's DNS answer with every
# replica's address; the clients dial that name and gRPC walks the addresses it gets.
COMPOSE_APISERVERS = 2
APISERVERS_ALIAS = "apiservers"
# Host ports of apiserver-i's gRPC and REST APIs on 127.0.0.1: 6443/6444, then 10 up per replica.
COMPOSE_APISERVER_HOST_STEP = 10

# compose.yaml: the state of every component in one named volume; the tokens, certificates,
# kubeconfig and cluster.json in a directory bind-mounted from the host (the `kplane --data-dir`
# of a compose cluster), so kplane and kubectl on the host drive the cluster.
COMPOSE_DATA = "/var/lib/kplane"
COMPOSE_CREDS = "/var/lib/kplane/cluster"
COMPOSE_HOST_DIR = ".kplane/compose"
# The host ports a compose cluster publishes, all on 127.0.0.1 only: the apiserver's gRPC and
# REST APIs on their own ports; every admin port (metrics, health, failpoints) from this base on,
# in the topology's order.
COMPOSE_ADMIN_HOST_BASE = 17100


@dataclass
class NodeSpec:
    """One node ``kplane node add`` started on a running cluster (kept across ``kplane down``/``up``)."""

    name: str
    cpu: str = "4"
    memory: str = "8Gi"
    pods: int = 110
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[str] = field(default_factory=list)  # key[=value]:Effect
    kubelet_args: list[str] = field(default_factory=list)  # this node's kubelet only, after the cluster's


@dataclass
class ClusterConfig:
    data_dir: str = ".kplane"
    nodes: int = 3
    node_cpu: str = "4"
    node_memory: str = "8Gi"
    node_pods: int = 110
    # Hollow nodes (``kplane up --hollow-nodes N``): hollow-node-1..N, split over
    # ``hollow_processes`` processes by contiguous ranges (0: ``auto_hollow_processes``).
    hollow_nodes: int = 0
    hollow_processes: int = 0
    # `kplane node add` / `remove` on a running cluster; remembered in cluster.json.
    added_nodes: list[NodeSpec] = field(default_factory=list)
    removed_nodes: list[str] = field(default_factory=list)
    etcd_members: int = 1
    # Apiservers over the one etcd, each with its own watch cache (``apiserver``, ``apiserver-2``, ...).
    apiservers: int = 1
    feature_gates: str = ""
    # ``kplane up --version V``: every component's --emulated-version (empty: their own default).
    version: str = ""
    scheduler_config: str = ""
    kube_reserved: str = ""
    dra_devices: int = 0
    # Extra flags for the apiserver (``kplane up --apiserver-arg=--watch-cache-size=100``).
    apiserver_args: list[str] = field(default_factory=list)
    # Extra flags for every kubelet (``--kubelet-arg=--sync-frequency=1``).
    kubelet_args: list[str] = field(default_factory=list)
    # Schedulers competing for the leader lease (``scheduler``, ``scheduler-2``, ...), their extra flags.
    schedulers: int = 1
    scheduler_args: list[str] = field(default_factory=list)
    # Controller-managers competing for their lease (``controller-manager``, ``controller-manager-2``, ...).
    controller_managers: int = 1
    controller_manager_args: list[str] = field(default_factory=list)
    # Local mode: the port of each address name ("apiserver.grpc", "etcd-1.client", ...).
    ports: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: dict) -> "ClusterConfig":
        """The configuration cluster.json recorded (fields it does not know are ignored)."""
        known = {f for f in cls.__dataclass_fields__}
        cfg = cls(**{k: v for k, v in raw.items() if k in known})
        cfg.added_nodes = [n if isinstance(n, NodeSpec) else NodeSpec(**n) for n in cfg.added_nodes]
        return cfg


@dataclass
class Component:
    name: str  # etcd, etcd-2, apiserver, scheduler, controller-manager, kubelet/node-1, runtime/node-1
    role: str  # etcd, apiserver, scheduler, controller-manager, kubelet, runtime
    argv: list[str]
    grpc: str = ""  # host:port of its gRPC (etcd: client) endpoint
    rest: str = ""  # host:port of its Kubernetes REST API (HTTPS; the apiserver only)
    admin: str = ""  # host:port of its HTTP admin endpoint (/metrics, /healthz)
    env: dict[str, str] = field(default_factory=dict)
    depends_on: list[str] = field(default_factory=list)
    data_dirs: list[str] = field(default_factory=list)
    health_path: str = "/healthz"

    @property
    def log_name(self) -> str:
        return self.name.replace("/", "-")


def etcd_member_names(cfg: ClusterConfig) -> list[str]:
    if cfg.etcd_members == 1:
        return ["etcd"]
    return [f"etcd-{i}" for i in range(1, cfg.etcd_members + 1)]


class _Addresses:
    """Where each component listens, in each mode."""

    def __init__(self, cfg: ClusterConfig, mode: Mode):
        self.cfg, self.mode = cfg, mode

    def host(self, component: str) -> str:
        return "127.0.0.1" if self.mode == "local" else component.replace("/", "-")

    def listen_host(self, component: str) -> str:
        return "127.0.0.1" if self.mode == "local" else "0.0.0.0"

    def port(self, name: str, fixed: int) -> int:
        if self.mode == "compose":
            return fixed
        if name not in self.cfg.ports:
            raise KeyError(f"no port allocated for {name}")
        return self.cfg.ports[name]

    def data(self, *parts: str) -> str:
        base = self.cfg.data_dir if self.mode == "local" else COMPOSE_DATA
        return "/".join([base.rstrip("/"), *parts])

    def creds(self, *parts: str) -> str:
        """Where the tokens and certificates are: the data dir, or in compose the directory
        bind-mounted from the host's ``.kplane/compose`` (so kplane and kubectl there can use them)."""
        base = self.cfg.data_dir if self.mode == "local" else COMPOSE_CREDS
        return "/".join([base.rstrip("/"), *parts])


def port_names(cfg: ClusterConfig) -> list[str]:
    """Every port name a local cluster needs (allocated by ``kplane up``)."""
    names = []
    for m in etcd_member_names(cfg):
        names += [f"{m}.client", f"{m}.peer", f"{m}.metrics"]
    for api in apiserver_names(cfg):
        names += [f"{api}.grpc", f"{api}.rest", f"{api}.admin"]
    names += [f"{n}.admin" for n in scheduler_names(cfg)]
    names += [f"{n}.admin" for n in controller_manager_names(cfg)]
    for n in node_specs(cfg):
        names += node_port_names(n.name)
    names += [f"{shard.name}.admin" for shard in hollow_shards(cfg)]
    return names


def node_port_names(node: str) -> list[str]:
    return [f"runtime/{node}.admin", f"kubelet/{node}.admin"]


def _replica_names(role: str, count: int) -> list[str]:
    """``role``, then ``role-2`` … for replicas competing for one leader Lease (none with 0)."""
    return [role] + [f"{role}-{i}" for i in range(2, count + 1)] if count >= 1 else []


def apiserver_names(cfg: ClusterConfig) -> list[str]:
    return _replica_names("apiserver", max(cfg.apiservers, 1))


def servers_from(addresses: list[str], first: int = 0) -> str:
    """The ``--server`` value for a client of these apiservers: all of them, starting at the
    ``first``-th (its own), the others after in order — the client fails over along the list
    (machinery/client.py, ``channel_target``)."""
    if not addresses:
        return ""
    k = first % len(addresses)
    return ",".join(addresses[k:] + addresses[:k])


def scheduler_names(cfg: ClusterConfig) -> list[str]:
    return _replica_names("scheduler", cfg.schedulers)


def controller_manager_names(cfg: ClusterConfig) -> list[str]:
    return _replica_names("controller-manager", cfg.controller_managers)


def _leader_elected(cfg: ClusterConfig, a: "_Addresses", server: str, python: str, role: str, names: list[str],
                    module: str, user: str, admin_port: int, extra: list[str]) -> list[Component]:
    """The replicas of a leader-elected component (each ``--identity`` its own name)."""
    out = []
    for name in names:
        admin = a.port(f"{name}.admin", admin_port)
        argv = [python, "-m", module, "--server", server, "--token-file", a.creds("tokens", f"{user}.token"),
                "--admin-listen", f"{a.listen_host(name)}:{admin}", "--identity", name]
        argv += _shared_flags(cfg) + extra
        out.append(Component(name=name, role=role, argv=argv, admin=f"{a.host(name)}:{admin}",
                             depends_on=["apiserver"]))
    return out


def scheduler_components(cfg: ClusterConfig, a: "_Addresses", server: str, python: str) -> list[Component]:
    config = ["--config", cfg.scheduler_config] if cfg.scheduler_config and a.mode == "local" else []
    return _leader_elected(cfg, a, server, python, "scheduler", scheduler_names(cfg), "scheduler",
                           "kube-scheduler", 10259, config + cfg.scheduler_args)


def controller_manager_components(cfg: ClusterConfig, a: "_Addresses", server: str, python: str) -> list[Component]:
    return _leader_elected(cfg, a, server, python, "controller-manager", controller_manager_names(cfg),
                           "controllers", "kube-controller-manager", 10257, cfg.controller_manager_args)


HOLLOW = "hollow-nodes"
HOLLOW_PREFIX = "hollow-node-"
# --hollow-processes 0 (auto): one process per this many hollow nodes, at most
# HOLLOW_PROCESSES_PER_CORE per core; measured in docs/performance.md, "Hollow nodes at scale".
HOLLOW_NODES_PER_PROCESS = 1000
HOLLOW_PROCESSES_PER_CORE = 2


@dataclass(frozen=True)
class HollowShard:
    """One hollow-nodes process: nodes ``<HOLLOW_PREFIX><first>`` … ``<HOLLOW_PREFIX><first + nodes - 1>``."""

    name: str  # hollow-nodes, hollow-nodes-2, ...
    first: int
    nodes: int


def auto_hollow_processes(nodes: int, cores: int | None = None) -> int:
    """How many processes ``nodes`` hollow nodes get when ``--hollow-processes`` is not given: one
    per ``HOLLOW_NODES_PER_PROCESS`` (rounded up), at most ``HOLLOW_PROCESSES_PER_CORE`` per core
    of this machine (``cores``: os.cpu_count()), at least one."""
    if nodes < 1:
        return 0
    cap = HOLLOW_PROCESSES_PER_CORE * max(cores or os.cpu_count() or 1, 1)
    return max(1, min(-(-nodes // HOLLOW_NODES_PER_PROCESS), cap))


def hollow_shards(cfg: ClusterConfig) -> list[HollowShard]:
    """The hollow-nodes processes: ``cfg.hollow_nodes`` nodes in contiguous ranges of sizes that
    differ by at most one, the first process named ``hollow-nodes`` (as when there was only one),
    then ``hollow-nodes-2`` …; never more processes than nodes."""
    if cfg.hollow_nodes < 1:
        return []
    count = min(cfg.hollow_processes or auto_hollow_processes(cfg.hollow_nodes), cfg.hollow_nodes)
    size, extra = divmod(cfg.hollow_nodes, count)
    names = _replica_names(HOLLOW, count)
    shards, first = [], 1
    for i, name in enumerate(names):
        nodes = size + (1 if i < extra else 0)
        shards.append(HollowShard(name, first, nodes))
        first += nodes
    return shards


def hollow_shard_of(cfg: ClusterConfig, node: str) -> HollowShard | None:
    """The hollow-nodes process that runs ``node`` (None: not one of the hollow nodes)."""
    index = node.removeprefix(HOLLOW_PREFIX)
    if node == index or not index.isdigit():
        return None
    i = int(index)
    return next((s for s in hollow_shards(cfg) if s.first <= i < s.first + s.nodes), None)


def is_hollow(component: str) -> bool:
    """Whether a component name is one of the hollow-nodes processes (``hollow-nodes``, ``hollow-nodes-2``, …)."""
    head, _, tail = component.partition(f"{HOLLOW}-")
    return component == HOLLOW or (head == "" and tail.isdigit())


def node_specs(cfg: ClusterConfig) -> list[NodeSpec]:
    """Every node with its own runtime and kubelet processes: node-1..N, then those added."""
    base = [NodeSpec(f"node-{i}", cfg.node_cpu, cfg.node_memory, cfg.node_pods) for i in range(1, cfg.nodes + 1)]
    added = {n.name: n for n in cfg.added_nodes}
    gone = set(cfg.removed_nodes)
    nodes = [added.pop(n.name, n) for n in base if n.name not in gone]
    return nodes + list(added.values())


def node_names(cfg: ClusterConfig) -> list[str]:
    """Every node's name, hollow ones included (each needs a kubelet token)."""
    names = [n.name for n in node_specs(cfg)]
    return names + hollow_node_names(cfg)


def hollow_node_names(cfg: ClusterConfig) -> list[str]:
    return [f"{HOLLOW_PREFIX}{i}" for i in range(1, cfg.hollow_nodes + 1)]


# A unix socket's path has room for 107 bytes (sun_path); past that, bind fails.
_SOCKET_PATH_MAX = 100


def runtime_socket(path: str) -> str:
    """Where a node's runtime listens: ``path`` (in its data dir), or, when that is too long for a
    unix socket (a deep data dir: a chaos run's cluster), a short path in the temp directory named
    after it, the same for every start of the same node."""
    if len(path.encode()) <= _SOCKET_PATH_MAX:
        return path
    digest = hashlib.sha256(path.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"kplane-{digest}.sock")


def node_components(cfg: ClusterConfig, a: "_Addresses", spec: NodeSpec, server: str, python: str) -> list[Component]:
    """One node's runtime and kubelet (``kplane up`` and ``kplane node add`` use the same)."""
    node = spec.name
    sock = runtime_socket(a.data("nodes", node, "runtime.sock"))
    runtime_admin = a.port(f"runtime/{node}.admin", 10250)
    kubelet_admin = a.port(f"kubelet/{node}.admin", 10248)
    runtime = Component(
        name=f"runtime/{node}", role="runtime",
        argv=[python, "-m", "kubelet.runtime", "--listen", f"unix://{sock}",
              "--admin-listen", f"{a.listen_host(node)}:{runtime_admin}",
              "--state-file", a.data("nodes", node, "runtime-state.json"), "--node-name", node],
        admin=f"{a.host(f'runtime/{node}')}:{runtime_admin}", data_dirs=[a.data("nodes", node)])
    kubelet_argv = [python, "-m", "kubelet", "--node-name", node, "--server", server,
                    "--token-file", a.creds("tokens", f"{node}.token"), "--runtime-endpoint", f"unix://{sock}",
                    "--checkpoint-dir", a.data("nodes", node, "checkpoints"), "--cpu", spec.cpu,
                    "--memory", spec.memory, "--pods", str(spec.pods),
                    "--admin-listen", f"{a.listen_host(node)}:{kubelet_admin}"]
    if spec.labels:
        kubelet_argv += ["--node-labels", ",".join(f"{k}={v}" for k, v in spec.labels.items())]
    if spec.taints:
        kubelet_argv += ["--register-with-taints", ",".join(spec.taints)]
    kubelet_argv += _shared_kubelet_flags(cfg) + spec.kubelet_args
    kubelet = Component(name=f"kubelet/{node}", role="kubelet", argv=kubelet_argv,
                        admin=f"{a.host(f'kubelet/{node}')}:{kubelet_admin}",
                        depends_on=["apiserver", f"runtime/{node}"])
    return [runtime, kubelet]


def _shared_kubelet_flags(cfg: ClusterConfig) -> list[str]:
    flags = []
    if cfg.dra_devices:
        flags += ["--dra-devices", str(cfg.dra_devices)]
    if cfg.kube_reserved:
        flags += ["--kube-reserved", cfg.kube_reserved]
    return flags + _shared_flags(cfg) + cfg.kubelet_args


def _shared_flags(cfg: ClusterConfig) -> list[str]:
    """What every component is given alike: the feature gates and the release to emulate (a
    component's own ``--<component>-arg`` comes after, so it overrides them)."""
    flags = ["--feature-gates", cfg.feature_gates] if cfg.feature_gates else []
    return flags + (["--emulated-version", cfg.version] if cfg.version else [])


def hollow_component(cfg: ClusterConfig, a: "_Addresses", shard: HollowShard, server: str,
                     python: str) -> Component:
    """One process of hollow nodes (``python -m kubelet.hollow --first F --nodes N``); the first
    keeps its data in ``<data-dir>/hollow``, the others in ``<data-dir>/<name>``."""
    name = shard.name
    admin = a.port(f"{name}.admin", 10249)
    data = a.data("hollow" if name == HOLLOW else name)
    argv = [python, "-m", "kubelet.hollow", "--nodes", str(shard.nodes), "--first", str(shard.first),
            "--name-prefix", HOLLOW_PREFIX, "--server", server, "--token-dir", a.creds("tokens"), "--data-dir", data,
            "--cpu", cfg.node_cpu, "--memory", cfg.node_memory, "--pods", str(cfg.node_pods),
            "--admin-listen", f"{a.listen_host(name)}:{admin}", *_shared_kubelet_flags(cfg)]
    return Component(name=name, role="hollow", argv=argv, admin=f"{a.host(name)}:{admin}",
                     depends_on=["apiserver"], data_dirs=[data])


# compose.yaml's scalable hollow nodes: each replica of the service (`--scale hollow-nodes=K`, a
# swarm service's replicas) claims one of these slots and runs that many nodes, hollow-<slot>-<i>;
# the tokens service makes every slot's tokens.
COMPOSE_HOLLOW_SLOTS = 8
COMPOSE_HOLLOW_PER_SHARD = 250
COMPOSE_HOLLOW_PREFIX = "hollow-"


def hollow_shard_names() -> list[str]:
    return [f"{COMPOSE_HOLLOW_PREFIX}{s}-{i}" for s in range(1, COMPOSE_HOLLOW_SLOTS + 1)
            for i in range(1, COMPOSE_HOLLOW_PER_SHARD + 1)]


def hollow_shard_component(cfg: ClusterConfig) -> Component:
    """compose.yaml's hollow-nodes service: one shard of hollow nodes per replica (``--slots``)."""
    a = _Addresses(cfg, "compose")
    host = APISERVERS_ALIAS if cfg.apiservers > 1 else a.host("apiserver")
    c = hollow_component(cfg, a, HollowShard(HOLLOW, 1, COMPOSE_HOLLOW_PER_SHARD), f"{host}:{APISERVER_PORT}",
                         "python")
    argv = c.argv
    # A replica's nodes are its slot's, <prefix><slot>-1 … (the slot, not --first, says which).
    del argv[argv.index("--first"):argv.index("--first") + 2]
    # ${KPLANE_HOLLOW_NODES_PER_SHARD}: fewer per shard (tokens exist for COMPOSE_HOLLOW_PER_SHARD).
    argv[argv.index("--nodes") + 1] = f"${{KPLANE_HOLLOW_NODES_PER_SHARD:-{COMPOSE_HOLLOW_PER_SHARD}}}"
    argv[argv.index("--name-prefix") + 1] = COMPOSE_HOLLOW_PREFIX
    argv[3:3] = ["--slots", str(COMPOSE_HOLLOW_SLOTS)]
    return replace(c, argv=argv)


def build(cfg: ClusterConfig, mode: Mode = "local", python: str = "python") -> list[Component]:
    a = _Addresses(cfg, mode)
    components: list[Component] = []
    members = etcd_member_names(cfg)
    peers = ",".join(f"{m}=http://{a.host(m)}:{a.port(f'{m}.peer', ETCD_PEER_PORT)}" for m in members)
    for m in members:
        client = a.port(f"{m}.client", ETCD_CLIENT_PORT)
        peer = a.port(f"{m}.peer", ETCD_PEER_PORT)
        metrics = a.port(f"{m}.metrics", ETCD_METRICS_PORT)
        components.append(Component(
            name=m, role="etcd",
            argv=["etcd", "--name", m, "--data-dir", a.data("etcd", m),
                  "--listen-client-urls", f"http://{a.listen_host(m)}:{client}",
                  "--advertise-client-urls", f"http://{a.host(m)}:{client}",
                  "--listen-peer-urls", f"http://{a.listen_host(m)}:{peer}",
                  "--initial-advertise-peer-urls", f"http://{a.host(m)}:{peer}",
                  "--listen-metrics-urls", f"http://{a.listen_host(m)}:{metrics}",
                  "--initial-cluster", peers, "--initial-cluster-state", "new",
                  "--initial-cluster-token", "kplane", "--quota-backend-bytes", str(ETCD_QUOTA_BYTES),
                  "--logger", "zap", "--log-outputs", "stderr"],
            grpc=f"{a.host(m)}:{client}", admin=f"{a.host(m)}:{metrics}", data_dirs=[a.data("etcd", m)],
            health_path="/health"))
    endpoints = ",".join(c.grpc for c in components if c.role == "etcd")
    for name in apiserver_names(cfg):
        api_port = a.port(f"{name}.grpc", APISERVER_PORT)
        api_admin = a.port(f"{name}.admin", APISERVER_ADMIN_PORT)
        api_rest = a.port(f"{name}.rest", APISERVER_REST_PORT)
        api_argv = [python, "-m", "apiserver", "--etcd-endpoints", endpoints,
                    "--listen", f"{a.listen_host(name)}:{api_port}",
                    "--admin-listen", f"{a.listen_host(name)}:{api_admin}",
                    "--token-auth-file", a.creds("tokens.csv"),
                    "--rest-listen", f"{a.listen_host(name)}:{api_rest}",
                    "--tls-cert-file", a.creds("pki", "apiserver.crt"),
                    "--tls-private-key-file", a.creds("pki", "apiserver.key")]
        api_argv += _shared_flags(cfg) + cfg.apiserver_args
        components.append(Component(name=name, role="apiserver", argv=api_argv,
                                    grpc=f"{a.host(name)}:{api_port}", rest=f"{a.host(name)}:{api_rest}",
                                    admin=f"{a.host(name)}:{api_admin}", depends_on=members))
    # The scheduler and controller-manager on the first apiserver, the kubelets round-robin;
    # each client has the others to fail over to. In compose, every client dials the apiservers'
    # one DNS name instead (names are no address list for gRPC); the DNS order spreads them.
    apis = [c.grpc for c in components if c.role == "apiserver"]
    if mode == "compose" and len(apis) > 1:
        apis = [f"{APISERVERS_ALIAS}:{APISERVER_PORT}"]
    server = servers_from(apis)
    components += scheduler_components(cfg, a, server, python)
    components += controller_manager_components(cfg, a, server, python)
    for i, spec in enumerate(node_specs(cfg)):
        components += node_components(cfg, a, spec, servers_from(apis, i), python)
    # The hollow processes take the apiservers in turn, the first on the first.
    for i, shard in enumerate(hollow_shards(cfg)):
        components.append(hollow_component(cfg, a, shard, servers_from(apis, i), python))
    return components


def compose_host_ports(cfg: ClusterConfig) -> dict[str, dict[int, int]]:
    """Component name -> {container port: host port} that a compose cluster publishes on
    127.0.0.1: the apiserver's gRPC and REST APIs on their own ports, every admin port from
    ``COMPOSE_ADMIN_HOST_BASE`` on."""
    out: dict[str, dict[int, int]] = {}
    next_admin = COMPOSE_ADMIN_HOST_BASE
    for c in build(cfg, "compose"):
        ports: dict[int, int] = {}
        if c.role == "apiserver":
            step = COMPOSE_APISERVER_HOST_STEP * apiserver_names(cfg).index(c.name)
            ports[APISERVER_PORT] = APISERVER_PORT + step
            ports[APISERVER_REST_PORT] = APISERVER_REST_PORT + step
        if c.admin:
            ports[int(c.admin.rpartition(":")[2])] = next_admin
            next_admin += 1
        out[c.name] = ports
    return out


def compose_host_view(cfg: ClusterConfig) -> list[Component]:
    """The compose cluster's components as kplane on the host reaches them (127.0.0.1 and the
    published ports; an address not published is left out)."""
    published = compose_host_ports(cfg)
    out = []
    for c in build(cfg, "compose"):
        ports = published[c.name]

        def host(address: str, ports: dict[int, int] = ports) -> str:
            port = int(address.rpartition(":")[2]) if address else 0
            return f"127.0.0.1:{ports[port]}" if port in ports else ""

        out.append(Component(name=c.name, role=c.role, argv=[], grpc=host(c.grpc), rest=host(c.rest),
                             admin=host(c.admin), health_path=c.health_path))
    return out


def compose_config(nodes: int = 3) -> ClusterConfig:
    """The topology compose.yaml runs: ``nodes`` nodes and ``COMPOSE_APISERVERS`` apiservers."""
    return ClusterConfig(nodes=nodes, apiservers=COMPOSE_APISERVERS)


def render_compose(cfg: ClusterConfig | None = None) -> str:
    """compose.yaml for the default topology (``kplane compose`` prints it; a test keeps it current)."""
    cfg = cfg or compose_config()
    host_dir = f"./{COMPOSE_HOST_DIR}:{COMPOSE_CREDS}"
    services: dict[str, dict] = {}
    for c in build(cfg, "compose"):
        svc: dict = {}
        # One image for every service: it carries kplane and Debian's etcd, as `make install` does
        # (`make image` builds it without a registry; `build` is for a machine that has one).
        svc["build"] = "."
        svc["image"] = "kplane:dev"
        svc["command"] = c.argv
        # The list form: `docker stack deploy` takes no other (and orders nothing).
        if c.depends_on and c.role != "runtime":  # kubelets reach their runtime by a socket in the volume
            svc["depends_on"] = [d.replace("/", "-") for d in c.depends_on]
        svc["volumes"] = [f"{_DATA_VOLUME}:{COMPOSE_DATA}"]
        if any(arg.startswith(COMPOSE_CREDS) for arg in c.argv):
            svc["volumes"].append(host_dir)
        # Each process waits for the credentials the tokens service writes (machinery/files.py).
        svc["environment"] = {**c.env, "KPLANE_START_FILES_WAIT": "60"}
        # On a swarm (`docker stack deploy`): on the manager, with the volume that holds etcd's data
        # and the sockets between each kubelet and its runtime; only hollow nodes spread out.
        svc["deploy"] = {"placement": {"constraints": [_ON_MANAGER]}, **_DNSRR}
        if c.role == "apiserver" and cfg.apiservers > 1:
            svc["networks"] = {"default": {"aliases": [APISERVERS_ALIAS]}}
        services[c.log_name] = svc
    # Hollow nodes on demand: none by default, `--scale hollow-nodes=K` for K shards of
    # COMPOSE_HOLLOW_PER_SHARD each (no admin port published: replicas would share it).
    hollow = hollow_shard_component(cfg)
    services[hollow.log_name] = {"build": ".", "image": "kplane:dev", "command": hollow.argv,
                                 "depends_on": ["apiserver"],
                                 "volumes": [f"{_DATA_VOLUME}:{COMPOSE_DATA}", host_dir],
                                 "environment": {"KPLANE_START_FILES_WAIT": "60"},
                                 "deploy": {"replicas": 0, **_DNSRR}}
    services["tokens"] = {
        "build": ".", "image": "kplane:dev",
        # The tokens (the hollow nodes' slots' too), the CA and serving certificate the apiserver's
        # REST API needs (cli/pki.py), a kubeconfig and cluster.json for the host:
        # `kplane --data-dir .kplane/compose ...`.
        "command": ["python", "-m", "cli", "--data-dir", COMPOSE_CREDS, "tokens", "--nodes", str(cfg.nodes),
                    "--apiservers", str(cfg.apiservers), "--hollow-shards",
                    "--compose-project", "${COMPOSE_PROJECT_NAME:-kplane}"],
        "volumes": [host_dir],
        "deploy": {"restart_policy": {"condition": "on-failure"}, "placement": {"constraints": [_ON_MANAGER]},
                   **_DNSRR},
    }
    for name in apiserver_names(cfg):
        services[name].setdefault("depends_on", []).append("tokens")
    # No top-level ``name``: Debian's docker-compose (1.29) refuses it; the project is named by
    # .env's COMPOSE_PROJECT_NAME, which every Compose implementation reads.
    doc = {"services": services, "volumes": {_DATA_VOLUME: {}}}
    return _HEADER + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def render_compose_override(cfg: ClusterConfig | None = None) -> str:
    """compose.override.yaml: the ports a compose cluster publishes on 127.0.0.1. `docker compose
    up` reads it beside compose.yaml by itself; `docker stack deploy -c compose.yaml` does not (a
    swarm's ingress would publish on every interface, and needs IPVS, which not every kernel has:
    see docs/deploy.md)."""
    cfg = cfg or compose_config()
    services = {name.replace("/", "-"): {"ports": [f"127.0.0.1:{h}:{p}" for p, h in ports.items()]}
                for name, ports in compose_host_ports(cfg).items() if ports}
    return _HEADER + yaml.safe_dump({"services": services}, sort_keys=False, default_flow_style=False)


_HEADER = ("# Generated by `kplane compose` from cli/topology.py (the same description `kplane up` runs).\n"
           "# Do not edit by hand: `make compose` regenerates it and a test checks it is current.\n")


_DATA_VOLUME = "kplane-data"
_ON_MANAGER = "node.role == manager"
# Services found by DNS, not by a virtual IP: a swarm's VIPs need IPVS in the kernel.
_DNSRR = {"endpoint_mode": "dnsrr"}
