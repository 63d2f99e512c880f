"""The ``kplane`` command (docs/cli.md).

Finds the cluster through ``--server``, ``$KPLANE_SERVER`` or ``<data-dir>/cluster.json``
(``--data-dir``, default ``$KPLANE_HOME`` or ``./.kplane``). On bad input it prints one line on
stderr and exits non-zero, having changed nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable, TypedDict, TypeVar

from google.protobuf.message import Message

from cli import apply as apply_cmd
from cli import cluster, nodes, pki, preflight, printers, topology
from cli import watch as watch_cmd
from cli.chaos import commands as chaos_cmd
from cli.chaos import generate as chaos_generate
from cli.chaos.schedule import ScheduleError
from cli.check import runner as check_runner
from cli.etcd_binary import EtcdNotFound, find_etcd
from cli.explain import command as explain_cmd
from cli.timeline import command as timeline_cmd
from machinery import errors, jsonconv, quantity, version
from machinery.client import Client
from machinery.kinds import Kind, UnknownKindError, list_accessor, lookup, object_meta

_REASONS = {
    errors.NotFound: "NotFound", errors.AlreadyExists: "AlreadyExists", errors.Conflict: "Conflict",
    errors.Invalid: "Invalid", errors.Forbidden: "Forbidden", errors.Unauthorized: "Unauthorized",
    errors.TooManyRequests: "TooManyRequests", errors.BadRequest: "BadRequest", errors.Gone: "Expired",
    errors.Unavailable: "ServiceUnavailable", errors.Timeout: "Timeout", errors.InternalError: "InternalError",
    errors.MethodNotAllowed: "MethodNotAllowed", errors.FailedPrecondition: "BadRequest",
}


_T = TypeVar("_T")


class UsageError(Exception):
    """Bad input detected before anything was sent."""


# ---------------------------------------------------------------- locating the cluster


def data_dir_of(args: argparse.Namespace) -> Path:
    return Path(args.data_dir or os.environ.get("KPLANE_HOME") or ".kplane")


def connect(args: argparse.Namespace) -> Client:
    server = args.server or os.environ.get("KPLANE_SERVER")
    token = args.token or os.environ.get("KPLANE_TOKEN")
    d = data_dir_of(args)
    if not server or not token:
        state = cluster.ClusterState.load(d)
        if state is None:
            if not server:
                raise UsageError(f"no cluster found: no {d / cluster.STATE_FILE} (run `kplane up`, or give --server)")
        else:
            server = server or state.server
            token = token or state.admin_token()
    if not token:
        raise UsageError("no token: give --token or $KPLANE_TOKEN, or use a --data-dir made by `kplane up`")
    return Client(server, token, namespace=getattr(args, "namespace", None) or "default", timeout=args.request_timeout,
                  field_manager="kplane")


def run_api(args: argparse.Namespace, fn: Callable[[Client], Awaitable[_T]]) -> _T:
    async def main() -> _T:
        client = connect(args)
        try:
            return await fn(client)
        finally:
            await client.close()
    return asyncio.run(main())


# ---------------------------------------------------------------- cluster commands


def cmd_up(args: argparse.Namespace) -> int:
    cfg = topology.ClusterConfig(
        data_dir=str(data_dir_of(args)), nodes=args.nodes, node_cpu=args.node_cpu, node_memory=args.node_memory,
        node_pods=args.node_pods, hollow_nodes=args.hollow_nodes, hollow_processes=args.hollow_processes,
        etcd_members=args.etcd_members,
        apiservers=args.apiservers,
        feature_gates=args.feature_gates or "", version=args.version or "",
        scheduler_config=args.scheduler_config or "", kube_reserved=args.kube_reserved or "",
        dra_devices=args.dra_devices, apiserver_args=list(args.apiserver_arg),
        kubelet_args=list(args.kubelet_arg), schedulers=args.schedulers, scheduler_args=list(args.scheduler_arg),
        controller_managers=args.controller_managers, controller_manager_args=list(args.controller_manager_arg))
    if args.scheduler_config:
        cfg.scheduler_config = str(Path(args.scheduler_config).resolve())
    existing = cluster.ClusterState.load(data_dir_of(args))
    if existing is not None:
        _not_compose(existing, "`kplane up` runs local processes; give it another --data-dir")
    # Every value is checked, by the components' own parsers, before anything starts or is written.
    try:
        preflight.check_up(cfg, args.timeout, ignore_version_skew=args.ignore_version_skew)
    except preflight.PreflightError as exc:
        raise UsageError(str(exc)) from None
    try:
        etcd = find_etcd()
    except EtcdNotFound as exc:
        raise UsageError(str(exc)) from None
    if etcd.warning:
        print(f"warning: {etcd.warning}", file=sys.stderr)
    state = cluster.up(cfg, timeout=args.timeout, echo=lambda line: print(line, flush=True))
    print(f"cluster is up: server {state.server}, data in {state.data_dir}", flush=True)
    if state.rest and state.kubeconfig.exists():
        # kubectl and the official clients, over the Kubernetes REST API (https://<rest>).
        print(f"export KUBECONFIG={state.kubeconfig}", flush=True)
    if args.detach:
        return 0
    print("press Ctrl-C to stop it (or use --detach and `kplane down`)", flush=True)
    stop = {"now": False}

    def handler(signum, frame):
        stop["now"] = True

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)
    while not stop["now"]:
        signal.pause()
    stopped = cluster.down(state)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}")
    return 0


def _not_compose(state: cluster.ClusterState, instead: str) -> None:
    """Refuse what only a cluster of local processes can do, with what to do instead."""
    if state.compose_project:
        raise UsageError(f"{state.data_dir} is the compose project {state.compose_project}'s cluster: {instead}")


def _state(args: argparse.Namespace) -> cluster.ClusterState:
    d = data_dir_of(args)
    state = cluster.ClusterState.load(d)
    if state is None:
        raise UsageError(f"no cluster in {d} (no {cluster.STATE_FILE}; run `kplane up`)")
    return state


def cmd_down(args: argparse.Namespace) -> int:
    d = data_dir_of(args)
    state = cluster.ClusterState.load(d)
    if state is None:
        if args.purge and d.exists():
            import shutil
            shutil.rmtree(d, ignore_errors=True)
            print(f"purged {d}")
            return 0
        raise UsageError(f"no cluster in {d} (no {cluster.STATE_FILE})")
    _not_compose(state, "stop it with `docker compose down -v`")
    stopped = cluster.down(state, purge=args.purge)
    print(f"stopped: {', '.join(stopped) or 'nothing was running'}"
          + (f"; purged {state.data_dir}" if args.purge else ""))
    return 0


class _StatusRow(TypedDict):
    """One component in ``kplane status`` (its JSON form, and a table row)."""

    name: str
    pid: int | None  # None: not running
    grpc: str
    rest: str  # the Kubernetes REST API (HTTPS): the apiserver's; "" for the others
    admin: str
    healthy: bool
    reason: str


def cmd_status(args: argparse.Namespace) -> int:
    state = _state(args)
    rows: list[_StatusRow] = []
    for p in state.processes.values():
        ok, reason = cluster.health(p)
        rows.append({"name": p.name, "pid": p.pid if cluster.alive(p.pid) else None, "grpc": p.grpc,
                     "rest": p.rest, "admin": p.admin, "healthy": ok, "reason": "" if ok else reason})
    if args.output == "json":
        print(json.dumps({"components": rows}, indent=2))
        return 0
    table = [["COMPONENT", "PID", "GRPC", "REST", "ADMIN", "HEALTHY"]]
    for r in rows:
        table.append([r["name"], str(r["pid"] or "-"), r["grpc"] or "-", r["rest"] or "-", r["admin"] or "-",
                      "yes" if r["healthy"] else f"no ({r['reason']})"])
    print(printers.format_table(table))
    return 0


def cmd_kill(args: argparse.Namespace) -> int:
    state = _state(args)
    for p in cluster.select(state, args.component):
        was = cluster.running(p)
        cluster.kill(p)
        state.save()
        print(f"{p.name} killed" if was else f"{p.name} was not running")
    return 0


def cmd_start(args: argparse.Namespace) -> int:
    state = _state(args)
    rc = 0
    for p in cluster.select(state, args.component):
        ok, reason = cluster.start(state, p, wait=0 if args.no_wait else args.wait)
        what = f"container {p.container}" if p.container else f"pid {p.pid}"
        if ok:
            print(f"{p.name} started ({what})")
        else:
            print(f"{p.name} started ({what}) but is not healthy: {reason}", file=sys.stderr)
            rc = 1 if not cluster.running(p) else rc
    return rc


def cmd_restart(args: argparse.Namespace) -> int:
    state = _state(args)
    procs = cluster.select(state, args.component)
    changes = [(flag, value) for flag, value in (("--emulated-version", args.emulated_version),
                                                 ("--feature-gates", args.feature_gates)) if value is not None]
    new_argv = {}
    for p in procs if changes else []:
        # An upgrade or a downgrade in place: the component's command line changed for good
        # (cluster.json), checked first as kplane up checks it.
        if p.container:
            raise UsageError(f"{p.name} is a container: kplane restart {' '.join(f for f, _ in changes)} "
                             "changes local processes only")
        if p.role not in ("apiserver", "scheduler", "controller-manager", "kubelet", "hollow"):
            raise UsageError(f"{p.name} takes no {' or '.join(f for f, _ in changes)}")
        argv = p.argv
        for flag, value in changes:
            argv = preflight.with_flag(argv, flag, value)
        try:
            preflight.check_restart(list(state.processes.values()), p.name, argv,
                                    ignore_version_skew=args.ignore_version_skew)
        except preflight.PreflightError as exc:
            raise UsageError(str(exc)) from None
        new_argv[p.name] = argv
    for p in procs:
        cluster.kill(p)
        if p.name in new_argv:
            p.argv = new_argv[p.name]
        state.save()
    return cmd_start(args)


def cmd_failpoint(args: argparse.Namespace) -> int:
    state = _state(args)
    procs = cluster.select(state, args.component)
    for p in procs:
        print(f"{p.name}: {cluster.arm_failpoint(p, args.name, args.action)}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    return chaos_cmd.cmd_run(args, data_dir_of(args))


def cmd_chaos(args: argparse.Namespace) -> int:
    return chaos_cmd.cmd_chaos(args, data_dir_of(args))


def cmd_record(args: argparse.Namespace) -> int:
    return chaos_cmd.cmd_record(args, lambda: connect(args))


def cmd_diff(args: argparse.Namespace) -> int:
    return chaos_cmd.cmd_diff(args)


def cmd_compose(args: argparse.Namespace) -> int:
    text, override = topology.render_compose(), topology.render_compose_override()
    if args.write:
        path = Path(args.write)
        beside = path.with_name(f"{path.name.split('.')[0]}.override.yaml")
        path.write_text(text)
        beside.write_text(override)
        print(f"wrote {path} and {beside}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_tokens(args: argparse.Namespace) -> int:
    d = data_dir_of(args)
    d.mkdir(parents=True, exist_ok=True)
    nodes = [f"node-{i}" for i in range(1, args.nodes + 1)]
    cluster.write_tokens(d, nodes + (topology.hollow_shard_names() if args.hollow_shards else []))
    print(f"tokens in {d / cluster.TOKENS_FILE}")
    # compose.yaml's apiservers serve their REST API with these; the kubeconfig is for the published
    # ports (a context per apiserver).
    made = pki.ensure(d)
    cfg = topology.ClusterConfig(nodes=args.nodes, apiservers=args.apiservers)
    rest = [(v.name, v.rest) for v in topology.compose_host_view(cfg) if v.role == "apiserver"]
    path = cluster.write_kubeconfig(d, rest[0][1], rest[1:])
    print(f"certificates in {made.dir}, kubeconfig {path}")
    if args.compose_project:
        state = cluster.compose_state(d, cfg, args.compose_project)
        state.save()
        print(f"cluster state in {state.path(d)} (compose project {args.compose_project})")
    return 0


# ---------------------------------------------------------------- API commands


def _kind(name: str) -> Kind[Message, Message]:
    try:
        return lookup(name)
    except UnknownKindError as exc:
        raise UsageError(str(exc)) from None


def cmd_get(args: argparse.Namespace) -> int:
    kind = _kind(args.kind)
    ns = "" if args.all_namespaces else (args.namespace or "default")
    if args.name and (args.selector or args.field_selector):  # kubectl's words for both
        raise UsageError("selectors and the all flag cannot be used when passing resource/name arguments")
    if args.name and args.all_namespaces and kind.namespaced:
        raise UsageError("a resource cannot be retrieved by name across all namespaces")

    async def go(client: Client) -> int:
        rc = client.resource(kind)
        wide = args.output == "wide"
        all_ns = args.all_namespaces and kind.namespaced
        if args.name:
            obj = await rc.get(args.name, ns)
            items, rv = [obj], object_meta(obj).resource_version
        else:
            lst = list_accessor(kind, await rc.list(ns, label_selector=args.selector or "",
                                                    field_selector=args.field_selector or ""))
            items, rv = list(lst.items), lst.metadata.resource_version
        shown = items
        if not args.show_managed_fields:
            shown = [printers.without_managed_fields(o) for o in items]
        if args.output == "json":
            print(printers.to_json(shown[0] if args.name else printers.as_list(shown)))
        elif args.output == "yaml":
            print(printers.to_yaml(shown[0] if args.name else printers.as_list(shown)), end="")
        elif args.output == "name":
            for o in items:
                print(printers.resource_name(kind, object_meta(o).name))
        else:
            if not items and not args.watch:
                where = f" in {ns} namespace" if kind.namespaced and ns else ""
                print(f"No resources found{where}.", file=sys.stderr)
            else:
                rows = [printers.table_header(kind, wide, all_ns)]
                rows += [printers.table_row(kind, o, wide, all_ns) for o in items]
                print(printers.format_table(rows), flush=True)
        if not args.watch:
            return 0
        field = args.field_selector or ""
        if args.name:
            field = ",".join(f for f in (field, f"metadata.name={args.name}") if f)

        def show(type_: str, obj: Message) -> None:
            if args.output in ("json", "yaml"):
                if not args.show_managed_fields:
                    obj = printers.without_managed_fields(obj)
                doc = {"type": type_, "object": jsonconv.to_dict(obj)}
                print(json.dumps(doc) if args.output == "json" else "---\n" + printers.to_yaml(doc), flush=True)
            elif args.output == "name":
                print(printers.resource_name(kind, object_meta(obj).name), flush=True)
            else:
                print(printers.format_table([printers.table_row(kind, obj, wide, all_ns)]), flush=True)

        # Across apiserver restarts and expired versions, as informers do (cli/watch.py).
        await watch_cmd.follow(rc, namespace=ns, label_selector=args.selector or "", field_selector=field,
                               resource_version=rv, shown=items, show=show)
        return 0

    return run_api(args, go)


def cmd_apply(args: argparse.Namespace) -> int:
    if not args.server_side and (args.force_conflicts or args.field_manager is not None):
        raise UsageError("--force-conflicts and --field-manager go with --server-side")
    docs = apply_cmd.load_documents(args.filename)
    how = apply_cmd.ServerSide(args.field_manager or "kplane", args.force_conflicts) if args.server_side else None
    return run_api(args, lambda client: apply_cmd.apply(client, docs, args.namespace, dry_run=args.dry_run,
                                                        server_side=how))


# kubectl's --cascade values -> DeleteOptions' propagationPolicy.
_CASCADE = {"background": "Background", "foreground": "Foreground", "orphan": "Orphan"}
# Go's strconv.ParseBool, which kubectl tries first: a boolean is the deprecated form.
_BOOLEANS = {"1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
             "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False}


def cascade_policy(value: str) -> str:
    """kubectl's GetCascadingStrategy: the propagation policy a --cascade value asks for; a
    boolean (true: background, false: orphan) with kubectl's deprecation warning."""
    if value in _BOOLEANS:
        word = "background" if _BOOLEANS[value] else "orphan"
        print(f"warning: --cascade={str(_BOOLEANS[value]).lower()} is deprecated (boolean value) and can be "
              f"replaced with --cascade={word}.", file=sys.stderr)
        return _CASCADE[word]
    policy = _CASCADE.get(value)
    if policy is None:
        raise UsageError(f'invalid cascade value ({value}). Must be "background", "foreground", or "orphan"')
    return policy


