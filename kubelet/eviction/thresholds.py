"""Eviction thresholds: the kubelet's ``--eviction-*`` flags, parsed and checked as Kubernetes does.

    cfg = parse_config(hard="memory.available<200Mi", soft="memory.available<10%",
                       soft_grace_period="memory.available=1m30s", minimum_reclaim="memory.available=50Mi")

- ``parse_config``: the flags' syntax (Kubernetes' ``ParseThresholdConfig``) and the default;
- ``EvictionConfig``, ``Threshold``, ``ThresholdValue``: what they parse into;
- ``SIMULATED_SIGNALS``: the signals kplane simulates, and what becomes of the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from machinery import timeutil
from machinery.quantity import BINARY_SI, Quantity, QuantityError, parse_quantity

MEMORY_AVAILABLE = "memory.available"
ALLOCATABLE_MEMORY_AVAILABLE = "allocatableMemory.available"
NODEFS_AVAILABLE = "nodefs.available"
NODEFS_INODES_FREE = "nodefs.inodesFree"
IMAGEFS_AVAILABLE = "imagefs.available"
IMAGEFS_INODES_FREE = "imagefs.inodesFree"
CONTAINERFS_AVAILABLE = "containerfs.available"
CONTAINERFS_INODES_FREE = "containerfs.inodesFree"
PID_AVAILABLE = "pid.available"

# Every signal Kubernetes knows, with the resource it reclaims (its signalToResource table).
SIGNAL_RESOURCES: dict[str, str] = {
    MEMORY_AVAILABLE: "memory",
    ALLOCATABLE_MEMORY_AVAILABLE: "memory",
    NODEFS_AVAILABLE: "ephemeral-storage",
    NODEFS_INODES_FREE: "inodes",
    IMAGEFS_AVAILABLE: "ephemeral-storage",
    IMAGEFS_INODES_FREE: "inodes",
    CONTAINERFS_AVAILABLE: "ephemeral-storage",
    CONTAINERFS_INODES_FREE: "inodes",
    PID_AVAILABLE: "pids",
}
# Signals: all of Kubernetes' are recognised; kplane simulates only memory.available. Thresholds on
# the others are accepted and ignored, each with a warning in EvictionConfig.ignored (a real
# kubelet's flags work unchanged); unknown signals are errors.
SIMULATED_SIGNALS = frozenset({MEMORY_AVAILABLE})

OP_LESS_THAN = "LessThan"
# The --eviction-hard default: Kubernetes' Linux default; its filesystem defaults are left out, as
# kplane does not simulate filesystems.
DEFAULT_HARD = f"{MEMORY_AVAILABLE}<100Mi"
DEFAULT_PRESSURE_TRANSITION_PERIOD = 300.0
DEFAULT_MONITORING_INTERVAL = 10.0


class ThresholdError(ValueError):
    """The eviction flags are invalid; the message says which statement and why."""


@dataclass(frozen=True)
class ThresholdValue:
    """An amount: an exact quantity, or a fraction of the signal's capacity."""

    quantity: Quantity | None = None
    percentage: Fraction | None = None  # 0..1

    def bytes_of(self, capacity: int) -> int:
        """The amount for a signal whose capacity is ``capacity`` (percentages round down)."""
        if self.quantity is not None:
            return self.quantity.value()
        return int((self.percentage or Fraction(0)) * capacity)

    def quantity_of(self, capacity: int) -> Quantity:
        """As Kubernetes' GetThresholdQuantity: the given quantity, or the percentage as bytes."""
        if self.quantity is not None:
            return self.quantity
        return Quantity.from_int(self.bytes_of(capacity), BINARY_SI)

    def __str__(self) -> str:
        if self.quantity is not None:
            return str(self.quantity)
        return f"{_percent_text(self.percentage or Fraction(0))}%"


@dataclass(frozen=True)
class Threshold:
    """``signal < value``, held for ``grace_period`` seconds (0: a hard threshold)."""

    signal: str
    value: ThresholdValue
    operator: str = OP_LESS_THAN
    grace_period: float = 0.0
    min_reclaim: ThresholdValue | None = None

    @property
    def hard(self) -> bool:
        """Kubernetes' isHardEvictionThreshold: no grace period."""
        return self.grace_period == 0

    @property
    def resource(self) -> str:
        return SIGNAL_RESOURCES[self.signal]

    def __str__(self) -> str:
        text = f"{self.signal}<{self.value}"
        if not self.hard:
            text += f" for {self.grace_period:g}s"
        if self.min_reclaim is not None:
            text += f" (min reclaim {self.min_reclaim})"
        return text


