"""A schedule: the file ``kplane run`` runs, ``kplane chaos`` writes and shrinks, and ``kplane
record`` makes from a history.

It is YAML::

    name: resize-during-scheduling          # optional, for people and reports
    description: ...                         # optional
    seed: 7                                  # written by kplane chaos
    cluster: {nodes: 2, node_cpu: "2"}       # kplane up's settings, used when no cluster is up;
                                             # failpoints: "a=return;b=sleep(9)" armed in every
                                             # process for the whole run, restarts included
    steps:
      - apply: {apiVersion: v1, kind: Pod, ...}     # one manifest or a list of them
      - after: 0.5                                   # seconds to wait before this step (default 0)
        resize: {pod: web, cpu: 1500m}
      - kill: scheduler
    expect:                                          # what must hold once the cluster settled
      - {pod: web, phase: Running, node: node-1}

A relative ``cluster.scheduler_config`` is read beside the schedule file.

Each step has one operation key and optionally ``after``. The operations and their arguments are
``OPERATIONS``' keys, each checked here so a bad file fails before anything is sent, with one line
naming the step (``step 3 (resize): ...``). A step is a frozen dataclass; ``op`` names it and
``args`` holds its arguments as given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from machinery import quantity


class _PlainDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


class ScheduleError(ValueError):
    """A schedule file that cannot be run; the message is one line naming the step."""


# Operation -> (required argument keys, optional argument keys) for mapping arguments; a string
# argument (``kill: scheduler``) is the ``SCALAR`` key's value.
SCALAR: Final = {"kill": "component", "start": "component", "restart": "component", "pause": "component",
                 "resume": "component", "node-remove": "name", "drain": "node", "sleep": "seconds",
                 "wait": "for", "evict": "pod", "cordon": "node", "uncordon": "node", "exit": "pod"}
OPERATIONS: Final[dict[str, tuple[frozenset[str], frozenset[str]]]] = {
    # user operations
    "apply": (frozenset(), frozenset()),  # a manifest or a list of manifests: checked apart
    "delete": (frozenset({"kind", "name"}), frozenset({"namespace", "grace_period"})),
    "resize": (frozenset({"pod"}), frozenset({"namespace", "container", "cpu", "memory", "limit_cpu",
                                              "limit_memory"})),
    "evict": (frozenset({"pod"}), frozenset({"namespace"})),
    "scale": (frozenset({"kind", "name", "replicas"}), frozenset({"namespace"})),
    "node-add": (frozenset({"name"}), frozenset({"cpu", "memory", "pods", "labels", "taints", "kubelet_args"})),
    "node-remove": (frozenset({"name"}), frozenset()),
    "drain": (frozenset({"node"}), frozenset()),
    "cordon": (frozenset({"node"}), frozenset()),
    "uncordon": (frozenset({"node"}), frozenset()),
    # faults
    "kill": (frozenset({"component"}), frozenset()),
    "start": (frozenset({"component"}), frozenset()),
    "restart": (frozenset({"component"}), frozenset()),
    "pause": (frozenset({"component"}), frozenset()),
    "resume": (frozenset({"component"}), frozenset()),
    "failpoint": (frozenset({"component", "name", "action"}), frozenset()),
    "delay-watch": (frozenset({"component", "ms"}), frozenset()),
    # node-local faults, done beside the cluster's processes (steps.py)
    "exit": (frozenset({"pod"}), frozenset({"namespace", "container", "code"})),
    "corrupt-checkpoint": (frozenset({"node"}), frozenset({"file"})),
    # waits
    "sleep": (frozenset({"seconds"}), frozenset()),
    "wait": (frozenset({"for"}), frozenset({"pods", "pod", "namespace", "node", "status", "reason",
                                            "component", "name", "count", "timeout"})),
}
USER_OPERATIONS: Final = ("apply", "delete", "resize", "evict", "scale", "node-add", "node-remove", "drain",
                          "cordon", "uncordon")
FAULTS: Final = ("kill", "start", "restart", "pause", "resume", "failpoint", "delay-watch", "exit",
                  "corrupt-checkpoint")
# The kubelet checkpoint files ``corrupt-checkpoint`` can damage (kubelet/allocation/checkpoint.py).
CHECKPOINT_FILES: Final = ("allocated", "actuated")
WAITS: Final = ("sleep", "wait")
# What ``wait: {for: ...}`` can wait for (steps.py says what each means).
WAIT_FOR: Final = ("converged", "running", "bound", "scheduled", "deleted", "resize", "event", "ready",
                   "failpoint-paused", "nodes-ready", "exited", "nominated", "unnominated", "restarted")
# The settings of ``cluster:`` (kplane up's flags, with underscores).
CLUSTER_KEYS: Final = frozenset({"nodes", "node_cpu", "node_memory", "node_pods", "feature_gates", "version",
                                 "etcd_members", "apiservers", "schedulers", "controller_managers",
                                 "kubelet_args", "scheduler_args", "controller_manager_args",
                                 "apiserver_args", "dra_devices", "kube_reserved", "scheduler_config",
                                 "failpoints"})
EXPECT_KEYS: Final = frozenset({"pod", "namespace", "phase", "node", "gone", "bound", "resize", "requests",
                                "actual", "restarts", "event", "min", "max", "replicaset", "deployment", "ready",
                                "pods", "running"})


@dataclass(frozen=True)
class Step:
    op: str
    args: Any  # the operation's argument as given: a mapping, a manifest (list) or a scalar
    after: float = 0.0  # seconds to wait before it

    def arg(self, key: str, default: Any = None) -> Any:
        """One argument; a scalar argument answers for its operation's ``SCALAR`` key."""
        if isinstance(self.args, dict):
            return self.args.get(key, default)
        return self.args if SCALAR.get(self.op) == key else default

    @property
    def kind(self) -> str:
        """``user``, ``fault`` or ``wait``."""
        return "user" if self.op in USER_OPERATIONS else "fault" if self.op in FAULTS else "wait"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.after:
            out["after"] = round(self.after, 3)
        out[self.op] = self.args
        return out

    def describe(self) -> str:
        """The step on one line, as ``kplane chaos`` prints it."""
        a = self.args
        if self.op == "apply":
            docs = a if isinstance(a, list) else [a]
            return "apply " + ", ".join(f"{d.get('kind', '?').lower()}/{d.get('metadata', {}).get('name', '?')}"
                                        for d in docs)
        if isinstance(a, dict):
            return f"{self.op} " + " ".join(f"{k}={_short(v)}" for k, v in a.items())
        return f"{self.op} {a}"