def cmd_delete(args: argparse.Namespace) -> int:
    kind = _kind(args.kind)
    policy = cascade_policy(args.cascade)

    async def go(client: Client) -> int:
        await client.resource(kind).delete(args.name, args.namespace or "", grace_period_seconds=args.grace_period,
                                           propagation_policy=policy)
        print(f'{kind.name.lower()} "{args.name}" deleted')
        return 0

    return run_api(args, go)


def cmd_patch(args: argparse.Namespace) -> int:
    kind = _kind(args.kind)
    try:
        json.loads(args.patch)
    except ValueError as exc:
        raise UsageError(f"unable to parse the patch {args.patch!r}: {exc}") from None
    if args.subresource == "resize" and kind.name != "Pod":
        raise UsageError("only pods have the resize subresource")

    async def go(client: Client) -> int:
        rc = client.resource(kind)
        before = await rc.get(args.name, args.namespace or "")
        after = await rc.patch(args.name, args.patch, namespace=args.namespace or "", patch_type=args.type,
                               subresource=args.subresource or "")
        same = object_meta(after).resource_version == object_meta(before).resource_version
        print(f"{printers.resource_name(kind, args.name)} patched{' (no change)' if same else ''}")
        return 0

    return run_api(args, go)


def cmd_resize(args: argparse.Namespace) -> int:
    if _kind(args.kind).name != "Pod":
        raise UsageError("only pods can be resized")
    values = {("requests", "cpu"): args.cpu, ("requests", "memory"): args.memory,
              ("limits", "cpu"): args.limit_cpu, ("limits", "memory"): args.limit_memory}
    if not any(values.values()):
        raise UsageError("nothing to resize: give --cpu, --memory, --limit-cpu and/or --limit-memory")
    resources: dict[str, dict[str, str]] = {}
    for (section, res), value in values.items():
        if value:
            try:
                quantity.parse_quantity(value)
            except ValueError as exc:
                raise UsageError(f"invalid {res} {section[:-1]} {value!r}: {exc}") from None
            resources.setdefault(section, {})[res] = value

    async def go(client: Client) -> int:
        pod = await client.pods.get(args.name, args.namespace or "")
        names = [c.name for c in pod.spec.containers] + [c.name for c in pod.spec.init_containers
                                                          if c.restart_policy == "Always"]
        container = args.container
        if not container:
            if len(pod.spec.containers) != 1:
                raise UsageError(f"pod {args.name} has {len(pod.spec.containers)} containers; choose one with -c "
                                 f"({', '.join(names)})")
            container = pod.spec.containers[0].name
        if container not in names:
            raise UsageError(f"container {container} is not valid for pod {args.name} (resizable: {', '.join(names)})")
        field = "containers" if any(c.name == container for c in pod.spec.containers) else "initContainers"
        patch = {"spec": {field: [{"name": container, "resources": resources}]}}
        after = await client.pods.patch(args.name, patch, namespace=args.namespace or "", subresource="resize")
        same = after.metadata.resource_version == pod.metadata.resource_version
        print(f"pod/{args.name} resized{' (no change)' if same else ''}")
        return 0

    return run_api(args, go)