def _default_thresholds() -> tuple[Threshold, ...]:
    return tuple(_parse_statements(DEFAULT_HARD, "--eviction-hard", [])[0])


@dataclass(frozen=True)
class EvictionConfig:
    thresholds: tuple[Threshold, ...] = field(default_factory=_default_thresholds)
    max_pod_grace_period: int = 0
    pressure_transition_period: float = DEFAULT_PRESSURE_TRANSITION_PERIOD
    monitoring_interval: float = DEFAULT_MONITORING_INTERVAL
    ignored: tuple[str, ...] = ()  # statements on signals kplane does not simulate


def parse_config(hard: str | None = None, soft: str = "", soft_grace_period: str = "", minimum_reclaim: str = "",
                 max_pod_grace_period: int = 0, pressure_transition_period: str = "5m",
                 monitoring_interval: float = DEFAULT_MONITORING_INTERVAL) -> EvictionConfig:
    """The eviction configuration from the flags' texts; ThresholdError on bad input.

    Syntax (Kubernetes' ``ParseThresholdConfig`` and its flag types):

    - ``--eviction-hard`` / ``--eviction-soft``: comma-separated ``<signal><<quantity>`` statements,
      the quantity a Kubernetes quantity (``100Mi``) or a percentage of the signal's capacity
      (``10%``; ``0%`` and ``100%`` are ignored). Quantities must be positive, percentages in 0–100.
    - ``--eviction-soft-grace-period``: ``<signal>=<duration>`` (Go durations: ``90s``, ``1m30s``);
      every soft threshold needs one — a startup error otherwise.
    - ``--eviction-minimum-reclaim``: ``<signal>=<quantity or percentage>``, applied to the hard and
      soft thresholds of that signal.
    - ``--eviction-max-pod-grace-period``: seconds (>= 0), the cap on a pod's grace period when a
      soft threshold evicts it; 0 kills at once.
    - ``--eviction-pressure-transition-period``: a Go duration (> 0, default ``5m``).

    When ``--eviction-hard`` is not given (``hard`` None) the default is ``memory.available<100Mi``
    (``DEFAULT_HARD``); given — even empty — it replaces the defaults entirely, as in Kubernetes.
    """
    ignored: list[str] = []
    hard_list, _ = _parse_statements(DEFAULT_HARD if hard is None else hard, "--eviction-hard", ignored)
    soft_list, soft_signals = _parse_statements(soft, "--eviction-soft", ignored)
    graces = {s: parse_duration(v, f"--eviction-soft-grace-period {s}")
              for s, v in _pairs(soft_grace_period, "=", "--eviction-soft-grace-period").items()}
    for signal, seconds in graces.items():
        if seconds < 0:
            raise ThresholdError(f"invalid eviction grace period specified: {signal}={seconds:g}s, "
                                 f"must be a positive value")
    reclaims = {s: _parse_min_reclaim(s, v)
                for s, v in _pairs(minimum_reclaim, "=", "--eviction-minimum-reclaim").items()}
    for signal in soft_signals:
        if signal not in graces:
            raise ThresholdError(f"grace period must be specified for the soft eviction threshold {signal} "
                                 f"(--eviction-soft-grace-period={signal}=<duration>)")
    soft_list = [Threshold(t.signal, t.value, t.operator, graces[t.signal]) for t in soft_list]
    thresholds = tuple(Threshold(t.signal, t.value, t.operator, t.grace_period, reclaims.get(t.signal))
                       for t in hard_list + soft_list)
    if max_pod_grace_period < 0:
        raise ThresholdError(f"--eviction-max-pod-grace-period must be >= 0 seconds, got {max_pod_grace_period}")
    transition = parse_duration(pressure_transition_period, "--eviction-pressure-transition-period")
    if transition <= 0:
        raise ThresholdError(f"--eviction-pressure-transition-period must be greater than 0, "
                             f"got {pressure_transition_period!r}")
    if monitoring_interval <= 0:
        raise ThresholdError(f"--eviction-monitoring-interval must be greater than 0, got {monitoring_interval:g}")
    for signal in set(graces) | set(reclaims):
        if signal not in SIMULATED_SIGNALS:
            ignored.append(f"{signal} (grace period / minimum reclaim)")
    return EvictionConfig(thresholds, max_pod_grace_period, transition, monitoring_interval, tuple(ignored))


