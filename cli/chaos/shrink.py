"""Shrinking a failing schedule to a minimal one that still fails the same way.

Real processes are not deterministic, so a candidate counts as failing only when every one of
its ``tries`` runs fails with the same *signature* — the rule that was broken (first, or among
others: ``reproduces``), or "did not converge", or the step that timed out; a different failure,
or a pass, does not count (shrinking must not wander to another bug, nor to a schedule that fails
now and then: the minimal schedule is one that fails every time). Each run gets a fresh cluster
of the schedule's ``cluster:`` settings.

The passes, each until it changes nothing (QuickCheck's and Hypothesis' order: fewer steps first,
then simpler ones):

0. the schedule as found must fail every try; when it does not, load supplied a lag by chance, and
   the shrinker states it: the schedule led by a delay-watch on a component whose decisions the
   broken rule judges (its ``deciders``), 200, 500 or 1000 ms an event, held 5 s past the last step
   (a ``sleep``: the heal would end it with the steps), the first that fails every try;
1. the shortest failing prefix, by bisection (a violation happens by some step; what follows it
   only adds noise);
2. every ``after`` delay set to 0 at once, else halved, when the failure holds so (every later
   run is then quick); then, once, every step on a pod the failure's messages do not name left out,
   else every step on a pod that never shared a node with those (the run's history says);
3. each run of consecutive ``apply`` steps made one step that applies their manifests in order, at
   the time of the run's first step, else of its last (``merged_applies``): every run at once, else
   one run at a time, from the last (a cluster filled by twenty creations is one ``apply -f``); a
   run that cannot be one, two neighbouring applies at a time, from its end;
4. delta debugging (Zeller's ddmin) over the steps: remove chunks of halves, quarters, ... down to
   single steps, each cut keeping the other steps at their times (``kept_in_time``), then pass 3
   again on the runs the cuts made; a cut of pass 0's lag or hold must fail twice the tries;
5. each delay left set to 0, then halved, where the failure holds.

The result is confirmed with ``confirm`` runs and written with how many of them failed. When not
every confirming run failed (a candidate that failed every try can still fail only most times),
the minimal schedule is tried with the scheduler's tie-breaks pinned to each of a few seeds
(``pinned_all``: which of two equal nodes a pod lands on can decide a race), then led by each lag
of pass 0, each candidate that fails every try confirmed again, until one fails every confirming
run; the steadiest is kept. (``kplane chaos`` pins the tie-breaks to its seed from the start.)
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from cli.chaos.runner import RunResult
from cli.chaos.schedule import Schedule, Step
from cli.check.framework import Entry

# How late a steadying delay-watch makes each watch event, tried in order (pass 0), and how long
# it holds after the last step (the run heals every fault once its steps are done: a schedule whose
# steps take no time would lose its lag before the race it steadies).
LAGS_MS = (200, 500, 1000)
LAG_HOLD_SECONDS = 5.0

# The scheduler's flag that pins each pod's tie-breaks (scheduler/framework/tiebreaks.py), and how
# many seeds the steadying tries when confirming runs disagree (the schedule's seed first).
TIE_BREAK_FLAG = "--tie-break-seed"
PIN_SEEDS = 4

# Runs a candidate once; ``label`` names its directory.
RunOnce = Callable[[Schedule, str], RunResult]


def _pod_of(step: Step) -> str | None:
    """The pod a step acts on, None for a step on no single pod."""
    if step.op == "apply" and isinstance(step.args, dict) and step.args.get("kind") == "Pod":
        return str(step.args.get("metadata", {}).get("name", ""))
    if step.op == "delete" and str(step.arg("kind", "")).lower() in ("pod", "pods", "po"):
        return str(step.arg("name"))
    if step.op in ("resize", "evict"):
        return str(step.arg("pod"))
    return None


def named_pods(result: RunResult) -> frozenset[str]:
    """The pods a failure's violation messages name (``default/pod-3`` -> ``pod-3``)."""
    return frozenset(m.split("/", 1)[1] for v in result.violations
                     for m in re.findall(r"[a-z0-9-]+/[a-z0-9][a-z0-9.-]*", str(v.get("message", "")))
                     if not m.startswith(("kubelet/", "runtime/")))


def kept_in_time(steps: list[Step], keep: set[int]) -> list[Step]:
    """The steps at the indices ``keep``, each at the time it had: a left-out step's delay is
    added to the next kept one, so what remains happens when it did (a race that needs its
    timing survives a cut; what a cut removes is the steps, not the time between the others)."""
    out: list[Step] = []
    carried = 0.0
    for i, s in enumerate(steps):
        if i in keep:
            out.append(Step(s.op, s.args, round(s.after + carried, 3)) if carried else s)
            carried = 0.0
        else:
            carried += s.after
    return out


