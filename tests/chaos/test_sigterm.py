"""Every process stops when told: SIGTERM ends it within 5 s, whatever it is doing.

A cluster of one real node (kubelet + runtime), two hollow nodes (one process), a scheduler and
an apiserver on etcd runs under a steady creation of pods. Twenty rounds in a row, each in one of
five states, SIGTERM goes to every component at once and each one's exit is timed; then they
are started again and the next round begins. The states, in turn:

- idle: nothing in flight;
- churn: 0.5 s after a burst of 150 pods was created for the hollow nodes, on top of the steady
  creation every state but idle has;
- preemption: the scheduler holds a preemption between evicting its first victim and the rest
  (a ``pause`` at ``scheduler/preemption-after-first-victim``), the kubelet is killing that victim;
- resize: the kubelet holds a resize it has allocated but not yet sent to the runtime (``pause``
  at ``kubelet/resize-after-allocate``), and the runtime holds another one inside
  UpdateContainerResources (``pause`` at ``runtime/update-container-resources``);
- etcd down: etcd was SIGKILLed; the apiserver reports it and every client retries.

A process that lets a cancellation be swallowed, or a loop that never ends, fails here with the
stack that explains it (the harness's watchdog writes it to the component's log).

The supervisor of long-running loops is checked on the same cluster: a loop that raises is
logged with its traceback and restarted (the kubelet's PLEG, failed once by a failpoint, goes on
noticing container exits), and one that keeps failing ends its process with exit status 1 and
one line saying why.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import time
from pathlib import Path

import pytest

from cli import cluster
from machinery import errors
from tests.harness.api import ensure_priority_classes, resize
from tests.harness.builders import MakePod
from tests.harness.cluster import FAST_KUBELET, cluster_fixture
from tests.harness.failpoints import failpoint, wait_paused
from tests.harness.metrics import metric
from tests.harness.node_state import crash
from tests.harness.wait import eventually, wait_running

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

ROUNDS = int(os.environ.get("KPLANE_SIGTERM_ROUNDS", "20"))
BOUND = 5.0  # seconds from SIGTERM to exit, for every process
NODE = "node-1"
COMPONENTS = ("apiserver", f"runtime/{NODE}", f"kubelet/{NODE}", "scheduler", "hollow-nodes")
STATES = ("idle", "churn", "preemption", "resize", "etcd-down")
BURST = 150  # pods created at once in the churn state

term_cluster = cluster_fixture(nodes=1, schedulers=1, hollow_nodes=2, node_cpu="4", node_memory="4Gi",
                               kubelet_args=FAST_KUBELET)


def _proc(tc, name: str) -> cluster.Process:
    tc.reload()
    return tc.process(name)


def _start(tc, *names: str) -> None:
    """Start the components (those not running) all at once; until each is healthy."""
    tc.reload()
    procs = [tc.process(n) for n in names]
    for p in procs:
        cluster.start(tc.state, p, wait=0)
    tc.state.save()
    for n, p in zip(names, procs, strict=True):
        ok, reason = cluster.wait_healthy(p, 30)
        assert ok, f"{n} did not start again: {reason}"


def _sigterm_all_and_time(tc, names) -> dict[str, float]:
    """SIGTERM every named component at once; seconds until each was gone (inf: still alive at 2 x BOUND)."""
    tc.reload()
    procs = {n: tc.process(n) for n in names}
    sent = time.monotonic()
    for n, p in procs.items():
        assert cluster.signal_process(p, signal.SIGTERM), f"{n} was not running"
    took: dict[str, float] = {}
    while len(took) < len(procs) and time.monotonic() - sent < 2 * BOUND:
        for n, p in procs.items():
            if n not in took and not cluster.alive(p.pid):
                took[n] = time.monotonic() - sent
        time.sleep(0.02)
    for n, p in procs.items():
        if n not in took:
            took[n] = float("inf")
            cluster.signal_process(p, signal.SIGKILL)
        p.pid = None
    tc.state.save()
    return took


class Churn:
    """Pods created all the time (and the oldest deleted), through every restart: errors are expected."""

    def __init__(self, api):
        self.api, self.live, self.created = api, [], 0
        self.running = asyncio.Event()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        for i in itertools.count():
            await self.running.wait()
            pod = MakePod().name(f"churn-{i}").req(cpu="1m", memory="1Mi").grace(0).obj()
            pod.spec.node_selector["kubernetes.io/hostname"] = f"hollow-node-{i % 2 + 1}"  # node-1 stays for the states
            try:
                await self.api.pods.create(pod, timeout=2)
                self.live.append(f"churn-{i}")
                self.created += 1
                if len(self.live) > 20:
                    await self.api.pods.delete(self.live.pop(0), "default", grace_period_seconds=0, timeout=2)
            except (errors.ApiError, asyncio.TimeoutError):
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


@pytest.fixture
async def api(term_cluster):
    c = term_cluster.client(timeout=5)
    await ensure_priority_classes(c, low=100, high=1000)
    try:
        yield c
    finally:
        await c.close()


async def _gone(api, *names: str) -> None:
    for n in names:
        try:
            await api.pods.delete(n, "default", grace_period_seconds=0)
        except errors.NotFound:
            pass


async def _enter(tc, api, state: str, r: int) -> list[str]:
    """Bring the cluster into ``state`` for round ``r``; the pods to remove afterwards."""
    if state == "preemption":
        lows = [f"low-{r}-{i}" for i in range(4)]  # 3.6 of the node's 4 cpu; the preemptor needs 3 of them gone
        for n in lows:
            await api.pods.create(MakePod().name(n).req(cpu="900m", memory="32Mi").priority_class("low").node(NODE)
                                  .grace(5).obj())
        await wait_running(api, *lows)
        failpoint(tc, "scheduler", "scheduler/preemption-after-first-victim", "1*pause")
        high = MakePod().name(f"high-{r}").req(cpu="2500m", memory="32Mi").priority_class("high").grace(0).obj()
        high.spec.node_selector["kubernetes.io/hostname"] = NODE
        await api.pods.create(high)
        await wait_paused(tc, "scheduler", "scheduler/preemption-after-first-victim")
        return [*lows, f"high-{r}"]
    if state == "resize":
        names = [f"rs-{r}-a", f"rs-{r}-b"]
        for n in names:
            await api.pods.create(MakePod().name(n).req(cpu="100m", memory="32Mi").node(NODE).grace(0).obj())
        await wait_running(api, *names)
        failpoint(tc, f"kubelet/{NODE}", "kubelet/resize-after-allocate", "1*pause")
        await resize(api, names[0], cpu="200m")
        await wait_paused(tc, f"kubelet/{NODE}", "kubelet/resize-after-allocate")
        failpoint(tc, f"kubelet/{NODE}", "kubelet/resize-after-allocate", "off")  # let the first go on
        failpoint(tc, f"runtime/{NODE}", "runtime/update-container-resources", "pause")
        await resize(api, names[1], cpu="300m")
        await wait_paused(tc, f"runtime/{NODE}", "runtime/update-container-resources")
        return names
    if state == "churn":
        # The hollow nodes' worst moment, as seen on a loaded cluster: 0.5 s after a burst of creates.
        burst = [f"burst-{r}-{i}" for i in range(BURST)]
        pods = [MakePod().name(n).req(cpu="1m", memory="1Mi").grace(0).obj() for n in burst]
        for i, pod in enumerate(pods):
            pod.spec.node_selector["kubernetes.io/hostname"] = f"hollow-node-{i % 2 + 1}"
        await asyncio.gather(*(api.pods.create(p) for p in pods))
        await asyncio.sleep(0.5)
        return burst
    if state == "etcd-down":
        proc = _proc(tc, "etcd")
        cluster.kill(proc)
        tc.state.save()

        def apiserver_says_so() -> bool:
            return "etcd" in cluster.health(_proc(tc, "apiserver"))[1]
        await eventually(apiserver_says_so, timeout=10, what="the apiserver reporting etcd down")
        return []
    return []


@pytest.mark.timeout(900)
async def test_every_process_exits_within_5s_of_sigterm_in_every_state_20_times(term_cluster, api):
    tc = term_cluster
    churn = Churn(api)
    worst: dict[tuple[str, str], float] = {}
    try:
        for r in range(ROUNDS):
            state = STATES[r % len(STATES)]
            if state == "idle":
                churn.running.clear()
                await asyncio.sleep(0.5)
            else:
                churn.running.set()
                await asyncio.sleep(0.5)  # pods in flight everywhere
            cleanup = await _enter(tc, api, state, r)
            took = _sigterm_all_and_time(tc, COMPONENTS)
            for n, t in took.items():
                worst[(n, state)] = max(worst.get((n, state), 0.0), t)
            slow = {n: round(t, 2) for n, t in took.items() if t > BOUND}
            assert not slow, f"round {r} ({state}): exited later than {BOUND} s after SIGTERM: {slow}"
            if state == "etcd-down":
                _start(tc, "etcd")
            _start(tc, *COMPONENTS)
            await _gone(api, *cleanup)
        print("slowest exit per component and state (s):",
              {f"{n}@{s}": round(t, 2) for (n, s), t in sorted(worst.items())})
        assert churn.created > ROUNDS  # pods were being created throughout
    finally:
        await churn.close()
        try:
            await _gone(api, *churn.live)
        except errors.ApiError:
            pass  # the test failed with a component down: its own error is the one to see


async def test_a_loop_that_fails_is_restarted_and_one_that_keeps_failing_ends_its_process(term_cluster, api):
    tc = term_cluster
    comp = f"kubelet/{NODE}"
    _start(tc, *COMPONENTS)  # a no-op unless the test before left something down
    await api.pods.create(MakePod().name("crashy").req(cpu="100m", memory="32Mi").node(NODE).grace(0).obj())
    pod = (await wait_running(api, "crashy"))["crashy"]
    restarts = pod.status.container_statuses[0].restart_count

    # Failed once: logged with its traceback, restarted, and the PLEG still notices an exit.
    failpoint(tc, comp, "kubelet/pleg-relist", "1*error")
    log = Path(_proc(tc, comp).log)
    await eventually(lambda: '"task_restarted"' in log.read_text(), timeout=10, what="the PLEG loop restarted")
    text = log.read_text()
    assert '"task_failed"' in text and "kubelet/pleg-relist injected an error" in text and "Traceback" in text
    await crash(tc, NODE, pod)

    async def restarted() -> bool:
        p = await api.pods.get("crashy")
        return p.status.container_statuses[0].restart_count > restarts
    await eventually(restarted, timeout=15, what="the crashed container restarted: the PLEG saw it exit")
    assert metric(tc, comp, "kplane_kubelet_pleg_events_total") >= 1

    # Failing for good: after five failures in a row the kubelet ends, exit status 1, one line.
    proc = _proc(tc, comp)
    failpoint(tc, comp, "kubelet/pleg-relist", "error")
    await eventually(lambda: not cluster.alive(proc.pid), timeout=15, what="the kubelet ending")
    lines = log.read_text().splitlines()
    assert (f"kubelet: {NODE}/pleg failed 5 times in a row, last with FailpointError: "
            "failpoint kubelet/pleg-relist injected an error") in lines, lines[-20:]
    assert '"exit_code": 1' in lines[-1] or any('"exit_code": 1' in line for line in lines[-5:]), lines[-5:]
    proc.pid = None
    tc.state.save()
    _start(tc, comp)  # started again (failpoints are not armed at start): it recovers its pods
    await wait_running(api, "crashy")
    await _gone(api, "crashy")
