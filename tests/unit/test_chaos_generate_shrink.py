"""Seeded schedules (cli/chaos/generate.py) and shrinking (cli/chaos/shrink.py), without a cluster:
the shrinker is given a fake run that fails when certain steps are present."""

from __future__ import annotations

import pytest

from cli.chaos import generate, schedule, shrink
from cli.chaos.runner import RunResult
from cli.chaos.schedule import Schedule, Step


@pytest.mark.parametrize("profile", generate.PROFILES)
def test_the_same_seed_gives_the_same_schedule_and_another_seed_another(profile):
    a, b = generate.generate(7, 30, profile), generate.generate(7, 30, profile)
    assert a.dump() == b.dump()
    assert generate.generate(8, 30, profile).dump() != a.dump()
    # every generated schedule is one kplane run accepts
    again = schedule.parse(__import__("yaml").safe_load(a.dump()))
    assert [s.op for s in again.steps] == [s.op for s in a.steps]
    assert sum(s.after for s in a.steps) >= 30 and a.seed == 7 and a.profile == profile


def test_every_fault_a_schedule_starts_it_also_ends():
    for seed in range(20):
        s = generate.generate(seed, 60, "everything")
        down: dict[tuple[str, str], int] = {}
        for st in s.steps:
            if st.op in ("kill", "pause"):
                down[(st.op, st.arg("component"))] = down.get((st.op, st.arg("component")), 0) + 1
            elif st.op in ("start", "resume"):
                key = ("kill" if st.op == "start" else "pause", st.arg("component"))
                down[key] -= 1
            elif st.op == "failpoint":
                key = ("fp:" + st.arg("name"), st.arg("component"))
                down[key] = down.get(key, 0) + (-1 if st.arg("action") == "off" else 1)
        assert all(v == 0 for v in down.values()), (seed, down)


def _sched(n: int) -> Schedule:
    return Schedule([Step("kill", f"c{i}", after=1.0) for i in range(n)])


def _fake(needed: set[str], flaky_every: int = 0):
    """A run that fails (violation rule "r") when every component in ``needed`` is killed; with
    ``flaky_every`` it misses every so many failing runs (real processes are not deterministic)."""
    calls = {"n": 0}

    def run_once(s: Schedule, label: str) -> RunResult:
        calls["n"] += 1
        killed = {st.arg("component") for st in s.steps}
        fails = needed <= killed and not (flaky_every and calls["n"] % flaky_every == 0)
        return RunResult(not fails, "r at rev 1: x" if fails else "", "/tmp",
                         violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])
    return run_once


def test_shrinking_keeps_exactly_the_steps_the_failure_needs_and_drops_the_delays():
    sched = _sched(20)
    s = shrink.Shrinker(_fake({"c3", "c11", "c17"}), "violation r", tries=1, echo=lambda _: None)
    small = s.shrink(sched)
    assert [st.arg("component") for st in small.steps] == ["c3", "c11", "c17"]
    assert all(st.after == 0 for st in small.steps)
    assert shrink.confirm(_fake({"c3", "c11", "c17"}), small, "violation r") == 3


def test_a_candidate_that_fails_only_now_and_then_does_not_count():
    """A schedule that fails 2 runs of 3 is no minimal schedule: every try must fail."""
    s = shrink.Shrinker(_fake({"c5", "c6"}, flaky_every=3), "violation r", tries=3, echo=lambda _: None)
    assert not s.fails(_sched(12), "flaky")
    assert s.runs == 3  # the third run passed
    steady = shrink.Shrinker(_fake({"c5", "c6"}), "violation r", tries=3, echo=lambda _: None)
    assert steady.fails(_sched(12), "steady") and steady.runs == 3


def test_another_failure_does_not_count_as_the_one_being_shrunk():
    def other(s: Schedule, label: str) -> RunResult:
        return RunResult(False, "did not converge within 9 s: x", "/tmp")
    assert not shrink.Shrinker(other, "violation r", tries=2, echo=lambda _: None).fails(_sched(3), "x")
    assert shrink.signature(RunResult(False, "did not converge within 9 s: x", "/tmp")) == "did not converge"