def _short(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v))
    return str(v)


@dataclass
class Schedule:
    steps: list[Step]
    name: str = ""
    description: str = ""
    seed: int | None = None
    profile: str = ""
    cluster: dict[str, Any] = field(default_factory=dict)
    expect: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key in ("name", "description"):
            if getattr(self, key):
                out[key] = getattr(self, key)
        if self.seed is not None:
            out["seed"] = self.seed
        if self.profile:
            out["profile"] = self.profile
        if self.cluster:
            out["cluster"] = self.cluster
        out["steps"] = [s.to_dict() for s in self.steps]
        if self.expect:
            out["expect"] = self.expect
        return out

    def dump(self) -> str:
        """The YAML text, written for people: no anchors or aliases where two steps share a value."""
        return yaml.dump(self.to_dict(), Dumper=_PlainDumper, sort_keys=False, default_flow_style=None, width=120)

    def write(self, path: Path | str) -> None:
        """Write it whole or not at all (temp file, then rename)."""
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(self.dump())
        tmp.replace(path)

    def replace_steps(self, steps: list[Step]) -> "Schedule":
        return Schedule(steps, self.name, self.description, self.seed, self.profile, dict(self.cluster),
                        list(self.expect))


def parse_step(i: int, raw: Any) -> Step:
    """Step ``i`` (1-based, for messages) of a schedule's ``steps``."""
    if not isinstance(raw, dict):
        raise ScheduleError(f"step {i}: want a mapping with one operation, got {type(raw).__name__}")
    after = raw.get("after", 0)
    if isinstance(after, bool) or not isinstance(after, (int, float)) or after < 0:
        raise ScheduleError(f"step {i}: after must be a number of seconds >= 0, got {after!r}")
    ops = [k for k in raw if k != "after"]
    if len(ops) != 1:
        raise ScheduleError(f"step {i}: want exactly one operation ({', '.join(OPERATIONS)}), got "
                            f"{', '.join(map(str, ops)) or 'none'}")
    op = ops[0]
    if op not in OPERATIONS:
        raise ScheduleError(f"step {i}: unknown operation {op!r} (known: {', '.join(OPERATIONS)})")
    args = raw[op]
    where = f"step {i} ({op})"
    if op == "apply":
        docs = args if isinstance(args, list) else [args]
        if not docs or not all(isinstance(d, dict) and d.get("kind") and isinstance(d.get("metadata"), dict)
                                and d["metadata"].get("name") for d in docs):
            raise ScheduleError(f"{where}: want a manifest (or a list of them) with kind and metadata.name")
        return Step(op, args, float(after))
    required, optional = OPERATIONS[op]
    if not isinstance(args, dict):
        if op not in SCALAR or isinstance(args, (dict, list)) or args is None:
            raise ScheduleError(f"{where}: want a mapping with {', '.join(sorted(required))}")
        args_map = {SCALAR[op]: args}
    else:
        args_map = args
    missing = required - set(args_map)
    if missing:
        raise ScheduleError(f"{where}: missing {', '.join(sorted(missing))}")
    unknown = set(args_map) - required - optional
    if unknown:
        raise ScheduleError(f"{where}: unknown argument {', '.join(sorted(map(str, unknown)))} "
                            f"(takes {', '.join(sorted(required | optional))})")
    _check_values(where, op, args_map)
    return Step(op, args, float(after))


