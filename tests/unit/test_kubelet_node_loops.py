"""The kubelet's node status and lease loops wait as Kubernetes' do (wait.JitterUntil with 0.04),
after a first wait that spreads nodes started together over one period (kubelet/node.py)."""

from __future__ import annotations

import random

from kubelet.node import JITTER_FACTOR, loop_waits


def test_node_loops_start_anywhere_in_one_period_then_wait_it_plus_up_to_four_percent():
    """Kubernetes runs the kubelet's node status and lease loops with wait.JitterUntil(f, period,
    0.04, sliding=true); the first wait, a random part of one period, spreads nodes started together."""
    rng = random.Random(7)
    firsts = []
    for _ in range(200):
        waits = loop_waits(10.0, rng)
        firsts.append(next(waits))
        later = [next(waits) for _ in range(20)]
        assert all(10.0 <= w <= 10.0 * (1 + JITTER_FACTOR) for w in later)
    assert all(0.0 <= f < 10.0 for f in firsts)
    # 200 nodes spread over the whole interval, none of its tenths left empty.
    assert {int(f) for f in firsts} == set(range(10))