def test_the_steps_on_pods_the_failure_does_not_name_go_in_one_candidate():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    steps = [Step("apply", {**pod, "metadata": {"name": n}}) for n in ("a", "b", "c")]
    steps += [Step("resize", {"pod": "b", "cpu": "1"}), Step("kill", "scheduler"), Step("evict", {"pod": "c"})]
    needed = {"a", "b"}

    def run_once(s: Schedule, label: str) -> RunResult:
        names = {st.args["metadata"]["name"] for st in s.steps if st.op == "apply"}
        fails = needed <= names and any(st.op == "kill" for st in s.steps)
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])

    first = RunResult(False, "", "/tmp", violations=[{"rule": "r", "rev": 9, "message":
                                                       "pod default/a preempted default/b while kubelet/node-1 ..."}])
    s = shrink.Shrinker(run_once, "violation r", tries=1, echo=lambda _: None, pods=shrink.named_pods(first))
    assert s.pods == {"a", "b"}
    small = s.only_named_pods(Schedule(steps))
    assert [st.describe() for st in small.steps] == ["apply pod/a", "apply pod/b", "resize pod=b cpu=1",
                                                     "kill scheduler"]
    assert s.runs == 1


def test_a_failure_that_needs_load_is_steadied_by_a_lag_in_the_view_of_the_rules_decider():
    """Found under load, a race fails now and then; led by a delay-watch on the component whose
    decisions the broken rule judges, it fails every try, and that lag is what the shrink keeps."""
    calls = {"n": 0}

    def run_once(s: Schedule, label: str) -> RunResult:
        calls["n"] += 1
        lag = next((int(st.arg("ms")) for st in s.steps if st.op == "delay-watch"
                    and st.arg("component") == "controller-manager"), 0)
        fails = any(st.arg("component") == "c2" for st in s.steps if st.op == "kill") and (
            lag >= 500 or calls["n"] % 2 == 1)
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])

    s = shrink.Shrinker(run_once, "violation r", tries=3, echo=lambda _: None,
                        deciders=("scheduler", "controller-manager"))
    small = s.shrink(_sched(6))
    assert [(st.op, st.arg("component")) for st in small.steps] == [("delay-watch", "controller-manager"),
                                                                     ("kill", "c2")]
    assert small.steps[0].arg("ms") == 500
    assert shrink.confirm(run_once, small, "violation r") == 3
    # a schedule that fails every try as found is left as it was
    steady = shrink.Shrinker(_fake({"c1"}), "violation r", tries=2, echo=lambda _: None, deciders=("scheduler",))
    assert steady.steadied(_sched(3)).steps == _sched(3).steps


def test_every_rule_names_the_components_it_judges():
    from cli.check.runner import rules
    roles = {"scheduler", "kubelet", "controller-manager", "apiserver"}
    for r in rules():
        assert r.deciders and set(r.deciders) <= roles, r.name


def test_a_race_that_needs_the_pods_filling_its_node_keeps_them_and_drops_the_rest():
    from cli.check.framework import Entry
    from tests.harness.builders import MakePod

    def placed(name, node="", nominated=""):
        pod = MakePod().name(name).obj()
        pod.spec.node_name, pod.status.nominated_node_name = node, nominated
        return Entry(1, "MODIFIED", "Pod", "default", name, pod)
    history = [placed("victim", "node-1"), placed("filler", "node-1"), placed("preemptor", nominated="node-1"),
               placed("elsewhere", "node-2"), placed("preemptor", "node-1")]
    assert shrink.neighbours(history, frozenset({"preemptor"})) == {"preemptor", "victim", "filler"}

    pod = {"apiVersion": "v1", "kind": "Pod"}
    steps = [Step("apply", {**pod, "metadata": {"name": n}}) for n in ("filler", "elsewhere", "victim", "preemptor")]

    def run_once(s: Schedule, label: str) -> RunResult:
        names = {st.args["metadata"]["name"] for st in s.steps}
        fails = {"filler", "victim", "preemptor"} <= names
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])

    s = shrink.Shrinker(run_once, "violation r", tries=1, echo=lambda _: None,
                        pods=frozenset({"preemptor", "victim"}),
                        neighbours=shrink.neighbours(history, frozenset({"preemptor", "victim"})))
    small = s.only_named_pods(Schedule(steps))
    assert [st.describe() for st in small.steps] == ["apply pod/filler", "apply pod/victim", "apply pod/preemptor"]
    assert s.runs == 2  # the named pods alone passed; with their neighbours it failed


def test_a_lag_replaces_an_earlier_lag_and_holds_past_the_last_step():
    def run_once(s: Schedule, label: str) -> RunResult:
        lags = [st for st in s.steps if st.op == "delay-watch"]
        fails = len(lags) == 1 and s.steps[-1].op == "sleep"
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])
    s = shrink.Shrinker(run_once, "violation r", tries=2, echo=lambda _: None, deciders=("kubelet",))
    lagged = s.lagged(_sched(2))
    assert lagged is not None and lagged.steps[0].describe().startswith("delay-watch")
    assert lagged.steps[-1].op == "sleep"  # the lag holds past the last step
    again = s.lagged(lagged)  # the next lag, in place of the first, not beside it
    assert again is not None and [st.op for st in again.steps] == ["delay-watch", "kill", "kill", "sleep"]
    assert again.steps[0].arg("ms") == 500
    assert shrink.confirm(run_once, lagged, "violation r", label="confirm-lagged") == 3
    # bisection keeps the hold at the end of every prefix
    assert [st.op for st in s.shortest_prefix(lagged).steps] == ["delay-watch", "sleep"]


