"""Feature gates (``--feature-gates=A=true,B=false``) with the sources' defaults (docs/sources.md).

Each process parses the flag once at start; code asks ``gates.enabled("SchedulerPreQueueingHints")``.
The state is exported as ``kubernetes_feature_enabled{name,stage}`` as Kubernetes does.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import Gauge


@dataclass(frozen=True)
class Gate:
    default: bool
    stage: str  # ALPHA, BETA, GA


KNOWN_GATES: dict[str, Gate] = {
    # KEP-1287, GA in v1.35.
    "InPlacePodVerticalScaling": Gate(True, "GA"),
    # Restartable init containers (sidecars), GA in v1.33.
    "SidecarContainers": Gate(True, "GA"),
    # Scheduling gates, GA in v1.30.
    "PodSchedulingReadiness": Gate(True, "GA"),
    # QueueingHints, GA in v1.34.
    "SchedulerQueueingHints": Gate(True, "GA"),
    # KEP-6132 PreQueueingHint, beta (default on).
    "SchedulerPreQueueingHints": Gate(True, "BETA"),
    # KEP-4832 asynchronous preemption: victims are evicted outside the scheduling cycle, beta in v1.33.
    "SchedulerAsyncPreemption": Gate(True, "BETA"),
    # The scheduler's API calls (pod status after a failed attempt) off the scheduling cycle, beta in v1.34.
    "SchedulerAsyncAPICalls": Gate(True, "BETA"),
    # KEP-5836 scheduler preemption for in-place pod resize, alpha (default off).
    "SchedulerPreemptionForPodResize": Gate(False, "ALPHA"),
    # Structured DRA, GA in v1.34.
    "DynamicResourceAllocation": Gate(True, "GA"),
    # Pod-level resources (spec.resources), beta in v1.34.
    "PodLevelResources": Gate(True, "BETA"),
}

# Other names of a gate, accepted by --feature-gates: the same feature under the name upstream
# Kubernetes shipped it with (1.37 alpha) as well as the name KEP-5836 gives it.
ALIASES: dict[str, str] = {
    "InPlacePodVerticalScalingSchedulerPreemption": "SchedulerPreemptionForPodResize",
}

_ENABLED = Gauge("kubernetes_feature_enabled", "This metric records the data about the stage and enablement "
                 "of a k8s feature.", ["name", "stage"])


class FeatureGateError(ValueError):
    """An unknown gate or a malformed --feature-gates value."""


class FeatureGates:
    def __init__(self, overrides: dict[str, bool] | None = None):
        self._state = {name: gate.default for name, gate in KNOWN_GATES.items()}
        given: dict[str, tuple[str, bool]] = {}  # canonical name -> (name used, value)
        for name, value in (overrides or {}).items():
            canonical = ALIASES.get(name, name)
            if canonical not in KNOWN_GATES:
                raise FeatureGateError(f"unrecognized feature gate: {name}")
            earlier = given.get(canonical)
            if earlier is not None and earlier[1] != value:
                raise FeatureGateError(f"{earlier[0]}={str(earlier[1]).lower()} and {name}={str(value).lower()} "
                                       f"set the same gate to different values")
            given[canonical] = (name, value)
            self._state[canonical] = value

    @classmethod
    def parse(cls, text: str | None) -> "FeatureGates":
        """Parse ``A=true,B=false`` (Kubernetes' --feature-gates syntax)."""
        overrides: dict[str, bool] = {}
        for item in (text or "").split(","):
            item = item.strip()
            if not item:
                continue
            name, eq, value = item.partition("=")
            if not eq or value.strip().lower() not in ("true", "false"):
                raise FeatureGateError(f"invalid value of {item!r}: must be NAME=true or NAME=false")
            overrides[name.strip()] = value.strip().lower() == "true"
        return cls(overrides)

    def enabled(self, name: str) -> bool:
        try:
            return self._state[ALIASES.get(name, name)]
        except KeyError:
            raise FeatureGateError(f"unrecognized feature gate: {name}") from None

    def export(self) -> None:
        for name, on in self._state.items():
            _ENABLED.labels(name=name, stage=KNOWN_GATES[name].stage).set(1 if on else 0)

    def __str__(self) -> str:
        return ",".join(f"{n}={'true' if v else 'false'}" for n, v in sorted(self._state.items()))