def cmd_evict(args: argparse.Namespace) -> int:
    if _kind(args.kind).name != "Pod":
        raise UsageError("only pods can be evicted")

    async def go(client: Client) -> int:
        await client.pods.evict(args.name, args.namespace or "", grace_period_seconds=args.grace_period)
        print(f"pod/{args.name} evicted")
        return 0

    return run_api(args, go)


def cmd_history(args: argparse.Namespace) -> int:
    if args.since < 0:
        raise UsageError("--since must be >= 0")

    async def go(client: Client) -> int:
        async for resp in client.history(args.since, follow=args.follow):
            for e in resp.entries:
                kind = lookup(e.kind)
                obj = kind.message()
                e.object.Unpack(obj)
                print(json.dumps({"rev": e.rev, "type": e.type, "kind": e.kind, "namespace": e.namespace,
                                  "name": e.name, "object": jsonconv.to_dict(obj)}), flush=True)
        return 0

    return run_api(args, go)


def cmd_check(args: argparse.Namespace) -> int:
    return run_api(args, lambda client: check_runner.run(client, since=args.since))


def cmd_timeline(args: argparse.Namespace) -> int:
    req = timeline_cmd.Request.parse(args.output, args.since, args.until, args.pods)
    if args.history:
        print(req.write(timeline_cmd.from_file(args.history)))
        return 0

    async def go(client: Client) -> int:
        entries = await timeline_cmd.from_cluster(client)
        print(req.write(entries))
        return 0

    return run_api(args, go)