def test_a_chaos_schedules_own_delay_watch_faults_do_not_stop_the_lag():
    def run_once(s: Schedule, label: str) -> RunResult:
        fails = s.steps[0].op == "delay-watch" and s.steps[0].arg("component") == "scheduler"
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])
    sched = Schedule([Step("kill", "c0"), Step("delay-watch", {"component": "kubelet/node-1", "ms": 300}, 1.0)])
    s = shrink.Shrinker(run_once, "violation r", tries=1, echo=lambda _: None, deciders=("scheduler",))
    assert s.lagged(sched) is not None


def test_a_cut_keeps_the_other_steps_at_their_times():
    steps = [Step("kill", f"c{i}", after=float(i)) for i in range(5)]  # at 0, 1, 3, 6, 10 s
    kept = shrink.kept_in_time(steps, {0, 3, 4})
    assert [(s.arg("component"), s.after) for s in kept] == [("c0", 0.0), ("c3", 6.0), ("c4", 4.0)]
    # a race that needs c4 to come 10 s in survives ddmin's cuts of the steps before it
    def run_once(s: Schedule, label: str) -> RunResult:
        at, when = 0.0, {}
        for st in s.steps:
            at += st.after
            when[st.arg("component")] = at
        fails = when.get("c4") == 10.0
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])
    small = shrink.Shrinker(run_once, "violation r", tries=1, echo=lambda _: None).ddmin(Schedule(steps))
    assert [(s.arg("component"), s.after) for s in small.steps] == [("c4", 10.0)]


def _pod_apply(name: str, after: float) -> Step:
    return Step("apply", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}}, after)


def test_consecutive_applies_merge_into_one_step_at_the_first_or_the_last_ones_time():
    steps = [_pod_apply("a", 1.0), _pod_apply("b", 2.0), Step("kill", "scheduler", 1.0),
             _pod_apply("c", 0.5), _pod_apply("d", 0.5), _pod_apply("e", 0.5), Step("kill", "kubelet", 2.0)]
    assert shrink.apply_runs(steps) == [range(0, 2), range(3, 6)]
    first = shrink.merged_applies(steps, shrink.apply_runs(steps), "first")
    # the manifests in order, at the first's time; the next step keeps its time (1 + 2 + 1 = 4 s)
    assert [(s.op, len(s.args) if s.op == "apply" else s.args, s.after) for s in first] == [
        ("apply", 2, 1.0), ("kill", "scheduler", 3.0), ("apply", 3, 0.5), ("kill", "kubelet", 3.0)]
    assert [m["metadata"]["name"] for m in first[2].args] == ["c", "d", "e"]
    last = shrink.merged_applies(steps, [range(3, 6)], "last")
    assert [(s.op, s.after) for s in last] == [("apply", 1.0), ("apply", 2.0), ("kill", 1.0), ("apply", 1.5),
                                               ("kill", 2.0)]


def test_the_merge_pass_keeps_a_run_apart_when_the_failure_needs_it_so():
    """A race that needs pod b created a second after a: that run stays; the other run merges."""
    steps = [_pod_apply("a", 0.0), _pod_apply("b", 1.0), Step("kill", "scheduler", 1.0),
             _pod_apply("c", 0.5), _pod_apply("d", 0.5)]

    def run_once(s: Schedule, label: str) -> RunResult:
        at, when = 0.0, {}
        for st in s.steps:
            at += st.after
            for m in (st.args if isinstance(st.args, list) else [st.args]) if st.op == "apply" else []:
                when[m["metadata"]["name"]] = at
        fails = when.get("b", 0) - when.get("a", 0) == 1.0 and {"c", "d"} <= set(when)
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])

    small = shrink.Shrinker(run_once, "violation r", tries=1, echo=lambda _: None).merge_applies(Schedule(steps))
    assert [s.op for s in small.steps] == ["apply", "apply", "kill", "apply"]
    assert [m["metadata"]["name"] for m in small.steps[3].args] == ["c", "d"]