def _check_values(where: str, op: str, a: dict[str, Any]) -> None:
    def number(key: str, integer: bool = False) -> None:
        v = a.get(key)
        ok = isinstance(v, int) if integer else isinstance(v, (int, float))
        if v is not None and (isinstance(v, bool) or not ok or v < 0):
            raise ScheduleError(f"{where}: {key} must be a {'whole ' if integer else ''}number >= 0, got {v!r}")

    if op == "scale":
        number("replicas", integer=True)
    elif op == "sleep":
        number("seconds")
    elif op == "delay-watch":
        number("ms")
    elif op == "wait":
        number("timeout")
        number("count", integer=True)
        if a["for"] not in WAIT_FOR:
            raise ScheduleError(f"{where}: cannot wait for {a['for']!r} (can: {', '.join(WAIT_FOR)})")
    elif op == "resize":
        if not any(a.get(k) for k in ("cpu", "memory", "limit_cpu", "limit_memory")):
            raise ScheduleError(f"{where}: nothing to resize: give cpu, memory, limit_cpu and/or limit_memory")
        for k in ("cpu", "memory", "limit_cpu", "limit_memory"):
            if a.get(k) is not None:
                try:
                    quantity.parse_quantity(str(a[k]))
                except ValueError as exc:
                    raise ScheduleError(f"{where}: invalid {k} {a[k]!r}: {exc}") from None
    elif op == "delete":
        number("grace_period", integer=True)
    elif op == "exit":
        number("code", integer=True)
    elif op == "corrupt-checkpoint":
        if a.get("file", "allocated") not in CHECKPOINT_FILES:
            raise ScheduleError(f"{where}: file must be one of {', '.join(CHECKPOINT_FILES)}, got {a['file']!r}")


def parse(doc: Any, source: str = "schedule") -> Schedule:
    if not isinstance(doc, dict):
        raise ScheduleError(f"{source}: want a mapping with steps")
    unknown = set(doc) - {"name", "description", "seed", "profile", "cluster", "steps", "expect"}
    if unknown:
        raise ScheduleError(f"{source}: unknown key {', '.join(sorted(map(str, unknown)))}")
    raw_steps = doc.get("steps")
    if not isinstance(raw_steps, list):
        raise ScheduleError(f"{source}: steps must be a list")
    steps = [parse_step(i, raw) for i, raw in enumerate(raw_steps, 1)]
    cluster = doc.get("cluster") or {}
    if not isinstance(cluster, dict) or set(cluster) - CLUSTER_KEYS:
        bad = sorted(set(cluster) - CLUSTER_KEYS) if isinstance(cluster, dict) else ["(not a mapping)"]
        raise ScheduleError(f"{source}: unknown cluster setting {', '.join(map(str, bad))} "
                            f"(known: {', '.join(sorted(CLUSTER_KEYS))})")
    expect = doc.get("expect") or []
    if not isinstance(expect, list) or not all(isinstance(e, dict) for e in expect):
        raise ScheduleError(f"{source}: expect must be a list of mappings")
    for i, e in enumerate(expect, 1):
        if set(e) - EXPECT_KEYS:
            raise ScheduleError(f"{source}: expect {i}: unknown key {', '.join(sorted(set(e) - EXPECT_KEYS))} "
                                f"(known: {', '.join(sorted(EXPECT_KEYS))})")
    seed = doc.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ScheduleError(f"{source}: seed must be a whole number")
    return Schedule(steps, str(doc.get("name") or ""), str(doc.get("description") or ""), seed,
                    str(doc.get("profile") or ""), dict(cluster), list(expect))


def load(path: Path | str) -> Schedule:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ScheduleError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise ScheduleError(f"{path}:{where} not YAML: {getattr(exc, 'problem', None) or exc}") from None
    sched = parse(doc, str(path))
    config = sched.cluster.get("scheduler_config")
    if config and not Path(str(config)).is_absolute():
        sched.cluster["scheduler_config"] = str((path.parent / str(config)).resolve())
    return sched