def apply_runs(steps: list[Step]) -> list[range]:
    """The maximal runs of two or more consecutive ``apply`` steps, as index ranges."""
    runs: list[range] = []
    start = 0
    for i in range(len(steps) + 1):
        if i == len(steps) or steps[i].op != "apply":
            if i - start >= 2:
                runs.append(range(start, i))
            start = i + 1
    return runs


def merged_applies(steps: list[Step], runs: Iterable[range], at: str) -> list[Step]:
    """``steps`` with each of ``runs`` (consecutive ``apply`` steps) made one ``apply`` of all
    their manifests in order, at the time of the run's first step (``at="first"``) or its last
    (``"last"``); the step after a run keeps its time either way."""
    out: list[Step] = []
    starts = {r.start: r for r in runs}
    i = 0
    while i < len(steps):
        run = starts.get(i)
        if run is None:
            out.append(steps[i])
            i += 1
            continue
        group = steps[run.start:run.stop]
        manifests = [m for s in group for m in (s.args if isinstance(s.args, list) else [s.args])]
        delays = [s.after for s in group]
        first = delays[0] if at == "first" else round(sum(delays), 3)
        out.append(Step("apply", manifests, first))
        rest = round(sum(delays) - first, 3)
        if rest and run.stop < len(steps):
            nxt = steps[run.stop]
            steps = [*steps[:run.stop], Step(nxt.op, nxt.args, round(nxt.after + rest, 3)), *steps[run.stop + 1:]]
        i = run.stop
    return out


def _is_hold(steps: list[Step]) -> bool:
    """``steps`` is one step, the sleep that holds a steadying lag (pass 0)."""
    return len(steps) == 1 and steps[0].op == "sleep" and float(steps[0].arg("seconds")) == LAG_HOLD_SECONDS


def _without_lag(steps: list[Step]) -> list[Step]:
    """The steps without a steadying lag pass 0 put there: its leading delay-watch, its hold."""
    out = list(steps)
    if out and out[0].op == "delay-watch" and not out[0].after:
        out = out[1:]
    if _is_hold(out[-1:]):
        out = out[:-1]
    return out


def _lag_parts(steps: list[Step]) -> set[str]:
    """Which parts of a steadying lag (pass 0) ``steps`` have: its leading delay-watch, its hold."""
    parts = set()
    if steps and steps[0].op == "delay-watch" and not steps[0].after:
        parts.add("lag")
    if _is_hold(steps[-1:]):
        parts.add("hold")
    return parts


def neighbours(entries: Iterable[Entry], pods: frozenset[str]) -> frozenset[str]:
    """The pods of a run's history that were ever bound or nominated to a node one of ``pods`` was
    bound or nominated to (``pods`` included): a race on a node needs the pods that filled it."""
    places: dict[str, set[str]] = {}
    for e in entries:
        pod = e.pod
        if pod is not None:
            where = (pod.spec.node_name, pod.status.nominated_node_name)
            places.setdefault(e.name, set()).update(n for n in where if n)
    nodes = set().union(*(places.get(p, set()) for p in pods))
    return pods | frozenset(name for name, on in places.items() if on & nodes)


def signature(result: RunResult) -> str:
    """What kind of failure a run had, for "fails the same way"."""
    if result.ok:
        return ""
    if result.violations:
        return f"violation {result.violations[0]['rule']}"
    if result.reason.startswith("did not converge"):
        return "did not converge"
    if result.failed_step:
        return "a wait timed out"
    return "expectation unmet" if result.unmet else result.reason.split(":", 1)[0]


def reproduces(result: RunResult, target: str) -> bool:
    """Whether a run failed the way ``target`` says: with that signature, or, for a broken rule,
    with that rule among its violations (a race may break another rule first in some runs: with
    a check off, what the check stops can show in more than one rule)."""
    if signature(result) == target:
        return True
    rule = target.removeprefix("violation ")
    return rule != target and any(v.get("rule") == rule for v in result.violations)