# ------------------------------------------------------------ statements


def _pairs(text: str, separator: str, flag: str) -> dict[str, str]:
    """``k<sep>v,k2<sep>v2`` as Kubernetes' map flags read it (the last of a repeated key wins)."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition(separator)
        key, value = key.strip(), value.strip()
        if not sep or not key or not value:
            raise ThresholdError(f"invalid {flag} statement {item.strip()!r}: want signal{separator}value, "
                                 f"e.g. {MEMORY_AVAILABLE}{separator}"
                                 f"{'100Mi' if separator == '<' else '1m30s'}")
        if key not in SIGNAL_RESOURCES:
            raise ThresholdError(f"unsupported eviction signal {key!r} in {flag} "
                                 f"(known: {', '.join(SIGNAL_RESOURCES)})")
        out[key] = value
    return out


def _parse_statements(text: str, flag: str, ignored: list[str]) -> tuple[list[Threshold], list[str]]:
    """Thresholds for the simulated signals, and every signal named (for the grace-period check)."""
    out: list[Threshold] = []
    signals: list[str] = []
    for signal, value in _pairs(text, "<", flag).items():
        parsed = _parse_value(signal, value)
        if parsed is None:
            continue  # 0% or 100%: ignored, as in Kubernetes
        signals.append(signal)
        if signal not in SIMULATED_SIGNALS:
            ignored.append(f"{signal}<{value}")
            continue
        out.append(Threshold(signal, parsed))
    return out, signals


def _parse_value(signal: str, text: str) -> ThresholdValue | None:
    if text.endswith("%"):
        if text in ("0%", "100%"):
            return None
        pct = _parse_percent(signal, text, "threshold")
        if pct < 0:
            raise ThresholdError(f"eviction percentage threshold {signal} must be >= 0%: {text}")
        if pct > 1:
            raise ThresholdError(f"eviction percentage threshold {signal} must be <= 100%: {text}")
        return ThresholdValue(percentage=pct)
    q = _parse_quantity(signal, text, "threshold")
    if q.sign() <= 0:
        raise ThresholdError(f"eviction threshold {signal} must be positive: {text}")
    return ThresholdValue(quantity=q)


def _parse_min_reclaim(signal: str, text: str) -> ThresholdValue:
    if text.endswith("%"):
        pct = _parse_percent(signal, text, "minimum reclaim")
        if pct <= 0:
            raise ThresholdError(f"eviction percentage minimum reclaim {signal} must be positive: {text}")
        return ThresholdValue(percentage=pct)
    q = _parse_quantity(signal, text, "minimum reclaim")
    if q.sign() < 0:
        raise ThresholdError(f"negative eviction minimum reclaim specified for {signal}: {text}")
    return ThresholdValue(quantity=q)


def _parse_percent(signal: str, text: str, what: str) -> Fraction:
    try:
        return Fraction(Decimal(text[:-1].strip())) / 100
    except (InvalidOperation, ValueError):
        raise ThresholdError(f"invalid eviction {what} for {signal}: {text!r} is not a percentage") from None


def _parse_quantity(signal: str, text: str, what: str) -> Quantity:
    try:
        return parse_quantity(text)
    except QuantityError as exc:
        raise ThresholdError(f"invalid eviction {what} for {signal}: {text!r}: {exc}") from None


def _percent_text(fraction: Fraction) -> str:
    value = fraction * 100
    if value.denominator == 1:
        return str(value.numerator)
    return str((Decimal(value.numerator) / Decimal(value.denominator)).normalize())


# ------------------------------------------------------------ durations


def parse_duration(text: str, what: str = "duration") -> float:
    """Go's time.ParseDuration (``1m30s``, ``90s``, ``1.5h``, ``-2s``, ``0``), in seconds."""
    try:
        return timeutil.parse_duration(text)
    except ValueError:
        raise ThresholdError(f"invalid {what} {text!r}: want a duration like 90s, 1m30s or 5m") from None