def cmd_explain(args: argparse.Namespace) -> int:
    """A pod's story: from a saved history (``--history``) or the cluster's, with the scheduler's
    logs (``--logs``, else the cluster's ``<data-dir>/logs`` when it has them)."""
    if args.kind.lower() not in explain_cmd.POD_KINDS:
        raise UsageError(f'kplane explain explains pods, not "{args.kind}"')
    namespace = args.namespace or "default"
    logs = Path(args.logs) if args.logs else None
    try:
        if logs is not None and not logs.is_dir():
            raise explain_cmd.ExplainError(f"--logs {logs}: no such directory")
        if args.history:
            entries = list(explain_cmd.read_history(Path(args.history)))
        else:
            async def read(client: Client) -> list[check_runner.Entry]:
                return [e async for e in check_runner.entries_of(client)]
            entries = run_api(args, read)
            if logs is None and (data_dir_of(args) / "logs").is_dir():
                logs = data_dir_of(args) / "logs"
        story = explain_cmd.explain(entries, namespace, args.name, args.uid or "", logs)
    except explain_cmd.ExplainError as exc:
        raise UsageError(str(exc)) from None
    explain_cmd.print_story(story, args.output, sys.stdout)
    return 0


# ---------------------------------------------------------------- parser


def cluster_flags(sp: argparse.ArgumentParser, defaults: bool = True) -> None:
    """``kplane up``'s flags for the cluster it starts. Without ``defaults`` (``kplane run`` and
    ``kplane chaos``, which start a cluster only when none is up) a flag not given is None, so a
    schedule's ``cluster:`` settings hold where the command line is silent."""
    added: list[argparse.Action] = []

    def flag(*names: str, **kw: Any) -> None:
        added.append(sp.add_argument(*names, **kw))

    flag("--nodes", type=int, default=3)
    flag("--node-cpu", default="4")
    flag("--node-memory", default="8Gi")
    flag("--node-pods", type=int, default=110)
    flag("--hollow-nodes", type=int, default=0,
         help="also run this many hollow nodes (hollow-node-1..N), for scale")
    flag("--hollow-processes", type=int, default=0, metavar="P",
         help="split the hollow nodes over P processes by contiguous ranges (hollow-nodes, hollow-nodes-2, ...); "
         f"0: one per {topology.HOLLOW_NODES_PER_PROCESS} nodes, at most {topology.HOLLOW_PROCESSES_PER_CORE} "
         "per core")
    flag("--etcd-members", type=int, default=1)
    flag("--apiservers", type=int, default=1,
         help="apiservers over the one etcd, each with its own watch cache (apiserver, apiserver-2, ...); "
         "the scheduler and controller-manager use the first, the kubelets take turns, and every "
         "client fails over to the next")
    flag("--feature-gates", default="")
    flag("--version", default="", metavar="V",
         help="the Kubernetes release every component behaves as (--emulated-version), e.g. 1.36; "
         f"{version.FLOOR} to {version.BINARY}, default {version.BINARY}; --<component>-arg="
         "--emulated-version=V sets one")
    flag("--scheduler-config")
    flag("--kube-reserved", default="")
    flag("--dra-devices", type=int, default=0,
         help="each node's kubelet publishes this many GPUs of the fake DRA driver dra.kplane.dev, "
         "and the DeviceClass gpu.kplane.dev is created (0: no DRA driver)")
    flag("--apiserver-arg", action="append", default=[], metavar="FLAG",
         help="extra apiserver flag, e.g. --apiserver-arg=--watch-cache-size=100 (repeatable)")
    flag("--schedulers", type=int, default=1,
         help="schedulers competing for the leader lease (scheduler, scheduler-2, ...; 0: none)")
    flag("--scheduler-arg", action="append", default=[], metavar="FLAG",
         help="extra flag for every scheduler, e.g. --scheduler-arg=--leader-elect-lease-duration=4s")
    flag("--controller-managers", type=int, default=1,
         help="controller-managers competing for their lease (controller-manager, controller-manager-2, "
         "...; 0: none)")
    flag("--controller-manager-arg", action="append", default=[], metavar="FLAG",
         help="extra flag for every controller-manager, e.g. "
         "--controller-manager-arg=--node-monitor-grace-period=10s (repeatable)")
    flag("--kubelet-arg", action="append", default=[], metavar="FLAG",
         help="extra flag for every kubelet, e.g. --kubelet-arg=--sync-frequency=1 (repeatable)")
    flag("--ignore-version-skew", action="store_true",
         help="start components whose releases (--version, --emulated-version) the version skew "
         "policy does not allow together")
    if not defaults:
        for action in added:
            action.default = None