@dataclass
class Shrinker:
    run_once: RunOnce
    target: str  # the signature to keep
    tries: int = 2
    echo: Callable[[str], None] = print
    runs: int = 0
    pods: frozenset[str] = frozenset()  # the pods the failure names (namespace dropped)
    neighbours: frozenset[str] = frozenset()  # those and the pods that shared a node with them
    deciders: tuple[str, ...] = ()  # the components the broken rule judges (check.Rule.deciders)

    def fails(self, sched: Schedule, what: str, tries: int = 0) -> bool:
        """Whether every one of ``tries`` runs (the shrinker's own when 0) fails the same way."""
        tries = tries or self.tries
        for i in range(tries):
            self.runs += 1
            result = self.run_once(sched, f"shrink-{self.runs:03d}")
            got = signature(result)
            if not reproduces(result, self.target):
                self.echo(f"  {what}: {len(sched.steps)} steps: try {i + 1} " + (f"failed otherwise ({got})" if got
                                                                                  else "passed"))
                return False
        self.echo(f"  {what}: {len(sched.steps)} steps fail ({self.target}, {tries} of {tries})")
        return True

    def steadied(self, sched: Schedule) -> Schedule:
        """The schedule as found when it fails every try; else the first lagged one that does (see
        the module's pass 0); else as found (the passes after it will then keep nearly all of it)."""
        if self.fails(sched, "as found"):
            return sched
        return self.lagged(sched) or sched

    def lagged(self, sched: Schedule) -> Schedule | None:
        """The schedule led by the first lag in a decider's view with which it fails every try;
        None when no lag does."""
        return next(self.lagged_all(sched), None)

    def lagged_all(self, sched: Schedule) -> Iterator[Schedule]:
        """Each lag in a decider's view (``LAGS_MS`` a watch event), shortest first, leading the
        schedule and held past its last step, with which it fails every try. A lag this pass put
        there before (and its hold) is taken off first; the delay-watch faults a chaos schedule has
        further on do not count."""
        bare = _without_lag(sched.steps)
        for component in self.deciders:
            for ms in LAGS_MS:
                steps = [Step("delay-watch", {"component": component, "ms": ms}, 0.0), *bare,
                         Step("sleep", LAG_HOLD_SECONDS)]
                if steps != list(sched.steps) and self.fails(sched.replace_steps(steps),
                                                             f"with {component}'s watch {ms} ms late"):
                    yield sched.replace_steps(steps)

    def pinned_all(self, sched: Schedule) -> Iterator[Schedule]:
        """The schedule with the scheduler's tie-breaks pinned (``--tie-break-seed`` in its
        ``scheduler_args``), for each of ``PIN_SEEDS`` seeds from the schedule's own on, other than
        a pin it has, with which it fails every try. A race that needs two pods on one node shows
        only when the scheduler's random choice among equal nodes puts them there; pinned, the
        choice is the same in every run."""
        args = [str(a) for a in sched.cluster.get("scheduler_args", [])]
        bare = [a for a in args if not a.startswith(TIE_BREAK_FLAG + "=")]
        first = sched.seed or 0
        for seed in range(first, first + PIN_SEEDS):
            pinned = [*bare, f"{TIE_BREAK_FLAG}={seed}"]
            if pinned == args:
                continue
            candidate = sched.replace_steps(list(sched.steps))
            candidate.cluster["scheduler_args"] = pinned
            if self.fails(candidate, f"with the scheduler's tie-breaks pinned to seed {seed}"):
                yield candidate

    def only_named_pods(self, sched: Schedule) -> Schedule:
        """At most two candidates: without the steps on pods the failure does not name (``pods``,
        from its violation messages), else without those on pods that never shared a node with them
        (``neighbours``); the faults and the steps on other kinds stay."""
        tried: set[int] = set()
        for pods, what in ((self.pods, "only the pods the failure names"),
                           (self.pods | self.neighbours, "only those pods and their neighbours")):
            kept = kept_in_time(sched.steps, {i for i, s in enumerate(sched.steps)
                                              if (_pod_of(s) or "") in pods or _pod_of(s) is None})
            if pods and len(kept) < len(sched.steps) and len(kept) not in tried:
                tried.add(len(kept))
                if self.fails(sched.replace_steps(kept), what):
                    return sched.replace_steps(kept)
        return sched

    def shortest_prefix(self, sched: Schedule) -> Schedule:
        """The least prefix that fails; a lag's hold (pass 0's last step) ends every prefix."""
        steps = list(sched.steps)
        hold = [steps.pop()] if _is_hold(steps[-1:]) and len(steps) > 1 else []
        lo, hi = 1, len(steps)  # the whole schedule fails; find the least n whose prefix does
        while lo < hi:
            mid = (lo + hi) // 2
            if self.fails(sched.replace_steps(steps[:mid] + hold), f"prefix of {mid}"):
                hi = mid
            else:
                lo = mid + 1
        return sched.replace_steps(steps[:hi] + hold)

    def merge_applies(self, sched: Schedule) -> Schedule:
        """Pass 3: every run of consecutive applies made one step, at its first step's time, else
        its last's; else each run so, from the last run back; else, within it, each two
        neighbouring applies (``_merge_pairs``)."""
        runs = apply_runs(list(sched.steps))
        if not runs:
            return sched
        for at in ("first", "last"):
            merged = sched.replace_steps(merged_applies(list(sched.steps), runs, at))
            if self.fails(merged, f"each run of applies as one, at its {at} step's time"):
                return merged
        for run in reversed(runs):  # from the end: a merge moves no earlier step's index
            # (with one run, "every run at once" above already tried it whole)
            one = self._merge_one(sched, run) if len(runs) > 1 else None
            sched = one if one is not None else self._merge_pairs(sched, run)
        return sched

    def _merge_one(self, sched: Schedule, run: range) -> Schedule | None:
        """``run`` made one apply, at its first step's time, else its last's; None when neither
        fails."""
        for at in ("first", "last"):
            merged = sched.replace_steps(merged_applies(list(sched.steps), [run], at))
            if self.fails(merged, f"steps {run.start + 1}-{run.stop} as one apply, at its {at}"):
                return merged
        return None

    def _merge_pairs(self, sched: Schedule, run: range) -> Schedule:
        """Within a run that cannot be one apply, each two neighbouring applies made one, from the
        run's end: at the later one's time, else the earlier one's (some of the creations a race
        needs apart, the others not)."""
        for j in range(run.stop - 1, run.start, -1):
            for at in ("last", "first"):
                merged = sched.replace_steps(merged_applies(list(sched.steps), [range(j - 1, j + 1)], at))
                if self.fails(merged, f"steps {j}-{j + 1} as one apply, at the {at}'s time"):
                    sched = merged
                    break
        return sched

    def ddmin(self, sched: Schedule) -> Schedule:
        steps = list(sched.steps)
        n = 2
        while len(steps) >= 2:
            chunk = max(1, len(steps) // n)
            removed = False
            for start in range(0, len(steps), chunk):
                candidate = kept_in_time(steps, set(range(start)) | set(range(start + chunk, len(steps))))
                # A cut of the steadying lag (pass 0) must fail twice as many tries: the lag made
                # the race steady, and a few lucky tries without it are no proof it is not needed.
                unsteady = bool(_lag_parts(steps) - _lag_parts(candidate))
                if candidate and self.fails(sched.replace_steps(candidate),
                                            f"without steps {start + 1}-{min(start + chunk, len(steps))}",
                                            self.tries * (2 if unsteady else 1)):
                    steps, removed = candidate, True
                    n = max(n - 1, 2)
                    break
            if not removed:
                if chunk == 1:
                    break
                n = min(n * 2, len(steps))
        return sched.replace_steps(steps)

    def shorter_delays(self, sched: Schedule) -> Schedule:
        steps = list(sched.steps)
        for i, s in enumerate(steps):
            for shorter in (0.0, round(s.after / 2, 2)):
                if s.after and shorter < s.after:
                    candidate = steps[:i] + [Step(s.op, s.args, shorter)] + steps[i + 1:]
                    if self.fails(sched.replace_steps(candidate), f"step {i + 1} after {shorter:g} s"):
                        steps = candidate
                        break
        return sched.replace_steps(steps)

    def shrink(self, sched: Schedule) -> Schedule:
        self.echo(f"shrinking {len(sched.steps)} steps, keeping: {self.target}")
        sched = self.steadied(sched)
        sched = self.shortest_prefix(sched)
        self.echo(f"shortest failing prefix: {len(sched.steps)} steps")
        for factor in (0.0, 0.5):
            hurried = sched.replace_steps([Step(s.op, s.args, round(s.after * factor, 2)) for s in sched.steps])
            if any(s.after for s in sched.steps) and self.fails(hurried, f"every delay x{factor:g}"):
                sched = hurried
                break
        if self.pods:
            sched = self.only_named_pods(sched)
        sched = self.merge_applies(sched)
        sched = self.merge_applies(self.ddmin(sched))
        self.echo(f"after removing steps: {len(sched.steps)} steps")
        return self.shorter_delays(sched)


def confirm(run_once: RunOnce, sched: Schedule, target: str, runs: int = 3, label: str = "confirm") -> int:
    """How many of ``runs`` runs of ``sched`` fail with ``target`` (run directories ``label-N``)."""
    return sum(reproduces(run_once(sched, f"{label}-{i + 1}"), target) for i in range(runs))
