"""Where the scheduler's random choices come from: which of the best-scored nodes a pod goes to
(selectHost's reservoir sampling) and where preemption's dry runs start.

kube-scheduler draws them from one unseeded source, and so does kplane by default. With
``--tie-break-seed`` (kplane's own flag, for replaying chaos schedules) each pod draws from a
source seeded by the seed and the pod's namespace and name, made afresh for each draw sequence:
a pod's choice among equal nodes then depends on the seed, the pod and the scores, not on the
run or on how many cycles other pods had before it. A race that needs two pods on one node
shows in every run of its schedule, or in none.
"""

from __future__ import annotations

import random

from machinery.api import core_pb2


class TieBreaks:
    """The random source for one pod's choices (``for_pod``)."""

    def __init__(self, seed: str = ""):
        self.seed = seed
        self._shared = random.Random()

    def for_pod(self, pod: core_pb2.Pod) -> random.Random:
        """Unseeded: the scheduler's one shared source. Seeded: a source of the seed and the pod's
        key, the same sequence on every call for that pod."""
        if not self.seed:
            return self._shared
        return random.Random(f"{self.seed}/{pod.metadata.namespace}/{pod.metadata.name}")