def run_flags(sp: argparse.ArgumentParser) -> None:
    """The flags of a schedule run (``kplane run``, ``kplane chaos``)."""
    sp.add_argument("--out", metavar="DIR", help="the run's directory (default: <data-dir>/runs/<name>-<time>)")
    sp.add_argument("--converge-timeout", type=float, default=120.0, metavar="S",
                    help="seconds the cluster has to settle after the steps")
    sp.add_argument("--wait-scale", type=float, default=1.0, metavar="X",
                    help="multiply every wait's timeout (a loaded machine)")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each component started")
    cluster_flags(sp, defaults=False)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kplane", description="Run and drive a kplane cluster (a Kubernetes "
                                "control-plane emulator built from real processes).")
    p.add_argument("--server", help="apiserver HOST:PORT (default: $KPLANE_SERVER or the data dir's cluster)")
    p.add_argument("--token", help="bearer token (default: $KPLANE_TOKEN or the data dir's admin token)")
    p.add_argument("--data-dir", help="cluster data dir (default: $KPLANE_HOME or ./.kplane)")
    p.add_argument("--request-timeout", type=float, default=30.0, help="seconds per API call")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, fn, help_: str, namespaced: bool = False, **kw) -> argparse.ArgumentParser:
        """A subcommand; ``namespaced`` ones take -n/--namespace (the others refuse it, as an
        unrecognized argument, rather than ignore it)."""
        sp = sub.add_parser(name, help=help_, description=help_, **kw)
        sp.set_defaults(fn=fn)
        if namespaced:
            sp.add_argument("-n", "--namespace", default=None, help="namespace (default: default)")
        return sp

    sp = add("up", cmd_up, "start etcd, the apiserver and every other component as local processes")
    cluster_flags(sp)
    sp.add_argument("--detach", action="store_true", help="return once the cluster is up")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for each component")

    sp = add("down", cmd_down, "stop every component (keep the data unless --purge)")
    sp.add_argument("--purge", action="store_true")

    sp = add("status", cmd_status, "each component: pid, ports, health")
    sp.add_argument("-o", "--output", choices=["table", "json"], default="table")

    sp = add("node", cmd_node, "add or remove a node (its runtime and kubelet) on a running cluster")
    sp.add_argument("action", choices=["add", "remove"])
    sp.add_argument("node_name", metavar="NAME")
    sp.add_argument("--cpu")
    sp.add_argument("--memory")
    sp.add_argument("--pods", type=int)
    sp.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    sp.add_argument("--taint", action="append", default=[], metavar="KEY[=VALUE]:EFFECT")
    sp.add_argument("--kubelet-arg", action="append", default=[], metavar="FLAG",
                    help="extra flag for this node's kubelet, after the cluster's, e.g. "
                         "--kubelet-arg=--cpu-manager-policy=static (repeatable)")
    sp.add_argument("--ignore-version-skew", action="store_true",
                    help="add a kubelet whose release the version skew policy does not allow beside the apiservers")
    sp.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the node to be Ready")

    sp = add("apply", cmd_apply, "create or update objects from Kubernetes-style YAML/JSON (multi-document)",
             namespaced=True)
    sp.add_argument("-f", "--filename", required=True, help="FILE or - for stdin")
    sp.add_argument("--dry-run", action="store_true", help="validate on the server, change nothing")
    sp.add_argument("--server-side", action="store_true",
                    help="server-side apply: the server merges each document and records its fields' manager")
    sp.add_argument("--field-manager", help="with --server-side: the manager the fields are recorded under (kplane)")
    sp.add_argument("--force-conflicts", action="store_true",
                    help="with --server-side: take the fields other managers own instead of failing")

    sp = add("get", cmd_get, "list or show objects", namespaced=True)
    sp.add_argument("kind", metavar="KIND")
    sp.add_argument("name", metavar="NAME", nargs="?")
    sp.add_argument("-A", "--all-namespaces", action="store_true")
    sp.add_argument("-l", "--selector")
    sp.add_argument("--field-selector")
    sp.add_argument("-o", "--output", choices=["wide", "json", "yaml", "name"])
    sp.add_argument("--show-managed-fields", action="store_true",
                    help="-o json|yaml: keep metadata.managedFields (left out by default, as kubectl does)")
    sp.add_argument("-w", "--watch", action="store_true")

    sp = add("delete", cmd_delete, "delete an object (gracefully)", namespaced=True)
    sp.add_argument("kind", metavar="KIND")
    sp.add_argument("name", metavar="NAME")
    sp.add_argument("--grace-period", type=int, default=None)
    sp.add_argument("--cascade", default="background", metavar="background|foreground|orphan",
                    help="what becomes of the object's dependents (kubectl's flag): deleted by the garbage "
                         "collector after it (background) or before it (foreground), or kept (orphan)")

    sp = add("patch", cmd_patch, "patch an object (strategic merge patches merge containers by name)", namespaced=True)
    sp.add_argument("kind", metavar="KIND")
    sp.add_argument("name", metavar="NAME")
    sp.add_argument("-p", "--patch", required=True)
    sp.add_argument("--type", choices=["strategic", "merge", "json"], default="strategic")
    sp.add_argument("--subresource", choices=["resize", "status"])

    sp = add("resize", cmd_resize, "resize a pod in place through the resize subresource (KEP-1287)", namespaced=True)
    sp.add_argument("kind", metavar="pod")
    sp.add_argument("name", metavar="NAME")
    sp.add_argument("-c", "--container")
    sp.add_argument("--cpu")
    sp.add_argument("--memory")
    sp.add_argument("--limit-cpu")
    sp.add_argument("--limit-memory")

    sp = add("evict", cmd_evict, "evict a pod through the eviction subresource (honours PodDisruptionBudgets)",
             namespaced=True)
    sp.add_argument("kind", metavar="pod")
    sp.add_argument("name", metavar="NAME")
    sp.add_argument("--grace-period", type=int, default=None)

    for name, fn, what in (("kill", cmd_kill, "SIGKILL a component"), ("start", cmd_start, "start a component"),
                           ("restart", cmd_restart, "SIGKILL a component and start it again")):
        sp = add(name, fn, f"{what} (etcd, apiserver, scheduler, controller-manager, kubelet/NODE, runtime/NODE)")
        sp.add_argument("component", metavar="COMPONENT")
        if name != "kill":
            sp.add_argument("--wait", type=float, default=30.0, help="seconds to wait for it to be healthy")
            sp.add_argument("--no-wait", action="store_true")
        if name == "restart":
            sp.add_argument("--emulated-version", metavar="V",
                            help="restart it as release V for good (an upgrade or a downgrade in place; the "
                            "version skew policy decides the order)")
            sp.add_argument("--feature-gates", metavar="A=true,B=false",
                            help="restart it with these feature gates for good (\"\" for none)")
            sp.add_argument("--ignore-version-skew", action="store_true",
                            help="restart it even where the version skew policy forbids the result")

    sp = add("failpoint", cmd_failpoint, "arm a failpoint at run time (panic, sleep(ms), error, pause, return, off)")
    sp.add_argument("component", metavar="COMPONENT")
    sp.add_argument("name", metavar="NAME")
    sp.add_argument("action", metavar="ACTION")

    sp = add("history", cmd_history, "the cluster's event log: every revision as a JSON line")
    sp.add_argument("--since", type=int, default=0)
    sp.add_argument("-f", "--follow", action="store_true")

    sp = add("check", cmd_check, "replay the event log and check the cluster's invariants")
    sp.add_argument("--since", type=int, default=0)

    sp = add("run", cmd_run, "run a schedule file (timed operations, faults, waits), then heal, converge, "
             "kplane check and its expectations; on the data dir's cluster, or one started for the run")
    sp.add_argument("schedule", metavar="SCHEDULE")
    run_flags(sp)

    sp = add("chaos", cmd_chaos, "run a seeded random schedule of operations, kills and failpoints, then converge "
             "and kplane check (kplane chaos shrink FILE: shrink a failing schedule to a minimal one)")
    sp.add_argument("action", nargs="?", choices=["shrink"], help="shrink FILE")
    sp.add_argument("file", nargs="?", metavar="FILE", help="with shrink: the failing schedule")
    sp.add_argument("--seed", type=int, help="the same seed and profile give the same schedule (default: random)")
    sp.add_argument("--duration", default="60", help="seconds of steps (90, 90s, 2m)")
    sp.add_argument("--profile", default="everything", choices=list(chaos_generate.PROFILES))
    sp.add_argument("--each-profile", action="store_true",
                    help="every profile in turn, the duration shared between them")
    sp.add_argument("--failpoints", metavar="NAME=ACTION;...",
                    help="failpoints armed in every process for the whole run, e.g. kubelet/skip-fit-check=return")
    sp.add_argument("--tries", type=int, default=2, help="shrink: runs per candidate, every one of which must fail "
                    "for the candidate to count as failing")
    run_flags(sp)

    sp = add("timeline", cmd_timeline, "draw the history: a lane per node, pods' lives, resizes, preemptions "
             "and faults, as one HTML page or an SVG")
    sp.add_argument("-o", "--output", required=True, metavar="FILE.html|FILE.svg")
    sp.add_argument("--since", type=int, default=0, metavar="REV", help="draw from this revision on")
    sp.add_argument("--until", type=int, default=None, metavar="REV", help="draw up to this revision")
    sp.add_argument("--pods", metavar="NAME,...", help="only these pods (names or namespace/names)")
    sp.add_argument("--history", metavar="FILE",
                    help="draw this file of `kplane history` lines (- for stdin) instead of the cluster's history")

    sp = add("record", cmd_record, "turn a history's user operations and fault marks into a schedule "
             "(kplane run replays it)")
    sp.add_argument("--since", type=int, default=0, help="first revision to record (as kplane history --since)")
    sp.add_argument("--until", type=int, default=None, help="last revision to record (default: the last)")
    sp.add_argument("--history", metavar="FILE", help="a saved `kplane history` (default: the cluster's)")
    sp.add_argument("-o", "--output", required=True, metavar="FILE.yaml", help="the schedule file to write")

    sp = add("diff", cmd_diff, "compare two runs' outcomes (placements, preemptions, endings, resizes) "
             "from saved `kplane history` files; exit 1 when they differ")
    sp.add_argument("history_a", metavar="HISTORY_A")
    sp.add_argument("history_b", metavar="HISTORY_B")
    sp.add_argument("-o", "--output", choices=["text", "json"], default="text")

    sp = add("explain", cmd_explain, "a pod's whole story across the processes, in revision order (queue, plugin "
             "verdicts, requeues, nomination, preemption, bind, kubelet admission, resizes, eviction)", namespaced=True)
    sp.add_argument("kind", metavar="pod")
    sp.add_argument("name", metavar="NAME")
    sp.add_argument("--uid", help="the pod of this uid, when pods of that name were deleted and made again "
                    "(default: the latest)")
    sp.add_argument("-o", "--output", choices=["text", "json"], default="text")
    sp.add_argument("--history", metavar="FILE", help="read a saved `kplane history` file instead of the cluster")
    sp.add_argument("--logs", metavar="DIR", help="the directory of the scheduler's logs (scheduler*.log; "
                    "default: the cluster's <data-dir>/logs)")

    sp = add("compose", cmd_compose, "print compose.yaml for the default topology (--write: and its override "
                                      "with the ports published on 127.0.0.1)")
    sp.add_argument("--write", metavar="FILE")

    sp = add("tokens", cmd_tokens, "write the cluster's token file, certificates and kubeconfig (used by compose.yaml)")
    sp.add_argument("--nodes", type=int, default=3)
    sp.add_argument("--apiservers", type=int, default=1, help="the compose cluster's apiservers (a context each)")
    sp.add_argument("--hollow-shards", action="store_true",
                    help="also the tokens of compose.yaml's hollow-nodes slots (hollow-<slot>-<i>)")
    sp.add_argument("--compose-project", metavar="PROJECT",
                    help="also write cluster.json for the compose project's cluster, as kplane on the host reaches it")
    return p