def test_a_cut_of_the_steadying_lag_must_fail_twice_the_tries():
    """A race steadied by a lag that fails now and then without it: ddmin may not cut the lag on
    a few lucky tries (here every third run without the lag passes: 2 tries would be lucky)."""
    calls = {"bare": 0}

    def run_once(s: Schedule, label: str) -> RunResult:
        lagged = s.steps and s.steps[0].op == "delay-watch"
        needed = any(st.op == "kill" and st.arg("component") == "c1" for st in s.steps)
        fails = needed
        if needed and not lagged:
            calls["bare"] += 1
            fails = calls["bare"] % 3 != 0
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])

    steps = [Step("delay-watch", {"component": "scheduler", "ms": 200}), Step("kill", "c1", 1.0),
             Step("kill", "c2", 1.0), Step("sleep", shrink.LAG_HOLD_SECONDS)]
    s = shrink.Shrinker(run_once, "violation r", tries=2, echo=lambda _: None)
    small = s.ddmin(Schedule(steps))
    # (this fake needs no hold: cutting it fails every one of the 4 tries)
    assert [st.op for st in small.steps] == ["delay-watch", "kill"]
    assert small.steps[1].arg("component") == "c1"
    assert calls["bare"] == 3  # the one cut of the lag: 2 tries failed, the 3rd passed


def test_a_run_that_cannot_be_one_apply_merges_the_pairs_the_failure_allows():
    """Pod b must come a second after a; c and d may come with b or each other: a and b stay apart,
    b, c and d become one apply."""
    steps = [_pod_apply("a", 0.0), _pod_apply("b", 1.0), _pod_apply("c", 0.5), _pod_apply("d", 0.5)]

    def run_once(s: Schedule, label: str) -> RunResult:
        at, when = 0.0, {}
        for st in s.steps:
            at += st.after
            for m in (st.args if isinstance(st.args, list) else [st.args]):
                when[m["metadata"]["name"]] = at
        fails = when.get("b", 0) - when.get("a", 0) >= 1.0 and set(when) == {"a", "b", "c", "d"}
        return RunResult(not fails, "", "/tmp", violations=[{"rule": "r", "rev": 1, "message": "x"}] if fails else [])

    small = shrink.Shrinker(run_once, "violation r", tries=1, echo=lambda _: None).merge_applies(Schedule(steps))
    names = [[m["metadata"]["name"] for m in (st.args if isinstance(st.args, list) else [st.args])]
             for st in small.steps]
    assert names == [["a"], ["b", "c", "d"]]


def test_a_chaos_schedule_pins_the_schedulers_tie_breaks_to_its_seed():
    for profile in generate.PROFILES:
        assert generate.generate(5, 10, profile).cluster["scheduler_args"] == ["--tie-break-seed=5"]


def test_a_race_that_needs_one_placement_is_steadied_by_pinning_the_tie_breaks():
    """The race shows only when the scheduler's choice among equal nodes puts two pods together:
    unpinned it shows now and then; pinned to a seed that places them so, every time."""
    calls = {"n": 0}

    def run_once(s: Schedule, label: str) -> RunResult:
        calls["n"] += 1
        seed = next((a.split("=")[1] for a in s.cluster.get("scheduler_args", []) if a.startswith("--tie-break")), None)
        together = seed == "9" if seed is not None else calls["n"] % 3 != 0
        return RunResult(not together, "", "/tmp",
                         violations=[{"rule": "r", "rev": 1, "message": "x"}] if together else [])

    sched = Schedule(_sched(2).steps, seed=7, cluster={"scheduler_args": ["--v=2"]})
    s = shrink.Shrinker(run_once, "violation r", tries=3, echo=lambda _: None)
    pinned = list(s.pinned_all(sched))
    assert [c.cluster["scheduler_args"] for c in pinned] == [["--v=2", "--tie-break-seed=9"]]
    assert sched.cluster == {"scheduler_args": ["--v=2"]}  # the candidates are copies
    assert s.runs == 1 + 1 + 3 + 1  # seeds 7 and 8 fail at their first try, 9 every try, 10 at its first
    # a pin the schedule has is not tried again
    again = Schedule(_sched(2).steps, seed=9, cluster={"scheduler_args": ["--tie-break-seed=9"]})
    assert all(c.cluster["scheduler_args"] != ["--tie-break-seed=9"] for c in s.pinned_all(again))


def test_a_run_that_breaks_the_target_rule_after_another_reproduces_it():
    both = RunResult(False, "", "/tmp", violations=[{"rule": "other", "rev": 1, "message": "x"},
                                                    {"rule": "r", "rev": 2, "message": "y"}])
    assert shrink.signature(both) == "violation other"
    assert shrink.reproduces(both, "violation r") and shrink.reproduces(both, "violation other")
    assert not shrink.reproduces(both, "violation third")
    assert not shrink.reproduces(RunResult(False, "did not converge within 9 s: x", "/tmp"), "violation r")
    assert shrink.reproduces(RunResult(False, "did not converge within 9 s: x", "/tmp"), "did not converge")
    assert shrink.confirm(lambda s, label: both, Schedule([]), "violation r") == 3
