"""What each schedule step does to a running cluster.

``perform(step, ctx)`` runs one step and returns its ``Outcome``. A user operation the cluster
refuses (NotFound, Conflict, a PodDisruptionBudget's TooManyRequests, an apiserver that is down)
is an outcome, not a failure of the run: under faults, refusals are part of what happens. A fault
is recorded as an Event in the history (marks.py) and in ``Context`` so the runner can heal it at
the end. A ``wait`` that times out fails the step; the runner stops there.

Two faults act on a node beside its processes, with no Event written for them: ``exit`` ends a
pod's container as its process would (the fake runtime's ExitContainer, exit ``code``, default 0:
under restartPolicy Always the kubelet restarts it, under Never the pod turns terminal), and
``corrupt-checkpoint`` cuts a kubelet checkpoint file (``file: allocated`` or ``actuated``) short
mid-write, as a crash during a non-atomic write would leave it (the kubelet reads it at its next
start: kill it first).

What ``wait: {for: ...}`` waits for: ``running``, ``ready``, ``bound``/``scheduled`` (to ``node``
if given), ``deleted``, ``resize`` (``status``: done, Deferred, Infeasible, InProgress),
``nominated`` (``status.nominatedNodeName`` set, to ``node`` if given), ``restarted`` (the first
container restarted at least once and running again) for ``pod`` or ``pods``; ``event`` (``reason``,
``pod``); ``failpoint-paused`` (``component``, ``name``); ``exited`` (every process of
``component`` has exited, as at a ``panic`` failpoint: ``start`` brings it back); ``nodes-ready``;
``converged``. ``failpoint-paused`` takes ``count``: at least that many callers held (default 1).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from cli import apply as apply_cmd
from cli import cluster, nodes, preflight, topology
from cli.chaos import marks
from cli.chaos.converge import converged, pod_resize_state
from cli.chaos.schedule import Step
from kubelet.allocation.checkpoint import ACTUATED_FILE, ALLOCATED_FILE
from kubelet.runtime.client import RuntimeClient
from kubelet.runtime.errors import RuntimeCallError
from machinery import errors
from machinery.api import core_pb2, cri_pb2
from machinery.client import Client
from machinery.kinds import UnknownKindError, lookup

DELAY_WATCH_POINT = "informer/watch-receive"
DEFAULT_WAIT = 60.0
_POLL = 0.2


@dataclass
class Context:
    state: cluster.ClusterState
    client: Client
    namespace: str = "default"
    wait_scale: float = 1.0  # multiplies every wait's timeout (a loaded machine)
    # What the run disturbed, to heal at the end: component -> failpoints it armed; paused
    # components; components it killed.
    armed: dict[str, set[str]] = field(default_factory=dict)
    paused: set[str] = field(default_factory=set)
    killed: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Outcome:
    ok: bool
    detail: str = ""
    fatal: bool = False  # the run cannot go on (a wait that timed out)


Handler = Callable[[Step, Context], Awaitable[Outcome]]


async def perform(step: Step, ctx: Context) -> Outcome:
    try:
        return await _HANDLERS[step.op](step, ctx)
    except errors.ApiError as exc:
        return Outcome(False, f"{type(exc).__name__}: {_one_line(exc.message)}")
    except (cluster.ClusterError, apply_cmd.ApplyError, preflight.PreflightError, OSError) as exc:
        return Outcome(False, _one_line(str(exc)))


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _ns(step: Step, ctx: Context) -> str:
    return str(step.arg("namespace") or ctx.namespace)


# ---------------------------------------------------------------- user operations


async def _apply(step: Step, ctx: Context) -> Outcome:
    raw = step.args if isinstance(step.args, list) else [step.args]
    docs = apply_cmd.documents(raw, "schedule")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        await apply_cmd.apply(ctx.client, docs, None)
    return Outcome(True, "; ".join(out.getvalue().split("\n")).strip("; "))


async def _delete(step: Step, ctx: Context) -> Outcome:
    try:
        kind = lookup(str(step.arg("kind")))
    except UnknownKindError as exc:
        return Outcome(False, str(exc))
    grace = step.arg("grace_period")
    await ctx.client.resource(kind).delete(str(step.arg("name")), _ns(step, ctx) if kind.namespaced else "",
                                           grace_period_seconds=grace)
    return Outcome(True, "deleted")


async def _resize(step: Step, ctx: Context) -> Outcome:
    ns, name = _ns(step, ctx), str(step.arg("pod"))
    pod = await ctx.client.pods.get(name, ns)
    container = step.arg("container") or (pod.spec.containers[0].name if pod.spec.containers else "")
    field_name = "containers" if any(c.name == container for c in pod.spec.containers) else "initContainers"
    resources: dict[str, dict[str, str]] = {}
    for key, section, res in (("cpu", "requests", "cpu"), ("memory", "requests", "memory"),
                              ("limit_cpu", "limits", "cpu"), ("limit_memory", "limits", "memory")):
        if step.arg(key) is not None:
            resources.setdefault(section, {})[res] = str(step.arg(key))
    patch = {"spec": {field_name: [{"name": container, "resources": resources}]}}
    after = await ctx.client.pods.patch(name, patch, namespace=ns, subresource="resize")
    return Outcome(True, f"resized at rev {after.metadata.resource_version}")


async def _evict(step: Step, ctx: Context) -> Outcome:
    await ctx.client.pods.evict(str(step.arg("pod")), _ns(step, ctx))
    return Outcome(True, "evicted")


async def _scale(step: Step, ctx: Context) -> Outcome:
    try:
        kind = lookup(str(step.arg("kind")))
    except UnknownKindError as exc:
        return Outcome(False, str(exc))
    if kind.name not in ("Deployment", "ReplicaSet"):
        return Outcome(False, f"cannot scale a {kind.name}: scale takes a Deployment or a ReplicaSet")
    await ctx.client.resource(kind).patch(str(step.arg("name")), {"spec": {"replicas": int(step.arg("replicas"))}},
                                          namespace=_ns(step, ctx), patch_type="merge")
    return Outcome(True, f"replicas {step.arg('replicas')}")


async def _node_add(step: Step, ctx: Context) -> Outcome:
    cfg = topology.ClusterConfig.from_dict(ctx.state.config)
    labels = [f"{k}={v}" for k, v in (step.arg("labels") or {}).items()]
    spec = nodes.parse_spec(str(step.arg("name")), str(step.arg("cpu") or cfg.node_cpu),
                            str(step.arg("memory") or cfg.node_memory), int(step.arg("pods") or cfg.node_pods),
                            labels, list(step.arg("taints") or []))
    spec.kubelet_args = list(step.arg("kubelet_args") or [])
    preflight.check_node(cfg, spec, running=list(ctx.state.processes.values()))
    procs = await asyncio.to_thread(nodes.add, ctx.state, spec, 60.0 * ctx.wait_scale)
    return Outcome(True, "started " + ", ".join(p.name for p in procs))


async def _node_remove(step: Step, ctx: Context) -> Outcome:
    left = await asyncio.to_thread(nodes.remove, ctx.state, str(step.arg("name")))
    return Outcome(True, f"removed; {left} pod(s) left to the pod garbage collector" if left else "removed")


async def _cordon(node: str, ctx: Context, unschedulable: bool) -> None:
    await ctx.client.nodes.patch(node, {"spec": {"unschedulable": unschedulable}}, patch_type="merge")


async def _drain(step: Step, ctx: Context) -> Outcome:
    """kubectl drain: cordon, then evict every pod on the node (its mirror pods aside); a pod a
    PodDisruptionBudget protects stays (kubectl would retry until its timeout)."""
    node = str(step.arg("node"))
    await _cordon(node, ctx, True)
    pods = await ctx.client.pods.list("", field_selector=f"spec.nodeName={node}")
    evicted, refused = 0, []
    for p in pods.items:
        if p.metadata.deletion_timestamp or p.status.phase in ("Succeeded", "Failed"):
            continue
        if "kubernetes.io/config.mirror" in p.metadata.annotations:
            continue
        try:
            await ctx.client.pods.evict(p.metadata.name, p.metadata.namespace)
            evicted += 1
        except (errors.TooManyRequests, errors.NotFound) as exc:
            refused.append(f"{p.metadata.name} ({type(exc).__name__})")
    return Outcome(True, f"cordoned, {evicted} evicted" + (f", kept {', '.join(refused)}" if refused else ""))


async def _cordon_step(step: Step, ctx: Context) -> Outcome:
    await _cordon(str(step.arg("node")), ctx, True)
    return Outcome(True, "cordoned")


async def _uncordon(step: Step, ctx: Context) -> Outcome:
    await _cordon(str(step.arg("node")), ctx, False)
    return Outcome(True, "uncordoned")


# ---------------------------------------------------------------- faults


async def _mark(ctx: Context, action: str, component: str, args: dict[str, object] | None = None) -> str:
    """Write the fault's Event (its message ``marks.fault_message``'s, which ``kplane record``
    reads back); its revision, or why it could not be written (a lone apiserver down, say): the run
    goes on either way."""
    message = marks.fault_message(action, component, args)
    try:
        async with asyncio.timeout(3.0 * ctx.wait_scale):
            ev = await ctx.client.events.create(marks.fault_event(action, component, message))
        return f"mark at rev {ev.metadata.resource_version}"
    except (errors.ApiError, TimeoutError) as exc:
        return f"mark not written ({type(exc).__name__})"


async def _kill(step: Step, ctx: Context) -> Outcome:
    component = str(step.arg("component"))
    procs = cluster.select(ctx.state, component)
    said = await _mark(ctx, "kill", component)
    for p in procs:
        await asyncio.to_thread(cluster.kill, p)
        ctx.killed.add(p.name)
        ctx.paused.discard(p.name)
        ctx.armed.pop(p.name, None)  # a new process starts with nothing armed
    ctx.state.save()
    return Outcome(True, said)


async def _start_procs(component: str, ctx: Context) -> tuple[bool, str]:
    notes = []
    ok_all = True
    for p in cluster.select(ctx.state, component):
        ok, reason = await asyncio.to_thread(cluster.start, ctx.state, p, 30.0 * ctx.wait_scale)
        ctx.killed.discard(p.name)
        ok_all = ok_all and ok
        if not ok:
            notes.append(f"{p.name} not healthy: {reason}")
    return ok_all, "; ".join(notes)


async def _start(step: Step, ctx: Context) -> Outcome:
    component = str(step.arg("component"))
    ok, notes = await _start_procs(component, ctx)
    said = await _mark(ctx, "start", component)
    return Outcome(ok, "; ".join(x for x in (notes, said) if x))


async def _restart(step: Step, ctx: Context) -> Outcome:
    component = str(step.arg("component"))
    said = await _mark(ctx, "restart", component)
    for p in cluster.select(ctx.state, component):
        await asyncio.to_thread(cluster.kill, p)
        ctx.paused.discard(p.name)
        ctx.armed.pop(p.name, None)
    ok, notes = await _start_procs(component, ctx)
    return Outcome(ok, "; ".join(x for x in (said, notes) if x))


async def _pause(step: Step, ctx: Context) -> Outcome:
    component = str(step.arg("component"))
    procs = cluster.select(ctx.state, component)
    if any(p.container for p in procs):
        return Outcome(False, "pause needs local processes (this is a compose cluster)")
    said = await _mark(ctx, "pause", component)
    for p in procs:
        if cluster.signal_process(p, signal.SIGSTOP):
            ctx.paused.add(p.name)
    return Outcome(True, said)


async def _resume(step: Step, ctx: Context) -> Outcome:
    component = str(step.arg("component"))
    for p in cluster.select(ctx.state, component):
        cluster.signal_process(p, signal.SIGCONT)
        ctx.paused.discard(p.name)
    return Outcome(True, await _mark(ctx, "resume", component))


async def arm(ctx: Context, component: str, name: str, action: str) -> str:
    """Arm ``name`` on every process ``component`` names, keeping account for the heal."""
    said = []
    for p in cluster.select(ctx.state, component):
        said.append(await asyncio.to_thread(cluster.arm_failpoint, p, name, action))
        if action.strip() == "off":
            ctx.armed.get(p.name, set()).discard(name)
        else:
            ctx.armed.setdefault(p.name, set()).add(name)
    return "; ".join(said)


async def _failpoint(step: Step, ctx: Context) -> Outcome:
    component, name, action = str(step.arg("component")), str(step.arg("name")), str(step.arg("action"))
    said = await _mark(ctx, "failpoint", component, {"name": name, "action": action})
    return Outcome(True, f"{await arm(ctx, component, name, action)}; {said}")


async def _delay_watch(step: Step, ctx: Context) -> Outcome:
    component, ms = str(step.arg("component")), step.arg("ms")
    action = f"sleep({ms})" if ms else "off"
    said = await _mark(ctx, "delay-watch", component, {"ms": ms})
    return Outcome(True, f"{await arm(ctx, component, DELAY_WATCH_POINT, action)}; {said}")


async def _exit(step: Step, ctx: Context) -> Outcome:
    pod = await ctx.client.pods.get(str(step.arg("pod")), _ns(step, ctx))
    name = step.arg("container") or (pod.spec.containers[0].name if pod.spec.containers else "")
    cs = next((c for c in pod.status.container_statuses if c.name == name), None)
    if cs is None or not cs.container_id:
        return Outcome(False, f"container {name} of {pod.metadata.name} has not started")
    proc = ctx.state.processes.get(f"runtime/{pod.spec.node_name}")
    if proc is None or "--listen" not in proc.argv:
        return Outcome(False, f"no runtime for node {pod.spec.node_name!r} (a compose cluster?)")
    rt = RuntimeClient(proc.argv[proc.argv.index("--listen") + 1], timeout=5.0 * ctx.wait_scale)
    code = int(step.arg("code") or 0)
    try:
        await rt.exit_container(cri_pb2.ExitContainerRequest(container_id=cs.container_id.split("://", 1)[-1],
                                                             exit_code=code))
    except RuntimeCallError as exc:
        return Outcome(False, f"runtime/{pod.spec.node_name}: {_one_line(str(exc))}")
    finally:
        await rt.close()
    return Outcome(True, f"container {name} exited with {code}")


def checkpoint_path(state: cluster.ClusterState, node: str, which: str) -> Path:
    """The kubelet checkpoint file ``which`` (allocated, actuated) of ``node`` (its --checkpoint-dir)."""
    proc = state.processes.get(f"kubelet/{node}")
    if proc is None or "--checkpoint-dir" not in proc.argv:
        raise cluster.ClusterError(f"no kubelet for node {node!r} with a checkpoint dir")
    return Path(proc.argv[proc.argv.index("--checkpoint-dir") + 1]) / (
        ALLOCATED_FILE if which == "allocated" else ACTUATED_FILE)


async def _corrupt_checkpoint(step: Step, ctx: Context) -> Outcome:
    path = checkpoint_path(ctx.state, str(step.arg("node")), str(step.arg("file") or "allocated"))
    raw = path.read_bytes() if path.exists() else b'{"version": 1, "pods": {}}'
    cut = raw[:max(1, len(raw) // 2)]  # cut short mid-write: no longer JSON
    await asyncio.to_thread(path.write_bytes, cut)
    return Outcome(True, f"{path.name} cut to {len(cut)} of {len(raw)} bytes")


# ---------------------------------------------------------------- waits


async def _sleep(step: Step, ctx: Context) -> Outcome:
    await asyncio.sleep(float(step.arg("seconds")))
    return Outcome(True)


async def _poll(ctx: Context, step: Step, check: Callable[[], Awaitable[tuple[bool, str]]]) -> Outcome:
    timeout = float(step.arg("timeout") or DEFAULT_WAIT) * ctx.wait_scale
    deadline = time.monotonic() + timeout
    why = "not checked"
    while True:
        try:
            ok, why = await check()
        except errors.ApiError as exc:  # an apiserver being restarted: try again
            ok, why = False, f"{type(exc).__name__}: {_one_line(exc.message)}"
        if ok:
            return Outcome(True, why)
        if time.monotonic() >= deadline:
            return Outcome(False, f"timed out after {timeout:.0f} s: {why}", fatal=True)
        await asyncio.sleep(_POLL)


def _pod_names(step: Step) -> list[str]:
    names = step.arg("pods") or ([step.arg("pod")] if step.arg("pod") else [])
    return [str(n) for n in (names if isinstance(names, list) else [names])]


async def _pods(ctx: Context, step: Step) -> dict[str, core_pb2.Pod | None]:
    ns = _ns(step, ctx)
    out: dict[str, core_pb2.Pod | None] = {}
    for name in _pod_names(step):
        try:
            out[name] = await ctx.client.pods.get(name, ns)
        except errors.NotFound:
            out[name] = None
    return out


def _ready(p: core_pb2.Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in p.status.conditions)


async def _wait(step: Step, ctx: Context) -> Outcome:
    what = str(step.arg("for"))

    async def check() -> tuple[bool, str]:
        if what == "converged":
            return await converged(ctx.client, ctx.state)
        if what == "nodes-ready":
            lst = await ctx.client.nodes.list()
            not_ready = [n.metadata.name for n in lst.items
                         if not any(c.type == "Ready" and c.status == "True" for c in n.status.conditions)]
            return not not_ready, f"not Ready: {', '.join(not_ready)}" if not_ready else "every node Ready"
        if what == "exited":
            component = str(step.arg("component"))
            up = [p.name for p in cluster.select(ctx.state, component) if cluster.running(p)]
            return not up, f"still running: {', '.join(up)}" if up else f"{component} exited"
        if what == "failpoint-paused":
            component, name = str(step.arg("component")), str(step.arg("name"))
            want = int(step.arg("count") or 1)
            held = sum(cluster.failpoints_of(p).get("paused", {}).get(name, 0)
                       for p in cluster.select(ctx.state, component))
            return held >= want, f"{held} of {want} held at {name} in {component}"
        if what == "event":
            reason, pod = str(step.arg("reason") or ""), step.arg("pod")
            evs = await ctx.client.events.list("" if step.arg("namespace") is None and not pod else _ns(step, ctx))
            hits = [e for e in evs.items if (not reason or e.reason == reason)
                    and (not pod or e.involved_object.name == pod)]
            return bool(hits), f"{len(hits)} {reason} event(s)"
        pods = await _pods(ctx, step)
        if not pods:
            return False, f"wait for {what} needs pod or pods"
        waiting = [n for n, p in pods.items() if not _pod_is(what, p, step)]
        return not waiting, (f"waiting for {what}: {', '.join(waiting)}" if waiting else f"{what}: {', '.join(pods)}")

    return await _poll(ctx, step, check)


def _pod_is(what: str, p: core_pb2.Pod | None, step: Step) -> bool:
    if what == "deleted":
        return p is None
    if p is None:
        return False
    if what in ("bound", "scheduled"):
        return bool(p.spec.node_name) and (not step.arg("node") or p.spec.node_name == step.arg("node"))
    if what == "running":
        return p.status.phase == "Running"
    if what == "ready":
        return _ready(p)
    if what == "resize":
        want = str(step.arg("status") or "done")
        return pod_resize_state(p) == want
    if what == "nominated":
        nominated = p.status.nominated_node_name
        return bool(nominated) and (not step.arg("node") or nominated == step.arg("node"))
    if what == "unnominated":  # not (or no longer) nominated to ``node``; to any node without it
        nominated = p.status.nominated_node_name
        return not nominated or bool(step.arg("node")) and nominated != step.arg("node")
    if what == "restarted":
        cs = p.status.container_statuses
        return bool(cs) and cs[0].restart_count >= 1 and cs[0].HasField("state") and cs[0].state.HasField("running")
    return False


_HANDLERS: dict[str, Handler] = {
    "apply": _apply, "delete": _delete, "resize": _resize, "evict": _evict, "scale": _scale,
    "node-add": _node_add, "node-remove": _node_remove, "drain": _drain, "cordon": _cordon_step,
    "uncordon": _uncordon,
    "kill": _kill, "start": _start, "restart": _restart, "pause": _pause, "resume": _resume,
    "failpoint": _failpoint, "delay-watch": _delay_watch, "exit": _exit, "corrupt-checkpoint": _corrupt_checkpoint,
    "sleep": _sleep, "wait": _wait,
}