def cmd_node(args: argparse.Namespace) -> int:
    state = _state(args)
    _not_compose(state, "its nodes are compose.yaml's services")
    if args.action == "remove":
        given = [f for f, v in (("--cpu", args.cpu), ("--memory", args.memory), ("--pods", args.pods),
                                ("--label", args.label), ("--taint", args.taint),
                                ("--kubelet-arg", args.kubelet_arg),
                                ("--ignore-version-skew", args.ignore_version_skew)) if v]
        if given:
            raise UsageError(f"kplane node remove takes no {', '.join(given)}")
        left = nodes.remove(state, args.node_name)
        print(f'node "{args.node_name}" removed' + (f"; {nodes.left_to_podgc(state, left)}" if left else ""))
        return 0
    cfg = topology.ClusterConfig.from_dict(state.config)
    spec = nodes.parse_spec(args.node_name, args.cpu or cfg.node_cpu, args.memory or cfg.node_memory,
                            args.pods if args.pods is not None else cfg.node_pods, args.label, args.taint)
    spec.kubelet_args = list(args.kubelet_arg)
    try:
        preflight.check_node(cfg, spec, ignore_version_skew=args.ignore_version_skew,
                             running=list(state.processes.values()))
    except preflight.PreflightError as exc:
        raise UsageError(str(exc)) from None
    procs = nodes.add(state, spec, timeout=args.timeout)
    print(f'node "{spec.name}" added (cpu {spec.cpu}, memory {spec.memory}, pods {spec.pods}): '
          + ", ".join(f"{p.name} pid {p.pid}" for p in procs))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "fn", None):
        parser.print_help()
        return 2
    try:
        return args.fn(args) or 0
    except errors.ApiError as exc:
        reason = _REASONS.get(type(exc), type(exc).__name__)
        print(f"Error from server ({reason}): {_one_line(exc.message)}", file=sys.stderr)
        return 1
    except (UsageError, cluster.ClusterError, apply_cmd.ApplyError, ScheduleError,
            timeline_cmd.TimelineError) as exc:
        text = str(exc)
        first, _, rest = text.partition("\n")
        print(f"error: {first}", file=sys.stderr)
        if rest:
            print(rest, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


if __name__ == "__main__":
    sys.exit(main())
